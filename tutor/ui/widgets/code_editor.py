"""The exercise editor: Textual's TextArea with the habits every code editor has.

A key pressed in it scrolls it back into view. Enter keeps the line's indentation (one level
more after a line ending in ':' or an open bracket), and backspace in leading spaces goes back
one level: without them a learner filling in a loop body types every indent by hand, and a
missed space is an IndentationError.
"""

from __future__ import annotations

from textual import events
from textual.widgets import TextArea


class CodeEditor(TextArea):
    async def _on_key(self, event: events.Key) -> None:
        # After a run the results scroll into view and the editor may sit above them: a key
        # typed into it brings it back, so nobody edits code they cannot see.
        self.scroll_visible(animate=False)
        if not self.read_only and event.key in ("enter", "backspace") and self._smart_key(event.key):
            event.stop()
            event.prevent_default()
            self._restart_blink()
            return
        await super()._on_key(event)

    def _smart_key(self, key: str) -> bool:
        """Handle enter or backspace the Python way; False leaves the key to TextArea."""
        start, end = self.selection
        row, column = end
        line = self.document[row]
        before = line[:column]
        if key == "enter":
            indent = before[: len(before) - len(before.lstrip(" "))]
            code = before.split("#", 1)[0].rstrip() if "'" not in before and '"' not in before else before.rstrip()
            if code.endswith((":", "(", "[", "{")):
                indent += " " * self.indent_width
            self.replace("\n" + indent, start, end, maintain_selection_offset=False)
            return True
        # backspace: only a bare cursor inside the leading spaces dedents
        if start != end or column == 0 or before.strip(" ") or self.indent_type != "spaces":
            return False
        width = (column - 1) // self.indent_width * self.indent_width
        self.delete((row, width), (row, column), maintain_selection_offset=False)
        return True
