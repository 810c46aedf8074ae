"""An instrument step: controls in, a live chart and figures out, the formulas on `m`.

It stays locked until every prediction it reveals is locked, so it never shows an
answer before the learner has committed to one. Each move is recorded (the design
ledger and `gpututor export` read them), and coming back restores the last setting.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown, Static

from tutor import instruments
from tutor.course.lesson import InstrumentStep, PredictStep
from tutor.course.session import LessonSession
from tutor.instruments import Context, Reading
from tutor.instruments.render import reading as render_reading
from tutor.ui.widgets.controls import ControlRow
from tutor.ui.widgets.reveal import reveal_text
from tutor.ui.widgets.step_view import StepView


class InstrumentStepView(StepView[InstrumentStep]):
    def __init__(self, session: LessonSession, index: int) -> None:
        super().__init__(session, index)
        self.instrument = instruments.REGISTRY[self.step.instrument]
        self.math = False
        self.context = Context()
        self.settings: dict[str, Any] = {}
        self.reading: Reading | None = None
        self._completed = False

    # ------------------------------------------------------------------ state

    def _unlocked_by(self) -> list[PredictStep]:
        """Predictions this step reveals that are not locked yet."""
        return self.session.unlocked_before(self.step)

    @property
    def locked(self) -> bool:
        return bool(self._unlocked_by())

    def _start_settings(self) -> dict[str, Any]:
        settings = self.instrument.settings(self.step.set)
        last = self.session.last_move(self.step)
        if last is not None:
            for name, value in last.settings.items():
                if name in settings and name not in self.step.fixed:
                    try:
                        settings[name] = self.instrument.control(name).parse(value)
                    except instruments.SettingsError:
                        pass  # a value an older version allowed: keep the lesson's
        return settings

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        waiting = self._unlocked_by()
        if waiting:
            names = ", ".join(f"“{p.title or p.id}”" for p in waiting)
            yield Static(
                Text.assemble(
                    ("🔒 Locked until you commit to a prediction: ", "bold yellow"),
                    names,
                    ("\nThis instrument would give the answer away. Press p to go back and lock it in.", "dim"),
                ),
                id="waiting",
                classes="locked",
            )
            return
        yield Static("", id="reveal", classes="reveal")
        self.settings = self._start_settings()
        with Vertical(id="controls"):
            for control in self.instrument.controls:
                yield ControlRow(control, self.settings[control.name], fixed=control.name in self.step.fixed)
        if self.step.goal is not None:
            yield Static("", id="goal", classes="goal")
        yield Static("", id="reading", classes="reading")
        yield Static("", id="math", classes="reading")
        yield Static("", id="math-hint", classes="fine-print")

    def on_mount(self) -> None:
        self.app.device_detected.subscribe(self, lambda _device: self.device_ready())
        if self.locked:
            return
        self.context = _context(self.app)
        # Arriving records nothing: the ledger and "settings tried" count the learner's own moves.
        # Focus stays on the lesson, so ← → still move between steps until enter picks a control.
        self._recompute(record=False)
        self._show_reveal()
        goal = self.step.goal
        reached = goal is not None and self.reading is not None and goal.reached(self.reading.outputs)
        if (goal is None and not self._movable()) or reached:
            self._complete()  # nothing to move (seeing it is doing it), or a goal already met
        # The keys line offers "enter move the controls" only once the rows are drawn: say it then
        # (the screen's first hint can come before this step's controls exist).
        self.call_after_refresh(self.refresh_hint)

    def on_resize(self, event: events.Resize) -> None:
        self._draw()

    def device_ready(self) -> None:
        """The app has detected the device: a budget of "this machine" can now be drawn."""
        if self.is_mounted and self.reading is not None and not self.locked:
            self.context = _context(self.app)
            self._recompute(record=False)

    # ------------------------------------------------------------------ computing

    def _recompute(self, record: bool) -> None:
        self.reading = self.instrument.compute(self.settings, self.context)
        if record:
            self.session.record_move(self.step, dict(self.settings), self.reading.outputs)
        self._draw()

    def _draw(self) -> None:
        if self.reading is None:
            return
        for row in self.query(ControlRow):
            row.display = row.control.name not in self.reading.ignored
        width = max(40, (self.size.width or self.app.size.width) - 2)
        self.query_one("#reading", Static).update(render_reading(self.reading, width))
        math = self.query_one("#math", Static)
        math.display = self.math
        math.update(
            Group(
                Text("Math peek: how these figures are computed", style="bold underline"),
                *(Text("  " + line) for line in self.reading.math),
            )
        )
        self.query_one("#math-hint", Static).update(
            Text(
                "m hides the formulas" if self.math else "m shows the formulas with these numbers in them", style="dim"
            )
        )
        if self.step.goal is None:
            return
        moves = self.session.count_moves(self.step)
        tried = (f"  ({moves} setting{'' if moves == 1 else 's'} tried)", "dim")
        if self.step.goal.reached(self.reading.outputs):
            text = Text.assemble(("✓ Challenge met. ", "bold green"), self.step.goal.message, tried)
        else:
            text = Text.assemble(
                ("Challenge: not met yet. ", "bold yellow"), "The verdict below says what stands in the way.", tried
            )
        self.query_one("#goal", Static).update(text)

    def _show_reveal(self) -> None:
        """Each prediction this step reveals, against the instrument where it is judged (its `at`,
        else the lesson's scenario)."""
        reveals = self.session.computed_reveals(self.step, self.context)
        shown = [reveal_text(r, named=len(reveals) > 1) for r in reveals]
        widget = self.query_one("#reveal", Static)
        widget.update(Group(*shown) if shown else "")
        widget.display = bool(shown)

    @on(ControlRow.Changed)
    def _changed(self, event: ControlRow.Changed) -> None:
        event.stop()
        self.settings[event.name] = event.value
        self._recompute(record=True)
        # At 80x24 the chart sits below the controls: bring both into view while the learner works.
        content = self.parent
        if content is not None and hasattr(content, "scroll_to_widget"):
            self.call_after_refresh(content.scroll_to_widget, self.query_one("#controls"), animate=False, top=True)
        goal = self.step.goal
        if goal is None or goal.reached(self.reading.outputs if self.reading else {}):
            self._complete()

    def _complete(self) -> None:
        if not self._completed:
            self._completed = True
            self.session.complete(self.step)
            self.post_message(self.Completed(self.step.id))

    # ------------------------------------------------------------------ keys

    def _movable(self) -> list[ControlRow]:
        return [r for r in self.query(ControlRow) if not r.fixed and r.display]

    def toggle_math(self) -> bool:
        if self.locked:
            return False
        self.math = not self.math
        self._draw()
        if self.math:
            self.call_after_refresh(self.query_one("#math").scroll_visible, animate=False, top=True)
        return True

    def action_enter(self) -> bool:
        rows = self._movable()
        if rows and not any(r.has_focus for r in rows):
            rows[0].focus()
            return True
        return False

    def keys_hint(self) -> str:
        if self.locked:
            return "p back to the prediction · ? help"
        if isinstance(self.screen.focused, ControlRow):
            return "↑↓ control · ←→ change · m math · n next · esc leave controls"
        if bool(self._movable()):
            return "enter move the controls · m math · n next · p previous · ? help"
        return "m math · n next · p previous · ? help"


def _context(app: Any) -> Context:
    from tutor.course.ledger import instrument_context

    return instrument_context(app.progress, getattr(app, "device", None))
