"""`gpututor`: the TUI with no sub-command, and its headless twins for scripts and instructors.

Sub-commands: list, doctor, calibrate, roofline, run, inspect, check, exercise, instrument, export, profile,
submit for learners; lint, schema, new, lesson test, class for instructors (see DESIGN.md, "CLI contract").
Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 cancelled (Ctrl-C).

Only argparse and the standard library load at start-up, so `gpututor --help` is
instant: torch, rich, pydantic and the lesson loader are imported inside the handlers.
No traceback reaches the user unless GPUTUTOR_DEBUG=1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from pathlib import Path

from tutor import __version__
from tutor.cli.context import BAD_INPUT, CANCELLED, FAILED, Context, UsageError, eprint

# Each command's handler, imported when it runs: the learner's and the instructor's verbs pull in
# pydantic, Rich and the lesson loader (a quarter of a second here), which `--help` does without, and
# a ctrl-c during those imports then lands inside main(), where it is a clean "cancelled".
HANDLERS = {
    None: ("learner", "cmd_tui"),
    "list": ("learner", "cmd_list"),
    "doctor": ("learner", "cmd_doctor"),
    "calibrate": ("hardware", "cmd_calibrate"),
    "roofline": ("hardware", "cmd_roofline"),
    "run": ("run", "cmd_run"),
    "inspect": ("inspect", "cmd_inspect"),
    "lint": ("instructor", "cmd_lint"),
    "check": ("learner", "cmd_check"),
    "exercise": ("learner", "cmd_exercise"),
    "instrument": ("learner", "cmd_instrument"),
    "export": ("learner", "cmd_export"),
    "profile": ("learner", "cmd_profile"),
    "submit": ("learner", "cmd_submit"),
    "schema": ("instructor", "cmd_schema"),
    "new": ("instructor", "cmd_new"),
    "lesson": ("instructor", "cmd_lesson"),
    "class": ("instructor", "cmd_class"),
}


def _add_globals(parser: argparse.ArgumentParser, prefix: str) -> None:
    """The global options, accepted before and after the sub-command (merged later)."""
    parser.add_argument(
        "--lessons-dir",
        dest=f"{prefix}lessons_dirs",
        action="append",
        default=[],
        metavar="DIR",
        help="also load lessons from DIR (repeatable; a lesson id found here overrides a built-in one)",
    )
    parser.add_argument(
        "--data-dir",
        dest=f"{prefix}data_dir",
        metavar="DIR",
        help="where MNIST lies (torchvision layout MNIST/raw); default $GPUTUTOR_DATA_DIR or the user cache",
    )
    parser.add_argument(
        "--device",
        dest=f"{prefix}device",
        metavar="D",
        help="train on D: auto (default), cpu, cuda, cuda:1, mps; default $GPUTUTOR_DEVICE or auto",
    )


def _positive_int(text: str) -> int:
    """argparse's reader for a count: a clear message, not a traceback, for 0, -3 or 'five'."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not 1 or more")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpututor",
        description="A terminal tutor that teaches PyTorch GPU training by predict-then-run. "
        "With no sub-command it opens the tutor (an interactive terminal UI): enter opens a "
        "lesson, r reviews the questions of lessons you finished, ? lists every key.",
        epilog="environment: GPUTUTOR_HOME (progress database and settings), GPUTUTOR_DATA_DIR "
        "(MNIST location), GPUTUTOR_CACHE_DIR (downloaded MNIST, measured peaks, scratch files), "
        "GPUTUTOR_DEVICE (as --device), GPUTUTOR_MEMORY_MB (memory each run may allocate, host and GPU), "
        "GPUTUTOR_GPU_MEMORY_MB (GPU memory each run may use, on a shared GPU; settings.toml: "
        "gpu_memory_mb), GPUTUTOR_CLASS_DIR (the class folder; settings.toml: class_dir), GPUTUTOR_THREADS (CPU threads training uses), GPUTUTOR_FORKSERVER=0 (start each exercise program afresh, not from the warm fork server), GPUTUTOR_CPU_BUDGET_S (seconds "
        "of timed CPU work a run step plans for; heavier work is projected, and says so), NO_COLOR "
        "(plain output), GPUTUTOR_DEBUG=1 (show tracebacks). "
        "Exit codes: 0 ok, 1 a run failed, 2 bad input, 130 cancelled.",
    )
    parser.add_argument("--version", action="version", version=f"gpututor {__version__}")
    _add_globals(parser, "g_")
    common = argparse.ArgumentParser(add_help=False)
    _add_globals(common, "s_")

    sub = parser.add_subparsers(dest="command", title="sub-commands", metavar="COMMAND")

    p = sub.add_parser(
        "list",
        parents=[common],
        help="lessons with your progress, and broken lesson files",
        description="List the lessons (id, title, steps, your progress) and any lesson "
        "file that failed to load, with its errors.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser(
        "doctor",
        parents=[common],
        help="devices, torch/CUDA versions, data source, paths",
        description="Report what gpututor finds here: devices and their capabilities, "
        "torch/CUDA/cuDNN versions, TF32 settings, the MNIST source and the paths it uses. "
        "With --selftest, check for real every device path the lessons use (timing, autocast, "
        "TF32, memory, out-of-memory, checkpoints, pinned copies): one line each, ok, failed "
        "with the reason, or n/a here. Exit 0 when none failed, 1 if any did. "
        "The measured matmul peak MFU is judged against is shown from its cache; --peak measures it.",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    checks = p.add_mutually_exclusive_group()  # one measurement at a time
    checks.add_argument(
        "--selftest",
        action="store_true",
        help="run a short real check of each device path (what to run on a new GPU box)",
    )
    checks.add_argument(
        "--peak",
        action="store_true",
        help="measure the selected device's realistic matmul peak again (a sweep of sizes, a "
        "few seconds) and cache it: pipeline-breakdown's MFU is measured against it",
    )

    p = sub.add_parser(
        "calibrate",
        parents=[common],
        help="measure this machine's roofline once (peaks, bandwidth)",
        description="Measure the selected device once: the realistic matmul peak of each dtype it "
        "runs natively (a sweep of sizes; CPU: float32, and bfloat16 where native; CUDA: float32, "
        "TF32, bfloat16, float16) and its memory bandwidth (the bandwidth experiment's device copy "
        "and c = a * b). Kept in the cache dir with the device, torch, CUDA and driver versions and "
        "the date; prints each roof, the ridge points and this machine's roofline. `gpututor "
        "doctor` shows it and says when it is stale; `gpututor roofline` places your runs on it.",
    )
    p.add_argument("--json", action="store_true", help="print the calibration as one JSON object")

    p = sub.add_parser(
        "roofline",
        parents=[common],
        help="your runs as points on this machine's roofline",
        description="Draw this machine's calibrated roofline (from `gpututor calibrate`) with a "
        "point for the latest run of each experiment that reports an achieved FLOP/s and its "
        "FLOP per byte; runs with a FLOP/s but no FLOP per byte are listed beside it. A verb of "
        "its own rather than `calibrate --roofline`: it only reads (instant, any time, as often "
        "as you like), while calibrate measures (a sweep per dtype, then the memory) and replaces "
        "the record.",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"calibration", "stale", "roof", "points", "listed", "elsewhere"} (before any '
        'calibrate: calibration, stale and roof null, and a "message")',
    )

    p = sub.add_parser(
        "inspect",
        parents=[common],
        help="watch your own training script: step-time split, MFU, memory, mistakes",
        description="Run your own training script as `python SCRIPT ARGS` would (its folder, its imports), "
        "watched for a window of optimizer steps, then stopped on purpose: where a step's time goes, MFU "
        "against this machine's measured roof, memory beside the ledger's formula, and the course's mistakes "
        "it shows, each with its evidence and lesson. Options go before SCRIPT or between SCRIPT and --; "
        "the script's own arguments after --. Exit 0 watched, 1 it crashed, hung or did not train, 2 no such file.",
    )
    p.add_argument("script", metavar="SCRIPT", help="the training script, e.g. main.py")
    p.add_argument("script_args", nargs="*", metavar="-- ARGS", help="the script's own arguments, after --")
    p.add_argument("--steps", type=_positive_int, default=20, metavar="N", help="steps timed (default 20)")
    p.add_argument("--warmup", type=_positive_int, default=3, metavar="N", help="steps before the window (default 3)")
    p.add_argument(
        "--timeout", type=_positive_int, default=120, metavar="S", help="time limit in seconds (default 120)"
    )
    p.add_argument(
        "--compare-plain",
        action="store_true",
        help="then run blocks of steps plain (only a step clock) and watched in turns, in the same run, "
        "and report watching's overhead with its interval",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")

    p = sub.add_parser(
        "run",
        parents=[common],
        help="run one experiment headless",
        description="Run one experiment without the TUI and stream what it measures. "
        "Run it without NAME to list the experiments and their parameters (exit 0); with "
        "--json, one object keyed by name with each one's title, parameters and metrics (the "
        "names a lesson's compare takes, each with its unit).",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="experiment name, e.g. train, crossover")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a parameter (repeatable), e.g. --set epochs=1 --set amp=bf16",
    )
    p.add_argument(
        "--record",
        metavar="LESSON:STEP",
        help="run a lesson's run step as the tutor does and record it against that step: its own "
        "parameters (a --set changes one), the step completed, and the predictions before it "
        "revealed and printed; NAME may be left out (e.g. gpututor run --record gpu-training:run-1)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per event; the last is {"event": "finished", "metrics": {...}} '
        '(with --record, then {"event": "recorded", "reveals": [...]}; '
        "without NAME: the list of experiments as one object)",
    )
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="on a machine a class shares (a class folder): when another run holds the device, run "
        "now instead of waiting in line; the timing is then marked shared and no prediction is graded on it",
    )

    p = sub.add_parser(
        "lint",
        parents=[common],
        help="validate lesson files (path:line:col: message)",
        description="Validate lesson files; directories are searched for *.yaml and *.yml, and "
        "a folder's experiments.py (a lesson pack) is loaded first. Exit 2 if any file has an "
        "error; warnings alone exit 0.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per issue: {"path", "line", "column", "severity", "message", "fix"} '
        "(fix: the word suggested in place of the one at line:column, or null), then a summary "
        '{"errors", "warnings", "files", "files_with_errors", "lessons_ok"}',
    )

    p = sub.add_parser(
        "check",
        parents=[common],
        help="grade one answer to a check, as the TUI does",
        description="Grade an answer to a lesson's check (or predict) step exactly as the "
        "TUI does, with the metrics of your latest recorded run of its verify experiment. "
        "Nothing is recorded unless --record: then a check's answer counts in your progress "
        "as in the TUI (a right one completes the step), and a prediction is locked, once, "
        "and revealed if a recorded run of its run step measures it (`gpututor run --record "
        "LESSON:STEP` records one). Exit 0 once graded, right or wrong (read `correct`), 2 for "
        "an empty or unreadable answer (nothing recorded), a prediction already locked, or an "
        "unknown lesson or step.",
    )
    p.add_argument("lesson", metavar="LESSON", help="lesson id, e.g. gpu-training")
    p.add_argument("check", metavar="CHECK", help="step id, e.g. check-3")
    p.add_argument(
        "--answer",
        required=True,
        metavar="TEXT",
        help="the answer to grade ('-' reads stdin; one starting with '-', such as -1: --answer=-1)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"correct", "feedback", "missing", "matched_misconception", "score", "judged"}; '
        "judged is false when it could not be graded (no option it names, nothing measured yet); "
        'with --record, "recorded": true, and for a prediction the bundle\'s record of it instead',
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="record it in your progress as the TUI does (a check's attempt; a prediction locked)",
    )

    p = sub.add_parser(
        "exercise",
        parents=[common],
        help="run and grade a code exercise, as the TUI does",
        description="Run a file as the answer to a lesson's exercise step, in a sandboxed "
        "process, and check its requirements exactly as the TUI does. Without --file, your "
        "own file for that exercise (the one the tutor's editor and `e` edit; its path is "
        "printed), and the run counts in your progress. With --watch, run it again each time "
        "the file is saved, from any editor, until ctrl+c. Exit 0 passed, 1 not.",
    )
    p.add_argument("lesson", metavar="LESSON", help="lesson id, e.g. gpu-training-practice")
    p.add_argument("step", metavar="STEP", help="exercise step id, e.g. ex1-move-and-time")
    p.add_argument("--file", metavar="PATH", help="the program to run (default: your file for this exercise)")
    p.add_argument("--watch", action="store_true", help="run and grade it again on every save, until ctrl+c")
    p.add_argument(
        "--json", action="store_true", help='print {"passed", "summary", "requirements", "output", "traceback", ...}'
    )

    p = sub.add_parser(
        "instrument",
        parents=[common],
        help="compute an instrument's outputs, as the TUI shows them",
        description="Compute what an instrument (an interactive calculator of a lesson) shows "
        "for the given control values. Run it without NAME to list the instruments, their "
        "controls and their outputs.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="instrument name, e.g. memory-ledger, pipeline")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a control (repeatable), e.g. --set optimizer=sgd --set precision=fp16",
    )
    p.add_argument("--math", action="store_true", help="also print the formulas with the numbers in them")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"instrument", "settings", "outputs", "verdict", "level", "math", "reference", "notes"}',
    )

    p = sub.add_parser(
        "export",
        parents=[common],
        help="write your design ledger and progress as JSON",
        description="Export, as one JSON object, each lesson's design ledger (the choices and "
        "results its instruments record), your locked predictions, graded answers and "
        "instrument moves. Default: every lesson, to standard output.",
    )
    p.add_argument("lessons", nargs="*", metavar="LESSON", help="lesson ids (default: all)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")

    p = sub.add_parser(
        "profile",
        parents=[common],
        help="how well your predictions matched what was measured",
        description="Your prediction profile: for each concept the lessons tag (GPU speed-ups, "
        "memory, time...), how far your locked predictions were from what the run after them "
        "measured (x2.1: you predict 2.1 times what is measured, on the geometric average), how "
        "many were on target, a chart of them over time, and the steps to revisit for the worst.",
    )
    p.add_argument("--json", action="store_true", help='print {"concepts", "unscored", "worst", "advice", "message"}')

    p = sub.add_parser(
        "submit",
        parents=[common],
        help="write your results as one bundle file to hand in",
        description="Write your results as one file for your instructor (`gpututor class` reads "
        "a folder of them): for each lesson, every locked prediction with what was measured and "
        "the verdict, every check answer, each exercise's verdict per requirement with the code "
        "graded, hints and solutions seen, instrument moves; the machine your runs measured on "
        "and each lesson file's version. Default: every lesson, to LEARNER-DATE.gpututor.json "
        "here, or in the class folder's submissions/ when one is set (class_dir in "
        "settings.toml, or $GPUTUTOR_CLASS_DIR). Your name is settings.toml's `learner`, asked "
        "once in a terminal and saved there. The file carries a digest of its content, so a "
        "bundle edited by hand shows as edited; that is a check against accidents, not proof.",
    )
    p.add_argument("lessons", nargs="*", metavar="LESSON", help="lesson ids (default: all)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE (default: see above)")
    p.add_argument("--learner", metavar="NAME", help="your name for this bundle (default: settings.toml's learner)")
    p.add_argument(
        "--json",
        action="store_true",
        help='print {"file", "learner", "digest", "lessons", "predictions", "checks", "exercises", ...}',
    )

    p = sub.add_parser(
        "class",
        parents=[common],
        help="the class report of a folder of learners' bundles, and a gradebook",
        description="Read every learner's bundle (`gpututor submit`) in DIR and its subfolders and "
        "report on the class: completion per lesson; the checks most missed first try, with the "
        "misconception each wrong answer matched; each exercise's requirements failed first and how "
        "many tries they took; the class's prediction profile per concept (the geometric mean of "
        "predicted / measured over every learner's predictions, beside the spread of each learner's "
        "own); the machines seen. Flagged: bundles edited after submit, from another version of a "
        "lesson file, or measured by an older measurement method. A file that is not a bundle (cut "
        "short, foreign, a newer format) is named and skipped; of two bundles from one learner the "
        "later is kept. Gradebook scoring: a lesson's completion is the % of its steps done (of "
        "100); a check scores 1 if any attempt was right; an exercise 1 if its last graded run "
        "passed; a lesson missing from a bundle is blank, a step not tried 0. Predictions are not "
        "graded. Exit 2 when DIR is missing or holds no bundle.",
    )
    p.add_argument("directory", metavar="DIR", help="the folder of bundles (searched with its subfolders)")
    p.add_argument(
        "--csv",
        metavar="FILE",
        help="write the gradebook in Canvas's Gradebook Import form: Student, ID, SIS User ID, SIS Login ID, "
        "Section, a column per lesson's completion, check and exercise, and a Points Possible row "
        "(the learner's name fills Student and SIS Login ID: name learners by their login)",
    )
    p.add_argument(
        "--long-csv",
        metavar="FILE",
        help="write one row per learner and step: learner, lesson, step, kind, verdict, score (for any "
        "other LMS or a spreadsheet; a prediction scores 1 hit, 0 miss, blank undecided)",
    )
    p.add_argument("--html", metavar="FILE", help="write the report as one HTML file that opens with no network")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")

    p = sub.add_parser(
        "schema",
        parents=[common],
        help="print the JSON Schema of lesson files",
        description="Print a JSON Schema (draft 2020-12) of the lesson format, generated from "
        "the models the tutor validates with, for editor completion and validation. With the "
        "YAML language server: # yaml-language-server: $schema=lesson.schema.json",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")

    p = sub.add_parser(
        "new",
        parents=[common],
        help="write a new lesson file with one step of each kind",
        description="Scaffold a lesson: one step of each kind (read, predict, run, check, "
        "exercise, instrument), with comments, that lints clean. Edit it, then "
        "`gpututor lint FILE` and `gpututor --lessons-dir DIR`. A ten-minute walk-through: "
        "docs/LESSON_TUTORIAL.md; every key: docs/LESSON_FORMAT.md.",
    )
    p.add_argument("lesson_id", metavar="LESSON_ID", help="lowercase letters, digits and dashes, e.g. my-first-lesson")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write it (default: ./LESSON_ID.yaml)")
    p.add_argument("--title", help="the lesson's title (default: from the id)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    p = sub.add_parser(
        "lesson",
        parents=[common],
        help="test lessons headlessly (lesson test PATH...)",
        description="Commands for lesson authors.",
    )
    lesson_sub = p.add_subparsers(dest="lesson_command", metavar="COMMAND", required=True)
    p = lesson_sub.add_parser(
        "test",
        parents=[common],
        help="play lessons headlessly: every run, check and exercise",
        description="Play each lesson without the TUI: lint it, run every run step's "
        "experiment (small parameters unless --full), grade every check's reference and "
        "listed answers (with its verify run's metrics), judge every prediction against "
        "what its run measured, run every exercise's solution "
        "(must pass) and listed mistakes (must fail), compute every instrument. Prints "
        "each result as it comes (a failure with its step's path:line) and a table at the "
        "end. Exit 0 when all pass, 1 if any fails, 2 for bad input.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="lesson files or directories")
    p.add_argument("--full", action="store_true", help="run experiments with the lesson's own parameters")
    p.add_argument(
        "--repeats",
        type=_positive_int,
        default=1,
        metavar="N",
        help="make each run that a prediction compares with N times, with the lesson's own parameters, "
        "and show each option's verdicts (hit / miss / undecided): fails where an option is a hit in "
        "one run and a miss in another, or undecided in most (its boundary sits in this machine's noise)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='one JSON object per result ({"lesson", "step", "kind", "what", "ok", "detail", "seconds", '
        '"skipped", "where", "verdicts", "measured"}), then a summary object',
    )
    return parser


def _context(args: argparse.Namespace) -> Context:
    from tutor import settings as user_settings

    dirs = [Path(d).expanduser() for d in [*args.g_lessons_dirs, *getattr(args, "s_lessons_dirs", [])]]
    data_dir = getattr(args, "s_data_dir", None) or args.g_data_dir
    device = getattr(args, "s_device", None) or args.g_device
    if device and not re.fullmatch(r"(auto|cpu|mps|cuda)(:\d+)?", device.strip().lower()):
        # every command, also those that resolve no device (list): a typo is said, not kept for later
        raise UsageError(f"unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps")
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
    if saved.gpu_memory_mb and not os.environ.get("GPUTUTOR_GPU_MEMORY_MB"):
        os.environ["GPUTUTOR_GPU_MEMORY_MB"] = str(saved.gpu_memory_mb)  # the engine process inherits it
    if saved.class_dir and not os.environ.get(user_settings.CLASS_DIR_ENV, "").strip():
        os.environ[user_settings.CLASS_DIR_ENV] = saved.class_dir  # the class's queue (measurement/slots.py) reads it
    return ctx


def main(argv: list[str] | None = None) -> int:
    debug = os.environ.get("GPUTUTOR_DEBUG", "").strip() not in ("", "0")
    try:
        return _main(argv)
    except UsageError as e:
        eprint(f"gpututor: {e}")
        return BAD_INPUT
    except KeyboardInterrupt:
        eprint("cancelled")
        return CANCELLED
    except SystemExit as e:  # argparse: --help/--version (0) and usage errors (2)
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        eprint(e.code)
        return FAILED
    except BrokenPipeError:
        # The reader went away (`gpututor run --json | head -1`): stop quietly.
        _silence_stdout()
        return 141
    except OSError as e:
        if e.filename is None:
            return _unexpected(e, debug)
        # a path given on the command line that the system refuses (too long, a loop)
        eprint(f"gpututor: {e.filename}: {e.strerror or e}")
        return BAD_INPUT
    except Exception as e:  # noqa: BLE001 - the one place that turns surprises into a sentence
        return _unexpected(e, debug)


def _unexpected(e: BaseException, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exception(e)
    text = str(e).strip().splitlines()
    eprint(f"gpututor: unexpected error: {type(e).__name__}: {text[0] if text else ''}".rstrip(": "))
    if not debug:
        eprint("run with GPUTUTOR_DEBUG=1 for details")
    return FAILED


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _script_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """`inspect SCRIPT [OPTIONS] -- ARGS`: everything after the -- is the script's own, options included."""
    if "inspect" in argv and "--" in argv[argv.index("inspect") :]:
        cut = argv.index("--", argv.index("inspect"))
        return argv[:cut], argv[cut + 1 :]
    return argv, None


def _main(argv: list[str] | None) -> int:
    argv, script_args = _script_args(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    if script_args is not None:
        args.script_args = script_args
    ctx = _context(args)
    from tutor import paths, threads

    paths.route_torch_caches(os.environ)  # for torch here and in every process started from here
    threads.set_env(os.environ)  # likewise: how many threads training uses (tutor/threads.py)
    if args.command is not None:  # the TUI shows them on screen instead
        for warning in ctx.warnings:
            eprint(f"warning: {warning}")
    module, name = HANDLERS[args.command]
    handler = getattr(importlib.import_module(f"tutor.cli.{module}"), name)
    return handler(args, ctx)
