"""Whatever has focus is on screen at 80x24, on every built-in step (issue 35): the list or line a
learner types into is never below the fold, even once a long body has been laid out."""

from __future__ import annotations

import pytest
from fakes import ScriptedEngine

from tutor.course.catalog import discover
from tutor.ui.app import TutorApp

BUILT_IN = [item.lesson.id for item in discover().lessons]


@pytest.mark.long
@pytest.mark.parametrize("lesson_id", BUILT_IN)
async def test_what_has_focus_is_on_screen_at_80x24_on_every_step(tmp_path, lesson_id):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    hidden = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson(lesson_id)
        await pilot.pause()
        screen = app.screen
        content = screen.query_one("#content")
        for index, step in enumerate(screen.lesson.steps):
            screen.show_step(index)
            await pilot.pause()
            await pilot.pause()  # the body's Markdown is laid out in the background
            focused = app.focused
            if focused is None or focused is content:
                continue  # the scrolling lesson itself: it is the screen
            region = focused.region
            shown = region.intersection(content.region)
            if region.height == 0 or shown.height < min(region.height, content.region.height):
                hidden.append(f"{step.id}: {type(focused).__name__} at rows {region.y}-{region.bottom}, "
                              f"the lesson shows rows {content.region.y}-{content.region.bottom}")
    assert not hidden, hidden
