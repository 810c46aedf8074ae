"""Verdicts decided by the measurement, on screen (issue 37): a run whose interval straddles the
edge of the prediction grades nothing ("this machine can't tell yet"), says what else the
machine was doing, keeps the prediction locked, and r measures again; a quiet re-run then
grades the locked prediction against its interval. At 80x24."""

from __future__ import annotations

from pathlib import Path

from fakes import ScriptedEngine
from test_tui import open_demo, text_of
from textual.widgets import Input, Static
from waiting import wait_for

from tutor.ui.app import TutorApp
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.run_step import RunStepView

LESSON = """\
id: noise-demo
title: Timing with noise
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

WHY = "Other programs took 61% of this machine's 2 cores while it ran."
NOISY = {"ratio": 1.0, "ratio_low": 0.4, "ratio_high": 1.3, "noise_why": WHY}
QUIET = {
    "ratio": 1.0,
    "ratio_low": 0.97,
    "ratio_high": 1.03,
    "noise_why": "Nothing else was seen using the machine (other programs took 3% of the CPU): ...",
}


async def test_an_undecided_run_is_not_graded_says_why_and_r_measures_again(tmp_path: Path):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "noise-demo.yaml").write_text(LESSON, encoding="utf-8")
    engine = ScriptedEngine({"sync-timing": NOISY})
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=engine)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_demo(pilot, "noise-demo")
        box = screen.view.query_one("#answer", Input)
        box.focus()
        box.value = "1.0"  # 10% tolerance: 0.91x to 1.11x, which the noisy interval reaches across
        await pilot.press("enter")
        await pilot.pause()
        assert app.progress.prediction("noise-demo", "guess").answer == "1.0"

        await pilot.press("n")
        await pilot.pause()
        view = screen.view
        assert isinstance(view, RunStepView)
        panel = view.query_one(RunPanel)
        await pilot.press("r")
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        reveal = " ".join(text_of(panel.query_one("#reveal", Static)).split())
        assert "This machine can't tell yet" in reveal and "0.4x to 1.3x" in reveal
        assert WHY in reveal  # the run's own account of what else ran, not a guess
        assert "Run it again (r)" in reveal and "stays locked, and no try was used" in reveal
        assert "✓" not in reveal
        # the reveal is scrolled into view, even at 80x24
        await wait_for(pilot, lambda: screen.region.contains_region(panel.query_one("#reveal", Static).region))
        shown = panel.query_one("#reveal", Static).region
        assert shown.height > 0 and screen.region.contains_region(shown)

        # r, as offered: measured again, and this time quiet enough to grade.
        engine.metrics["sync-timing"] = QUIET
        await pilot.press("r")
        await wait_for(pilot, lambda: len(engine.runs) == 2 and panel.state == "finished")
        await pilot.pause()
        reveal = " ".join(text_of(panel.query_one("#reveal", Static)).split())
        assert "can't tell" not in reveal
        assert "✓" in reveal and "all of it within your tolerance" in reveal and "0.97x to 1.03x" in reveal
        assert app.progress.prediction("noise-demo", "guess").answer == "1.0"  # never unlocked
