"""Review: the checks of finished lessons asked again, the ones the learner got wrong more often.

Each check's weight comes from its history in the progress store: every wrong answer (in the
lesson or in an earlier review, a give-up included) raises it, each hint taken by half as much,
and each right review in a row
halves it, so what the learner has shown they know fades and what they missed comes back.
A session draws a few checks at random in proportion to their weights, without repeats.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from tutor.course.lesson import CheckStep, Lesson
from tutor.course.progress import Progress

SESSION_SIZE = 5
MAX_WRONG_COUNTED = 3  # past three misses a check is already as likely as it gets


@dataclass(frozen=True)
class Question:
    lesson: Lesson
    step: CheckStep
    wrong: int  # wrong answers so far, in the lesson and in reviews
    streak: int  # right review answers in a row, up to the latest one
    reviewed: int  # review answers so far
    answered: int = 0  # answers in the lesson itself
    hints: int = 0  # hint tiers the learner took on it

    @property
    def weight(self) -> float:
        # A hint taken counts as half a miss: the answer was not the learner's alone.
        helped = min(self.wrong + self.hints / 2, MAX_WRONG_COUNTED)
        return (1 + 2 * helped) / 2 ** min(self.streak, 4)

    def why(self) -> str:
        """Why this question came up, in the learner's terms."""
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
    return [lesson for lesson in lessons
            if {s.id for s in lesson.steps} <= progress.completed_steps(lesson.id)]


def pool(lessons: Iterable[Lesson], progress: Progress) -> list[Question]:
    """Every check of every finished lesson, with its history."""
    questions = []
    for lesson in finished(lessons, progress):
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
            questions.append(Question(lesson, step, wrong, streak, len(reviews), len(answers), hints))
    return questions


def pick(questions: list[Question], n: int = SESSION_SIZE, rng: random.Random | None = None) -> list[Question]:
    """n questions drawn in proportion to their weights, without repeats (Efraimidis-Spirakis:
    the n largest of u ** (1 / weight)), most wanted first."""
    rng = rng or random.Random()
    keyed = sorted(questions, key=lambda q: rng.random() ** (1 / q.weight), reverse=True)
    return keyed[:n]
