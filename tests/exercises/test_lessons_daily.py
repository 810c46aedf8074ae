"""The daily lessons `cpu-vs-gpu` and `devices`: structure, checks, and the exercises' mistakes.

The solutions and the typical mistakes run once, in `lesson test` (tests/system/test_cli_lesson_test.py):
each mistake must fail the requirement it names, and the learner must read that requirement's
feedback. Here the unbroken starters of the "break it" exercises, and a wrong break, run in the sandbox.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tutor import experiments
from tutor.checks import grade
from tutor.checks.answers import ChoiceAnswer, TextAnswer
from tutor.course.lesson import (
    CheckStep,
    ErrorRequirement,
    ExerciseStep,
    Lesson,
    PredictStep,
    RunStep,
)
from tutor.course.loader import load_file
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
LESSONS = {name: ROOT / "lessons" / f"{name}.yaml" for name in ("cpu-vs-gpu", "devices")}
EDITOR_COLUMNS = 69  # what the exercise editor shows at 80 wide (tests/tui/test_tui_exercise.py)
posix = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


@pytest.fixture(scope="module", params=sorted(LESSONS))
def lesson(request) -> Lesson:
    return load_file(LESSONS[request.param])


def _checks(lesson: Lesson) -> list[CheckStep]:
    return [s for s in lesson.steps if isinstance(s, CheckStep)]


def _exercises(lesson: Lesson) -> list[ExerciseStep]:
    return [s for s in lesson.steps if isinstance(s, ExerciseStep)]


# ------------------------------------------------------------------ structure


def test_the_two_lessons_come_first_and_lead_into_each_other():
    cpu, dev = (load_file(p) for p in LESSONS.values())
    assert cpu.next == "devices" and dev.next == "gpu-training"
    assert cpu.order < dev.order < load_file(ROOT / "lessons" / "gpu-training.yaml").order


def test_daily_module_shape(lesson):
    """Why, run, mistakes, interview checks, three practice levels, recap, in that order."""
    ids = [s.id for s in lesson.steps]
    assert ids[0] == "why" and ids[-1] == "recap"
    assert [s.id for s in _exercises(lesson)] == ["practice-basic", "practice-intermediate", "practice-advanced"]
    interviews = [s for s in _checks(lesson) if s.id.startswith("interview-")]
    assert len(interviews) == 2 and all(isinstance(s.answer, TextAnswer) for s in interviews)
    assert all(s.answer.reference for s in interviews), "interview questions show a model answer"
    # The advanced exercise wants an error, and a check right after asks to explain it.
    advanced = lesson.step("practice-advanced")
    assert any(isinstance(r, ErrorRequirement) for r in advanced.requirements)
    assert ids[ids.index("practice-advanced") + 1] == "advanced-explain"
    assert all(ids.index(s.id) < ids.index("practice-basic") for s in interviews)


def test_every_prediction_is_settled_by_the_run_after_it(lesson):
    steps = lesson.steps
    for i, step in enumerate(steps):
        if isinstance(step, PredictStep):
            run = steps[i + 1]
            assert isinstance(run, RunStep), step.id
            if step.compare:
                assert step.compare in experiments.get(run.experiment).metrics, step.id


def test_every_mistake_the_lessons_show_is_a_real_run():
    """The issue's three mistakes, each shown by an experiment, not by prose alone."""
    runs = {s.experiment for p in LESSONS.values() for s in load_file(p).steps if isinstance(s, RunStep)}
    assert {"forgot-zero-grad", "shape-mismatch", "device-mismatch"} <= runs
    assert {"device-basics", "crossover", "sync-timing", "train"} <= runs
    reverse = [
        s
        for s in load_file(LESSONS["devices"]).steps
        if isinstance(s, RunStep) and s.experiment == "device-mismatch" and s.params.get("reverse")
    ]
    assert reverse, "the reverse mistake (batch moved, model not) is run too"


def test_code_fits_an_80_column_terminal(lesson):
    for s in _exercises(lesson):
        for label, code in (("starter", s.starter), ("solution", s.solution)):
            too_wide = [line for line in code.splitlines() if len(line) > EDITOR_COLUMNS]
            assert not too_wide, (s.id, label, too_wide)


MAX_MARKDOWN_CODE = 74  # a code block in a step's text, at 80 columns with the scrollbar showing


@pytest.mark.parametrize("path", sorted((ROOT / "lessons").glob("*.yaml")), ids=lambda p: p.stem)
def test_code_in_step_text_fits_an_80_column_terminal(path):
    too_wide = []
    for s in load_file(path).steps:
        for text in (s.body, getattr(s, "explanation", "") or ""):
            in_code = False
            for line in text.splitlines():
                if re.match(r"^\s*```", line):
                    in_code = not in_code
                elif in_code and len(line) > MAX_MARKDOWN_CODE:
                    too_wide.append((s.id, line))
    assert not too_wide


def test_mps_is_taught_with_what_it_lacks():
    text = LESSONS["devices"].read_text(encoding="utf-8")
    for needed in (
        "torch.backends.mps.is_available()",
        "torch.mps.synchronize()",
        "float64",
        "PYTORCH_ENABLE_MPS_FALLBACK",
    ):
        assert needed in text, needed


# ------------------------------------------------------------------ checks


def test_examples_grade_as_declared(lesson):
    for step in _checks(lesson):
        if isinstance(step.answer, ChoiceAnswer):
            right = [str(i) for i, o in enumerate(step.answer.options, 1) if o.correct]
            wrong = [str(i) for i, o in enumerate(step.answer.options, 1) if not o.correct]
            assert len(right) == 1 and len(wrong) >= 2, step.id
            assert all(o.feedback for o in step.answer.options), step.id
        else:
            right, wrong = step.examples.right, step.examples.wrong
            assert len(right) >= 3 and len(wrong) >= 3, step.id
            assert grade(step.answer.reference, step.answer).correct, step.id
        for answer in right:
            verdict = grade(answer, step.answer)
            assert verdict.correct, (step.id, answer, verdict.feedback)
        for answer in wrong:
            verdict = grade(answer, step.answer)
            assert not verdict.correct and verdict.feedback, (step.id, answer)


@pytest.mark.parametrize(
    "lesson_id, check_id, answer",
    [
        ("cpu-vs-gpu", "interview-cpu-gpu", ""),
        ("cpu-vs-gpu", "interview-bug", "?!"),
        ("devices", "interview-mismatch", "x" * 5000),
    ],
)
def test_empty_or_silly_answers_get_feedback_not_credit(lesson_id, check_id, answer):
    step = load_file(LESSONS[lesson_id]).step(check_id)
    verdict = grade(answer, step.answer)
    assert not verdict.correct and verdict.feedback


# ------------------------------------------------------------------ exercises in the sandbox


@pytest.fixture
def small_lab(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "1000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "200")
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")


@posix
@pytest.mark.parametrize("lesson_id", sorted(LESSONS))
def test_the_unbroken_starter_of_a_break_it_exercise_does_not_pass(small_lab, tmp_path, lesson_id):
    step = load_file(LESSONS[lesson_id]).step("practice-advanced")
    result = grade_exercise(step, step.starter, tmp_path)
    assert result.sandbox.error_type is None, result.traceback  # it really works as given
    assert not result.passed
    assert "ran to the end without an error" in result.requirements[0].feedback


@posix
def test_the_wrong_break_says_what_happened_instead(small_lab, tmp_path):
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    wrong = step.starter.replace("cross_entropy(outputs, labels)", "cross_entropy(outputs, labels.float())")
    assert wrong != step.starter
    result = grade_exercise(step, wrong, tmp_path)
    assert not result.passed
    feedback = result.requirements[0].feedback
    assert feedback.startswith(step.requirements[0].feedback)
    assert "raised RuntimeError, but with another message: expected target dtype" in feedback


@posix
def test_the_expected_error_passes_and_keeps_the_traceback_to_read(small_lab, tmp_path):
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    result = grade_exercise(step, step.solution, tmp_path)
    assert result.passed, [r.feedback for r in result.requirements]
    assert result.sandbox.error_type == "RuntimeError"
    assert re.search(r"1792x28 and 784x128", result.traceback)
