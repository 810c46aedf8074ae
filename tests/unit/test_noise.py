"""Verdicts decided by the measurement (issue 37): a prediction is judged against the interval of
the typical value the run reported (NAME_low, NAME_high), widened by this machine's guard band:
a hit when all of it lies inside what the prediction allows, a miss when all of it lies outside,
and otherwise undecided, said as such. Replaces the range rule (a hit anywhere in [lowest,
highest] of the repeats, nothing graded past 2x apart)."""

from __future__ import annotations

import random

import pytest

from tutor.checks import interval_of, score_prediction
from tutor.checks.answers import ChoiceAnswer, NumberAnswer
from tutor.measurement.intervals import GUARD, bounds, median_interval

SPEEDUP = NumberAnswer(type="number", unit="x", min=0, max=1000)
BANDS = ChoiceAnswer.model_validate(
    {
        "type": "choice",
        "options": [
            {"text": "below 1.5x", "min": 0, "max": 1.5},
            {"text": "1.5x to 5x", "min": 1.5, "max": 5},
            {"text": "5x or more", "min": 5},
        ],
    }
)
SYNC = ChoiceAnswer.model_validate(
    {
        "type": "choice",
        "options": [
            {"text": "below 2x", "min": 0, "max": 2},
            {"text": "2x to 10x", "min": 2, "max": 10},
            {"text": "10x to 100x", "min": 10, "max": 100},
            {"text": "100x or more", "min": 100},
        ],
    }
)


def test_the_interval_is_read_from_the_two_metrics_beside_the_one_predicted():
    assert interval_of({"speedup": 3.0, "speedup_low": 2.5, "speedup_high": 3.5}, "speedup") == (2.5, 3.5)
    assert interval_of({"speedup": 3.0}, "speedup") is None
    assert interval_of({"speedup_low": None, "speedup_high": 3.5}, "speedup") is None
    assert interval_of({"speedup_low": 4.0, "speedup_high": 3.5}, "speedup") is None  # nonsense: ignored
    assert interval_of({}, None) is None


def test_an_option_holding_the_whole_interval_is_a_hit_and_one_beside_it_a_miss():
    hit = score_prediction("2", BANDS, 3.0, "x", interval=(2.5, 3.5))
    assert hit.hit and not hit.undecided and "its interval 2.5x to 3.5x, all of it inside that range" in hit.summary
    miss = score_prediction("1", BANDS, 3.0, "x", interval=(2.5, 3.5))
    assert not miss.hit and not miss.undecided and "lies outside it too" in miss.summary


def test_an_interval_across_a_boundary_decides_nothing_for_either_option():
    """The old rule called both neighbours a hit (each range overlapped the repeats)."""
    for typed in ("2", "3"):
        score = score_prediction(typed, BANDS, 5.3, "x", interval=(4.6, 5.9))
        assert score.undecided and not score.hit and score.ratio is None
        assert score.summary.startswith("This machine can't tell yet: measured 5.3x")
        assert "It straddles 5x" in score.summary and "stays locked, and no try was used" in score.summary
    assert score_prediction("1", BANDS, 5.3, "x", interval=(4.6, 5.9)).summary  # far from it: a miss
    assert not score_prediction("1", BANDS, 5.3, "x", interval=(4.6, 5.9)).undecided


def test_a_seeded_noisy_measurement_the_old_rule_called_a_hit_is_undecided():
    """Nine repeats of a speedup near 1.5x on a busy machine: the range rule graded both 'below
    1.5x' and '1.5x to 5x' a hit (each overlaps [lowest, highest]); the median's interval straddles 1.5x."""
    rng = random.Random(37)
    repeats = [1.5 * rng.uniform(0.8, 1.3) for _ in range(9)]
    found = median_interval(repeats)
    assert min(repeats) < 1.5 < max(repeats) and found.low < 1.5 < found.high
    low, high = bounds(found)
    for typed in ("1", "2"):
        assert score_prediction(typed, BANDS, found.median, "x", interval=(low, high)).undecided


def test_the_sync_timing_case_the_old_rule_refused_is_graded():
    """gpu-lab's sync-timing on a CPU: every repeat 0.395x to 1.01x, over 2x apart, so the old
    rule said 'too noisy to grade' although the learner's 'below 2x' holds all of it."""
    repeats = [0.395, 0.52, 0.61, 0.74, 0.88, 1.01, 0.93, 0.97, 0.99]
    assert max(repeats) / min(repeats) > 2
    low, high = bounds(median_interval(repeats))
    median = median_interval(repeats).median
    assert score_prediction("below 2x", SYNC, median, "x", interval=(low, high)).hit
    assert not score_prediction("2x to 10x", SYNC, median, "x", interval=(low, high)).undecided


def test_a_number_is_judged_by_its_tolerance_against_the_whole_interval():
    tight = score_prediction("1.0", SPEEDUP, 1.0, "x", interval=(0.97, 1.03))  # 10%: 0.91x to 1.11x
    assert tight.hit and "all of it within your tolerance" in tight.summary
    far = score_prediction("10", SPEEDUP, 1.0, "x", interval=(0.97, 1.03))
    assert not far.hit and not far.undecided and far.summary.startswith("off by 10x")
    edge = score_prediction("1.1", SPEEDUP, 1.0, "x", interval=(0.9, 1.1))  # hit at 1.0, not at 0.9
    assert edge.undecided and "where your tolerance ends" in edge.summary


def test_the_guard_band_keeps_an_interval_that_just_fits_from_deciding():
    inside = 2.0 / (1 + GUARD / 2)  # inside 'below 2x', but not once widened by the guard
    assert score_prediction("below 2x", SYNC, 1.8, "x", interval=(1.7, inside)).undecided
    assert score_prediction("below 2x", SYNC, 1.5, "x", interval=(1.4, 1.6)).hit


def test_without_an_interval_one_measurement_decides_as_before():
    assert score_prediction("2", BANDS, 3.0, "x").hit and not score_prediction("1", BANDS, 3.0, "x").hit
    assert score_prediction("4.2", SPEEDUP, 3.2, "x").summary.startswith("31% too high")


@pytest.mark.parametrize("typed", ["50%", "47%"])
def test_a_share_is_compared_in_percent_with_its_interval(typed):
    share = NumberAnswer(type="number", unit="%", min=0, max=100, tolerance=0.1)
    score = score_prediction(typed, share, 0.49, "%", interval=(0.485, 0.495))
    assert score.hit, score.summary


def test_an_option_with_no_range_is_not_judged_by_an_interval():
    words = ChoiceAnswer.model_validate({"type": "choice", "options": [{"text": "yes"}, {"text": "no"}]})
    assert not score_prediction("yes", words, 3.0, "x", interval=(2.0, 4.0)).undecided
