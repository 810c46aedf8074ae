"""Compare a locked prediction with what a run measured ("off by 3.1x (you said 10x, measured 3.2x)")."""

from __future__ import annotations

import math
import re
from typing import Any

from tutor.checks.answers import (
    AnyAnswer,
    ChoiceAnswer,
    ChoiceOption,
    Measured,
    NumberAnswer,
    PredictionScore,
    TextAnswer,
)
from tutor.checks.choice import resolve
from tutor.checks.number import byte_unit_said, convert, format_number, parse_number, read_quantity, unit_info
from tutor.checks.text import normalise
from tutor.measurement.intervals import CONFIDENCE, GUARD, Decision, MedianInterval, judge, widened

# A metric is None for more than one reason (no accelerator to compare with, autocast not
# supported on this device, an accuracy that came out NaN...): only a speedup is blamed on
# the hardware, and even then the run's notes have the last word.
NO_SPEEDUP = (
    "No measurement to compare with: this run could not measure it here (no accelerator to "
    "compare with, or see the run's notes). That is not a miss; your prediction ({said}) stays "
    "as you locked it."
)
NO_MEASUREMENT = (
    "Nothing was measured for this on this machine; the run's notes say why. So this "
    "prediction is not scored (that is not a miss). You said {said}."
)


def _number(x: object) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        try:
            value = float(x)
        except OverflowError:  # an int beyond float range
            return None
        return value if math.isfinite(value) else None
    if isinstance(x, str):
        return parse_number(x)
    return None


def _shown(measured: Measured, unit: str) -> str:
    value = _number(measured) if not isinstance(measured, str) else None
    if value is not None:
        return format_number(value, unit)
    if isinstance(measured, bool):
        return "yes" if measured else "no"
    text = str(measured).strip()
    return text[:80] + ("..." if len(text) > 80 else "")


def _quote(answer: str) -> str:
    text = " ".join(str(answer).split())
    return text[:60] + ("..." if len(text) > 60 else "")


INTERVAL_SUFFIXES = ("_low", "_high")  # a metric NAME's interval, reported as NAME_low and NAME_high


def interval_of(metrics: dict[str, Any], name: str | None) -> tuple[float, float] | None:
    """The interval of a metric's typical value, when the run reported one (NAME_low, NAME_high)."""
    if not name or not isinstance(metrics, dict):
        return None
    lo, hi = (_number(metrics.get(name + suffix)) for suffix in INTERVAL_SUFFIXES)
    if lo is None or hi is None or lo > hi:
        return None
    return lo, hi


def score_prediction(
    answer: str,
    spec: AnyAnswer,
    measured: Measured,
    unit: str = "",
    interval: tuple[float, float] | None = None,
    why: str | None = None,
    gate: str | None = None,
    guard: float | None = None,
    interval_words: str = "",
    shared: bool = False,
) -> PredictionScore:
    """Score a prediction against a measurement.

    `unit` is the unit the measurement is in (default: the spec's unit). Number specs give
    the ratio measured/predicted; choice specs whose options carry min/max are a hit when the
    measurement lies in the chosen option's [min, max); text specs only show the measurement.
    `measured` None (or NaN) means nothing could be measured here: never a miss. Only for a
    speedup (unit "x") does the summary suggest a missing accelerator; otherwise it points at
    the run's notes, which say why.
    With unit "%", the measurement is a share (0..1, as runs report accuracy) and is compared
    and shown in percent: 0.977 -> 97.7%; choice ranges are then written in percent too.
    `interval`: the run's interval of the typical value (the median of its repeats), in the
    metric's own unit. The prediction is then a hit only if all of it, widened by this machine's
    guard band, lies inside what the prediction allows (the option's range, or the number's
    tolerance), a miss only if all of it lies outside, and otherwise undecided: neither, said as
    such with `why` (what else the machine was doing, the run's `noise_why`). `gate`: why the
    run's timings cannot decide anything (its `noise_gate`: a GPU that slowed its clocks, or was
    busy with another program's work); every prediction against its interval is then undecided.
    `guard`: the metric's own guard band (how far its separate runs move); None: GUARD.
    `interval_words`: what the interval is, where it is not the interval of a typical value
    ("the batch sizes tied with it": a set of settings a run cannot tell apart).
    `shared`: the run was timed beside another on a device a class shares (its `timing_shared`:
    the learner chose not to wait their turn); whatever it measured is undecided, never a hit or
    a miss.
    Never raises.
    """
    try:
        text = answer if isinstance(answer, str) else str(answer or "")
        if shared and _number(measured) is not None:
            return PredictionScore(
                f"Not graded: measured {_shown(_as_percent(measured, spec, unit or ''), unit or getattr(spec, 'unit', '') or '')}, "
                "but the run was timed beside another learner's run on the same device (you chose not "
                f"to wait your turn). Your prediction ({_said(text, spec)}) stays locked: run it again "
                "in your turn to score it.",
                None,
                False,
                undecided=True,
            )
        if interval is not None and _number(measured) is not None:
            return _score_interval(
                text, spec, measured, unit or "", interval, why, gate, GUARD if guard is None else guard, interval_words
            )
        return _score(text, spec, measured, unit or "")
    except Exception:  # noqa: BLE001 - a display helper must never take the lesson down
        return PredictionScore(summary=f"You said {_quote(answer)}; measured {_shown(measured, unit)}.")


def _said(answer: str, spec: AnyAnswer) -> str:
    if isinstance(spec, ChoiceAnswer):
        i = resolve(answer, spec)
        return f"'{spec.options[i].text}'" if i is not None else f"'{_quote(answer)}'"
    if isinstance(spec, NumberAnswer):
        v = parse_number(answer, spec.unit)
        return format_number(v, spec.unit) if v is not None else f"'{_quote(answer)}'"
    return f"'{_quote(answer)}'"


def _as_percent(measured: Measured, spec: AnyAnswer, unit: str) -> Measured:
    """Shares are measured as fractions; a "%" step compares them in percent."""
    u = unit or getattr(spec, "unit", "") or ""
    if u.strip() == "%" and isinstance(measured, (int, float)) and not isinstance(measured, bool):
        return measured * 100
    return measured


def _score(answer: str, spec: AnyAnswer, measured: Measured, unit: str) -> PredictionScore:
    measured = _as_percent(measured, spec, unit)
    if measured is None or (isinstance(measured, float) and math.isnan(measured)):
        template = NO_SPEEDUP if _about_speed(spec, unit) else NO_MEASUREMENT
        return PredictionScore(template.format(said=_said(answer, spec)))
    if isinstance(spec, NumberAnswer):
        return _score_number(answer, spec, measured, unit)
    if isinstance(spec, ChoiceAnswer):
        return _score_choice(answer, spec, measured, unit)
    if isinstance(spec, TextAnswer):
        return PredictionScore(f"You said '{_quote(answer)}'; measured {_shown(measured, unit)}.")
    return PredictionScore(f"Measured {_shown(measured, unit)}.")


def _about_speed(spec: AnyAnswer, unit: str) -> bool:
    """Is this a speedup comparison (the one kind of metric an absent accelerator empties)?"""
    u = unit or getattr(spec, "unit", "") or ""
    return u.strip().lower() in ("x", "times", "speedup")


def _score_number(answer: str, spec: NumberAnswer, measured: Measured, unit: str) -> PredictionScore:
    shown_unit = spec.unit or unit
    m = _number(measured)
    if m is None:
        return PredictionScore(f"You said {_said(answer, spec)}; measured {_shown(measured, unit)}.")
    if unit and spec.unit and unit_info(unit) and unit_info(spec.unit):
        converted = convert(m, unit, spec.unit)
        if converted is not None:
            m = converted
    predicted = parse_number(answer, spec.unit)
    measured_text = format_number(m, shown_unit)
    if predicted is None:
        return PredictionScore(
            f"I could not read a number in your prediction ('{_quote(answer)}'); measured {measured_text}."
        )
    typed = read_quantity(answer)  # "1 MB" is 10^6 B, "1 MiB" 2^20: the summary says which it read
    unit_read = byte_unit_said(typed.unit) if typed else ""
    said = f"you said {format_number(predicted, shown_unit)}, measured {measured_text}" + (
        f"; {unit_read}" if unit_read else ""
    )
    if predicted == 0 or m == 0 or (predicted < 0) != (m < 0):
        hit = abs(m - predicted) <= (spec.abs_tolerance or 0.0)
        return PredictionScore(("close enough" if hit else "not comparable as a ratio") + f" ({said})", None, hit)
    ratio = m / predicted
    if not math.isfinite(ratio) or ratio == 0:
        return PredictionScore(f"not comparable as a ratio ({said})", None, False)
    if spec.abs_tolerance is not None:
        hit = abs(m - predicted) <= spec.abs_tolerance
    else:
        hit = abs(m - predicted) <= spec.tolerance * abs(m)
    rel = abs(m - predicted) / abs(m)
    if hit:
        if predicted == m:  # "within 1%" would undersell it
            return PredictionScore(f"exactly right ({said})", ratio, True)
        pct = max(1, math.ceil(rel * 100))
        return PredictionScore(f"within {pct}% ({said})", ratio, True)
    factor = max(ratio, 1 / ratio)
    if factor >= 1.5:
        return PredictionScore(f"off by {format_number(factor, 'x')} ({said})", ratio, False)
    direction = "high" if predicted > m else "low"
    return PredictionScore(f"{round(rel * 100)}% too {direction} ({said})", ratio, False)


def _in(option: ChoiceOption, value: float) -> bool:
    return (option.min is None or value >= option.min) and (option.max is None or value < option.max)


def _option_ratio(spec: ChoiceAnswer, index: int | None, m: float, unit: str) -> tuple[float | None, str]:
    """How far the measurement lies from the chosen option, as a ratio, and words for it.

    An option that names one number inside its range ('about 3 GB', for 1.5 to 6) is a guess of
    that number: measured / 3. An option that is a range ('1.5x to 5x', '10x or more') guesses no
    one number in it, so the measurement is compared with the edge it lies beyond: 12x against
    '1.5x to 5x' is 2.4x the top of that range, not 8x its first number."""
    if index is None or not unit or not m:
        return None, ""
    option = spec.options[index]
    named = parse_number(option.text, unit)
    one_number = len(re.findall(_NUMBER_IN_TEXT, option.text)) == 1
    inside = (
        named is not None and (option.min is None or named > option.min) and (option.max is None or named < option.max)
    )
    if named and one_number and inside:
        ratio = m / named
        if 0.95 <= ratio <= 1.05:
            return ratio, ""
        if ratio > 1:
            return ratio, f": {format_number(ratio, 'x')} what you guessed"
        return ratio, f": your guess was {format_number(1 / ratio, 'x')} too high"
    if option.max is not None and m >= option.max and option.max > 0:
        ratio = m / option.max
        return ratio, f": {format_number(ratio, 'x')} the top of your range ({format_number(option.max, unit)})"
    if option.min is not None and m < option.min and option.min > 0:
        ratio = m / option.min
        return ratio, (
            f": the bottom of your range ({format_number(option.min, unit)}) was "
            f"{format_number(1 / ratio, 'x')} too high"
        )
    return None, ""


_NUMBER_IN_TEXT = r"(?<![A-Za-z])[0-9]+(?:[.,][0-9]+)*(?:[eE][-+]?[0-9]+)?"

_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}


def _score_choice(answer: str, spec: ChoiceAnswer, measured: Measured, unit: str) -> PredictionScore:
    index = resolve(answer, spec)
    chose = f"you chose '{spec.options[index].text}'" if index is not None else f"you wrote '{_quote(answer)}'"
    ranged = [o for o in spec.options if o.min is not None or o.max is not None]
    m = _number(measured) if not isinstance(measured, str) or ranged else None
    if ranged and m is not None:
        text = format_number(m, unit)
        home = next((o for o in spec.options if (o.min is not None or o.max is not None) and _in(o, m)), None)
        ratio, times = _option_ratio(spec, index, m, unit)
        if index is not None and home is spec.options[index]:
            return PredictionScore(f"{chose}; measured {text}, which is in that range", ratio, True)
        if home is None:
            return PredictionScore(f"{chose}; measured {text}, outside every option's range{times}", ratio, False)
        return PredictionScore(f"{chose}; measured {text}, which is in '{home.text}'{times}", ratio, False)
    text = _shown(measured, unit)
    if index is not None and isinstance(measured, str) and normalise(measured) == normalise(spec.options[index].text):
        return PredictionScore(f"{chose}; measured {text}: a match", None, True)
    if index is not None and isinstance(measured, bool):  # a yes/no question about a true/false metric
        said = normalise(spec.options[index].text)
        if said in (_YES if measured else _NO):
            return PredictionScore(f"{chose}; measured {text}: a match", None, True)
    return PredictionScore(f"{chose}; measured {text}", None, False)


def judged_edges(spec: AnyAnswer, unit: str = "", answer: str | None = None) -> tuple[float, ...]:
    """Where a verdict on `spec` turns, in the measurement's own unit (a share where the step is in
    "%"): every option's ends for a choice, whichever is chosen; for a number, the ends of the
    tolerance about `answer`. A run that measures until its interval is clear of all of them has
    decided every option (measurement.repeats). Empty where nothing is judged by range."""
    try:
        if isinstance(spec, ChoiceAnswer):
            ends = [e for o in spec.options for e in (o.min, o.max) if e is not None]
        elif isinstance(spec, NumberAnswer) and answer is not None:
            ends = [e for e in (_allowed(answer, spec, unit) or ()) if e is not None]
        else:
            return ()
        scale = 100 if _is_percent(spec, unit) else 1
        return tuple(sorted({float(e) / scale for e in ends if math.isfinite(float(e))}))
    except Exception:  # noqa: BLE001 - an edge is a help to the run, never a reason for it to fail
        return ()


def _allowed(answer: str, spec: AnyAnswer, unit: str) -> tuple[float | None, float | None] | None:
    """The values of the measurement (in `unit`) the prediction calls right: the chosen option's
    [min, max), or the number's tolerance about what was predicted. None where it names no range
    (an option without one, a number that could not be read)."""
    if isinstance(spec, ChoiceAnswer):
        i = resolve(answer, spec)
        option = spec.options[i] if i is not None else None
        if option is None or (option.min is None and option.max is None):
            return None
        return option.min, option.max
    if isinstance(spec, NumberAnswer):
        predicted = parse_number(answer, spec.unit)
        if predicted is None:
            return None
        if spec.abs_tolerance is not None:
            low, high = predicted - spec.abs_tolerance, predicted + spec.abs_tolerance
        elif 0 < spec.tolerance < 1 and predicted != 0:
            # |m - p| <= tol |m| (the single-value rule) holds for m between p / (1 + tol) and p / (1 - tol)
            low, high = sorted((predicted / (1 + spec.tolerance), predicted / (1 - spec.tolerance)))
        else:
            return None
        if unit and spec.unit and unit_info(unit) and unit_info(spec.unit):
            low_in, high_in = (convert(v, spec.unit, unit) for v in (low, high))
            if low_in is None or high_in is None:
                return None
            return low_in, high_in
        return low, high
    return None


def _score_interval(
    answer: str,
    spec: AnyAnswer,
    measured: Measured,
    unit: str,
    interval: tuple[float, float],
    why: str | None = None,
    gate: str | None = None,
    guard: float = GUARD,
    interval_words: str = "",
) -> PredictionScore:
    """Judged by the interval of the typical value: hit, miss, or undecided (see score_prediction)."""
    scale = 100 if _is_percent(spec, unit) else 1  # as _as_percent scales the measurement
    lo, hi = (v * scale for v in interval)
    central = _score(answer, spec, measured, unit)
    allowed = _allowed(answer, spec, unit)
    if allowed is None:
        return central
    shown_unit = unit or getattr(spec, "unit", "")
    m = _number(_as_percent(measured, spec, unit))
    if m is None or not lo <= m <= hi:  # an interval that does not hold its own headline says nothing
        return central
    span = f"{format_number(lo, shown_unit)} to {format_number(hi, shown_unit)}"
    named = f"{interval_words}: {span}" if interval_words else f"its interval {span}"
    if isinstance(gate, str) and gate.strip():
        return PredictionScore(
            f"This machine can't tell yet: measured {format_number(m, shown_unit)} ({named if interval_words else f'interval {span}'}), but "
            f"{' '.join(gate.split())[0].lower() + ' '.join(gate.split())[1:]} Run it again (r) when the GPU is "
            f"cool and free. Your prediction ({_said(answer, spec)}) stays locked, and no try was used.",
            None,
            False,
            undecided=True,
        )
    verdict = judge(MedianInterval(m, lo, hi, CONFIDENCE, 0, False), *allowed, guard=guard)
    if verdict is Decision.HIT:
        all_of = "all of them" if interval_words else "all of it"  # a set of settings, or an interval
        words = f"{all_of} inside that range" if isinstance(spec, ChoiceAnswer) else f"{all_of} within your tolerance"
        if central.hit:
            return PredictionScore(f"{central.summary}; {named}, {words}", central.ratio, True)
        said = (
            f"you chose {_said(answer, spec)}" if isinstance(spec, ChoiceAnswer) else f"you said {_said(answer, spec)}"
        )
        return PredictionScore(
            f"{said}; measured {format_number(m, shown_unit)}, {named}, {words}", central.ratio, True
        )
    if verdict is Decision.MISS:
        outside = f"{named}, all outside it too" if interval_words else f"{named} lies outside it too"
        return PredictionScore(f"{central.summary}; {outside}", central.ratio, False)
    reach = widened(lo, hi, guard)
    edges = [e for e in allowed if e is not None and reach[0] <= e <= reach[1]]
    edge = (
        (
            f"It straddles {format_number(edges[0], shown_unit)}, "
            + ("the edge of your option" if isinstance(spec, ChoiceAnswer) else "where your tolerance ends")
        )
        if edges
        else "It reaches past what your prediction allows"
    )
    if interval_words:
        reach_words = f"{interval_words} run {span}" + (
            f" (widened by {guard:.0%}, how far separate runs move)" if guard else ""
        )
    else:
        reach_words = (
            f"the interval that holds its typical value runs {span} (widened by {guard:.0%}, how far separate "
            "runs of it move)"
        )
    return PredictionScore(
        f"This machine can't tell yet: measured {format_number(m, shown_unit)}, and {reach_words}. {edge}, so it is "
        f"neither a hit nor a miss. {_why_undecided(why)} Your prediction ({_said(answer, spec)}) stays locked, and "
        "no try was used.",
        None,
        False,
        undecided=True,
    )


def _why_undecided(why: str | None) -> str:
    """The run's own account of what else the machine was doing, and the re-run it points to."""
    text = " ".join(str(why).split()) if isinstance(why, str) else ""
    if not text:
        return "Run it again (r) to measure more: more repeats narrow the interval."
    if not text.endswith("."):
        text += "."
    if text.startswith("Nothing else was seen"):
        return (
            f"{text} So the spread is this machine's own, or the typical value sits near the edge: run it "
            "again (r) to measure more."
        )
    return f"{text} Run it again (r) when it is quieter."


def _is_percent(spec: AnyAnswer, unit: str) -> bool:
    return (unit or getattr(spec, "unit", "") or "").strip() == "%"
