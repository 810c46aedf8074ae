"""Snapshots at 80x24, the smallest terminal we promise: the home screen and one screen per step
kind. A change to what a learner sees fails here until it is looked at and accepted with
`pytest tests/tui/test_snapshots.py --snapshot-update` (the SVGs are in __snapshots__/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import ScriptedEngine
from textual.widgets import Input, TextArea
from waiting import step_arrived, wait_for

from tutor.ui.app import TutorApp

HERE = Path(__file__).parent
SIZE = (80, 24)


def _app(tmp_path: Path) -> TutorApp:
    return TutorApp(
        lessons_dirs=[HERE / "tui_lessons", HERE / "tui_exercise_lessons"],
        home=tmp_path,
        device="cpu",
        engine=ScriptedEngine(),
    )


async def _settle(pilot) -> None:
    """The device known (a scripted CPU), cursors still: the same picture every time."""
    await wait_for(pilot, lambda: "detecting" not in str(pilot.app.device_text))
    for widget in pilot.app.screen.query("Input, TextArea"):
        if isinstance(widget, (Input, TextArea)):
            widget.cursor_blink = False
    await pilot.pause()


def _at(lesson_id: str, step_id: str, before=None):
    async def run_before(pilot) -> None:
        await _settle(pilot)
        pilot.app.open_lesson(lesson_id)
        await pilot.pause()
        screen = pilot.app.screen
        if before is not None:
            before(pilot.app)
        screen.show_step(screen.lesson.index(step_id))
        await wait_for(pilot, lambda: step_arrived(screen))  # its keys line is written after its first refresh
        await _settle(pilot)

    return run_before


def test_home(snap_compare, tmp_path):
    assert snap_compare(_app(tmp_path), terminal_size=SIZE, run_before=_settle)


@pytest.mark.parametrize(
    "lesson_id, step_id",
    [
        ("tui-demo", "intro"),  # read, with a code comparison
        ("tui-demo", "guess-acc"),  # predict, a choice
        ("tui-demo", "short-run"),  # run, before r
        ("tui-demo", "why-scale"),  # check, words
        ("ex-demo", "ex-sum"),  # exercise, the editor
    ],
    ids=["read", "predict", "run", "check", "exercise"],
)
def test_each_step_kind(snap_compare, tmp_path, lesson_id, step_id):
    assert snap_compare(_app(tmp_path), terminal_size=SIZE, run_before=_at(lesson_id, step_id))


def test_instrument(snap_compare, tmp_path):
    def lock_the_acts_predictions(app) -> None:
        lesson = app.catalog.get("training-iron-law").lesson
        for step in lesson.predictions_before(lesson.index("ledger")):
            app.progress.lock_prediction(lesson.id, step.id, "16", 16.0)

    assert snap_compare(
        _app(tmp_path), terminal_size=SIZE, run_before=_at("training-iron-law", "ledger", lock_the_acts_predictions)
    )
