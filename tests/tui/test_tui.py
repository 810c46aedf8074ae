"""Pilot tests: walk a lesson as a learner would (predict, run, check wrong then right, resume)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest
from fakes import ScriptedEngine
from rich.console import Console
from textual.widgets import Input, OptionList, Static
from waiting import step_arrived, wait_for

from tutor import experiments
from tutor.ui.app import TutorApp
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.lesson import LessonScreen
from tutor.ui.widgets.check_step import CheckStepView
from tutor.ui.widgets.predict_step import PredictStepView
from tutor.ui.widgets.read_step import ReadStepView
from tutor.ui.widgets.run_panel import RunPanel
from tutor.ui.widgets.run_step import RunStepView

LESSONS = Path(__file__).parent / "tui_lessons"


def make_app(tmp_path: Path, *, real_engine: bool = False) -> TutorApp:
    """The demo lesson's app. Runs are scripted unless the test is about the engine path: then the
    real engine process trains for real."""
    return TutorApp(
        lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=None if real_engine else ScriptedEngine()
    )


def text_of(widget: Static) -> str:
    """The plain text a Static shows (whatever Rich renderable it holds)."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def open_demo(pilot, lesson_id: str = "tui-demo") -> LessonScreen:
    app = pilot.app
    assert isinstance(app.screen, HomeScreen)
    options = app.screen.query_one("#lessons", OptionList)
    ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
    options.highlighted = ids.index(lesson_id)
    await pilot.press("enter")
    await pilot.pause()
    assert isinstance(app.screen, LessonScreen)
    return app.screen


async def test_home_lists_lessons_and_detects_device(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        assert isinstance(app.screen, HomeScreen)
        await wait_for(pilot, lambda: "detecting" not in str(app.device_text))
        await pilot.pause()
        assert "cpu" in text_of(app.screen.query_one("#device", Static))
        options = app.screen.query_one("#lessons", OptionList)
        ids = [options.get_option_at_index(i).id for i in range(options.option_count)]
        assert "tui-demo" in ids


async def test_home_on_a_shared_gpu_shows_what_is_free_and_the_cap(tmp_path, monkeypatch):
    from tutor.experiments.devices import Device

    gib = 1 << 30
    h100 = Device(
        "cuda",
        0,
        "NVIDIA H100 80GB HBM3",
        total_memory=80 * gib,
        free_memory=50 * gib,
        capability=(9, 0),
        bf16=True,
        fp16=True,
        tensor_cores=True,
    )

    class SharedGpu(ScriptedEngine):
        def detect(self, requested):
            return [h100], h100, None

    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    app = TutorApp(home=tmp_path, engine=SharedGpu())
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "detecting" not in str(app.device_text))
        await pilot.pause()
        shown = " ".join(text_of(app.screen.query_one("#device", Static)).split())
        assert "50.0 of 80.0 GiB free (30.0 GiB held by other processes or the driver)" in shown
        assert "each run capped at 4,096 MiB (GPUTUTOR_GPU_MEMORY_MB)" in shown


async def test_walk_predict_run_check_and_resume(tmp_path):
    """The whole path with the real engine: a real run, its reveal, a real verify run."""
    app = make_app(tmp_path, real_engine=True)
    async with app.run_test(size=(110, 40)) as pilot:
        screen = await open_demo(pilot)
        assert isinstance(screen.view, ReadStepView)
        # The diff marks the changed lines: 2 on the left (model line + forward? no: only model line), 3 on the right.
        await pilot.press("n")
        await pilot.pause()
        view = screen.view
        assert isinstance(view, PredictStepView)

        # No skipping a prediction: its result must come after the guess.
        await pilot.press("escape")  # leave the option list
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(screen.view, PredictStepView)

        # Lock "above 80%".
        view.query_one("#choices", OptionList).focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        locked = app.progress.prediction("tui-demo", "guess-acc")
        assert locked is not None and locked.answer == "above 80%"
        assert "above 80%" in text_of(screen.view.query_one("#locked", Static))

        await pilot.press("n")
        await pilot.pause()
        run_view = screen.view
        assert isinstance(run_view, RunStepView)
        await pilot.press("r")
        panel = run_view.query_one(RunPanel)
        await wait_for(pilot, lambda: panel.state in ("finished", "failed"))
        assert panel.state == "finished", text_of(panel.query_one("#status", Static))
        assert 0.1 < panel.metrics["accuracy"] <= 1.0
        await wait_for(pilot, lambda: app.progress.latest_run(lesson_id="tui-demo", step_id="short-run"))
        reveal = text_of(panel.query_one("#reveal", Static))
        assert "above 80%" in reveal and "accuracy" in reveal
        # the reveal, the step's payoff, is scrolled into view
        await wait_for(pilot, lambda: screen.region.contains_region(panel.query_one("#reveal", Static).region))
        shown = panel.query_one("#reveal", Static).region
        assert shown.height > 0 and screen.region.contains_region(shown)
        record = app.progress.latest_run(lesson_id="tui-demo", step_id="short-run")
        assert record is not None and record.metrics["accuracy"] == panel.metrics["accuracy"]

        await pilot.press("n")
        await pilot.pause()
        check = screen.view
        assert isinstance(check, CheckStepView)
        box = check.query_one("#answer", Input)
        box.focus()
        box.value = "it makes training faster because the learning rate is bigger"
        await pilot.press("enter")
        await pilot.pause()
        feedback = text_of(check.query_one("#feedback", Static))
        assert "Not yet" in feedback and ("speed" in feedback.lower() or "learning rate" in feedback.lower())
        assert not check.solved

        box.value = "tiny gradients underflow to zero in float16, scaling keeps them representable"
        await pilot.press("enter")
        await pilot.pause()
        assert check.solved
        assert "Correct" in text_of(check.query_one("#feedback", Static))
        # Verify with a real run.
        await pilot.press("r")
        verify = check.query_one("#verify", RunPanel)
        await wait_for(pilot, lambda: verify.state in ("finished", "failed"))
        assert verify.state == "finished"
        assert verify.metrics["flushed_to_zero"] is True
        assert app.progress.position("tui-demo") == "why-scale"

    # Quit and come back: same place, prediction and answers intact.
    app2 = make_app(tmp_path, real_engine=True)
    async with app2.run_test(size=(110, 40)) as pilot:
        screen = await open_demo(pilot)
        assert isinstance(screen.view, CheckStepView)
        assert screen.view.solved
        await pilot.press("p", "p")
        await pilot.pause()
        assert isinstance(screen.view, PredictStepView)
        reveal = text_of(screen.view.query_one("#reveal", Static))
        assert "above 80%" in reveal


async def test_escape_cancels_a_run(tmp_path):
    from tutor.ui.widgets.run_panel import LiveLine

    app = make_app(tmp_path, real_engine=True)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        app.progress.lock_prediction("tui-demo", "guess-acc", "above 80%", None)
        screen.show_step(2)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        panel.params = {"epochs": 20, "batch_size": 16}  # long enough to still be running
        await pilot.press("r")
        live = panel.query_one("#live", LiveLine)
        await wait_for(pilot, lambda: live.text.plain.startswith("Running step"))  # a step has come
        await pilot.press("escape")
        t0 = time.monotonic()
        await wait_for(pilot, lambda: panel.state == "cancelled", timeout=30)
        assert time.monotonic() - t0 < 10  # from the escape; a loaded machine's bound (0.5 s is bench/cancel.py's)
        assert "Cancelled" in text_of(panel.query_one("#status", Static))
        assert app.progress.latest_run(lesson_id="tui-demo", step_id="short-run") is None
        await wait_for(pilot, lambda: not any(w.is_running for w in app.workers), timeout=5)
        # A cancelled thread worker stops counting as running at once, while its thread may
        # still be starting the next engine (a run cut off by force leaves one ready): wait for it.
        await wait_for(pilot, lambda: app.engine.pid is not None, timeout=10)
        engine_pid = app.engine.pid
    # Leaving the app leaves no experiment process behind.
    assert app.engine.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(engine_pid, 0)


async def test_usable_at_80x24(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_demo(pilot)
        for step in range(4):
            screen.show_step(step)
            await pilot.pause()
            hint = screen.query_one("#keys-hint", Static)
            assert hint.region.y < 24 and hint.region.width >= 78
            assert screen.query_one("#where", Static).region.y == 0


async def test_a_long_lesson_title_gives_way_in_the_header(tmp_path):
    """At 80 columns the header stays one row: the lesson title is shortened with an ellipsis
    so the step number and the step's title stay in view; wider, it is shown whole."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("gpu-lab")
        await pilot.pause()
        where = app.screen.query_one("#where", Static)
        shown = text_of(where).strip()
        assert "GPU Lab: speed" in shown and "…" in shown
        assert "step 1 of " in shown and "What this lab covers" in shown
        assert len(shown) <= 78 and where.region.height == 1
        await pilot.resize_terminal(140, 30)
        await pilot.pause()
        assert "GPU Lab: speed and memory you can measure  ·  step 1 of" in text_of(where)


async def test_every_built_in_step_title_is_read_whole_at_80_columns(tmp_path):
    """A step title too long to share the header's row with the lesson title and the step
    number gets a second row of its own: at 80x24 no built-in step's title is cut."""
    from tutor.course.catalog import builtin_lessons_dir
    from tutor.course.loader import load_file

    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        two_rows = 0
        for path in sorted(builtin_lessons_dir().glob("*.yaml")):
            lesson = load_file(path)
            app.open_lesson(lesson.id)
            await pilot.pause()
            screen = app.screen
            where = screen.query_one("#where", Static)
            for index, step in enumerate(lesson.steps):
                # The header alone (private): show_step would mount each of the ~200 steps, 38 s for 2.
                screen.index = index
                screen._update_header()
                shown = text_of(where)
                lines = shown.splitlines()
                assert len(lines) <= 2 and all(len(line) <= 78 for line in lines), shown
                title = (step.title or step.id).split(":", 1)[-1].strip()
                assert title in shown.replace("\n", " "), (lesson.id, step.id, shown)
                assert f"step {index + 1} of {len(lesson.steps)}" in lines[0]
                two_rows += len(lines) == 2
            app.pop_screen()
            await pilot.pause()
        assert two_rows  # some built-in titles are that long (devices' "Moving things, and the one rule ...")


async def test_home_keeps_the_summary_indent_when_it_wraps(tmp_path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        options = app.screen.query_one("#lessons", OptionList)
        console = Console(width=60, record=True, file=io.StringIO())
        console.print(options.get_option("gpu-lab").prompt)
        lines = console.export_text().splitlines()
        assert lines[0].startswith("GPU Lab")
        assert len(lines) >= 4 and all(line.startswith("  ") for line in lines[1:])


async def test_input_feedback_scrolls_into_view_at_80x24(tmp_path):
    """An unreadable prediction or a wrong check answer gets its message where the learner can
    see it, even when the step is taller than the screen."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("gpu-lab")
        await pilot.pause()
        screen = app.screen
        screen.show_step(screen.lesson.index("basics-predict"))
        await pilot.pause()
        box = screen.query_one("#answer", Input)
        box.value = "nnnnnn"
        await pilot.press("enter")
        feedback = screen.query_one("#feedback", Static)
        await wait_for(
            pilot,
            lambda: "couldn't read a number" in text_of(feedback) and screen.region.contains_region(feedback.region),
        )
        assert "couldn't read a number" in text_of(feedback)
        assert screen.region.contains_region(feedback.region) and feedback.region.height > 0
        assert app.progress.prediction("gpu-lab", "basics-predict") is None  # nothing locked

        screen.show_step(screen.lesson.index("check-sync"))
        await pilot.pause()
        box = screen.query_one("#answer", Input)
        box.focus()
        box.value = "the CPU timing is wrong"
        await pilot.press("enter")
        feedback = screen.query_one("#feedback", Static)
        await wait_for(pilot, lambda: "Not yet" in text_of(feedback) and screen.region.contains_region(feedback.region))
        assert "Not yet" in text_of(feedback)
        assert screen.region.contains_region(feedback.region) and feedback.region.height > 0


async def test_a_choice_check_says_to_choose_not_type(tmp_path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("gpu-lab")
        await pilot.pause()
        screen = app.screen
        screen.show_step(screen.lesson.index("check-tf32"))
        await wait_for(pilot, lambda: step_arrived(screen))
        screen.query_one("#choices", OptionList).focus()
        await wait_for(pilot, lambda: "choose" in text_of(screen.query_one("#keys-hint", Static)))
        hint = text_of(screen.query_one("#keys-hint", Static))
        assert "↑↓ or 1–" in hint and "choose" in hint and "type your answer" not in hint


async def test_a_key_pressed_again_does_not_stack_copies_of_its_message(tmp_path, notes):
    """n on an unlocked prediction says why not once; pressing it again while that shows adds nothing."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    said = notes(app)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("training-iron-law")
        await pilot.pause()
        screen = app.screen
        screen.show_step(screen.lesson.index("act1-predict"))
        await wait_for(pilot, lambda: step_arrived(screen))
        for _ in range(5):
            screen.action_next()
        await pilot.pause()  # whatever the five asked for is handled
        assert screen.index == screen.lesson.index("act1-predict")
        assert said.count("Lock in a prediction first (enter): the result comes after your guess, never before.") == 1


async def test_an_answer_step_arrives_with_its_answer_focused_so_enter_answers(tmp_path):
    """Once the step is drawn, the list has focus (nothing takes it back): the first enter locks."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("cpu-vs-gpu")
        await pilot.pause()
        screen = app.screen
        screen.show_step(screen.lesson.index("devices-predict"))
        await wait_for(pilot, lambda: step_arrived(screen))
        assert isinstance(screen.focused, OptionList) and screen.focused.id == "choices"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Your prediction" in text_of(screen.query_one("#locked", Static)))
        screen.show_step(screen.lesson.index("devices-run"))  # no answer here: the content scrolls
        await wait_for(pilot, lambda: step_arrived(screen))
        assert screen.focused is screen.query_one("#content")


async def test_home_at_80x24_keeps_the_device_in_view_and_the_list_scrolls(tmp_path):
    """Three lessons overflow 80x24: the list scrolls inside its box, the device line stays."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = app.screen
        lessons = screen.query_one("#lessons", OptionList)
        assert screen.region.contains_region(screen.query_one("#device", Static).region)
        assert lessons.region.bottom <= 22  # above the key hint and the footer
        lessons.focus()
        await pilot.press("end")
        await pilot.pause()
        assert lessons.highlighted == lessons.option_count - 1 and lessons.scroll_y > 0
        assert screen.region.contains_region(screen.query_one("#device", Static).region)


def test_a_words_prediction_is_revealed_once_and_not_scored():
    from tutor.course.loader import load_file
    from tutor.course.session import Evidence, Reveal
    from tutor.ui.widgets.reveal import reveal_text

    step = load_file(Path(__file__).resolve().parents[2] / "lessons" / "gpu-lab.yaml").step("oom-predict")
    message = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 41918464 bytes"
    shown = reveal_text(Reveal(step, "out of memory", Evidence({"error_message": message}, "measured"))).plain
    assert shown.count("41918464") == 1 and "out of memory" in shown and "Not scored" in shown


async def test_a_locked_progress_file_is_said_and_the_tutor_works_on(tmp_path, monkeypatch, notes):
    """Another program holds progress.db: the tutor starts anyway and says so; and when
    the file stops taking writes mid-session, the learner is told once and goes on."""
    import sqlite3

    import tutor.course.progress

    monkeypatch.setattr(tutor.course.progress, "WRITE_BUSY_MS", 50)
    db = tmp_path / "progress.db"
    app = make_app(tmp_path)
    said = notes(app)
    async with app.run_test(size=(100, 30)) as pilot:
        assert app.progress.warning is None
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another program starts a long write
        try:
            await open_demo(pilot)  # opening a lesson saves the position
            # said from the thread that found the file locked
            await wait_for(pilot, lambda: any("not be saved" in n and "locked" in n for n in said))
            assert app.progress.position("tui-demo") is not None  # kept, in memory
        finally:
            other.execute("ROLLBACK")
            other.close()

    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        app = make_app(tmp_path)
        said = notes(app)  # before the app starts: it says so as it starts
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, HomeScreen)
            assert any("locked by another program" in n for n in said), said
    finally:
        other.execute("ROLLBACK")
        other.close()


async def test_toasts_show_brackets_as_written(tmp_path):
    """A toast's text (a lesson title, a path, an error's words) is never read as markup."""
    import re

    app = make_app(tmp_path)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        app.notify("End of “Big [b]batch[/] [/]”. [link=x]y")

        def shown() -> str:
            return " ".join(re.findall(r">([^<]*)<", app.export_screenshot())).replace("&#160;", " ")

        await wait_for(pilot, lambda: "y" in shown() and "Big" in shown())  # the toast is drawn
        shown = shown()
        assert "Big [b]batch[/] [/]”. [link=x]y" in shown, shown[-2000:]


async def test_choice_options_show_brackets_as_written(tmp_path):
    """Option text such as "x[0]" or "[/]" is the lesson's words, not markup ("[/]" crashed)."""
    import re

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "b.yaml").write_text(
        "id: brackets\ntitle: Brackets\nsteps:\n"
        "  - id: q\n    kind: check\n    prompt: Which one?\n    answer:\n      type: choice\n"
        "      options:\n"
        '        - {text: "[b]bold[/b] and [/]", correct: true}\n'
        '        - {text: "torch.Size([64, 1, 28, 28])"}\n'
    )
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(100, 30)) as pilot:
        app.open_lesson("brackets")
        await pilot.pause()
        shown = " ".join(re.findall(r">([^<]*)<", app.export_screenshot())).replace("&#160;", " ")
        assert "[b]bold[/b] and [/]" in shown and "torch.Size([64, 1, 28, 28])" in shown, shown[-1500:]


async def test_home_device_note_keeps_its_indent_when_it_wraps(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "detecting" not in str(app.device_text))
        await pilot.pause()
        console = Console(width=60, record=True, file=io.StringIO())
        console.print(app.screen.query_one("#device", Static).content)
        lines = console.export_text().splitlines()
        assert lines[0].startswith("Device: ")
        assert len(lines) >= 3 and all(line.startswith("  ") for line in lines[1:]), lines


async def open_step(pilot, lesson_id: str, step_id: str) -> LessonScreen:
    app = pilot.app
    app.open_lesson(lesson_id)
    await pilot.pause()
    screen = app.screen
    screen.show_step(screen.lesson.index(step_id))
    await wait_for(pilot, lambda: step_arrived(screen))
    return screen


def typed_line(screen) -> str:
    return text_of(screen.query_one("#typed", Static))


async def test_a_bare_number_that_could_be_a_value_is_asked_about_before_it_locks(tmp_path):
    """Issue 35: '3' on 'about the same / 3 / 12 / 24 GB' is option 3 or 3 GB; asked, never guessed.
    Escape goes back with nothing locked; the option picked from the question is what locks."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_step(pilot, "training-iron-law", "act1-predict")
        await pilot.press("4")
        assert "option 4 or 4 GB?" in typed_line(screen)
        await pilot.press("enter")
        await pilot.pause()
        which = screen.query_one("#which", OptionList)
        assert which.display and app.focused is which
        assert "Which did you mean?" in typed_line(screen)
        await pilot.press("escape")  # back to the list, the line kept
        await pilot.pause()
        assert not which.display and "› 4" in typed_line(screen)
        assert isinstance(screen, LessonScreen) and app.screen is screen  # escape did not leave the lesson
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("enter")  # the first reading: option 4
        await wait_for(pilot, lambda: app.progress.prediction("training-iron-law", "act1-predict"))
        assert app.progress.prediction("training-iron-law", "act1-predict").answer == "about 24 GB"


async def test_a_value_typed_on_a_list_locks_the_option_it_is_in_once_seen(tmp_path):
    """Issue 35: '4x' meant the '1.5x to 5x' option, and its digit used to lock option 4 at once.
    Now the value is read against the options' ranges, and what will lock is shown first."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_step(pilot, "gpu-training", "hook-predict")
        await pilot.press("4", "x")
        assert "4x, which is in 'A few times faster (1.5x to 5x)'" in typed_line(screen)
        await pilot.press("enter")
        await pilot.pause()
        assert app.progress.prediction("gpu-training", "hook-predict") is None  # seen, not yet locked
        assert "Lock 'A few times faster (1.5x to 5x)'?" in typed_line(screen)
        await pilot.press("escape")  # takes back the question, keeps the line
        await pilot.pause()
        assert "› 4x" in typed_line(screen)
        await pilot.press("backspace", "backspace", "1", "2", "enter")
        await pilot.pause()
        assert "Lock '5x or more'?" in typed_line(screen)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.progress.prediction("gpu-training", "hook-predict"))
        assert app.progress.prediction("gpu-training", "hook-predict").answer == "5x or more"


async def test_words_typed_on_a_list_and_what_cannot_be_read(tmp_path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_step(pilot, "training-iron-law", "act1-predict")
        for key in "about 3":
            await pilot.press("space" if key == " " else key)
        await pilot.press("enter")
        await pilot.pause()
        assert "Lock 'about 3 GB'? ('about 3' reads as 3 GB)" in typed_line(screen)
        await pilot.press("escape", "escape")  # the question, then the line
        await pilot.pause()
        assert not screen.query_one("#typed", Static).display
        for key in "3ms":
            await pilot.press(key)
        await pilot.press("enter")
        await pilot.pause()
        assert "not a value these options can hold" in typed_line(screen)
        assert app.progress.prediction("training-iron-law", "act1-predict") is None


async def test_the_screens_keys_still_work_on_a_list_with_nothing_typed(tmp_path):
    """n, p, q are the screen's while nothing is typed; once a line is started they are letters."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_step(pilot, "training-iron-law", "act1-predict")
        here = screen.index
        await pilot.press("p")
        await pilot.pause()
        assert screen.index == here - 1


async def test_a_pick_with_the_arrows_locks_at_once(tmp_path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await open_step(pilot, "training-iron-law", "act1-predict")
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: app.progress.prediction("training-iron-law", "act1-predict"))
        assert app.progress.prediction("training-iron-law", "act1-predict").answer == "about 12 GB"


async def test_enter_never_moves_past_a_step_that_is_not_a_read_step(tmp_path):
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("training-iron-law")
        await pilot.pause()
        screen = app.screen
        ledger = screen.lesson.index("ledger")
        screen.show_step(ledger)
        await wait_for(pilot, lambda: step_arrived(screen))
        await pilot.press("enter")  # into the controls
        await pilot.press("enter", "enter")  # once too often: the calculator stays
        await pilot.pause()  # the keys are handled
        assert screen.index == ledger
        screen.show_step(screen.lesson.index("act1-predict"))
        await wait_for(pilot, lambda: step_arrived(screen))
        await pilot.press("enter", "enter")  # lock, then one enter too many
        await wait_for(pilot, lambda: app.progress.prediction("training-iron-law", "act1-predict"))
        await pilot.pause()
        assert screen.index == screen.lesson.index("act1-predict")
        screen.show_step(0)  # a read step: enter is how it moves on
        await wait_for(pilot, lambda: step_arrived(screen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.index == 1)


async def test_escape_leaves_a_lesson_only_when_pressed_twice(tmp_path, toasts):
    """After a right free-text answer the box closes; an escape meant for it must not leave."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        app.open_lesson("cpu-vs-gpu")
        await pilot.pause()
        screen = app.screen
        screen.show_step(screen.lesson.index("interview-cpu-gpu"))
        await wait_for(pilot, lambda: step_arrived(screen))
        box = screen.query_one("#answer", Input)
        box.value = (
            "A GPU has thousands of cores for parallel matrix multiplications; the model and the data "
            "must be moved to the device with .to(device); tiny models can be faster on the CPU."
        )
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.solved)
        await pilot.press("escape")
        await wait_for(pilot, lambda: any("escape again" in t for t in toasts(app)))  # told how to leave
        assert app.screen is screen  # still in the lesson
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, HomeScreen))
        await pilot.pause()  # the home screen's toasts are put up once it is shown
        # Its "press escape again" toast went with the lesson: on the home screen it told nothing.
        assert not [t for t in toasts(app) if "escape again" in t]


@pytest.mark.parametrize(
    "feedback,shown",
    [
        ("Right: 35%.", "35%."),  # after "✓ Correct." the grader's own "Right" said it twice
        ("Right.", ""),
        ("Not quite: 12 GB is the weights alone.", "12 GB is the weights alone."),
        ("No GPU is needed here.", "No GPU is needed here."),  # a sentence that starts with No keeps it
        ("Right, that one.", "Right, that one."),
    ],
)
def test_feedback_does_not_repeat_the_verdict_the_mark_gives(feedback, shown):
    from tutor.ui.widgets.answer_box import after_the_mark

    assert after_the_mark(feedback) == shown


@pytest.mark.parametrize("steps,charted", [(2, False), (8, True)])
async def test_a_loss_chart_of_too_few_points_is_said_not_drawn(tmp_path, steps, charted):
    from tutor.ui.widgets.run_panel import LiveLine

    app = TutorApp(home=tmp_path, lessons_dirs=[LESSONS], device="cpu", engine=ScriptedEngine(steps=steps, pace_s=0.25))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        app.progress.lock_prediction("tui-demo", "guess-acc", "above 80%", None)
        screen.show_step(2)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        await pilot.press("r")
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        assert panel.query_one("#loss").display is charted
        label = panel.query_one("#loss-label", LiveLine).text.plain
        assert ("too few to chart" in label) is not charted


async def test_the_ranks_of_a_distributed_run_share_one_chart(tmp_path):
    """Steps of "rank 0" and "rank 1" arrive interleaved: one chart of rank 0 that keeps its points
    (not a fresh chart at every change of label), rank 1's latest loss beside it."""
    from tutor.ui.widgets.run_panel import LiveLine

    engine = ScriptedEngine(steps=8, pace_s=0.25, ranks=2)
    app = TutorApp(home=tmp_path, lessons_dirs=[LESSONS], device="cpu", engine=engine)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        app.progress.lock_prediction("tui-demo", "guess-acc", "above 80%", None)
        screen.show_step(2)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        await pilot.press("r")
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        label = panel.query_one("#loss-label", LiveLine).text.plain
        assert label.startswith("loss [rank 0] 2.300 → 0.287") and "[rank 1] 1.28" in label, label
        assert panel.query_one("#loss").display is True and len(panel.query_one("#loss").data) >= 4


async def test_the_measured_table_speaks_in_words_and_units_not_python(tmp_path):
    """Was: `best_accuracy 0.97 …`, `checkpoint None`: a metric's name and Python values on screen."""
    measured = {
        "accuracy": 0.9712,
        "best_accuracy": 0.9712,
        "final_loss": 0.0931,
        "seconds_per_epoch": 12.34,
        "samples_per_s": 4862.0,
        "total_seconds": 12.34,
        "steps": 16,
        "amp_dtype": "off",
    }
    engine = ScriptedEngine(metrics={"train": measured})
    app = TutorApp(home=tmp_path, lessons_dirs=[LESSONS], device="cpu", engine=engine)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        app.progress.lock_prediction("tui-demo", "guess-acc", "above 80%", None)
        screen.show_step(2)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        await pilot.press("r")
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        table = next(s for s in panel.query(Static) if "result-table" in s.classes)
        console = Console(width=100, record=True, file=io.StringIO())
        console.print(table.content)
        shown = console.export_text()
        assert "test accuracy" in shown and "97.1%" in shown and "time per epoch" in shown
        assert "12.34 s" in shown and "4,862/s" in shown
        for raw in ("best_accuracy", "seconds_per_epoch", "None", "True", "False"):
            assert raw not in shown


def test_a_reveal_names_what_was_measured_in_words_not_its_metric_id(tmp_path):
    """Was: "measured: seconds_per_epoch = 2.5 s"."""
    from tutor.course.loader import load_text
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession, RunOutcome
    from tutor.ui.widgets.reveal import reveal_text

    lesson = load_text(
        "id: r\ntitle: R\nsteps:\n"
        "  - {id: guess, kind: predict, prompt: Seconds?, compare: seconds_per_epoch, unit: s,\n"
        "     answer: {type: number, unit: s}}\n"
        "  - {id: measure, kind: run, experiment: train}\n"
    )
    with Progress(tmp_path / "p.db") as progress:
        session = LessonSession(lesson, progress)
        session.lock(lesson.step("guess"), "3 s")
        metrics = {m: None for m in experiments.get("train").metrics} | {"seconds_per_epoch": 2.5}
        reveal = session.record_run(lesson.step("measure"), RunOutcome("train", {}, "finished", metrics, {}))[0]
        shown = reveal_text(reveal).plain
    assert "time per epoch: 2.5 s" in shown and "seconds_per_epoch" not in shown


def test_a_reveal_of_a_run_at_other_settings_says_not_scored_not_a_tick(tmp_path):
    """Issue 35: "✓ within 4%" of a run with batch_size=512, which the profile left unscored."""
    from tutor.course.loader import load_text
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession, RunOutcome
    from tutor.ui.widgets.reveal import reveal_text

    lesson = load_text(
        "id: r\ntitle: R\nsteps:\n"
        "  - {id: guess, kind: predict, prompt: Seconds?, compare: seconds_per_epoch, unit: s,\n"
        "     answer: {type: number, unit: s}}\n"
        "  - {id: measure, kind: run, experiment: train, params: {batch_size: 64},\n"
        "     tweak: {batch_size: [64, 512]}}\n"
    )
    with Progress(tmp_path / "p.db") as progress:
        session = LessonSession(lesson, progress)
        session.lock(lesson.step("guess"), "3 s")
        reveal = session.record_run(
            lesson.step("measure"), RunOutcome("train", {"batch_size": 512}, "finished", {"seconds_per_epoch": 2.9}, {})
        )[0]
        shown = reveal_text(reveal).plain
        on_the_step = reveal_text(session.reveal(lesson.step("guess"))).plain
    for text in (shown, on_the_step):
        assert "✓" not in text and "within" not in text
        assert "(with batch_size=512)" in text and "Not scored: the run was with batch_size=512" in text


@pytest.mark.parametrize(
    "measured,shown",
    [
        (None, "peak allocated: n/a off CUDA"),  # was "n/a": the metric says why
        (3 << 20, "peak allocated: 3.0 MiB (3,145,728 B)"),  # no unit on the step: the metric's own
    ],
)
def test_a_reveal_shows_the_value_in_the_metrics_unit_and_its_words_for_none(tmp_path, measured, shown):
    from tutor.course.loader import load_text
    from tutor.course.progress import Progress
    from tutor.course.session import LessonSession, RunOutcome
    from tutor.ui.widgets.reveal import reveal_text

    lesson = load_text(
        "id: r\ntitle: R\nsteps:\n"
        "  - {id: guess, kind: predict, prompt: Peak?, compare: peak_bytes,\n"
        "     answer: {type: text, reference: about the weights}}\n"
        "  - {id: measure, kind: run, experiment: memory-ledger}\n"
    )
    with Progress(tmp_path / "p.db") as progress:
        session = LessonSession(lesson, progress)
        session.lock(lesson.step("guess"), "a few MB")
        metrics = {m: None for m in experiments.get("memory-ledger").metrics} | {"peak_bytes": measured}
        reveal = session.record_run(lesson.step("measure"), RunOutcome("memory-ledger", {}, "finished", metrics, {}))[0]
        text = reveal_text(reveal).plain
    assert shown in text and "None" not in text and "peak_bytes" not in text


async def test_the_last_run_line_on_return_speaks_in_labels_and_units(tmp_path):
    """Was: `Your last run (...): accuracy: 0.97; checkpoint: None; ...`, on coming back to a step."""
    app = make_app(tmp_path)
    app.progress.record_run(
        experiment="train",
        params={},
        device={"name": "Test CPU"},
        status="finished",
        metrics={"accuracy": 0.9712, "checkpoint": None, "seconds_per_epoch": 12.34},
        lesson_id="tui-demo",
        step_id="short-run",
    )
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        screen.show_step(2)
        await pilot.pause()
        line = text_of(screen.view.query_one("#previous", Static))
    assert "on Test CPU): test accuracy: 97.1%; checkpoint file: none written; time per epoch: 12.34 s" in line
    for raw in ("None", "seconds_per_epoch", "0.9712"):
        assert raw not in line


async def test_a_measured_value_in_brackets_shows_as_it_is(tmp_path):
    """Was: a results table's "[64, 784]" and a measured "[bf16]" came out empty: Rich read them as markup."""
    from tutor.experiments.events import Table

    shapes = Table("shapes [per batch]", ["tensor", "[shape]"], [["x", "[64, 784]"], ["y", "[64]"]])
    engine = ScriptedEngine(metrics={"train": {"accuracy": 0.97, "amp_dtype": "[bf16]"}}, events={"train": [shapes]})
    app = TutorApp(home=tmp_path, lessons_dirs=[LESSONS], device="cpu", engine=engine)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await open_demo(pilot)
        app.progress.lock_prediction("tui-demo", "guess-acc", "above 80%", None)
        screen.show_step(2)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        await pilot.press("r")
        await wait_for(pilot, lambda: panel.state == "finished")
        await pilot.pause()
        shown = "\n".join(text_of(s) for s in panel.query(Static) if "result-table" in s.classes)
        for value in ("[bf16]", "shapes [per batch]", "[shape]", "[64, 784]", "[64]"):
            assert value in shown, shown


async def test_a_run_steps_settings_read_in_words_not_python(tmp_path):
    """Was: a header `(steps=30, …, pin_memory=False, amp=auto)` and a control `pin memory ‹ False ›`."""
    from tutor.ui.widgets.controls import ControlRow

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "s.yaml").write_text(
        "id: settings\ntitle: Settings\nsteps:\n"
        "  - id: measure\n    kind: run\n    experiment: pipeline-breakdown\n    params: {steps: 30}\n"
        "    tweak:\n      pin_memory: [false, true]\n      amp: [auto, 'off']\n"
    )
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("settings")
        await pilot.pause()
        view = app.screen.view
        header = text_of(view.query_one("#run-title", Static))
        assert "steps 30" in header and "pin memory off" in header and "amp auto" in header, header
        for raw in ("=", "False", "pin_memory"):
            assert raw not in header, header
        rows = {row.control.name: row.render().plain for row in view.query(ControlRow)}
        assert "‹ off ›" in rows["pin_memory"] and "False" not in rows["pin_memory"], rows
        await pilot.press("tab", "right")  # pin memory on: said so, in the header too
        await pilot.pause()
        assert "‹ on ›" in view.query(ControlRow).first().render().plain
        assert "pin memory on" in text_of(view.query_one("#run-title", Static))


@pytest.mark.parametrize(
    "kind,title,shown",
    [
        (
            "check",
            "Reflect: what mixed precision saves",
            "Reflect: what mixed precision saves",
        ),  # was "Check: Reflect: …"
        ("read", "Measure it: your loop by phase", "Measure it: your loop by phase"),  # was "Read: Measure it: …"
        ("check", "Check: why only rank 0 saves", "Check: why only rank 0 saves"),
        ("check", "why only rank 0 saves", "Check: why only rank 0 saves"),
    ],
)
async def test_a_step_title_with_its_own_lead_gets_no_second_one(tmp_path, kind, title, shown):
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    body = "    prompt: Why?\n    answer: {type: text, reference: because}\n" if kind == "check" else "    body: Hi.\n"
    (lessons / "t.yaml").write_text(
        f'id: titles\ntitle: T\nsteps:\n  - id: s\n    kind: {kind}\n    title: "{title}"\n{body}'
    )
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("titles")
        await pilot.pause()
        header = text_of(app.screen.query_one("#where", Static))
        assert header.rstrip().endswith("·  " + shown), header


async def test_a_word_typed_on_a_prediction_may_start_with_a_letter_the_screen_binds(tmp_path):
    """'runtime' on gpu-training's mismatch prediction: r is the screen's run key, which a prediction
    has no use for, so it starts the line (it had run nothing and left 'untime')."""
    app = TutorApp(home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_step(pilot, "gpu-training", "mismatch-predict")
        for key in "runtime":
            await pilot.press(key)
        assert "› runtime" in typed_line(screen) and "RuntimeError" in typed_line(screen)
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.progress.prediction("gpu-training", "mismatch-predict") is not None)
        assert app.progress.prediction("gpu-training", "mismatch-predict").answer == "RuntimeError"
