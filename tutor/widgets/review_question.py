"""One review question: a finished lesson's check asked again, answered once, then the model answer."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Markdown, OptionList, Static

import checks
from checks.spec import ChoiceAnswer
from tutor.review import Question
from tutor.widgets.check_step import grade_check, spec_max


class ReviewQuestion(Vertical):
    @dataclass
    class Answered(Message):
        question: Question
        correct: bool

    def __init__(self, question: Question) -> None:
        super().__init__(classes="step")
        self.question = question
        self.answered: bool | None = None  # None until answered, then whether it was right

    @property
    def step(self):
        return self.question.step

    def compose(self) -> ComposeResult:
        q = self.question
        yield Static(Text.assemble(("From ", "dim"), (f"“{q.lesson.title}”", "bold"), ("  ·  ", "dim"),
                                   q.step.title or q.step.id, ("  ·  " + q.why(), "dim")), classes="origin")
        if q.step.body:
            yield Markdown(q.step.body)
        yield Static(Text(q.step.prompt, style="bold"), classes="prompt")
        spec = q.step.answer
        if isinstance(spec, ChoiceAnswer):
            yield OptionList(*[Text(f"{i}. {o.text}") for i, o in enumerate(spec.options, 1)], id="choices")
        else:
            yield Input(placeholder=checks.describe_spec(spec), id="answer", max_length=spec_max(spec))
        yield Static("", id="feedback", classes="feedback")
        yield Vertical(id="after")

    def on_mount(self) -> None:
        self.focus_answer()

    def focus_answer(self) -> bool:
        for w in self.query("#choices, #answer"):
            if not w.disabled:
                w.focus()
                return True
        return False

    @on(OptionList.OptionSelected, "#choices")
    def _chose(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._grade(str(event.option_index + 1))

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        self._grade(event.value)

    def _grade(self, answer: str) -> None:
        feedback = self.query_one("#feedback", Static)
        if not answer.strip():
            feedback.update(Text("Write your answer first: a sentence or two in your own words.", style="yellow"))
            return
        q = self.question
        shown, verdict = grade_check(q.step, answer, self.app.check_metrics(q.lesson.id, q.step))
        if not verdict.judged:  # unreadable (no number, no such option): say so, count nothing
            feedback.update(Text(verdict.feedback, style="yellow"))
            self.call_after_refresh(feedback.scroll_visible, animate=False)
            return
        self.app.progress.record_review(q.lesson.id, q.step.id, shown, verdict.correct, verdict.feedback)
        self.answered = verdict.correct
        feedback.update(Text.assemble(
            ("✓ Right. ", "bold green") if verdict.correct else ("✗ Not this time. ", "bold red"),
            verdict.feedback or "",
            ("\nYour answer: ", "dim"), (shown, "dim italic"),
            ("" if verdict.correct else "\nIt will come back sooner in your next reviews.", "dim"),
        ))
        for w in self.query("#choices, #answer"):
            w.disabled = True
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
