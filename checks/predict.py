"""Compare a locked prediction with what a run measured ("off by 3.1x (you said 10x, measured 3.2x)")."""

from __future__ import annotations

import math
import re

from checks.choice import resolve
from checks.number import byte_unit_said, convert, format_number, parse_number, read_quantity, unit_info
from checks.spec import ChoiceAnswer, NumberAnswer, PredictionScore, TextAnswer
from checks.text import normalise

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


def _number(x) -> float | None:
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


def _shown(measured, unit: str) -> str:
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


# Repeats whose highest is more than this many times their lowest are noise, not a measurement:
# the prediction is not graded, and the learner is offered a re-run.
NOISY_SPREAD = 2.0
SPREAD_SUFFIXES = ("_low", "_high")  # a metric NAME's repeats reported as NAME_low and NAME_high


def spread_of(metrics: dict, name: str | None) -> tuple[float, float] | None:
    """The range a metric's repeats covered, when the run reported it (NAME_low, NAME_high)."""
    if not name or not isinstance(metrics, dict):
        return None
    lo, hi = (_number(metrics.get(name + suffix)) for suffix in SPREAD_SUFFIXES)
    if lo is None or hi is None or lo > hi:
        return None
    return lo, hi


def score_prediction(answer: str, spec, measured, unit: str = "", spread: tuple[float, float] | None = None,
                     why: str | None = None) -> PredictionScore:
    """Score a prediction against a measurement.

    `unit` is the unit the measurement is in (default: the spec's unit). Number specs give
    the ratio measured/predicted; choice specs whose options carry min/max are a hit when the
    measurement lies in the chosen option's [min, max); text specs only show the measurement.
    `measured` None (or NaN) means nothing could be measured here: never a miss. Only for a
    speedup (unit "x") does the summary suggest a missing accelerator; otherwise it points at
    the run's notes, which say why.
    With unit "%", the measurement is a share (0..1, as runs report accuracy) and is compared
    and shown in percent: 0.977 -> 97.7%; choice ranges are then written in percent too.
    `spread`: the lowest and highest of the run's repeats, in the metric's own unit. A prediction
    is then graded against that interval, not one draw: a hit anywhere in it counts. Where the
    repeats lie more than NOISY_SPREAD times apart, nothing is graded (`noisy`); `why`, what else
    the machine was doing meanwhile as the run saw it (its `noise_why` metric), is then said.
    Never raises.
    """
    try:
        text = answer if isinstance(answer, str) else str(answer or "")
        if spread is not None and _number(measured) is not None:
            return _score_spread(text, spec, measured, unit or "", spread, why)
        return _score(text, spec, measured, unit or "")
    except Exception:  # a display helper must never take the lesson down
        return PredictionScore(summary=f"You said {_quote(answer)}; measured {_shown(measured, unit)}.")


def _said(answer: str, spec) -> str:
    if isinstance(spec, ChoiceAnswer):
        i = resolve(answer, spec)
        return f"'{spec.options[i].text}'" if i is not None else f"'{_quote(answer)}'"
    if isinstance(spec, NumberAnswer):
        v = parse_number(answer, spec.unit)
        return format_number(v, spec.unit) if v is not None else f"'{_quote(answer)}'"
    return f"'{_quote(answer)}'"


def _as_percent(measured, spec, unit: str):
    """Shares are measured as fractions; a "%" step compares them in percent."""
    u = unit or getattr(spec, "unit", "") or ""
    if u.strip() == "%" and isinstance(measured, (int, float)) and not isinstance(measured, bool):
        return measured * 100
    return measured


def _score(answer: str, spec, measured, unit: str) -> PredictionScore:
    measured = _as_percent(measured, spec, unit)
    if isinstance(spec, ChoiceAnswer) and not unit and getattr(spec, "unit", ""):
        unit = spec.unit
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


def _about_speed(spec, unit: str) -> bool:
    """Is this a speedup comparison (the one kind of metric an absent accelerator empties)?"""
    u = unit or getattr(spec, "unit", "") or ""
    return u.strip().lower() in ("x", "times", "speedup")


def _score_number(answer: str, spec: NumberAnswer, measured, unit: str) -> PredictionScore:
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
        return PredictionScore(f"I could not read a number in your prediction ('{_quote(answer)}'); measured {measured_text}.")
    typed = read_quantity(answer)  # "1 MB" is 10^6 B, "1 MiB" 2^20: the summary says which it read
    unit_read = byte_unit_said(typed.unit) if typed else ""
    said = f"you said {format_number(predicted, shown_unit)}, measured {measured_text}" + (
        f"; {unit_read}" if unit_read else "")
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


def _in(option, value: float) -> bool:
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
    inside = named is not None and (option.min is None or named > option.min) and \
        (option.max is None or named < option.max)
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
        return ratio, (f": the bottom of your range ({format_number(option.min, unit)}) was "
                       f"{format_number(1 / ratio, 'x')} too high")
    return None, ""


_NUMBER_IN_TEXT = r"(?<![A-Za-z])[0-9]+(?:[.,][0-9]+)*(?:[eE][-+]?[0-9]+)?"

_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}


def _score_choice(answer: str, spec: ChoiceAnswer, measured, unit: str) -> PredictionScore:
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


def _score_spread(answer: str, spec, measured, unit: str, spread: tuple[float, float],
                  why: str | None = None) -> PredictionScore:
    """Graded against the repeats' interval: a hit if the prediction fits any value in it."""
    lo, hi = (_as_percent(v, spec, unit) for v in spread)
    if lo > 0 and hi / lo > NOISY_SPREAD:
        shown_unit = unit or getattr(spec, "unit", "")
        return PredictionScore(
            f"Too noisy to grade: the repeats ranged from {format_number(lo, shown_unit)} to "
            f"{format_number(hi, shown_unit)} ({format_number(hi / lo, 'x')} apart), so one figure would be a draw, "
            f"not a measurement. {_why_noisy(why)} "
            f"Your prediction ({_said(answer, spec)}) stays locked.", None, False, noisy=True)
    central = _score(answer, spec, measured, unit)
    if central.hit:
        return central
    candidates = [_score(answer, spec, v / (100 if _is_percent(spec, unit) else 1), unit) for v in (lo, hi)]
    inside = next((c for c in candidates if c.hit), None)
    if inside is None and isinstance(spec, NumberAnswer):
        predicted = parse_number(answer, spec.unit)
        m_lo, m_hi = lo, hi
        if unit and spec.unit and unit_info(unit) and unit_info(spec.unit):
            m_lo, m_hi = (convert(v, unit, spec.unit) or v for v in (lo, hi))
        if predicted is not None and m_lo <= predicted <= m_hi:
            inside = central
    if inside is None and isinstance(spec, ChoiceAnswer):
        i = resolve(answer, spec)
        option = spec.options[i] if i is not None else None
        if option is not None and (option.min is not None or option.max is not None) and \
                (option.max is None or lo < option.max) and (option.min is None or hi >= option.min):
            inside = central
    shown_unit = unit or getattr(spec, "unit", "")
    repeats = f"the repeats ranged {format_number(lo, shown_unit)} to {format_number(hi, shown_unit)}"
    if inside is not None:
        m = format_number(_number(_as_percent(measured, spec, unit)), shown_unit)
        if isinstance(spec, ChoiceAnswer):
            said = f"you chose {_said(answer, spec)}"
        else:
            said = f"you said {_said(answer, spec)}"
        return PredictionScore(f"within this run's noise ({said}; measured {m}, and {repeats})", central.ratio, True)
    return PredictionScore(f"{central.summary}; {repeats}", central.ratio, False)


def _why_noisy(why: str | None) -> str:
    """The run's own account of what else the machine was doing, and the re-run it points to."""
    text = " ".join(str(why).split()) if isinstance(why, str) else ""
    if not text:
        return "Something else was probably using the machine: run it again (r) when it is quieter."
    if not text.endswith("."):
        text += "."
    if text.startswith("Nothing else was seen"):
        return f"{text} Run it again (r): a second run often settles."
    return f"{text} Run it again (r) when it is quieter."


def _is_percent(spec, unit: str) -> bool:
    return (unit or getattr(spec, "unit", "") or "").strip() == "%"
