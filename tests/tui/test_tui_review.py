"""Pilot tests of review mode: from the home screen, a round of checks, the summary, and the store."""

from __future__ import annotations

import io
import random
import sys
from pathlib import Path

from fakes import ScriptedEngine
from rich.console import Console
from textual.widgets import Input, OptionList, Static

from tutor.course.progress import Progress
from tutor.ui.app import TutorApp
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.review import ReviewScreen
from tutor.ui.widgets.review_question import ReviewQuestion

LESSON = """\
id: rev
title: Review fixture
order: 1
steps:
  - id: intro
    kind: read
    body: Hello.
  - id: pick
    kind: check
    title: Where big matmuls run
    prompt: Which device runs big matrix multiplications fastest?
    answer:
      type: choice
      options:
        - {text: the GPU, correct: true, feedback: Thousands of cores.}
        - {text: the CPU, feedback: Not for big ones.}
  - id: say
    kind: check
    title: Why zero_grad
    prompt: Why call optimizer.zero_grad() every step?
    explanation: backward() adds to .grad.
    answer:
      type: text
      reference: Because backward() accumulates gradients into .grad, so they must be reset each step.
      rubric:
        require:
          - name: accumulate
            any: [accumulat*, add*, sum*]
            missing: What does backward() do to the .grad that is already there?
"""


def text_of(widget: Static) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def make_app(tmp_path: Path, finished: bool = True) -> TutorApp:
    lessons = tmp_path / "lessons"
    lessons.mkdir(exist_ok=True)
    (lessons / "rev.yaml").write_text(LESSON, encoding="utf-8")
    progress = Progress(tmp_path / "home" / "progress.db")
    if finished:
        for step in ("intro", "pick", "say"):
            progress.complete_step("rev", step)
        progress.record_answer("rev", "say", "no idea", False, "What does backward() do?")
        progress.record_answer("rev", "say", "gradients add up", True, "")
        progress.record_answer("rev", "pick", "the GPU", True, "")
    return TutorApp(
        lessons_dirs=[lessons], home=tmp_path / "home", device="cpu", progress=progress, engine=ScriptedEngine()
    )


async def answer_current(pilot, right: bool) -> ReviewQuestion:
    screen = pilot.app.screen
    question = screen.query_one(ReviewQuestion)
    if question.step.id == "pick":
        assert isinstance(screen.focused, OptionList)
        shown = [question.step.answer.options[i] for i in question.order]  # a review shuffles them
        await pilot.press(*["down"] * next(i for i, o in enumerate(shown) if o.correct == right))
        await pilot.press("enter")
    else:
        assert isinstance(screen.focused, Input)
        screen.focused.value = "it adds up the gradients" if right else "it makes training faster"
        await pilot.press("enter")
    await pilot.pause()
    return question


async def test_nothing_to_review_says_how_to_get_there(tmp_path):
    app = make_app(tmp_path, finished=False)
    async with app.run_test(size=(80, 24)) as pilot:
        home = app.screen
        assert not app.catalog.broken and app.catalog.get("rev")
        assert "finish a lesson" in text_of(home.query_one("#review-line", Static))
        assert "r review" in text_of(home.query_one("#keys-hint", Static))
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, ReviewScreen) and app.screen.state == "empty"
        message = text_of(app.screen.query_one(".review-message", Static))
        assert "Nothing to review yet" in message and "✓ done" in message
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)


async def test_a_round_asks_grades_records_and_sums_up(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        line = text_of(app.screen.query_one("#review-line", Static))
        assert "2 questions from 1 finished lesson, 1 you missed" in line
        await pilot.press("r")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ReviewScreen) and screen.state == "question"
        assert "question 1 of 2" in text_of(screen.query_one("#where", Static))

        # n before answering skips nothing silently: the first one is answered wrong.
        first = await answer_current(pilot, right=False)
        feedback = text_of(first.query_one("#feedback", Static))
        assert "✗ Not this time" in feedback and "come back sooner" in feedback
        model_answer = text_of(first.query_one("#after .reference", Static))
        if first.step.id == "pick":
            assert model_answer.startswith("The answer: the GPU")
        else:
            assert model_answer.startswith("A model answer: Because backward() accumulates")
        # The footer offers "next" during a round and "another round" only after it.
        assert screen.check_action("next", ()) and not screen.check_action("again", ())
        assert not screen.check_action("skip", ())  # answered: nothing to skip
        assert "n next question" in text_of(screen.query_one("#keys-hint", Static))
        await pilot.press("n")
        await pilot.pause()
        assert "question 2 of 2" in text_of(screen.query_one("#where", Static))
        second = await answer_current(pilot, right=True)
        assert "✓ Right" in text_of(second.query_one("#feedback", Static))
        await pilot.press("n")
        await pilot.pause()

        assert screen.state == "summary"
        assert screen.check_action("again", ()) and not screen.check_action("next", ())
        summary = text_of(screen.query_one(".review-message", Static))
        assert "1 of 2 answered right" in summary and "come back more often" in summary
        assert app.progress.reviews("rev", first.step.id)[-1].correct is False
        assert app.progress.reviews("rev", second.step.id)[-1].correct is True
        assert len(app.progress.answers("rev", "pick")) == 1  # the lesson's own answers untouched

        await pilot.press("r")  # another round
        await pilot.pause()
        assert screen.state == "question" and "question 1 of 2" in text_of(screen.query_one("#where", Static))
        await pilot.press("escape")  # leave the answer box
        await pilot.press("escape")  # back home
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        assert "you missed" in text_of(app.screen.query_one("#review-line", Static))


async def test_skipping_and_an_empty_answer_record_nothing(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await pilot.pause()
        screen = app.screen
        question = screen.query_one(ReviewQuestion)
        if question.step.id == "pick":
            await pilot.press("n")  # n does not skip an unanswered question...
            await pilot.pause()
            assert screen.query_one(ReviewQuestion) is question
            await pilot.press("s")  # ...s does
            await pilot.pause()
            await pilot.pause()
            question = screen.query_one(ReviewQuestion)
        assert question.step.id == "say"
        await pilot.press("enter")  # empty
        await pilot.pause()
        assert "Write your answer first" in text_of(question.query_one("#feedback", Static))
        assert question.answered is None and app.progress.reviews("rev", "say") == []
        screen.focused.value = "?!?"  # nothing a grader can read: said, not counted
        await pilot.press("enter")
        await pilot.pause()
        assert question.answered is None and app.progress.reviews("rev", "say") == []
        assert not question.query_one(Input).disabled
        await pilot.press("escape", "s")
        await pilot.pause()
        if screen.state == "question":
            await pilot.press("s")
            await pilot.pause()
        assert screen.state == "summary"
        assert "You skipped all 2: nothing was recorded." in text_of(screen.query_one(".review-message", Static))
        assert app.progress.reviews("rev", "pick") == []


async def test_a_check_of_a_badly_predicted_concept_comes_first_and_says_why(tmp_path, monkeypatch):
    """Issue 26, part 3: a prediction 10x off on the concept of 'pick' puts it first in the round,
    with the reason on its line."""
    from tutor import experiments
    from tutor.course.loader import load_text
    from tutor.course.session import LessonSession, RunOutcome

    text = LESSON.replace(
        "  - id: pick\n    kind: check\n", "  - id: pick\n    kind: check\n    concept: gpu-speedup\n"
    )
    text = text.replace(
        "steps:\n",
        "steps:\n"
        "  - {id: guess, kind: predict, prompt: Speedup?, compare: speedup, unit: x,\n"
        "     concept: gpu-speedup, answer: {type: number, unit: x, min: 0, max: 1000}}\n"
        "  - {id: measure, kind: run, experiment: crossover}\n",
        1,
    )
    monkeypatch.setattr(sys.modules[__name__], "LESSON", text)  # make_app writes and loads it
    app = make_app(tmp_path)
    lesson = load_text(text, "rev.yaml")
    session = LessonSession(lesson, app.progress)
    session.lock(lesson.step("guess"), "30")
    metrics = {m: None for m in experiments.get("crossover").metrics} | {"speedup": 3.0}
    session.record_run(lesson.step("measure"), RunOutcome("crossover", {}, "finished", metrics, {}))
    for step in ("guess", "measure"):
        app.progress.complete_step("rev", step)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("r")
        await pilot.pause()
        question = app.screen.query_one(ReviewQuestion)
        assert question.step.id == "pick"
        origin = " ".join(text_of(question.query_one(".origin", Static)).split())
        assert "your predictions of GPU speed-ups are off x10" in origin


async def test_a_choice_is_asked_in_a_new_order_and_graded_by_the_option_shown(tmp_path):
    """Was: review listed the options as the lesson did, so "the first one" answered it."""
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        for seed in range(20):  # rounds until "pick" comes with its options the other way round
            app.push_screen(ReviewScreen(rng=random.Random(seed)))
            await pilot.pause()
            question = app.screen.query_one(ReviewQuestion)
            lists = app.screen.query(OptionList)
            shown = [str(o.prompt) for o in lists.first().options] if lists else []
            if shown == ["1. the CPU", "2. the GPU"]:
                break
            app.pop_screen()
            await pilot.pause()
        else:
            raise AssertionError("the options were always in the lesson's order")
        await pilot.press("down", "enter")  # the second shown: the GPU
        await pilot.pause()
        assert "✓ Right" in text_of(question.query_one("#feedback", Static))
        assert app.progress.reviews("rev", "pick")[-1].answer == "the GPU"
