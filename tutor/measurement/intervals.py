"""A distribution-free confidence interval for the median of repeated measurements, and the
three verdicts it can give a prediction: hit, miss, or undecided.

A prediction is about a typical value (the median of repeats, or of paired ratios where two ways
took turns), so it is judged against an interval for that median, not against the range of single
draws. The interval is read off the sorted repeats by order statistics: [x(k), x(n+1-k)] covers
the true median with probability 1 - 2 P(Binomial(n, 1/2) <= k-1), whatever the distribution of
the repeats, as long as they are independent draws of one quantity. Fewer repeats than the
confidence needs (5 or fewer at 95%) give [min, max] with the coverage it has, marked short.
Not yet wired into grading: checks/predict.py still applies the range rule until it moves here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

CONFIDENCE = 0.95


@dataclass(frozen=True)
class MedianInterval:
    median: float
    low: float
    high: float
    coverage: float  # the probability this interval holds the true median (order statistics)
    n: int  # repeats it was read from
    short: bool  # fewer repeats than the confidence asked for: [min, max], of `coverage` only


def coverage(n: int, k: int) -> float:
    """How often [x(k), x(n+1-k)] of n sorted independent repeats holds the true median."""
    if not 1 <= k <= (n + 1) // 2:
        raise ValueError(f"k={k} is not an order statistic pair of {n} repeats")
    below = sum(math.comb(n, i) for i in range(k)) / 2 ** n
    return 1.0 - 2.0 * below


def repeats_needed(confidence: float = CONFIDENCE) -> int:
    """The fewest repeats whose [min, max] covers the median with `confidence` (6 at 95%)."""
    n = 1
    while coverage(n, 1) < confidence:
        n += 1
    return n


def median_interval(values: list[float], confidence: float = CONFIDENCE) -> MedianInterval | None:
    """The narrowest order-statistic interval with at least `confidence` coverage; None when no
    value is a finite number (nothing was measured)."""
    finite = sorted(v for v in values if isinstance(v, (int, float)) and math.isfinite(v))
    if not finite:
        return None
    n = len(finite)
    middle = (finite[(n - 1) // 2] + finite[n // 2]) / 2
    k = 1
    while k + 1 <= (n + 1) // 2 and coverage(n, k + 1) >= confidence:
        k += 1
    held = coverage(n, k)
    return MedianInterval(middle, finite[k - 1], finite[n - k], held, n, short=held < confidence)


class Verdict(Enum):
    HIT = "hit"
    MISS = "miss"
    UNDECIDED = "undecided"


def judge(interval: MedianInterval | None, low: float | None, high: float | None,
          guard: float = 0.0) -> Verdict:
    """A prediction that the typical value lies in [low, high] (None: unbounded on that side),
    against `interval` widened by `guard` (a share of its own magnitude: how far separate runs on
    this machine move). Hit: all of it inside; miss: all of it outside; else undecided."""
    if interval is None or guard < 0 or not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return Verdict.UNDECIDED
    lo_seen = interval.low - guard * abs(interval.low)
    hi_seen = interval.high + guard * abs(interval.high)
    below = low if low is not None else -math.inf
    above = high if high is not None else math.inf
    if below <= lo_seen and hi_seen <= above:
        return Verdict.HIT
    if hi_seen < below or lo_seen > above:
        return Verdict.MISS
    return Verdict.UNDECIDED
