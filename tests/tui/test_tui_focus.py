"""Whatever has focus is on screen at 80x24, on every built-in step (issue 35): the list or line a
learner types into is never below the fold, even once a long body has been laid out."""

from __future__ import annotations

import pytest
from fakes import ScriptedEngine
from waiting import step_arrived, wait_for

from tutor.course.catalog import discover
from tutor.ui.app import TutorApp

BUILT_IN = [item.lesson.id for item in discover().lessons]
SETTLE_S = 5.0  # a body's Markdown is laid out in the background: how long the focus may take to come into view


def _hidden(screen) -> str | None:
    """Where the focused widget lies beyond the lesson's visible rows, or None when it is in view."""
    focused, content = screen.focused, screen.query_one("#content")
    if focused is None or focused is content:
        return None  # the scrolling lesson itself: it is the screen
    region = focused.region
    shown = region.intersection(content.region)
    if region.height and shown.height >= min(region.height, content.region.height):
        return None
    return (f"{type(focused).__name__} at rows {region.y}-{region.bottom}, "
            f"the lesson shows rows {content.region.y}-{content.region.bottom}")


@pytest.mark.long
@pytest.mark.parametrize("lesson_id", BUILT_IN)
async def test_what_has_focus_is_on_screen_at_80x24_on_every_step(tmp_path, lesson_id):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    hidden = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson(lesson_id)
        await pilot.pause()
        screen = app.screen
        for index, step in enumerate(screen.lesson.steps):
            screen.show_step(index)
            await wait_for(pilot, lambda: step_arrived(screen))
            try:
                await wait_for(pilot, lambda: _hidden(screen) is None, timeout=SETTLE_S)
            except AssertionError:
                hidden.append(f"{step.id}: {_hidden(screen)}")
    assert not hidden, hidden
