"""`gpututor run`: one experiment headless, its events as lines for people or JSON for scripts."""

from __future__ import annotations

import argparse
import math
import os
import textwrap
import time
from typing import Any

from tutor.cli.context import (
    BAD_INPUT,
    CANCELLED,
    FAILED,
    OK,
    Context,
    UsageError,
    activate_packs,
    closest,
    eprint,
    interrupts_deferred,
    print_json,
    rich_console,
)
from tutor.present import metric_value

STEP_LINES_PER_S = 4  # human `run` output: enough to watch, few enough to read


def parse_value(text: str) -> Any:
    """A --set value as a YAML 1.2 core scalar: int, float, bool, null or str.

    YAML 1.2 rather than PyYAML's 1.1 so that `amp=off` stays the string "off" and
    `lr=1e-3` is a float (YAML 1.1 reads them as False and a string).
    """
    t = text.strip()
    low = t.lower()
    if low in ("", "~", "null", "none"):
        return None
    if low == "true":
        return True
    if low == "false":
        return False
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    try:
        return int(t, 0) if low.startswith(("0x", "0o", "0b")) else int(t)
    except ValueError:
        pass
    special = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf, ".nan": math.nan}
    if low in special:
        return special[low]
    try:
        value = float(t)
    except ValueError:
        return t
    return value


def parse_sets(items: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UsageError(f"--set expects KEY=VALUE (e.g. --set epochs=1), got {item!r}")
        values[key] = parse_value(raw)
    return values


def _param_lines(exp: Any) -> list[str]:
    """'  epochs: int = 3  (description)' for each parameter of an experiment."""
    import typing

    out = []
    for name, f in exp.params.model_fields.items():
        if typing.get_origin(f.annotation) is typing.Literal:
            ann = " | ".join(repr(a) for a in typing.get_args(f.annotation))
        else:
            ann = getattr(f.annotation, "__name__", None) or str(f.annotation).replace("typing.", "")
        desc = f"  ({f.description})" if f.description else ""
        out.append(f"  {name}: {ann} = {f.default!r}{desc}")
    return out


def _experiments_text() -> str:
    from tutor import experiments

    lines = ["experiments (gpututor run NAME --set key=value; a bad --set lists the parameters in full):"]
    for name, exp in sorted(experiments.REGISTRY.items()):
        lines.append(f"  {name:22} {exp.title}")
        own = [
            f"{k}={'(unset)' if f.default is None else f.default}"
            for k, f in exp.params.model_fields.items()
            if k not in ("device", "seed")
        ]
        lines.append(
            textwrap.fill(
                " ".join(own) if own else "(no parameters but device and seed)",
                width=88,
                initial_indent=" " * 4,
                subsequent_indent=" " * 4,
                break_on_hyphens=False,
            )
        )
    lines.append("  every experiment also takes device (cpu, cuda, cuda:1, mps) and seed (0)")
    return "\n".join(lines)


def _experiments_json() -> dict[str, Any]:
    """{name: {title, params: {name: {default, description}}, metrics: {name: {label, unit, description}}}}:
    what a lesson's `params` may set and its `compare` may name, with the unit the screen shows."""
    from tutor import experiments
    from tutor.cli.context import json_safe

    return {
        name: {
            "title": exp.title,
            "params": {
                k: {"default": json_safe(f.default), "description": f.description or ""}
                for k, f in exp.params.model_fields.items()
            },
            "metrics": {
                # exp.metric(k): the declared Metric, typed as one (`metrics` is typed Metric | str
                # because __post_init__ accepts a string and makes it one)
                k: {"label": m.label, "unit": m.unit, "description": m.description}
                for k, m in ((k, exp.metric(k)) for k in exp.metrics)
            },
        }
        for name, exp in sorted(experiments.REGISTRY.items())
    }


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    from pydantic import ValidationError

    from tutor import experiments

    def bad(message: str, details: str = "") -> int:
        if args.json:
            print_json({"event": "error", "message": message})
        eprint(f"gpututor run: {message}")
        if details:
            eprint(details)
        return BAD_INPUT

    for issue in activate_packs(ctx.lessons_dirs):
        eprint(f"warning: lesson pack not loaded: {issue}")
    target = None
    if getattr(args, "record", None):
        try:
            target = run_step_target(ctx, args.record, args.name)
        except UsageError as e:
            return bad(str(e))
        args.name = target[1].experiment
    if not args.name:  # the list of experiments, as `instrument` lists the instruments: a success
        if args.json:
            print_json(_experiments_json())
        else:
            print(_experiments_text())
        return OK
    try:
        exp = experiments.get(args.name)
    except experiments.UnknownExperiment:
        names = sorted(experiments.REGISTRY)
        return bad(f"unknown experiment {args.name!r}{closest(args.name, names)}; available: {', '.join(names)}")
    try:
        values = parse_sets(args.sets)
    except UsageError as e:
        return bad(str(e))
    if target is not None:  # as the TUI runs the step: its own settings, repeated until its predictions are decided
        lesson, step = target
        from tutor.course.progress import Progress
        from tutor.course.session import LessonSession

        with Progress() as progress:
            decide = LessonSession(lesson, progress).decide_params(step)
        values = {**step.start_params(), **decide, **values}
    try:
        params = exp.make_params(values)
    except ValidationError as e:
        return bad(_params_problem(exp, e), f"parameters of {exp.name}:\n" + "\n".join(_param_lines(exp)))

    from tutor import errors
    from tutor.experiments import devices

    emit = _JsonEvents() if args.json else _HumanEvents(exp)
    try:
        with interrupts_deferred():  # torch and numpy: made whole, or not at all
            device = devices.resolve(params.device or ctx.device)
    except devices.DeviceError as e:
        return bad(str(e))
    except KeyboardInterrupt:
        emit.cancelled()
        return CANCELLED
    from tutor.experiments.training import checkpoint_target

    for key in exp.file_params():  # a path that cannot be written is bad input, not a failed run
        if getattr(params, key, None):
            try:
                checkpoint_target(str(getattr(params, key)), key)
            except ValueError as e:
                return bad(str(e))
    if getattr(args, "no_wait", False):
        from tutor.measurement import slots

        slots.choose_run_now()  # in line, the run goes at once, its timing marked shared
    return _run_stream(exp.name, values, params.model_dump(), device, ctx, emit, errors, target)


def _params_problem(exp: Any, e: Any) -> str:
    names = list(exp.params.model_fields)
    problems = []
    for err in e.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        if err["type"] == "extra_forbidden":
            problems.append(f"{exp.name} has no parameter {key!r}{closest(key, names)}; it takes: {', '.join(names)}")
        elif not err["loc"]:  # a check across parameters (batch_size a multiple of micro_batches)
            problems.append(f"bad values: {err['msg'].removeprefix('Value error, ')}")
        else:
            problems.append(
                f"bad value for {key!r}: {err['msg'].removeprefix('Value error, ')} (got {err.get('input')!r})"
            )
    return "; ".join(problems)


def run_step_target(ctx: Context, given: str, name: str | None) -> tuple[Any, Any]:
    """(lesson, run step) named by --record LESSON:STEP; its experiment must be NAME, where given."""
    from tutor.cli.context import BadInput, find_step
    from tutor.course.lesson import RunStep

    lesson_id, sep, step_id = given.partition(":")
    if not sep or not lesson_id or not step_id:
        raise UsageError(f"--record expects LESSON:STEP (e.g. --record gpu-training:run-1), got {given!r}")
    try:
        lesson, step = find_step(ctx, lesson_id, step_id, (RunStep,), "run steps", "not a run step")
    except BadInput as e:
        raise UsageError(str(e)) from None
    if name and name != step.experiment:
        raise UsageError(
            f"step {step.id!r} of {lesson.id!r} runs {step.experiment!r}, not {name!r}: "
            f"gpututor run {step.experiment} --record {given}"
        )
    return lesson, step


def _run_stream(
    name: str,
    values: dict,
    params: dict,
    device: Any,
    ctx: Context,
    emit: Any,
    errors: Any,
    target: tuple[Any, Any] | None = None,
) -> int:
    from tutor import experiments
    from tutor.experiments.events import Finished

    metrics: dict[str, Any] | None = None
    gen = None
    start = time.monotonic()
    try:
        with interrupts_deferred():  # the experiment's module and what it imports
            gen = experiments.start(name, values, ctx.device)
        for event in gen:
            emit(event)
            if isinstance(event, Finished):
                metrics = dict(event.metrics)
    except (KeyboardInterrupt, BrokenPipeError) as stop:
        _close(gen)  # runs the experiment's cleanup; like the TUI, a cancelled run leaves no record
        if isinstance(stop, BrokenPipeError):
            raise
        emit.cancelled()
        return CANCELLED
    except Exception as exc:  # noqa: BLE001 - a failed run is reported, never a traceback
        _close(gen)
        if isinstance(exc, ModuleNotFoundError) and (exc.name or "").startswith("tutor.experiments."):
            message = f"experiment {name!r} is not available in this installation ({exc.name} is missing)"
        else:
            message = errors.describe(exc)
        if os.environ.get("GPUTUTOR_DEBUG", "").strip() not in ("", "0"):
            import traceback

            traceback.print_exc()
        _record(name, params, device, {}, "failed", message, target)
        emit.error(message)
        return FAILED
    if metrics is None:
        message = f"experiment {name!r} ended without reporting its results (no Finished event)"
        _record(name, params, device, {}, "failed", message, target)
        emit.error(message)
        return FAILED
    reveals = _record(name, params, device, metrics, "finished", None, target)
    emit.done(metrics, time.monotonic() - start)
    if target is not None:
        emit.revealed(target[0].id, target[1], reveals)
    return OK


def _close(gen: Any) -> None:
    try:
        if gen is not None:
            gen.close()
    except Exception:  # noqa: BLE001 - closing a generator that already failed
        pass


def _record(
    name: str,
    params: dict,
    device: Any,
    metrics: dict,
    status: str,
    error: str | None,
    target: tuple[Any, Any] | None = None,
) -> list[Any]:
    """Keep the run in the progress store; a store problem is a warning, not a failed run. With a
    lesson's run step (`--record`), recorded against it as the TUI records it: a finished run
    completes the step; returned, the predictions it reveals (Reveal or Pending)."""
    try:
        from tutor.course import machine
        from tutor.course.progress import Progress
        from tutor.course.session import LessonSession, RunOutcome

        with Progress() as progress:
            if target is not None:
                lesson, step = target
                outcome = RunOutcome(name, params, status, metrics, device.as_dict(), error)
                reveals = LessonSession(lesson, progress).record_run(step, outcome)
            else:
                reveals = []
                progress.record_run(
                    experiment=name,
                    params=params,
                    device={**device.as_dict(), **machine.stamp()},
                    metrics=metrics,
                    status=status,
                    error=error,
                )
            if progress.warning:
                eprint(f"warning: {progress.warning}")
            return reveals
    except Exception as e:  # noqa: BLE001
        eprint(f"warning: the run was not recorded in your progress ({type(e).__name__}: {e})")
        return []


VERDICT_WORDS = {
    "hit": "on target",
    "miss": "off target",
    "undecided": "can't tell yet",
    "unmeasured": "not scored",
}


def reveal_facts(revealed: Any) -> dict[str, Any]:
    """A Reveal or Pending as values: {"step", "verdict", "summary"}; verdict as a bundle says it."""
    from tutor.classroom.collect import verdict_of
    from tutor.course.session import Pending

    if isinstance(revealed, Pending):
        return {"step": revealed.step.id if revealed.step else None, "verdict": "unmeasured", "summary": revealed.text}
    judged = revealed.judge()
    summary = judged.score.summary + (f"; {judged.not_scored}" if judged.not_scored else "")
    return {"step": revealed.step.id, "verdict": verdict_of(judged), "summary": summary}


def reveal_line(revealed: Any) -> str:
    facts = reveal_facts(revealed)
    where = f"{facts['step']}: " if facts["step"] else ""
    if facts["verdict"] == "unmeasured" and not hasattr(revealed, "judge"):
        return f"{where}{facts['summary']}"
    return f"{where}{VERDICT_WORDS[facts['verdict']]}: {facts['summary']}"


def _waiting_changed(event: Any, last: Any) -> bool:
    """A place in a class's line is said when it changes, not every look (five a second)."""
    return last is None or (event.waiting_ahead, event.running, event.choice) != (
        last.waiting_ahead,
        last.running,
        last.choice,
    )


class _JsonEvents:
    """--json: one object per event line; the last is finished, error or cancelled. A waiting
    event (a class's line) only when the place changes."""

    def __init__(self) -> None:
        self.last_waiting: Any = None

    def __call__(self, event: Any) -> None:
        from tutor.experiments.events import Waiting, to_json

        if isinstance(event, Waiting):
            if not _waiting_changed(event, self.last_waiting):
                return
            self.last_waiting = event
        print_json(to_json(event))

    def done(self, metrics: dict, seconds: float) -> None:
        pass  # the experiment's own Finished event was the last line

    def error(self, message: str) -> None:
        print_json({"event": "error", "message": message})
        eprint(f"gpututor run: {message}")

    def cancelled(self) -> None:
        print_json({"event": "cancelled", "message": "cancelled"})
        eprint("cancelled")

    def revealed(self, lesson_id: str, step: Any, reveals: list[Any]) -> None:
        print_json(
            {"event": "recorded", "lesson": lesson_id, "step": step.id, "reveals": [reveal_facts(r) for r in reveals]}
        )


class _HumanEvents:
    """Readable lines: every event but Step, which is throttled to a few lines a second."""

    def __init__(self, exp: Any) -> None:
        self.exp = exp  # its declared metrics label the results
        self.console = rich_console()
        self.last_step = -math.inf
        self.pending: Any = None  # the newest Step not printed yet
        self.last_waiting: Any = None  # the place in a class's line last printed

    def __call__(self, event: Any) -> None:
        from rich.markup import escape
        from rich.table import Table as RichTable
        from rich.text import Text

        from tutor.experiments import events as ev

        c = self.console
        if isinstance(event, ev.Step):
            now = time.monotonic()
            if now - self.last_step >= 1 / STEP_LINES_PER_S or (event.total and event.step >= event.total):
                self.last_step = now
                self.pending = None
                self._step(event)
            else:
                self.pending = event
            return
        if self.pending is not None:  # show where training got to before the epoch summary
            self._step(self.pending)
            self.pending = None
        if isinstance(event, ev.Waiting):
            self._waiting(event)
            return
        if isinstance(event, ev.Started):
            c.print(
                f"[bold]{escape(event.experiment)}[/] on [bold]{escape(event.device)}[/] ({escape(event.device_name)})"
            )
            if event.dataset:
                c.print(f"data: {escape(event.dataset)}")
            if event.detail:
                c.print(escape(event.detail))
        elif isinstance(event, ev.Epoch):
            label = f"[{event.label}] " if event.label else ""
            c.print(
                f"{escape(label)}[bold]epoch {event.epoch}/{event.epochs}[/]  "
                f"train loss {event.train_loss:.4f}  test acc {event.test_acc * 100:.2f}%  "
                f"{event.seconds:.2f} s  {event.samples_per_s:,.0f} samples/s"
            )
        elif isinstance(event, ev.Note):
            style = {"warning": "yellow", "result": "bold"}.get(event.level, "")
            prefix = "warning: " if event.level == "warning" else ""
            c.print(f"{prefix}{event.text}", style=style or None, markup=False, soft_wrap=event.level == "figure")
        elif isinstance(event, ev.Table):
            table = RichTable(title=Text(event.title), title_justify="left")
            for col in event.columns:
                table.add_column(str(col), overflow="fold")
            for row in event.rows:
                table.add_row(*(Text(str(x)) for x in row))  # values, not markup: "[enforce fail ...]"
            c.print(table)
        elif isinstance(event, ev.Finished):
            pass  # printed by done(), after the run is recorded

    def _waiting(self, w: Any) -> None:
        """The place in a class's line when it changes; at a minute, the choice (waiting goes on)."""
        if not _waiting_changed(w, self.last_waiting):
            return
        offered = w.choice and (self.last_waiting is None or not self.last_waiting.choice)
        self.last_waiting = w
        self.console.print(w.text(), markup=False, highlight=False)
        if offered:
            self.console.print(
                f"Waited a minute for {w.device_words}: still waiting (ctrl+c cancels). To run now instead, "
                f"with the timing shared and not graded: gpututor run {self.exp.name} --no-wait",
                style="yellow",
                markup=False,
            )

    def _step(self, s: Any) -> None:
        label = f"[{s.label}] " if s.label else ""
        total = f"/{s.total}" if s.total else ""
        # Progress without a loss or a rate (a timing or memory experiment) shows neither.
        loss = f"  loss {s.loss:.4f}" if math.isfinite(s.loss) else ""
        rate = f"  {s.samples_per_s:,.0f} samples/s" if s.samples_per_s > 0 else ""
        self.console.print(f"{label}step {s.step}{total}{loss}  {s.seconds:.2f} s{rate}", markup=False)

    def done(self, metrics: dict, seconds: float) -> None:
        from rich.table import Table as RichTable
        from rich.text import Text

        # Words and units, as the TUI shows them: the declared metrics in the spec's order, then
        # any the run adds. Their names (a lesson's `compare:` keys) are in the --json output.
        table = RichTable(
            title=f"measured (run took {seconds:.1f} s)",
            title_justify="left",
            caption=f"metric names, for a lesson's compare: gpututor run {self.exp.name} --json",
            caption_justify="left",
            caption_style="dim",
        )
        table.add_column("what", no_wrap=True)
        table.add_column("value", overflow="fold")
        for k in [*(k for k in self.exp.metrics if k in metrics), *(k for k in metrics if k not in self.exp.metrics)]:
            declared = self.exp.metric(k)
            table.add_row(Text(declared.label), Text(metric_value(declared, metrics[k])))
        self.console.print(table)

    def error(self, message: str) -> None:
        eprint(f"gpututor run: {message}")

    def cancelled(self) -> None:
        eprint("cancelled")

    def revealed(self, lesson_id: str, step: Any, reveals: list[Any]) -> None:
        self.console.print(f"recorded as step {step.id!r} of {lesson_id!r}: the step is complete", markup=False)
        for r in reveals:
            self.console.print(f"  your prediction {reveal_line(r)}", markup=False)
