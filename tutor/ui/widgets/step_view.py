"""What every step widget shares: its lesson session, its place, and the actions the screen forwards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar, cast

from rich.text import Text
from textual import events, getters
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Markdown, Static

from tutor.course.lesson import Lesson, Step
from tutor.course.session import LessonSession

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp

StepT = TypeVar("StepT", bound=Step)


class StepView(Vertical, Generic[StepT]):
    """Base of the step widgets, each typed by the step it shows (`StepView[CheckStep]`). The lesson
    screen forwards keys to these methods."""

    if TYPE_CHECKING:  # Textual's way to type self.app; at run time the plain property
        app = getters.app(TutorApp)

    @dataclass
    class Completed(Message):
        """The session completed this step (locked, ran, solved): the screen redraws its trail."""

        step_id: str

    # Whether enter, when the step has no use for it, moves on. Only a read step's: elsewhere a
    # stray enter (one too many after locking, in a calculator's controls) would skip a step the
    # learner has not seen; n moves on.
    enter_moves_on = False

    def __init__(self, session: LessonSession, index: int) -> None:
        super().__init__(classes="step")
        self.session = session
        self.index = index
        # The lesson screen picks the view by the step's class (screens/lesson.py VIEWS).
        self.step: StepT = cast(StepT, session.lesson.steps[index])

    @property
    def lesson(self) -> Lesson:
        return self.session.lesson  # a hot reload replaces it in the session, for every view

    # Actions forwarded by the lesson screen; each returns True if it handled the key.
    def action_enter(self) -> bool:
        return False

    def action_run(self) -> bool:
        return False

    def action_hint(self) -> bool:
        return False

    def action_edit(self) -> bool:
        """e: the step's code in the learner's own editor (exercises)."""
        return False

    def cancel_run(self) -> bool:
        return False

    @property
    def running(self) -> bool:
        return False

    def leave_blocker(self) -> str | None:
        """A reason the learner may not move past this step yet (None: free to go)."""
        return None

    def keys_hint(self) -> str:
        """The line at the bottom telling the learner what to press now."""
        return "n next · p previous · ? help"

    def arrival_focus(self) -> Widget | None:
        """What takes focus when the step is shown (None: the scrolling content). Asked at mount, so
        keys typed the moment the prompt appears land in the answer, and again by the lesson screen
        once the step is drawn: both ask for the same widget, so neither can undo the other."""
        return None

    def _on_mount(self, event: events.Mount) -> None:
        target = self.arrival_focus()
        if target is not None:
            target.focus()
        # The screen asks for the keys line after its next refresh, which can come before this
        # step's widgets exist (a run step asks its panel): the line is this step's once mounted.
        self.refresh_hint()

    def on_markdown_table_of_contents_updated(self, event: Markdown.TableOfContentsUpdated) -> None:
        """A body drawn in full (Textual lays Markdown out in the background, after the focus was
        given) pushes what is below it down: bring whatever has focus back into view, so the list
        or line the learner types into is on screen at 80x24."""
        focused = self.screen.focused
        if focused is not None and focused is not self.parent and self in focused.ancestors:
            self.call_after_refresh(focused.scroll_visible, animate=False)

    def on_resize(self, event: events.Resize) -> None:
        """The body can grow after its table of contents was announced (a code block's highlighting,
        a table's cells, on a loaded machine a refresh later): while the focus is still where the
        step put it, keep it in view. Only that focus, so an editor's results or a run's lines the
        learner is reading are never scrolled away from."""
        focused = self.screen.focused
        if focused is not None and focused is not self.parent and focused is self.arrival_focus():
            self.call_after_refresh(focused.scroll_visible, animate=False)

    def focus_content(self) -> None:
        """Give focus back to the scrolling lesson content (after an input goes away)."""
        if isinstance(self.parent, Widget) and self.parent.can_focus:
            self.parent.focus()

    def refresh_hint(self) -> None:
        try:
            line = self.screen.query_one("#keys-hint", Static)
        except Exception:  # noqa: BLE001 - not mounted on a lesson screen (a test mounts a view alone)
            return
        try:
            text = self.keys_hint()
        except NoMatches:  # asked before its children are mounted: _on_mount asks again
            return
        line.update(text)


def hints_text(shown: list[str], total: int) -> Text:
    """The hint tiers shown so far, numbered ("Hint 2 of 3: ..."), and whether more are left."""
    lines = [
        Text.assemble((f"Hint {i} of {total}: " if total > 1 else "Hint: ", "bold"), text)
        for i, text in enumerate(shown, 1)
    ]
    if len(shown) < total:
        lines.append(Text("h again for a more specific one.", style="dim"))
    return Text("\n").join(lines)
