"""Read numbers with units from what a learner types, and grade number answers.

Reading rules (`read_quantity`, `parse_number`):

- The first number in the text counts: "12", "~12 gb", "about 12GB", "12,000" (a comma
  before exactly three digits groups thousands; otherwise it is a decimal comma: "1,5"),
  "1.5e3", "1.5 x 10^3", "2^-24", ".5", "-3". Digits inside words ("fp16") are not numbers.
- A range "2-3x", "2 to 3x", "between 2 and 3" reads as its midpoint (2.5).
- Multipliers: "12k", "1.2M", "3 million", "2 thousand", "1bn".
- Speed-ups: "3x", "3 x", "3×", "x3", "3 times", "3-fold", "twice" (2x).
- Number words when the text has no digits: "three times" -> 3, "ten" -> 10.
- Units of one kind convert into the spec's unit: B/KB/MB/GB/TB and KiB/MiB/GiB/TiB
  (1 GiB = 1.073741824 GB), ns/us/ms/s/min/h. No unit in the answer: the spec's unit is
  assumed. A unit of another kind ("12 ms" for a GB question) reads as None.
- Percent: when the spec's unit is "%", "35%", "35 percent" and "35" mean 35. A bare number
  from -1 to 1 without a % sign ("0.5") could be either a fraction (50%) or a percentage
  (0.5%): `grade_number` does not guess but asks which (`percent_readings`, not judged); the
  prediction lock asks the same. `parse_number` alone still reads it as the fraction.
- A spec without a unit (or with a unit this module does not know, e.g. "params") takes the
  number as written, whatever unit follows it.
- A bare number wrong in the spec's unit but right in one a factor of 1000 (or 60) away ("0.5"
  for 500 ms) is asked about (`unit_question`), not graded.
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from tutor.checks.answers import NumberAnswer, NumberRange, Verdict

# unit word -> (canonical unit, kind, factor to the kind's base unit)
_UNIT_TABLE: dict[str, tuple[str, str, float]] = {}


def _add(names: str, canonical: str, kind: str, factor: float) -> None:
    for n in names.split():
        _UNIT_TABLE[n] = (canonical, kind, factor)


_add("b byte bytes", "B", "bytes", 1.0)
_add("kb kilobyte kilobytes", "KB", "bytes", 1e3)
_add("kib kibibyte kibibytes", "KiB", "bytes", 2.0**10)
_add("mb megabyte megabytes meg megs", "MB", "bytes", 1e6)
_add("mib mebibyte mebibytes", "MiB", "bytes", 2.0**20)
_add("gb gigabyte gigabytes gig gigs", "GB", "bytes", 1e9)
_add("gib gibibyte gibibytes", "GiB", "bytes", 2.0**30)
_add("tb terabyte terabytes", "TB", "bytes", 1e12)
_add("tib tebibyte tebibytes", "TiB", "bytes", 2.0**40)
_add("s sec secs second seconds", "s", "time", 1.0)
_add("ms msec msecs millisecond milliseconds", "ms", "time", 1e-3)
_add("us µs μs microsecond microseconds", "us", "time", 1e-6)
_add("ns nanosecond nanoseconds", "ns", "time", 1e-9)
_add("min mins minute minutes", "min", "time", 60.0)
_add("h hr hrs hour hours", "h", "time", 3600.0)
_add("x times fold", "x", "ratio", 1.0)
_add("% percent pct", "%", "percent", 1.0)

_UNIT_ALT = "|".join(re.escape(u) for u in sorted(_UNIT_TABLE, key=len, reverse=True))
_MULTIPLIERS = {"k": 1e3, "thousand": 1e3, "million": 1e6, "mil": 1e6, "mio": 1e6, "M": 1e6, "billion": 1e9, "bn": 1e9}
_WORD_NUMBERS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
    "hundred": 100,
    "thousand": 1000,
}

MAX_INPUT = 10_000  # characters looked at; a number answer is short

_NUM = r"(?:[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?|[0-9]+(?:[.,][0-9]+)?|\.[0-9]+)(?:[eE][-+]?[0-9]{1,4})?"
_SIGNED = rf"(?<![\w.,])(?P<sign>[-+]?)(?P<num>{_NUM})"
_RANGE_SEP = r"\s*(?:-|to|or)\s*"
_MULT = r"(?P<{}>k|thousand|million|mil|mio|bn|billion|(?-i:M))(?![A-Za-z])"
_QUANTITY_RE = re.compile(
    rf"(?P<between>\bbetween\s+)?{_SIGNED}"
    rf"(?:\s*{_MULT.format('mult1')})?"
    rf"(?:(?:{_RANGE_SEP}|(?(between)\s+and\s+|(?!)))(?P<num2>{_NUM})(?:\s*{_MULT.format('mult2')})?)?"
    rf"(?:\s*-?\s*(?P<unit>{_UNIT_ALT})(?![A-Za-z]))?",
    re.IGNORECASE,
)
_PREFIX_X_RE = re.compile(rf"(?<![A-Za-z0-9])[x×]\s*(?P<num>{_NUM})(?![0-9])", re.IGNORECASE)
_SCI_RE = re.compile(r"([0-9.]{1,40})\s*(?:x|×|\*|·)\s*10\s*(?:\^|\*\*)\s*([-+]?[0-9]{1,4})", re.IGNORECASE)
_POW_RE = re.compile(r"(?<![\w.])([0-9]+(?:\.[0-9]+)?)\s*(?:\^|\*\*)\s*\(?\s*([-+]?[0-9]{1,4})\)?")


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str  # canonical unit ("GB", "x", "%", "ms") or "" when none was written
    text: str  # the part of the answer that was read


def _to_float(num: str) -> float:
    if re.fullmatch(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?", num):
        num = num.replace(",", "")
    else:
        num = num.replace(",", ".")
    return float(num)


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFKC", text[:MAX_INPUT])
    text = text.replace("\u2212", "-").replace("\u2013", "-").replace("\u2014", "-")
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = re.sub(r"\btwice\b", "2x", text, flags=re.IGNORECASE)
    text = re.sub(r"\bhalf\b", "0.5", text, flags=re.IGNORECASE)

    def sci(m: re.Match[str]) -> str:
        return f"{m.group(1)}e{m.group(2)}"

    text = _SCI_RE.sub(sci, text)

    def power(m: re.Match[str]) -> str:
        try:
            value = float(m.group(1)) ** int(m.group(2))
        except (OverflowError, ZeroDivisionError, ValueError):
            return m.group(0)
        return repr(value) if math.isfinite(value) else m.group(0)

    text = _POW_RE.sub(power, text)
    if not re.search(r"[0-9]", text):
        text = re.sub(
            r"\b(" + "|".join(_WORD_NUMBERS) + r")\b",
            lambda m: str(_WORD_NUMBERS[m.group(1).lower()]),
            text,
            flags=re.IGNORECASE,
        )
        text = re.sub(r"\b(?:a|one)\s+(100|1000)\b", r"\1", text)
    return text


def read_quantity(text: str) -> Quantity | None:
    """The first number in `text` with the unit written after it (or before it: "x3")."""
    if not isinstance(text, str):
        return None
    try:
        cleaned = _clean(text)
    except (ValueError, OverflowError):
        return None
    m = _QUANTITY_RE.search(cleaned)
    px = _PREFIX_X_RE.search(cleaned)
    if px and (m is None or px.start() < m.start()):
        try:
            value = _to_float(px.group("num"))
        except ValueError:
            return None
        return Quantity(value, "x", px.group(0)) if math.isfinite(value) else None
    if m is None:
        return None
    try:
        value = _to_float(m.group("num")) * _MULTIPLIERS.get(_mult_key(m.group("mult1")), 1.0)
        if m.group("num2"):
            second = _to_float(m.group("num2")) * _MULTIPLIERS.get(_mult_key(m.group("mult2") or m.group("mult1")), 1.0)
            value = (value + second) / 2
    except (ValueError, OverflowError):
        return None
    if m.group("sign") == "-":
        value = -value
    if not math.isfinite(value):
        return None
    unit = ""
    if m.group("unit"):
        unit = _UNIT_TABLE[m.group("unit").lower()][0]
    return Quantity(value, unit, m.group(0).strip())


def _mult_key(mult: str | None) -> str:
    if not mult:
        return ""
    return mult if mult == "M" else mult.lower()


def unit_info(unit: str) -> tuple[str, str, float] | None:
    """(canonical, kind, factor) for a unit name, or None for "" and unknown units."""
    if not unit:
        return None
    return _UNIT_TABLE.get(unit.strip().lower()) or _UNIT_TABLE.get(unit.strip())


def convert(value: float, from_unit: str, to_unit: str) -> float | None:
    """`value` in `from_unit` expressed in `to_unit`; None when the kinds differ."""
    a, b = unit_info(from_unit), unit_info(to_unit)
    if a is None or b is None:
        return value
    if a[1] != b[1]:
        return None
    return value * a[2] / b[2]


def quantity_in(q: Quantity, spec_unit: str) -> float | None:
    """A read quantity in the spec's unit (see the module docstring for the rules)."""
    target = unit_info(spec_unit)
    if target is None:
        return q.value  # spec without a (known) unit: the number as written
    if not q.unit:
        if target[1] == "percent" and -1 < q.value < 1 and q.value != 0:
            return q.value * 100  # "0.35" for a percentage means 35%
        return q.value
    return convert(q.value, q.unit, spec_unit)


def percent_readings(q: Quantity | None, spec_unit: str) -> tuple[float, float] | None:
    """Both ways a bare number from -1 to 1 (not 0) reads where the answer is a percentage:
    (value %, value x 100 %). None when the answer says which: a % sign or any other unit, a
    larger number, no percentage asked for."""
    target = unit_info(spec_unit)
    if q is None or q.unit or target is None or target[1] != "percent":
        return None
    if q.value == 0 or not -1 <= q.value <= 1:
        return None
    return q.value, q.value * 100


def ambiguity(text: str, spec_unit: str) -> str | None:
    """A question back to the learner when their number could mean two things, else None."""
    try:
        readings = percent_readings(read_quantity(text), spec_unit)
    except Exception:  # noqa: BLE001 - a learner's text must never crash the tutor
        return None
    if readings is None:
        return None
    as_written, as_fraction = (format_number(v, "%") for v in readings)
    return (
        f"Did you mean {as_written} or {as_fraction}? Write the % sign to say which: “{as_written}” or “{as_fraction}”."
    )


def parse_number(text: str, unit: str = "") -> float | None:
    """The number a learner wrote, in `unit`; None when no number (in a compatible unit) is there."""
    try:
        q = read_quantity(text)
        if q is None:
            return None
        value = quantity_in(q, unit)
        return value if value is not None and math.isfinite(value) else None
    except Exception:  # noqa: BLE001 - a learner's text must never crash the tutor
        return None


# ----------------------------------------------------------------------------- format

EXACT_BELOW = 1e15  # whole numbers below this are shown in full; above, 3 digits and an exponent


def format_number(value: float, unit: str = "") -> str:
    """A number for a learner, thousands grouped, the unit attached ("3.2x", "35%", "12 GB").

    Whole numbers (ints, and floats such as 2828323.0) are shown exactly, "2,828,323 B", so a
    reveal agrees with the run's panel; fractional values get 3 significant digits ("3.14x",
    "0.0123 s", "1,230" for 1234.5). Beyond 1e15, and below 1e-3, "6e-8" style.
    """
    if value is None or not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if not math.isfinite(value):
        text = "infinity" if math.isinf(value) else "not a number"
    elif value == 0:
        text = "0"
    elif abs(value) < EXACT_BELOW and float(value).is_integer():
        text = f"{int(value):,}"
    else:
        mag = abs(value)
        if mag >= 1e15 or mag < 1e-3:
            mant, exp = f"{value:.2e}".split("e")
            mant = mant.rstrip("0").rstrip(".")
            text = f"{mant}e{int(exp)}"
        else:
            digits = max(0, 2 - math.floor(math.log10(mag)))
            rounded = round(value, digits)
            text = f"{rounded:,.{digits}f}"
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            if mag >= 1000:
                sig = round(value, -math.floor(math.log10(mag)) + 2)
                text = f"{sig:,.0f}"
    if not unit:
        return text
    canonical = (unit_info(unit) or (unit,))[0]
    if canonical in ("x", "%"):
        return f"{text}{canonical}"
    return f"{text} {unit}"


_EXAMPLES = {
    "x": "3x",
    "%": "35%",
    "GB": "12 GB",
    "GiB": "12 GiB",
    "MB": "500 MB",
    "MiB": "500 MiB",
    "TB": "2 TB",
    "KB": "64 KB",
    "B": "1024 B",
    "s": "2.5 s",
    "ms": "40 ms",
    "us": "15 us",
    "min": "5 min",
    "h": "2 h",
}


def example_for(unit: str) -> str:
    info = unit_info(unit)
    if info is None:
        return f"42 {unit}".strip()
    return _EXAMPLES.get(info[0], f"12 {unit}")


def describe_number(spec: NumberAnswer, example: bool = True) -> str:
    """What to type. Without `example` (a prediction) no value is shown: any value could be the
    answer or near it (every % question showed "e.g. 35%", the very share a prediction asked for)."""
    if example:
        return f"a number in {spec.unit}, e.g. {example_for(spec.unit)}" if spec.unit else "a number, e.g. 42"
    sign = (unit_info(spec.unit) or (spec.unit,))[0] if spec.unit else ""
    if sign in ("%", "x"):
        return f"a number followed by {sign}"
    return f"a number in {spec.unit}" if spec.unit else "a number"


# ----------------------------------------------------------------------------- grade


def _target(spec: NumberAnswer, metrics: dict[str, Any] | None) -> tuple[float | None, str | None]:
    """The correct value, or (None, reason) when it cannot be known here."""
    if spec.from_metric:
        raw = (metrics or {}).get(spec.from_metric) if isinstance(metrics, dict) else None
        if isinstance(raw, bool) or raw is None:
            return None, (
                f"This answer is checked against the measured `{spec.from_metric}`, and no run in "
                "this session has measured it yet. Run the step's experiment first, then submit again."
            )
        try:
            value = float(raw)
        except OverflowError:
            return None, f"The measured `{spec.from_metric}` is not a finite number, so this cannot be checked."
        except (TypeError, ValueError):
            return None, f"The measured `{spec.from_metric}` ({raw!r}) is not a number, so this cannot be checked."
        if not math.isfinite(value):
            return None, f"The measured `{spec.from_metric}` is not a finite number, so this cannot be checked."
        return value, None
    if spec.value is None:
        return None, None
    return spec.value, None


def _within(answer: float, target: float, spec: NumberAnswer) -> bool:
    if spec.abs_tolerance is not None:
        return abs(answer - target) <= spec.abs_tolerance + 1e-12 * max(1.0, abs(target))
    return abs(answer - target) <= spec.tolerance * abs(target) + 1e-12 * max(1.0, abs(target))


# Units a bare number is checked against when read in the spec's unit it is wrong: a factor of
# 1000 hides between them (0.5 for a question in ms may be 0.5 s). MB/MiB differ by 5%, inside
# most tolerances, so they are converted when written and never asked about.
_SIBLING_UNITS = {"time": ("ms", "s", "us", "min"), "bytes": ("KB", "MB", "GB", "TB", "B")}


def unit_question(q: Quantity | None, spec: NumberAnswer, target: float | None) -> str | None:
    """A question back when a bare number is wrong in the spec's unit but right in a unit a
    factor of 1000 (or 60) away: the learner likely worked in that unit. Never graded on a guess."""
    info = unit_info(spec.unit)
    if q is None or q.unit or target is None or info is None or info[1] not in _SIBLING_UNITS:
        return None
    if _within(q.value, target, spec):
        return None
    for other in _SIBLING_UNITS[info[1]]:
        factor = _UNIT_TABLE[other.lower()][2] / info[2]
        if 0.5 <= factor <= 2:  # the same scale: no hidden factor
            continue
        if _within(q.value * factor, target, spec):
            written = format_number(q.value)
            return (
                f"In which unit: {written} {info[0]} or {written} {other}? Write the number with its unit, "
                f"such as “{written} {other}”."
            )
    return None


def range_unit_question(text: str, spec: NumberAnswer) -> str | None:
    """For a prediction, which has no target yet: a bare number outside the question's own range
    (min..max) that lies inside it in a unit a factor of 1000 (or 60) away is asked about ("20800
    for a question in GB"), never locked on a guess."""
    info = unit_info(spec.unit)
    q = read_quantity(text)
    if q is None or q.unit or info is None or info[1] not in _SIBLING_UNITS or (spec.min is None and spec.max is None):
        return None

    def inside(value: float) -> bool:
        return (spec.min is None or value >= spec.min) and (spec.max is None or value <= spec.max)

    if inside(q.value):
        return None
    nearest_first = sorted(_SIBLING_UNITS[info[1]], key=lambda u: abs(math.log(_UNIT_TABLE[u.lower()][2] / info[2])))
    for other in nearest_first:
        factor = _UNIT_TABLE[other.lower()][2] / info[2]
        # one step of the unit ladder (x1000, or x60 for minutes), not the same scale
        if 0.5 <= factor <= 2 or not 1e-3 <= factor <= 1e3 or not inside(q.value * factor):
            continue
        written = format_number(q.value)
        return (
            f"In which unit: {written} {info[0]} or {written} {other}? Write the number with its unit, "
            f"such as “{written} {other}”."
        )
    return None


def accepted_interval(spec: NumberAnswer, target: float) -> tuple[float, float]:
    """Every answer from lo to hi (inclusive) is within the tolerance of `target`."""
    slack = spec.abs_tolerance if spec.abs_tolerance is not None else spec.tolerance * abs(target)
    return target - slack, target + slack


NEAR_MISS = 0.5  # relative error under which a wrong number is told how far off it is


def byte_unit_said(unit: str) -> str:
    """'1 MB is read as 10^6 B, 1 MiB would be 2^20' for a decimal byte unit the learner wrote, '1 MiB
    is read as 2^20 B' for a binary one: which of the two meanings an answer was read with. '' for
    any other unit."""
    info = _UNIT_TABLE.get(unit.lower()) if unit else None
    if info is None or info[1] != "bytes" or info[0] == "B":
        return ""
    if info[0].endswith("iB"):
        return f"1 {info[0]} is read as 2^{round(math.log2(info[2]))} B"
    power = round(math.log10(info[2]))
    return f"1 {info[0]} is read as 10^{power} B, 1 {info[0][0]}iB would be 2^{power // 3 * 10}"


def _percent_off(off: float) -> str:
    """6.3% for 0.063: one decimal under 10%, whole percents above."""
    return f"{off * 100:.1f}%" if off < 0.1 else f"{off * 100:.0f}%"


def tolerance_said(spec: NumberAnswer) -> str:
    """How the accepted interval is set, in an author's words."""
    if spec.abs_tolerance is not None:
        return f"abs_tolerance {spec.abs_tolerance:g}"
    given = "tolerance" in spec.model_fields_set
    return f"{'tolerance' if given else 'the default tolerance'} {spec.tolerance:g} ({spec.tolerance:.0%} relative)"


def _band_of(spec: NumberAnswer, value: float) -> int | None:
    """The index of the band an answer falls in: the first that holds it, as grade_number reads it."""
    return next(
        (
            j
            for j, r in enumerate(spec.ranges)
            if (r.min is None or value >= r.min) and (r.max is None or value <= r.max)
        ),
        None,
    )


@dataclass(frozen=True)
class BandReach:
    """Whether a `ranges` band can ever give its verdict: `example` is an answer value that gets
    it; None when none can, and `why` says what takes its answers instead."""

    index: int
    example: float | None
    why: str = ""


def band_reach(spec: NumberAnswer, target: float | None) -> list[BandReach]:
    """For each band, a value that lands in it and is graded by it, or why none is.

    A band is read first-match-wins, and a wrong band's answers inside the accepted interval
    are graded right: a band wholly inside earlier bands or (when wrong) the accepted interval
    never shows its feedback. `target` None (a measured value not known yet): bands only."""
    accepted = accepted_interval(spec, target) if target is not None else None
    out = []
    for j, band in enumerate(spec.ranges):
        lo = band.min if band.min is not None else -math.inf
        hi = band.max if band.max is not None else math.inf
        if lo > hi:
            out.append(BandReach(j, None, f"its min {band.min:g} is above its max {band.max:g}"))
            continue
        # Candidates: the band's ends, every other edge inside it, and the points between them.
        edges = {lo, hi}
        for other in spec.ranges[:j]:
            edges.update(e for e in (other.min, other.max) if e is not None)
        if accepted is not None:
            edges.update(accepted)
        inside = sorted(e for e in edges if lo <= e <= hi and math.isfinite(e))
        if not inside:
            inside = [0.0] if lo <= 0 <= hi else []
        candidates = list(inside)
        candidates += [(a + b) / 2 for a, b in itertools.pairwise(inside)]
        if inside and hi == math.inf:
            candidates.append(inside[-1] + max(1.0, abs(inside[-1])))
        if inside and lo == -math.inf:
            candidates.append(inside[0] - max(1.0, abs(inside[0])))
        example = next(
            (
                v
                for v in candidates
                if _band_of(spec, v) == j and (band.correct or accepted is None or not accepted[0] <= v <= accepted[1])
            ),
            None,
        )
        if example is not None:
            out.append(BandReach(j, example))
            continue
        earlier = [k for k in range(j) if _overlaps(spec.ranges[k], lo, hi)]
        reasons = []
        if earlier:
            reasons.append(
                "earlier "
                + ("band " if len(earlier) == 1 else "bands ")
                + ", ".join(str(k + 1) for k in earlier)
                + " take its answers (the first band that "
                "holds an answer grades it)"
            )
        if accepted is not None and not band.correct:
            reasons.append(
                f"answers from {accepted[0]:g} to {accepted[1]:g} are graded right "
                f"({tolerance_said(spec)} of {target:g})"
            )
        out.append(BandReach(j, None, "; ".join(reasons) or "no answer lands in it"))
    return out


def _overlaps(band: NumberRange, lo: float, hi: float) -> bool:
    b_lo = band.min if band.min is not None else -math.inf
    b_hi = band.max if band.max is not None else math.inf
    return b_lo <= hi and lo <= b_hi


def grade_number(answer: str, spec: NumberAnswer, metrics: dict[str, Any] | None = None) -> Verdict:
    """Grade a number answer.

    `from_metric`: the correct value is metrics[from_metric]. When that metric is missing or
    None (nothing measured yet, or no GPU here), the verdict is correct=False with
    feedback saying the answer cannot be checked yet and `missing=[from_metric]`; an
    answer inside a `ranges` band is still judged by that band, which needs no metric.
    """
    text = answer if isinstance(answer, str) else ""
    if not text.strip():
        return Verdict(False, f"Write {describe_number(spec)}.", judged=False)
    q = read_quantity(text)
    if q is None:
        return Verdict(False, f"I could not find a number in your answer. Write {describe_number(spec)}.", judged=False)
    question = ambiguity(text, spec.unit)
    if question is not None:  # 0.5 for a percentage: 0.5% or 50%? Never graded on a guess.
        return Verdict(False, question, judged=False)
    value = quantity_in(q, spec.unit)
    if value is None or not math.isfinite(value):
        return Verdict(
            False,
            f"Your answer is in {q.unit}, which cannot be converted to {spec.unit}. Write {describe_number(spec)}.",
            judged=False,
        )
    target, problem = _target(spec, metrics)
    question = unit_question(q, spec, target)
    if question is not None:  # 0.5 for a question in ms, and 0.5 s is right: asked, not graded
        return Verdict(False, question, judged=False)
    shown = format_number(value, spec.unit)
    found = _band_of(spec, value)
    band = spec.ranges[found] if found is not None else None
    within = target is not None and _within(value, target, spec)
    if within or (band is not None and band.correct):
        feedback = band.feedback if band is not None and band.correct and band.feedback else f"Right: {shown}."
        return Verdict(True, feedback, score=1.0)
    if band is not None:
        return Verdict(False, band.feedback or f"Not quite: {shown} is not it. Think it through once more.")
    if problem is not None:
        return Verdict(False, problem, missing=[spec.from_metric or "value"], judged=False)
    if target is None:
        return Verdict(False, "This question has no answer to compare with (the lesson sets no value).", judged=False)
    direction = "high" if value > target else "low"
    # A near miss says how far, and how close this question asks for: a prediction of the same
    # figure may have counted, scored within its own wider tolerance, and the learner sees why this
    # does not. Which meaning a byte unit was read with is said too (MB is 10^6, MiB 2^20).
    unit_read = byte_unit_said(q.unit)
    unit_read = f" ({unit_read})" if unit_read else ""
    off = abs(value - target) / abs(target) if target else math.inf
    if spec.abs_tolerance is None and off < NEAR_MISS:
        return Verdict(
            False,
            f"Not quite: {shown}{unit_read} is {_percent_off(off)} too {direction}; this question "
            f"wants it within {spec.tolerance * 100:g}%.",
        )
    return Verdict(False, f"Not quite: {shown}{unit_read} is too {direction}.")
