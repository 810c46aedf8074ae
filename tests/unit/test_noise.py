"""Measurements that know their noise (issue 26, part 5): a prediction is graded against the
interval the run's repeats covered, and not at all when they spread too far."""

from __future__ import annotations

import pytest

from checks import score_prediction, spread_of
from checks.predict import NOISY_SPREAD
from checks.spec import ChoiceAnswer, NumberAnswer

SPEEDUP = NumberAnswer(type="number", unit="x", min=0, max=1000)
BANDS = ChoiceAnswer.model_validate({"type": "choice", "options": [
    {"text": "below 1.5x", "min": 0, "max": 1.5}, {"text": "1.5x to 5x", "min": 1.5, "max": 5},
    {"text": "5x or more", "min": 5}]})


def test_the_spread_is_read_from_the_two_metrics_beside_the_one_predicted():
    assert spread_of({"speedup": 3.0, "speedup_low": 2.5, "speedup_high": 3.5}, "speedup") == (2.5, 3.5)
    assert spread_of({"speedup": 3.0}, "speedup") is None
    assert spread_of({"speedup_low": None, "speedup_high": 3.5}, "speedup") is None
    assert spread_of({"speedup_low": 4.0, "speedup_high": 3.5}, "speedup") is None  # nonsense: ignored
    assert spread_of({}, None) is None


def test_a_number_inside_the_repeats_is_a_hit_that_one_draw_would_have_missed():
    alone = score_prediction("4.2", SPEEDUP, 3.2, "x")
    assert not alone.hit
    noisy_aware = score_prediction("4.2", SPEEDUP, 3.2, "x", spread=(2.9, 4.1))
    assert noisy_aware.hit and noisy_aware.summary.startswith("within this run's noise")
    assert "the repeats ranged 2.9x to 4.1x" in noisy_aware.summary
    miss = score_prediction("10", SPEEDUP, 3.2, "x", spread=(2.9, 4.1))
    assert not miss.hit and not miss.noisy and "the repeats ranged 2.9x to 4.1x" in miss.summary


def test_an_option_the_interval_reaches_is_a_hit():
    assert not score_prediction("2", BANDS, 5.3, "x").hit
    assert score_prediction("2", BANDS, 5.3, "x", spread=(4.6, 5.9)).hit  # the repeats straddle 5x
    assert not score_prediction("1", BANDS, 5.3, "x", spread=(4.6, 5.9)).hit


def test_repeats_too_far_apart_are_not_graded_and_say_why():
    score = score_prediction("2", BANDS, 3.0, "x", spread=(1.2, 1.2 * NOISY_SPREAD * 1.1))
    assert score.noisy and not score.hit and score.ratio is None
    assert score.summary.startswith("Too noisy to grade") and "run it again (r)" in score.summary
    assert "stays locked" in score.summary


@pytest.mark.parametrize("typed", ["50%", "47%"])
def test_a_share_is_compared_in_percent_with_its_spread(typed):
    share = NumberAnswer(type="number", unit="%", min=0, max=100, tolerance=0.01)
    assert score_prediction(typed, share, 0.47, "%", spread=(0.45, 0.52)).hit
