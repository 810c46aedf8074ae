"""Charts drawn in characters, for the run panel and the terminal alike (torch-free).

A chart is plain text: each line at most `width` characters, so it reads the same at 80x24 in
the tutor, in `gpututor run` and in a log. The run panel shows a Note of level "figure" as
it is, without wrapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tutor.present import flops_text, number


@dataclass(frozen=True)
class Point:
    """An operation on the roofline: its arithmetic intensity and the FLOP/s it reached."""

    mark: str  # one character drawn at the point
    label: str  # said in the legend
    intensity: float  # FLOP per byte moved
    tflops: float  # achieved


def roofline(
    peak_tflops: float, bandwidth_gbps: float, points: list[Point], *, width: int = 64, height: int = 12
) -> str:
    """A log-log roofline: x is FLOP/B, y is FLOP/s; the roof is min(peak, intensity x bandwidth),
    drawn '/' where memory bounds it and '_' where compute does; each point is its mark."""
    if peak_tflops <= 0 or bandwidth_gbps <= 0:
        raise ValueError("a roofline needs a positive peak and bandwidth")
    bandwidth = bandwidth_gbps * 1e9 / 1e12  # TFLOP/s per FLOP/B
    ridge = peak_tflops / bandwidth
    intensities = [p.intensity for p in points if p.intensity > 0] + [ridge]
    x_lo = 10 ** math.floor(math.log10(min(intensities) / 2))
    x_hi = 10 ** math.ceil(math.log10(max(intensities) * 2))
    achieved = [p.tflops for p in points if p.tflops > 0]
    y_hi = 10 ** math.ceil(math.log10(peak_tflops * 1.5))
    y_lo = 10 ** math.floor(math.log10(min([*achieved, x_lo * bandwidth]) / 1.5))
    axis_w = max(len(flops_text(y_hi)), len(flops_text(y_lo))) + 1
    plot_w = max(width - axis_w - 1, 16)

    def col(intensity: float) -> int:
        return round((math.log10(intensity) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo)) * (plot_w - 1))

    def row(tflops: float) -> int:  # 0 at the top
        share = (math.log10(tflops) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo))
        return min(max(round((1 - share) * (height - 1)), 0), height - 1)

    grid = [[" "] * plot_w for _ in range(height)]
    for c in range(plot_w):
        intensity = 10 ** (math.log10(x_lo) + c / (plot_w - 1) * (math.log10(x_hi) - math.log10(x_lo)))
        roof = min(peak_tflops, intensity * bandwidth)
        if roof >= y_lo:
            grid[row(roof)][c] = "_" if intensity >= ridge else "/"
    for p in points:
        if p.intensity > 0 and p.tflops > 0:
            grid[row(p.tflops)][min(max(col(p.intensity), 0), plot_w - 1)] = p.mark

    lines = []
    for r, cells in enumerate(grid):
        label = flops_text(y_hi) if r == 0 else flops_text(y_lo) if r == height - 1 else ""
        lines.append(f"{label:>{axis_w}}|" + "".join(cells).rstrip())
    lines.append(" " * axis_w + "+" + "-" * plot_w)
    left, right = f"{x_lo:g}", f"{x_hi:g} FLOP/B"
    ridge_text = f"ridge {number(ridge)}"
    ticks = [" "] * (plot_w + 1)
    place = min(max(col(ridge) - len(ridge_text) // 2, len(left) + 1), plot_w - len(right) - len(ridge_text) - 1)
    for i, ch in enumerate(left):
        ticks[i] = ch
    for i, ch in enumerate(ridge_text):
        ticks[place + i] = ch
    for i, ch in enumerate(right):
        ticks[plot_w + 1 - len(right) + i] = ch
    lines.append(" " * axis_w + "".join(ticks).rstrip())
    legend = [f"/ memory roof: {number(bandwidth_gbps, 'GB/s')} x FLOP/B", f"_ compute roof: {flops_text(peak_tflops)}"]
    legend += [f"{p.mark} {p.label}: {flops_text(p.tflops)} at {number(p.intensity)} FLOP/B" for p in points]
    lines += [" " * axis_w + text for text in legend]
    return "\n".join(line[:width] if len(line) > width else line for line in lines)


def bars(rows: list[tuple[str, float, str]], *, unit: str, width: int = 72) -> str:
    """Horizontal bars from zero, one per (label, value, value's text) row, scaled so the largest
    fills the room the labels and value texts leave; a value too small for one cell still shows '▏'."""
    if not rows or any(value < 0 for _, value, _ in rows):
        raise ValueError("bars need at least one row and no negative value")
    label_w = max(len(label) for label, _, _ in rows)
    text_w = max(len(text) for _, _, text in rows)
    room = max(width - label_w - text_w - 4, 8)
    top = max(value for _, value, _ in rows)
    lines = []
    for label, value, text in rows:
        cells = round(value / top * room) if top > 0 else 0
        bar = "█" * cells if cells else "▏"
        lines.append(f"{label:>{label_w}} |{bar:<{room}} {text:>{text_w}}".rstrip())
    lines.append(f"{'':>{label_w}} +{'-' * room}")
    lines.append(f"{'':>{label_w}}  {unit}, from 0")
    return "\n".join(line[:width] for line in lines)


def stacked_bars(
    rows: list[tuple[str, list[float], str]], parts: list[tuple[str, str]], *, unit: str, width: int = 72
) -> str:
    """Horizontal bars from zero, each made of its parts in order (one (glyph, name) per part, the
    same in every row), scaled so the largest total fills the room; a legend of the glyphs below.
    Each part ends where its running total does, so the parts add up to the bar a total would draw."""
    if not rows or any(len(values) != len(parts) or min(values) < 0 for _, values, _ in rows):
        raise ValueError("stacked bars need rows with one value, none negative, per part")
    label_w = max(len(label) for label, _, _ in rows)
    text_w = max(len(text) for _, _, text in rows)
    room = max(width - label_w - text_w - 4, 8)
    top = max(sum(values) for _, values, _ in rows)
    lines = []
    for label, values, text in rows:
        bar, total, drawn = "", 0.0, 0
        for (glyph, _), value in zip(parts, values):
            total += value
            end = round(total / top * room) if top > 0 else 0
            bar += glyph * (end - drawn)
            drawn = end
        lines.append(f"{label:>{label_w}} |{bar:<{room}} {text:<{text_w}}".rstrip())
    lines.append(f"{'':>{label_w}} +{'-' * room}")
    lines.append(f"{'':>{label_w}}  " + "  ".join(f"{glyph} {name}" for glyph, name in parts))
    lines.append(f"{'':>{label_w}}  {unit}, from 0")
    return "\n".join(line[:width] for line in lines)


@dataclass(frozen=True)
class Miss:
    """One prediction on the calibration chart: its concept's mark and how far off it was."""

    mark: str
    log_error: float | None  # log(predicted / measured); None: no ratio (a zero measured)
    direction: int  # +1 over, -1 under, 0 on target: places a prediction without a ratio


# Rows of the calibration chart, top first: (label, over or under, the factor band [low, high)).
CALIBRATION_ROWS = (
    ("over x5+", 1, 5.0, math.inf),
    ("x2-x5", 1, 2.0, 5.0),
    ("x1.15-x2", 1, 1.15, 2.0),
    ("within 15%", 0, 1.0, 1.15),
    ("x1.15-x2", -1, 1.15, 2.0),
    ("x2-x5", -1, 2.0, 5.0),
    ("under x5+", -1, 5.0, math.inf),
)


def calibration(misses: list[Miss], legend: list[tuple[str, str]], *, first: str, last: str, width: int = 72) -> str:
    """Predictions over time, oldest left, one column each: its mark in the row of the factor it
    was off by, overestimates above the dotted 'within 15%' row, underestimates below. When there
    are more predictions than columns, the latest are drawn and the first line says so."""
    axis_w = max(len(label) for label, *_ in CALIBRATION_ROWS) + 1
    room = max(width - axis_w - 1, 8)
    shown = misses[-room:]
    gap = 2 if len(shown) * 2 <= room else 1
    # As wide as the points need (and the dates under them), so a few predictions read as a few.
    plot_w = min(room, max(len(shown) * gap, len(first) + len(last) + 2, 24))

    def row(m: Miss) -> int:
        if m.log_error is not None:
            factor, side = math.exp(abs(m.log_error)), (m.log_error > 0) - (m.log_error < 0)
        else:
            factor, side = (math.inf, m.direction) if m.direction else (1.0, 0)
        if factor < 1.15:
            side = 0
        return next(
            i
            for i, (_, s, low, high) in enumerate(CALIBRATION_ROWS)
            if s == side and (side == 0 or low <= factor < high or factor == high == math.inf)
        )

    grid = [[" "] * plot_w for _ in CALIBRATION_ROWS]
    middle = next(i for i, (_, s, *_) in enumerate(CALIBRATION_ROWS) if s == 0)
    grid[middle] = ["·"] * plot_w
    for i, m in enumerate(shown):
        grid[row(m)][i * gap] = m.mark
    lines = [f"the latest {len(shown)} of {len(misses)} predictions"] if len(shown) < len(misses) else []
    for (label, *_), cells in zip(CALIBRATION_ROWS, grid):
        lines.append(f"{label:>{axis_w - 1}} |" + "".join(cells).rstrip())
    lines.append(" " * axis_w + "+" + "-" * plot_w)
    span = len(shown) * gap - gap + 1  # the columns the points take: the last label ends under the last
    ticks = first if first == last else first + " " * max(span - len(first) - len(last), 2) + last
    lines.append(" " * (axis_w + 1) + ticks)
    entries = [f"{mark} {label}" for mark, label in legend]
    text = ""
    for entry in entries:  # the legend, wrapped to the width
        if text and len(text) + 3 + len(entry) > width - axis_w - 1:
            lines.append(" " * (axis_w + 1) + text)
            text = ""
        text = f"{text}   {entry}" if text else entry
    if text:
        lines.append(" " * (axis_w + 1) + text)
    if any(m.log_error is None and m.direction for m in shown):
        lines.append(" " * (axis_w + 1) + "x5+ also holds a zero (an underflow): off by no factor")
    return "\n".join(line[:width] if len(line) > width else line for line in lines)
