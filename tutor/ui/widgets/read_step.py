"""A read step: markdown, optionally a side-by-side code comparison."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Markdown

from tutor.course.lesson import ReadStep
from tutor.ui.widgets.code_compare import CodeCompareView
from tutor.ui.widgets.step_view import StepView


class ReadStepView(StepView[ReadStep]):
    enter_moves_on = True

    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        if self.step.compare is not None:
            yield CodeCompareView(self.step.compare)

    def on_mount(self) -> None:
        # Reading it is doing it.
        self.session.complete(self.step)
        self.post_message(self.Completed(self.step.id))

    def keys_hint(self) -> str:
        return "enter/n next · p previous · ↑↓ scroll · ? help · q quit"
