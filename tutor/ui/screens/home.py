"""Home: the device, the lessons with progress, review, broken lesson files with their errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from tutor.course import review
from tutor.course.lesson import LoadedLesson
from tutor.ui.screens.inspect import InspectScreen
from tutor.ui.screens.profile import ProfileScreen
from tutor.ui.screens.review import ReviewScreen
from tutor.ui.screens.roofline import RooflineScreen

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


def _hanging(text: Text) -> Group:
    """The device line with its notes indented as a block, so a wrapped note keeps its indent."""
    first, *notes = text.split("\n")
    return Group(first, *(Padding(note[2:] if note.plain.startswith("  ") else note, (0, 0, 0, 2)) for note in notes))


class HomeScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    BINDINGS = [
        Binding("r", "review", "review"),
        Binding("p", "profile", "profile"),
        Binding("f", "roofline", "roofline"),
        Binding("i", "inspect", "inspect"),
        Binding("question_mark", "app.help", "help"),
        Binding("q", "app.quit", "quit"),
    ]

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Vertical(id="home"):
            yield Static(Text("Learn PyTorch GPU training by predicting, then measuring.", style="bold"), id="tagline")
            yield Static(_hanging(self.app.device_text), id="device")
            yield Static(Text("Lessons", style="bold underline"), classes="section")
            yield OptionList(id="lessons")
            yield Static("", id="review-line")
            yield Static("", id="broken")
        yield Static("enter open · r review · p profile · f roofline · i inspect · ? help · q quit", id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_lessons()
        self.query_one("#lessons", OptionList).focus()
        self.app.device_detected.subscribe(self, lambda _device: self.update_device())
        self.update_device()  # a device found while this screen was being composed

    def on_screen_resume(self) -> None:
        self.refresh_lessons()

    def refresh_lessons(self) -> None:
        app = self.app
        catalog, progress = app.catalog, app.progress
        options = self.query_one("#lessons", OptionList)
        highlighted = options.highlighted
        options.clear_options()
        last = progress.last_lesson()
        for i, item in enumerate(catalog.lessons):
            options.add_option(Option(self._row(item, last), id=item.lesson.id))
            if highlighted is None and item.lesson.id == last:
                highlighted = i
        if catalog.lessons:
            options.highlighted = highlighted or 0
        self._update_review_line()
        broken = self.query_one("#broken", Static)
        lines: list[Text] = []
        for lesson_id, path in catalog.overridden.items():
            lines.append(Text(f"note: lesson {lesson_id!r} is overridden by {path}", style="dim"))
        for path, error in catalog.broken:
            lines.append(Text(f"✗ {path} could not be loaded:", style="bold red"))
            for issue in error.issues[:5]:
                lines.append(Text(f"    {issue}", style="red"))
        broken.update(Text("\n").join(lines) if lines else "")
        broken.display = bool(lines)  # no empty rows under the list when every file loaded

    def _row(self, item: LoadedLesson, last: str | None) -> Group:
        lesson = item.lesson
        done = len(self.app.progress.completed_steps(lesson.id) & {s.id for s in lesson.steps})
        total = len(lesson.steps)
        bar_width = 12
        filled = round(bar_width * done / total) if total else 0
        status = "✓ done" if done == total else ("continue" if done or lesson.id == last else "new")
        details = Text.assemble(
            ("█" * filled + "░" * (bar_width - filled), "green"),
            f" {done}/{total} steps · ",
            (status, "cyan" if status == "continue" else ""),
            (f"\n{lesson.summary}" if lesson.summary else "", "dim"),
        )
        # Padding, not leading spaces: a wrapped summary keeps its indent.
        return Group(Text(lesson.title, style="bold"), Padding(details, (0, 0, 0, 2)))

    def _update_review_line(self) -> None:
        lessons = [item.lesson for item in self.app.catalog.lessons]
        questions = review.pool(lessons, self.app.progress)
        line = self.query_one("#review-line", Static)
        if questions:
            missed = sum(q.wrong > 0 and q.streak == 0 for q in questions)
            finished = len({q.lesson.id for q in questions})
            line.update(
                Text.assemble(
                    ("Review: ", "bold"),
                    f"{len(questions)} question{'s' if len(questions) > 1 else ''} from "
                    f"{finished} finished lesson{'s' if finished > 1 else ''}",
                    (f", {missed} you missed" if missed else "", "yellow"),
                    " · press ",
                    ("r", "bold"),
                )
            )
        else:
            line.update(Text("Review: finish a lesson to be asked its questions again (r).", style="dim"))

    def action_review(self) -> None:
        self.app.push_screen(ReviewScreen())

    def action_profile(self) -> None:
        self.app.push_screen(ProfileScreen())

    def action_roofline(self) -> None:
        self.app.push_screen(RooflineScreen())

    def action_inspect(self) -> None:
        self.app.push_screen(InspectScreen())

    def update_device(self) -> None:
        self.query_one("#device", Static).update(_hanging(self.app.device_text))

    @on(OptionList.OptionSelected, "#lessons")
    def _open(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:  # every lesson's option carries its id
            self.app.open_lesson(event.option.id)
