"""The design ledger and `gpututor export`: a learner's choices and results, as JSON.

An instrument step names the ledger entries it feeds (`ledger: {final_mfu: outputs.mfu}`);
an entry reads the learner's last move, or aggregates over all of them ("min:",
"first:", "any:"...). The export adds every lesson's predictions, graded answers and
instrument moves, so an instructor can collect what a class decided and measured.
"""

from __future__ import annotations

import math
import time
from typing import Any

from tutor import __version__
from tutor.course.lesson import InstrumentStep, Lesson
from tutor.course.progress import Move, Progress
from tutor.instruments import Context

EXPORT_FORMAT = 1


def instrument_context(progress: Progress, device: Any = None) -> Context:
    """What instruments may use: this device's memory, and the learner's own measured runs.

    A stored run that does not make sense (an old or hand-edited database) is left out:
    the instrument then says there is no measurement yet, never shows a traceback."""
    ctx = Context()
    if device is not None:
        ctx.device_name = getattr(device, "name", None)
        if getattr(device, "kind", None) == "cpu":
            ctx.device_name = f"{ctx.device_name} (system RAM)"
            ctx.device_memory = _ram_bytes()
        else:
            ctx.device_memory = getattr(device, "total_memory", None)
    run = progress.latest_run(experiment="memory-ledger")
    if run is not None:
        try:
            from tutor.experiments.specs.memory_ledger import MemoryLedgerParams

            p = MemoryLedgerParams(**{k: v for k, v in run.params.items() if k in MemoryLedgerParams.model_fields})
            parameters = int(run.metrics["parameters"])
            per_sample = float(run.metrics["activation_bytes"]) / p.batch_size
            if 0 < parameters <= SANE_LIMIT and 0 <= per_sample <= SANE_LIMIT:  # not nan, inf, 1e400
                ctx.my_model = {
                    "label": f"your MLP ({p.layers} x {p.width} wide, measured)",
                    "parameters": parameters,
                    "activation_bytes_per_sample": per_sample,
                }
        except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError):  # ValidationError: ValueError
            pass
    run = progress.latest_run(experiment="pipeline-breakdown")
    if run is not None and isinstance(run.metrics, dict):
        metrics = {k: v for k, v in run.metrics.items() if _sane(v)}
        name = run.device.get("name") if isinstance(run.device, dict) else None
        ctx.my_pipeline = {**metrics, "device_name": name if _sane(name) else None}
    return ctx


SANE_LIMIT = 1e18  # no measurement here (bytes, FLOP/s, seconds) comes near it


def _sane(value: Any) -> bool:
    """A stored metric an instrument can show: a finite number in range, or a short text."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        try:
            return math.isfinite(float(value)) and abs(value) <= SANE_LIMIT
        except OverflowError:
            return False
    return isinstance(value, str) and len(value) <= 200


def _ram_bytes() -> int | None:
    import os

    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def ledger_value(expr: str, moves: list[Move]) -> Any:
    """Evaluate one ledger expression ('outputs.mfu', 'min:outputs.total_gb') over a step's moves."""
    aggregate, _, ref = expr.rpartition(":")
    kind, _, name = ref.partition(".")
    values = [(m.settings if kind == "settings" else m.outputs).get(name) for m in moves]
    present = [v for v in values if v is not None]
    if not present:
        return None
    if aggregate == "first":
        return _tidy(present[0])
    if aggregate == "min":
        return _tidy(min(present))
    if aggregate == "max":
        return _tidy(max(present))
    if aggregate == "any":
        return any(bool(v) for v in present)
    return _tidy(present[-1])


def _tidy(value: Any) -> Any:
    """0.27999999999999997 -> 0.28 (float noise off; 12 significant digits keep every byte count)."""
    return float(f"{value:.12g}") if isinstance(value, float) else value


def design_ledger(lesson: Lesson, progress: Progress) -> dict[str, Any]:
    """Every ledger entry the lesson's instrument steps declare (None where nothing was done yet)."""
    out: dict[str, Any] = {}
    for step in lesson.steps:
        if isinstance(step, InstrumentStep) and step.ledger:
            moves = progress.moves(lesson.id, step.id)
            for key, expr in step.ledger.items():
                out[key] = _entry(expr, moves, lesson, progress)
    return out


def _entry(expr: str, moves: list[Move], lesson: Lesson, progress: Progress) -> Any:
    """'prediction.STEP' is a locked prediction; 'run.STEP.METRIC' the latest run's metric; the rest
    reads the step's own moves."""
    kind, _, rest = expr.partition(".")
    if kind == "prediction":
        locked = progress.prediction(lesson.id, rest)
        return None if locked is None else (locked.value if locked.value is not None else locked.answer)
    if kind == "run":
        step_id, _, metric = rest.partition(".")
        run = progress.latest_run(lesson_id=lesson.id, step_id=step_id)
        return None if run is None else _tidy(run.metrics.get(metric))
    return ledger_value(expr, moves)


def lesson_record(lesson: Lesson, progress: Progress) -> dict[str, Any]:
    done = progress.completed_steps(lesson.id)
    predictions = {
        p.step_id: {"answer": p.answer, "value": p.value, "locked_at": _iso(p.locked_at)}
        for p in progress.predictions(lesson.id)
    }
    answers: dict[str, Any] = {}
    instruments: dict[str, Any] = {}
    for step in lesson.steps:
        graded = progress.answers(lesson.id, step.id)
        if graded:
            answers[step.id] = {
                "attempts": len(graded),
                "correct": any(a.correct for a in graded),
                "last_answer": graded[-1].answer,
            }
        aids = progress.aids(lesson.id, step.id)
        if aids.hints or aids.solution:  # help taken: hint tiers shown, the solution seen
            answers.setdefault(step.id, {}).update({"hints": aids.hints, "solution_shown": aids.solution})
        reviewed = progress.reviews(lesson.id, step.id)
        if reviewed:
            answers.setdefault(step.id, {})["reviews"] = [
                {"at": _iso(r.at), "answer": r.answer, "correct": r.correct} for r in reviewed
            ]
        if isinstance(step, InstrumentStep):
            moves = progress.moves(lesson.id, step.id)
            if moves:
                instruments[step.id] = {
                    "instrument": step.instrument,
                    "moves": len(moves),
                    "settings": moves[-1].settings,
                    "outputs": moves[-1].outputs,
                    "goal_reached": bool(step.goal and any(step.goal.reached(m.outputs) for m in moves)),
                    "history": [{"at": _iso(m.at), "settings": m.settings} for m in moves],
                }
    return {
        "id": lesson.id,
        "title": lesson.title,
        "steps": len(lesson.steps),
        "completed": [s.id for s in lesson.steps if s.id in done],
        "design_ledger": design_ledger(lesson, progress),
        "predictions": predictions,
        "answers": answers,
        "instruments": instruments,
    }


def export(lessons: list[Lesson], progress: Progress) -> dict[str, Any]:
    return {
        "format": EXPORT_FORMAT,
        "gpututor": __version__,
        "exported_at": _iso(time.time()),
        "lessons": [lesson_record(lesson, progress) for lesson in lessons],
    }


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))
