"""The roofline screen (f on home): this machine's calibrated roofline with the learner's own runs
placed on it, the same words as `gpututor roofline`. Torch-free: the calibration is read from
its cache by the device's kind and name, and the runs from the progress store."""

from __future__ import annotations

from importlib import metadata
from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tutor.measurement import calibration

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


CALIBRATE_STEP = "gpu-lab's 'Run: this machine's roofline, kept' step"


def _torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


class RooflineScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    BINDINGS = [
        Binding("escape,q", "back", "back"),
        Binding("question_mark", "app.help", "help"),
    ]

    def compose(self) -> ComposeResult:
        yield Static(Text("This machine's roofline, and your runs on it", style="bold"), id="where")
        yield VerticalScroll(id="content")
        yield Static("↑↓ scroll · escape or q back to the lessons · ? help", id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        self._show()
        self.query_one("#content", VerticalScroll).focus()
        if self.app.device is None:  # still being detected: drawn as soon as it is known
            self._waiting = self.set_interval(0.5, self._once_detected)

    def _once_detected(self) -> None:
        if self.app.device is not None:
            self._waiting.stop()
            self._show()

    def _show(self) -> None:
        content = self.query_one("#content", VerticalScroll)
        content.remove_children()
        content.mount_all(self._parts())

    def _parts(self) -> list[Static]:
        dev = self.app.device
        if dev is None:
            return [Static("Detecting the device: its roofline follows in a moment.", classes="profile-text")]
        record = calibration.find_for(dev.kind, dev.name)
        if record is None:
            return [
                Static(
                    Text.assemble(
                        (f"{dev.kind} {dev.name} is not calibrated yet.", "bold"),
                        "\n",
                        f"Measure it once with {CALIBRATE_STEP}, or `{calibration.COMMAND}` in a terminal "
                        "(a few seconds on a CPU); this screen then draws its roofline with your runs on it.",
                    ),
                    classes="profile-text",
                )
            ]
        # The installed torch as its package metadata says it: "2.14.1" for a torch.__version__ of
        # "2.14.1+cu130"; the build's local label is not a different torch.
        installed = _torch_version()
        same = installed is None or installed.split("+")[0] == record.torch.split("+")[0]
        stale = record.stale_because(
            record.device, dev.threads if dev.kind == "cpu" else record.threads, record.torch if same else installed
        )
        runs = [
            r
            for r in (self.app.progress.latest_run(experiment=name) for name in calibration.EXPERIMENTS)
            if r is not None
        ]
        placed = calibration.place_runs(record, runs)
        parts = []
        for line, style in calibration.roofline_lines(
            record, placed, stale, {r.experiment for r in runs}, heading=False
        ):
            if style == "figure":
                parts.append(Static(Text(line, no_wrap=True, overflow="crop"), classes="profile-text"))
            else:
                parts.append(Static(Text(line, style=style), classes="profile-text"))
        return parts

    def action_back(self) -> None:
        self.app.pop_screen()
