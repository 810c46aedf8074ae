"""Where the learner answers a predict step, a check or a review question: a list for a choice,
one line for a number or words. The step's `LessonSession` judges what comes out of it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static

from tutor import checks
from tutor.checks.answers import AnswerSpec, ChoiceAnswer
from tutor.checks.choice import Reading, TypedChoice, read_typed

MAX_CHARS = 2000  # a paragraph is plenty; a pasted file is not an answer
MAX_TYPED = 60  # a line typed on a choice list: a value or a few words
PREDICTION_KEYS = frozenset({"n", "p", "q", "question_mark"})  # a prediction's list leaves these to the screen

# A grader's feedback may open with its own verdict ("Right: 35%.", "Not quite: ..."); after
# the screen's mark ("✓ Correct.", "✗ Not yet.") that says it twice.
# Only a verdict word followed by its punctuation: "No GPU is needed" keeps its "No".
_OWN_VERDICT = re.compile(r"^\s*(right|correct|wrong|incorrect|not quite|not yet)\s*[.:!]\s*", re.I)


def after_the_mark(feedback: str) -> str:
    """The feedback without the verdict the mark before it already gives ("Right: 35%." -> "35%.")."""
    rest = _OWN_VERDICT.sub("", feedback or "", count=1)
    return rest[:1].upper() + rest[1:] if rest else rest


class ChoiceList(OptionList):
    """The options of a choice. Arrows (or a click) pick the option shown. Typing starts a line shown
    under the list, as a search box does: a number, a letter, an option's words or a value ("4x",
    "3 GB", "about 3"). While it is one digit or letter it moves the highlight, as a hotkey; enter
    reads the line (`checks.choice.read_typed`), never taking a value's digits as an option's number.
    A letter the screen binds (n, p, q, ...) stays the screen's unless the line is already started."""

    typed: reactive[str] = reactive("")
    confirming = False  # the box shows "Lock ...?": escape takes that back, keeping the line

    @dataclass
    class Typing(Message):
        """The typed line changed (empty: gone)."""

        text: str

    @dataclass
    class Read(Message):
        """Enter on a typed line: read it."""

        text: str

    def __init__(
        self, *options, spec: ChoiceAnswer, unit: str = "", keep_keys: frozenset[str] | None = None, **kwargs
    ) -> None:
        super().__init__(*options, **kwargs)
        self.spec = spec
        self.unit = unit
        self.keep_keys = keep_keys  # the screen's keys a first letter leaves alone (None: all it binds)

    def on_key(self, event: events.Key) -> None:
        if self.typed:
            if event.key == "enter":
                self.post_message(self.Read(self.typed))
            elif event.key == "backspace":
                self.typed = self.typed[:-1]
            elif event.key == "escape" and self.confirming:
                self.post_message(self.Typing(self.typed))  # back to the line as typed
            elif event.key == "escape":
                self.typed = ""
            elif event.is_printable and event.character and len(self.typed) < MAX_TYPED:
                self.typed += event.character
            elif event.is_printable:
                pass  # the line is full: swallow the key rather than let it act on the screen
            else:
                self.typed = ""  # arrows and the rest pick as usual: the line is dropped
                return
            event.stop()
            event.prevent_default()
            return
        char = event.character or ""
        if not event.is_printable or len(char) != 1 or char.isspace():
            return
        kept = self._screen_keys() if self.keep_keys is None else self.keep_keys & self._screen_keys()
        if not self._hotkey(char) and event.key in kept:
            return  # n, p, q, ?: the screen's keys while nothing is typed (enabled now or not)
        self.typed = char
        event.stop()
        event.prevent_default()

    # A list of a few options has nothing to page through: page keys scroll the lesson around it,
    # so a body above the list can be read while the list keeps the focus.
    def action_page_up(self) -> None:
        self._scroller().scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self._scroller().scroll_page_down(animate=False)

    def _scroller(self) -> Widget:
        return next((a for a in self.ancestors if isinstance(a, ScrollableContainer)), self)

    def _screen_keys(self) -> set[str]:
        """The keys the screen and the app bind, whether or not their action is open right now."""
        keys: set[str] = set()
        for node in (self.screen, self.app):
            for binding in node.BINDINGS:
                key = binding.key if isinstance(binding, Binding) else binding[0]
                keys.update(k.strip() for k in key.split(","))
        return keys

    def _hotkey(self, char: str) -> bool:
        """A digit or letter that names an option (1 = the first, a = the first)."""
        if not char.isascii() or not char.isalnum():
            return False
        index = int(char) - 1 if char.isdigit() else ord(char.lower()) - ord("a")
        return 0 <= index < self.option_count

    def watch_typed(self, text: str) -> None:
        if len(text) == 1 and self._hotkey(text):
            self.highlighted = int(text) - 1 if text.isdigit() else ord(text.lower()) - ord("a")
        elif text:
            reading = read_typed(text, self.spec, self.unit)
            if reading.readings:
                self.highlighted = reading.readings[0].index
        self.post_message(self.Typing(text))


class WhichList(OptionList):
    """Two readings of what was typed, asked back: enter takes one, escape goes back to the list."""

    @dataclass
    class Back(Message):
        pass

    def on_key(self, event: events.Key) -> None:
        if event.key == "escape":
            event.stop()
            event.prevent_default()
            self.post_message(self.Back())


class AnswerBox(Vertical):
    """A choice list, or one line for a number or words. With `confirm` (a prediction, locked for
    good), an option reached by typing is locked only after the learner has seen which one it is;
    one picked with the arrows or a click is taken at once, as it is already on screen."""

    DEFAULT_CSS = """
    AnswerBox { height: auto; }
    AnswerBox #typed { height: auto; display: none; }
    AnswerBox #which { display: none; }
    """

    @dataclass
    class Submitted(Message):
        """What the learner entered: the text typed, or the text of the option chosen."""

        text: str

    def __init__(self, spec: AnswerSpec, *, unit: str = "", confirm: bool = False) -> None:
        super().__init__(classes="answer-box")
        self.spec = spec
        self.unit = unit  # the unit a choice's ranges are in (a prediction's), for values typed
        self.confirm = confirm
        self.pending: Reading | None = None  # typed, shown, waiting for a second enter
        self._pending_text = ""
        self._which: tuple[Reading, ...] = ()  # the readings asked back

    def compose(self) -> ComposeResult:
        spec = self.spec
        if isinstance(spec, ChoiceAnswer):
            # A prediction has no hint, answer or run of its own: only moving on, back and quitting
            # keep their letters, and a word may start with any other ("runtime").
            keep = PREDICTION_KEYS if self.confirm else None
            yield ChoiceList(
                *[Text(f"{i}. {o.text}") for i, o in enumerate(spec.options, 1)],
                id="choices",
                spec=spec,
                unit=self.unit,
                keep_keys=keep,
            )
            yield Static("", id="typed")
            yield WhichList(id="which")
        else:
            yield Input(
                placeholder=checks.describe_spec(spec, example=not self.confirm),  # a prediction: no value
                id="answer",
                max_length=min(getattr(spec, "max_length", MAX_CHARS), MAX_CHARS),
            )

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
        for which in self.query("#which"):
            which.display = False
        self._set_pending(None)
        self._say(Text(""))

    # ------------------------------------------------------------------ a choice

    @property
    def _choices(self) -> ChoiceAnswer:
        """The spec, where the box shows a choice list (only a choice list posts what these handle)."""
        assert isinstance(self.spec, ChoiceAnswer)
        return self.spec

    def _option(self, index: int) -> str:
        return self._choices.options[index].text

    def _say(self, text: Text) -> None:
        for line in self.query("#typed").results(Static):
            line.update(text)
            line.display = bool(text.plain)
            if text.plain:
                self.call_after_refresh(line.scroll_visible, animate=False)

    def _set_pending(self, reading: Reading | None, text: str = "") -> None:
        self.pending, self._pending_text = reading, text
        for choices in self.query("#choices").results(ChoiceList):
            choices.confirming = reading is not None

    def _submit(self, index: int) -> None:
        self._set_pending(None)
        self.post_message(self.Submitted(self._option(index)))

    @on(OptionList.OptionSelected, "#choices")
    def _chose(self, event: OptionList.OptionSelected) -> None:
        event.stop()  # picked with the arrows (enter on an empty line) or a click: it is on screen
        self._submit(event.option_index)

    @on(ChoiceList.Typing)
    def _typing(self, event: ChoiceList.Typing) -> None:
        event.stop()
        self._set_pending(None)
        if not event.text:
            self._say(Text(""))
            return
        line = Text.assemble(("› ", "bold"), (event.text, "bold cyan"), ("▏", "cyan"))
        reading = read_typed(event.text, self._choices, self.unit)
        if len(reading.readings) == 1:
            line.append(f"  → {reading.readings[0].said}")
        elif len(reading.readings) > 1:
            line.append("  → " + " or ".join(r.said.split(",")[0] for r in reading.readings) + "?")
        line.append("\nenter reads it · backspace · escape clears", style="dim")
        self._say(line)

    @on(ChoiceList.Read)
    def _read(self, event: ChoiceList.Read) -> None:
        event.stop()
        if self.pending is not None and event.text == self._pending_text:
            self._submit(self.pending.index)  # the second enter: seen, and meant
            return
        reading = read_typed(event.text, self._choices, self.unit)
        if reading.problem:
            self._say(Text.assemble(("› ", "bold"), (event.text, "bold cyan"), "\n", (reading.problem, "yellow")))
            return
        if len(reading.readings) > 1:
            self._ask(reading)
            return
        chosen = reading.readings[0]
        if not self.confirm:
            self._submit(chosen.index)
            return
        self._set_pending(chosen, event.text)
        option = self._option(chosen.index)
        value = chosen.said.split(",")[0]
        as_typed = " ".join(event.text.split())
        reads_as = not chosen.said.startswith(("option", "'")) and as_typed.lower() != value.lower()
        typed = f" ('{as_typed}' reads as {value})" if reads_as else ""
        self._say(
            Text.assemble(
                ("Lock ", "bold"),
                (f"'{option}'", "bold cyan"),
                ("?", "bold"),
                typed,
                ("\nenter locks it · escape goes back", "dim"),
            )
        )

    def _ask(self, reading: TypedChoice) -> None:
        which = self.query_one("#which", WhichList)
        which.clear_options()
        which.add_options([Text(r.said[:1].upper() + r.said[1:]) for r in reading.readings])
        which.highlighted = 0
        self._which = reading.readings
        which.display = True
        action = "locks it" if self.confirm else "answers"
        self._say(
            Text.assemble(
                ("Which did you mean? ", "bold yellow"), (f"↑↓ then enter {action} · escape goes back", "dim")
            )
        )
        which.focus()
        self.call_after_refresh(which.scroll_visible, animate=False)

    @on(OptionList.OptionSelected, "#which")
    def _which_chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        event.option_list.display = False
        self._submit(self._which[event.option_index].index)

    @on(WhichList.Back)
    def _which_back(self, event: WhichList.Back) -> None:
        event.stop()
        self.query_one("#which", WhichList).display = False
        choices = self.query_one("#choices", ChoiceList)
        choices.focus()
        choices.post_message(ChoiceList.Typing(choices.typed))  # the line as it was, to edit or clear

    # ------------------------------------------------------------------ a number or words

    @on(Input.Submitted, "#answer")
    def _typed(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(self.Submitted(event.value))
