"""Hot reload: an instructor edits an open lesson's file; the TUI reloads it and the learner stays put."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from fakes import ScriptedEngine
from rich.console import Console
from textual.widgets import Static
from waiting import wait_for

from tutor.ui.app import TutorApp
from tutor.ui.screens.lesson import LessonScreen

LESSON = """\
id: live
title: Live lesson
steps:
  - id: one
    kind: read
    title: First
    body: The first step.
  - id: two
    kind: read
    title: Second
    body: The second step, version 1.
  - id: three
    kind: read
    title: Third
    body: The third step.
"""


def text_of(widget) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.render() if not isinstance(widget, Static) else widget.content)
    return console.export_text()


def body_text(screen) -> str:
    from textual.widgets import Markdown

    return " ".join(m.source for m in screen.query(Markdown))


def save(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    stamp = time.time() + 5  # a new mtime even on a coarse filesystem clock
    os.utime(path, (stamp, stamp))


async def test_an_edit_is_shown_and_the_position_kept(tmp_path, monkeypatch, notes):
    monkeypatch.setattr(LessonScreen, "WATCH_INTERVAL_S", 0.1)
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    path = lessons / "live.yaml"
    path.write_text(LESSON, encoding="utf-8")
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=ScriptedEngine())
    said = notes(app)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("live")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LessonScreen)
        await pilot.press("n")
        await pilot.pause()
        assert screen.lesson.steps[screen.index].id == "two"

        # The instructor rewrites step two and adds a step before it: the learner stays on "two".
        save(
            path,
            LESSON.replace("version 1", "version 2").replace(
                "  - id: two\n", "  - id: zero\n    kind: read\n    body: Inserted.\n  - id: two\n"
            ),
        )
        await wait_for(pilot, lambda: "version 2" in body_text(screen))
        assert screen.lesson.steps[screen.index].id == "two" and screen.index == 2
        assert "step 3 of 4" in text_of(screen.query_one("#where", Static))
        assert app.catalog.get("live").lesson is screen.lesson  # home lists the new version too

        # A broken save is said, and the working version stays.
        save(path, "id: live\ntitle: Live lesson\nsteps:\n  - id: two\n    kind: reed\n")
        await wait_for(pilot, lambda: any("has errors" in n for n in said))
        assert "version 2" in body_text(screen) and len(screen.lesson.steps) == 4

        # The current step removed: the step now in its place is shown.
        step_two = "  - id: two\n    kind: read\n    title: Second\n    body: The second step, version 1.\n"
        save(path, LESSON.replace(step_two, ""))
        await wait_for(pilot, lambda: len(screen.lesson.steps) == 2)
        assert screen.lesson.steps[screen.index].id in ("one", "three")
