"""The profile screen (p on home): how far the learner's predictions were from what was measured,
per concept, a chart of them over time, and the steps to revisit for the worst calibrated."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tutor.course import profile as prediction_profile
from tutor.course.profile import ConceptProfile, Profile

# The chart's width: its lines fit an 80-column terminal beside the padding and the scrollbar.
if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


CHART_WIDTH = 72

# Review asks the checks of finished lessons again; predictions are not in it (a prediction is
# locked once, before its run), so the profile points at the steps to go back to instead.
REVIEW_NOTE = "Review asks checks, not predictions: open these steps again to see your guess beside the measurement."

_MARKS = {
    "over": ("▲ ", "yellow"),
    "under": ("▼ ", "yellow"),
    "both": ("◆ ", "yellow"),
    "within": ("✓ ", "green"),
    "close": ("≈ ", "yellow"),
}


def _line(concept: ConceptProfile) -> Text:
    return Text.assemble(_MARKS.get(concept.verdict, ("· ", "dim")), concept.sentence())


class ProfileScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    BINDINGS = [
        Binding("escape,q", "back", "back"),
        Binding("question_mark", "app.help", "help"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.found: Profile | None = None  # read from the progress store when the screen opens

    def compose(self) -> ComposeResult:
        yield Static(Text("Your prediction profile", style="bold"), id="where")
        yield VerticalScroll(id="content")
        yield Static("↑↓ scroll · escape or q back to the lessons · ? help", id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        lessons = [item.lesson for item in self.app.catalog.lessons]
        self.found = prediction_profile.profile(lessons, self.app.progress)
        content = self.query_one("#content", VerticalScroll)
        content.mount_all(self._parts(self.found))
        content.focus()

    def _parts(self, found: Profile) -> list[Static]:
        parts: list[Static] = []
        if found.empty:
            parts.append(Static(Text(prediction_profile.NOTHING_YET, style="bold"), classes="profile-text"))
        else:
            scored = len(found.scored)
            head = Text(
                f"{scored} prediction{'s' if scored != 1 else ''} measured, "
                f"{len(found.concepts)} concept{'s' if len(found.concepts) != 1 else ''}, worst first:",
                style="bold",
            )
            parts.append(Static(Text("\n").join([head, *(_line(c) for c in found.concepts)]), classes="profile-text"))
            chart = Text(prediction_profile.chart(found, CHART_WIDTH), no_wrap=True, overflow="crop")
            parts.append(
                Static(
                    Text.assemble(("Over time, oldest first (each letter is a prediction)\n", "bold"), chart),
                    id="profile-chart",
                    classes="profile-text",
                )
            )
            if found.advice():
                parts.append(
                    Static(
                        Text.assemble((found.advice(), "bold"), "\n", (REVIEW_NOTE, "dim")),
                        id="profile-advice",
                        classes="profile-text",
                    )
                )
        if found.unscored:
            lines = [Text(found.unscored_summary())]
            lines += [Text(f"  {u.place.name()}: {u.why}", style="dim") for u in found.unscored]
            parts.append(Static(Text("\n").join(lines), id="profile-unscored", classes="profile-text"))
        return parts

    def action_back(self) -> None:
        self.app.pop_screen()
