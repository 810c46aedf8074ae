"""A Reading drawn with Rich: stacked bars, a budget line, a gauge. Shared by the TUI and the CLI."""

from __future__ import annotations

import math

from rich.console import Group
from rich.text import Text

from tutor.instruments.instrument import Bar, Chart, Gauge, Reading, gb, gb_gib, percent

LABEL = 13  # columns for a bar's label


def _bar_line(bar: Bar, width: int, scale: float, limit: float | None) -> Text:
    line = Text(f"{bar.label[: LABEL - 1]:<{LABEL}}")
    cells: list[tuple[str, str]] = []
    edge = 0.0
    scale = scale if math.isfinite(scale) else 0.0
    for seg in (s for s in bar.segments if not s.off):
        start = _column(edge, scale, width)
        edge += seg.value
        end = _column(edge, scale, width)
        cells += [("█", seg.style)] * max(0, end - start)
    cells += [("·", "dim")] * max(0, width - len(cells))
    cells = cells[:width]
    if limit is not None and scale and math.isfinite(limit):
        at = max(0, min(width - 1, _column(limit, scale, width)))
        cells[at] = ("┃", "bold red")
    for ch, style in cells:
        line.append(ch, style)
    return line


def _legend(items: list[tuple[str, str, bool]], width: int) -> list[Text]:
    """'■ weights 6.00 GB  ■ gradients ...', wrapped under the bars (not under their labels);
    a part switched off is '□ name value off', dim: named, not drawn."""
    lines: list[Text] = []
    line = Text(" " * LABEL)
    for style, text, off in items:
        text = f"{text} off" if off else text
        if line.cell_len > LABEL and line.cell_len + len(text) + 2 > LABEL + width:
            lines.append(line)
            line = Text(" " * LABEL)
        line.append("□ " if off else "■ ", "dim" if off else style)
        line.append(text + "  ", "dim" if off else "")
    lines.append(line)
    return lines


def chart(c: Chart, width: int) -> Group:
    width = max(10, width - LABEL)
    if not c.bars:
        return Group()
    lines: list[Text] = []
    if c.unit == "bytes":
        scale = max([b.total for b in c.bars] + ([c.limit] if c.limit else []))
        lines += [_bar_line(b, width, scale, c.limit) for b in c.bars]
        smallest = min(b.total for b in c.bars)
        if scale and smallest * width < scale:
            lines.append(Text(" " * LABEL + f"(too small to draw: {smallest / scale:.2%} of the scale)", style="dim"))
        lines += _legend([(s.style, f"{s.name} {gb(s.value)}", s.off) for s in c.bars[0].segments], width)
        if c.limit is not None:
            lines.append(Text.assemble(" " * LABEL, ("┃ ", "bold red"), f"budget {gb_gib(c.limit)}: {c.limit_label}"))
        elif c.limit_label:
            lines.append(Text.assemble(" " * LABEL, (f"budget: {c.limit_label}", "dim")))
    else:
        lines += [_bar_line(b, width, 1.0, None) for b in c.bars]
        lines += _legend([(s.style, f"{s.name} {percent(s.value)}", s.off) for s in c.bars[0].segments], width)
    return Group(*lines)


def _column(value: float, scale: float, width: int) -> int:
    """Where `value` falls on a bar `width` columns wide for `scale`, kept on the bar (a stored
    run can hold nan or 1e300; drawing that many cells would take all memory)."""
    if not scale or not math.isfinite(value):
        return 0
    return round(max(0.0, min(value / scale, 1.0)) * width)


def gauge(g: Gauge, width: int) -> Text:
    width = max(10, width - LABEL - 6)
    value = g.value if g.value is not None and math.isfinite(g.value) else 0.0
    filled = round(max(0.0, min(1.0, value)) * width)
    line = Text(f"{g.label:<{LABEL}}")
    line.append("█" * filled, "bold green")
    line.append("░" * (width - filled), "dim")
    line.append(f" {value:.1%}" if value < 0.1 else f" {percent(value)}", "bold")
    if g.marks:
        marks = [" "] * (width + 1)
        names = []
        for name, at in g.marks:
            marks[max(0, min(width, round(at * width)))] = "▲" if math.isfinite(at) else " "
            names.append(f"▲ {name} {percent(at)}")
        line.append("\n" + " " * LABEL + "".join(marks).rstrip(), "magenta")
        line.append("\n" + " " * LABEL + "  ".join(names), "magenta")
    return line


VERDICT_STYLE = {"ok": "bold green", "warning": "bold yellow", "error": "bold red"}


def reading(r: Reading, width: int, math: bool = False) -> Group:
    """The whole reading: verdict, chart, gauge, figures; the formulas only with math=True."""
    parts: list = [Text(r.verdict, style=VERDICT_STYLE[r.level]), chart(r.chart, width)]
    if r.gauge is not None:
        parts.append(gauge(r.gauge, width))
    for label, value in r.figures:
        parts.append(Text.assemble((f"{label:<{LABEL}}", "bold"), value))
    for note in r.notes:
        parts.append(Text(note, style="dim"))
    if math:
        parts.append(Text("Math peek", style="bold underline"))
        parts += [Text("  " + line) for line in r.math]
    for ref in r.reference:
        parts.append(Text(ref, style="italic magenta"))
    return Group(*parts)
