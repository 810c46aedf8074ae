"""Walk the built-in lessons from first step to last, as a learner would, at 80x24.

On every step, whatever has focus is on screen once the step has arrived and its body has been
laid out (issue 35: the list or line a learner types into is never below the fold). The screens
are the subject: runs are scripted (each declared metric reported). That the real runs finish and
the real solutions pass is what `gpututor lesson test` checks, once, in
tests/system/test_cli_lesson_test.py. Every prediction is locked, every run step run (its reveal
drawn for the predictions before it), every check answered wrong first, then right, then verified
by its run. Exercises are arrived at, not solved: a graded exercise on screen is
test_snapshots.py's test_an_exercise_graded, the editor's keys are test_tui_exercise.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import ScriptedEngine, ScriptedGrader
from textual.widgets import Input, OptionList
from waiting import step_arrived
from waiting import wait_for as _wait_for

from tutor import experiments
from tutor.authoring.lesson_test import goal_settings
from tutor.checks.answers import ChoiceAnswer
from tutor.course.catalog import discover
from tutor.course.lesson import ExerciseStep
from tutor.ui.app import TutorApp
from tutor.ui.screens.home import HomeScreen
from tutor.ui.widgets import run_panel
from tutor.ui.widgets.check_step import CheckStepView
from tutor.ui.widgets.controls import ControlRow
from tutor.ui.widgets.instrument_step import InstrumentStepView
from tutor.ui.widgets.predict_step import PredictStepView
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.run_step import RunStepView


async def wait_for(pilot, condition, timeout: float = 120.0) -> None:
    """Real experiments on a loaded machine: more time than the scripted screens get."""
    await _wait_for(pilot, condition, timeout)


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
    return (
        f"{type(focused).__name__} at rows {region.y}-{region.bottom}, "
        f"the lesson shows rows {content.region.y}-{content.region.bottom}"
    )


async def focus_in_view(pilot, screen) -> str | None:
    """None once the step has arrived with its focus in view; else where the focus lies."""
    await wait_for(pilot, lambda: step_arrived(screen))
    try:
        await _wait_for(pilot, lambda: _hidden(screen) is None, timeout=SETTLE_S)
    except AssertionError:
        return _hidden(screen)
    return None


async def run_and_wait(pilot, panel: RunPanel) -> None:
    screen = pilot.app.screen
    lesson_id, step_id = screen.lesson.id, screen.lesson.steps[screen.index].id
    await pilot.press("r")
    await wait_for(pilot, lambda: panel.state in ("finished", "failed"))
    assert panel.state == "finished", panel.query_one("#status").content
    # RunPanel.Done has reached the step: it records the run
    await wait_for(pilot, lambda: pilot.app.progress.latest_run(lesson_id=lesson_id, step_id=step_id) is not None)


async def answer_check(pilot, view: CheckStepView, step) -> None:
    """A wrong answer (not accepted), then a right one (accepted)."""
    if isinstance(step.answer, ChoiceAnswer):
        options = step.answer.options
        wrong = next(i for i, o in enumerate(options) if not o.correct)
        right = next(i for i, o in enumerate(options) if o.correct)
        choices = view.query_one("#choices", OptionList)
        choices.focus()
        attempts = [(wrong, False), (right, True)]
    else:
        box = view.query_one("#answer", Input)
        box.focus()
        attempts = [(step.examples.wrong[0], False), (step.examples.right[0], True)]
    for answer, accepted in attempts:
        if isinstance(step.answer, ChoiceAnswer):
            choices.highlighted = answer
        else:
            box.value = answer
        await pilot.press("enter")
        await pilot.pause()
        assert view.solved is accepted, (step.id, answer)


async def work_instrument(pilot, view: InstrumentStepView, step) -> None:
    """Move a control as a learner would; on the laptop challenge, the moves that make it fit."""
    assert not view.locked, step.id
    if any(not r.fixed and r.display for r in view.query(ControlRow)):
        await pilot.press("enter")  # into the controls
    if step.goal is not None:
        # The fewest moves that meet it (what lesson test finds), made with the keys, row by row.
        target, _ = goal_settings(step)
        rows = [r for r in view.query(ControlRow) if not r.fixed and r.display]
        for i, row in enumerate(rows):
            options, name = row.control.options, row.control.name
            for _ in range(2 * len(options)):
                if view.settings[name] == target[name]:
                    break
                ahead = options.index(target[name]) > options.index(view.settings[name])
                await pilot.press("right" if ahead else "left")
                await pilot.pause()
            if i + 1 < len(rows):
                await pilot.press("down")
        await pilot.pause()
        assert step.goal.reached(view.reading.outputs), view.reading.verdict
    elif any(not r.fixed and r.display for r in view.query(ControlRow)):
        before = dict(view.settings)
        await pilot.press("right")
        await pilot.pause()
        if view.settings == before:  # the first control was at its last option
            await pilot.press("left")
            await pilot.pause()
        assert view.settings != before
    if isinstance(view.screen.focused, ControlRow):
        await pilot.press("escape")  # out of the controls, so n moves on
        await pilot.pause()


@pytest.mark.long
@pytest.mark.parametrize("lesson_id", [item.lesson.id for item in discover().lessons])
async def test_walk_a_whole_lesson(lesson_id: str, tmp_path: Path, monkeypatch):
    original_init = RunPanel.__init__

    def quick_init(self, experiment, params=None, *, id=None):
        merged = {**(params or {}), **experiments.REGISTRY[experiment].quick}
        original_init(self, experiment, merged, id=id)

    monkeypatch.setattr(run_panel.RunPanel, "__init__", quick_init)

    grader = ScriptedGrader()
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine(), grader=grader)
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, HomeScreen)
        app.open_lesson(lesson_id)
        await pilot.pause()
        screen = app.screen
        lesson = screen.lesson
        hidden = []
        for index, step in enumerate(lesson.steps):
            assert screen.index == index
            where = await focus_in_view(pilot, screen)
            if where:
                hidden.append(f"{step.id}: {where}")
            view = screen.view
            if isinstance(view, PredictStepView):
                if isinstance(step.answer, ChoiceAnswer):
                    view.query_one("#choices", OptionList).focus()
                    await pilot.press("enter")  # lock the first option
                else:
                    box = view.query_one("#answer", Input)
                    box.focus()
                    box.value = "3"
                    await pilot.press("enter")
                await pilot.pause()
                assert app.progress.prediction(lesson.id, step.id) is not None
            elif isinstance(view, RunStepView):
                await run_and_wait(pilot, view.query_one(RunPanel))
                record = app.progress.latest_run(lesson_id=lesson.id, step_id=step.id)
                assert record is not None and record.status == "finished"
                for name in experiments.REGISTRY[step.experiment].metrics:
                    assert name in record.metrics, (step.experiment, name)
            elif isinstance(view, InstrumentStepView):
                await work_instrument(pilot, view, step)
            elif isinstance(view, CheckStepView):
                await answer_check(pilot, view, step)
                if step.verify is not None:
                    await run_and_wait(pilot, view.query_one("#verify", RunPanel))
            await pilot.press("n")
            await pilot.pause()
        assert not hidden, hidden
        # Past the last step: back home, every step done but the exercises (not run here).
        assert isinstance(app.screen, HomeScreen)
        exercises = {s.id for s in lesson.steps if isinstance(s, ExerciseStep)}
        assert app.progress.completed_steps(lesson.id) == {s.id for s in lesson.steps} - exercises
        assert grader.graded == []
