"""The class report as one self-contained HTML page (`gpututor class DIR --html FILE`).

Inline CSS and inline SVG only: no script, no font or image to fetch, so it opens from a USB stick
or an LMS upload with no network, and prints (the charts scale to the page through their viewBox).
Every string a learner or a lesson file wrote is escaped. Every number is the report's own.
"""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from tutor.classroom.report import ClassReport, ConceptSummary, LessonCompletion
from tutor.course import profile
from tutor.present import number

CSS = """
:root { --ink: #1d2330; --muted: #5c6475; --rule: #e1e4ec; --head: #f3f4f8; --blue: #3465c8; --red: #c0443f; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
       margin: 2em auto; max-width: 62em; padding: 0 1.2em; }
h1 { font-size: 1.6em; margin: 0 0 .15em; }
h2 { font-size: 1.15em; margin: 2em 0 .5em; padding-bottom: .2em; border-bottom: 2px solid var(--rule); }
p { margin: .4em 0; } .muted { color: var(--muted); } .small { font-size: .88em; }
.cards { display: flex; flex-wrap: wrap; gap: .6em; margin: 1em 0; }
.card { border: 1px solid var(--rule); border-radius: 6px; padding: .45em .9em; min-width: 7em; }
.card b { display: block; font-size: 1.5em; font-variant-numeric: tabular-nums; }
.card.warn b { color: var(--red); }
table { border-collapse: collapse; width: 100%; margin: .5em 0; font-size: .93em; }
th, td { text-align: left; padding: .28em .55em; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { background: var(--head); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.group th { background: #fff; border-bottom: 1px solid #c9cedb; padding-top: .8em; }
tr.group th span { font-weight: normal; color: var(--muted); }
code { font-size: .92em; }
.nw { white-space: nowrap; } .flag { color: var(--red); font-weight: 600; white-space: nowrap; }
svg.chart { width: 100%; height: auto; display: block; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; fill: var(--ink); }
.legend { display: flex; gap: 1.4em; flex-wrap: wrap; font-size: .88em; color: var(--muted); }
.key { display: inline-block; width: .9em; height: .9em; vertical-align: -.1em; margin-right: .3em; }
@media print {
  body { margin: 0; max-width: none; font-size: 11pt; }
  h2 { break-after: avoid; } tr, svg { break-inside: avoid; }
}
"""

WIDTH = 840  # the charts' viewBox width: the page's column at 14px
RED, BLUE, GREY = "#c0443f", "#3465c8", "#7b8394"
BAR_SHARE_FLOOR = 0.004  # a lesson nobody started still shows a sliver, so the row reads as a bar


def render(report: ClassReport) -> str:
    """The whole page."""
    n = len(report.learners)
    title = f"Class report: {Path(report.directory).name or report.directory}" if report.directory else "Class report"
    out = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="muted">{escape(report.directory)}: {report.files} .json file{_s(report.files)} found; '
        f"each learner's latest bundle counts. Measurement method of this gpututor: {report.method}.</p>",
        _cards(report, n),
        "<h2>Completion per lesson</h2>",
        _completion_chart(list(report.lessons)) if report.lessons else _none("No lesson in any bundle."),
        "<h2>The class's prediction profile</h2>",
        _profile_intro(),
        _profile_chart(list(report.concepts)),
        "<ul>" + "".join(f"<li>{escape(c.sentence)}</li>" for c in report.concepts) + "</ul>"
        if report.concepts
        else "",
        "<h2>Checks most missed first try</h2>",
        _checks_table(report),
        "<h2>Exercises: requirements failed first</h2>",
        _exercises_table(report),
        "<h2>Machines seen</h2>",
        _machines_table(report),
        "<h2>Flagged bundles and skipped files</h2>",
        _flags_section(report),
        "</body></html>\n",
    ]
    return "\n".join(part for part in out if part)


# ---------------------------------------------------------------- the pieces


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _none(sentence: str) -> str:
    return f'<p class="muted">{escape(sentence)}</p>'


def _cards(report: ClassReport, n: int) -> str:
    cards = [
        ("learners", n, False),
        ("bundles read", report.bundles_read, False),
        ("earlier bundles dropped", len(report.superseded), False),
        ("bundles flagged", len({f.path for f in report.flags}), bool(report.flags)),
        ("files skipped", len(report.skipped), bool(report.skipped)),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card{" warn" if warn else ""}"><b>{value}</b>{escape(label)}</div>'
            for label, value, warn in cards
        )
        + "</div>"
    )


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """Cells are escaped here; pass plain text."""
    th = "".join(f"<th{' class=n' if i in numeric else ''}>{escape(h)}</th>" for i, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{escape(c)}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _svg(height: float, label: str, body: list[str]) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" height="{height:.0f}" '
        f'role="img" aria-label="{escape(label)}">' + "".join(body) + "</svg>"
    )


def _completion_chart(lessons: list[LessonCompletion]) -> str:
    """One bar per lesson: the class's mean share of its steps done; the darker part the learners
    who finished it."""
    label_w, bar_x, bar_w, row = 270, 280, 240, 26  # the note after the bar needs about 300
    parts = []
    for i, lesson in enumerate(lessons):
        y = 4 + row * i
        share = BAR_SHARE_FLOOR if lesson.mean_share <= 0 else lesson.mean_share
        finished = lesson.finished / lesson.class_size if lesson.class_size else 0.0
        parts.append(
            f'<text x="{label_w}" y="{y + 15}" font-size="13" text-anchor="end">'
            f"<title>{escape(lesson.title)} ({escape(lesson.lesson)})</title>{escape(_clip(lesson.title, 36))}</text>"
            f'<rect x="{bar_x}" y="{y + 3}" width="{bar_w}" height="16" fill="#e6e9f0" rx="2"/>'
            f'<rect x="{bar_x}" y="{y + 3}" width="{bar_w * share:.1f}" height="16" fill="#9db5e6" rx="2"/>'
            f'<rect x="{bar_x}" y="{y + 3}" width="{bar_w * finished:.1f}" height="16" fill="{BLUE}" rx="2"/>'
        )
        absent = lesson.class_size - lesson.learners
        note = f"{lesson.mean_share:.0%} of steps · {lesson.finished}/{lesson.class_size} finished"
        if absent:
            note += f" · {absent} without it"
        parts.append(f'<text x="{bar_x + bar_w + 8}" y="{y + 15}" font-size="12">{escape(note)}</text>')
    legend = (
        '<div class="legend">'
        f'<span><i class="key" style="background:#9db5e6"></i>mean share of the steps done, over the learners '
        "whose bundle holds the lesson</span>"
        f'<span><i class="key" style="background:{BLUE}"></i>learners who finished every step, of the class</span>'
        "</div>"
    )
    return _svg(row * len(lessons) + 8, "completion per lesson", parts) + legend


def _profile_intro() -> str:
    return (
        '<p class="muted small">Each prediction\'s error is predicted ÷ measured, on a log scale: right of '
        "×1 the class predicted more than its own machines measured, left of it less. The bar is the class "
        "(the geometric mean over every learner's decided predictions of that concept); each dot is one "
        "learner's own bias, so the dots show the spread between learners. Predictions a run could not "
        "decide are counted in the sentences, not scored.</p>"
    )


TICKS = (1 / 100, 1 / 30, 1 / 10, 1 / 3, 1.0, 3.0, 10.0, 30.0, 100.0)
MAX_SPAN = math.log(100)  # a learner off by more sits at the axis's edge


def _tick_label(t: float) -> str:
    return f"×{number(t)}" if t >= 1 else f"×1/{number(round(1 / t))}"


def _factor(f: float) -> str:
    """A bias as the chart's right-hand column says it: ×2.15, ×0.43."""
    return f"×{number(round(f, 2))}"


def _profile_chart(concepts: list[ConceptSummary]) -> str:
    """One row per concept: the class bias as a bar from ×1, each learner's own bias as a dot."""
    rated = [c for c in concepts if c.bias is not None]
    if not rated:
        return _none("No prediction was measured and decided yet: nothing to draw.")
    label_w, plot_x, plot_w, row, top = 245, 255, 350, 28, 26
    factors = [f for c in rated for f in (c.bias or 1.0, *c.learner_biases) if f > 0]
    span = 1.06 * min(MAX_SPAN, max(math.log(10), *(abs(math.log(f)) for f in factors)))  # a margin for the dots

    def x_of(factor: float) -> float:
        clipped = min(max(math.log(factor), -span), span)
        return plot_x + plot_w / 2 + clipped / span * (plot_w / 2)

    bottom = top + row * len(rated)
    mid = x_of(1.0)
    parts = [
        f'<text x="{plot_x}" y="14" font-size="12" fill="{BLUE}">← predicted less</text>',
        f'<text x="{plot_x + plot_w}" y="14" font-size="12" fill="{RED}" text-anchor="end">predicted more →</text>',
        f'<text x="{plot_x + plot_w + 10}" y="14" font-size="12" fill="{GREY}">class (learners: lowest–highest)</text>',
    ]
    for i in range(len(rated)):  # banded rows, so a dot reads against its own concept
        if i % 2 == 0:
            parts.append(f'<rect x="0" y="{top + row * i}" width="{WIDTH}" height="{row}" fill="#f6f7fa"/>')
    for tick in TICKS:
        if abs(math.log(tick)) <= span + 1e-9:
            x = x_of(tick)
            stroke = "#8a92a3" if tick == 1.0 else "#dde1ea"
            parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 4}" y2="{bottom + 4}" stroke="{stroke}"/>')
            parts.append(
                f'<text x="{x:.1f}" y="{bottom + 18}" font-size="12" text-anchor="middle">{_tick_label(tick)}</text>'
            )
    for i, c in enumerate(rated):
        y = top + row * i
        bias = c.bias or 1.0
        colour = RED if c.verdict == "over" else BLUE if c.verdict == "under" else GREY
        x = x_of(bias)
        parts.append(
            f'<text x="{label_w}" y="{y + 18}" font-size="13" text-anchor="end"><title>{escape(c.label)}</title>'
            f"{escape(_clip(c.label, 34))}</text>"
            f'<rect x="{min(x, mid):.1f}" y="{y + 6}" width="{max(abs(x - mid), 1.5):.1f}" height="16" '
            f'fill="{colour}" opacity=".28"/>'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y + 4}" y2="{y + 24}" stroke="{colour}" stroke-width="2.5"/>'
        )
        for k, b in enumerate(c.learner_biases):
            jitter = (k % 3 - 1) * 4  # three lanes, so learners with near-equal biases stay countable
            parts.append(
                f'<circle cx="{x_of(b):.1f}" cy="{y + 14 + jitter}" r="3.2" fill="{colour}" '
                f'fill-opacity=".65" stroke="#fff" stroke-width=".6"/>'
            )
        spread = c.spread
        right = f"{_factor(bias)} ({c.learners}"
        right += f": {_factor(spread[0])}–{_factor(spread[1])})" if spread and len(c.learner_biases) > 1 else ")"
        parts.append(f'<text x="{plot_x + plot_w + 10}" y="{y + 18}" font-size="12">{escape(right)}</text>')
    legend = (
        '<div class="legend">'
        f'<span><i class="key" style="background:{RED}"></i>the class over-predicts</span>'
        f'<span><i class="key" style="background:{BLUE}"></i>under-predicts</span>'
        f'<span><i class="key" style="background:{GREY}"></i>within {round((profile.WITHIN - 1) * 100)}%, '
        "close, or off both ways</span>"
        "<span>● one learner's own bias</span>"
        "</div>"
    )
    return _svg(bottom + 26, "the class's prediction profile", parts) + legend


def _checks_table(report: ClassReport) -> str:
    if not report.checks:
        return _none("No check was answered in any bundle.")
    rows = [
        [
            c.title,
            c.lesson,
            f"{c.wrong_first}/{c.answered} ({c.missed_share:.0%})",
            f"{c.right_eventually}/{c.answered}",
            number(round(c.mean_attempts, 1)),
            c.wrong_answers_in_words("; "),
        ]
        for c in report.checks
    ]
    head = [
        "check",
        "lesson",
        "wrong first",
        "right in the end",
        "tries",
        "what the wrong answers were",
    ]
    return (
        '<p class="muted small">Most missed first try first. Each wrong answer is counted once: by the '
        "misconception it matched, or, on a choice, by the option it chose (in quotes).</p>"
        + _table(head, rows, frozenset({2, 3, 4}))
    )


def _exercises_table(report: ClassReport) -> str:
    if not report.exercises:
        return _none("No exercise was graded in any bundle.")
    head = ["requirement", "failed first", "passed later", "gradings to pass it"]
    th = "".join(f"<th{' class=n' if i else ''}>{escape(h)}</th>" for i, h in enumerate(head))
    body = []
    for e in report.exercises:
        tries = "–" if e.mean_tries_to_pass is None else number(round(e.mean_tries_to_pass, 1))
        body.append(
            f'<tr class="group"><th colspan="4">{escape(e.title)} <span>({escape(e.lesson)}): '
            f"{e.passed_first}/{e.attempted} passed first try, {e.passed}/{e.attempted} passed in the end, "
            f"{escape(tries)} gradings to pass on average</span></th></tr>"
        )
        if not e.requirements:
            body.append('<tr><td class="muted" colspan="4">no requirement failed a first grading</td></tr>')
        for r in e.requirements:
            cells = [
                r.title or r.id,
                f"{r.failed_first}/{e.attempted}",
                f"{r.passed_later}/{r.failed_first}",
                "–" if r.mean_tries_to_pass is None else number(round(r.mean_tries_to_pass, 1)),
            ]
            body.append(
                "<tr>"
                + "".join(f"<td{' class=n' if i else ''}>{escape(c)}</td>" for i, c in enumerate(cells))
                + "</tr>"
            )
    return (
        '<p class="muted small">Fewest passed first try first; under each exercise, the requirements its first '
        "gradings failed, the most learners first.</p>"
        f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _machines_table(report: ClassReport) -> str:
    if not report.machines:
        return _none("No machine in any bundle.")
    rows = [
        [
            m.device,
            m.torch,
            m.cuda or "–",
            m.driver or "–",
            str(m.method) + ("" if m.method == report.method else " (older)" if m.method < report.method else ""),
            {True: "yes", False: "no", None: "–"}[m.mig],
            f"{m.calibrated}/{m.learners}",
            str(m.hosts),
            str(m.learners),
        ]
        for m in report.machines
    ]
    head = ["device", "torch", "CUDA", "driver", "method", "MIG", "calibrated", "hosts", "learners"]
    return _table(head, rows, frozenset({6, 7, 8}))


FLAG_NAMES = {"edited": "edited", "lesson-version": "other lesson version", "older-method": "older method"}


def _rel(path: str, report: ClassReport) -> str:
    """A file as the folder the report read names it (the header names the folder)."""
    try:
        return str(Path(path).relative_to(report.directory)) if report.directory else path
    except ValueError:
        return path


def _flags_section(report: ClassReport) -> str:
    if not (report.flags or report.skipped or report.superseded):
        return _none("Every bundle is sealed, from these lesson files, and measured by this method; no file skipped.")
    out = []
    if report.flags:
        out.append(
            '<p class="muted small">Read these bundles\' numbers with care: an edited one no longer matches its '
            "digest (a check against accidents and casual edits, not proof); one from another lesson version "
            "answered other questions; one from an older measurement method timed differently.</p>"
        )
        out.append(
            "<table><thead><tr><th>learner</th><th>flag</th><th>why</th><th>file</th></tr></thead><tbody>"
            + "".join(
                f"<tr><td class=nw>{escape(f.learner)}</td><td class=flag>{escape(FLAG_NAMES.get(f.kind, f.kind))}</td>"
                f"<td>{escape(f.reason)}</td><td><code>{escape(_rel(f.path, report))}</code></td></tr>"
                for f in report.flags
            )
            + "</tbody></table>"
        )
    if report.skipped:
        out.append(
            f"<p><b>{len(report.skipped)} file{_s(len(report.skipped))} skipped</b>, not a bundle this "
            "gpututor reads:</p>"
        )
        out.append(_table(["file", "why"], [[_rel(s.path, report), s.reason] for s in report.skipped]))
    if report.superseded:
        out.append(
            f"<p><b>{len(report.superseded)} earlier bundle{_s(len(report.superseded))}</b> dropped for a "
            "later one of the same learner:</p>"
        )
        out.append(
            _table(
                ["file", "learner", "submitted", "kept"],
                [[_rel(s.path, report), s.learner, s.submitted_at, _rel(s.kept, report)] for s in report.superseded],
            )
        )
    return "".join(out)
