"""The lesson screen: where you are, the current step, what to press.

It watches its lesson file: when an instructor saves a change, the lesson is reloaded in
place and the learner stays on the same step (a broken save is said and the old version kept).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Footer, Input, OptionList, Static, TextArea

from tutor.course.lesson import (
    CheckStep,
    ExerciseStep,
    InstrumentStep,
    Lesson,
    LessonError,
    LoadedLesson,
    PredictStep,
    ReadStep,
    RunStep,
)
from tutor.course.loader import load_file
from tutor.course.session import LessonSession
from tutor.ui.widgets.check_step import CheckStepView
from tutor.ui.widgets.controls import ControlRow
from tutor.ui.widgets.exercise_step import ExerciseStepView
from tutor.ui.widgets.instrument_step import InstrumentStepView
from tutor.ui.widgets.predict_step import PredictStepView
from tutor.ui.widgets.read_step import ReadStepView
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.run_step import RunStepView
from tutor.ui.widgets.step_view import StepView

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


VIEWS: dict[type, type[StepView[Any]]] = {
    ReadStep: ReadStepView,
    PredictStep: PredictStepView,
    RunStep: RunStepView,
    CheckStep: CheckStepView,
    ExerciseStep: ExerciseStepView,
    InstrumentStep: InstrumentStepView,
}
KIND_LABEL = {
    "read": "Read",
    "predict": "Predict",
    "run": "Run",
    "check": "Check",
    "exercise": "Exercise",
    "instrument": "Instrument",
}
LEAVE_CONFIRM_S = 3.0  # the second escape that leaves a lesson must follow the first within this

TEXT_INPUTS = (Input, OptionList, TextArea, ControlRow)  # escape leaves these first, before leaving the lesson


def trail_window(total: int, index: int, width: int) -> tuple[int, int]:
    """The steps [first, last) the trail draws in `width` cells: all of them if they fit, else a
    stretch around `index`, leaving a cell for "…" on each side that is cut."""
    if total <= width:
        return 0, total
    room = max(width - 2, 1)
    first = min(max(index - room // 2, 0), total - room)
    if first == 0:
        room += 1  # no "…" on the left
    elif first + room >= total - 1:
        first, room = total - room - 1, room + 1  # none on the right
    return first, min(first + room, total)


class LessonScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    BINDINGS = [
        Binding("n,right", "next", "next"),
        Binding("p,left", "previous", "prev"),
        Binding("enter", "enter", "continue", show=False),
        Binding("r", "run", "run"),
        Binding("h", "hint", "hint"),
        Binding("e", "edit", "your editor", show=False),
        Binding("g", "give_up", "answer", show=False),
        Binding("m", "math", "math", show=False),
        Binding("escape", "escape", "cancel/back"),
        Binding("question_mark", "app.help", "help"),
        Binding("q", "quit", "quit"),
    ]

    _escape_armed_at = float("-inf")  # when a first escape asked to leave

    WATCH_INTERVAL_S = 1.0  # how often the lesson file's modification time is looked at

    def __init__(self, session: LessonSession, index: int | None = None, path: Path | None = None) -> None:
        super().__init__()
        self.session = session
        index = session.start_index() if index is None else index
        self.index = max(0, min(index, len(session.lesson.steps) - 1))
        self._view: StepView | None = None
        self.path = path
        self._stamp = self._file_stamp()
        self._reload_pending = False  # a change seen while a run was going: applied when it ends

    def compose(self) -> ComposeResult:
        yield Static("", id="where")
        yield Static("", id="trail")
        yield VerticalScroll(id="content")
        yield Static("", id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.show_step(self.index)
        if self.path is not None:
            self.set_interval(self.WATCH_INTERVAL_S, self._watch_file, name="watch-lesson-file")

    # ------------------------------------------------------------------ hot reload

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat() if self.path is not None else None
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size) if st else None

    def _watch_file(self) -> None:
        stamp = self._file_stamp()
        if stamp is not None and stamp != self._stamp:
            self._stamp = stamp
            self._reload_pending = True
        if self._reload_pending and not (self.view is not None and self.view.running):
            self._reload_pending = False
            self.reload()

    @property
    def lesson(self) -> Lesson:
        return self.session.lesson

    def reload(self) -> None:
        """Load the lesson file again and stay on the same step (by id)."""
        if self.path is None:  # a lesson from no file: nothing to load again
            return
        path = self.path
        try:
            lesson = load_file(path)
        except LessonError as e:
            first = e.issues[0] if e.issues else "it does not load"
            self.notify(
                f"{path.name} changed but has errors; still showing the previous version. {first}",
                severity="warning",
                timeout=8,
            )
            return
        if lesson.id != self.lesson.id:
            self.notify(
                f"{path.name} now holds lesson {lesson.id!r}; still showing {self.lesson.id!r}.",
                severity="warning",
                timeout=8,
            )
            return
        current = self.lesson.steps[self.index]
        try:
            index = lesson.index(current.id)
        except StopIteration:
            index = min(self.index, len(lesson.steps) - 1)  # the step was removed: the one now in its place
        same_step = index < len(lesson.steps) and lesson.steps[index] == current
        self.session.lesson = lesson  # every view reads its lesson from the session
        self.app.replace_lesson(LoadedLesson(lesson, path))
        if same_step:
            self.index = index
            if self.view is not None:
                self.view.index = index  # the step itself is unchanged: keep what the learner typed
            self._update_header()
        else:
            self.show_step(index)
        self.notify(f"Reloaded {path.name}.", timeout=3)

    def on_resize(self) -> None:
        self._update_header()

    # ------------------------------------------------------------------ display

    @property
    def view(self) -> StepView | None:
        return self._view

    def show_step(self, index: int) -> None:
        self.index = index
        step = self.lesson.steps[index]
        content = self.query_one("#content", VerticalScroll)
        content.remove_children()
        view = VIEWS[type(step)](self.session, index)
        self._view = view
        content.mount(view)
        content.scroll_home(animate=False)
        self.session.visit(step)
        self._update_header()
        self.call_after_refresh(self._after_mount)

    def _after_mount(self) -> None:
        view = self.view
        if view is None:
            return
        view.refresh_hint()
        target = view.arrival_focus() or self.query_one("#content")
        target.focus()

    def _update_header(self) -> None:
        step = self.lesson.steps[self.index]
        total = len(self.lesson.steps)
        title = step.title or step.id
        label = KIND_LABEL[step.kind]
        if title.lower().startswith(label.lower() + ":"):
            title = title[len(label) + 1 :].strip()
        if title.lower().startswith(label.lower()) or ": " in title:
            # "Exercise 1: ...", "Reflect: ...", "Measure it: ..." lead with their own word: a
            # "Check:" or "Run:" before it would say two.
            label = ""
        where = self.query_one("#where", Static)
        place = Text.assemble("  ·  ", (f"step {self.index + 1} of {total}", "bold cyan"))
        what = Text.assemble((label, "bold magenta"), ": " if label else "", title)
        width = (where.size.width or self.app.size.width) - 2
        lesson_title = self.lesson.title
        room = width - place.cell_len - 5 - what.cell_len  # for the lesson title, on one row
        if room >= min(len(lesson_title), 13):
            # One row: the lesson title gives way first ("GPU Lab: speed an…").
            if len(lesson_title) > room:
                lesson_title = lesson_title[: room - 1].rstrip() + "…"
            header = Text.assemble((lesson_title, "bold"), place, "  ·  ", what, no_wrap=True)
        else:
            # A step title too long to share the row (80 columns) gets a row of its own, whole.
            room = width - place.cell_len
            if len(lesson_title) > room:
                lesson_title = lesson_title[: max(room - 1, 12)].rstrip() + "…"
            what.truncate(width, overflow="ellipsis")
            header = Text.assemble((lesson_title, "bold"), place, "\n", what, no_wrap=True)
        where.update(header)
        done = self.session.completed()
        trail = Text(no_wrap=True)
        # One row: a lesson with more steps than columns shows the stretch around this step, "…"
        # where steps are left out (gpu-lab's 82 steps at 80 columns).
        first, last = trail_window(total, self.index, width)
        if first > 0:
            trail.append("…", style="dim")
        for i in range(first, last):
            if i == self.index:
                trail.append("◆", style="bold cyan")
            elif self.lesson.steps[i].id in done:
                trail.append("●", style="green")
            else:
                trail.append("○", style="dim")
        if last < total:
            trail.append("…", style="dim")
        self.query_one("#trail", Static).update(trail)

    SAY_TIMEOUT_S = 4

    def say(self, text: str, severity: SeverityLevel = "information") -> None:
        # One toast per message: a key pressed again while its answer still shows does not stack
        # copies over the step (eight "n" presses on an unlocked prediction made eight).
        now = time.monotonic()
        last_text, last_at = getattr(self, "_said", ("", -1e9))
        if text == last_text and now - last_at < self.SAY_TIMEOUT_S:
            return
        self._said = (text, now)
        self.notify(text, severity=severity, timeout=self.SAY_TIMEOUT_S)

    # ------------------------------------------------------------------ navigation

    def _can_move(self) -> bool:
        view = self.view
        if view is not None and view.running:
            self.say("A run is in progress: escape cancels it first.", "warning")
            return False
        return True

    def action_next(self) -> None:
        if not self._can_move():
            return
        view = self.view
        blocker = view.leave_blocker() if view else None
        if blocker:
            self.say(blocker, "warning")
            return
        if self.index + 1 < len(self.lesson.steps):
            self.show_step(self.index + 1)
        else:
            self.app.finish_lesson(self.session)

    def action_previous(self) -> None:
        if self._can_move() and self.index > 0:
            self.show_step(self.index - 1)

    def action_enter(self) -> None:
        view = self.view
        if view is not None and view.action_enter():
            return
        if isinstance(view, RunStepView) and not view.running and view.query_one("#panel", RunPanel).state == "idle":
            view.action_run()
            return
        if view is None or view.enter_moves_on:
            self.action_next()
        else:
            self.say("n moves on to the next step.")

    def action_run(self) -> None:
        view = self.view
        if view is None or not view.action_run():
            self.say("Nothing to run on this step.")

    def action_hint(self) -> None:
        view = self.view
        if view is None or not view.action_hint():
            self.say("No hint here: hints belong to checks and exercises.")

    def action_edit(self) -> None:
        view = self.view
        if view is None or not view.action_edit():
            self.say("e opens an exercise's code in your own editor; this step has none.")

    def action_math(self) -> None:
        view = self.view
        if not (isinstance(view, InstrumentStepView) and view.toggle_math()):
            self.say("Nothing to show here: m shows an instrument's formulas.")

    def action_give_up(self) -> None:
        view = self.view
        if isinstance(view, CheckStepView):
            view.give_up()
        elif isinstance(view, ExerciseStepView):  # g outside the editor: as ctrl+g inside it
            view.action_show_solution()

    def action_escape(self) -> None:
        view = self.view
        if view is not None and view.cancel_run():
            return
        if isinstance(self.focused, TEXT_INPUTS):
            self.query_one("#content").focus()
            if view is not None:
                view.refresh_hint()
            return
        # Leaving takes a second escape: one press too many (after an answer closed its box,
        # say) must not take the learner out of the lesson.
        now = time.monotonic()
        if now - self._escape_armed_at > LEAVE_CONFIRM_S:
            self._escape_armed_at = now
            self.say("Press escape again to leave the lesson (your place is kept).")
            return
        self.app.clear_notifications()  # the lesson's toasts ("press escape again") are not the home screen's
        self.app.pop_screen()

    async def action_quit(self) -> None:
        view = self.view
        if view is not None:
            view.cancel_run()
        await self.app.action_quit()

    def on_descendant_focus(self) -> None:
        if self.view is not None:
            self.view.refresh_hint()

    def on_descendant_blur(self) -> None:
        if self.view is not None:
            self.call_after_refresh(self.view.refresh_hint)

    @on(StepView.Completed)
    def _completed(self, event: StepView.Completed) -> None:
        event.stop()
        self._update_header()  # the session recorded it; the trail shows it
