"""How a figure looks on screen, in one place: the run panel, the reveal, the CLI and the
experiments' own tables and notes all format through here, so one measurement reads the same
wherever it is shown. Plain Python (no torch, no Textual): every process imports it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tutor.checks import (
    format_number as number,  # a learner's numbers: exact whole numbers, 3 digits, units
)

__all__ = [
    "METRIC_UNITS",
    "metric",
    "metric_description",
    "metric_label",
    "metric_value",
    "mib",
    "number",
    "seconds",
    "setting",
    "significant",
    "size",
    "unit_from_name",
]

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
        if isinstance(value, int) or (float(value).is_integer() and abs(value) >= 1000):
            text = f"{int(value):,}"
        elif value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            text = f"{value:.3g}"
        else:
            text = f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
        return f"{text}{unit}" if unit == "x" else f"{text} {unit}".rstrip()
    return str(value)


def setting(value: Any) -> str:
    """A run's setting as a learner reads it (the run header, a run step's controls): on/off,
    never Python's True/False/None."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "not set"
    return metric(value) if isinstance(value, (int, float)) else str(value)


def seconds(s: float | None) -> str:
    """A duration with its unit: "42.0 µs" below a millisecond (where "0.0 ms" would hide it),
    "850.0 ms" below a second, "1.23 s" above; "-" when not measured."""
    if s is None:
        return "-"
    if 0 < abs(s) < 1e-3:
        return f"{s * 1e6:.1f} µs"
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


# The units a metric may declare (tutor/experiments/spec.py Metric.unit), and how each is shown.
# Sizes in bytes show in binary units (KiB, MiB, GiB), as the allocator, nvidia-smi and the
# runs' notes do; a metric a run reports in MB (1e6 bytes) declares "MB" and stays in MB.
METRIC_UNITS: dict[str, str] = {
    "B": "bytes, shown in KiB/MiB/GiB with the exact count beside",
    "MB": "megabytes (1e6 bytes), as the run reports them",
    "GiB": "gibibytes (2**30 bytes)",
    "s": "a duration in seconds, shown in ms below one second",
    "%": "a fraction 0..1, shown in percent",
    "x": "times: a ratio of two measurements",
    "/s": "a rate per second (samples/s)",
    "TFLOP/s": "tera floating-point operations per second",
    "": "a plain count or number",
    "bool": "true or false, shown yes or no",
    "text": "words, shown as they are",
}


def unit_from_name(name: str) -> str:
    """A metric's unit read from its name by the registry's naming rules, for a metric declared
    only by its description (a lesson pack's): *_bytes sizes, *seconds* durations, accuracy,
    *_share and mfu fractions, speedup* and *_ratio times, *_per_s rates; NAME_low and NAME_high
    (the ends of NAME's repeats) in NAME's unit."""
    for end in ("_low", "_high"):
        if name.endswith(end) and len(name) > len(end):
            name = name[: -len(end)]
            break
    if name.endswith("_bytes") or name == "bytes":
        return "B"
    if name.endswith("_mb"):
        return "MB"
    if name.endswith("_gib"):
        return "GiB"
    if "accuracy" in name or name.endswith("_share") or name in ("mfu", "memory_saving"):
        return "%"
    if "speedup" in name or name.endswith("ratio"):
        return "x"
    if name.endswith("_per_s"):
        return "/s"
    if "seconds" in name:
        return "s"
    if name.endswith("tflops"):
        return "TFLOP/s"
    return ""


def metric_value(declared: Any, value: Any) -> str:
    """A metric's value in its declared unit (`declared`: a tutor.experiments.spec.Metric, or a
    bare name whose unit is read by `unit_from_name`); None is the metric's own words for what
    was not measured ("n/a off CUDA"), True/False yes/no, NaN and inf as they are."""
    unit = unit_from_name(declared) if isinstance(declared, str) else declared.unit
    if value is None:
        return "n/a" if isinstance(declared, str) else declared.none
    if isinstance(value, bool) or not isinstance(value, (int, float)) or unit in ("", "bool", "text"):
        return metric(value)
    if math.isnan(value) or math.isinf(value):
        return metric(value)  # size() and seconds() would make a number of it
    if unit == "B":
        return size(value)
    if unit == "s":
        return seconds(value)
    if unit == "/s":
        return metric(value, "/s").replace(" /s", "/s")
    return metric(value, unit)


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


def flops_text(tflops: float) -> str:
    """FLOP/s in the unit that reads best: a CPU's GFLOP/s, a GPU's TFLOP/s."""
    return metric(tflops, "TFLOP/s") if tflops >= 1 else number(tflops * 1e3, "GFLOP/s")
