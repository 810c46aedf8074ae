"""The instructor's verbs: lint, schema, new, lesson test, class."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from tutor.cli.context import (
    BAD_INPUT,
    FAILED,
    OK,
    Context,
    UsageError,
    activate_packs,
    bad,
    eprint,
    json_safe,
    pack_dirs,
    print_json,
    rich_console,
    write_file,
)


def cmd_lint(args: argparse.Namespace, ctx: Context) -> int:
    from tutor.course.lesson import LessonError, LessonIssue
    from tutor.course.lesson_yaml import parse_yaml
    from tutor.course.loader import lint_file, without_pack_knock_ons

    files: list[Path] = []
    problems = 0
    warnings: list[LessonIssue] = []
    for name in args.paths:
        path = Path(name)
        if path.is_dir():
            found = sorted({*path.rglob("*.yaml"), *path.rglob("*.yml")})
            if not found:
                eprint(f"{name}: no lesson files (*.yaml, *.yml) in this directory")
                problems += 1
            files.extend(found)
        else:
            files.append(path)  # a missing file is reported by load_file as path:1:1

    # A folder pack's experiments.py sits beside its lessons: load it before they are checked.
    pack_problems: list[LessonIssue] = activate_packs(pack_dirs(args.paths, files))
    issues: list[LessonIssue] = list(pack_problems)
    checked: set[Path] = {*files, *(Path(i.path) for i in pack_problems)}  # a broken pack is a file checked
    ids: dict[str, Path] = {}
    good = 0
    for path in files:
        try:
            lesson, lesson_warnings = lint_file(path)
        except LessonError as e:
            issues.extend(without_pack_knock_ons(e.issues, pack_problems))
            continue
        warnings += lesson_warnings
        if lesson.id in ids:
            line, col = _id_position(path, parse_yaml)
            issues.append(
                LessonIssue(str(path), line, col, f"duplicate lesson id {lesson.id!r} (also in {ids[lesson.id]})")
            )
            continue
        ids[lesson.id] = path
        good += 1
    bad_files = {i.path for i in issues}
    for issue in sorted([*issues, *warnings], key=lambda i: (i.path, i.line, i.col)):
        print(json.dumps(_issue_json(issue)) if args.json else issue, flush=True)
    problems += len(issues)
    if args.json:
        print(
            json.dumps(
                {
                    "errors": problems,
                    "warnings": len(warnings),
                    "files": len(checked),
                    "files_with_errors": len(bad_files),
                    "lessons_ok": good,
                }
            ),
            flush=True,
        )
    # Warnings do not fail lint: the lesson works, perhaps not as its author meant.
    warned = f", {len(warnings)} warning{'s' * (len(warnings) != 1)}" if warnings else ""
    if problems:
        eprint(
            f"lint: {len(issues)} error{'s' * (len(issues) != 1)} in {len(bad_files)} of "
            f"{len(checked)} file{'s' * (len(checked) != 1)}{warned}"
        )
        return BAD_INPUT
    eprint(f"ok: {good} lesson{'s' * (good != 1)}{warned}")
    return OK


# "... (did you mean 'prompt'?)": the word lint suggests in place of the one it points at.
_DID_YOU_MEAN = re.compile(r"\(did you mean (['\"])(.+?)\1\?\)")


def _issue_json(issue: Any) -> dict[str, Any]:
    """One issue for an editor or CI: where, how bad, what, and the replacement lint suggests
    for the word at line:column (a did-you-mean), or null."""
    fix = _DID_YOU_MEAN.search(issue.message)
    return {
        "path": issue.path,
        "line": issue.line,
        "column": issue.col,
        "severity": issue.severity,
        "message": issue.message,
        "fix": fix.group(2) if fix else None,
    }


def _id_position(path: Path, parse_yaml: Any) -> tuple[int, int]:
    try:
        _, marks = parse_yaml(path.read_text(encoding="utf-8-sig"), str(path))
        return marks.get(("id",), (1, 1))
    except Exception:  # noqa: BLE001 - the file loaded a moment ago; position is best effort
        return (1, 1)


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
    out = write_file(args.output, text, "lesson.schema.json")
    eprint(f"wrote {out}")
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
    console = rich_console()
    started = time.perf_counter()
    pack_problems = activate_packs(pack_dirs(args.paths, files))

    # Wall-clock seconds per lesson: the time since the previous outcome belongs to the lesson
    # of the next (exercise programs run side by side, so their own seconds overlap).
    wall: dict[str, float] = {}
    last = [started]

    def show(o: Any) -> None:
        now = time.perf_counter()
        wall[o.lesson] = wall.get(o.lesson, 0.0) + now - last[0]
        last[0] = now
        if args.json:
            print(json.dumps(json_safe(asdict(o))), flush=True)
            return
        mark = "[yellow]-[/]" if o.skipped else "[green]✓[/]" if o.ok else "[bold red]✗[/]"
        text = escape(o.detail)  # a lesson's words, an error's text: "[/]" in them is not markup
        # A failure says where to look, path:line as an editor opens it, before why.
        failed = f"\n    [red]{escape(o.where) + ': ' if o.where else ''}{text}[/]"
        detail = (f"  [dim]{text}[/]" if o.detail else "") if o.ok else (failed if o.detail or o.where else "")
        console.print(
            f"{mark} {escape(o.lesson)} · {escape(o.step)} · {o.kind}: {escape(o.what)} "
            f"[dim]({o.seconds:.1f} s)[/]{detail}",
            markup=True,
            highlight=False,
        )

    from tutor.authoring.lesson_test import Outcome

    outcomes = []
    for issue in pack_problems:  # a pack that does not load fails the test like a broken lesson
        outcomes.append(
            Outcome(
                issue.path,
                f"line {issue.line}",
                "lint",
                "lesson pack loads",
                False,
                issue.message,
                where=f"{issue.path}:{issue.line}",
            )
        )
        show(outcomes[-1])
    outcomes += play_paths(files, ctx.device, args.full, show, pack_problems, getattr(args, "repeats", 1))
    failed = [o for o in outcomes if not o.ok]
    skipped = [o for o in outcomes if o.skipped]
    passed = len(outcomes) - len(failed) - len(skipped)
    seconds = time.perf_counter() - started
    if args.json:
        print(
            json.dumps({"passed": passed, "skipped": len(skipped), "failed": len(failed), "seconds": round(seconds, 1)})
        )
    else:
        table = RichTable(title="lesson test", title_justify="left")
        for column in ("lesson", "passed", "skipped", "failed", "seconds"):
            table.add_column(column, justify="left" if column == "lesson" else "right")
        for lesson in dict.fromkeys(o.lesson for o in outcomes):
            mine = [o for o in outcomes if o.lesson == lesson]
            bad, left_out = sum(not o.ok for o in mine), sum(o.skipped for o in mine)
            table.add_row(
                lesson,
                str(len(mine) - bad - left_out),
                str(left_out),
                f"[bold red]{bad}[/]" if bad else "0",
                f"{wall.get(lesson, 0.0):.1f}",
            )
        console.print(table)
        console.print(
            f"{passed} passed, "
            + (f"{len(skipped)} skipped (not for this machine), " if skipped else "")
            + f"{len(failed)} failed in {seconds:.1f} s"
        )
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
    out = write_file(args.output or f"{lesson_id}.yaml", text, f"{lesson_id}.yaml", overwrite=args.force)
    eprint(
        f"wrote {out}: a lesson with one step of each kind.\n"
        f"next: edit it, `gpututor lint {out}`, then `gpututor --lessons-dir {out.parent}`"
    )
    from tutor.course.catalog import builtin_lessons_dir

    if any(p.stem == lesson_id for p in builtin_lessons_dir().glob("*.y*ml")):
        eprint(f"note: {lesson_id!r} is a built-in lesson's id: loaded with --lessons-dir, this file replaces it")
    return OK


def cmd_class(args: argparse.Namespace, ctx: Context) -> int:
    """The class report of a folder of learners' bundles: terminal, JSON, gradebook CSVs, HTML."""
    from tutor.classroom import gradebook, report
    from tutor.course.catalog import discover

    directory = Path(args.directory).expanduser()
    if not directory.is_dir():
        return bad(args, "class", f"{args.directory}: no such folder; name the folder the bundles were handed in to")
    loaded = report.load_dir(directory)
    if not loaded.bundles:
        found = (
            f"{loaded.files} .json file{'s' if loaded.files != 1 else ''}, none a bundle"
            if loaded.files
            else "no .json files"
        )
        skipped = "".join(f"\n  {s.path}: {s.reason}" for s in loaded.skipped[:5])
        return bad(args, "class", f"{args.directory}: no learner's bundle in it ({found}){skipped}")
    catalog = discover(ctx.lessons_dirs)
    built = report.build(loaded, [(item.lesson, item.path) for item in catalog.lessons])
    outputs = [
        (args.csv, lambda: gradebook.gradebook_csv(built), "grades.csv"),
        (args.long_csv, lambda: gradebook.long_csv(built), "grades-long.csv"),
    ]
    if args.html:
        from tutor.classroom import html as class_html

        outputs.append((args.html, lambda: class_html.render(built), "class.html"))
    written = [str(write_file(name, make(), example)) for name, make, example in outputs if name]
    if args.json:
        print_json({**built.as_dict(), "written": written})
        return OK
    from tutor.classroom.terminal import render

    console = rich_console()
    # Wrapped here, not by the terminal: rich_console's soft wrap would crop a folded sentence at 80
    # columns ("... 0 on ta").
    console.print(render(built), soft_wrap=False)
    for path in written:
        console.print(f"Wrote {path}")
    return OK
