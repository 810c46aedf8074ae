"""The review screen: a short round of checks from finished lessons, then how it went."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Input, OptionList, Static

from tutor.course import review
from tutor.course.review import Question
from tutor.course.session import LessonSession
from tutor.ui.widgets.review_question import ReviewQuestion

if TYPE_CHECKING:
    from tutor.ui.app import TutorApp


class ReviewScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    BINDINGS = [
        Binding("n", "next", "next"),
        Binding("s", "skip", "skip"),
        Binding("enter", "enter", "continue", show=False),
        Binding("r", "again", "another round"),
        Binding("escape", "escape", "back"),
        Binding("question_mark", "app.help", "help"),
        Binding("q", "app.quit", "quit"),
    ]

    def __init__(self, rng: random.Random | None = None) -> None:
        super().__init__()
        self.rng = rng or random.Random()
        self.questions: list[Question] = []
        self.results: list[bool | None] = []  # per question: right, wrong, None = skipped
        self.index = 0
        self.state = "empty"  # empty | question | summary

    def compose(self) -> ComposeResult:
        yield Static("", id="where")
        yield VerticalScroll(id="content")
        yield Static("", id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.start_round()

    # ------------------------------------------------------------------ the round

    def start_round(self) -> None:
        lessons = [item.lesson for item in self.app.catalog.lessons]
        self.questions = review.pick(review.pool(lessons, self.app.progress), rng=self.rng)
        self.results = [None] * len(self.questions)
        self.index = 0
        if self.questions:
            self._show_question(0)
        else:
            self._show_empty(lessons)

    def _content(self) -> VerticalScroll:
        content = self.query_one("#content", VerticalScroll)
        content.remove_children()
        content.scroll_home(animate=False)
        return content

    def _show_question(self, index: int) -> None:
        self.state = "question"
        self.refresh_bindings()
        self.index = index
        question = self.questions[index]
        self._content().mount(ReviewQuestion(question, LessonSession(question.lesson, self.app.progress), self.rng))
        self._update_header()
        self.call_after_refresh(self._refresh_keys)

    def _show_empty(self, lessons) -> None:
        self.state = "empty"
        self.refresh_bindings()
        done = review.finished(lessons, self.app.progress)
        if done:
            text = Text("Your finished lessons have no checks to ask again.")
        else:
            text = Text.assemble(
                ("Nothing to review yet.\n\n", "bold"),
                "Review asks again the checks and interview questions of the lessons you have finished, "
                "more often the ones you got wrong. Finish a lesson first: it is marked ✓ done on the home screen.",
            )
        self._content().mount(Static(text, classes="review-message"))
        self.query_one("#where", Static).update(Text("Review", style="bold"))
        self._refresh_keys()

    def _show_summary(self) -> None:
        self.state = "summary"
        self.refresh_bindings()
        right = sum(r is True for r in self.results)
        answered = sum(r is not None for r in self.results)
        skipped = len(self.results) - answered
        if answered:
            head = f"{right} of {answered} answered right" + (f" ({skipped} skipped)" if skipped else "")
        else:
            head = f"You skipped all {skipped}: nothing was recorded."
        lines = [Text(head, style="bold")]
        for q, r in zip(self.questions, self.results):
            mark = ("✓ ", "green") if r is True else ("✗ ", "red") if r is False else ("· ", "dim")
            lines.append(Text.assemble(mark, (q.lesson.title, "bold"), "  ·  ", q.step.title or q.step.id))
        if answered > right:
            lines.append(Text("\nThe ones you missed come back more often in the next rounds.", style="dim"))
        elif answered:
            lines.append(Text("\nQuestions you keep getting right come up less and less.", style="dim"))
        self._content().mount(Static(Text("\n").join(lines), classes="review-message"))
        self._update_header()
        self._refresh_keys()

    def _update_header(self) -> None:
        where = self.query_one("#where", Static)
        right = sum(r is True for r in self.results)
        if self.state == "summary":
            where.update(Text.assemble(("Review", "bold"), "  ·  ", ("round done", "bold cyan")))
            return
        where.update(
            Text.assemble(
                ("Review", "bold"),
                "  ·  ",
                (f"question {self.index + 1} of {len(self.questions)}", "bold cyan"),
                "  ·  ",
                f"{right} right so far",
            )
        )

    def _current(self) -> ReviewQuestion | None:
        found = self.query(ReviewQuestion)
        return found.first() if found else None

    def _refresh_keys(self) -> None:
        hint = self.query_one("#keys-hint", Static)
        if self.state != "question":
            again = "r another round · " if self.state == "summary" else ""
            hint.update(f"{again}escape back to the lessons · ? help · q quit")
            return
        current = self._current()
        last = self.index + 1 == len(self.questions)
        if current is not None and current.answered is not None:
            hint.update(("n see how it went" if last else "n next question") + " · escape back to the lessons")
        elif isinstance(self.focused, OptionList):
            hint.update("↑↓ or its number choose · enter submit · s skip · escape leave the list")
        elif isinstance(self.focused, Input):
            hint.update("type your answer · enter submit · escape leave the box")
        else:
            hint.update("enter back to the answer · s skip · escape back to the lessons")

    # ------------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers only what works now: next during a round, another round after it."""
        if action in ("next", "skip"):
            current = self._current() if self.state == "question" else None
            answered = current is not None and current.answered is not None
            return self.state == "question" and (answered if action == "next" else not answered)
        if action == "again":
            return self.state == "summary"
        return True

    @on(ReviewQuestion.Answered)
    def _answered(self, event: ReviewQuestion.Answered) -> None:
        event.stop()
        self.results[self.index] = event.correct
        self._update_header()
        self.refresh_bindings()
        self.query_one("#content").focus()
        self.call_after_refresh(self._refresh_keys)

    def action_next(self) -> None:
        current = self._current()
        if self.state != "question" or current is None:
            return
        if current.answered is None:
            self.notify("Answer first, or press s to skip this one.", timeout=3)
            return
        self._advance()

    def action_skip(self) -> None:
        current = self._current()
        if self.state == "question" and current is not None and current.answered is None:
            self._advance()

    def _advance(self) -> None:
        if self.index + 1 < len(self.questions):
            self._show_question(self.index + 1)
        else:
            self._show_summary()

    def action_enter(self) -> None:
        current = self._current()
        if self.state == "question" and current is not None and current.answered is None:
            current.focus_answer()
            self._refresh_keys()
        else:
            self.action_next()

    def action_again(self) -> None:
        if self.state == "summary":
            self.start_round()

    def action_escape(self) -> None:
        if isinstance(self.focused, (Input, OptionList)):
            self.query_one("#content").focus()
            self._refresh_keys()
            return
        self.app.pop_screen()

    def on_descendant_focus(self) -> None:
        self._refresh_keys()
