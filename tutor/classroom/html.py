"""The class report as one self-contained HTML page (`gpututor class DIR --html FILE`).

Inline CSS and inline SVG only: no script, no font or image to fetch, so it opens from a USB stick
or an LMS upload with no network, and prints. Every string a learner or a lesson file wrote is
escaped.
"""

from __future__ import annotations

import math
from html import escape

from tutor.classroom.report import ClassReport, ConceptSummary
from tutor.present import number

CSS = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; margin: 2em auto; max-width: 60em; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .2em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccd; }
table { border-collapse: collapse; width: 100%; margin: .5em 0; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid #e4e6ee; vertical-align: top; }
th { background: #f3f4f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #667; } .flag { color: #a33; } svg text { font: 12px system-ui, sans-serif; fill: #1d2330; }
@media print { body { margin: 0; } h2 { break-after: avoid; } }
"""

BAR_W = 320  # pixels of a full bar


def _table(head: list[str], rows: list[list[str]], numeric: frozenset[int] = frozenset()) -> str:
    """Cells are escaped here; pass plain text."""
    if not rows:
        return '<p class="muted">None yet.</p>'
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{escape(c)}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<table><tr>{th}</tr>{body}</table>"


def _completion_chart(report: ClassReport) -> str:
    rows = report.lessons
    height = 24 * len(rows) + 8
    parts = [f'<svg width="{300 + BAR_W + 200}" height="{height}" role="img" aria-label="completion per lesson">']
    for i, lesson in enumerate(rows):
        y = 4 + 24 * i
        width = max(1.0, BAR_W * lesson.mean_share)
        parts.append(f'<text x="0" y="{y + 15}">{escape(lesson.title[:40])}</text>')
        parts.append(f'<rect x="300" y="{y + 3}" width="{BAR_W}" height="16" fill="#e4e6ee"/>')
        parts.append(f'<rect x="300" y="{y + 3}" width="{width:.1f}" height="16" fill="#3b6fd4"/>')
        label = f"{lesson.mean_share:.0%} · {lesson.finished}/{lesson.learners} finished"
        parts.append(f'<text x="{300 + BAR_W + 6}" y="{y + 15}">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _log_x(factor: float, span: float) -> float:
    """x of a predicted / measured factor on a log axis centred on 1 (x1 in the middle)."""
    clipped = min(max(math.log(factor), -span), span)
    return 150 + BAR_W / 2 + clipped / span * (BAR_W / 2)


def _profile_chart(concepts: list[ConceptSummary]) -> str:
    """One row per concept: the class bias as a bar from x1, each learner's own bias as a dot."""
    rated = [c for c in concepts if c.bias is not None]
    if not rated:
        return '<p class="muted">No prediction was scored yet: nothing to draw.</p>'
    factors = [c.bias for c in rated if c.bias] + [b for c in rated for b in c.learner_biases]
    span = max(math.log(10), *(abs(math.log(f)) for f in factors if f > 0))
    height = 26 * len(rated) + 34
    mid = _log_x(1.0, span)
    parts = [f'<svg width="{BAR_W + 260}" height="{height}" role="img" aria-label="prediction profile">']
    for tick, label in ((1 / 10, "x1/10"), (1 / 3, "x1/3"), (1, "x1"), (3, "x3"), (10, "x10")):
        x = _log_x(tick, span)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="0" y2="{height - 20}" stroke="#dde"/>')
        parts.append(f'<text x="{x - 10:.1f}" y="{height - 6}">{label}</text>')
    parts.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="0" y2="{height - 20}" stroke="#889"/>')
    for i, c in enumerate(rated):
        y = 6 + 26 * i
        bias = c.bias or 1.0
        x = _log_x(bias, span)
        colour = "#c0504d" if bias > 1 else "#3b6fd4"
        parts.append(f'<text x="0" y="{y + 14}">{escape(c.label[:22])}</text>')
        parts.append(
            f'<rect x="{min(x, mid):.1f}" y="{y + 2}" width="{max(abs(x - mid), 1):.1f}" height="16" '
            f'fill="{colour}" opacity=".35"/>'
        )
        for b in c.learner_biases:
            parts.append(f'<circle cx="{_log_x(b, span):.1f}" cy="{y + 10}" r="3.5" fill="{colour}"/>')
        parts.append(f'<text x="{150 + BAR_W + 8}" y="{y + 14}">class x{escape(number(bias))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def render(report: ClassReport) -> str:
    n = len(report.learners)
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>Class report: {escape(report.directory)}</title><style>{CSS}</style></head><body>",
        "<h1>Class report</h1>",
        f'<p class="muted">{escape(report.directory)}: {n} learner{"s" * (n != 1)}, '
        f"{report.bundles_read} bundles read, {len(report.skipped)} files skipped.</p>",
        "<h2>Completion per lesson</h2>",
        _completion_chart(report) if report.lessons else '<p class="muted">No lesson in any bundle.</p>',
        "<h2>The class's prediction profile</h2>",
        '<p class="muted">Predicted ÷ measured on a log scale: right of x1 the class predicts more than its '
        "machines measured. The bar is the class (the geometric mean over every learner's decided "
        "predictions); each dot is one learner's own bias. Predictions a run could not decide are counted, "
        "not scored.</p>",
        _profile_chart(list(report.concepts)),
        "<ul>" + "".join(f"<li>{escape(c.sentence)}</li>" for c in report.concepts) + "</ul>",
        "<h2>Checks most missed first try</h2>",
        _table(
            ["check", "lesson", "wrong first", "right in the end", "misconceptions matched"],
            [
                [
                    c.title,
                    c.lesson,
                    f"{c.wrong_first}/{c.answered}",
                    str(c.right_eventually),
                    ", ".join(f"{m} ({k})" for m, k in c.misconceptions) or "–",
                ]
                for c in report.checks
            ],
            frozenset({2, 3}),
        ),
        "<h2>Exercises: requirements failed first</h2>",
        _table(
            ["exercise", "requirement", "failed first", "passed later", "tries to pass"],
            [
                [
                    f"{e.title} ({e.lesson})",
                    r.title or r.id,
                    str(r.failed_first),
                    str(r.passed_later),
                    "–" if r.mean_tries_to_pass is None else number(r.mean_tries_to_pass),
                ]
                for e in report.exercises
                for r in e.requirements
            ],
            frozenset({2, 3, 4}),
        ),
        "<h2>Machines seen</h2>",
        _table(
            ["device", "torch", "CUDA", "method", "MIG", "learners"],
            [
                [
                    m.device,
                    m.torch,
                    m.cuda or "–",
                    str(m.method),
                    {True: "yes", False: "no", None: "–"}[m.mig],
                    str(m.learners),
                ]
                for m in report.machines
            ],
            frozenset({3, 5}),
        ),
    ]
    if report.flags or report.skipped or report.superseded:
        out.append("<h2>Flagged and skipped</h2><ul>")
        out += [
            f'<li class="flag">{escape(f.learner)}: {escape(f.reason)} ({escape(f.path)})</li>' for f in report.flags
        ]
        out += [f"<li>skipped {escape(s.path)}: {escape(s.reason)}</li>" for s in report.skipped]
        out += [f"<li>{escape(s.reason)}</li>" for s in report.superseded]
        out.append("</ul>")
    out.append("</body></html>\n")
    return "\n".join(out)
