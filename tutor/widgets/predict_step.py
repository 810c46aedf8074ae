"""A predict step: commit to a guess, locked before any result exists."""

from __future__ import annotations

import time

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, Markdown, OptionList, Static

import checks
from checks.spec import ChoiceAnswer, NumberAnswer
from tutor import instruments
from tutor.lesson import InstrumentStep
from tutor.widgets.base import StepView
from tutor.widgets.reveal import reveal_text


class PredictStepView(StepView):
    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        yield Static(Text(self.step.prompt, style="bold"), classes="prompt")
        locked = self.tutor.progress.prediction(self.lesson.id, self.step.id)
        if locked is None:
            spec = self.step.answer
            if isinstance(spec, ChoiceAnswer):
                yield OptionList(*[Text(f"{i}. {o.text}") for i, o in enumerate(spec.options, 1)], id="choices")
            else:
                yield Input(placeholder=checks.describe_spec(spec), id="answer", max_length=500)
            yield Static(Text("Once locked, a prediction can't be changed: the run that follows will be judged "
                              "against it.", style="dim"), classes="fine-print")
            yield Static("", id="feedback", classes="feedback")
        else:
            yield Static(self._locked_text(locked.answer, locked.locked_at), id="locked", classes="locked")
            yield Static(self._reveal(locked.answer), id="reveal", classes="reveal")

    def on_mount(self) -> None:
        for selector in ("#choices", "#answer"):
            for w in self.query(selector):
                w.focus()

    def _locked_text(self, answer: str, at: float) -> Text:
        when = time.strftime("%H:%M", time.localtime(at))
        return Text.assemble(("🔒 Your prediction: ", "bold"), (answer, "bold cyan"), (f"  (locked at {when})", "dim"))

    def _reveal(self, answer: str) -> Text:
        run = self.lesson.run_after(self.index)
        if not self.step.compare or run is None:
            return Text("Now go on (n) and see what really happens.", style="dim")
        if isinstance(run, InstrumentStep):
            if run.id not in self.tutor.progress.completed_steps(self.lesson.id):
                return Text(f"Now go on (n) to the instrument “{run.title or run.id}” and work it out.", style="dim")
            inst = instruments.REGISTRY[run.instrument]
            outputs = inst.compute(inst.settings(run.scenario_settings())).outputs
            return reveal_text(self.step, answer, outputs, source="computed",
                               setting=f"with {inst.describe(run.scenario)}" if run.scenario else "")
        record = self.tutor.progress.latest_run(lesson_id=self.lesson.id, step_id=run.id)
        if record is None:
            return Text(f"Now go on (n) to the run step “{run.title or run.id}” and measure it.", style="dim")
        return reveal_text(self.step, answer, record.metrics, record.device, record.at)

    # ------------------------------------------------------------------ submitting

    @on(OptionList.OptionSelected, "#choices")
    def _chose(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        spec = self.step.answer
        assert isinstance(spec, ChoiceAnswer)
        self._lock(spec.options[event.option_index].text, None)

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        feedback = self.query_one("#feedback", Static)
        if not text:
            self._say(feedback, "Type your prediction first: any honest guess is fine.")
            return
        value = None
        spec = self.step.answer
        if isinstance(spec, NumberAnswer):
            value = checks.parse_number(text, spec.unit)
            if value is None:
                self._say(feedback, f"I couldn't read a number in that. Try something like "
                                    f"{checks.describe_spec(spec)}.")
                return
            if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
                self._say(feedback, f"That's outside the range this question allows "
                                    f"({checks.format_number(spec.min, spec.unit)} to "
                                    f"{checks.format_number(spec.max, spec.unit)}).")
                return
        self._lock(text, value)

    def _say(self, feedback: Static, message: str) -> None:
        """A message about the learner's input, scrolled into view (at 80x24 it can sit below the fold)."""
        feedback.update(Text(message, style="yellow"))
        self.call_after_refresh(feedback.scroll_visible, animate=False)

    def _lock(self, answer: str, value: float | None) -> None:
        self.tutor.progress.lock_prediction(self.lesson.id, self.step.id, answer, value)
        self.post_message(self.Completed(self.step.id))
        self.remove_children()
        locked = self.tutor.progress.prediction(self.lesson.id, self.step.id)
        if self.step.body:
            self.mount(Markdown(self.step.body))
        self.mount(Static(Text(self.step.prompt, style="bold"), classes="prompt"))
        self.mount(Static(self._locked_text(locked.answer, locked.locked_at), id="locked", classes="locked"))
        self.mount(Static(self._reveal(locked.answer), id="reveal", classes="reveal"))
        self.refresh_hint()
        self.call_after_refresh(self.focus_content)

    # ------------------------------------------------------------------ navigation

    def action_enter(self) -> bool:
        """Back into the input while the prediction is not locked."""
        for w in self.query("#choices, #answer"):
            w.focus()
            return True
        return False

    def leave_blocker(self) -> str | None:
        if self.tutor.progress.prediction(self.lesson.id, self.step.id) is None:
            return "Lock in a prediction first (enter): the result comes after your guess, never before."
        return None

    def keys_hint(self) -> str:
        if self.tutor.progress.prediction(self.lesson.id, self.step.id) is None:
            if isinstance(self.step.answer, ChoiceAnswer):
                return "↑↓ choose · enter lock in · p previous · ? help"
            return "type your guess · enter lock in · escape leave the box"
        return "n next · p previous · ? help · q quit"
