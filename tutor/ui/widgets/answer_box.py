"""Where the learner answers a predict step, a check or a review question: a list for a choice,
one line for a number or words. The step's `LessonSession` judges what comes out of it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, OptionList

import checks
from checks.spec import AnswerSpec, ChoiceAnswer

MAX_CHARS = 2000  # a paragraph is plenty; a pasted file is not an answer

# A grader's feedback may open with its own verdict ("Right: 35%.", "Not quite: ..."); after
# the screen's mark ("✓ Correct.", "✗ Not yet.") that says it twice.
# Only a verdict word followed by its punctuation: "No GPU is needed" keeps its "No".
_OWN_VERDICT = re.compile(r"^\s*(right|correct|wrong|incorrect|not quite|not yet)\s*[.:!]\s*", re.I)


def after_the_mark(feedback: str) -> str:
    """The feedback without the verdict the mark before it already gives ("Right: 35%." -> "35%.")."""
    rest = _OWN_VERDICT.sub("", feedback or "", count=1)
    return rest[:1].upper() + rest[1:] if rest else rest


class ChoiceList(OptionList):
    """The options of a choice, picked by arrows, by number (1 = the first) or by letter (a):
    a digit or letter only moves the highlight, enter then answers with the option shown."""

    def on_key(self, event: events.Key) -> None:
        key = event.character or ""
        if len(key) != 1 or not key.isascii() or not key.isalnum():
            return
        index = int(key) - 1 if key.isdigit() else ord(key.lower()) - ord("a")
        if 0 <= index < self.option_count:
            self.highlighted = index
            event.stop()
            event.prevent_default()


class AnswerBox(Vertical):
    DEFAULT_CSS = "AnswerBox { height: auto; }"

    @dataclass
    class Submitted(Message):
        """What the learner entered: the text typed, or a choice's number ("2")."""

        text: str

    def __init__(self, spec: AnswerSpec) -> None:
        super().__init__(classes="answer-box")
        self.spec = spec

    def compose(self) -> ComposeResult:
        spec = self.spec
        if isinstance(spec, ChoiceAnswer):
            yield ChoiceList(*[Text(f"{i}. {o.text}") for i, o in enumerate(spec.options, 1)], id="choices")
        else:
            yield Input(placeholder=checks.describe_spec(spec), id="answer",
                        max_length=min(getattr(spec, "max_length", MAX_CHARS), MAX_CHARS))

    def answer_widget(self) -> Widget | None:
        """The list or the line, unless answering is over."""
        for w in self.query("#choices, #answer"):
            if not w.disabled:
                return w
        return None

    def focus_answer(self) -> bool:
        """Focus the list or the line, unless answering is over."""
        widget = self.answer_widget()
        if widget is not None:
            widget.focus()
        return widget is not None

    def close(self) -> None:
        """Answering is over: the list or line stays visible, greyed out."""
        for w in self.query("#choices, #answer"):
            w.disabled = True

    @on(OptionList.OptionSelected, "#choices")
    def _chose(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Submitted(str(event.option_index + 1)))

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Submitted(event.value))
