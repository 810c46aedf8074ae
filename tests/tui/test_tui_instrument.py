"""Pilot tests of instrument steps and learner-switchable run settings (lesson training-iron-law)."""

from __future__ import annotations

import io
from pathlib import Path

from fakes import ScriptedEngine
from rich.console import Console
from textual.widgets import OptionList, Static
from waiting import wait_for

from tutor.ui.app import TutorApp
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.lesson import LessonScreen
from tutor.ui.widgets.controls import ControlRow
from tutor.ui.widgets.instrument_step import InstrumentStepView
from tutor.ui.widgets.predict_step import PredictStepView
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.run_step import RunStepView

LESSON = "training-iron-law"


def text_of(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def screen_text(app: TutorApp) -> str:
    return "\n".join(text_of(w) for w in app.screen.query(Static) if w.display)


async def open_at(pilot, step_id: str) -> LessonScreen:
    app = pilot.app
    app.progress.set_position(LESSON, step_id)
    app.open_lesson(LESSON)
    await pilot.pause()
    assert isinstance(app.screen, LessonScreen)
    # On a busy machine the step can still be mounting: an instrument has drawn once it has a reading.
    await wait_for(
        pilot,
        lambda: (
            (view := app.screen.view) is not None
            and view.is_mounted
            and (getattr(view, "locked", False) or getattr(view, "reading", True) is not None)
        ),
    )
    await pilot.pause()
    return app.screen


def lock_predictions_before(app: TutorApp, step_id: str) -> None:
    """Every prediction that keeps `step_id` locked, locked (whatever predict steps the lesson adds)."""
    lesson = app.catalog.get(LESSON).lesson
    for step in lesson.predictions_before(lesson.index(step_id)):
        app.progress.lock_prediction(LESSON, step.id, "35", 35.0)


async def lock_choice(pilot, index: int) -> None:
    view = pilot.app.screen.view
    assert isinstance(view, PredictStepView)
    choices = view.query_one("#choices", OptionList)
    choices.focus()
    choices.highlighted = index
    await pilot.press("enter")
    await pilot.pause()


async def test_instrument_is_locked_until_the_acts_prediction(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_at(pilot, "ledger")
        view = screen.view
        assert isinstance(view, InstrumentStepView) and view.locked
        assert not list(view.query(ControlRow))  # nothing computed, nothing to give the answer away
        assert "Locked until you commit to a prediction" in screen_text(app)
        assert "12.0 GB" not in screen_text(app)
        await pilot.press("p")
        await pilot.pause()
        await lock_choice(pilot, 1)  # "about 3 GB"
        await pilot.press("n")
        await pilot.pause()
        view = screen.view
        assert isinstance(view, InstrumentStepView) and not view.locked
        reveal = text_of(view.query_one("#reveal", Static))
        assert "about 3 GB" in reveal and "12 GB" in reveal
        assert "4x what you guessed" in reveal  # the ratio, as the issue asks


async def test_controls_recompute_record_and_restore(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "ledger")
        view = screen.view
        assert isinstance(view, InstrumentStepView)
        assert not isinstance(app.focused, ControlRow)  # arriving moves nothing: ← → still change steps
        assert "Out of memory in the forward pass" in text_of(view.query_one("#reading", Static))
        assert app.progress.count_moves(LESSON, "ledger") == 0
        await pilot.press("enter")  # into the controls
        assert isinstance(app.focused, ControlRow) and app.focused.control.name == "model"
        await pilot.press("down", "left", "left")  # optimizer: Adam -> momentum -> SGD
        await pilot.pause()
        assert view.settings["optimizer"] == "sgd"
        assert view.reading.outputs["static_gb"] == 12.0
        assert "Fits: 79.7 GB" in text_of(view.query_one("#reading", Static))
        assert LESSON and "ledger" in app.progress.completed_steps(LESSON)
        moves = app.progress.moves(LESSON, "ledger")
        assert [m.settings["optimizer"] for m in moves] == ["momentum", "sgd"]  # the learner's moves only
        assert moves[-1].settings["optimizer"] == "sgd" and moves[-1].outputs["static_gb"] == 12.0

        await pilot.press("m")  # the formulas, with these numbers in them
        await pilot.pause()
        math = view.query_one("#math", Static)
        assert math.display and "N x 4 B = 6.00 GB" in text_of(math)

        await pilot.press("escape", "n")  # leave and come back: the setting is where it was
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        view = screen.view
        assert isinstance(view, InstrumentStepView) and view.settings["optimizer"] == "sgd"
        assert not view.query_one("#math", Static).display


async def test_laptop_challenge_needs_the_static_floor_under_budget(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_at(pilot, "challenge")
        view = screen.view
        assert isinstance(view, InstrumentStepView)
        fixed = {r.control.name for r in view.query(ControlRow) if r.fixed}
        assert fixed == {"model", "budget", "parallel", "gpus"}  # one GPU: this lesson's challenge
        shown = [r.control.name for r in view.query(ControlRow) if r.display]
        assert "parallel" in shown and "gpus" not in shown  # GPUs mean nothing on one GPU: hidden
        await pilot.press("enter")
        assert app.focused.control.name == "optimizer"  # fixed rows take no focus
        reading = text_of(view.query_one("#reading", Static))
        assert "Out of memory before the first batch: the static floor is 24.0 GB" in reading
        assert "not met yet" in text_of(view.query_one("#goal", Static))
        await pilot.press("right")  # fixed model cannot be moved; optimizer is already Adam (the end)
        await pilot.press("left", "left", "down", "right")  # SGD, pure FP16: 6 GB floor, activations too big
        await pilot.pause()
        assert view.reading.outputs["breaks"] == "activations"
        assert LESSON and "challenge" not in app.progress.completed_steps(LESSON)
        await pilot.press("down", "down", "space")  # checkpointing on
        await pilot.pause()
        assert view.reading.outputs["fits"] is True
        goal = text_of(view.query_one("#goal", Static))
        assert "Challenge met" in goal
        assert "challenge" in app.progress.completed_steps(LESSON)
        notes = text_of(view.query_one("#reading", Static))
        assert "no FP32 master copy" in notes  # the fit is not a recipe


async def test_ledger_gpus_row_appears_once_training_is_spread_over_gpus(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "ledger")
        view = screen.view
        assert isinstance(view, InstrumentStepView)

        def shown() -> list[str]:
            return [r.control.name for r in view.query(ControlRow) if r.display]

        assert shown() == [
            "model",
            "optimizer",
            "precision",
            "batch",
            "checkpointing",
            "parallel",
            "budget",
            "switch_off",
        ]
        await pilot.press("enter", *["down"] * 5)  # model ... checkpointing, then Parallelism
        assert app.focused.control.name == "parallel"
        await pilot.press("right")  # DDP
        await pilot.pause()
        assert "gpus" in shown()
        await pilot.press("down", "right", "right", "right")  # GPUs 1 -> 8
        await pilot.pause()
        assert view.settings["parallel"] == "ddp" and view.settings["gpus"] == 8
        reading = text_of(view.query_one("#reading", Static))
        assert "per GPU" in reading and "global batch 32 = 8 GPUs x 4 per GPU" in reading
        await pilot.press("up", "right", "right", "right")  # ZeRO-3
        await pilot.pause()
        assert view.reading.outputs["weights_bytes"] == 6e9 / 8
        assert "gathered weights" in text_of(view.query_one("#reading", Static))
        await pilot.press("left", "left", "left", "left")  # back to one GPU: GPUs hidden again
        await pilot.pause()
        assert view.settings["parallel"] == "single" and "gpus" not in shown()
        assert view.reading.outputs["static_bytes"] == 24e9


async def test_prediction_step_reveals_against_the_instrument_once_it_was_used(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act2-predict", "90", 90.0)
        screen = await open_at(pilot, "act2-predict")
        assert "work it out" in text_of(screen.view.query_one("#reveal", Static))
        app.progress.complete_step(LESSON, "pipeline")
        await pilot.press("n", "p")
        await pilot.pause()
        reveal = text_of(screen.view.query_one("#reveal", Static))
        assert "computed" in reveal and "58.3%" in reveal and "prefetching on" in reveal


async def test_run_step_settings_switch_and_are_remembered(tmp_path: Path, monkeypatch):
    started = []
    monkeypatch.setattr(RunPanel, "start", lambda self, device=None: started.append(dict(self.params)))
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "mfu-predict", "1", 1.0)
        lock_predictions_before(app, "mfu-measure")  # and any other predict step the run reveals
        screen = await open_at(pilot, "mfu-measure")
        view = screen.view
        assert isinstance(view, RunStepView)
        rows = list(view.query(ControlRow))
        assert [r.control.name for r in rows] == [
            "model",
            "data_path",
            "num_workers",
            "pin_memory",
            "amp",
            "batch_size",
        ]
        assert app.focused is not rows[0]
        await pilot.press("tab")
        assert app.focused is rows[0]
        await pilot.press("right", "down", "down", "down", "down", "right")  # wide model, amp auto
        await pilot.press("r")
        await pilot.pause()
        assert started and started[-1]["model"] == "wide" and started[-1]["amp"] == "auto"
        assert started[-1]["steps"] == 30  # the step's own params stay
        title = text_of(view.query_one("#run-title", Static))
        assert "model wide" in title and "amp auto" in title
        # The learner's last run's settings come back with the step.
        app.progress.record_run(
            experiment="pipeline-breakdown",
            params=started[-1],
            device={},
            metrics={},
            status="failed",
            lesson_id=LESSON,
            step_id="mfu-measure",
        )
        await pilot.press("escape", "p", "n")
        await pilot.pause()
        assert {r.control.name: r.value for r in screen.view.query(ControlRow)}["model"] == "wide"


async def test_home_to_instrument_at_80x24_shows_controls_and_chart_together(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        assert isinstance(app.screen, HomeScreen)
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "ledger")
        await pilot.press("enter", "down", "left")
        await pilot.pause()
        content = screen.query_one("#content")
        controls = screen.view.query_one("#controls")
        reading = screen.view.query_one("#reading")
        # After a change the controls sit at the top and the verdict + chart right below them.
        assert controls.region.y >= content.region.y
        assert reading.region.y < content.region.bottom


async def test_my_model_against_this_machine_once_the_device_is_known(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        # what the lesson's memory-ledger run records (width 1024, batch 64)
        app.progress.record_run(
            experiment="memory-ledger",
            params={"width": 1024, "batch_size": 64},
            device={"name": "cpu"},
            metrics={"parameters": 3_148_800, "activation_bytes": 1_048_576},
            status="finished",
            lesson_id=LESSON,
            step_id="measure",
        )
        screen = await open_at(pilot, "your-model")
        view = screen.view
        assert isinstance(view, InstrumentStepView)
        assert view.reading.outputs["parameters"] == 3_148_800
        await wait_for(pilot, lambda: app.device is not None)  # the engine process loads torch to detect it
        await pilot.pause()
        assert view.reading.outputs["budget_bytes"] and view.reading.outputs["fits"] is True
        assert "this machine: " in text_of(view.query_one("#reading", Static))
        assert "3 x 1024 wide" in text_of(view.query_one("#reading", Static))


async def test_arrows_move_between_steps_until_enter_picks_a_control(tmp_path: Path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "act1-why")
        await pilot.press("left")  # onto the ledger...
        await pilot.pause()
        assert isinstance(screen.view, InstrumentStepView)
        await pilot.press("left")  # ...and past it: nothing changed on the way
        await pilot.pause()
        assert screen.lesson.steps[screen.index].id == "act1-predict"
        assert app.progress.count_moves(LESSON, "ledger") == 0


async def test_a_goal_met_earlier_is_done_when_the_learner_comes_back(tmp_path: Path):
    from tutor.instruments import REGISTRY

    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        inst = REGISTRY["memory-ledger"]
        fit = inst.settings(
            {
                "model": "gpt2-xl",
                "budget": "laptop",
                "optimizer": "sgd",
                "precision": "fp16",
                "batch": 1,
                "checkpointing": True,
            }
        )
        app.progress.record_move(LESSON, "challenge", inst.name, fit, inst.compute(fit).outputs)
        screen = await open_at(pilot, "challenge")
        await pilot.pause()
        assert screen.view.settings["precision"] == "fp16"  # restored
        assert "challenge" in app.progress.completed_steps(LESSON)
        assert "Challenge met" in text_of(screen.view.query_one("#goal", Static))


async def test_at_80x24_each_instrument_figure_says_what_it_is_against(tmp_path: Path):
    """Issue 35: "Adam adds 12.0 GB over SGD" with SGD + momentum selected; "▲ chapter base 45%"
    under a baseline gauge at 28%, with nothing said between."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "ledger")
        await pilot.press("enter", "down", "left")  # optimizer: Adam -> SGD + momentum
        await pilot.pause()
        assert screen.view.settings["optimizer"] == "momentum"
        reading = " ".join(text_of(screen.view.query_one("#reading", Static)).split())
        assert "Adam adds" not in reading
        assert "Adam instead would add 6.00 GB to this SGD + momentum (12.0 GB over plain SGD)" in reading

        lock_predictions_before(app, "pipeline")
        screen = await open_at(pilot, "pipeline")
        reading = " ".join(text_of(screen.view.query_one("#reading", Static)).split())
        assert "▲ chapter's claim, base 45%" in reading and "chapter base 45%" not in reading
        assert "its baseline's 35% computing gives 28% (the gauge at the baseline settings), not 45%" in reading
        assert screen.view.query_one("#reading", Static).region.right <= 80


async def test_at_80x24_a_part_switched_off_leaves_the_bar_and_the_verdict_stays(tmp_path: Path):
    """Issue 38 (004-06): m and v are two bars, and switching one off shortens the bar by its bytes
    while the verdict still counts it; the rows a model does not use (ResNet-50's batch) hide."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.progress.lock_prediction(LESSON, "act1-predict", "about 12 GB", None)
        screen = await open_at(pilot, "ledger")
        view = screen.view
        assert isinstance(view, InstrumentStepView)
        verdict = view.reading.verdict
        await pilot.press("enter", *["down"] * 7, *["right"] * 5)  # Switch off: v (exp_avg_sq)
        await pilot.pause()
        assert app.focused.control.name == "switch_off" and view.settings["switch_off"] == "v"
        reading = " ".join(text_of(view.query_one("#reading", Static)).split())
        assert "□ v exp_avg_sq 6.00 GB off" in reading and "■ m exp_avg 6.00 GB" in reading
        assert "the bar shows 85.7 GB of 91.7 GB" in reading
        assert view.reading.verdict == verdict  # training keeps v: still out of memory
        await pilot.press(*["up"] * 7, *["left"] * 5)  # Model: GPT-2 XL -> ResNet-50
        await pilot.pause()
        assert view.settings["model"] == "resnet50"
        shown = [r.control.name for r in view.query(ControlRow) if r.display]
        assert "batch" not in shown and "checkpointing" not in shown
        assert "Activations not counted" in view.reading.verdict


async def test_at_80x24_the_price_moves_the_cost_in_the_verdict(tmp_path: Path):
    """Issue 38 (002-02, 002-44, 002-46): the pipeline prices its Iron Law hours, in the verdict, which
    stays on screen beside the controls."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        lock_predictions_before(app, "pipeline")
        screen = await open_at(pilot, "pipeline")
        view = screen.view
        assert isinstance(view, InstrumentStepView)
        hours = view.reading.outputs["hours_per_billion_tokens"]
        await pilot.press("enter", *["down"] * 5, "right")  # Price: $2.00 -> $3.00
        await pilot.pause()
        assert app.focused.control.name == "price" and view.settings["price"] == 3.0
        assert view.reading.outputs["cost_per_billion_tokens"] == 3.0 * hours
        assert f"${3.0 * hours:,.2f}" in view.reading.verdict
        assert isinstance(app.focused, ControlRow) and "$3.00 per GPU-hour" in app.focused.render().plain
        reading = view.query_one("#reading", Static).region
        assert reading.right <= 80 and 0 < reading.y <= 24 - 2 - 3  # the verdict above the keys lines
