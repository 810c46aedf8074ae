"""A run step: the experiment runs live; afterwards, earlier predictions are revealed."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static

from tutor.instruments import Control
from tutor.lesson import PredictStep
from tutor.widgets.base import StepView
from tutor.widgets.controls import ControlRow
from tutor.widgets.reveal import reveal_text
from tutor.widgets.run_panel import RunPanel, fmt


class RunStepView(StepView):
    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        record = self.tutor.progress.latest_run(lesson_id=self.lesson.id, step_id=self.step.id, status=None)
        self.params = dict(self.step.params)
        if self.step.tweak:
            with Vertical(id="controls"):
                for name, values in self.step.tweak.items():
                    value = self.step.tweak_default(name)
                    if record is not None and record.params.get(name) in values:
                        value = record.params[name]  # the settings of the learner's last run
                    self.params[name] = value
                    control = Control(name, name.replace("_", " "), "choice", tuple(values), value,
                                      labels=tuple(str(v) for v in values))
                    yield ControlRow(control, value)
        yield RunPanel(self.step.experiment, self.params, id="panel")
        yield Static("", id="previous", classes="previous")

    @on(ControlRow.Changed)
    def _tweaked(self, event: ControlRow.Changed) -> None:
        event.stop()
        self.params[event.name] = event.value
        if not self.running:  # a run in progress keeps (and records) the settings it started with
            self.query_one(RunPanel).set_params(self.params)

    def on_mount(self) -> None:
        record = self.tutor.progress.latest_run(lesson_id=self.lesson.id, step_id=self.step.id)
        if record is not None:
            when = record.at
            import time

            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(when))
            device = record.device.get("name") or record.device.get("device") or "?"
            shown = ", ".join(f"{k} {fmt(v)}" for k, v in list(record.metrics.items())[:4])
            parts: list = [Text.assemble(("Your last run ", "bold"), (f"({stamp} on {device}): ", "dim"), shown)]
            parts.extend(self._reveals(record.metrics, record.device, when, record.params))
            self.query_one("#previous", Static).update(Group(*parts))

    def _predictions(self) -> list[tuple[PredictStep, str]]:
        """Locked predictions that this run step reveals."""
        found = []
        for step in self.lesson.predictions_before(self.index):
            locked = self.tutor.progress.prediction(self.lesson.id, step.id)
            if step.compare and locked is not None:
                found.append((step, locked.answer))
        return found

    def _reveals(self, metrics, device, at=None, params: dict | None = None) -> list[Text]:
        # A prediction was made for the step's own settings: say so when the learner changed them.
        changed = {k: v for k, v in (params or {}).items()
                   if k in self.step.tweak and v != self.step.tweak_default(k)}
        setting = "with " + ", ".join(f"{k}={v}" for k, v in changed.items()) if changed else ""
        return [reveal_text(step, answer, metrics, device, at, setting=setting) for step, answer in self._predictions()]

    # ------------------------------------------------------------------ actions

    def action_run(self) -> bool:
        panel = self.query_one(RunPanel)
        if not panel.running:
            if self.step.tweak:
                panel.set_params(self.params)
            self.query_one("#previous", Static).update("")
            panel.start(self.tutor.device_override)
            self.refresh_hint()
        return True

    def cancel_run(self) -> bool:
        return self.query_one(RunPanel).cancel()

    @property
    def running(self) -> bool:
        return self.query_one(RunPanel).running

    @on(RunPanel.Done)
    def _done(self, event: RunPanel.Done) -> None:
        event.stop()
        self.tutor.record_run(self.lesson.id, self.step.id, event)
        if event.status == "finished":
            self.post_message(self.Completed(self.step.id))
            reveals = self._reveals(event.metrics, event.device, params=event.panel.params)
            if reveals:
                event.panel.show_reveal(Group(*reveals))
        self.refresh_hint()

    def keys_hint(self) -> str:
        if self.running:
            return "escape cancel the run · ? help"
        if isinstance(self.screen.focused, ControlRow):
            return "↑↓ setting · ←→ change · r run · esc leave settings · n next"
        if self.step.tweak:
            return "r run · tab change the settings · n next · p previous · ? help"
        return "r run · n next · p previous · ? help · q quit"
