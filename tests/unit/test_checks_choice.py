"""Multiple-choice answers: by text, number or letter, with per-option feedback."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.checks import describe_spec, grade
from tutor.checks.answers import ChoiceAnswer
from tutor.checks.choice import read_typed, resolve

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
@given(st.one_of(st.text(max_size=3000), st.sampled_from(["1", "b", " C ", "(d)", "option 2", "#3", "4."])))
def test_grade_choice_never_raises(answer):
    """Right exactly when the answer reads as the right option; one that reads as none is asked
    again (not judged), never marked wrong."""
    v = grade(answer, SPEC)
    index = resolve(answer, SPEC)
    assert v.correct is (index is not None and SPEC.options[index].correct)
    assert v.judged is (index is not None)
    if index is None:
        assert "its number (1-4), its letter (a-d) or its text" in v.feedback
    assert v.feedback and len(v.feedback) < 2_000


@settings(max_examples=20, deadline=None)
@given(st.text(min_size=1, max_size=10))
def test_grade_choice_never_raises_on_huge_text(chunk):
    verdict = grade(chunk * 100_000, SPEC)  # a megabyte is no option's text or number
    assert verdict.correct is False and verdict.feedback and len(verdict.feedback) < 2_000


# ----------------------------------------------------------------------------- typed on a list (issue 35)

SPEEDUP = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "slower", "max": 1},
        {"text": "about the same", "min": 1, "max": 1.5},
        {"text": "1.5x to 5x", "min": 1.5, "max": 5},
        {"text": "10x or more", "min": 10},
        {"text": "5x to 10x", "min": 5, "max": 10},
    ],
)
ADAM = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "about the same", "max": 1.5},
        {"text": "about 3 GB", "min": 1.5, "max": 6},
        {"text": "about 12 GB", "min": 6, "max": 18},
        {"text": "about 24 GB", "min": 18},
    ],
)
NAMED = ChoiceAnswer(type="choice", options=["about 3 GB", "about 12 GB", "about 24 GB"])  # values, no ranges
BOUNDED = ChoiceAnswer(
    type="choice", options=[{"text": "1x to 2x", "min": 1, "max": 2}, {"text": "2x or more", "min": 2}]
)
WORDS = ChoiceAnswer(type="choice", options=["RuntimeError", "It works", "A warning"])


@pytest.mark.parametrize(
    "spec, unit, typed, index",
    [
        (SPEEDUP, "x", "4x", 2),  # the value, never option 4 (the report: it locked '10x or more')
        (SPEEDUP, "x", "~2.5", 2),
        (SPEEDUP, "x", "12 times", 3),
        (SPEEDUP, "x", "option 4", 3),
        (SPEEDUP, "x", "#5", 4),
        (SPEEDUP, "x", "c", 2),
        (ADAM, "GB", "about 3", 1),  # the report: it locked 'about 12 GB'
        (ADAM, "GB", "3 GB", 1),
        (ADAM, "GB", "12000 MB", 2),
        (ADAM, "GB", "2", 1),  # option 2 and 2 GB are the same option: nothing to ask
        (ADAM, "GB", "about 12 GB", 2),  # the option's own words
        (NAMED, "GB", "about 12", 1),  # no ranges: the value an option names
        (WORDS, "", "a RuntimeError", 0),
        (WORDS, "", "2", 1),  # no option stands for a value: a bare number is its number
    ],
)
def test_what_is_typed_on_a_list_reads_as_the_option_it_means(spec, unit, typed, index):
    reading = read_typed(typed, spec, unit)
    assert reading.index == index, reading
    assert not reading.problem


@pytest.mark.parametrize(
    "spec, unit, typed, said",
    [
        (SPEEDUP, "x", "4", ["option 4, '10x or more'", "4x, which is in '1.5x to 5x'"]),
        (ADAM, "GB", "3", ["option 3, 'about 12 GB'", "3 GB, which is in 'about 3 GB'"]),
        (NAMED, "GB", "3", ["option 3, 'about 24 GB'", "3 GB, which is 'about 3 GB'"]),
    ],
)
def test_a_bare_number_an_option_range_could_mean_is_asked_about(spec, unit, typed, said):
    reading = read_typed(typed, spec, unit)
    assert reading.index is None and not reading.problem
    assert [r.said for r in reading.readings] == said
    assert reading.question() == f"Did you mean {said[0]}, or {said[1]}?"
    # what the question offers to type means one option each
    assert [read_typed(r.exact, spec, unit).index for r in reading.readings] == [r.index for r in reading.readings]


@pytest.mark.parametrize(
    "spec, unit, typed, problem",
    [
        (SPEEDUP, "x", "", "Pick one of the 5 options"),
        (SPEEDUP, "x", "   ", "Pick one of the 5 options"),
        (SPEEDUP, "x", "zzz", "I could not tell which option you mean"),
        (ADAM, "GB", "3 ms", "'3 ms' is not a value these options can hold: they are in GB"),
        (SPEEDUP, "x", "option 9", "There is no option 9"),
        (WORDS, "", "7", "There is no option 7"),
        (BOUNDED, "x", "-5x", "-5x is in none of the options"),
        (BOUNDED, "x", "0.5 times", "0.5x is in none of the options"),
    ],
)
def test_what_cannot_be_read_on_a_list_says_why(spec, unit, typed, problem):
    reading = read_typed(typed, spec, unit)
    assert reading.readings == () and problem in reading.problem


def test_a_percent_list_asks_about_a_bare_fraction():
    spec = ChoiceAnswer(type="choice", options=[{"text": "under 20%", "max": 20}, {"text": "20% or more", "min": 20}])
    assert "0.5% or 50%" in read_typed("0.5", spec, "%").problem
    assert read_typed("50%", spec, "%").index == 1


@given(st.text(max_size=40))
def test_reading_what_is_typed_never_raises_and_says_one_thing(typed):
    reading = read_typed(typed, ADAM, "GB")
    assert bool(reading.problem) != bool(reading.readings)
    assert all(0 <= r.index < len(ADAM.options) for r in reading.readings)


@pytest.mark.parametrize("typed, index", [("runtime", 3), ("runt", 3), ("a warn", 2), ("moves the mod", 2)])
def test_the_start_of_an_options_words_finds_it_as_a_search_box_would(typed, index):
    spec = ChoiceAnswer(
        type="choice",
        options=[
            "It works: PyTorch copies each batch",
            "It works, but slowly",
            "A warning, and PyTorch moves the model back",
            "RuntimeError",
        ],
    )
    assert read_typed(typed, spec).index == index
    assert read_typed("it works", spec).index is None  # two options begin so: not a guess
    assert read_typed("ru", spec).index is None  # too short to be sure
