"""Scoring a locked prediction against what a run measured."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.checks import score_prediction
from tutor.checks.answers import ChoiceAnswer, NumberAnswer, TextAnswer

SPEEDUP = NumberAnswer(type="number", unit="x", tolerance=0.1)
RANGED = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "slower", "max": 1},
        {"text": "about 2x", "min": 1, "max": 3.5},
        {"text": "about 5x", "min": 3.5, "max": 10},
        {"text": "10x or more", "min": 10},
    ],
)


def test_number_far_off_reports_the_factor():
    s = score_prediction("10x", SPEEDUP, 3.2)
    assert s.summary.startswith("off by 3.1")
    assert "(you said 10x, measured 3.2x)" in s.summary
    assert not s.hit
    assert math.isclose(s.ratio, 0.32)


def test_number_too_low_reports_the_factor_the_other_way():
    s = score_prediction("0.5x", SPEEDUP, 3.2)
    assert s.summary.startswith("off by 6.4x") and not s.hit and math.isclose(s.ratio, 6.4)


def test_number_within_tolerance_is_a_hit():
    s = score_prediction("3x", SPEEDUP, 3.2)
    assert s.hit
    assert s.summary == "within 7% (you said 3x, measured 3.2x)"


def test_number_close_but_outside_tolerance_says_by_how_much():
    s = score_prediction("4x", SPEEDUP, 3.2)
    assert not s.hit and s.summary == "25% too high (you said 4x, measured 3.2x)"


def test_number_measurement_in_another_unit_is_converted():
    spec = NumberAnswer(type="number", unit="GB", tolerance=0.05)
    s = score_prediction("12 GB", spec, 12000, unit="MB")
    assert s.hit and "measured 12 GB" in s.summary


def test_number_measurement_given_as_text_is_read():
    assert score_prediction("3x", SPEEDUP, "3.2x").hit


def test_number_prediction_that_cannot_be_read():
    s = score_prediction("no idea", SPEEDUP, 3.2)
    assert not s.hit and s.ratio is None and "measured 3.2x" in s.summary


def test_zero_prediction_has_no_ratio():
    s = score_prediction("0", SPEEDUP, 3.2)
    assert s.ratio is None and not s.hit and "measured 3.2x" in s.summary


@pytest.mark.parametrize("spec,unit", [(SPEEDUP, ""), (RANGED, "x")])
@pytest.mark.parametrize("measured", [None, float("nan")])
def test_missing_speedup_is_not_a_miss_and_may_be_the_missing_accelerator(spec, unit, measured):
    s = score_prediction("3", spec, measured, unit)
    assert not s.hit and s.ratio is None
    assert "this run could not measure it here" in s.summary
    assert "no accelerator to compare with, or see the run's notes" in s.summary
    assert "not a miss" in s.summary
    assert "needs a GPU" not in s.summary  # it may be missing for another reason


ACCURACY = ChoiceAnswer(
    type="choice",
    options=[{"text": "below 90%", "min": 0, "max": 90}, {"text": "90% or more", "min": 90}],
)


@pytest.mark.parametrize(
    "spec,unit,measured",
    [
        (ACCURACY, "%", None),  # e.g. autocast unsupported on this device
        (ACCURACY, "%", float("nan")),  # an accuracy that came out NaN
        (RANGED, "", None),  # ranged, but not a speedup
        (RANGED, "B", None),
        (NumberAnswer(type="number", unit="GB"), "GB", None),
        (TextAnswer(type="text"), "", None),
    ],
)
def test_other_missing_metrics_point_at_the_runs_notes_not_at_the_gpu(spec, unit, measured):
    s = score_prediction("90% or more", spec, measured, unit)
    assert not s.hit and s.ratio is None
    assert "Nothing was measured for this on this machine; the run's notes say why" in s.summary
    assert "not a miss" in s.summary
    assert "GPU" not in s.summary and "accelerator" not in s.summary


def test_no_measurement_for_text_keeps_the_learners_words():
    s = score_prediction("it crashes", TextAnswer(type="text"), None)
    assert "Nothing was measured" in s.summary and "not a miss" in s.summary and "'it crashes'" in s.summary


def test_choice_hit_inside_the_chosen_range():
    s = score_prediction("about 2x", RANGED, 3.2, unit="x")
    assert s.hit
    assert s.summary == "you chose 'about 2x'; measured 3.2x, which is in that range"


def test_choice_miss_names_the_option_the_measurement_falls_in():
    s = score_prediction("b", RANGED, 5.0, unit="x")
    assert not s.hit
    assert s.summary == "you chose 'about 2x'; measured 5x, which is in 'about 5x': 2.5x what you guessed"
    assert s.ratio == 2.5


def test_choice_range_bounds_are_half_open():
    assert score_prediction("about 5x", RANGED, 3.5, unit="x").hit
    assert not score_prediction("about 2x", RANGED, 3.5, unit="x").hit
    assert score_prediction("4", RANGED, 1000, unit="x").hit  # open upper end


def test_choice_without_ranges_compares_text_measurements():
    spec = ChoiceAnswer(type="choice", options=["forward pass", "backward pass"])
    assert score_prediction("1", spec, "forward pass").hit
    s = score_prediction("2", spec, "forward pass")
    assert not s.hit and "'backward pass'" in s.summary and "forward pass" in s.summary


def test_text_prediction_shows_the_measurement():
    s = score_prediction("it crashes at backward", TextAnswer(type="text"), "RuntimeError")
    assert not s.hit and s.ratio is None and "RuntimeError" in s.summary


MEASURED = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.text(max_size=200),
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=2000),
    st.sampled_from([SPEEDUP, RANGED, TextAnswer(type="text")]),
    MEASURED,
    st.sampled_from(["", "x", "GB", "MB", "s", "%"]),
)
def test_score_prediction_never_raises(answer, spec, measured, unit):
    s = score_prediction(answer, spec, measured, unit)
    assert isinstance(s.summary, str) and s.summary
    assert s.ratio is None or math.isfinite(s.ratio)


def test_percent_step_compares_a_fraction_metric_in_percent():
    from tutor.checks.answers import ChoiceAnswer, NumberAnswer

    choice = ChoiceAnswer(
        type="choice", options=[{"text": "90-96%", "min": 90, "max": 96}, {"text": "96-99%", "min": 96, "max": 99}]
    )
    hit = score_prediction("96-99%", choice, 0.9771, "%")
    assert hit.hit and "97.7%" in hit.summary
    miss = score_prediction("90-96%", choice, 0.9771, "%")
    assert not miss.hit and "96-99%" in miss.summary

    number = NumberAnswer(type="number", unit="%", tolerance=0.02)
    close = score_prediction("97%", number, 0.9771, "%")
    assert close.hit and "97.7%" in close.summary
    far = score_prediction("50%", number, 0.9771, "%")
    assert not far.hit


def test_checkpoint_size_reveal_shows_the_exact_byte_count():
    """The reveal shows the same figure as the run's panel, not one rounded to 3 digits."""
    sizes = ChoiceAnswer(
        type="choice",
        options=[
            {"text": "About 1 MB", "min": 0, "max": 1500000},
            {"text": "About 3 MB", "min": 1500000, "max": 4500000},
        ],
    )
    s = score_prediction("About 3 MB", sizes, 2828323, "B")
    assert s.hit and s.summary == "you chose 'About 3 MB'; measured 2,828,323 B, which is in that range"


def test_an_exact_prediction_says_so():
    from tutor.checks.answers import NumberAnswer

    score = score_prediction("940,584 B", NumberAnswer(type="number", unit="B"), 940584, "B")
    assert score.hit and score.summary.startswith("exactly right")
    near = score_prediction("940,000 B", NumberAnswer(type="number", unit="B"), 940584, "B")
    assert near.hit and near.summary.startswith("within 1%")


def test_choice_miss_says_the_ratio_to_the_number_the_option_names():
    spec = ChoiceAnswer(
        type="choice",
        options=[
            {"text": "about the same", "max": 1.5},
            {"text": "about 3 GB", "min": 1.5, "max": 6},
            {"text": "about 12 GB", "min": 6, "max": 18},
            {"text": "about 24 GB", "min": 18},
        ],
    )
    low = score_prediction("about 3 GB", spec, 12.0, "GB")
    assert not low.hit and low.ratio == 4.0 and low.summary.endswith("which is in 'about 12 GB': 4x what you guessed")
    high = score_prediction("about 24 GB", spec, 12.0, "GB")
    assert high.ratio == 0.5 and high.summary.endswith("your guess was 2x too high")
    same = score_prediction("about the same", spec, 12.0, "GB")  # names no number: its range's edge
    assert same.ratio == 8.0 and same.summary.endswith("8x the top of your range (1.5 GB)")
    assert score_prediction("about 12 GB", spec, 12.0, "GB").hit


def test_a_range_option_is_compared_with_the_edge_the_measurement_lies_beyond():
    # '1.5x to 5x' guesses no one number: 12x is 2.4x its top, not 8x its first number
    spec = ChoiceAnswer(
        type="choice",
        options=[
            {"text": "About the same (below 1.5x)", "min": 0, "max": 1.5},
            {"text": "1.5x to 5x", "min": 1.5, "max": 5},
            {"text": "5x to 10x", "min": 5, "max": 10},
            {"text": "10x or more", "min": 10},
        ],
    )
    above = score_prediction("1.5x to 5x", spec, 12.0, "x")
    assert above.ratio == 12 / 5 and above.summary.endswith(
        "which is in '10x or more': 2.4x the top of your range (5x)"
    )
    below = score_prediction("10x or more", spec, 2.5, "x")
    assert below.ratio == 0.25
    assert below.summary.endswith("which is in '1.5x to 5x': the bottom of your range (10x) was 4x too high")
    assert score_prediction("1.5x to 5x", spec, 3.0, "x").hit


def test_a_yes_no_prediction_of_a_true_false_metric():
    spec = ChoiceAnswer(type="choice", options=["yes", "no"])
    assert score_prediction("no", spec, False).hit and score_prediction("yes", spec, True).hit
    assert not score_prediction("yes", spec, False).hit
    assert "measured no: a match" in score_prediction("2", spec, False).summary


def test_the_edges_a_verdict_turns_at_are_every_options_ends_or_the_numbers_tolerance():
    """What a run is told to decide (measurement.repeats): in the metric's own unit."""
    from tutor.checks import judged_edges

    choice = ChoiceAnswer(
        type="choice",
        options=[
            {"text": "under 2x", "max": 2},
            {"text": "2x to 10x", "min": 2, "max": 10},
            {"text": "over 10x", "min": 10},
        ],
    )
    assert judged_edges(choice) == (2.0, 10.0)
    shares = ChoiceAnswer(type="choice", options=[{"text": "under 10%", "max": 10}, {"text": "10% or more", "min": 10}])
    assert judged_edges(shares, "%") == (0.1,)  # the run reports a share
    number = NumberAnswer(type="number", tolerance=0.5)
    assert judged_edges(number, "x", "3") == pytest.approx((2.0, 6.0))  # 3 / 1.5 and 3 / 0.5
    assert judged_edges(number, "x") == () and judged_edges(number, "x", "lots") == ()
    assert judged_edges(TextAnswer(type="text"), "") == ()


SWEEP = ChoiceAnswer.model_validate(
    {"type": "choice", "options": [{"text": "32 to 128", "max": 129}, {"text": "256 or more", "min": 129}]}
)
TIED = "the batch sizes tied with it"


@pytest.mark.parametrize(
    "answer, interval, hit, undecided, says",
    [
        ("256 or more", (512, 4096), True, False, f"{TIED}: 512 to 4,096, all of them inside that range"),
        ("32 to 128", (512, 4096), False, False, f"{TIED}: 512 to 4,096, all outside it too"),
        ("256 or more", (64, 4096), False, True, f"and {TIED} run 64 to 4,096. It straddles 129"),
    ],
)
def test_a_set_of_tied_settings_is_named_as_one_not_as_an_interval(answer, interval, hit, undecided, says):
    """batch-sweep's fastest batch is the set of batch sizes no run could tell from it: a verdict
    says so, rather than calling 512 to 4,096 an interval (and widens nothing with guard 0)."""
    score = score_prediction(answer, SWEEP, 2048, "", interval=interval, guard=0.0, interval_words=TIED)
    assert (score.hit, score.undecided) == (hit, undecided)
    assert says in score.summary and "interval" not in score.summary.replace("narrow the interval", "")
    assert "widened" not in score.summary
