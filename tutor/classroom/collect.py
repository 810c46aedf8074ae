"""Collect one learner's results from the progress store into a bundle (`gpututor submit`).

Every verdict in it is the one the tutor shows: a prediction's is its reveal's (`LessonSession.reveal`
then `Reveal.judge`), its signed error the prediction profile's (`profile.signed_error`), a check's
attempts and an exercise's gradings as they were recorded at the time. The machine is read from the
latest stored run's device record and the calibration cache, never by importing torch.
"""

from __future__ import annotations

import datetime
import math
import platform
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tutor import __version__, checks
from tutor.classroom.bundle import (
    AidsRecord,
    Attempt,
    Bundle,
    CheckRecord,
    ExerciseRecord,
    Grading,
    LessonRecord,
    MachineRecord,
    Measured,
    MovesRecord,
    PredictionRecord,
    RequirementVerdict,
    Verdict,
    content_hash,
)
from tutor.course import machine
from tutor.course.lesson import CheckStep, ExerciseStep, InstrumentStep, Lesson, PredictStep
from tutor.course.profile import NotComparable, signed_error
from tutor.course.progress import Prediction, Progress, RunRecord
from tutor.course.session import Judged, LessonSession, Pending, Reveal
from tutor.measurement import calibration, method


def iso(at: float) -> str:
    """Epoch seconds as local ISO time with its offset, to the second."""
    return datetime.datetime.fromtimestamp(at).astimezone().isoformat(timespec="seconds")


def build(
    lessons: Iterable[tuple[Lesson, Path]],
    progress: Progress,
    learner: str,
    *,
    now: float | None = None,
) -> Bundle:
    """The sealed bundle of `learner`'s results in `lessons` (each with the file it was loaded from)."""
    records = [lesson_record(lesson, path, progress) for lesson, path in lessons]
    return Bundle(
        gpututor=__version__,
        learner=learner,
        submitted_at=iso(datetime.datetime.now().timestamp() if now is None else now),
        machine=machine_record(progress),
        lessons=records,
    ).sealed()


def lesson_record(lesson: Lesson, path: Path, progress: Progress) -> LessonRecord:
    session = LessonSession(lesson, progress)
    done = session.completed()
    predictions = []
    for locked in sorted(progress.predictions(lesson.id), key=lambda p: lesson_order(lesson, p.step_id)):
        step = _step(lesson, locked.step_id)
        if isinstance(step, PredictStep):
            predictions.append(prediction_record(session, step, locked))
    checks_, exercises, aids, instruments = [], [], [], []
    for step in lesson.steps:
        if isinstance(step, CheckStep) and (record := check_record(progress, lesson.id, step.id)) is not None:
            checks_.append(record)
        if isinstance(step, ExerciseStep) and (done_ex := exercise_record(progress, lesson.id, step.id)) is not None:
            exercises.append(done_ex)
        if isinstance(step, InstrumentStep) and (moved := moves_record(progress, lesson.id, step)) is not None:
            instruments.append(moved)
        taken = progress.aids(lesson.id, step.id)
        if taken.hints or taken.solution:
            aids.append(AidsRecord(step=step.id, hints=taken.hints, solution=taken.solution))
    return LessonRecord(
        id=lesson.id,
        title=lesson.title,
        content_hash=content_hash(path),
        steps=len(lesson.steps),
        completed=[s.id for s in lesson.steps if s.id in done],
        predictions=predictions,
        checks=checks_,
        exercises=exercises,
        aids=aids,
        instruments=instruments,
    )


def lesson_order(lesson: Lesson, step_id: str) -> int:
    try:
        return lesson.index(step_id)
    except StopIteration:
        return len(lesson.steps)


def _step(lesson: Lesson, step_id: str) -> Any:
    try:
        return lesson.step(step_id)
    except KeyError:
        return None  # a step the lesson no longer has


# ---------------------------------------------------------------- predictions


def prediction_record(session: LessonSession, step: PredictStep, locked: Prediction) -> PredictionRecord:
    """A locked prediction with what its reveal says: measured value, interval, verdict, signed error."""
    base: dict[str, Any] = {
        "step": step.id,
        "concept": step.concept,
        "answer": locked.answer,
        "value": _finite(locked.value),
        "locked_at": iso(locked.locked_at),
    }
    revealed = session.reveal(step) if step.compare else None
    if not isinstance(revealed, Reveal):
        said = revealed.text if isinstance(revealed, Pending) else "its step compares no measurement"
        return PredictionRecord(**base, feedback=said)
    evidence, metric = revealed.evidence, step.compare or ""
    value = evidence.metrics.get(metric)
    interval = checks.interval_of(evidence.metrics, metric)
    run = evidence.run
    measured = Measured(
        value=_stored(value),
        low=interval[0] if interval else None,
        high=interval[1] if interval else None,
        unit=evidence.unit(metric),
        run_at=iso(run.at) if run is not None and run.at else None,
        method=method.method_of(run.device) if run is not None else None,
        device=describe_device(run.device) if run is not None else None,
    )
    if _stored(value) is None:  # the run did not measure it here (its notes say why)
        return PredictionRecord(**base, measured=measured, feedback="the run did not measure it on this machine")
    judged = revealed.judge()
    feedback = judged.score.summary + (f"; {judged.not_scored}" if judged.not_scored else "")
    verdict = verdict_of(judged)
    log_error = None
    if verdict != "unmeasured":
        try:
            log_error = signed_error(step, locked.answer, value, interval, evidence.guard(metric)).log_error
        except NotComparable:
            pass
    return PredictionRecord(**base, measured=measured, verdict=verdict, log_error=log_error, feedback=feedback)


def verdict_of(judged: Judged) -> Verdict:
    """The reveal's verdict in a bundle's words: undecided where the run's interval cannot tell;
    unmeasured where the run was made at other settings than the prediction's."""
    if judged.score.undecided:
        return "undecided"
    if judged.not_scored:
        return "unmeasured"
    return "hit" if judged.hit else "miss"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _stored(value: Any) -> float | str | bool | None:
    """A metric as a bundle holds it: a finite number, a text or a flag (NaN: nothing measured)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    return str(value)


# ---------------------------------------------------------------- checks, exercises, instruments


def check_record(progress: Progress, lesson_id: str, step_id: str) -> CheckRecord | None:
    answers = progress.answers(lesson_id, step_id)
    if not answers:
        return None
    attempts = [
        Attempt(answer=a.answer, correct=a.correct, feedback=a.feedback, at=iso(a.at), misconception=a.misconception)
        for a in answers
    ]
    return CheckRecord(
        step=step_id, attempts=attempts, correct=any(a.correct for a in answers), first_try=answers[0].correct
    )


def exercise_record(progress: Progress, lesson_id: str, step_id: str) -> ExerciseRecord | None:
    """Every graded run; a progress file from before gradings were kept has only the verdicts
    (no requirements, no code)."""
    stored = progress.gradings(lesson_id, step_id)
    if stored:
        gradings = [
            Grading(
                at=iso(g.at),
                passed=g.passed,
                summary=g.summary,
                requirements=[_requirement(r) for r in g.requirements if isinstance(r, dict)],
            )
            for g in stored
        ]
        return ExerciseRecord(step=step_id, gradings=gradings, passed=stored[-1].passed, code=stored[-1].code)
    older = [a for a in progress.answers(lesson_id, step_id) if a.answer == "(code)"]
    if not older:
        return None
    gradings = [Grading(at=iso(a.at), passed=a.correct, summary=a.feedback, requirements=[]) for a in older]
    return ExerciseRecord(step=step_id, gradings=gradings, passed=older[-1].correct)


def _requirement(r: dict[str, Any]) -> RequirementVerdict:
    return RequirementVerdict(
        id=str(r.get("id", "")),
        title=str(r.get("title", "")),
        passed=bool(r.get("passed")),
        judged=bool(r.get("judged", True)),
        feedback=str(r.get("feedback") or ""),
    )


def moves_record(progress: Progress, lesson_id: str, step: InstrumentStep) -> MovesRecord | None:
    moves = progress.moves(lesson_id, step.id)
    if not moves:
        return None
    last = moves[-1]
    return MovesRecord(
        step=step.id,
        instrument=step.instrument,
        moves=len(moves),
        settings=last.settings,
        outputs=last.outputs,
        goal_reached=bool(step.goal and any(step.goal.reached(m.outputs) for m in moves)),
    )


# ---------------------------------------------------------------- the machine


def describe_device(device: dict[str, Any]) -> str:
    """One line for a stored run's device record, as `Device.describe` words it: `gpututor run`
    stores the device's fields, the TUI its Started event ({"device": "cuda:0", "name": ...})."""
    where = str(device.get("torch_device") or device.get("device") or device.get("kind") or "?")
    bits = []
    if isinstance(device.get("total_memory"), (int, float)) and device["total_memory"]:
        bits.append(f"{device['total_memory'] / 2**30:.1f} GiB")
    capability = device.get("capability")
    if isinstance(capability, (list, tuple)) and len(capability) == 2:
        bits.append(f"sm_{capability[0]}{capability[1]}")
    if device.get("threads"):
        bits.append(f"{device['threads']} training threads")
    if device.get("bf16"):
        bits.append("bf16")
    return f"{where}: {device.get('name') or 'unknown device'}" + (f" ({', '.join(bits)})" if bits else "")


def _kind(device: dict[str, Any]) -> str:
    return str(device.get("kind") or str(device.get("device") or device.get("torch_device") or "").split(":")[0])


def _cuda_of(torch_version: str) -> str | None:
    """The CUDA toolkit a torch wheel was built with, from its local version ("2.5.1+cu124": 12.4)."""
    found = re.search(r"\+cu(\d+)(\d)$", torch_version)
    return f"{found.group(1)}.{found.group(2)}" if found else None


def machine_record(progress: Progress) -> MachineRecord:
    """The machine of the latest finished run (where the learner's measurements were made); with no
    run yet, this host, and the device "none measured yet"."""
    here = machine.stamp()
    run: RunRecord | None = progress.latest_run()
    device = run.device if run is not None and isinstance(run.device, dict) else {}
    kind, name = _kind(device), str(device.get("name") or "")
    torch_version = str(device.get("torch_version") or here["torch_version"])
    calibrated = calibration.find_for(kind, name) if kind and name else None
    cuda = calibrated.cuda if calibrated is not None else (_cuda_of(torch_version) if kind == "cuda" else None)
    driver = calibrated.driver if calibrated is not None else None
    if driver is None and kind == "cuda" and device.get("host", here["host"]) == here["host"]:
        driver = calibration.driver_version()
    return MachineRecord(
        host=str(device.get("host") or platform.node()),
        device=describe_device(device) if device else "none measured yet",
        device_kind=kind or "none",
        torch=torch_version,
        cuda=cuda,
        driver=driver,
        calibrated=calibrated is not None,
        method=method.METHOD,
        mig=True if kind == "cuda" and "MIG" in name else None,
    )
