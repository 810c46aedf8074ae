"""Pilot test of the exercise step: run the starter (it fails, the line is marked), fix it, pass;
the code is saved as typed and is there after a restart."""

from __future__ import annotations

from pathlib import Path

from fakes import ScriptedEngine
from test_tui import text_of
from textual.widgets import Static, TextArea
from waiting import wait_for as _wait_for

from tutor.ui.app import TutorApp
from tutor.ui.widgets.exercise_step import ExerciseStepView

LESSONS = Path(__file__).parent / "tui_exercise_lessons"


async def wait_for(pilot, condition, timeout: float = 90.0) -> None:
    """A real sandbox run: a loaded CI machine gets more time than test_tui's screens."""
    await _wait_for(pilot, condition, timeout)


async def test_fix_the_starter_and_pass(tmp_path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        assert isinstance(view, ExerciseStepView)
        editor = view.query_one("#editor", TextArea)
        assert "____" in editor.text and app.focused is not editor  # instructions first
        await pilot.press("enter")  # into the editor
        assert app.focused is editor

        await pilot.press("ctrl+r")  # the starter still has its blank: NameError
        await wait_for(pilot, lambda: not view.running and text_of(view.query_one("#results", Static)))
        results = text_of(view.query_one("#results", Static))
        assert "· total reported: not checked" in results  # the crash stopped it before report()
        assert ">>" in results and "NameError" in results
        assert not view.passed

        editor.load_text(view.step.solution)
        await wait_for(pilot, lambda: app.progress.draft("ex-demo", "ex-sum") == view.step.solution)  # autosaved
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: view.passed or (not view.running and "✗" in text_of(view.query_one("#results", Static)))
        )
        assert view.passed, text_of(view.query_one("#results", Static))
        # the step is marked done when the screen handles the view's Completed message
        await wait_for(pilot, lambda: "ex-sum" in app.progress.completed_steps("ex-demo"), timeout=10)

    app2 = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app2.run_test(size=(80, 24)) as pilot:
        app2.open_lesson("ex-demo")
        await pilot.pause()
        view = app2.screen.view
        assert view.query_one("#editor", TextArea).text == view.step.solution
        assert view.passed


async def start_program(pilot, code: str, marker: str) -> ExerciseStepView:
    """Open the demo exercise, type `code` into the editor, run it, wait until it prints `marker`."""
    pilot.app.open_lesson("ex-demo")
    await pilot.pause()
    view = pilot.app.screen.view
    await pilot.press("enter")
    view.query_one("#editor", TextArea).load_text(code)
    await pilot.press("ctrl+r")
    await wait_for(pilot, lambda: marker in "".join(str(line) for line in view.query_one("#output").lines))
    return view


async def test_escape_stops_a_program_started_from_the_editor(tmp_path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        view = await start_program(
            pilot, "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.1)\n", "started"
        )
        assert view.running and not isinstance(app.focused, TextArea)  # the editor is read-only meanwhile
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=20)
        assert not view.passed and isinstance(app.focused, TextArea)
        assert "the run was stopped" in text_of(view.query_one("#exercise-status", Static))


async def test_keys_work_while_the_learners_program_runs(tmp_path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        view = await start_program(
            pilot, "print('busy', flush=True)\nwhile True:\n    sum(range(10**6))\n", "busy"
        )  # burns a core
        await pilot.press("escape")  # stops it; pressing h then shows the hint at once
        await wait_for(pilot, lambda: not view.running, timeout=20)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: view.running)
        app.screen.query_one("#content").focus()
        await pilot.press("h")  # handled while the program still runs
        await wait_for(pilot, lambda: "sum(range(1, 11))" in text_of(view.query_one("#hint", Static)))
        assert view.running
        assert "sum(range(1, 11))" in text_of(view.query_one("#hint", Static))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=20)


EDITOR_CODE_COLUMNS = 69  # what the lessons' code lines are held to (tests/exercises/test_lesson_practice.py)


async def test_editor_shows_69_columns_of_code_at_80_wide(tmp_path):
    # Code that fits needs no sideways scrolling: border, gutter, scrollbars and the cursor's
    # column leave 69 of the 80 for the text.
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        editor = app.screen.view.query_one("#editor", TextArea)
        editor.load_text("x" * EDITOR_CODE_COLUMNS + "\n" + "y = 1\n" * 30)
        await pilot.pause()
        visible = editor.scrollable_content_region.width - editor.gutter_width - 1  # 1: the cursor
        assert visible >= EDITOR_CODE_COLUMNS
        assert editor.max_scroll_x == 0  # so no horizontal scrollbar takes a row


async def test_editor_keeps_python_indentation(tmp_path):
    from tutor.ui.widgets.code_editor import CodeEditor

    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        editor = app.screen.view.query_one("#editor", CodeEditor)
        editor.load_text("def train(loader):  # one epoch\n")
        editor.focus()
        editor.move_cursor((0, len(editor.document[0])))
        await pilot.press("enter", *"for x in loader:", "enter", *"step(x)", "enter")
        assert editor.text == "def train(loader):  # one epoch\n    for x in loader:\n        step(x)\n        \n"
        await pilot.press("backspace", *"done()")  # one level back, not one space
        assert editor.document[3] == "    done()"
        await pilot.press("home", "backspace")  # home stops at the code: one more level back
        assert editor.document[3] == "done()"
        await pilot.press("backspace")  # at column 0: joins the lines, as TextArea does
        assert editor.document[2] == "        step(x)done()"
        await pilot.press("ctrl+z")  # the edits undo like any other
        assert editor.document[3] == "done()"
        editor.load_text("    torch.save({")
        editor.move_cursor((0, len(editor.document[0])))
        await pilot.press("enter", *'"epoch": 1,', "enter")
        assert editor.text == '    torch.save({\n        "epoch": 1,\n        '


async def test_a_key_in_the_editor_brings_it_back_into_view(tmp_path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        editor = view.query_one("#editor", TextArea)
        await pilot.press("enter")  # into the editor
        container = app.screen.query_one("#content")
        await pilot.press("ctrl+r")  # the starter fails at once; its results scroll into view
        await wait_for(pilot, lambda: not view.running and view.query_one("#results").display)
        await wait_for(pilot, lambda: not container.region.contains_region(editor.region))  # scrolled to them
        await pilot.press("up")
        await pilot.pause()
        assert container.region.contains_region(editor.region)


async def test_the_code_is_read_only_while_it_runs(tmp_path):
    from tutor.ui.screens.help import HelpScreen

    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        code = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
        view = await start_program(pilot, code, "started")
        editor = view.query_one("#editor", TextArea)
        await pilot.press("x", "question_mark")  # x is ignored; ? opens the help, not the code
        await pilot.pause()
        assert editor.text == code and isinstance(app.screen, HelpScreen)
        await pilot.press("escape")  # closes the help; the program runs on, its output in view
        await pilot.pause()
        assert view.running
        content = app.screen.query_one("#content")
        assert content.region.contains_region(view.query_one("#exercise-status").region)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=20)
        assert not editor.read_only
        # back where the learner was: focus() moves it on the app's next turn, not at once
        await wait_for(pilot, lambda: app.focused is editor, timeout=5)


# ---------------------------------------------------------------- the learner's own editor


def _fake_editor(tmp_path: Path, code: str) -> Path:
    """An $EDITOR that records the path it was given and saves `code` into it, by rename."""
    script = tmp_path / "fake-editor"
    script.write_text(
        "#!/usr/bin/env python3\n"
        "import os, sys\n"
        f"open({str(tmp_path / 'editor-args')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
        "path = sys.argv[-1]\n"
        f"open(path + '.new', 'w').write({code!r})\n"
        "os.replace(path + '.new', path)\n"
    )
    script.chmod(0o755)
    return script


async def test_e_opens_the_file_in_the_learners_editor_and_its_save_is_graded(tmp_path, monkeypatch):
    from contextlib import nullcontext

    from fakes import ScriptedGrader

    grader = ScriptedGrader()
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path / "home", device="cpu", engine=ScriptedEngine(), grader=grader)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        path = view.session.code_file(view.step)
        assert path == tmp_path / "home" / "code" / "ex-demo" / "ex-sum.py"
        assert path.read_text() == view.step.starter  # there for any editor before the first keystroke
        assert str(path.name) in text_of(view.query_one("#code-file", Static))

        monkeypatch.setenv("VISUAL", f"{_fake_editor(tmp_path, view.step.solution)} --wait")
        # Pilot's headless terminal cannot suspend; a real one hands the screen to the editor here.
        monkeypatch.setattr(app, "suspend", nullcontext)
        await pilot.press("e")
        assert (tmp_path / "editor-args").read_text() == f"--wait {path}"
        await wait_for(pilot, lambda: view.passed)
        assert grader.graded == [view.step.solution]
        assert view.query_one("#editor", TextArea).text == view.step.solution
        assert app.progress.draft("ex-demo", "ex-sum") == view.step.solution


async def test_a_save_from_another_editor_while_the_step_is_shown_is_graded(tmp_path, monkeypatch):
    """A second SSH pane's editor saves by rename: the tutor loads the code and grades it; its own
    autosaves are never mistaken for such a save."""
    from fakes import ScriptedGrader

    from tutor.course.workspace import FileWatch

    polls = []  # the file watcher's looks at the file
    look = FileWatch.poll
    monkeypatch.setattr(FileWatch, "poll", lambda watch: polls.append(None) or look(watch))
    grader = ScriptedGrader()
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine(), grader=grader)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        path = view.session.code_file(view.step)
        await pilot.press("enter")
        view.query_one("#editor", TextArea).load_text("total = 0  # typed in the tutor\n")
        await wait_for(pilot, lambda: path.read_text() == "total = 0  # typed in the tutor\n")  # autosaved
        looked = len(polls)
        await wait_for(pilot, lambda: len(polls) > looked)  # and the watcher has looked at the file since
        await pilot.pause()
        assert grader.graded == [] and not view.running

        (path.parent / "ex-sum.py.swp").write_text("swap")
        tmp = path.with_name("ex-sum.py.tmp")
        tmp.write_text("wrong = 1\n")
        tmp.replace(path)
        await wait_for(pilot, lambda: grader.graded == ["wrong = 1\n"] and not view.running, timeout=10)
        assert "✗" in text_of(view.query_one("#exercise-status", Static))
        assert view.query_one("#editor", TextArea).text == "wrong = 1\n"


async def test_without_an_editor_set_e_says_where_the_file_is(tmp_path, monkeypatch):
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        await pilot.press("e")
        status = text_of(app.screen.view.query_one("#exercise-status", Static))
        assert "No $VISUAL or $EDITOR is set" in status and "ex-sum.py" in status


async def test_reset_keeps_a_copy_of_the_code_it_replaces(tmp_path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("enter")
        view.query_one("#editor", TextArea).load_text("my long work\n")
        await pilot.press("ctrl+o", "ctrl+o")
        await pilot.pause()
        assert view.query_one("#editor", TextArea).text == view.step.starter
        copies = list(view.session.code_file(view.step).parent.glob("ex-sum.before-reset-*.py"))
        assert [c.read_text() for c in copies] == ["my long work\n"]
        assert "kept in" in text_of(view.query_one("#exercise-status", Static))


async def test_requirements_are_named_by_their_titles_not_their_ids(tmp_path):
    """Was: "✗ each-rank-its-share: …", "met: process-group": the lesson's ids on screen."""
    from fakes import ScriptedGrader

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "r.yaml").write_text(
        "id: reqs\ntitle: R\nsteps:\n  - id: ex\n    kind: exercise\n    starter: 'x = 1'\n"
        "    solution: 'x = 2'\n    requirements:\n"
        "      - {type: output, id: process-group, pattern: a, feedback: Join the group.}\n"
        "      - {type: output, id: each-rank-its-share, title: Each rank trains on its own share, pattern: b,\n"
        "         feedback: Give each rank its own share.}\n"
    )
    app = TutorApp(
        lessons_dirs=[lessons], home=tmp_path, device="cpu", engine=ScriptedEngine(), grader=ScriptedGrader()
    )
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("reqs")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: not view.running and text_of(view.query_one("#results", Static)))
        shown = text_of(view.query_one("#results", Static)) + text_of(view.query_one("#exercise-status", Static))
        assert "✗ process group: not met" in shown and "✗ Each rank trains on its own share: not met" in shown
        assert "each-rank-its-share" not in shown and "process-group" not in shown, shown


async def test_program_output_wraps_inside_its_box_at_80x24(tmp_path):
    """Was: the torchrun line "… 2 processes, ranks 0 to 1]" read "ranks" then "1]": the output
    was wrapped at 78 columns and its box, narrower at 80, cut the rest of each row off."""
    from fakes import ScriptedGrader
    from textual.widgets import RichLog

    launch = "[torchrun --standalone --nproc_per_node=2 solution.py: 2 processes, ranks 0 to 1]"

    class LaunchingGrader(ScriptedGrader):
        def __call__(self, step, code, workdir, *, on_output=None, **kw):
            on_output(launch + "\n")
            return super().__call__(step, code, workdir, on_output=on_output, **kw)

    app = TutorApp(
        lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine(), grader=LaunchingGrader()
    )
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: not view.running and text_of(view.query_one("#results", Static)))
        log = view.query_one("#output", RichLog)
        rows = [line.text for line in log.lines]
        room = log.scrollable_content_region.width
        assert all(len(row.rstrip()) <= room for row in rows), (room, rows)
        assert launch in " ".join(row.strip() for row in rows), rows


async def test_opening_an_exercise_warms_its_sandbox_and_a_scripted_grader_is_left_alone(tmp_path, monkeypatch):
    import tutor.ui.app as app_module

    warmed = []
    monkeypatch.setattr(app_module, "_warm_sandbox", lambda step, workdir: warmed.append((step.id, workdir)))
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("ex-demo")
        await wait_for(pilot, lambda: warmed)
        view = app.screen.view
        assert warmed == [("ex-sum", view.workdir)]  # where its runs will go: the same fork server

    warmed.clear()
    scripted = TutorApp(
        lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine(), grader=lambda *a, **k: None
    )
    async with scripted.run_test(size=(80, 24)) as pilot:
        scripted.open_lesson("ex-demo")
        await wait_for(pilot, lambda: isinstance(scripted.screen.view, ExerciseStepView))
        await pilot.pause()
    assert not warmed
