"""The median's interval and the three verdicts (tutor/measurement/intervals.py), against
intervals and coverages worked out by hand."""

from __future__ import annotations

import math

import pytest

from tutor.measurement.intervals import (
    Decision,
    MedianInterval,
    bounds,
    coverage,
    in_words,
    judge,
    median_interval,
    ratio_interval,
    repeats_needed,
    scaled,
)


def test_coverage_of_order_statistics_by_hand():
    assert coverage(6, 1) == pytest.approx(1 - 2 / 64)  # both ends beyond the median: 2 of 64 orders
    assert coverage(5, 1) == pytest.approx(1 - 2 / 32)
    assert coverage(9, 2) == pytest.approx(1 - 2 * (1 + 9) / 512)
    assert coverage(1, 1) == 0.0  # one repeat says nothing about where the median is
    with pytest.raises(ValueError):
        coverage(4, 3)


def test_six_repeats_are_the_fewest_for_95_percent():
    assert repeats_needed(0.95) == 6 and repeats_needed(0.90) == 5


def test_nine_repeats_give_the_second_smallest_to_the_second_largest():
    found = median_interval([7, 1, 9, 3, 5, 2, 8, 4, 6])
    assert found == MedianInterval(5.0, 2, 8, pytest.approx(0.9609375), 9, short=False)


def test_too_few_repeats_give_their_range_and_say_so():
    found = median_interval([3.0, 1.0, 2.0, 4.0, 5.0])
    assert (found.low, found.high, found.median, found.short) == (1.0, 5.0, 3.0, True)
    assert found.coverage == pytest.approx(0.9375)
    one = median_interval([2.5])
    assert (one.low, one.high, one.coverage, one.short) == (2.5, 2.5, 0.0, True)


def test_an_even_count_has_the_middle_pair_as_median_and_nan_is_no_repeat():
    found = median_interval([1.0, 2.0, math.nan, 3.0, 10.0, 4.0, 5.0])
    assert found.n == 6 and found.median == 3.5 and (found.low, found.high) == (1.0, 10.0)
    assert median_interval([math.nan, math.inf]) is None and median_interval([]) is None


@pytest.mark.parametrize(
    "low, high, verdict",
    [
        (1.0, 2.0, Decision.HIT),  # all of [1.2, 1.6] inside
        (2.0, None, Decision.MISS),  # all of it below 2
        (None, 1.0, Decision.MISS),
        (1.5, 3.0, Decision.UNDECIDED),  # the boundary 1.5 falls inside the interval
        (None, None, Decision.HIT),
    ],
)
def test_inside_outside_straddling(low, high, verdict):
    interval = MedianInterval(1.4, 1.2, 1.6, 0.96, 9, False)
    assert judge(interval, low, high) is verdict


def test_the_guard_band_widens_before_deciding():
    interval = MedianInterval(1.9, 1.8, 1.95, 0.96, 9, False)
    assert judge(interval, None, 2.0) is Decision.HIT
    assert judge(interval, None, 2.0, guard=0.05) is Decision.UNDECIDED  # 1.95 x 1.05 > 2


def test_all_equal_repeats_decide_at_once_and_nothing_measured_decides_nothing():
    same = median_interval([3.0] * 6)
    assert judge(same, 2.0, 4.0) is Decision.HIT and judge(same, 4.0, None) is Decision.MISS
    assert judge(None, 1.0, 2.0) is Decision.UNDECIDED


def test_the_sync_timing_repeats_grade_a_hit_where_the_range_rule_refused():
    """gpu-lab's sync-timing: every repeat (0.395x to 1.01x) below 2x, more than 2x apart, so the
    old rule said 'too noisy'; the median's interval lies inside 'below 2x'."""
    repeats = [0.395, 0.52, 0.61, 0.74, 0.88, 1.01]
    assert max(repeats) / min(repeats) > 2
    assert judge(median_interval(repeats), None, 2.0) is Decision.HIT
    assert judge(median_interval(repeats), 0.5, None) is Decision.UNDECIDED  # 0.5 lies inside it


def test_two_ways_timed_one_after_the_other_divide_their_median_intervals_end_to_end():
    found = ratio_interval([4.0, 2.0, 3.0], [1.0, 2.0, 1.5])
    assert found.median == pytest.approx(3.0 / 1.5)
    assert (found.low, found.high) == (pytest.approx(2.0 / 2.0), pytest.approx(4.0 / 1.0))
    assert found.short and found.n == 3  # 3 each: each median's interval is their range, 75% only
    many = ratio_interval([2.0] * 9 + [50.0], [1.0] * 10)
    assert many.high == pytest.approx(2.0) and not many.short  # a stray repeat is not the interval's end
    assert ratio_interval([2.0, math.nan], [1.0, 0.0]) is not None  # NaN and 0 are dropped, one each is left
    assert ratio_interval([], [1.0]) is None and ratio_interval([2.0], [0.0]) is None


def test_bounds_of_one_repeat_say_nothing_and_scaling_moves_every_end():
    assert bounds(median_interval([2.0])) == (None, None) and bounds(None) == (None, None)
    assert bounds(median_interval([1.0, 3.0])) == (1.0, 3.0)
    shown = scaled(median_interval([1.0, 2.0, 3.0]), 100)
    assert (shown.low, shown.median, shown.high) == (100.0, 200.0, 300.0)


def test_an_interval_in_words_names_its_repeats_coverage_and_ends():
    words = in_words(median_interval([1.0, 1.1, 1.2, 1.0, 1.3, 1.1, 1.2, 1.0, 1.1]), lambda v: f"{v:.1f}x", "rounds")
    assert words == "the median of 9 rounds, its 96% interval 1.0x to 1.2x"
    assert "too few rounds" in in_words(median_interval([1.0, 2.0, 3.0]), str, "rounds")
    whole = median_interval([1.0, 1.1, 1.2, 1.0, 1.3, 1.1, 1.2, 1.0, 1.1, 1.2], 0.99)  # min to max: 99.8%
    assert "its 99.8% interval" in in_words(whole, str) and "100%" not in in_words(whole, str)


def test_steady_means_the_last_three_calls_no_longer_beat_the_three_before():
    from tutor.measurement.warmup import steady

    assert not steady([5.0] * 5)  # two looks of 3 need 6 calls
    assert steady([5.0] * 6) and steady([1, 1, 1, 1, 1, 1.2])
    assert not steady([10, 5, 3, 1, 1, 1])  # the last three's median (1) is far below the three before (5)
    assert steady([2.0, 2.0, 2.0, 1.95, 1.95, 1.95])  # 2.5% faster: within the 5% allowed


def test_repeats_look_on_a_fixed_schedule_each_look_at_its_share_of_the_confidence():
    from tutor.measurement.repeats import look, per_look, schedule

    assert schedule(9, 40) == (9, 13, 19, 28, 40) and schedule(2, 2) == (2,) and schedule(9, 9) == (9,)
    assert per_look((9, 13, 19, 28, 40)) == pytest.approx(0.99) and per_look((9,)) == pytest.approx(0.95)
    looks = (9, 13, 19, 28, 40)
    tight = look([1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01, 0.99], looks)
    assert tight.precise and tight.interval.coverage >= 0.99  # [min, max] of 9: 99.6%
    wide = look([0.8, 1.2, 1.0, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0], looks)
    assert not wide.precise  # 40% wide: measure more
    assert not look([1.0, 1.0], looks).precise  # too few for the confidence: never precise
    assert not look([], looks).precise and look([], looks).interval is None


def test_an_interval_clear_of_every_edge_decides_every_option():
    from tutor.measurement.intervals import clear_of

    interval = MedianInterval(1.0, 0.95, 1.05, 0.95, 9, False)
    assert clear_of(interval, [0.5, 2.0]) and clear_of(interval, [])
    assert not clear_of(interval, [0.5, 1.02])  # an edge inside: that option is undecided
    assert not clear_of(interval, [1.1], guard=0.10)  # 1.05 x 1.1 reaches past 1.1 once widened
    assert clear_of(interval, [1.1], guard=0.04)
    assert not clear_of(None, [2.0]) and clear_of(None, [])  # nothing measured decides nothing, if asked


def test_told_the_edges_a_look_stops_once_they_are_decided_not_once_it_is_precise():
    """Issue 37 item 2: stop when the interval decides every option. A wide interval far from every
    edge is enough; a precise one with an edge inside it is not; told none, precision decides."""
    from tutor.measurement.repeats import look

    looks = (9, 13, 19, 28, 40)
    wide = [0.8, 1.2, 1.0, 0.9, 1.1, 1.0, 0.95, 1.05, 1.0]
    tight = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01, 0.99]
    assert look(wide, looks, edges=(2.0, 10.0)).enough and not look(wide, looks).enough
    straddled = look(tight, looks, edges=(1.0,))
    assert straddled.precise and straddled.decided is False and not straddled.enough
    assert look(tight, looks).decided is None and look(tight, looks).enough
    assert not look([1.0, 1.0], looks, edges=(5.0,)).enough  # too few repeats for the confidence


def test_a_share_of_a_measured_peak_carries_the_peaks_own_spread():
    """MFU = achieved / peak: the headline over the peak (the best block a sweep timed), the high
    end over its typical block too, where a sweep at another moment lands."""
    from tutor.measurement.intervals import over_peak

    achieved = MedianInterval(0.02, 0.018, 0.022, 0.96, 9, False)
    share = over_peak(achieved, 0.1, 0.08)
    assert (share.median, share.low, share.high) == pytest.approx((0.2, 0.18, 0.275))
    assert over_peak(achieved, 0.1).high == pytest.approx(0.22)  # spread unknown: the run's own
    assert over_peak(achieved, 0.1, 0.5).high == pytest.approx(0.22)  # a typical above the best is no spread
    assert over_peak(None, 0.1) is None and over_peak(achieved, 0.0) is None
