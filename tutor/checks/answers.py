"""The answer specs a lesson's YAML declares for predict and check steps.

Pure pydantic: no Textual, no torch. `tutor.course.lesson` embeds these models, and
`checks.grade` grades a learner's answer against them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChoiceOption(Strict):
    """One option. In a predict step, `min`/`max` give the measured range the option stands for."""

    text: str = Field(min_length=1)
    correct: bool = False
    feedback: str = ""  # shown when the learner picks this option
    min: float | None = None  # predict steps: lower bound of the measurement this option means
    max: float | None = None  # predict steps: upper bound (exclusive)


class ChoiceAnswer(Strict):
    type: Literal["choice"]
    options: list[ChoiceOption] = Field(min_length=2)

    # The schema (`gpututor schema`) says a plain string is an option too.
    @field_validator("options", mode="before", json_schema_input_type=list[ChoiceOption | str])
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        # `options: ["slower", "about 2x"]` is shorthand for [{text: "slower"}, ...]
        if isinstance(value, list):
            # (a number too, so that the error asks for quotes rather than a mapping)
            return [{"text": v} if isinstance(v, (str, int, float)) and not isinstance(v, bool) else v for v in value]
        return value


class NumberRange(Strict):
    """A band of answers with its own feedback (a known wrong answer, or an accepted band)."""

    min: float | None = None
    max: float | None = None  # inclusive
    correct: bool = False
    feedback: str = ""


class NumberAnswer(Strict):
    type: Literal["number"]
    unit: str = ""  # "x", "%", "GB", "GiB", "MB", "s", "ms", "" — answers may use another unit of the same kind
    value: float | None = None  # the correct value (or use `from_metric`)
    from_metric: str | None = None  # the correct value is this metric of the session's latest run
    tolerance: float = 0.1  # relative: |answer - value| <= tolerance * |value|
    abs_tolerance: float | None = None  # absolute, used instead of `tolerance` when given
    ranges: list[NumberRange] = []
    min: float | None = None  # input bounds for predict steps (slider / validation)
    max: float | None = None


class Concept(Strict):
    """A required idea. Matched when any of its phrases occurs in the answer.

    A phrase matches regardless of case, punctuation, plural/verb endings and word order
    (its words must all occur close together). Prefix a phrase with `re:` for a regex.
    A word ending in `*` matches any word it begins ("automat*"). Phrases with code
    punctuation ("model(inputs)", "to(device)") match their tokens in order. A negated
    statement ("does not underflow") does not match; tutor/checks/text.py has the details.
    """

    name: str
    any: list[str] = Field(min_length=1)
    missing: str = ""  # feedback when the answer lacks this idea


class Misconception(Strict):
    """A known wrong idea, with feedback aimed at it."""

    name: str
    any: list[str] = Field(min_length=1)
    feedback: str


class Rubric(Strict):
    require: list[Concept] = []
    misconceptions: list[Misconception] = []
    min_concepts: int | None = None  # how many required concepts suffice (default: all)
    # Ideas that make an answer fuller but are not needed to pass: they count towards
    # `score`, and a correct answer that lacks one is told about it ("To go further: ...").
    bonus: list[Concept] = []


class Examples(Strict):
    """Answers an instructor expects to be graded right / wrong (used by tests and `lesson test`)."""

    right: list[str] = []
    wrong: list[str] = []


class TextAnswer(Strict):
    type: Literal["text"]
    rubric: Rubric | None = None  # None in predict steps: free text, not graded
    reference: str = ""  # the model answer, shown after success or giving up
    max_length: int = 2000


AnswerSpec = Annotated[ChoiceAnswer | NumberAnswer | TextAnswer, Field(discriminator="type")]
AnyAnswer = ChoiceAnswer | NumberAnswer | TextAnswer  # an AnswerSpec once read
# What a run reports for a metric (tutor.experiments.events.Metric, said again here: no import of it)
Measured = float | int | str | bool | None


@dataclass(frozen=True)
class Verdict:
    correct: bool
    feedback: str
    missing: list[str] = field(default_factory=list)  # names of required concepts not found
    matched_misconception: str | None = None
    score: float = 0.0  # 0..1, share of the rubric met
    # False when the answer could not be judged at all (blank, no number, no such option, nothing
    # measured to compare with): a review does not count it against the learner.
    judged: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {
            "correct": self.correct,
            "feedback": self.feedback,
            "missing": list(self.missing),
            "matched_misconception": self.matched_misconception,
            "score": self.score,
            "judged": self.judged,
        }


@dataclass(frozen=True)
class PredictionScore:
    """How a locked prediction compares with what was measured."""

    summary: str  # "off by 3.1x (you said 10x, measured 3.2x)"
    ratio: float | None = None  # measured / predicted, where both are numbers
    hit: bool = False  # within the option's range / the tolerance
    undecided: bool = False  # the measurement's interval straddles an edge: neither a hit nor a miss


__all__ = [
    "AnswerSpec",
    "ChoiceAnswer",
    "ChoiceOption",
    "Concept",
    "Examples",
    "Misconception",
    "NumberAnswer",
    "NumberRange",
    "PredictionScore",
    "Rubric",
    "TextAnswer",
    "Verdict",
]
