"""The live run panel: progress, loss chart, epoch table, notes and results of one run."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.table import Table as RichTable
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable, ProgressBar, Sparkline, Static

from tutor import experiments
from tutor.course.session import RunOutcome
from tutor.experiments.events import Epoch, Finished, Note, Started, Step, Table, Waiting
from tutor.experiments.spec import DECIDE
from tutor.present import metric as fmt
from tutor.present import metric_value, setting
from tutor.ui import runner

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


MIN_CHART_POINTS = 4  # fewer losses than this are said, not drawn
MAX_LOSS_POINTS = 200  # the sparkline keeps the latest points only (each repaint buckets them all)


class LiveLine(Widget):
    """One line of live text. Updating it only repaints: a Static's update re-lays out the
    whole lesson screen, which on a 2-core machine cost training 50% of its speed."""

    DEFAULT_CSS = "LiveLine { height: 1; }"
    text: reactive[Text] = reactive(Text, layout=False)

    def render(self) -> Text:
        return self.text


def setting_label(name: str) -> str:
    """A run parameter's name as a label: "pin memory" for pin_memory."""
    return name.replace("_", " ")


def _concurrent(label: str, charted: str | None) -> bool:
    """Two ranks of one distributed run ("rank 0", "rank 1") stream side by side: one chart (the
    first rank seen), the others' latest loss beside it. Other labels are cases run one after
    another, each with a fresh chart."""
    return charted is not None and label != charted and label.startswith("rank ") and charted.startswith("rank ")


class RunPanel(Vertical):
    """Runs one experiment and shows it live. Posts `RunPanel.Done` when it ends."""

    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    @dataclass
    class Done(Message):
        """The run ended: how, as values (the step's session records it)."""

        outcome: RunOutcome

        @property
        def status(self) -> str:
            return self.outcome.status

    state: reactive[str] = reactive("idle")  # idle | running | finished | cancelled | failed

    def __init__(self, experiment: str, params: dict[str, Any] | None = None, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="run-panel")
        self.experiment = experiment
        self.params = dict(params or {})
        self.run_id = 0
        self.metrics: dict[str, Any] = {}
        self._losses: list[float] = []
        self._first_loss: float | None = None
        self._t0 = 0.0
        self._last_step: Step | None = None
        self._series: str | None = None
        self._other_ranks: dict[str, float] = {}  # a distributed run's other ranks: their latest loss
        self._tick_timer: Timer | None = None
        self._waiting: Waiting | None = None  # the latest place in a class's line, while in it
        self._run_now = False  # the learner chose to stop waiting: run now, timing shared

    def _title(self) -> Text:
        exp = experiments.REGISTRY.get(self.experiment)
        title = exp.title if exp else self.experiment
        # The settings in words ("pin memory off"), not as Python wrote them ("pin_memory=False").
        # The edges a lesson's predictions turn at are not a setting the learner chose or reads.
        params = " · ".join(f"{setting_label(k)} {setting(v)}" for k, v in self.params.items() if k != DECIDE)
        return Text.assemble(
            ("▶ ", "bold"),
            (title, "bold"),
            (f"  experiment {self.experiment}", "dim"),
            (f"  ({params})" if params else "", "dim"),
        )

    def set_params(self, params: dict[str, Any]) -> None:
        """New values for some parameters of the next run (a run step's learner-chosen settings)."""
        self.params = {**self.params, **params}
        self.query_one("#run-title", Static).update(self._title())

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="run-title", classes="run-title")
        yield Static("Press r to run it.", id="status", classes="run-status")
        yield LiveLine(id="live")
        yield ProgressBar(total=None, show_eta=False, id="bar")
        yield LiveLine(id="loss-label")
        yield Sparkline([], id="loss")
        yield DataTable(id="epochs", show_cursor=False, zebra_stripes=True)
        yield Vertical(id="notes")
        yield Static("", id="reveal", classes="reveal")

    def on_mount(self) -> None:
        for wid in ("#live", "#bar", "#loss", "#loss-label", "#epochs"):
            self.query_one(wid).display = False

    # ------------------------------------------------------------------ control

    @property
    def running(self) -> bool:
        return self.state == "running"

    def start(self, device: str | None = None) -> None:
        if self.running:
            return
        self._reset()
        self.state = "running"
        self._t0 = time.monotonic()
        self.run_id = runner.new_run_id()
        self._set_status(
            Text("Starting… (loading PyTorch and the data the first time takes a few seconds)", style="italic")
        )
        self.query_one("#bar", ProgressBar).display = True
        runner.start(
            self, self.run_id, self.experiment, self.params, device, self.app.engine, run_now=lambda: self._run_now
        )
        self.call_after_refresh(self.scroll_visible, animate=False)
        self._stop_tick()
        self._tick_timer = self.set_interval(0.5, self._tick)

    def cancel(self) -> bool:
        """Ask the worker to stop; True if a run was in progress."""
        if not self.running:
            return False
        self.workers.cancel_group(self, "experiment")
        self._set_status(Text("Cancelling… (stops at the next step)", style="yellow"))
        return True

    @property
    def waiting(self) -> Waiting | None:
        """The run's place in a class's line while it waits for its device (None: not waiting)."""
        return self._waiting if self.running else None

    def run_now(self) -> bool:
        """The learner's choice after a minute in line: run now, the timing marked shared."""
        if self.waiting is None or not self.waiting.choice or self._run_now:
            return False
        self._run_now = True
        self._set_status(Text("Running now: the timing will be shared and not graded.", style="yellow"))
        return True

    def _reset(self) -> None:
        self.metrics = {}
        self._waiting = None
        self._run_now = False
        self._losses = []
        self._first_loss = None
        self._last_step = None
        self._series = None
        self._other_ranks = {}
        self.query_one("#notes").remove_children()
        self.query_one("#reveal", Static).update("")
        table = self.query_one("#epochs", DataTable)
        table.clear(columns=True)
        table.display = False
        self.query_one("#loss", Sparkline).data = []
        self.query_one("#loss", Sparkline).display = False
        self.query_one("#loss-label", LiveLine).display = False
        self.query_one("#live", LiveLine).display = False
        bar = self.query_one("#bar", ProgressBar)
        bar.update(total=None, progress=0)

    def _set_status(self, text: Text | str) -> None:
        self.query_one("#status", Static).update(text)

    def _set_live(self, text: Text) -> None:
        live = self.query_one("#live", LiveLine)
        live.display = True
        live.text = text

    def _tick(self) -> None:
        if self.running and self._last_step is None and self._waiting is None:
            elapsed = time.monotonic() - self._t0
            self._set_live(Text(f"Working… {elapsed:.0f} s", style="italic"))

    def show_reveal(self, renderable: Any) -> None:
        reveal = self.query_one("#reveal", Static)
        reveal.update(renderable)
        # The payoff of the step: below a long results table it would otherwise go unseen at 80x24.
        # Twice deferred: the metrics table mounted just before gets its height one refresh later.
        self.call_after_refresh(self.call_after_refresh, reveal.scroll_visible, animate=False)

    # ------------------------------------------------------------------ events

    @on(runner.RunUpdate)
    def _on_update(self, message: runner.RunUpdate) -> None:
        message.stop()
        if message.run_id != self.run_id:
            return  # a late message from an earlier, cancelled run
        event = message.event
        if isinstance(event, Waiting):
            self._on_waiting(event)
            return
        self._waiting = None  # the run's own events: its turn came
        if isinstance(event, Started):
            self._set_status(
                Text.assemble(
                    ("Running on ", ""),
                    (event.device_name, "bold"),
                    (f" ({event.device})", "dim"),
                    (" · data: ", ""),
                    (event.dataset, ""),
                )
            )
            if event.detail:
                self._add_note(event.detail, "info")
        elif isinstance(event, Step):
            self._on_step(event)
        elif isinstance(event, Epoch):
            self._on_epoch(event)
        elif isinstance(event, Note):
            self._add_note(event.text, event.level)
        elif isinstance(event, Table):
            self._add_table(event)
        elif isinstance(event, Finished):
            self.metrics = dict(event.metrics)

    def _on_waiting(self, waiting: Waiting) -> None:
        """In line for the device (measurement/slots.py): the place on the live line (a repaint
        only: a classmate's run is timing on this machine), the status said once and at the choice."""
        before, self._waiting = self._waiting, waiting
        if before is None or before.choice != waiting.choice:
            if waiting.choice and not self._run_now:
                self._set_status(
                    Text.assemble(
                        ("Waited a minute. ", "bold yellow"),
                        "Keep waiting, or press ",
                        ("r", "bold"),
                        " to run now (the timing is then shared and not graded). Escape cancels.",
                    )
                )
            elif not waiting.choice:
                self._set_status(
                    Text(
                        f"In line: another learner's run is timing on {waiting.device_words}. Escape cancels.",
                        style="italic",
                    )
                )
        self._set_live(Text("⏳ " + waiting.text(), style="bold"))

    def _on_step(self, step: Step) -> None:
        self._last_step = step
        bar = self.query_one("#bar", ProgressBar)
        if step.total:
            bar.update(total=step.total, progress=step.step)
        self._set_live(self._step_text(step, ("Running ", "bold green")))
        if math.isfinite(step.loss):
            if _concurrent(step.label, self._series):  # another rank of the same job: its latest loss
                self._other_ranks[step.label] = step.loss
                self._show_loss_line(step.loss)
                return
            if self._series != step.label:  # a new case of a comparison: a fresh chart
                self._series = step.label
                self._losses, self._first_loss = [], None
            if self._first_loss is None:
                self._first_loss = step.loss
            self._losses.append(step.loss)
            del self._losses[:-MAX_LOSS_POINTS]
            # A sparkline of one to three points is a solid block, not a curve: say so instead.
            enough = len(self._losses) >= MIN_CHART_POINTS
            spark = self.query_one("#loss", Sparkline)
            spark.display = enough
            spark.data = list(self._losses)
            self._show_loss_line(step.loss)

    def _show_loss_line(self, loss: float) -> None:
        """The charted series' first and latest loss (and the other ranks' latest, in a distributed run)."""
        if self._first_loss is None:
            return
        lab = self.query_one("#loss-label", LiveLine)
        lab.display = True
        count = len(self._losses)
        enough = count >= MIN_CHART_POINTS
        latest = self._losses[-1] if self._losses else loss
        others = [f"   [{label}] {value:.3f}" for label, value in sorted(self._other_ranks.items())]
        lab.text = Text.assemble(
            (f"loss [{self._series}] " if self._series else "loss ", "bold"),
            f"{self._first_loss:.3f} → ",
            (f"{latest:.3f}", "bold"),
            *others,
            (
                f"   ({count} points, newest on the right)"
                if enough
                else f"   ({count} point{'s' if count != 1 else ''} so far: too few to chart)",
                "dim",
            ),
        )

    @staticmethod
    def _step_text(step: Step, prefix: tuple[str, str]) -> Text:
        label = f"[{step.label}] " if step.label else ""
        return Text.assemble(
            prefix,
            label,
            f"step {step.step:,}" + (f"/{step.total:,}" if step.total else ""),
            f" · epoch {step.epoch}" if step.epoch else "",
            f" · {step.seconds:.1f} s" + (f" · {fmt(step.samples_per_s)} samples/s" if step.samples_per_s > 0 else ""),
        )

    def _on_epoch(self, ep: Epoch) -> None:
        table = self.query_one("#epochs", DataTable)
        if not table.columns:  # a "run" column only when epochs come from several series (fp32 / amp)
            table.add_columns(*(["run"] if ep.label else []), "epoch", "train loss", "test acc", "seconds", "samples/s")
        table.display = True
        cells: list[str | Text] = [
            f"{ep.epoch}/{ep.epochs}",
            f"{ep.train_loss:.4f}",
            f"{ep.test_acc * 100:.2f}%",
            f"{ep.seconds:.2f}",
            fmt(ep.samples_per_s),
        ]
        if len(table.columns) == 6:
            cells.insert(0, Text(ep.label or "-"))  # a DataTable reads a str cell as markup
        table.add_row(*cells)

    def _add_note(self, text: str, level: str) -> None:
        if level == "figure":  # a chart drawn in characters (tutor/charts.py): every column where it was put
            self.query_one("#notes").mount(Static(Text(text, no_wrap=True, overflow="crop"), classes="note-figure"))
            return
        style = {"warning": "yellow", "result": "bold", "error": "red"}.get(level, "")
        prefix = {"warning": "! ", "result": "→ ", "error": "✗ "}.get(level, "· ")
        self.query_one("#notes").mount(Static(Text(prefix + text, style=style), classes=f"note note-{level}"))

    def _add_table(self, table: Table) -> None:
        # Every cell is Text, not markup: a measured "[1, 784]" or "[rank 0]" shows as it is.
        rt = RichTable(title=Text(table.title), title_justify="left", expand=False, show_edge=False, pad_edge=False)
        for i, col in enumerate(table.columns):
            # Keep values whole (a folded "0.0006556 / 5" misleads); let headers wrap instead.
            widest = max((len(str(row[i])) for row in table.rows if i < len(row)), default=0)
            rt.add_column(Text(str(col)), overflow="fold", min_width=min(widest, 16))
        for row in table.rows:
            rt.add_row(*[Text(str(c)) for c in row])
        self.query_one("#notes").mount(Static(rt, classes="result-table"))

    @on(runner.RunEnded)
    def _on_ended(self, message: runner.RunEnded) -> None:
        message.stop()
        if message.run_id != self.run_id:
            return
        self._stop_tick()
        if self._last_step is not None:  # the last step's line, now in the past tense
            self._set_live(self._step_text(self._last_step, ("Last step: ", "dim")))
        else:  # "Working… N s" is over
            self.query_one("#live", LiveLine).display = False
        elapsed = time.monotonic() - self._t0
        bar = self.query_one("#bar", ProgressBar)
        self.state = message.status
        if message.status == "finished":
            self.metrics = dict(message.metrics)
            if bar.total is None:
                bar.update(total=1, progress=1)
            else:
                bar.update(progress=bar.total)
            self._set_status(
                Text.assemble(
                    ("✓ Finished", "bold green"),
                    f" in {elapsed:.1f} s. ",
                    ("Press r to run again, n for the next step.", "dim"),
                )
            )
            self._show_metrics()
        elif message.status == "cancelled":
            bar.display = False
            self._set_status(
                Text.assemble(
                    ("Cancelled", "bold yellow"),
                    f" after {elapsed:.1f} s. ",
                    ("Nothing was recorded. Press r to run it again.", "dim"),
                )
            )
        else:
            bar.display = False
            self._set_status(
                Text.assemble(
                    ("✗ The run failed: ", "bold red"),
                    (message.error or "unknown error", ""),
                    ("\nPress r to try again; the lesson goes on (n).", "dim"),
                )
            )
        self.post_message(
            self.Done(
                RunOutcome(
                    self.experiment,
                    dict(self.params),
                    message.status,
                    dict(message.metrics),
                    dict(message.device),
                    message.error,
                )
            )
        )

    def _stop_tick(self) -> None:
        if self._tick_timer is not None:
            self._tick_timer.stop()
            self._tick_timer = None

    def _show_metrics(self) -> None:
        exp = experiments.REGISTRY.get(self.experiment)
        if not exp or not self.metrics:
            return
        # What was measured, in words and units: each metric's label and its value in the unit
        # the spec declares, never a metric's Python name or a raw None/True.
        rt = RichTable(title="Measured", title_justify="left", show_header=False, show_edge=False, pad_edge=False)
        rt.add_column("what", no_wrap=True)  # labels are a few words; a long value (an error) folds
        rt.add_column("value", style="bold", overflow="fold")
        for name in exp.metrics:
            if name in self.metrics and name not in ("device", "device_name", "data_source", "checkpoint"):
                declared = exp.metric(name)
                rt.add_row(Text(declared.label), Text(metric_value(declared, self.metrics[name])))
        self.query_one("#notes").mount(Static(rt, classes="result-table"))
