"""Multiple-choice answers: by text, number or letter, with per-option feedback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checks import describe_spec, grade
from checks.choice import resolve
from checks.spec import ChoiceAnswer

SPEC = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "slower", "feedback": "Slower? Look at the model size."},
        {"text": "about 2x"},
        {"text": "about 5x", "correct": True, "feedback": "Yes: big matrix multiplies pay off."},
        {"text": "10x or more", "feedback": "Too optimistic for this small model."},
    ],
)


@pytest.mark.parametrize(
    "answer,index",
    [
        ("about 5x", 2),
        ("About 5X", 2),
        ("  about   5x. ", 2),
        ("3", 2),
        ("3.", 2),
        ("(3)", 2),
        ("option 3", 2),
        ("c", 2),
        ("C)", 2),
        ("(c)", 2),
        ("slower", 0),
        ("a", 0),
        ("1", 0),
        ("10x or more", 3),
        ("d", 3),
        ("5x", 2),  # a unique part of one option
        ("I'd say about 2x", 1),  # the answer contains one option
    ],
)
def test_resolve(answer, index):
    assert resolve(answer, SPEC) == index


@pytest.mark.parametrize("answer", ["", "  ", "5", "0", "e", "z", "about", "x", "maybe", "\x00", "2 or 3"])
def test_resolve_unclear_is_none(answer):
    assert resolve(answer, SPEC) is None


def test_option_text_wins_over_numbers_and_letters():
    spec = ChoiceAnswer(type="choice", options=["b", "a", "2"])
    assert resolve("a", spec) == 1
    assert resolve("b", spec) == 0
    assert resolve("2", spec) == 2
    assert resolve("3", spec) == 2
    assert resolve("c", spec) == 2


def test_grade_right_option_gives_its_feedback():
    v = grade("3", SPEC)
    assert v.correct and v.feedback == "Yes: big matrix multiplies pay off." and v.score == 1.0


def test_grade_wrong_option_gives_its_feedback():
    v = grade("a", SPEC)
    assert not v.correct and v.feedback == "Slower? Look at the model size."


def test_grade_wrong_option_without_feedback_does_not_reveal_the_answer():
    v = grade("about 2x", SPEC)
    assert not v.correct
    assert "about 5x" not in v.feedback.lower() and "3" not in v.feedback and "(c)" not in v.feedback.lower()


def test_grade_right_option_without_feedback_says_right():
    spec = ChoiceAnswer(type="choice", options=[{"text": "yes", "correct": True}, "no"])
    assert grade("yes", spec).feedback == "Right: yes."


@pytest.mark.parametrize("answer", ["", "   ", "7", "purple"])
def test_grade_unclear_answer_explains_how_to_pick(answer):
    v = grade(answer, SPEC)
    assert not v.correct
    assert "1-4" in v.feedback and "a-d" in v.feedback


def test_describe_choice():
    assert describe_spec(SPEC) == "pick 1-4"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_grade_choice_never_raises(answer):
    v = grade(answer, SPEC)
    assert isinstance(v.correct, bool) and v.feedback


@settings(max_examples=20, deadline=None)
@given(st.text(min_size=1, max_size=10))
def test_grade_choice_never_raises_on_huge_text(chunk):
    verdict = grade(chunk * 100_000, SPEC)  # a megabyte is no option's text or number
    assert verdict.correct is False and verdict.feedback and len(verdict.feedback) < 2_000
