"""One entry point for every answer kind: `grade(answer, spec, metrics)` and `describe_spec(spec)`."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from tutor.checks.answers import AnswerSpec, AnyAnswer, ChoiceAnswer, NumberAnswer, TextAnswer, Verdict
from tutor.checks.choice import describe_choice, grade_choice
from tutor.checks.number import describe_number, grade_number
from tutor.checks.text import grade_text

_ADAPTER: TypeAdapter[AnyAnswer] = TypeAdapter(AnswerSpec)


def as_spec(spec: AnyAnswer | dict[str, Any]) -> AnyAnswer:
    """Accept a spec model or its plain dict (as written in YAML)."""
    if isinstance(spec, (ChoiceAnswer, NumberAnswer, TextAnswer)):
        return spec
    return _ADAPTER.validate_python(spec)


def grade(answer: str, spec: AnyAnswer | dict[str, Any], metrics: dict[str, Any] | None = None) -> Verdict:
    """Grade a learner's answer. Never raises on any answer text.

    choice: the option's text, its 1-based number or its letter; number: value with units,
    against `value` ± tolerance, `from_metric` (a metric of this session's runs, from
    `metrics`) or `ranges`; text: the rubric (see checks.text).
    A spec that is not valid raises ValueError (that is the lesson author's error, caught by lint).
    """
    try:
        spec = as_spec(spec)
    except ValidationError as e:
        raise ValueError(f"invalid answer spec: {e}") from None
    if not isinstance(answer, str):
        answer = "" if answer is None else str(answer)
    try:
        if isinstance(spec, ChoiceAnswer):
            return grade_choice(answer, spec)
        if isinstance(spec, NumberAnswer):
            return grade_number(answer, spec, metrics)
        return grade_text(answer, spec)
    except Exception as e:  # noqa: BLE001 - a learner's text must never crash the tutor
        return Verdict(
            False, f"Sorry, this answer could not be graded ({type(e).__name__}). Try rephrasing it.", judged=False
        )


def describe_spec(spec: AnyAnswer | dict[str, Any], *, example: bool = True) -> str:
    """What kind of answer is expected, for an input's placeholder. `example` False (a prediction):
    a number's description shows no value, which could give the answer away."""
    spec = as_spec(spec)
    if isinstance(spec, ChoiceAnswer):
        return describe_choice(spec)
    if isinstance(spec, NumberAnswer):
        return describe_number(spec, example)
    if spec.rubric is None:
        return "a short answer in your own words"
    return "a sentence or two"
