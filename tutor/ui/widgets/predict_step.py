"""A predict step: commit to a guess, locked before any result exists."""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tutor.checks.answers import ChoiceAnswer
from tutor.course.lesson import PredictStep
from tutor.course.session import Unreadable
from tutor.ui.widgets.answer_box import AnswerBox
from tutor.ui.widgets.reveal import reveal_text
from tutor.ui.widgets.step_view import StepView


class PredictStepView(StepView[PredictStep]):
    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        yield Static(Text(self.step.prompt, style="bold"), classes="prompt")
        if self.session.prediction(self.step) is None:
            yield AnswerBox(self.step.answer, unit=self.step.unit, confirm=True)
            yield Static(
                Text(
                    "Once locked, a prediction can't be changed: the run that follows will be judged against it.",
                    style="dim",
                ),
                classes="fine-print",
            )
            yield Static("", id="feedback", classes="feedback")
        else:
            yield from self._locked()

    def _locked(self) -> ComposeResult:
        locked = self.session.prediction(self.step)
        if locked is None:  # shown only once a prediction is locked
            return
        when = time.strftime("%H:%M", time.localtime(locked.locked_at))
        yield Static(
            Text.assemble(
                ("🔒 Your prediction: ", "bold"), (locked.answer, "bold cyan"), (f"  (locked at {when})", "dim")
            ),
            id="locked",
            classes="locked",
        )
        yield Static(reveal_text(self.session.reveal(self.step)), id="reveal", classes="reveal")

    def arrival_focus(self) -> Widget | None:
        return next((w for box in self.query(AnswerBox) if (w := box.answer_widget())), None)

    # ------------------------------------------------------------------ submitting

    @on(AnswerBox.Submitted)
    def _submitted(self, event: AnswerBox.Submitted) -> None:
        event.stop()
        try:
            self.session.lock(self.step, event.text)
        except Unreadable as problem:
            feedback = self.query_one("#feedback", Static)
            feedback.update(Text(str(problem), style="yellow"))
            # At 80x24 the message can sit below the fold: bring it into view.
            self.call_after_refresh(feedback.scroll_visible, animate=False)
            return
        self.post_message(self.Completed(self.step.id))
        self.remove_children()
        if self.step.body:
            self.mount(Markdown(self.step.body))
        self.mount(Static(Text(self.step.prompt, style="bold"), classes="prompt"))
        self.mount(*self._locked())
        self.refresh_hint()
        self.call_after_refresh(self.focus_content)

    # ------------------------------------------------------------------ navigation

    def action_enter(self) -> bool:
        """Back into the answer while the prediction is not locked."""
        return any(box.focus_answer() for box in self.query(AnswerBox))

    def leave_blocker(self) -> str | None:
        if self.session.prediction(self.step) is None:
            return "Lock in a prediction first (enter): the result comes after your guess, never before."
        return None

    def keys_hint(self) -> str:
        if self.session.prediction(self.step) is None:
            if isinstance(self.step.answer, ChoiceAnswer):
                return (
                    f"↑↓ or 1–{len(self.step.answer.options)} choose, or type a value · enter lock in · "
                    "p previous · ? help"
                )
            return "type your guess · enter lock in · escape leave the box"
        return "n next · p previous · ? help · q quit"
