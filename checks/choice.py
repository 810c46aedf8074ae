"""Grade multiple-choice answers: the option's text, its 1-based number, or its letter."""

from __future__ import annotations

import re

from checks.spec import ChoiceAnswer, ChoiceOption, Verdict
from checks.text import normalise

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
            return Verdict(False, f"Pick one of the options: type its number (1-{n}), its letter ({letters}) or its text.",
                           judged=False)
        return Verdict(
            False,
            f"I could not tell which option you mean. Type its number (1-{n}), its letter ({letters}) or its text.",
            judged=False,
        )
    option: ChoiceOption = spec.options[index]
    if option.correct:
        return Verdict(True, option.feedback or f"Right: {option.text}.", score=1.0)
    return Verdict(False, option.feedback or "Not this one. Think about what each option would mean, and try again.")
