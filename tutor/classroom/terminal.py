"""The class report in the terminal: Rich tables that read at 80 columns (cells fold, never cut)."""

from __future__ import annotations

from collections.abc import Iterator

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tutor.classroom.report import ClassReport, ConceptSummary
from tutor.course.profile import factor_text
from tutor.present import number

MOST_MISSED = 8  # checks listed; the JSON and HTML reports hold them all


def _table(*columns: str, title: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", expand=False)
    for i, name in enumerate(columns):
        table.add_column(name, overflow="fold", justify="left" if i == 0 else "right")
    return table


def _pct(share: float) -> str:
    return f"{round(share * 100)}%"


def _bar(share: float, width: int = 10) -> str:
    filled = round(share * width)
    return "█" * filled + "·" * (width - filled)


def render(report: ClassReport) -> RenderableType:
    return Group(*_parts(report))


def _parts(report: ClassReport) -> Iterator[RenderableType]:
    n = len(report.learners)
    where = f" in {report.directory}" if report.directory else ""
    head = Text(f"Class report{where}: {n} learner{'s' if n != 1 else ''}", style="bold")
    read = f"{report.bundles_read} bundle{'s' if report.bundles_read != 1 else ''} read"
    if report.superseded:
        read += f", {len(report.superseded)} superseded by a later one"
    if report.skipped:
        read += f", {len(report.skipped)} file{'s' if len(report.skipped) != 1 else ''} skipped"
    yield head
    yield Text(read + ".")
    yield from _problems(report)
    if not report.learners:
        return
    yield from _completion(report)
    yield from _profile(report)
    yield from _checks(report)
    yield from _exercises(report)
    yield from _machines(report)


def _problems(report: ClassReport) -> Iterator[RenderableType]:
    if report.flags:
        table = _table("learner", "flag", "why", title="Flagged bundles: check before grading")
        table.columns[1].justify = table.columns[2].justify = "left"
        for f in report.flags:
            table.add_row(f.learner, f.kind, f.reason)
        yield Text()
        yield table
    if report.skipped or report.superseded:
        yield Text()
        yield Text("Not in the report:", style="bold")
        for s in report.skipped:
            yield Text(f"  {s.path}: {s.reason}", overflow="fold")
        for d in report.superseded:
            yield Text(f"  {d.path}: {d.reason}", overflow="fold")


def _completion(report: ClassReport) -> Iterator[RenderableType]:
    table = _table("lesson", "learners", "finished", "steps done", title="Completion")
    for row in report.lessons:
        table.add_row(
            row.title,
            f"{row.learners}/{row.class_size}",
            str(row.finished),
            f"{_bar(row.mean_share)} {_pct(row.mean_share)}",
        )
    yield Text()
    yield table


def _spread(c: ConceptSummary) -> str:
    if c.spread is None:
        return "–"
    low, high = c.spread
    if len(c.learner_biases) == 1:
        return f"{number(round(low, 2))} (1 learner)"
    return f"{number(round(low, 2))} – {number(round(high, 2))}"


def _profile(report: ClassReport) -> Iterator[RenderableType]:
    yield Text()
    yield Text("Prediction profile (predicted ÷ measured, geometric mean)", style="bold")
    if not report.concepts:
        yield Text("  No learner has a prediction with a concept yet.")
        return
    for c in report.concepts:
        yield Text(f"• {c.sentence}", overflow="fold")
    table = _table("concept", "learners", "hit/miss/?", "class bias", "learners' biases", title="")
    for c in report.concepts:
        table.add_row(
            c.label,
            str(c.learners),
            f"{c.hits}/{c.misses}/{c.undecided}",
            "–" if c.bias is None else number(round(c.bias, 2)),
            _spread(c),
        )
    yield table
    yield Text(
        "Bias above 1: the class predicts more than it measured; "
        f"{factor_text(2)} means twice. ? = the run could not tell.",
        style="dim",
    )


def _checks(report: ClassReport) -> Iterator[RenderableType]:
    if not report.checks:
        return
    table = _table(
        "check", "wrong 1st", "right", "wrong answers: misconception or option", title="Checks most missed first try"
    )
    table.columns[3].justify = "left"
    for c in report.checks[:MOST_MISSED]:
        matched = c.wrong_answers_in_words()
        table.add_row(f"{c.title} ({c.lesson})", f"{c.wrong_first}/{c.answered}", str(c.right_eventually), matched)
    yield Text()
    yield table
    if len(report.checks) > MOST_MISSED:
        yield Text(f"{len(report.checks) - MOST_MISSED} more checks in --json and --html.", style="dim")


def _exercises(report: ClassReport) -> Iterator[RenderableType]:
    if not report.exercises:
        return
    table = _table("exercise", "passed 1st", "passed", "tries to pass", title="Exercises")
    for e in report.exercises:
        tries = "–" if e.mean_tries_to_pass is None else number(round(e.mean_tries_to_pass, 1))
        table.add_row(f"{e.title} ({e.lesson})", f"{e.passed_first}/{e.attempted}", str(e.passed), tries)
        for r in e.requirements:
            later = "" if r.mean_tries_to_pass is None else f", passed by try {number(round(r.mean_tries_to_pass, 1))}"
            table.add_row(
                Text(f"  ✗ {r.title}", style="dim"), f"failed {r.failed_first}", f"{r.passed_later} later", later[2:]
            )
    yield Text()
    yield table


def _machines(report: ClassReport) -> Iterator[RenderableType]:
    table = _table("device", "torch", "CUDA", "method", "learners", title="Machines seen")
    for m in report.machines:
        method = str(m.method) + ("" if m.method >= report.method else " (old)")
        device = m.device + (" [MIG]" if m.mig else "")
        table.add_row(device, m.torch, m.cuda or "–", method, str(m.learners))
    yield Text()
    yield table
