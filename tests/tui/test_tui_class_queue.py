"""A run waiting its turn on a machine a class shares (measurement/slots.py), on screen at 80x24:
its place in line is shown, escape cancels it while it waits, and r (offered after a minute)
runs it now, the timing shared and the locked prediction not graded."""

from __future__ import annotations

from pathlib import Path

from fakes import ScriptedEngine
from test_tui import open_demo, text_of
from textual.widgets import Input, Static
from waiting import wait_for

from tutor.ui.app import TutorApp
from tutor.ui.widgets.run_panel import LiveLine, RunPanel
from tutor.ui.widgets.run_step import RunStepView

LESSON = """\
id: queue-demo
title: Timing on a shared machine
steps:
  - id: guess
    kind: predict
    prompt: How many times longer is the synchronised time?
    compare: ratio
    unit: x
    answer: {type: number, unit: x, min: 0, max: 1000}
  - id: measure
    kind: run
    experiment: sync-timing
"""

QUIET = {"ratio": 1.0, "ratio_low": 0.97, "ratio_high": 1.03}


async def test_a_waiting_run_shows_its_place_cancels_and_can_run_now_ungraded(tmp_path: Path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "queue-demo.yaml").write_text(LESSON, encoding="utf-8")
    engine = ScriptedEngine({"sync-timing": QUIET}, in_line=(1, 2))
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_demo(pilot, "queue-demo")
        box = screen.view.query_one("#answer", Input)
        box.focus()
        box.value = "1.0"
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        view = screen.view
        assert isinstance(view, RunStepView)
        panel = view.query_one(RunPanel)
        live = panel.query_one("#live", LiveLine)

        await pilot.press("r")
        await wait_for(pilot, lambda: panel.waiting is not None)
        await pilot.pause()
        assert "waiting for the CPU: 3 runs ahead of you (1 running, 2 waiting)" in live.text.plain
        assert "press r to run now" in " ".join(text_of(panel.query_one("#status", Static)).split())

        await pilot.press("escape")  # the learner's own cancel, while in line
        await wait_for(pilot, lambda: panel.state == "cancelled")
        assert app.progress.latest_run(experiment="sync-timing") is None  # nothing recorded

        await pilot.press("r")
        await wait_for(pilot, lambda: panel.waiting is not None)
        await pilot.press("r")  # run now: the timing shared
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        assert panel.metrics.get("timing_shared") is True
        reveal = " ".join(text_of(panel.query_one("#reveal", Static)).split())
        assert "Not graded" in reveal and "timed beside another learner's run" in reveal
        assert "✓" not in reveal and "✗" not in reveal
        assert app.progress.prediction("queue-demo", "guess").answer == "1.0"  # still locked
