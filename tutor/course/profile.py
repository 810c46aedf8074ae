"""The prediction profile: how far the learner's locked predictions landed from what was measured,
per concept (a predict step's `concept:` tag), and how that changes over time.

The signed error of one prediction is a log ratio, log(predicted / measured): above 0 the learner
overestimated, below 0 underestimated, and exp(|error|) is the factor they were off by.

- A number prediction: log(predicted / measured), the measurement in the answer's unit (as the
  reveal converts it: a share measured as 0.35 against "35%").
- A choice whose options carry min/max: 0 when the measurement fell in the chosen range; otherwise
  the log ratio of the chosen range's nearest edge to the measurement, i.e. at least how far off
  the choice was. (Not the range's geometric midpoint: it does not exist for [0, 1) nor for an
  open-ended "5x or more", which most lessons' options are.)

A zero on either side (a gradient that underflowed to 0, or a chosen option that names zero, "Zero:
it underflows") has no ratio: that prediction counts as a hit or a miss, and in which direction, but
not in the factors.

Each prediction's hit or miss is its reveal's (`Reveal.judge`): what the reveal does not score (a
run at other settings, a noisy run) the profile lists as unscored, as it does a locked prediction on
a step with no concept.

Per concept: how many predictions, how many hits (the reveal's own verdict: within the number's
tolerance, or in the chosen range; a concept within 15% on average but with a miss is "close", not
"within"), the bias (geometric mean of predicted / measured: 2.1 means the
learner predicts 2.1 times what is measured, on the geometric average) and the typical factor
(exp of the mean |error|: a learner off x3 both ways has no bias, and a typical factor of 3).

Pure Python over the lesson model, the progress store and the session: no Textual, no torch.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tutor import checks
from tutor.charts import Miss, calibration
from tutor.checks.answers import ChoiceAnswer, NumberAnswer
from tutor.checks.choice import resolve
from tutor.checks.number import convert, unit_info
from tutor.course.lesson import InstrumentStep, Lesson, PredictStep
from tutor.course.progress import Prediction, Progress
from tutor.course.session import LessonSession, Pending
from tutor.present import number

# Under this typical factor a concept reads "within 15%"; a bias must reach it to be called one.
WITHIN = 1.15
# A bias is named (over/underestimate) only when it carries at least this share of the typical
# error; below, the learner errs both ways and the sentence says so instead.
LEAN_SHARE = 0.5

NOTHING_YET = "No predictions measured yet: lock a prediction and run the step after it."
NO_CONCEPT = (
    "its step names no concept, so no row of the profile counts it (the reveal on the step still says how it went)"
)

# How the built-in concepts read in a sentence; any other tag reads as its words.
CONCEPT_LABELS = {
    "gpu-speedup": "GPU speed-ups",
    "amp-speedup": "mixed-precision speed-ups",
    "throughput": "throughput gains",
    "batch-size": "the best batch size",
    "memory": "memory",
    "time": "how long things take",
    "utilisation": "how busy the hardware is",
    "accuracy": "accuracy",
    "gradients": "gradient sizes",
    "distributed": "what each process of a distributed run sees",
    "communication": "what DDP sends between processes",
}


def concept_label(concept: str) -> str:
    return CONCEPT_LABELS.get(concept, concept.replace("-", " "))


# A zero on either side: a gradient that underflowed, or the prediction that it would.
ZERO_HAS_NO_FACTOR = "a zero, such as an underflow, has no ratio to be off by"


def _percent(factor: float) -> str:
    """1.1 -> '10%': how far a factor near 1 is off."""
    return f"{max(1, round((factor - 1) * 100))}%"


def factor_text(factor: float) -> str:
    """x2.1: one decimal is all a calibration factor is worth."""
    return f"x{number(round(factor, 1))}"


# ---------------------------------------------------------------- one prediction


@dataclass(frozen=True)
class SignedError:
    """A prediction against its measurement: log(predicted / measured) (None: no ratio, a zero on
    one side), the direction (+1 over, -1 under, 0 a hit) and the reveal's verdict."""

    log_error: float | None
    direction: int
    hit: bool
    summary: str  # as the reveal words it: "off by 3.1x (you said 10x, measured 3.2x)"


class NotComparable(ValueError):
    """Why a measured prediction has no signed error (a sentence)."""


def _measured_number(measured: Any) -> float | None:
    if isinstance(measured, bool) or not isinstance(measured, (int, float)):
        return None
    value = float(measured)
    return value if math.isfinite(value) else None


def _in_answer_units(value: float, step: PredictStep) -> float:
    """The measurement in the unit the learner answered in, as checks.predict compares them: a
    share measured as a fraction is in percent for a "%" step; GB measured, MB answered."""
    spec = step.answer
    spec_unit = getattr(spec, "unit", "") or ""
    if (step.unit or spec_unit).strip() == "%":
        value *= 100
    if isinstance(spec, NumberAnswer) and step.unit and spec_unit and unit_info(step.unit) and unit_info(spec_unit):
        converted = convert(value, step.unit, spec_unit)
        if converted is not None:
            value = converted
    return value


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


# Past this, exp() of the error (the factor shown) overflows a float: no ratio to speak of.
MAX_LOG_ERROR = 700.0


def _log_ratio(a: float, b: float) -> float | None:
    """log(a / b) for two positive numbers (as a difference of logs, so 1e-320 does not overflow);
    None when either is 0 or below, or the factor is beyond a float."""
    if a <= 0 or b <= 0:
        return None
    error = math.log(a) - math.log(b)
    return error if abs(error) <= MAX_LOG_ERROR else None


def signed_error(
    step: PredictStep,
    answer: str,
    measured: Any,
    interval: tuple[float, float] | None = None,
    guard: float | None = None,
) -> SignedError:
    """The signed error of `answer` (as locked) against the measured value of `step.compare`.
    Raises NotComparable when there is none: nothing measured, a text or category, an option
    that names no range."""
    value = _measured_number(measured)
    if value is None:
        if measured is None or isinstance(measured, float):  # None or NaN: the run measured nothing here
            raise NotComparable("nothing was measured for it on this machine (the run's notes say why)")
        raise NotComparable("its measurement is not a number")
    spec = step.answer
    score = checks.score_prediction(
        answer, spec, measured, step.unit, interval=interval, guard=guard
    )  # the reveal's own verdict
    m = _in_answer_units(value, step)
    if isinstance(spec, NumberAnswer):
        predicted = checks.parse_number(answer, spec.unit)
        if predicted is None:
            raise NotComparable("no number can be read in the locked prediction")
        error = _log_ratio(predicted, m)
        direction = _sign(predicted - m) if error is None else _sign(error)
        return SignedError(error, 0 if score.hit else direction, score.hit, score.summary)
    if isinstance(spec, ChoiceAnswer) and any(o.min is not None or o.max is not None for o in spec.options):
        index = resolve(answer, spec)
        if index is None:
            raise NotComparable("the locked answer is none of the options any more")
        option = spec.options[index]
        if option.min is None and option.max is None:
            raise NotComparable("the option chosen names no range")
        low = -math.inf if option.min is None else option.min
        high = math.inf if option.max is None else option.max
        if low <= m < high:
            return SignedError(0.0, 0, True, score.summary)
        if _names_zero(option.text, low, high):
            # "Zero: it underflows" predicts 0, not its range's top edge (1e-9 is where the author
            # drew the line): a miss below the measurement, by no factor.
            return SignedError(None, _sign(-m), False, score.summary)
        if m < low:  # the range lies above the measurement: an overestimate, by at least low / m
            return SignedError(_log_ratio(low, m), 1, False, score.summary)
        return SignedError(_log_ratio(high, m), -1, False, score.summary)  # under, by at least m / high
    raise NotComparable("a text or a category, not a quantity")


def _names_zero(text: str, low: float, high: float) -> bool:
    """Does an option's text name the number 0 ("Zero: it underflows"), inside its range?"""
    return checks.parse_number(text, "") == 0 and low <= 0 < high


# ---------------------------------------------------------------- the stored predictions


@dataclass(frozen=True)
class Place:
    """Where a prediction was made: for sentences and for `gpututor profile --json`."""

    lesson_id: str
    lesson_title: str
    step_id: str
    step_title: str
    concept: str

    def name(self) -> str:
        return f"{self.lesson_title} › {self.step_title or self.step_id}"


@dataclass(frozen=True)
class Scored:
    """A locked prediction beside its measurement."""

    place: Place
    answer: str
    measured: Any  # the metric as the run (or instrument) gave it
    error: SignedError
    locked_at: float
    source: str  # "measured" (a run) | "computed" (an instrument)

    @property
    def factor(self) -> float | None:
        """How many times off, 1 or more (None: no ratio)."""
        return None if self.error.log_error is None else math.exp(abs(self.error.log_error))


@dataclass(frozen=True)
class Unscored:
    """A locked prediction the profile cannot count (yet), and why."""

    place: Place
    why: str
    waiting: bool  # True: its run or instrument has not been done yet


@dataclass(frozen=True)
class ConceptProfile:
    concept: str
    predictions: tuple[Scored, ...]  # oldest first

    @property
    def label(self) -> str:
        return concept_label(self.concept)

    @property
    def count(self) -> int:
        return len(self.predictions)

    @property
    def hits(self) -> int:
        return sum(p.error.hit for p in self.predictions)

    @property
    def errors(self) -> list[float]:
        """The signed log errors that have a ratio."""
        return [p.error.log_error for p in self.predictions if p.error.log_error is not None]

    @property
    def bias(self) -> float | None:
        """Geometric mean of predicted / measured: above 1 the learner overestimates."""
        errors = self.errors
        return math.exp(sum(errors) / len(errors)) if errors else None

    @property
    def typical(self) -> float | None:
        """Geometric mean of the factor each prediction was off by (1 or more)."""
        errors = self.errors
        return math.exp(sum(abs(e) for e in errors) / len(errors)) if errors else None

    @property
    def verdict(self) -> str:
        """within | close (within 15% on average, but not every one on target) | over | under | both |
        unrated (no prediction with a ratio)."""
        bias, typical = self.bias, self.typical
        if bias is None or typical is None:
            return "unrated"
        if typical < WITHIN:  # close in size; "within" only when every one was also on target
            return "within" if self.hits == self.count else "close"
        lean = abs(math.log(bias))
        if max(bias, 1 / bias) >= WITHIN and lean >= LEAN_SHARE * math.log(typical):
            return "over" if bias > 1 else "under"
        return "both"

    def badness(self) -> tuple[float, float]:
        """Sort key, worst first: the typical log error, then the share of misses."""
        typical = self.typical
        return (math.log(typical) if typical else 0.0, 1 - self.hits / self.count)

    def sentence(self) -> str:
        """'You overestimate GPU speed-ups x2.1 (6 predictions, 1 on target)'."""
        n = self.count
        counted = f"{n} prediction{'s' if n != 1 else ''}, {self.hits} on target"
        without = n - len(self.errors)
        if without and self.errors:
            counted += f"; {without} with a zero (an underflow), not in the factor"
        verdict, bias, typical = self.verdict, self.bias, self.typical
        if bias is not None and typical is not None and verdict == "over":
            return f"You overestimate {self.label} {factor_text(bias)} ({counted})"
        if bias is not None and typical is not None and verdict == "under":
            return f"You underestimate {self.label} {factor_text(1 / bias)} ({counted})"
        if verdict == "within":
            return f"You predict {self.label} within {round((WITHIN - 1) * 100)}% ({counted})"
        if typical is not None and verdict == "close":
            return (
                f"Your predictions of {self.label} are close, typically off {_percent(typical)}, but not all "
                f"within what their steps ask ({counted})"
            )
        if typical is not None and verdict == "both":
            return f"Your predictions of {self.label} are off {factor_text(typical)}, either way ({counted})"
        over = sum(p.error.direction > 0 for p in self.predictions)
        under = sum(p.error.direction < 0 for p in self.predictions)
        sides = ", ".join(x for x in (f"{over} too high" if over else "", f"{under} too low" if under else "") if x)
        return (
            f"{self.label[0].upper()}{self.label[1:]}: {counted}"
            + (f", {sides}" if sides else "")
            + f" ({ZERO_HAS_NO_FACTOR})"
        )

    def off_target(self) -> list[Scored]:
        """Its misses, the farthest first (a miss without a ratio counts as farthest)."""
        misses = [p for p in self.predictions if not p.error.hit]
        return sorted(misses, key=lambda p: -(p.factor or math.inf))


@dataclass(frozen=True)
class Profile:
    concepts: tuple[ConceptProfile, ...]  # worst calibrated first
    unscored: tuple[Unscored, ...]

    @property
    def scored(self) -> list[Scored]:
        """Every scored prediction, oldest first."""
        return sorted((p for c in self.concepts for p in c.predictions), key=lambda p: p.locked_at)

    @property
    def empty(self) -> bool:
        return not self.concepts

    def worst(self) -> ConceptProfile | None:
        """The concept to work on: the worst calibrated that is off by more than 15%, if any."""
        return next((c for c in self.concepts if c.verdict in ("over", "under", "both")), None)

    def advice(self) -> str:
        """Which steps to revisit for the worst concept. Review asks checks, not predictions, so
        the profile names the predict steps instead."""
        worst = self.worst()
        if worst is None:
            return ""
        steps = list(dict.fromkeys(p.place.name() for p in worst.off_target()))
        how = f" (typically off {factor_text(worst.typical)})" if worst.typical else ""
        revisit = f" Revisit {', '.join(f'“{name}”' for name in steps[:3])}." if steps else ""
        return f"Worst calibrated: {worst.label}{how}.{revisit}"

    def unscored_summary(self) -> str:
        """'4 predictions not in the profile: 2 waiting for a run, 1 on a step with no concept, 1 that
        cannot be scored.'"""
        if not self.unscored:
            return ""
        waiting = sum(u.waiting for u in self.unscored)
        untagged = sum(u.why == NO_CONCEPT for u in self.unscored)
        other = len(self.unscored) - waiting - untagged
        parts = (
            ([f"{waiting} waiting for a run"] if waiting else [])
            + ([f"{untagged} on a step with no concept"] if untagged else [])
            + ([f"{other} that cannot be scored"] if other else [])
        )
        n = len(self.unscored)
        return f"{n} prediction{'s' if n != 1 else ''} not in the profile: {', '.join(parts)}."

    def as_dict(self) -> dict[str, Any]:
        def place(p: Place) -> dict[str, Any]:
            return {"lesson": p.lesson_id, "step": p.step_id, "title": p.step_title, "concept": p.concept}

        return {
            "concepts": [
                {
                    "concept": c.concept,
                    "label": c.label,
                    "count": c.count,
                    "hits": c.hits,
                    "with_ratio": len(c.errors),
                    "bias": c.bias,
                    "typical_factor": c.typical,
                    "verdict": c.verdict,
                    "sentence": c.sentence(),
                    "predictions": [
                        {
                            **place(p.place),
                            "answer": p.answer,
                            "measured": p.measured,
                            "log_error": p.error.log_error,
                            "direction": p.error.direction,
                            "hit": p.error.hit,
                            "summary": p.error.summary,
                            "locked_at": p.locked_at,
                            "source": p.source,
                        }
                        for p in c.predictions
                    ],
                }
                for c in self.concepts
            ],
            "unscored": [{**place(u.place), "why": u.why, "waiting": u.waiting} for u in self.unscored],
            "worst": worst.concept if (worst := self.worst()) else None,
            "advice": self.advice(),
            "message": NOTHING_YET if self.empty else "",
        }


def profile(lessons: Iterable[Lesson], progress: Progress) -> Profile:
    """The profile of every locked prediction on a step with a concept, in these lessons."""
    by_concept: dict[str, list[Scored]] = {}
    unscored: list[Unscored] = []
    for lesson in lessons:
        session = LessonSession(lesson, progress)
        for locked in progress.predictions(lesson.id):
            try:
                step = lesson.step(locked.step_id)
            except KeyError:
                continue  # a step the lesson no longer has
            if not isinstance(step, PredictStep):
                continue
            if not step.concept:  # counted, not silently dropped: the learner locked it
                place = Place(lesson.id, lesson.title, step.id, step.title, "")
                unscored.append(Unscored(place, NO_CONCEPT, False))
                continue
            found = _score(session, step, locked)
            if isinstance(found, Scored):
                by_concept.setdefault(step.concept, []).append(found)
            else:
                unscored.append(found)
    return from_scored([p for ps in by_concept.values() for p in ps], unscored)


def from_scored(scored: Iterable[Scored], unscored: Iterable[Unscored] = ()) -> Profile:
    """The per-concept summary of scored predictions, worst calibrated first."""
    by_concept: dict[str, list[Scored]] = {}
    for p in scored:
        by_concept.setdefault(p.place.concept, []).append(p)
    concepts = [ConceptProfile(name, tuple(sorted(ps, key=lambda p: p.locked_at))) for name, ps in by_concept.items()]
    concepts.sort(key=lambda c: (tuple(-x for x in c.badness()), c.concept))
    return Profile(tuple(concepts), tuple(unscored))


def _score(session: LessonSession, step: PredictStep, locked: Prediction) -> Scored | Unscored:
    lesson = session.lesson
    place = Place(lesson.id, lesson.title, step.id, step.title, step.concept or "")
    after = lesson.run_after(lesson.index(step.id))
    if not step.compare or after is None:
        return Unscored(place, "its step compares no measurement", False)
    revealed = session.reveal(step)
    if isinstance(revealed, Pending):
        what = "instrument" if isinstance(after, InstrumentStep) else "run"
        return Unscored(place, f"waits for its {what} step “{after.title or after.id}”", True)
    judged = revealed.judge()  # the reveal's own verdict: not scored there, not scored here
    if judged.not_scored:
        return Unscored(place, judged.not_scored, True)
    evidence = revealed.evidence
    measured = evidence.metrics.get(step.compare)
    interval = checks.interval_of(evidence.metrics, step.compare)
    try:
        error = signed_error(step, locked.answer, measured, interval, evidence.guard(step.compare))
    except NotComparable as e:
        return Unscored(place, str(e), False)
    return Scored(place, locked.answer, measured, error, locked.locked_at, evidence.source)


# ---------------------------------------------------------------- the chart


def concept_marks(concepts: Iterable[str]) -> dict[str, str]:
    """One character per concept for the chart: its first letter, else another of its letters,
    else a digit."""
    marks: dict[str, str] = {}
    for concept in concepts:
        letters = [ch.upper() for ch in concept if ch.isalpha()] + list("123456789")
        marks[concept] = next((ch for ch in letters if ch not in marks.values()), "?")
    return marks


def _day(at: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(at))


def chart(found: Profile, width: int = 72) -> str:
    """The scored predictions over time (when each was locked), one column each."""
    scored = found.scored
    if not scored:
        return ""
    marks = concept_marks(c.concept for c in found.concepts)
    misses = [Miss(marks[p.place.concept], p.error.log_error, p.error.direction) for p in scored]
    return calibration(
        misses,
        [(marks[c.concept], c.label) for c in found.concepts],
        first=_day(scored[0].locked_at),
        last=_day(scored[-1].locked_at),
        width=width,
    )
