"""Waiting in Pilot tests for what the test is about, never for a fixed time: a pause of 0.2 s
stands in for an event (a step drawn, an autosave, a scroll) and fails on a loaded machine that
takes 0.3 s. `wait_for` lets the app run until the condition holds; `step_arrived` is the event
LessonScreen.show_step ends with (the step is mounted and has taken its focus)."""

from __future__ import annotations

import time
from collections.abc import Callable


async def wait_for(pilot, condition: Callable[[], object], timeout: float = 60.0) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds (generous: it is
    a bound for a loaded machine, and a condition met early ends the wait at once)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:g} s")
        await pilot.pause(0.05)


def step_arrived(screen) -> bool:
    """The step shown last is mounted, has the focus it asks for and its keys line (both given
    after the step's first refresh)."""
    view = screen.view
    if view is None or not view.is_mounted:
        return False
    return (
        screen.focused is (view.arrival_focus() or screen.query_one("#content"))
        and str(screen.query_one("#keys-hint").content) == view.keys_hint()
    )
