"""A run step: the experiment runs live; afterwards, earlier predictions are revealed."""

from __future__ import annotations

import time

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static

from tutor import experiments
from tutor.course.lesson import RunStep
from tutor.experiments.spec import Metric
from tutor.instruments import Control
from tutor.present import metric_value, setting
from tutor.ui.widgets.controls import ControlRow
from tutor.ui.widgets.reveal import reveal_text
from tutor.ui.widgets.run_panel import RunPanel, setting_label
from tutor.ui.widgets.step_view import StepView


class RunStepView(StepView[RunStep]):
    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        record = self.session.latest_run(self.step, any_status=True)
        self.params = self.step.start_params()
        if self.step.tweak:
            with Vertical(id="controls"):
                for name, values in self.step.tweak.items():
                    value = self.params[name]
                    if record is not None and record.params.get(name) in values:
                        value = record.params[name]  # the settings of the learner's last run
                    self.params[name] = value
                    control = Control(
                        name,
                        setting_label(name),
                        "choice",
                        tuple(values),
                        value,
                        labels=tuple(setting(v) for v in values),
                    )
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
        record = self.session.latest_run(self.step)
        if record is not None:
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.at))
            device = record.device.get("name") or record.device.get("device") or "?"
            described = experiments.REGISTRY.get(record.experiment)
            # Label and value in the declared unit; a metric of an unknown (unloaded pack's)
            # experiment by its name's rules.
            metric = described.metric if described else Metric.from_text
            shown = "; ".join(
                f"{metric(k).label}: {metric_value(metric(k), v)}" for k, v in list(record.metrics.items())[:3]
            )
            parts: list = [Text.assemble(("Your last run ", "bold"), (f"({stamp} on {device}): ", "dim"), shown)]
            reveals = self.session.run_reveals(self.step)
            parts.extend(reveal_text(r, named=len(reveals) > 1) for r in reveals)
            self.query_one("#previous", Static).update(Group(*parts))

    # ------------------------------------------------------------------ actions

    def action_run(self) -> bool:
        panel = self.query_one(RunPanel)
        if panel.running:  # in a class's line past a minute: r runs now, timing shared
            if panel.run_now():
                self.refresh_hint()
            return True
        if not panel.running:
            if self.step.tweak:
                panel.set_params(self.params)
            # the edges this lesson's locked predictions turn at: the run repeats until they are decided
            panel.set_params(self.session.decide_params(self.step))
            self.query_one("#previous", Static).update("")
            panel.start(self.app.device_override)
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
        reveals = self.session.record_run(self.step, event.outcome)
        if event.status == "finished":
            self.post_message(self.Completed(self.step.id))
            if reveals:
                shown = (reveal_text(r, named=len(reveals) > 1) for r in reveals)
                self.query_one(RunPanel).show_reveal(Group(*shown))
        self.refresh_hint()

    def keys_hint(self) -> str:
        if self.running:
            waiting = self.query_one(RunPanel).waiting
            if waiting is not None and waiting.choice:
                return "r run now (shared, not graded) · escape cancel · ? help"
            return "escape cancel the run · ? help"
        if isinstance(self.screen.focused, ControlRow):
            return "↑↓ setting · ←→ change · r run · esc leave settings · n next"
        if self.step.tweak:
            return "r run · tab change the settings · n next · p previous · ? help"
        return "r run · n next · p previous · ? help · q quit"
