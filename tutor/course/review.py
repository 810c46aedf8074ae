"""Review: the checks of finished lessons asked again, the ones the learner got wrong more often.

Each check's weight comes from its history in the progress store: every wrong answer (in the
lesson or in an earlier review, a give-up included) raises it, each hint taken by half as much,
and each right review in a row
halves it, so what the learner has shown they know fades and what they missed comes back.
A check tagged with a `concept` whose predictions the learner gets wrong (the prediction profile,
tutor/course/profile.py) weighs more the further off they are, and a session asks those first.
A session draws a few checks at random in proportion to their weights, without repeats.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass

from tutor.checks.answers import ChoiceOption
from tutor.course.lesson import CheckStep, Lesson
from tutor.course.progress import Progress

SESSION_SIZE = 5
MAX_WRONG_COUNTED = 3  # past three misses a check is already as likely as it gets
MAX_OFF_COUNTED = 2.0  # log2 of how far off predictions of a concept are, at most: x4 and beyond weigh alike


@dataclass(frozen=True)
class Question:
    lesson: Lesson
    step: CheckStep
    wrong: int  # wrong answers so far, in the lesson and in reviews
    streak: int  # right review answers in a row, up to the latest one
    reviewed: int  # review answers so far
    answered: int = 0  # answers in the lesson itself
    hints: int = 0  # hint tiers the learner took on it
    off_by: float | None = None  # how far off the learner's predictions of its concept typically are (x)

    @property
    def weight(self) -> float:
        # A hint taken counts as half a miss: the answer was not the learner's alone.
        helped = min(self.wrong + self.hints / 2, MAX_WRONG_COUNTED)
        # An idea the learner predicts badly weighs more: x2 off doubles it, x4 and beyond triples it.
        misjudged = min(math.log2(self.off_by), MAX_OFF_COUNTED) if self.off_by else 0.0
        return (1 + 2 * helped) * (1 + misjudged) / 2.0 ** min(self.streak, 4)

    def why(self) -> str:
        """Why this question came up, in the learner's terms."""
        own = self._own_why()
        if self.off_by and self.step.concept:
            from tutor.course.profile import concept_label, factor_text

            return f"your predictions of {concept_label(self.step.concept)} are off {factor_text(self.off_by)}; {own}"
        return own

    def _own_why(self) -> str:
        if self.streak:
            return f"right the last {self.streak} time{'s' if self.streak > 1 else ''} in review"
        if self.wrong:
            return f"you missed this {self.wrong} time{'s' if self.wrong > 1 else ''} before"
        if self.hints:
            return f"you took {self.hints} hint{'s' if self.hints > 1 else ''} on it"
        if self.reviewed:
            return "asked again"
        return "you got this right in the lesson" if self.answered else "new to you"


def finished(lessons: Iterable[Lesson], progress: Progress) -> list[Lesson]:
    """Lessons whose every step is completed."""
    return [lesson for lesson in lessons if {s.id for s in lesson.steps} <= progress.completed_steps(lesson.id)]


def misjudged(lessons: Iterable[Lesson], progress: Progress) -> dict[str, float]:
    """Concept -> how far off the learner's predictions of it typically are (x), for the concepts
    the prediction profile rates worse than "within" (tutor/course/profile.py)."""
    from tutor.course.profile import profile

    return {
        c.concept: c.typical
        for c in profile(lessons, progress).concepts
        if c.verdict in ("over", "under", "both") and c.typical
    }


def pool(lessons: Iterable[Lesson], progress: Progress, off_by: dict[str, float] | None = None) -> list[Question]:
    """Every check of every finished lesson, with its history; `off_by` (concept -> factor, as
    `misjudged` gives) weighs the checks of badly predicted concepts up."""
    lessons = list(lessons)
    done = finished(lessons, progress)
    if done and off_by is None:  # the profile is read only when there is something to review
        off_by = misjudged(lessons, progress)
    off_by = off_by or {}
    questions = []
    for lesson in done:
        for step in lesson.steps:
            if not isinstance(step, CheckStep) or not step.review:
                continue
            answers = progress.answers(lesson.id, step.id)
            reviews = progress.reviews(lesson.id, step.id)
            streak = 0
            for r in reversed(reviews):
                if not r.correct:
                    break
                streak += 1
            wrong = sum(not a.correct for a in answers) + sum(not r.correct for r in reviews)
            hints = progress.aids(lesson.id, step.id).hints
            questions.append(
                Question(lesson, step, wrong, streak, len(reviews), len(answers), hints, off_by.get(step.concept or ""))
            )
    return questions


def pick(questions: list[Question], n: int = SESSION_SIZE, rng: random.Random | None = None) -> list[Question]:
    """n questions drawn in proportion to their weights, without repeats (Efraimidis-Spirakis:
    the n largest of u ** (1 / weight)), most wanted first."""
    rng = rng or random.Random()
    keyed = sorted(questions, key=lambda q: rng.random() ** (1 / q.weight), reverse=True)
    # Those drawn for a concept the learner predicts worst come first, as the profile orders them.
    return sorted(keyed[:n], key=lambda q: -(q.off_by or 1.0))


# An option that is a quantity ("about 2x", "under 10 ms", "the same", "half of it"): a list of
# them is a scale, whose order is part of the question.
_QUANTITY = re.compile(
    r"^\W*(?:about|around|roughly|nearly|almost|under|over|below|above|up to|at least|at most|"
    r"less than|more than|[~<>≈≤≥])?\s*"
    r"(?:\d|\.\d|half\b|twice\b|(?:the )?same\b|zero\b|one\b|two\b|three\b|four\b|five\b|six\b|"
    r"seven\b|eight\b|nine\b|ten\b|a (?:few|dozen|hundred|thousand|million)\b)",
    re.I,
)


def is_scale(options: list[ChoiceOption]) -> bool:
    """Whether the options are ordered values or ranges (kept in order) rather than statements."""
    return all(_QUANTITY.match(o.text) for o in options)


def shown_order(options: list[ChoiceOption], rng: random.Random | None = None) -> list[int]:
    """The order a review shows a choice's options in (indices into `options`): shuffled, so the
    learner answers from the words and not from where the right one stood in the lesson; a scale
    ("about 2x", "about 4x", ...) keeps its order."""
    order = list(range(len(options)))
    if not is_scale(options):
        (rng or random).shuffle(order)
    return order
