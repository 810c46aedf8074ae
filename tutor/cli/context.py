"""Shared by every verb: exit codes, the context (settings and flags), output helpers, finding a lesson's step, writing files."""

from __future__ import annotations

import argparse
import difflib
import json
import math
import signal
import sys
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OK, FAILED, BAD_INPUT, CANCELLED = 0, 1, 2, 130


class UsageError(Exception):
    """Bad input from the user: printed as one message, exit 2."""


@dataclass
class Context:
    lessons_dirs: list[Path] = field(default_factory=list)  # settings.toml's, then --lessons-dir's
    data_dir: Path | None = None
    device: str | None = None
    cli_lessons_dirs: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a settings file that was ignored, a missing dir


def eprint(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def rich_console(stderr: bool = False):
    # Made per call so it writes to the current sys.stdout (pytest's capsys swaps it).
    # rich turns colour off by itself for NO_COLOR and for output that is not a terminal.
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Rich exits 1 when the reader goes away (`gpututor run | head -1`); raised as what it is,
            # main() stops quietly with 141, as the --json output does.
            self.quiet = True
            raise BrokenPipeError

    return _Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=True)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold a ctrl-c until the block ends, then raise it. A KeyboardInterrupt inside `import torch`
    can leave numpy or torch half made: a later import then fails oddly, or some library's
    except-clause swallows it and the run goes on as if nothing was pressed."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield  # signals reach the main thread only; one started with ctrl-c ignored (nohup, `&`) keeps ignoring it
        return
    pressed: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if pressed:
        raise KeyboardInterrupt


def json_safe(value: Any) -> Any:
    """Strict JSON for other tools: NaN/inf become null, tuples lists, unknown objects strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def print_json(obj: Any) -> None:
    print(json.dumps(json_safe(obj), allow_nan=False), flush=True)


def closest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_lesson_dirs(ctx: Context) -> None:
    for d in ctx.cli_lessons_dirs:
        if not d.is_dir():
            raise UsageError(f"--lessons-dir {d}: no such directory")


def pack_dirs(names: list[str], files: list[Path]) -> list[Path]:
    """Where a folder pack's experiments.py may sit: each folder named, and each lesson's folder."""
    return [*(Path(n) for n in names if Path(n).is_dir()), *(f.parent for f in files)]


def activate_packs(dirs: Iterable[Path]) -> list[Any]:
    """Register the experiments of the lesson packs in these directories (and installed ones).

    Returns the problems as LessonIssues; commands that do not report them as errors warn.
    """
    from tutor.course.catalog import activate_packs
    from tutor.course.lesson import LessonIssue

    _, problems = activate_packs(list(dict.fromkeys(dirs)))
    return [LessonIssue(str(p.path), p.line, 1, p.message) for p in problems]


def find_step(
    ctx: Context, lesson_id: str, step_id: str, kinds: tuple[type, ...], what: str, unfit: str
) -> tuple[Any, Any]:
    """(lesson, step) for `check` and `exercise`, or raise BadInput naming what is there."""
    from tutor.course.catalog import discover

    catalog = discover(ctx.lessons_dirs)
    try:
        lesson = catalog.get(lesson_id).lesson
    except KeyError:
        ids = [item.lesson.id for item in catalog.lessons]
        message = f"unknown lesson {lesson_id!r}{closest(lesson_id, ids)}; available: {', '.join(ids) or 'none'}"
        broken = [str(p) for p, _ in catalog.broken]
        if broken:
            message += f" (these lesson files failed to load: {', '.join(broken)}; see `gpututor lint`)"
        raise BadInput(message) from None
    fitting = [s.id for s in lesson.steps if isinstance(s, kinds)]
    listed = f"{what}: {', '.join(fitting) or 'none'}"
    try:
        step = lesson.step(step_id)
    except KeyError:
        raise BadInput(f"lesson {lesson.id!r} has no step {step_id!r}{closest(step_id, fitting)}; {listed}") from None
    if not isinstance(step, kinds):
        raise BadInput(f"step {step.id!r} of {lesson.id!r} is a {step.kind} step, {unfit}; {listed}")
    return lesson, step


class BadInput(Exception):
    pass


def bad(args: argparse.Namespace, command: str, message: str) -> int:
    if args.json:
        print_json({"error": message})
    eprint(f"gpututor {command}: {message}")
    return BAD_INPUT


def write_file(name: str, text: str, example: str, *, overwrite: bool = True) -> Path:
    """Write text to a file named on the command line, whole or not at all; a device or a pipe
    (/dev/stdout, a FIFO, `>(cmd)`) is written to, never replaced by a file."""
    given = Path(name).expanduser()
    out = given.resolve()
    if out.is_dir():
        raise UsageError(f"{name}: is a directory; name a file, e.g. {out / example}")
    if out.exists() and not overwrite:
        raise UsageError(f"{name} already exists; choose another name, or --force to overwrite it")
    if given.exists() and not given.is_file():
        try:
            with open(given, "w", encoding="utf-8") as stream:
                stream.write(text)
        except OSError as e:
            raise UsageError(f"{name}: cannot write it ({e.strerror or e})") from None
        return given
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)  # never a half-written file
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"{name}: cannot write it ({e.strerror or e})") from None
    return out
