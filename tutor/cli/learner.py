"""The learner's verbs: the TUI, list, doctor, check, exercise, instrument, export, profile, submit."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from tutor import __version__
from tutor.cli.context import (
    BAD_INPUT,
    FAILED,
    OK,
    BadInput,
    Context,
    UsageError,
    bad,
    check_lesson_dirs,
    closest,
    eprint,
    find_step,
    json_safe,
    print_json,
    rich_console,
    write_file,
)
from tutor.present import metric as fmt

NO_TTY_MESSAGE = (
    "gpututor's tutor needs an interactive terminal; "
    "try `gpututor list` or `gpututor run NAME` (see `gpututor --help`)."
)


def cmd_tui(args: argparse.Namespace, ctx: Context) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        eprint(NO_TTY_MESSAGE)
        return BAD_INPUT
    check_lesson_dirs(ctx)
    from tutor.ui.app import TutorApp

    app = TutorApp(
        lessons_dirs=ctx.lessons_dirs,
        device=ctx.device,
        data_dir=str(ctx.data_dir) if ctx.data_dir else None,
        warnings=ctx.warnings,
    )
    app.run()
    code = getattr(app, "return_code", None)
    return code if isinstance(code, int) else OK


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    from tutor.course.catalog import builtin_lessons_dir, discover
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    with Progress() as progress:
        rows: list[dict[str, Any]] = []
        for item in catalog.lessons:
            ids = {s.id for s in item.lesson.steps}
            rows.append(
                {
                    "id": item.lesson.id,
                    "title": item.lesson.title,
                    "summary": item.lesson.summary,
                    "steps": len(item.lesson.steps),
                    "done": len(progress.completed_steps(item.lesson.id) & ids),
                    "position": progress.position(item.lesson.id),
                    "path": str(item.path),
                }
            )
        warning = progress.warning
    broken = [
        {"path": str(path), "errors": [{"line": i.line, "col": i.col, "message": i.message} for i in err.issues]}
        for path, err in catalog.broken
    ]
    if warning:
        eprint(f"warning: {warning}")
    if args.json:
        print_json({"lessons": rows, "broken": broken})
        return OK

    from rich.markup import escape
    from rich.table import Table

    console = rich_console()
    if rows:
        table = Table(title="Lessons", title_justify="left")
        table.add_column("id", no_wrap=True)
        table.add_column("title")
        table.add_column("steps", justify="right")
        table.add_column("progress", justify="right", no_wrap=True)
        builtin = builtin_lessons_dir().resolve()
        home = Path.home()
        for r in rows:
            folder = Path(r["path"]).resolve().parent
            title = escape(r["title"])
            if folder != builtin:  # one of your lesson folders (its lesson overrides a built-in of the same id)
                where = f"~/{folder.relative_to(home)}" if folder.is_relative_to(home) else str(folder)
                title += f"\n[dim]from {escape(where)}[/]"
            table.add_row(r["id"], title, str(r["steps"]), f"{r['done']}/{r['steps']}")
        console.print(table)
        if any(Path(r["path"]).resolve().parent != builtin for r in rows):
            console.print("[dim]Lessons without a “from” line are the built-in ones.[/]")
    else:
        console.print("No lessons found.")
    for path, err in catalog.broken:
        console.print(f"broken lesson file {path}:", style="bold red", markup=False)
        for issue in err.issues:
            console.print(f"  {issue}", markup=False)
    return OK


def cmd_doctor(args: argparse.Namespace, ctx: Context) -> int:
    if args.selftest:
        return _selftest(args, ctx)
    report, problems = _doctor_report(ctx, remeasure_peak=args.peak)
    if args.json:
        print_json(report)
    else:
        _print_doctor(report)
    for p in problems:
        eprint(f"gpututor: {p}")
    return BAD_INPUT if problems else OK


def _selftest(args: argparse.Namespace, ctx: Context) -> int:
    from rich.markup import escape

    from tutor.experiments import devices, selftest

    try:
        checks = selftest.run_checks(ctx.device)
        results = []
        console = rich_console()
        if not args.json:
            console.print("[bold]gpututor doctor --selftest[/]: each device path the lessons use, for real")
        for check in checks:
            results.append(check)
            if not args.json:
                mark = {selftest.OK: "[green]ok    [/]", selftest.FAILED: "[bold red]failed[/]"}.get(
                    check.status, "[dim]n/a   [/]"
                )
                console.print(
                    f"{mark} {escape(check.name)}: {escape(check.detail)} [dim]({check.seconds:.1f} s)[/]",
                    highlight=False,
                )
    except devices.DeviceError as e:
        raise UsageError(str(e)) from None
    failed = [c for c in results if c.status == selftest.FAILED]
    if args.json:
        print_json({"checks": [c.as_dict() for c in results], "failed": len(failed)})
    else:
        counts = {s: sum(c.status == s for c in results) for s in (selftest.OK, selftest.FAILED, selftest.NOT_HERE)}
        console.print(
            f"{counts[selftest.OK]} ok, {counts[selftest.FAILED]} failed, {counts[selftest.NOT_HERE]} "
            f"not applicable here, in {sum(c.seconds for c in results):.1f} s"
        )
    return FAILED if failed else OK


def _doctor_report(ctx: Context, remeasure_peak: bool = False) -> tuple[dict[str, Any], list[str]]:
    import platform
    import warnings

    from tutor import paths
    from tutor.course.catalog import builtin_lessons_dir

    problems: list[str] = []
    report: dict[str, Any] = {
        "gpututor": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    selected: Any = None
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken torch install is exactly what doctor reports
        report["torch"] = None
        report["torch_error"] = f"{type(e).__name__}: {e}"
        problems.append(f"PyTorch cannot be imported ({type(e).__name__}: {e}); reinstall it (pip install torch)")
    else:
        from tutor.experiments import devices

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
            report.update(
                {
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
                }
            )
        from tutor.experiments import gpu_share

        cap = gpu_share.cap_mib()
        report["gpu_memory_cap_mb"] = cap
        report["devices"] = [
            {**d.as_dict(), "describe": d.describe(), "sharing": d.sharing(cap, gpu_share.cap_source())}
            for d in map(devices.with_free_memory, devices.available())
        ]
        try:
            selected = devices.resolve(ctx.device)
            report["selected_device"] = selected.torch_device
        except devices.DeviceError as e:
            selected = report["selected_device"] = None
            problems.append(str(e))
        if selected is not None:
            report["peak"] = _peak_report(selected, remeasure_peak)
            from tutor.cli.hardware import doctor_report

            report["calibration"] = doctor_report(selected)
    from tutor.cli.hardware import class_report

    report["class"] = class_report(report.get("selected_device") and selected)  # the queue even without torch
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


def _peak_report(dev: Any, remeasure: bool) -> dict[str, Any]:
    """The selected device's measured matmul peaks (MFU's denominator): read from the cache,
    so plain `doctor` stays quick; measured only with --peak (a few seconds)."""
    from tutor.measurement import peak

    try:
        return peak.report(dev, remeasure=remeasure)
    except Exception as e:  # noqa: BLE001 - a failed sweep (out of memory on a shared GPU) is reported, not fatal
        return {"error": f"{type(e).__name__}: {e}", "measure_command": peak.MEASURE_COMMAND}


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

    c = rich_console()
    c.print(f"[bold]gpututor {report['gpututor']}[/]  python {report['python']}  {escape(report['platform'])}")
    if report.get("torch") is None:
        c.print(f"[red]torch: not importable[/] ({escape(report.get('torch_error', ''))})")
    else:
        cudnn = report["cudnn"]
        c.print(
            f"torch {report['torch']}  CUDA {report['cuda'] or 'none (CPU build)'}  "
            f"cuDNN {cudnn if cudnn else 'none'}  MPS built: {report['mps_built']}"
        )
        c.print("[bold]devices[/] (best first):")
        for d in report["devices"]:
            caps = [f"{k}: {'yes' if d[k] else 'no'}" for k in ("bf16", "fp16", "tensor_cores")]
            c.print(f"  {escape(d['describe'])}")
            c.print(f"      {', '.join(caps)}")
            if d.get("sharing"):
                c.print(f"      memory: {escape(d['sharing'])}")
        if not any(d["kind"] in ("cuda", "mps") for d in report["devices"]):
            c.print("  no GPU here: lessons run on the CPU and say what they would compare on a GPU")
        if report.get("gpu_memory_cap_mb"):
            from tutor.experiments import gpu_share

            c.print(
                f"GPU memory per run: capped at {report['gpu_memory_cap_mb']:,} MiB ({gpu_share.cap_source()}; "
                "for a GPU shared by a class)"
            )
        tf32 = report["tf32"]
        c.print(
            f"TF32: matmul {'on' if tf32['matmul_allow_tf32'] else 'off'}, "
            f"cuDNN {'on' if tf32['cudnn_allow_tf32'] else 'off'}, "
            f"float32_matmul_precision={tf32['float32_matmul_precision']}"
        )
        sel = report.get("selected_device")
        c.print(f"selected device: {sel if sel else '[red]not available (see below)[/]'}")
        if "peak" in report:
            _print_peak(c, report["peak"])
        if "calibration" in report:
            from tutor.cli.hardware import print_doctor

            print_doctor(c, report["calibration"])
    if "class" in report:
        from tutor.cli.hardware import print_class

        print_class(c, report["class"])
    data = report["data"]
    c.print("[bold]data[/]:")
    if "source" in data:
        src = data["source"]
        if isinstance(src, dict):
            for k, v in src.items():
                c.print(f"  {k}: {escape(fmt(v))}")
        else:
            c.print(f"  {escape(str(src))}")
    c.print(f"  dir: {escape(data['dir'])} (from {data['from']})")
    if data["mnist_present"]:
        c.print(f"  MNIST raw files: {len(data['mnist_raw_files'])} found")
    elif "source" in data:
        pass  # the source line already said it is missing and what happens then
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


def _print_peak(c: Any, peak: dict[str, Any]) -> None:
    from rich.markup import escape

    if "error" in peak:
        c.print(f"[bold]measured peak[/]: [red]could not be measured[/] ({escape(peak['error'])})")
        return
    threads = peak["threads"]
    with_threads = f", with the {threads} thread{'s' if threads != 1 else ''} training uses" if threads else ""
    c.print(f"[bold]measured peak[/] (what MFU is measured against; {escape(peak['device'])}{with_threads}):")
    for e in peak["entries"]:
        now = " [green](just now)[/]" if e["dtype"] in peak["measured_now"] else ""
        c.print(
            f"  {e['dtype']}: {fmt(e['tflops'], 'TFLOP/s')}, measured {e['measured_on']} with torch "
            f"{escape(e['torch'])}{now}\n      [dim]{escape(e['how_text'])}[/]",
            highlight=False,
        )
        if e["stale"]:
            c.print(f"      [yellow]not reused[/]: {escape(e['stale'])}; measured again on next use")
    for dtype in peak["not_measured"]:
        if not any(e["dtype"] == dtype for e in peak["entries"]):
            c.print(f"  {dtype}: not measured yet")
    if not peak["measured_now"]:
        c.print(
            f"  [dim]`{peak['measure_command']}` measures (a few seconds), in place of what is cached; a "
            f"pipeline-breakdown run measures a missing one itself. Cache: {escape(peak['cache_file'])}[/]"
        )


def cmd_check(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    from tutor.course.lesson import CheckStep, PredictStep
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession

    try:
        lesson, step = find_step(
            ctx, args.lesson, args.check, (CheckStep, PredictStep), "steps that take an answer", "which takes no answer"
        )
    except BadInput as e:
        return bad(args, "check", str(e))

    answer = sys.stdin.read() if args.answer == "-" else args.answer
    if not answer.strip():
        return bad(args, "check", "the answer is empty: give it with --answer TEXT (or --answer - to read stdin)")
    if getattr(args, "record", False):
        return _check_recorded(args, lesson, step, answer)
    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        graded = LessonSession(lesson, progress).grade(step, answer)  # as the TUI grades it
    verdict, run_record = graded.verdict, graded.evidence.run
    if args.json:
        print_json(verdict.as_dict())
        return OK
    c = rich_console()
    if verdict.correct:
        c.print("[bold green]correct[/]")
    elif verdict.judged:
        c.print("[bold yellow]not yet[/]")
    else:  # nothing to judge it against, or no option it names: it counts neither way
        c.print("[bold]not graded[/]")
    if verdict.feedback:
        c.print(verdict.feedback, markup=False)
    if verdict.missing:
        c.print(f"missing: {', '.join(verdict.missing)}", markup=False)
    if run_record is not None:
        c.print(
            f"(graded with the metrics of your run #{run_record.id} of {run_record.experiment})",
            style="dim",
            markup=False,
        )
    return OK


def _check_recorded(args: argparse.Namespace, lesson: Any, step: Any, answer: str) -> int:
    """`check --record`: a check's answer graded and recorded as the TUI records it (a right one
    completes the step); a prediction locked (once), and revealed where a stored run measures it."""
    from tutor.cli.run import VERDICT_WORDS, reveal_line
    from tutor.course.lesson import PredictStep, RunStep
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession, Reveal, Unreadable

    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        session = LessonSession(lesson, progress)
        if isinstance(step, PredictStep):
            locked = session.prediction(step)
            if locked is not None:
                from tutor.classroom.collect import iso

                return bad(
                    args,
                    "check",
                    f"your prediction for {step.id!r} is already locked ({locked.answer!r}, at "
                    f"{iso(locked.locked_at)}): a prediction is locked once",
                )
            try:
                locked = session.lock(step, answer)
            except Unreadable as e:
                return bad(args, "check", f"{e} (nothing was recorded)")
            from tutor.classroom.collect import prediction_record

            record = prediction_record(session, step, locked)
            revealed = session.reveal(step)
            if args.json:
                print_json({"recorded": True, **record.model_dump(mode="json")})
                return OK
            c = rich_console()
            c.print(f"locked: {locked.answer}", markup=False)
            if isinstance(revealed, Reveal):  # a stored run of its step measures it: the reveal, as the TUI shows it
                c.print(f"{VERDICT_WORDS[record.verdict]}: {record.feedback}", markup=False)
            else:
                c.print(reveal_line(revealed), markup=False)
                after = lesson.run_after(lesson.index(step.id))
                if isinstance(after, RunStep):
                    c.print(
                        f"(without the tutor: gpututor run {after.experiment} --record {lesson.id}:{after.id})",
                        style="dim",
                        markup=False,
                    )
            return OK
        try:
            graded = session.answer(step, answer)
        except Unreadable as e:
            return bad(args, "check", f"{e} (nothing was recorded)")
    verdict = graded.verdict
    if args.json:
        print_json({"recorded": True, **verdict.as_dict()})
        return OK
    c = rich_console()
    c.print("[bold green]correct[/] (recorded)" if verdict.correct else "[bold yellow]not yet[/] (recorded)")
    if verdict.feedback:
        c.print(verdict.feedback, markup=False)
    if verdict.missing:
        c.print(f"missing: {', '.join(verdict.missing)}", markup=False)
    return OK


def cmd_exercise(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    from tutor.course import workspace
    from tutor.course.lesson import ExerciseStep

    try:
        lesson, step = find_step(ctx, args.lesson, args.step, (ExerciseStep,), "exercise steps", "not an exercise")
    except BadInput as e:
        return bad(args, "exercise", str(e))
    if args.watch and args.json:
        return bad(args, "exercise", "--watch prints for a person, run after run; --json is for one run")
    if args.file:
        return _grade_exercise_file(args, lesson, step, Path(args.file).expanduser(), None)
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession

    with Progress() as progress:  # the learner's own file, as the tutor keeps it; the run counts
        session = LessonSession(lesson, progress)
        path = session.code_file(step)
        if workspace.read_code(path) is None:
            session.save_draft(step, session.draft(step) or step.starter)
        return _grade_exercise_file(args, lesson, step, path, session)


def _grade_exercise_file(args: argparse.Namespace, lesson: Any, step: Any, path: Path, session: Any) -> int:
    from tutor.course import workspace
    from tutor.paths import home_dir

    if path.is_dir():
        return bad(args, "exercise", f"{args.file or path}: is a folder; give the Python file to grade")
    code = workspace.read_code(path)
    if code is None:
        return bad(args, "exercise", f"{args.file or path}: cannot read it (missing, unreadable or not UTF-8 text)")

    from tutor.exercises.grader import grade_exercise

    workdir = home_dir() / "exercises" / lesson.id / step.id

    def to_stderr(text: str) -> None:
        sys.stderr.write(text)
        sys.stderr.flush()

    stream = None if args.json else to_stderr

    def grade(code: str) -> Any:
        result = grade_exercise(step, code, workdir, on_output=stream)
        if session is not None:
            session.record_exercise(step, result, code)
        return result

    if not args.file and not args.json:
        _word_wrapped(rich_console(stderr=True)).print(
            f"{lesson.id} · {step.title or step.id}: {workspace.shown_path(path)}", markup=False
        )
    result = grade(code)
    if args.json:
        print_json(result.as_dict())
        return OK if result.passed else FAILED
    c = _word_wrapped(rich_console())
    _print_exercise_result(c, result)
    if not args.watch:
        return OK if result.passed else FAILED
    import time

    watch = workspace.FileWatch(path, known=code)
    c.print(
        f"Watching {workspace.shown_path(path)}: save it in any editor to run it again; ctrl+c stops.",
        style="dim",
        markup=False,
    )
    try:
        while True:
            time.sleep(workspace.POLL_S)
            code = watch.poll()
            if code is None:
                continue
            c.rule(f"saved at {time.strftime('%H:%M:%S')}: running it", style="dim")
            result = grade(code)
            _print_exercise_result(c, result)
            c.print("Watching: save again to run it again; ctrl+c stops.", style="dim", markup=False)
    except KeyboardInterrupt:
        c.print("Stopped watching." + (" It passed." if result.passed else ""), markup=False)
        return OK if result.passed else FAILED


def _word_wrapped(console: Any) -> Any:
    """In a terminal, long lines wrap at a word (the terminal's own wrap broke "mo|del" at 80
    columns); piped, each stays one line for the reader's tools."""
    console.soft_wrap = not console.is_terminal
    return console


def _print_exercise_result(c: Any, result: Any) -> None:
    from rich.table import Table
    from rich.text import Text

    c.print("[bold green]passed[/]" if result.passed else "[bold yellow]not yet[/]")
    rows = Table.grid(padding=(0, 1))  # a wrapped requirement goes on under its words, not under its mark
    rows.add_column(no_wrap=True)
    rows.add_column()
    for r in result.requirements:
        mark = "ok  " if r.passed else "FAIL" if r.judged else "skip"
        line = f"{r.name}" + (f": {r.feedback}" if r.feedback else "")
        if c.soft_wrap:
            c.print(f"  {mark} {line}", markup=False)
        else:
            rows.add_row(f"  {mark}", Text(line))
    if rows.rows:
        c.print(rows)
    for note in result.checker_notes:
        c.print(f"  ({note})", style="dim", markup=False)
    c.print(result.summary, markup=False)
    if result.sandbox.dropped_bytes:
        c.print(f"(output was long: {result.sandbox.dropped_bytes:,} bytes of it not kept)", style="dim", markup=False)


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
            print_json(
                {
                    name: {
                        "summary": i.summary,
                        "controls": {
                            c.name: {"kind": c.kind, "options": list(c.options), "default": c.default}
                            for c in i.controls
                        },
                        "outputs": i.outputs,
                    }
                    for name, i in REGISTRY.items()
                }
            )
        else:
            print(_instruments_text())
        return OK
    inst = REGISTRY.get(args.name)
    if inst is None:
        return bad(
            args,
            "instrument",
            f"unknown instrument {args.name!r}{closest(args.name, list(REGISTRY))}; "
            f"available: {', '.join(sorted(REGISTRY))}",
        )
    given: dict[str, str] = {}
    for item in args.sets:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            return bad(args, "instrument", f"--set expects KEY=VALUE (e.g. --set optimizer=sgd), got {item!r}")
        given[key.strip()] = raw.strip()
    try:
        settings = inst.settings(given)
    except SettingsError as e:
        return bad(args, "instrument", str(e))
    # Only some settings read the learner's runs or this device (which loads torch); the rest is arithmetic.
    context = _instrument_context(settings) if inst.needs_context(settings) else None
    reading = inst.compute(settings, context)
    if args.json:
        print_json(
            {
                "instrument": inst.name,
                "settings": settings,
                "outputs": reading.outputs,
                "verdict": reading.verdict,
                "level": reading.level,
                "math": list(reading.math),
                "reference": list(reading.reference),
                "notes": list(reading.notes),
            }
        )
        return OK
    from tutor.instruments.render import reading as render

    c = rich_console()
    c.print(
        f"[bold]{inst.title}[/]: "
        + ", ".join(f"{k}={ctl.label_of(settings[k])}" for k, ctl in ((c_.name, c_) for c_ in inst.controls)),
        markup=True,
        highlight=False,
    )
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
            eprint(f"warning: {progress.warning}")
        return instrument_context(progress, device)


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    from tutor.course.catalog import discover
    from tutor.course.ledger import export
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    ids = [item.lesson.id for item in catalog.lessons]
    for wanted in args.lessons:
        if wanted not in ids:
            raise UsageError(f"unknown lesson {wanted!r}{closest(wanted, ids)}; available: {', '.join(ids)}")
    lessons = [item.lesson for item in catalog.lessons if not args.lessons or item.lesson.id in args.lessons]
    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        document = export(lessons, progress)
    text = json.dumps(json_safe(document), indent=2, allow_nan=False) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return OK
    out = write_file(args.output, text, "ledger.json")
    eprint(f"wrote {out} ({len(document['lessons'])} lessons)")
    return OK


def cmd_profile(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    from tutor.course import profile as prediction_profile
    from tutor.course.catalog import discover
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        found = prediction_profile.profile([item.lesson for item in catalog.lessons], progress)
    if args.json:
        print_json(found.as_dict())
        return OK
    c = rich_console()
    if found.empty:
        c.print(prediction_profile.NOTHING_YET, markup=False)
    else:
        scored = len(found.scored)
        c.print(
            f"Your prediction profile: {scored} prediction{'s' if scored != 1 else ''} measured, "
            f"{len(found.concepts)} concept{'s' if len(found.concepts) != 1 else ''}",
            style="bold",
            markup=False,
        )
        for concept in found.concepts:
            c.print(f"  {concept.sentence()}", markup=False)
        c.print()
        c.print(prediction_profile.chart(found), markup=False)
        if found.advice():
            c.print()
            c.print(found.advice(), markup=False)
    if found.unscored:
        c.print()
        c.print(found.unscored_summary(), markup=False)
        for u in found.unscored:
            c.print(f"  {u.place.name()}: {u.why}", style="dim", markup=False)
    return OK


LEARNER_UNSET = (
    'no learner name: add `learner = "Your Name"` to {settings}, or give --learner NAME '
    "(asked once, and saved, when gpututor submit runs in a terminal)"
)


def _learner_name(args: argparse.Namespace, saved: Any) -> str | None:
    """--learner, else settings.toml's `learner`, else asked once in a terminal (and saved)."""
    given = (args.learner or "").strip() or saved.learner
    if given or not sys.stdin.isatty():
        return given or None
    from tutor import settings as user_settings

    try:
        typed = input("Your name, as your instructor knows you (saved in settings.toml): ").strip()
    except EOFError:
        return None
    if typed:
        path = user_settings.save_learner(typed, saved.path)
        eprint(f"saved learner = {typed!r} in {path}")
    return typed or None


def _file_slug(name: str) -> str:
    """A learner's name as part of a file name: letters, digits and dashes."""
    import re
    import unicodedata

    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-") or "learner"


def cmd_submit(args: argparse.Namespace, ctx: Context) -> int:
    check_lesson_dirs(ctx)
    import datetime

    from tutor import settings as user_settings
    from tutor.classroom import bundle as bundles
    from tutor.classroom.collect import build
    from tutor.course.catalog import discover
    from tutor.course.progress import Progress

    catalog = discover(ctx.lessons_dirs)
    ids = [item.lesson.id for item in catalog.lessons]
    for wanted in args.lessons:
        if wanted not in ids:
            return bad(args, "submit", f"unknown lesson {wanted!r}{closest(wanted, ids)}; available: {', '.join(ids)}")
    chosen = [
        (item.lesson, item.path) for item in catalog.lessons if not args.lessons or item.lesson.id in args.lessons
    ]
    saved = user_settings.load()
    learner = _learner_name(args, saved)
    if not learner:
        return bad(args, "submit", LEARNER_UNSET.format(settings=saved.path))
    if args.output:
        target = args.output
    else:
        name = f"{_file_slug(learner)}-{datetime.date.today().isoformat()}.gpututor.json"
        class_dir = user_settings.class_dir(saved)
        if class_dir is None:
            target = name
        elif not class_dir.is_dir():
            return bad(
                args,
                "submit",
                f"the class folder {class_dir} does not exist (class_dir in {saved.path}, or "
                f"${user_settings.CLASS_DIR_ENV}); ask your instructor for its path, or give -o FILE",
            )
        else:
            submissions = class_dir / "submissions"
            try:
                submissions.mkdir(exist_ok=True)
            except OSError as e:
                return bad(args, "submit", f"cannot make {submissions} ({e.strerror or e}); give -o FILE")
            target = str(submissions / name)
    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        sealed = build(chosen, progress, learner)
    out = write_file(target, bundles.dumps(sealed), "bundle.gpututor.json")
    counts = _bundle_counts(sealed)
    if args.json:
        print_json({"file": str(out), "learner": learner, "digest": sealed.digest, **counts})
        return OK
    c = rich_console()
    c.print(
        f"Bundle for {learner}: {counts['lessons']} lesson(s), {counts['started']} started, "
        f"{counts['steps_completed']} step(s) completed",
        markup=False,
    )
    c.print(
        f"  predictions: {counts['predictions']} locked, {counts['predictions_measured']} measured "
        f"({counts['hits']} on target)",
        markup=False,
    )
    c.print(f"  checks: {counts['checks']} answered, {counts['checks_first_try']} right first try", markup=False)
    c.print(f"  exercises: {counts['exercises']} tried, {counts['exercises_passed']} passed", markup=False)
    c.print(f"  machine: {sealed.machine.device}", markup=False)
    c.print(f"Wrote {out}", markup=False)
    return OK


def _bundle_counts(sealed: Any) -> dict[str, int]:
    lessons = sealed.lessons
    predictions = [p for lesson in lessons for p in lesson.predictions]
    checks = [c for lesson in lessons for c in lesson.checks]
    exercises = [e for lesson in lessons for e in lesson.exercises]
    return {
        "lessons": len(lessons),
        "started": sum(
            bool(lesson.completed or lesson.predictions or lesson.checks or lesson.exercises or lesson.instruments)
            for lesson in lessons
        ),
        "steps_completed": sum(len(lesson.completed) for lesson in lessons),
        "predictions": len(predictions),
        "predictions_measured": sum(p.verdict != "unmeasured" for p in predictions),
        "hits": sum(p.verdict == "hit" for p in predictions),
        "checks": len(checks),
        "checks_first_try": sum(c.first_try for c in checks),
        "exercises": len(exercises),
        "exercises_passed": sum(e.passed for e in exercises),
    }
