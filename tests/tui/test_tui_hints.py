"""Hints in tiers and an answer that opens only after a try (issue 26, part 2), on the screens."""

from __future__ import annotations

from pathlib import Path

from fakes import ScriptedEngine, ScriptedGrader
from test_tui import text_of
from textual.widgets import Static
from waiting import wait_for

from tutor.ui.app import TutorApp

LESSON = """
id: hinted
title: Hinted
steps:
  - id: pick
    kind: check
    prompt: Which dtype underflows first?
    hints: ["Look at the smallest number each can hold.", "float16's smallest normal is about 6e-5."]
    answer:
      type: choice
      options:
        - {text: float16, correct: true}
        - {text: float32}
    explanation: float16 has 5 exponent bits.
  - id: code
    kind: exercise
    title: Sum
    starter: "total = ____\\n"
    solution: "total = sum(range(11))\\nprint(total)\\n"
    hints: ["Python has a built-in for adding up.", "sum(range(11))", "total = sum(range(11))"]
    requirements:
      - {type: output, id: prints, pattern: '55', feedback: Print 55.}
"""


def _app(tmp_path: Path) -> TutorApp:
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "hinted.yaml").write_text(LESSON)
    return TutorApp(
        lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=ScriptedEngine(), grader=ScriptedGrader()
    )


async def test_h_shows_one_more_tier_each_time_and_they_stay_on_return(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("hinted")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("escape")  # out of the answer list, so h reaches the screen
        await pilot.press("h")
        hint = text_of(view.query_one("#hint", Static))
        assert "Hint 1 of 2: Look at the smallest" in hint and "6e-5" not in hint and "h again" in hint
        await pilot.press("h")
        hint = text_of(view.query_one("#hint", Static))
        assert "Hint 2 of 2: float16's smallest normal" in hint and "h again" not in hint
        assert app.progress.aids("hinted", "pick").hints == 2
        await pilot.press("n", "p")  # away and back
        await pilot.pause()
        assert "Hint 2 of 2" in text_of(app.screen.view.query_one("#hint", Static))


async def test_g_before_any_try_asks_twice_then_shows_the_answer(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("hinted")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("escape", "g")
        assert "opens after one try" in text_of(view.query_one("#feedback", Static)) and not view.gave_up
        await pilot.press("g")
        assert "Sure?" in text_of(view.query_one("#feedback", Static)) and not view.gave_up
        await pilot.press("g")
        assert view.gave_up and "Here is the answer" in text_of(view.query_one("#feedback", Static))
        assert app.progress.aids("hinted", "pick").solution


async def test_the_exercise_solution_opens_after_one_graded_run(tmp_path):
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("hinted")
        await pilot.pause()
        app.screen.show_step(1)
        await pilot.pause()
        view = app.screen.view
        solution = view.query_one("#solution", Static)
        await pilot.press("enter")  # into the editor, where ctrl+g works
        await pilot.press("ctrl+g")
        assert "opens after one run of your code" in text_of(view.query_one("#exercise-status", Static))
        assert not solution.display
        await pilot.press("ctrl+r")  # one graded run (the starter fails)
        await wait_for(pilot, lambda: not view.running and "✗" in text_of(view.query_one("#exercise-status", Static)))
        assert not view.passed
        await pilot.press("ctrl+g")
        assert "Again (ctrl+g, or g outside the editor)" in text_of(view.query_one("#exercise-status", Static))
        assert not solution.display
        await pilot.press("escape", "g")  # g from the step, outside the editor, is the same
        assert solution.display and "sum(range(11))" in text_of(solution)
        assert app.progress.aids("hinted", "code").solution
        await pilot.press("h", "h", "h", "h")
        hint = text_of(view.query_one("#hint", Static))
        assert "Hint 3 of 3: total = sum(range(11))" in hint and app.progress.aids("hinted", "code").hints == 3


async def test_the_reference_solution_is_headed_as_the_lessons_not_the_learners_file(tmp_path):
    """Was: the solution's code alone under the editor, read as the learner's own file."""
    app = _app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("hinted")
        await pilot.pause()
        app.screen.show_step(1)
        await pilot.pause()
        view = app.screen.view
        view.passed = True  # once passed, g shows it at once
        await pilot.press("g")
        await pilot.pause()
        shown = text_of(view.query_one("#solution", Static))
        assert shown.startswith("Reference solution (the lesson's; yours is in the editor above)"), shown
        assert "sum(range(11))" in shown


async def test_no_hint_line_goes_once_the_answer_is_shown(tmp_path):
    """Was: "Hint: No hint for this one" stayed under the answer and its explanation."""
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    (lessons / "n.yaml").write_text(
        "id: nohint\ntitle: N\nsteps:\n  - id: q\n    kind: check\n"
        "    prompt: Two plus two?\n    answer: {type: number, value: 4}\n"
    )
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("nohint")
        await pilot.pause()
        view = app.screen.view
        await pilot.press("escape", "h")
        assert "No hint for this one" in text_of(view.query_one("#hint", Static))
        await pilot.press("enter", *"4", "enter")
        await pilot.pause()
        assert view.solved
        assert "No hint" not in text_of(view.query_one("#hint", Static))


async def test_g_on_a_long_check_brings_its_message_into_view_at_80x24(tmp_path):
    """Was: below a long body the "answer opens after one try" line was drawn off screen."""
    lessons = tmp_path / "lessons"
    lessons.mkdir()
    body = "\\n\\n".join(f"Paragraph {i} of the reading before the question." for i in range(20))
    (lessons / "l.yaml").write_text(
        f'id: long\ntitle: L\nsteps:\n  - id: q\n    kind: check\n    body: "{body}"\n'
        "    prompt: Two plus two?\n    answer: {type: number, value: 4}\n"
    )
    app = TutorApp(lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson("long")
        await pilot.pause()
        view = app.screen.view
        content = app.screen.query_one("#content")
        await pilot.press("escape")
        content.scroll_home(animate=False)  # reading from the top when g comes
        await pilot.pause()
        for press in ("g", "g", "g"):
            await pilot.press(press)
            await pilot.pause(0.3)
            feedback = view.query_one("#feedback", Static)
            assert content.region.contains_region(feedback.region), (text_of(feedback), feedback.region)
        assert view.gave_up
