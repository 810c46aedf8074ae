"""A check step: answer, get feedback aimed at the misconception, retry, then verify by a run."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Markdown, OptionList, Static

import checks
from checks.spec import ChoiceAnswer
from tutor.widgets.base import StepView
from tutor.widgets.run_panel import RunPanel

GIVE_UP_AFTER = 2  # wrong attempts before "g shows the answer" is offered


class CheckStepView(StepView):
    def __init__(self, lesson, index) -> None:
        super().__init__(lesson, index)
        self.attempts = 0
        self.solved = False
        self.gave_up = False

    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        yield Static(Text(self.step.prompt, style="bold"), classes="prompt")
        spec = self.step.answer
        if isinstance(spec, ChoiceAnswer):
            yield OptionList(*[Text(f"{i}. {o.text}") for i, o in enumerate(spec.options, 1)], id="choices")
        else:
            yield Input(placeholder=checks.describe_spec(spec), id="answer", max_length=spec_max(spec))
        yield Static("", id="feedback", classes="feedback")
        yield Static("", id="hint", classes="hint")
        yield Vertical(id="after")

    def on_mount(self) -> None:
        history = self.tutor.progress.answers(self.lesson.id, self.step.id)
        self.attempts = sum(1 for a in history if not a.correct)
        if any(a.correct for a in history):
            last = next(a for a in reversed(history) if a.correct)
            self._show_verdict(True, last.feedback, last.answer)
        else:
            for w in self.query("#choices, #answer"):
                w.focus()
            if history:
                self.query_one("#feedback", Static).update(Text(
                    f"You tried this {len(history)} time(s) before. Last answer: “{history[-1].answer}”", style="dim"))

    # ------------------------------------------------------------------ answering

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
            self.call_after_refresh(feedback.scroll_visible, animate=False)
            return
        shown, verdict = grade_check(self.step, answer, self.tutor.check_metrics(self.lesson.id, self.step))
        self.tutor.progress.record_answer(self.lesson.id, self.step.id, shown, verdict.correct, verdict.feedback)
        if verdict.correct:
            self._show_verdict(True, verdict.feedback, shown)
            self.post_message(self.Completed(self.step.id))
        else:
            self.attempts += 1
            extra = ""
            if self.attempts >= GIVE_UP_AFTER:
                extra = "\nStuck? escape, then h for a hint or g to see the answer."
            elif self.step.hint:
                extra = "\nescape, then h, shows a hint."
            feedback.update(Text.assemble(("✗ Not yet. ", "bold red"), verdict.feedback, (extra, "dim")))
            # At 80x24 the feedback can sit below the fold: bring it into view.
            self.call_after_refresh(feedback.scroll_visible, animate=False)
        self.refresh_hint()

    def _show_verdict(self, correct: bool, feedback_text: str, answer: str) -> None:
        self.solved = correct
        self.query_one("#feedback", Static).update(Text.assemble(
            ("✓ Correct. ", "bold green") if correct else ("Here is the answer. ", "bold yellow"),
            feedback_text or "",
            ("\nYour answer: ", "dim"), (answer, "dim italic"),
        ))
        for w in self.query("#choices, #answer"):
            w.disabled = True
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
        for w in self.query("#choices, #answer"):
            if not w.disabled:
                w.focus()
                return True
        return False

    def action_hint(self) -> bool:
        text = self.step.hint or "No hint for this one: reread the step before it."
        hint = self.query_one("#hint", Static)
        hint.update(Text.assemble(("Hint: ", "bold"), text))
        self.call_after_refresh(hint.scroll_visible, animate=False)
        return True

    def give_up(self) -> bool:
        if self.solved or self.gave_up:
            return False
        if self.attempts < GIVE_UP_AFTER:
            self.query_one("#feedback", Static).update(Text(
                f"Give it {GIVE_UP_AFTER - self.attempts} more honest try first (h for a hint).", style="yellow"))
            return True
        self.gave_up = True
        self.tutor.progress.record_answer(self.lesson.id, self.step.id, "(gave up)", False, "shown the answer")
        self._show_verdict(False, "", "(you asked to see it)")
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
                self.query_one("#hint", Static).update(Text(
                    "Answer first; then r runs an experiment that shows it for real.", style="dim"))
            return self.step.verify is not None
        if not panel.running:
            panel.start(self.tutor.device_override)
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
        self.tutor.record_run(self.lesson.id, self.step.id, event)
        self.refresh_hint()

    def keys_hint(self) -> str:
        if self.running:
            return "escape cancel the run · ? help"
        if self.solved or self.gave_up:
            verify = "r verify with a real run · " if self.step.verify else ""
            return f"{verify}n next · p previous · ? help"
        stuck = " · g show answer" if self.attempts >= GIVE_UP_AFTER else ""
        if isinstance(self.screen.focused, OptionList):
            return "↑↓ choose · enter submit · escape leave the list (then h hint)"
        if isinstance(self.screen.focused, Input):
            return "type your answer · enter submit · escape leave the box (then h hint)"
        return f"enter/tab back to the answer box · h hint{stuck} · n next · p previous · ? help"


def grade_check(step, answer: str, metrics: dict) -> tuple[str, checks.Verdict]:
    """(the answer as the learner sees it, the verdict): a choice's number becomes its text."""
    verdict = checks.grade(answer, step.answer, metrics)
    shown = answer
    options = step.answer.options if isinstance(step.answer, ChoiceAnswer) else []
    number = int(answer) if answer.isascii() and answer.isdigit() and len(answer.lstrip("0")) <= 6 else 0
    if 1 <= number <= len(options):
        shown = options[number - 1].text
    return shown, verdict


def spec_max(spec) -> int:
    return min(getattr(spec, "max_length", 2000), 2000)
