"""What the TUI tests share: the app over the test lessons with scripted runs, the 80x24 size, and
the ways to make a picture the same every time (cursors still, clocks stopped) and to see what
the app said in a toast."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import ScriptedEngine, ScriptedGrader
from textual.widgets import Input, TextArea
from waiting import step_arrived, wait_for

from tutor.measurement import calibration
from tutor.ui.app import TutorApp
from tutor.ui.widgets import run_panel

HERE = Path(__file__).parent
LESSONS = HERE / "tui_lessons"  # tui-demo: one step of each kind
EXERCISE_LESSONS = HERE / "tui_exercise_lessons"  # ex-demo: one exercise
SIZE = (80, 24)  # the smallest terminal we promise
NOON = 1_767_268_800.0  # 2026-01-01 12:00 UTC


@pytest.fixture
def size() -> tuple[int, int]:
    """80x24: what every snapshot and every "usable at 80x24" test is taken at."""
    return SIZE


@pytest.fixture
def demo_app(tmp_path: Path) -> Callable[..., TutorApp]:
    """A TutorApp over the test lessons (and the built-in ones), its home in tmp_path, on a
    scripted CPU: runs are a ScriptedEngine's and exercises a ScriptedGrader's (no process
    starts) unless the test gives its own."""

    def make(
        engine: Any = None,
        *,
        lessons_dirs: tuple[Path, ...] = (LESSONS, EXERCISE_LESSONS),
        grader: Any = None,
        progress: Any = None,
    ) -> TutorApp:
        return TutorApp(
            lessons_dirs=list(lessons_dirs),
            home=tmp_path,
            device="cpu",
            engine=engine if engine is not None else ScriptedEngine(),
            grader=grader if grader is not None else ScriptedGrader(),
            progress=progress,
        )

    return make


async def _settle(pilot) -> None:
    """The device known (a scripted CPU), cursors still: the same picture every time."""
    await wait_for(pilot, lambda: "detecting" not in str(pilot.app.device_text))
    for widget in pilot.app.screen.query("Input, TextArea"):
        if isinstance(widget, (Input, TextArea)):
            widget.cursor_blink = False
    await pilot.pause()


@pytest.fixture
def settle() -> Callable[[Any], Awaitable[None]]:
    """`await settle(pilot)` before a snapshot: the device detected, no cursor blinking."""
    return _settle


async def _arrived(pilot, screen) -> None:
    """The step shown last is mounted, has its focus and its keys line (waiting.step_arrived).

    The keys line is written again here once the step is mounted: LessonScreen._after_mount can
    run before the new step is composed, and a step whose keys line asks its children (a run
    step: "is my run going?") then raises inside StepView.refresh_hint, which swallows it, so on a
    loaded machine the previous step's keys stayed on the line until the next key press."""
    await wait_for(
        pilot,
        lambda: (
            (view := screen.view) is not None
            and view.is_mounted
            and screen.focused is (view.arrival_focus() or screen.query_one("#content"))
        ),
    )
    screen.view.refresh_hint()
    await wait_for(pilot, lambda: step_arrived(screen))


@pytest.fixture
def at_step(settle) -> Callable[..., Awaitable[Any]]:
    """`await at_step(pilot, lesson_id, step_id)`: the lesson open at that step, arrived and settled."""

    async def go(pilot, lesson_id: str, step_id: str):
        await settle(pilot)
        pilot.app.open_lesson(lesson_id)
        await pilot.pause()
        screen = pilot.app.screen
        await _arrived(pilot, screen)  # the step the lesson opens at, then the one asked for
        screen.show_step(screen.lesson.index(step_id))
        await _arrived(pilot, screen)
        await settle(pilot)
        return screen

    return go


@pytest.fixture
def calibration_cache(tmp_path: Path, monkeypatch) -> Path:
    """This test's own calibration cache (empty until a test stores one): the file's path."""
    record = tmp_path / "cache" / "calibration.json"
    monkeypatch.setattr(calibration, "cache_file", lambda: record)
    return record


class _StoppedWatch:
    """The time module as the run panel sees it, but its monotonic clock does not move: every
    run "took 0.0 s"."""

    def monotonic(self) -> float:
        return 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def stopped_watch(monkeypatch) -> None:
    """Runs say "Finished in 0.0 s", never the milliseconds this machine took. (Textual's own
    clock is left alone: only the run panel's module reads this one.)"""
    monkeypatch.setattr(run_panel, "time", _StoppedWatch())


@pytest.fixture
def frozen_clock(monkeypatch) -> Iterator[float]:
    """It is 2026-01-01 12:00 in UTC for the whole test: what the app stamps (a prediction's
    "locked at", a run's date, a calibration's age) reads the same on every machine. Yields that
    time. Textual's timers run on the monotonic clock, which keeps going."""
    monkeypatch.setattr(time, "time", lambda: NOON)
    zone = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield NOON
    finally:
        if zone is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = zone
        time.tzset()


@pytest.fixture
def notes(monkeypatch) -> Callable[[TutorApp], list[str]]:
    """`said = notes(app)`: every message the app (or a screen) puts in a toast from then on, in
    order, as written; call it before the app runs to catch what it says on start."""

    def capture(app: TutorApp) -> list[str]:
        said: list[str] = []
        notify = app.notify

        def recording(message: str, **kwargs: Any) -> None:
            said.append(message)
            notify(message, **kwargs)

        monkeypatch.setattr(app, "notify", recording)
        return said

    return capture


@pytest.fixture
def toasts() -> Callable[[TutorApp], list[str]]:
    """`toasts(app)`: the toasts on the current screen now, as the learner reads them (the app
    must run with notifications=True: Pilot's run_test leaves them out otherwise)."""

    def shown(app: TutorApp) -> list[str]:
        return [str(toast.render()) for toast in app.screen.query("Toast")]

    return shown
