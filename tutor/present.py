"""How a figure looks on screen, in one place: the run panel, the reveal, the CLI and the
experiments' own tables and notes all format through here, so one measurement reads the same
wherever it is shown. Plain Python (no torch, no Textual): every process imports it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from checks import (
    format_number as number,  # a learner's numbers: exact whole numbers, 3 digits, units
)

__all__ = ["metric", "metric_description", "metric_label", "metric_value", "mib", "number", "seconds", "significant", "size"]

MIB = 1 << 20


def metric(value: Any, unit: str = "") -> str:
    """A metric for humans: 3 significant digits, units, booleans and None spelled out.

    `unit` "%" shows a share measured as a fraction 0..1 ("35.0%"); "x" is attached ("3.2x").
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return str(value)
        if unit == "%":
            return f"{value * 100:.1f}%"
        if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1000:
            text = f"{int(value):,}"
        elif value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            text = f"{value:.3g}"
        else:
            text = f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{text}{unit}" if unit == "x" else f"{text} {unit}".rstrip()
    return str(value)


def seconds(s: float | None) -> str:
    """A duration with its unit: "850.0 ms" below a second, "1.23 s" above; "-" when not measured."""
    if s is None:
        return "-"
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.2f} s" if s < 100 else f"{s:,.0f} s"


def mib(n: int | float | None) -> str:
    """Bytes in MiB ("12.3 MiB"), the unit the allocator and nvidia-smi use; "-" when not measured."""
    return "-" if n is None else f"{n / MIB:,.1f} MiB"


def significant(v: float, digits: int = 5) -> str:
    """A value where its magnitude is the lesson (float16's limits, an underflowed gradient):
    `digits` significant digits, in e-notation when tiny or huge."""
    return f"{v:.{digits}g}"


def size(n: int | float | None) -> str:
    """Bytes in the unit that reads best, with the exact count the run's notes give beside it:
    "512 B", "918.5 KiB (940,584 B)", "1.50 GiB (1,610,612,736 B)"; "-" when not measured."""
    if n is None:
        return "-"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= factor:
            value = n / factor
            shown = f"{value:,.2f} {unit}" if unit == "GiB" else f"{value:,.1f} {unit}"
            return f"{shown} ({int(n):,} B)" if float(n).is_integer() else shown
    return f"{int(n):,} B"


def metric_value(name: str, value: Any) -> str:
    """A metric's value in its unit, read from the metric's name by the registry's naming rules:
    *_bytes are sizes, *seconds* durations, accuracy, *_share and mfu fractions shown in percent,
    speedup* and *_ratio times; True/False yes/no; None "n/a" (not measured here)."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return metric(value)
    if name.endswith("_bytes") or name == "bytes":
        return size(value)
    if name.endswith("_mb"):
        return metric(value, "MB")
    if name.endswith("_gib"):
        return metric(value, "GiB")
    if "accuracy" in name or name.endswith("_share") or name in ("mfu", "memory_saving"):
        return metric(value, "%")
    if "speedup" in name or name.endswith("ratio"):
        return metric(value, "x")
    if name.endswith("_per_s"):
        return metric(value, "/s").replace(" /s", "/s")
    if "seconds" in name:
        return seconds(value)
    if name.endswith("tflops"):
        return metric(value, "TFLOP/s")
    return metric(value)


def metric_description(description: str) -> str:
    """A registry description as a learner reads it: written for the code ("True if every
    parameter is on the device", "(None off CUDA)"), shown in the screen's words."""
    text = re.sub(r"^True if ", "", description)
    text = re.sub(r"\bNone\b", "n/a", text)
    return text


def metric_label(description: str, limit: int = 48) -> str:
    """A metric's label from its registry description: the first clause, without the unit note
    in brackets ("test accuracy after the last epoch (0..1)" -> "test accuracy after the last epoch")."""
    label = metric_description(description).split(" (")[0].split("; ")[0].strip()
    return label if len(label) <= limit else label[: limit - 1].rstrip() + "…"
