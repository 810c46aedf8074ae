"""A check step: answer, get feedback aimed at the misconception, retry, then verify by a run."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Input, Markdown, OptionList, Static

from tutor.checks.answers import ChoiceAnswer
from tutor.course.lesson import CheckStep
from tutor.course.session import LessonSession, Unreadable
from tutor.ui.widgets.answer_box import AnswerBox, after_the_mark
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.step_view import StepView, hints_text


class CheckStepView(StepView[CheckStep]):
    def __init__(self, session: LessonSession, index: int) -> None:
        super().__init__(session, index)
        self.solved = False
        self.gave_up = False
        self._give_up_asked = 0  # g presses before any attempt: the answer opens on the third

    @property
    def attempts(self) -> int:
        return self.session.wrong_attempts(self.step)

    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        yield Static(Text(self.step.prompt, style="bold"), classes="prompt")
        yield AnswerBox(self.step.answer)
        yield Static("", id="feedback", classes="feedback")
        yield Static("", id="hint", classes="hint")
        yield Vertical(id="after")

    def arrival_focus(self) -> Widget | None:
        return next((w for box in self.query(AnswerBox) if (w := box.answer_widget())), None)

    def on_mount(self) -> None:
        solved = self.session.solved_by(self.step)
        if solved is not None:
            self._show_verdict(True, solved.feedback, solved.answer)
            return
        history = self.session.history(self.step)
        if history:
            self.query_one("#feedback", Static).update(
                Text(f"You tried this {len(history)} time(s) before. Last answer: “{history[-1].answer}”", style="dim")
            )
        if self.session.hints_shown(self.step):
            self._show_hints(self.session.hints_shown(self.step))

    # ------------------------------------------------------------------ answering

    @on(AnswerBox.Submitted)
    def _submitted(self, event: AnswerBox.Submitted) -> None:
        event.stop()
        feedback = self.query_one("#feedback", Static)
        try:
            graded = self.session.answer(self.step, event.text)
        except Unreadable as problem:
            feedback.update(Text(str(problem), style="yellow"))
        else:
            if graded.correct:
                self._show_verdict(True, graded.verdict.feedback, graded.answer)
                self.post_message(self.Completed(self.step.id))
            else:
                extra = (
                    "\nStuck? escape, then "
                    + ("h for a hint or " if self._hints_left() else "")
                    + "g to see the answer."
                )
                feedback.update(
                    Text.assemble(("✗ Not yet. ", "bold red"), after_the_mark(graded.verdict.feedback), (extra, "dim"))
                )
        if not self.solved:
            self._feedback_into_view()
        self.refresh_hint()

    def _feedback_into_view(self) -> None:
        """At 80x24 the feedback can sit below the fold (a long body above): bring it into view."""
        self.call_after_refresh(self.query_one("#feedback", Static).scroll_visible, animate=False)

    def _show_verdict(self, correct: bool, feedback_text: str, answer: str) -> None:
        self.solved = correct
        self.query_one("#feedback", Static).update(
            Text.assemble(
                ("✓ Correct. ", "bold green") if correct else ("Here is the answer. ", "bold yellow"),
                after_the_mark(feedback_text or ""),
                ("\nYour answer: ", "dim"),
                (answer, "dim italic"),
            )
        )
        self.query_one(AnswerBox).close()
        if not self.session.hints_shown(self.step):  # "No hint for this one" is moot beside the answer
            self.query_one("#hint", Static).update("")
        self._show_explanation()
        self.call_after_refresh(self.focus_content)

    def _show_explanation(self) -> None:
        after = self.query_one("#after", Vertical)
        after.remove_children()
        if self.step.explanation:
            after.mount(Static(Text("Why", style="bold underline"), classes="section"))
            after.mount(Markdown(self.step.explanation))
        reference = getattr(self.step.answer, "reference", "")
        if reference:
            after.mount(Static(Text.assemble(("A model answer: ", "bold"), reference), classes="reference"))
        if self.step.verify is not None:
            if self.step.verify.body:
                after.mount(Markdown(self.step.verify.body))
            after.mount(RunPanel(self.step.verify.experiment, self.step.verify.params, id="verify"))

    # ------------------------------------------------------------------ actions

    def action_enter(self) -> bool:
        """Back into the answer box while the check is open."""
        return self.query_one(AnswerBox).focus_answer()

    def _hints_left(self) -> int:
        return len(self.step.tiered_hints) - len(self.session.hints_shown(self.step))

    def _show_hints(self, shown: list[str]) -> None:
        """Every tier shown so far, numbered, and whether more are left."""
        hint = self.query_one("#hint", Static)
        hint.update(hints_text(shown, len(self.step.tiered_hints)))
        self.call_after_refresh(hint.scroll_visible, animate=False)

    def action_hint(self) -> bool:
        if not self.step.tiered_hints:
            self.query_one("#hint", Static).update(
                Text.assemble(("Hint: ", "bold"), "No hint for this one: reread the step before it.")
            )
            return True
        self._show_hints(self.session.next_hint(self.step))
        return True

    def give_up(self) -> bool:
        if self.solved or self.gave_up:
            return False
        if not self.session.can_give_up(self.step):
            # Before any attempt the answer is a spoiler: asked twice, then shown.
            self._give_up_asked += 1
            if self._give_up_asked < 3:
                first = self._give_up_asked == 1
                self.query_one("#feedback", Static).update(
                    Text(
                        ("The answer opens after one try: answer first (h for a hint). " if first else "")
                        + ("Give up without trying? g again." if first else "Sure? g once more shows the answer."),
                        style="yellow",
                    )
                )
                self._feedback_into_view()
                return True
        if not self.session.give_up(self.step, without_trying=True):
            return True
        self.gave_up = True
        self._show_verdict(False, "", "(you asked to see it)")
        self._feedback_into_view()
        self.solved = False
        self.post_message(self.Completed(self.step.id))
        self.refresh_hint()
        return True

    def _verify_panel(self) -> RunPanel | None:
        found = self.query("#verify")
        return found.first(RunPanel) if found else None

    def action_run(self) -> bool:
        panel = self._verify_panel()
        if panel is None:
            if self.step.verify is not None:
                self.query_one("#hint", Static).update(
                    Text("Answer first; then r runs an experiment that shows it for real.", style="dim")
                )
            return self.step.verify is not None
        if not panel.running:
            panel.start(self.app.device_override)
            panel.scroll_visible()
        self.refresh_hint()
        return True

    def cancel_run(self) -> bool:
        panel = self._verify_panel()
        return panel.cancel() if panel else False

    @property
    def running(self) -> bool:
        panel = self._verify_panel()
        return bool(panel and panel.running)

    @on(RunPanel.Done)
    def _verified(self, event: RunPanel.Done) -> None:
        event.stop()
        self.session.record_run(self.step, event.outcome)
        self.refresh_hint()

    def keys_hint(self) -> str:
        if self.running:
            return "escape cancel the run · ? help"
        if self.solved or self.gave_up:
            verify = "r verify with a real run · " if self.step.verify else ""
            return f"{verify}n next · p previous · ? help"
        stuck = " · g show answer" if self.session.can_give_up(self.step) else ""
        if isinstance(self.screen.focused, OptionList) and isinstance(self.step.answer, ChoiceAnswer):
            return (
                f"↑↓ or 1–{len(self.step.answer.options)} choose · enter submit · escape leave the list (then h hint)"
            )
        if isinstance(self.screen.focused, Input):
            return "type your answer · enter submit · escape leave the box (then h hint)"
        return f"enter/tab back to the answer box · h hint{stuck} · n next · p previous · ? help"
