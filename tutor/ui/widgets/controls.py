"""One instrument control as a single focusable row: '  Optimizer      ‹ Adam ›'.

Keyboard first: ← → (or - +) change the value, space/enter steps it forward, ↑ ↓ move to
the next control. Mouse: a click steps the value forward.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from tutor.instruments import Control

LABEL_WIDTH = 15


class ControlRow(Widget, can_focus=True):
    BINDINGS = [
        Binding("left,minus", "change(-1)", "less", show=False),
        Binding("right,plus,equals_sign", "change(1)", "more", show=False),
        Binding("space,enter", "cycle", "change", show=False),
        Binding("up", "app.focus_previous", "previous control", show=False),
        Binding("down", "app.focus_next", "next control", show=False),
    ]

    @dataclass
    class Changed(Message):
        row: ControlRow
        name: str
        value: Any

    def __init__(self, control: Control, value: Any, fixed: bool = False) -> None:
        super().__init__(classes="control-row")
        self.control = control
        self.value = value
        self.fixed = fixed
        self.can_focus = not fixed  # ↑ ↓ skip what cannot change

    def render(self) -> Text:
        c = self.control
        label = Text(f"{c.label:<{LABEL_WIDTH}}", style="bold")
        shown = c.label_of(self.value)
        if self.fixed:
            return label + Text(f"  {shown}  (fixed here)", style="dim")
        arrows = "bold cyan" if self.has_focus else "dim"
        return label + Text.assemble(("‹ ", arrows), (shown, "bold" if self.has_focus else ""), (" ›", arrows))

    def _set(self, value: Any) -> None:
        if self.fixed or value == self.value:
            return
        self.value = value
        self.refresh()
        self.post_message(self.Changed(self, self.control.name, value))

    def action_change(self, direction: int) -> None:
        self._set(self.control.step(self.value, direction))

    def action_cycle(self) -> None:
        c = self.control
        nxt = c.step(self.value, 1)
        if nxt == self.value and c.kind != "toggle":  # at the end: wrap to the first option
            nxt = c.options[0]
        self._set(nxt)

    def on_click(self) -> None:
        self.focus()
        self.action_cycle()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
