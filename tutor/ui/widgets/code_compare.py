"""Two versions of a snippet side by side, changed lines marked (computed by a diff)."""

from __future__ import annotations

from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tutor.course.lesson import CodeCompare

GUTTER = 9  # marker, line numbers, highlight arrow and padding beside each code line


class CodePane(Vertical):
    def __init__(self, title: str, code: str, language: str, changed: set[int], marker: str) -> None:
        super().__init__(classes="code-pane")
        self.title_text = title
        self.code = code.rstrip("\n")
        self.language = language
        self.changed = changed
        self.marker = marker

    def compose(self) -> ComposeResult:
        n = len(self.changed)
        yield Static(
            Text.assemble(
                (self.title_text, "bold"), (f"  ({n} changed line{'s' * (n != 1)} marked {self.marker})", "dim")
            ),
            classes="code-title",
        )
        lines = self.code.splitlines() or [""]
        gutter = Text(
            "\n".join(self.marker if i in self.changed else " " for i in range(len(lines))), style="bold yellow"
        )
        syntax = Syntax(
            self.code,
            self.language,
            theme="ansi_dark",
            line_numbers=True,
            word_wrap=False,
            highlight_lines={i + 1 for i in self.changed},
            background_color="default",
        )
        with Horizontal(classes="code-body"):
            yield Static(gutter, classes="gutter")
            yield Static(syntax, classes="code")


class CodeCompareView(Vertical):
    def __init__(self, compare: CodeCompare) -> None:
        super().__init__(classes="code-compare")
        self.compare = compare

    def compose(self) -> ComposeResult:
        left, right = self.compare.changed_lines()
        with Horizontal(id="panes"):
            yield CodePane(self.compare.left_title, self.compare.left, self.compare.language, left, "-")
            yield CodePane(self.compare.right_title, self.compare.right, self.compare.language, right, "+")

    def on_resize(self) -> None:
        # Side by side only when both versions fit whole; otherwise one above the other.
        longest = max(len(line) for line in (self.compare.left + "\n" + self.compare.right).splitlines())
        self.set_class(self.size.width < 2 * (longest + GUTTER) + 2, "-stacked")
