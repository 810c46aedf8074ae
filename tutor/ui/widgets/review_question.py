"""One review question: a finished lesson's check asked again, answered once, then the model answer."""

from __future__ import annotations

import random
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Markdown, Static

from tutor.checks.answers import ChoiceAnswer
from tutor.course.review import Question, shown_order
from tutor.course.session import LessonSession, Unreadable
from tutor.ui.widgets.answer_box import AnswerBox, after_the_mark


class ReviewQuestion(Vertical):
    @dataclass
    class Answered(Message):
        question: Question
        correct: bool

    def __init__(self, question: Question, session: LessonSession, rng: random.Random | None = None) -> None:
        super().__init__(classes="step")
        self.question = question
        self.session = session  # the question's own lesson
        self.answered: bool | None = None  # None until answered, then whether it was right
        spec = question.step.answer
        # A choice's options in a new order (a scale keeps its own): asked again, the right one is
        # found by its words, not remembered by its place.
        self.order = shown_order(spec.options, rng) if isinstance(spec, ChoiceAnswer) else []

    @property
    def step(self):
        return self.question.step

    def compose(self) -> ComposeResult:
        q = self.question
        yield Static(
            Text.assemble(
                ("From ", "dim"),
                (f"“{q.lesson.title}”", "bold"),
                ("  ·  ", "dim"),
                q.step.title or q.step.id,
                ("  ·  " + q.why(), "dim"),
            ),
            classes="origin",
        )
        if q.step.body:
            yield Markdown(q.step.body)
        yield Static(Text(q.step.prompt, style="bold"), classes="prompt")
        spec = q.step.answer
        if self.order and isinstance(spec, ChoiceAnswer):  # only a choice has an order
            spec = spec.model_copy(update={"options": [spec.options[i] for i in self.order]})
        yield AnswerBox(spec)
        yield Static("", id="feedback", classes="feedback")
        yield Vertical(id="after")

    def on_mount(self) -> None:
        self.focus_answer()

    def focus_answer(self) -> bool:
        return self.query_one(AnswerBox).focus_answer()

    @on(AnswerBox.Submitted)
    def _submitted(self, event: AnswerBox.Submitted) -> None:
        event.stop()
        feedback = self.query_one("#feedback", Static)
        q = self.question
        try:
            graded = self.session.review(q.step, event.text)  # the option's own words, wherever it is shown
        except Unreadable as problem:  # blank, no number, no such option: say so, count nothing
            feedback.update(Text(str(problem), style="yellow"))
            self.call_after_refresh(feedback.scroll_visible, animate=False)
            return
        verdict, shown = graded.verdict, graded.answer
        self.answered = verdict.correct
        feedback.update(
            Text.assemble(
                ("✓ Right. ", "bold green") if verdict.correct else ("✗ Not this time. ", "bold red"),
                after_the_mark(verdict.feedback or ""),
                ("\nYour answer: ", "dim"),
                (shown, "dim italic"),
                ("" if verdict.correct else "\nIt will come back sooner in your next reviews.", "dim"),
            )
        )
        self.query_one(AnswerBox).close()
        self._show_model_answer()
        self.post_message(self.Answered(q, verdict.correct))
        # At 80x24 the verdict sits below the fold: bring it (and what follows) into view.
        self.call_after_refresh(feedback.scroll_visible, top=True, animate=False)

    def _show_model_answer(self) -> None:
        after = self.query_one("#after", Vertical)
        spec = self.step.answer
        if isinstance(spec, ChoiceAnswer) and not self.answered:
            right = [o.text for o in spec.options if o.correct]
            if right:
                after.mount(Static(Text.assemble(("The answer: ", "bold"), " / ".join(right)), classes="reference"))
        reference = getattr(spec, "reference", "")
        if reference:
            after.mount(Static(Text.assemble(("A model answer: ", "bold"), reference), classes="reference"))
        if self.step.explanation:
            after.mount(Static(Text("Why", style="bold underline"), classes="section"))
            after.mount(Markdown(self.step.explanation))
