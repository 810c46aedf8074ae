"""`gpututor`: the TUI with no sub-command, and its headless twins for scripts and instructors.

Sub-commands: list, doctor, run, lint, check, exercise, instrument, export (see DESIGN.md,
"CLI contract").
Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 cancelled (Ctrl-C).

Only argparse and the standard library load at start-up, so `gpututor --help` is
instant: torch, rich, pydantic and the lesson loader are imported inside the handlers.
No traceback reaches the user unless GPUTUTOR_DEBUG=1.
"""

from __future__ import annotations

import argparse
import difflib
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor import __version__

OK, FAILED, BAD_INPUT, CANCELLED = 0, 1, 2, 130
NO_TTY_MESSAGE = (
    "gpututor's tutor needs an interactive terminal; "
    "try `gpututor list` or `gpututor run NAME` (see `gpututor --help`)."
)
STEP_LINES_PER_S = 4  # human `run` output: enough to watch, few enough to read


class UsageError(Exception):
    """Bad input from the user: printed as one message, exit 2."""


@dataclass
class Context:
    lessons_dirs: list[Path] = field(default_factory=list)  # settings.toml's, then --lessons-dir's
    data_dir: Path | None = None
    device: str | None = None
    cli_lessons_dirs: list[Path] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # a settings file that was ignored, a missing dir


# ---------------------------------------------------------------- output helpers


def _eprint(*parts: Any) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _console(stderr: bool = False):
    # Made per call so it writes to the current sys.stdout (pytest's capsys swaps it).
    # rich turns colour off by itself for NO_COLOR and for output that is not a terminal.
    from rich.console import Console

    return Console(file=sys.stderr if stderr else sys.stdout, highlight=False, soft_wrap=True)


def _json_safe(value: Any) -> Any:
    """Strict JSON for other tools: NaN/inf become null, tuples lists, unknown objects strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def _print_json(obj: Any) -> None:
    print(json.dumps(_json_safe(obj), allow_nan=False), flush=True)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.4g}"
        return f"{value:,.4f}".rstrip("0").rstrip(".") if abs(value) < 1000 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10000 else str(value)
    return str(value)


def _closest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---------------------------------------------------------------- argument parsing


def _add_globals(parser: argparse.ArgumentParser, prefix: str) -> None:
    """The global options, accepted before and after the sub-command (merged later)."""
    parser.add_argument(
        "--lessons-dir", dest=f"{prefix}lessons_dirs", action="append", default=[], metavar="DIR",
        help="also load lessons from DIR (repeatable; a lesson id found here overrides a built-in one)",
    )
    parser.add_argument(
        "--data-dir", dest=f"{prefix}data_dir", metavar="DIR",
        help="where MNIST lies (torchvision layout MNIST/raw); default $GPUTUTOR_DATA_DIR or the user cache",
    )
    parser.add_argument(
        "--device", dest=f"{prefix}device", metavar="D",
        help="train on D: auto (default), cpu, cuda, cuda:1, mps; default $GPUTUTOR_DEVICE or auto",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpututor",
        description="A terminal tutor that teaches PyTorch GPU training by predict-then-run. "
        "With no sub-command it opens the tutor (an interactive terminal UI): enter opens a "
        "lesson, r reviews the questions of lessons you finished, ? lists every key.",
        epilog="environment: GPUTUTOR_HOME (progress database and settings), GPUTUTOR_DATA_DIR "
        "(MNIST location), GPUTUTOR_DEVICE (as --device), GPUTUTOR_MEMORY_MB (memory each run may allocate), GPUTUTOR_THREADS (CPU threads training uses), NO_COLOR (plain output), GPUTUTOR_DEBUG=1 (show tracebacks). "
        "Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 cancelled.",
    )
    parser.add_argument("--version", action="version", version=f"gpututor {__version__}")
    _add_globals(parser, "g_")
    common = argparse.ArgumentParser(add_help=False)
    _add_globals(common, "s_")

    sub = parser.add_subparsers(dest="command", title="sub-commands", metavar="COMMAND")

    p = sub.add_parser("list", parents=[common], help="lessons with your progress, and broken lesson files",
                       description="List the lessons (id, title, steps, your progress) and any lesson "
                       "file that failed to load, with its errors.")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("doctor", parents=[common], help="devices, torch/CUDA versions, data source, paths",
                       description="Report what gpututor finds here: devices and their capabilities, "
                       "torch/CUDA/cuDNN versions, TF32 settings, the MNIST source and the paths it uses.")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("run", parents=[common], help="run one experiment headless",
                       description="Run one experiment without the TUI and stream what it measures. "
                       "Run it without NAME to list the experiments and their parameters.")
    p.add_argument("name", nargs="?", metavar="NAME", help="experiment name, e.g. train, crossover")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="set a parameter (repeatable), e.g. --set epochs=1 --set amp=bf16")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per event; the last is {\"event\": \"finished\", \"metrics\": {...}}")

    p = sub.add_parser("lint", parents=[common], help="validate lesson files (path:line:col: message)",
                       description="Validate lesson files; directories are searched for *.yaml and *.yml. "
                       "Exit 2 if any file has an error.")
    p.add_argument("paths", nargs="+", metavar="PATH")

    p = sub.add_parser("check", parents=[common], help="grade one answer to a check, as the TUI does",
                       description="Grade an answer to a lesson's check (or predict) step exactly as the "
                       "TUI does, with the metrics of your latest recorded run of its verify experiment.")
    p.add_argument("lesson", metavar="LESSON", help="lesson id, e.g. gpu-training")
    p.add_argument("check", metavar="CHECK", help="step id, e.g. check-3")
    p.add_argument("--answer", required=True, metavar="TEXT", help="the answer to grade ('-' reads stdin)")
    p.add_argument("--json", action="store_true",
                   help='print {"correct", "feedback", "missing", "matched_misconception", "score"}')

    p = sub.add_parser("exercise", parents=[common], help="run and grade a code exercise, as the TUI does",
                       description="Run a file as the answer to a lesson's exercise step, in a sandboxed "
                       "process, and check its requirements exactly as the TUI does. Exit 0 passed, 1 not.")
    p.add_argument("lesson", metavar="LESSON", help="lesson id, e.g. gpu-training-practice")
    p.add_argument("step", metavar="STEP", help="exercise step id, e.g. ex1-move-and-time")
    p.add_argument("--file", required=True, metavar="PATH", help="the program to run (solution.py)")
    p.add_argument("--json", action="store_true",
                   help='print {"passed", "summary", "requirements", "output", "traceback", ...}')

    p = sub.add_parser("instrument", parents=[common], help="compute an instrument's outputs, as the TUI shows them",
                       description="Compute what an instrument (an interactive calculator of a lesson) shows "
                       "for the given control values. Run it without NAME to list the instruments, their "
                       "controls and their outputs.")
    p.add_argument("name", nargs="?", metavar="NAME", help="instrument name, e.g. memory-ledger, pipeline")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="set a control (repeatable), e.g. --set optimizer=sgd --set precision=fp16")
    p.add_argument("--math", action="store_true", help="also print the formulas with the numbers in them")
    p.add_argument("--json", action="store_true",
                   help='print {"instrument", "settings", "outputs", "verdict", "level", "math", "reference", "notes"}')

    p = sub.add_parser("export", parents=[common], help="write your design ledger and progress as JSON",
                       description="Export, as one JSON object, each lesson's design ledger (the choices and "
                       "results its instruments record), your locked predictions, graded answers and "
                       "instrument moves. Default: every lesson, to standard output.")
    p.add_argument("lessons", nargs="*", metavar="LESSON", help="lesson ids (default: all)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")

    p = sub.add_parser("schema", parents=[common], help="print the JSON Schema of lesson files",
                       description="Print a JSON Schema (draft 2020-12) of the lesson format, generated from "
                       "the models the tutor validates with, for editor completion and validation. With the "
                       "YAML language server: # yaml-language-server: $schema=lesson.schema.json")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")

    p = sub.add_parser("new", parents=[common], help="write a new lesson file with one step of each kind",
                       description="Scaffold a lesson: one step of each kind (read, predict, run, check, "
                       "exercise, instrument), with comments, that lints clean. Edit it, then "
                       "`gpututor lint FILE` and `gpututor --lessons-dir DIR`.")
    p.add_argument("lesson_id", metavar="LESSON_ID", help="lowercase letters, digits and dashes, e.g. my-first-lesson")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: ./LESSON_ID.yaml)")
    p.add_argument("--title", help="the lesson's title (default: from the id)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = sub.add_parser("lesson", parents=[common], help="test lessons headlessly (lesson test PATH...)",
                       description="Commands for lesson authors.")
    lesson_sub = p.add_subparsers(dest="lesson_command", metavar="COMMAND", required=True)
    p = lesson_sub.add_parser("test", parents=[common], help="play lessons headlessly: every run, check and exercise",
                              description="Play each lesson without the TUI: lint it, run every run step's "
                              "experiment (small parameters unless --full), grade every check's reference and "
                              "listed answers (with its verify run's metrics), run every exercise's solution "
                              "(must pass) and listed mistakes (must fail), compute every instrument. Prints "
                              "each result as it comes and a table at the end. Exit 0 when all pass, 1 if any "
                              "fails, 2 for bad input.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="lesson files or directories")
    p.add_argument("--full", action="store_true", help="run experiments with the lesson's own parameters")
    p.add_argument("--json", action="store_true", help="one JSON object per result, then a summary object")
    return parser


def _context(args: argparse.Namespace) -> Context:
    from tutor import settings as user_settings

    dirs = [Path(d).expanduser() for d in [*args.g_lessons_dirs, *getattr(args, "s_lessons_dirs", [])]]
    data_dir = getattr(args, "s_data_dir", None) or args.g_data_dir
    device = getattr(args, "s_device", None) or args.g_device
    saved = user_settings.load()
    warnings = [saved.problem] if saved.problem else []
    from_settings = []
    for d in saved.lessons_dirs:
        try:
            usable, why = d.is_dir(), "no such directory"
        except OSError as e:  # a name too long for the filesystem
            usable, why = False, e.strerror or str(e)
        if usable:
            from_settings.append(d)
        else:
            warnings.append(f"{saved.path}: lessons_dirs: {d}: {why} (skipped)")
    ctx = Context(lessons_dirs=[*from_settings, *dirs], device=device, cli_lessons_dirs=dirs, warnings=warnings)
    if data_dir:
        path = Path(data_dir).expanduser()
        if not path.is_dir():
            raise UsageError(f"--data-dir {data_dir}: no such directory")
        ctx.data_dir = path.resolve()
        # tutor.paths and tutor.experiments.data read the environment; so does any subprocess we start.
        os.environ["GPUTUTOR_DATA_DIR"] = str(ctx.data_dir)
    if device:
        os.environ["GPUTUTOR_DEVICE"] = device
    return ctx


def _check_lesson_dirs(ctx: Context) -> None:
    for d in ctx.cli_lessons_dirs:
        if not d.is_dir():
            raise UsageError(f"--lessons-dir {d}: no such directory")


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    debug = os.environ.get("GPUTUTOR_DEBUG", "").strip() not in ("", "0")
    try:
        return _main(argv)
    except UsageError as e:
        _eprint(f"gpututor: {e}")
        return BAD_INPUT
    except KeyboardInterrupt:
        _eprint("cancelled")
        return CANCELLED
    except SystemExit as e:  # argparse: --help/--version (0) and usage errors (2)
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        _eprint(e.code)
        return FAILED
    except BrokenPipeError:
        # The reader went away (`gpututor run --json | head -1`): stop quietly.
        _silence_stdout()
        return 141
    except OSError as e:
        if e.filename is None:
            return _unexpected(e, debug)
        # a path given on the command line that the system refuses (too long, a loop)
        _eprint(f"gpututor: {e.filename}: {e.strerror or e}")
        return BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the one place that turns surprises into a sentence
        return _unexpected(e, debug)


def _unexpected(e: BaseException, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exception(e)
    text = str(e).strip().splitlines()
    _eprint(f"gpututor: unexpected error: {type(e).__name__}: {text[0] if text else ''}".rstrip(": "))
    if not debug:
        _eprint("run with GPUTUTOR_DEBUG=1 for details")
    return FAILED


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    ctx = _context(args)
    from tutor import paths, threads

    paths.route_torch_caches(os.environ)  # for torch here and in every process started from here
    threads.set_env(os.environ)  # likewise: how many threads training uses (tutor/threads.py)
    if args.command is not None:  # the TUI shows them on screen instead
        for warning in ctx.warnings:
            _eprint(f"warning: {warning}")
    handler = {
        None: cmd_tui,
        "list": cmd_list,
        "doctor": cmd_doctor,
        "run": cmd_run,
        "lint": cmd_lint,
        "check": cmd_check,
        "exercise": cmd_exercise,
        "instrument": cmd_instrument,
        "export": cmd_export,
        "schema": cmd_schema,
        "new": cmd_new,
        "lesson": cmd_lesson,
    }[args.command]
    return handler(args, ctx)


# ---------------------------------------------------------------- gpututor (the TUI)


def cmd_tui(args: argparse.Namespace, ctx: Context) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        _eprint(NO_TTY_MESSAGE)
        return BAD_INPUT
    _check_lesson_dirs(ctx)
    from tutor.ui.app import TutorApp

    app = TutorApp(lessons_dirs=ctx.lessons_dirs, device=ctx.device,
                   data_dir=str(ctx.data_dir) if ctx.data_dir else None, warnings=ctx.warnings)
    app.run()
    code = getattr(app, "return_code", None)
    return code if isinstance(code, int) else OK


# ---------------------------------------------------------------- list


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    _check_lesson_dirs(ctx)
    from tutor.course.lesson import discover
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    with Progress() as progress:
        rows = []
        for item in catalog.lessons:
            ids = {s.id for s in item.lesson.steps}
            rows.append({
                "id": item.lesson.id,
                "title": item.lesson.title,
                "summary": item.lesson.summary,
                "steps": len(item.lesson.steps),
                "done": len(progress.completed_steps(item.lesson.id) & ids),
                "position": progress.position(item.lesson.id),
                "path": str(item.path),
            })
        warning = progress.warning
    broken = [
        {"path": str(path), "errors": [{"line": i.line, "col": i.col, "message": i.message} for i in err.issues]}
        for path, err in catalog.broken
    ]
    if warning:
        _eprint(f"warning: {warning}")
    if args.json:
        _print_json({"lessons": rows, "broken": broken})
        return OK

    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if rows:
        table = Table(title="Lessons", title_justify="left")
        table.add_column("id", no_wrap=True)
        table.add_column("title")
        table.add_column("steps", justify="right")
        table.add_column("progress", justify="right", no_wrap=True)
        for r in rows:
            table.add_row(r["id"], escape(r["title"]), str(r["steps"]), f"{r['done']}/{r['steps']}")
        console.print(table)
    else:
        console.print("No lessons found.")
    for path, err in catalog.broken:
        console.print(f"broken lesson file {path}:", style="bold red", markup=False)
        for issue in err.issues:
            console.print(f"  {issue}", markup=False)
    return OK


# ---------------------------------------------------------------- doctor


def cmd_doctor(args: argparse.Namespace, ctx: Context) -> int:
    report, problems = _doctor_report(ctx)
    if args.json:
        _print_json(report)
    else:
        _print_doctor(report)
    for p in problems:
        _eprint(f"gpututor: {p}")
    return BAD_INPUT if problems else OK


def _doctor_report(ctx: Context) -> tuple[dict[str, Any], list[str]]:
    import platform
    import warnings

    from tutor import paths
    from tutor.course.lesson import builtin_lessons_dir

    problems: list[str] = []
    report: dict[str, Any] = {
        "gpututor": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken torch install is exactly what doctor reports
        report["torch"] = None
        report["torch_error"] = f"{type(e).__name__}: {e}"
        problems.append(f"PyTorch cannot be imported ({type(e).__name__}: {e}); reinstall it (pip install torch)")
        torch = None
    if torch is not None:
        from tutor.experiments import devices

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            report.update({
                "torch": torch.__version__,
                "cuda": torch.version.cuda,
                "cudnn": cudnn,
                "cuda_available": torch.cuda.is_available(),
                "mps_built": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_built()),
                "tf32": {
                    "matmul_allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
                    "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
                    "float32_matmul_precision": torch.get_float32_matmul_precision(),
                },
            })
        report["devices"] = [{**d.as_dict(), "describe": d.describe()} for d in devices.available()]
        try:
            report["selected_device"] = devices.resolve(ctx.device).torch_device
        except devices.DeviceError as e:
            report["selected_device"] = None
            problems.append(str(e))
    report["data"] = _data_report()
    builtin = builtin_lessons_dir()
    report["paths"] = {
        "home": str(paths.home_dir()),
        "home_from": "GPUTUTOR_HOME" if os.environ.get("GPUTUTOR_HOME") else "user data dir",
        "progress_db": str(paths.home_dir() / "progress.db"),
        "settings": str(paths.home_dir() / "settings.toml"),
        "cache": str(paths.cache_dir()),
        "lesson_dirs": [{"path": str(builtin), "builtin": True, "exists": builtin.is_dir()}]
        + [{"path": str(d), "builtin": False, "exists": d.is_dir()} for d in ctx.lessons_dirs],
    }
    for d in ctx.lessons_dirs:
        if not d.is_dir():
            problems.append(f"--lessons-dir {d}: no such directory")
    return report, problems


def _data_report() -> dict[str, Any]:
    from tutor import paths

    root, may_download = paths.data_dir()
    raw = root / "MNIST" / "raw"
    files = sorted(p.name for p in raw.glob("*-ubyte*")) if raw.is_dir() else []
    report: dict[str, Any] = {
        "dir": str(root),
        "from": "GPUTUTOR_DATA_DIR / --data-dir" if os.environ.get("GPUTUTOR_DATA_DIR") else "user cache",
        "may_download": may_download,
        "mnist_raw_files": files,
        "mnist_present": any(f.startswith("train-images") for f in files)
        and any(f.startswith("t10k-images") for f in files),
    }
    from tutor.experiments import data

    try:
        report["source"] = data.describe_source()
    except Exception as e:  # noqa: BLE001 - report the problem, keep the rest of doctor
        report["source_error"] = f"{type(e).__name__}: {e}"
    return report


def _print_doctor(report: dict[str, Any]) -> None:
    from rich.markup import escape

    c = _console()
    c.print(f"[bold]gpututor {report['gpututor']}[/]  python {report['python']}  {escape(report['platform'])}")
    if report.get("torch") is None:
        c.print(f"[red]torch: not importable[/] ({escape(report.get('torch_error', ''))})")
    else:
        cudnn = report["cudnn"]
        c.print(f"torch {report['torch']}  CUDA {report['cuda'] or 'none (CPU build)'}  "
                f"cuDNN {cudnn if cudnn else 'none'}  MPS built: {report['mps_built']}")
        c.print("[bold]devices[/] (best first):")
        for d in report["devices"]:
            caps = [f"{k}: {'yes' if d[k] else 'no'}" for k in ("bf16", "fp16", "tensor_cores")]
            c.print(f"  {escape(d['describe'])}")
            c.print(f"      {', '.join(caps)}")
        if not any(d["kind"] in ("cuda", "mps") for d in report["devices"]):
            c.print("  no GPU here: lessons run on the CPU and say what they would compare on a GPU")
        tf32 = report["tf32"]
        c.print(f"TF32: matmul {'on' if tf32['matmul_allow_tf32'] else 'off'}, "
                f"cuDNN {'on' if tf32['cudnn_allow_tf32'] else 'off'}, "
                f"float32_matmul_precision={tf32['float32_matmul_precision']}")
        sel = report.get("selected_device")
        c.print(f"selected device: {sel if sel else '[red]not available (see below)[/]'}")
    data = report["data"]
    c.print("[bold]data[/]:")
    if "source" in data:
        src = data["source"]
        if isinstance(src, dict):
            for k, v in src.items():
                c.print(f"  {k}: {escape(_fmt(v))}")
        else:
            c.print(f"  {escape(str(src))}")
    c.print(f"  dir: {escape(data['dir'])} (from {data['from']})")
    if data["mnist_present"]:
        c.print(f"  MNIST raw files: {len(data['mnist_raw_files'])} found")
    elif data["may_download"]:
        c.print("  MNIST not downloaded yet: it will be downloaded on first use (offline: synthetic digits)")
    else:
        c.print("  [yellow]MNIST not found there[/]: runs will use the synthetic digit set and say so")
    if "source_error" in data:
        c.print(f"  [red]data source error[/]: {escape(data['source_error'])}")
    p = report["paths"]
    c.print("[bold]paths[/]:")
    c.print(f"  home: {escape(p['home'])} ({p['home_from']})")
    c.print(f"  progress db: {escape(p['progress_db'])}")
    c.print(f"  settings: {escape(p['settings'])}")
    c.print(f"  cache: {escape(p['cache'])}")
    for d in p["lesson_dirs"]:
        tag = "built-in" if d["builtin"] else "--lessons-dir"
        missing = "" if d["exists"] else " [red](missing)[/]"
        c.print(f"  lessons ({tag}): {escape(d['path'])}{missing}")


# ---------------------------------------------------------------- run


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

    lines = ["experiments (gpututor run NAME --set key=value):"]
    for name, exp in sorted(experiments.REGISTRY.items()):
        lines.append(f"  {name:22} {exp.title}")
    return "\n".join(lines)


def _pack_dirs(names: list[str], files: list[Path]) -> list[Path]:
    """Where a folder pack's experiments.py may sit: each folder named, and each lesson's folder."""
    return [*(Path(n) for n in names if Path(n).is_dir()), *(f.parent for f in files)]


def _activate_packs(dirs: Iterable[Path]) -> list[Any]:
    """Register the experiments of the lesson packs in these directories (and installed ones).

    Returns the problems as LessonIssues; commands that do not report them as errors warn.
    """
    from tutor.course.lesson import LessonIssue, activate_packs

    _, problems = activate_packs(list(dict.fromkeys(dirs)))
    return [LessonIssue(str(p.path), p.line, 1, p.message) for p in problems]


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    from pydantic import ValidationError

    from tutor import experiments

    def bad(message: str, details: str = "") -> int:
        if args.json:
            _print_json({"event": "error", "message": message})
        _eprint(f"gpututor run: {message}")
        if details:
            _eprint(details)
        return BAD_INPUT

    for issue in _activate_packs(ctx.lessons_dirs):
        _eprint(f"warning: lesson pack not loaded: {issue}")
    if not args.name:
        return bad("which experiment? give its NAME", _experiments_text())
    try:
        exp = experiments.get(args.name)
    except experiments.UnknownExperiment:
        names = sorted(experiments.REGISTRY)
        return bad(f"unknown experiment {args.name!r}{_closest(args.name, names)}; available: {', '.join(names)}")
    try:
        values = parse_sets(args.sets)
    except UsageError as e:
        return bad(str(e))
    try:
        params = exp.make_params(values)
    except ValidationError as e:
        return bad(_params_problem(exp, e), f"parameters of {exp.name}:\n" + "\n".join(_param_lines(exp)))

    from tutor import errors
    from tutor.experiments import devices

    try:
        device = devices.resolve(params.device or ctx.device)
    except devices.DeviceError as e:
        return bad(str(e))
    emit = _JsonEvents() if args.json else _HumanEvents()
    return _run_stream(exp.name, values, params.model_dump(), device, ctx, emit, errors)


def _params_problem(exp: Any, e: Any) -> str:
    names = list(exp.params.model_fields)
    problems = []
    for err in e.errors():
        key = str(err["loc"][0]) if err["loc"] else "?"
        if err["type"] == "extra_forbidden":
            problems.append(f"{exp.name} has no parameter {key!r}{_closest(key, names)}; "
                            f"it takes: {', '.join(names)}")
        elif not err["loc"]:  # a check across parameters (batch_size a multiple of micro_batches)
            problems.append(f"bad values: {err['msg'].removeprefix('Value error, ')}")
        else:
            problems.append(f"bad value for {key!r}: {err['msg'].removeprefix('Value error, ')} "
                            f"(got {err.get('input')!r})")
    return "; ".join(problems)


def _run_stream(name: str, values: dict, params: dict, device: Any, ctx: Context, emit: Any, errors: Any) -> int:
    from tutor import experiments
    from tutor.experiments.events import Finished

    metrics: dict[str, Any] | None = None
    gen = None
    start = time.monotonic()
    try:
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
        _record(name, params, device, {}, "failed", message)
        emit.error(message)
        return FAILED
    if metrics is None:
        message = f"experiment {name!r} ended without reporting its results (no Finished event)"
        _record(name, params, device, {}, "failed", message)
        emit.error(message)
        return FAILED
    _record(name, params, device, metrics, "finished", None)
    emit.done(metrics, time.monotonic() - start)
    return OK


def _close(gen: Any) -> None:
    try:
        if gen is not None:
            gen.close()
    except Exception:  # noqa: BLE001 - closing a generator that already failed
        pass


def _record(name: str, params: dict, device: Any, metrics: dict, status: str, error: str | None) -> None:
    """Keep the run in the progress store; a store problem is a warning, not a failed run."""
    try:
        from tutor.course.progress import Progress

        with Progress() as progress:
            progress.record_run(experiment=name, params=params, device=device.as_dict(),
                                metrics=metrics, status=status, error=error)
            if progress.warning:
                _eprint(f"warning: {progress.warning}")
    except Exception as e:  # noqa: BLE001
        _eprint(f"warning: the run was not recorded in your progress ({type(e).__name__}: {e})")


class _JsonEvents:
    """--json: one object per event line; the last is finished, error or cancelled."""

    def __call__(self, event: Any) -> None:
        from tutor.experiments.events import to_json

        _print_json(to_json(event))

    def done(self, metrics: dict, seconds: float) -> None:
        pass  # the experiment's own Finished event was the last line

    def error(self, message: str) -> None:
        _print_json({"event": "error", "message": message})
        _eprint(f"gpututor run: {message}")

    def cancelled(self) -> None:
        _print_json({"event": "cancelled", "message": "cancelled"})
        _eprint("cancelled")


class _HumanEvents:
    """Readable lines: every event but Step, which is throttled to a few lines a second."""

    def __init__(self) -> None:
        self.console = _console()
        self.last_step = -math.inf
        self.pending: Any = None  # the newest Step not printed yet

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
        if isinstance(event, ev.Started):
            c.print(f"[bold]{escape(event.experiment)}[/] on [bold]{escape(event.device)}[/] "
                    f"({escape(event.device_name)})")
            if event.dataset:
                c.print(f"data: {escape(event.dataset)}")
            if event.detail:
                c.print(escape(event.detail))
        elif isinstance(event, ev.Epoch):
            label = f"[{event.label}] " if event.label else ""
            c.print(f"{escape(label)}[bold]epoch {event.epoch}/{event.epochs}[/]  "
                    f"train loss {event.train_loss:.4f}  test acc {event.test_acc * 100:.2f}%  "
                    f"{event.seconds:.2f} s  {event.samples_per_s:,.0f} samples/s")
        elif isinstance(event, ev.Note):
            style = {"warning": "yellow", "result": "bold"}.get(event.level, "")
            prefix = "warning: " if event.level == "warning" else ""
            c.print(f"{prefix}{event.text}", style=style or None, markup=False)
        elif isinstance(event, ev.Table):
            table = RichTable(title=Text(event.title), title_justify="left")
            for col in event.columns:
                table.add_column(str(col), overflow="fold")
            for row in event.rows:
                table.add_row(*(Text(str(x)) for x in row))  # values, not markup: "[enforce fail ...]"
            c.print(table)
        elif isinstance(event, ev.Finished):
            pass  # printed by done(), after the run is recorded

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

        table = RichTable(title=f"metrics (run took {seconds:.1f} s)", title_justify="left")
        table.add_column("metric", no_wrap=True)
        table.add_column("value", overflow="fold")
        for k, v in metrics.items():
            table.add_row(Text(str(k)), Text(_fmt(v)))
        self.console.print(table)

    def error(self, message: str) -> None:
        _eprint(f"gpututor run: {message}")

    def cancelled(self) -> None:
        _eprint("cancelled")


# ---------------------------------------------------------------- lint


def cmd_lint(args: argparse.Namespace, ctx: Context) -> int:
    from tutor.course.lesson import LessonError, LessonIssue, load_file, parse_yaml

    files: list[Path] = []
    problems = 0
    for name in args.paths:
        path = Path(name)
        if path.is_dir():
            found = sorted({*path.rglob("*.yaml"), *path.rglob("*.yml")})
            if not found:
                _eprint(f"{name}: no lesson files (*.yaml, *.yml) in this directory")
                problems += 1
            files.extend(found)
        else:
            files.append(path)  # a missing file is reported by load_file as path:1:1

    # A folder pack's experiments.py sits beside its lessons: load it before they are checked.
    issues: list[LessonIssue] = _activate_packs(_pack_dirs(args.paths, files))
    bad_files: set[Path] = {Path(i.path) for i in issues}
    ids: dict[str, Path] = {}
    good = 0
    for path in files:
        try:
            lesson = load_file(path, grade_examples=True)
        except LessonError as e:
            issues.extend(e.issues)
            bad_files.add(path)
            continue
        if lesson.id in ids:
            line, col = _id_position(path, parse_yaml)
            issues.append(LessonIssue(str(path), line, col,
                                      f"duplicate lesson id {lesson.id!r} (also in {ids[lesson.id]})"))
            bad_files.add(path)
            continue
        ids[lesson.id] = path
        good += 1
    for issue in issues:
        print(issue, flush=True)
    problems += len(issues)
    if problems:
        _eprint(f"lint: {len(issues)} error{'s' * (len(issues) != 1)} in {len(bad_files)} of "
                f"{len(files)} file{'s' * (len(files) != 1)}")
        return BAD_INPUT
    _eprint(f"ok: {good} lesson{'s' * (good != 1)}")
    return OK


def _id_position(path: Path, parse_yaml: Any) -> tuple[int, int]:
    try:
        _, marks = parse_yaml(path.read_text(encoding="utf-8-sig"), str(path))
        return marks.get(("id",), (1, 1))
    except Exception:  # noqa: BLE001 - the file loaded a moment ago; position is best effort
        return (1, 1)


# ---------------------------------------------------------------- lesson steps by id


def _find_step(ctx: Context, lesson_id: str, step_id: str, kinds: tuple[type, ...], what: str,
               unfit: str) -> tuple[Any, Any]:
    """(lesson, step) for `check` and `exercise`, or raise _BadInput naming what is there."""
    from tutor.course.lesson import discover

    catalog = discover(ctx.lessons_dirs)
    try:
        lesson = catalog.get(lesson_id).lesson
    except KeyError:
        ids = [item.lesson.id for item in catalog.lessons]
        message = f"unknown lesson {lesson_id!r}{_closest(lesson_id, ids)}; available: {', '.join(ids) or 'none'}"
        broken = [str(p) for p, _ in catalog.broken]
        if broken:
            message += f" (these lesson files failed to load: {', '.join(broken)}; see `gpututor lint`)"
        raise _BadInput(message) from None
    fitting = [s.id for s in lesson.steps if isinstance(s, kinds)]
    listed = f"{what}: {', '.join(fitting) or 'none'}"
    try:
        step = lesson.step(step_id)
    except KeyError:
        raise _BadInput(f"lesson {lesson.id!r} has no step {step_id!r}{_closest(step_id, fitting)}; {listed}") from None
    if not isinstance(step, kinds):
        raise _BadInput(f"step {step.id!r} of {lesson.id!r} is a {step.kind} step, {unfit}; {listed}")
    return lesson, step


class _BadInput(Exception):
    pass


def _bad(args: argparse.Namespace, command: str, message: str) -> int:
    if args.json:
        _print_json({"error": message})
    _eprint(f"gpututor {command}: {message}")
    return BAD_INPUT


# ---------------------------------------------------------------- check


def cmd_check(args: argparse.Namespace, ctx: Context) -> int:
    _check_lesson_dirs(ctx)
    from tutor.course.lesson import CheckStep, PredictStep
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession

    try:
        lesson, step = _find_step(ctx, args.lesson, args.check, (CheckStep, PredictStep), "steps that take an answer",
                                  "which takes no answer")
    except _BadInput as e:
        return _bad(args, "check", str(e))

    answer = sys.stdin.read() if args.answer == "-" else args.answer
    with Progress() as progress:
        if progress.warning:
            _eprint(f"warning: {progress.warning}")
        graded = LessonSession(lesson, progress).grade(step, answer)  # as the TUI grades it
    verdict, run_record = graded.verdict, graded.evidence.run
    if args.json:
        _print_json(verdict.as_dict())
        return OK
    c = _console()
    if verdict.correct:
        c.print("[bold green]correct[/]")
    else:
        c.print("[bold yellow]not yet[/]")
    if verdict.feedback:
        c.print(verdict.feedback, markup=False)
    if verdict.missing:
        c.print(f"missing: {', '.join(verdict.missing)}", markup=False)
    if run_record is not None:
        c.print(f"(graded with the metrics of your run #{run_record.id} of {run_record.experiment})",
                style="dim", markup=False)
    return OK


# ---------------------------------------------------------------- exercise


def cmd_exercise(args: argparse.Namespace, ctx: Context) -> int:
    _check_lesson_dirs(ctx)
    from tutor.course.lesson import ExerciseStep
    from tutor.paths import home_dir

    try:
        lesson, step = _find_step(ctx, args.lesson, args.step, (ExerciseStep,), "exercise steps",
                                  "not an exercise")
    except _BadInput as e:
        return _bad(args, "exercise", str(e))
    try:
        code = Path(args.file).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        return _bad(args, "exercise", f"--file {args.file}: cannot read it ({getattr(e, 'strerror', None) or e})")

    from tutor.exercises.grader import grade_exercise

    workdir = home_dir() / "exercises" / lesson.id / step.id
    stream = None if args.json else (lambda text: (sys.stderr.write(text), sys.stderr.flush()))
    result = grade_exercise(step, code, workdir, on_output=stream)
    if args.json:
        _print_json(result.as_dict())
        return OK if result.passed else FAILED
    c = _console()
    c.print("[bold green]passed[/]" if result.passed else "[bold yellow]not yet[/]")
    for r in result.requirements:
        mark = "ok  " if r.passed else "FAIL" if r.judged else "skip"
        c.print(f"  {mark} {r.id}" + (f": {r.feedback}" if r.feedback else ""), markup=False)
    for note in result.checker_notes:
        c.print(f"  ({note})", style="dim", markup=False)
    c.print(result.summary, markup=False)
    if result.sandbox.dropped_bytes:
        c.print(f"(output was long: {result.sandbox.dropped_bytes:,} bytes of it not kept)", style="dim",
                markup=False)
    return OK if result.passed else FAILED



# ---------------------------------------------------------------- instrument


def _instruments_text() -> str:
    from tutor.instruments import REGISTRY

    lines = ["instruments (gpututor instrument NAME --set key=value):"]
    for name, inst in sorted(REGISTRY.items()):
        lines.append(f"  {name:16} {inst.summary}")
        for c in inst.controls:
            if c.kind == "stepper":
                values = f"{c.options[0]}..{c.options[-1]}"
            elif c.kind == "toggle":
                values = "on | off"
            else:
                values = " | ".join(map(str, c.options))
            lines.append(f"      {c.name}: {values} = {c.label_of(c.default)}")
        lines.append(f"      outputs: {', '.join(inst.outputs)}")
    return "\n".join(lines)


def cmd_instrument(args: argparse.Namespace, ctx: Context) -> int:
    from tutor.instruments import REGISTRY, SettingsError

    if not args.name:
        if args.json:
            _print_json({name: {"summary": i.summary, "controls": {c.name: {
                "kind": c.kind, "options": list(c.options), "default": c.default} for c in i.controls},
                "outputs": i.outputs} for name, i in REGISTRY.items()})
        else:
            print(_instruments_text())
        return OK
    inst = REGISTRY.get(args.name)
    if inst is None:
        return _bad(args, "instrument", f"unknown instrument {args.name!r}{_closest(args.name, list(REGISTRY))}; "
                    f"available: {', '.join(sorted(REGISTRY))}")
    given: dict[str, str] = {}
    for item in args.sets:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            return _bad(args, "instrument", f"--set expects KEY=VALUE (e.g. --set optimizer=sgd), got {item!r}")
        given[key.strip()] = raw.strip()
    try:
        settings = inst.settings(given)
    except SettingsError as e:
        return _bad(args, "instrument", str(e))
    # Only some settings read the learner's runs or this device (which loads torch); the rest is arithmetic.
    context = _instrument_context(settings) if inst.needs_context(settings) else None
    reading = inst.compute(settings, context)
    if args.json:
        _print_json({"instrument": inst.name, "settings": settings, "outputs": reading.outputs,
                     "verdict": reading.verdict, "level": reading.level, "math": list(reading.math),
                     "reference": list(reading.reference), "notes": list(reading.notes)})
        return OK
    from tutor.instruments.render import reading as render

    c = _console()
    c.print(f"[bold]{inst.title}[/]: " + ", ".join(f"{k}={ctl.label_of(settings[k])}"
                                                   for k, ctl in ((c_.name, c_) for c_ in inst.controls)),
            markup=True, highlight=False)
    c.print(render(reading, min(c.width, 100) - 2, math=args.math))
    return OK


def _instrument_context(settings: dict[str, Any]):
    """The learner's recorded runs, and this device only when a control asks for it (it loads torch)."""
    from tutor.course.ledger import instrument_context
    from tutor.course.progress import Progress

    device = None
    if settings.get("budget") == "this":
        from tutor.experiments.devices import DeviceError, resolve

        try:
            device = resolve(os.environ.get("GPUTUTOR_DEVICE"))
        except DeviceError as e:
            raise UsageError(str(e)) from None
    with Progress() as progress:
        if progress.warning:
            _eprint(f"warning: {progress.warning}")
        return instrument_context(progress, device)


# ---------------------------------------------------------------- export


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    _check_lesson_dirs(ctx)
    from tutor.course.ledger import export
    from tutor.course.lesson import discover
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    ids = [item.lesson.id for item in catalog.lessons]
    for wanted in args.lessons:
        if wanted not in ids:
            raise UsageError(f"unknown lesson {wanted!r}{_closest(wanted, ids)}; available: {', '.join(ids)}")
    lessons = [item.lesson for item in catalog.lessons if not args.lessons or item.lesson.id in args.lessons]
    with Progress() as progress:
        if progress.warning:
            _eprint(f"warning: {progress.warning}")
        document = export(lessons, progress)
    text = json.dumps(_json_safe(document), indent=2, allow_nan=False) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return OK
    out = _write_file(args.output, text, "ledger.json")
    _eprint(f"wrote {out} ({len(document['lessons'])} lessons)")
    return OK


def _write_file(name: str, text: str, example: str, *, overwrite: bool = True) -> Path:
    """Write text to a file named on the command line, whole or not at all."""
    out = Path(name).expanduser().resolve()
    if out.is_dir():
        raise UsageError(f"{name}: is a directory; name a file, e.g. {out / example}")
    if out.exists() and not overwrite:
        raise UsageError(f"{name} already exists; choose another name, or --force to overwrite it")
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(out)  # never a half-written file
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"{name}: cannot write it ({e.strerror or e})") from None
    return out


# ---------------------------------------------------------------- schema, new


def lesson_schema() -> dict[str, Any]:
    from tutor.course.lesson import Lesson

    schema = Lesson.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "gpututor lesson",
        "description": "A gpututor lesson file (YAML). Reference: docs/LESSON_FORMAT.md. Experiment names, "
        "metrics and cross-step rules are checked by `gpututor lint`, not by this schema.",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def cmd_schema(args: argparse.Namespace, ctx: Context) -> int:
    text = json.dumps(lesson_schema(), indent=2) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return OK
    out = _write_file(args.output, text, "lesson.schema.json")
    _eprint(f"wrote {out}")
    return OK


def _lesson_files(names: list[str]) -> list[Path]:
    files: list[Path] = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            found = sorted({*path.rglob("*.yaml"), *path.rglob("*.yml")})
            if not found:
                raise UsageError(f"{name}: no lesson files (*.yaml, *.yml) in this directory")
            files.extend(found)
        elif path.exists():
            files.append(path)
        else:
            raise UsageError(f"{name}: no such file or directory")
    return files


def cmd_lesson(args: argparse.Namespace, ctx: Context) -> int:
    from dataclasses import asdict

    from rich.markup import escape
    from rich.table import Table as RichTable

    from tutor.authoring.lesson_test import play_paths

    files = _lesson_files(args.paths)
    console = _console()
    started = time.perf_counter()
    pack_problems = _activate_packs(_pack_dirs(args.paths, files))

    def show(o: Any) -> None:
        if args.json:
            print(json.dumps(_json_safe(asdict(o))), flush=True)
            return
        mark = "[green]✓[/]" if o.ok else "[bold red]✗[/]"
        text = escape(o.detail)  # a lesson's words, an error's text: "[/]" in them is not markup
        detail = f"  [dim]{text}[/]" if o.ok and o.detail else (f"\n    [red]{text}[/]" if o.detail else "")
        console.print(f"{mark} {escape(o.lesson)} · {escape(o.step)} · {o.kind}: {escape(o.what)} "
                      f"[dim]({o.seconds:.1f} s)[/]{detail}", markup=True, highlight=False)

    from tutor.authoring.lesson_test import Outcome

    outcomes = []
    for issue in pack_problems:  # a pack that does not load fails the test like a broken lesson
        outcomes.append(Outcome(issue.path, f"line {issue.line}", "lint", "lesson pack loads", False, issue.message))
        show(outcomes[-1])
    outcomes += play_paths(files, ctx.device, args.full, show)
    failed = [o for o in outcomes if not o.ok]
    seconds = time.perf_counter() - started
    if args.json:
        print(json.dumps({"passed": len(outcomes) - len(failed), "failed": len(failed), "seconds": round(seconds, 1)}))
    else:
        table = RichTable(title="lesson test", title_justify="left")
        for column in ("lesson", "passed", "failed", "seconds"):
            table.add_column(column, justify="left" if column == "lesson" else "right")
        for lesson in dict.fromkeys(o.lesson for o in outcomes):
            mine = [o for o in outcomes if o.lesson == lesson]
            bad = sum(not o.ok for o in mine)
            table.add_row(lesson, str(len(mine) - bad), f"[bold red]{bad}[/]" if bad else "0",
                          f"{sum(o.seconds for o in mine):.1f}")
        console.print(table)
        console.print(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed in {seconds:.1f} s")
    return FAILED if failed else OK


def cmd_new(args: argparse.Namespace, ctx: Context) -> int:
    from importlib.resources import files

    from tutor.course.lesson import ID_PATTERN

    lesson_id = args.lesson_id
    if not re.fullmatch(ID_PATTERN, lesson_id):
        raise UsageError(f"lesson id {lesson_id!r}: use lowercase letters, digits and dashes, like 'my-first-lesson'")
    title = args.title or lesson_id.replace("-", " ").capitalize()
    template = files("tutor.authoring").joinpath("templates/new-lesson.yaml").read_text(encoding="utf-8")
    text = template.replace("LESSON_ID", lesson_id).replace("LESSON_TITLE", title.replace('"', "'"))
    out = _write_file(args.output or f"{lesson_id}.yaml", text, f"{lesson_id}.yaml", overwrite=args.force)
    _eprint(f"wrote {out}: a lesson with one step of each kind.\n"
            f"next: edit it, `gpututor lint {out}`, then `gpututor --lessons-dir {out.parent}`")
    return OK
