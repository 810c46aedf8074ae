"""Grade multiple-choice answers: the option's text, its 1-based number, or its letter."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tutor.checks.answers import ChoiceAnswer, ChoiceOption, Verdict
from tutor.checks.number import ambiguity, format_number, parse_number, quantity_in, read_quantity
from tutor.checks.text import normalise

MAX_INPUT = 2_000

_NUMBER_RE = re.compile(r"^(?:option|answer|choice|#|no\.?)?\s*\(?\s*([0-9]{1,3})\s*[).:]?$")
_LETTER_RE = re.compile(r"^(?:option|answer|choice)?\s*\(?\s*([a-z])\s*[).:]?$")


def _key(text: str) -> str:
    """Text compared loosely: normalised, punctuation and extra spaces removed."""
    return " ".join(re.findall(r"[^\W_]+", normalise(text)))


def resolve(answer: str, spec: ChoiceAnswer) -> int | None:
    """The 0-based index of the option the learner chose, or None if it is unclear."""
    if not isinstance(answer, str):
        return None
    raw = normalise(answer[:MAX_INPUT]).strip()
    if not raw:
        return None
    keys = [_key(o.text) for o in spec.options]
    key = _key(raw)
    # 1. the option's own text (this wins over numbers and letters: an option may be "2" or "a")
    exact = [i for i, k in enumerate(keys) if k and k == key]
    if len(exact) == 1:
        return exact[0]
    # 2. its 1-based number
    m = _NUMBER_RE.match(raw)
    if m:
        n = int(m.group(1))
        return n - 1 if 1 <= n <= len(spec.options) else None
    # 3. its letter
    m = _LETTER_RE.match(raw)
    if m and len(spec.options) <= 26:
        n = ord(m.group(1)) - ord("a")
        return n if n < len(spec.options) else None
    if not key:
        return None
    # 4. a unique option whose text contains the answer, or that the answer contains
    padded = f" {key} "
    inside = [i for i, k in enumerate(keys) if k and f" {k} " in padded]
    if len(inside) == 1:
        return inside[0]
    if len(inside) > 1:  # the longest contained option, if it is the only one that long
        longest = max(len(keys[i]) for i in inside)
        best = [i for i in inside if len(keys[i]) == longest]
        return best[0] if len(best) == 1 else None
    holds = [i for i, k in enumerate(keys) if len(key) >= 2 and f" {key} " in f" {k} "]
    if len(holds) == 1:
        return holds[0]
    return None


def describe_choice(spec: ChoiceAnswer) -> str:
    n = len(spec.options)
    return f"pick 1-{n}" if n > 1 else "pick 1"


def grade_choice(answer: str, spec: ChoiceAnswer) -> Verdict:
    index = resolve(answer, spec)
    if index is None:
        n = len(spec.options)
        letters = f"a-{chr(ord('a') + n - 1)}" if n <= 26 else "its letter"
        if not isinstance(answer, str) or not answer.strip():
            return Verdict(
                False,
                f"Pick one of the options: type its number (1-{n}), its letter ({letters}) or its text.",
                judged=False,
            )
        return Verdict(
            False,
            f"I could not tell which option you mean. Type its number (1-{n}), its letter ({letters}) or its text.",
            judged=False,
        )
    option: ChoiceOption = spec.options[index]
    if option.correct:
        return Verdict(True, option.feedback or f"Right: {option.text}.", score=1.0)
    return Verdict(False, option.feedback or "Not this one. Think about what each option would mean, and try again.")


# ----------------------------------------------------------------------------- typed on a list

# "option 4", "#4", "(4)", "4.", "4)": the words or the punctuation say it is an option's number.
_EXPLICIT_NUMBER_RE = re.compile(
    r"^(?:(?:option|answer|choice|no\.?)\s*|#\s*)\(?\s*([0-9]{1,3})\s*[).:]?$"
    r"|^\(\s*([0-9]{1,3})\s*\)$|^([0-9]{1,3})\s*[).]$"
)
_BARE_NUMBER_RE = re.compile(r"^[0-9]{1,3}$")


@dataclass(frozen=True)
class Reading:
    """One thing a line typed on a choice list can mean: an option, and how the screen names it."""

    index: int
    said: str  # "option 4, '10x or more'" or "4x, which is in '1.5x to 5x'"
    exact: str  # what to type to mean this and nothing else: "option 4", "4x"


@dataclass(frozen=True)
class TypedChoice:
    """What a line typed on a choice list means: one reading (that option), two (ask which),
    or none (`problem` says why and what to type)."""

    readings: tuple[Reading, ...] = ()
    problem: str = ""

    @property
    def index(self) -> int | None:
        return self.readings[0].index if len(self.readings) == 1 else None

    def question(self) -> str:
        """Two readings asked back: "Did you mean option 4, '10x or more', or 4x, which is in ...?"."""
        return "Did you mean " + ", or ".join(r.said for r in self.readings) + "?"


def _has_range(option: ChoiceOption) -> bool:
    return option.min is not None or option.max is not None


def _in_range(option: ChoiceOption, value: float) -> bool:
    return (option.min is None or value >= option.min) and (option.max is None or value < option.max)


def _named_value(option: ChoiceOption, unit: str) -> float | None:
    """The one number an option's text names ("about 3 GB" -> 3), None for none or several."""
    if len(re.findall(r"(?<![\w.])[0-9]+(?:[.,][0-9]+)?", option.text)) != 1:
        return None
    return parse_number(option.text, unit)


def _option_for_value(value: float, spec: ChoiceAnswer, unit: str) -> tuple[int | None, bool]:
    """The one option a value lands in, and whether the options stand for values at all.
    Options with ranges (min/max) take a value in [min, max); options without name one number
    each ("about 3 GB"), taken when the value is that number."""
    options = spec.options
    if any(_has_range(o) for o in options):
        inside = [i for i, o in enumerate(options) if _has_range(o) and _in_range(o, value)]
        return (inside[0] if len(inside) == 1 else None), True
    named = [(i, v) for i, o in enumerate(options) if (v := _named_value(o, unit)) is not None]
    if not named:
        return None, False
    same = [i for i, v in named if math.isclose(v, value, rel_tol=1e-9, abs_tol=1e-12)]
    return (same[0] if len(same) == 1 else None), True


def _as_option(index: int, spec: ChoiceAnswer) -> Reading:
    return Reading(index, f"option {index + 1}, '{spec.options[index].text}'", f"option {index + 1}")


def _as_value(index: int, value: float, spec: ChoiceAnswer, unit: str) -> Reading:
    option = spec.options[index]
    where = "in" if _has_range(option) else ""
    shown = format_number(value, unit)
    return Reading(
        index, f"{shown}, which is {where + ' ' if where else ''}'{option.text}'", shown if unit else f"about {shown}"
    )


def read_typed(text: str, spec: ChoiceAnswer, unit: str = "") -> TypedChoice:
    """What a learner typed on a choice list means (`unit`: the unit the options' ranges are in).

    In order: an option's own words ("RuntimeError"); an option's number said as one ("option 4",
    "#4", "4."); a bare number, which is an option's number unless an option's range or value
    could mean it too, and then both readings are returned to be asked about (on "about the
    same / 3 / 12 / 24 GB", "3" is option 3 or 3 GB); a letter ("b"); a value with a unit or words
    ("4x", "3 GB", "about 3", "~2.5"), matched against the options' ranges or values and never
    read as an option's number; then words inside an option's text. Never guesses: what it cannot
    read is a `problem`. Never raises."""
    try:
        return _read_typed(text, spec, unit)
    except Exception:  # noqa: BLE001 - a learner's text must never crash the tutor
        return TypedChoice(problem=_cannot_tell(spec))


def _cannot_tell(spec: ChoiceAnswer) -> str:
    n = len(spec.options)
    letters = f", its letter (a-{chr(ord('a') + n - 1)})" if n <= 26 else ""
    values = " or a value such as the ones in the options" if any(_has_range(o) for o in spec.options) else ""
    return f"I could not tell which option you mean. Type its number (1-{n}){letters}, its words{values}."


def _read_typed(text: str, spec: ChoiceAnswer, unit: str) -> TypedChoice:
    raw = normalise((text or "")[:MAX_INPUT]).strip()
    n = len(spec.options)
    if not raw:
        return TypedChoice(problem=f"Pick one of the {n} options first (arrows, or type its number).")
    keys = [_key(o.text) for o in spec.options]
    exact = [i for i, k in enumerate(keys) if k and k == _key(raw)]
    if len(exact) == 1:
        return TypedChoice((Reading(exact[0], f"'{spec.options[exact[0]].text}'", spec.options[exact[0]].text),))
    explicit = _EXPLICIT_NUMBER_RE.match(raw)
    if explicit:
        number = int(next(g for g in explicit.groups() if g))
        if 1 <= number <= n:
            return TypedChoice((_as_option(number - 1, spec),))
        return TypedChoice(problem=f"There is no option {number}: the options are 1 to {n}.")
    if _BARE_NUMBER_RE.match(raw):
        number = int(raw)
        by_number = number - 1 if 1 <= number <= n else None
        by_value, has_values = _option_for_value(float(number), spec, unit)
        readings: list[Reading] = []
        if by_number is not None:
            readings.append(_as_option(by_number, spec))
        if by_value is not None and by_value != by_number:
            readings.append(_as_value(by_value, float(number), spec, unit))
        if readings:
            return TypedChoice(tuple(readings))
        if has_values:
            return TypedChoice(
                problem=f"{format_number(float(number), unit)} is in none of the options, and "
                f"there is no option {number}."
            )
        return TypedChoice(problem=f"There is no option {number}: the options are 1 to {n}.")
    letter = _LETTER_RE.match(raw)
    if letter and n <= 26:
        at = ord(letter.group(1)) - ord("a")
        if at < n:
            return TypedChoice((_as_option(at, spec),))
    as_typed = " ".join((text or "")[:MAX_INPUT].split())  # the learner's own spelling, for messages
    quantity = read_quantity(as_typed)
    if quantity is not None and _option_for_value(quantity.value, spec, unit)[1]:
        question = ambiguity(as_typed, unit)
        if question is not None:
            return TypedChoice(problem=question)
        value = quantity_in(quantity, unit)
        if value is None:
            return TypedChoice(
                problem=f"'{quantity.text}' is not a value these options can hold: they are in "
                f"{unit}. Type a value in {unit}, or the option's number."
            )
        index, _ = _option_for_value(value, spec, unit)
        if index is None:
            return TypedChoice(problem=f"{format_number(value, unit)} is in none of the options.")
        return TypedChoice((_as_value(index, value, spec, unit),))
    index = resolve(raw, spec)
    if index is None:
        index = _begun(_key(raw), keys)
    if index is not None:
        return TypedChoice((Reading(index, f"'{spec.options[index].text}'", spec.options[index].text),))
    return TypedChoice(problem=_cannot_tell(spec))


def _begun(key: str, keys: list[str]) -> int | None:
    """The one option whose words begin as typed, as a search box finds it ("runtime" for
    "RuntimeError", "a warn" for "A warning, and ..."): three letters at least, and only one such."""
    if len(key.replace(" ", "")) < 3:
        return None
    found = [i for i, k in enumerate(keys) if f" {key}" in f" {k}"]  # from the start of a word
    return found[0] if len(found) == 1 else None
