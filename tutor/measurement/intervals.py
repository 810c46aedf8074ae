"""A distribution-free confidence interval for the median of repeated measurements, and the
three verdicts it can give a prediction: hit, miss, or undecided.

A prediction is about a typical value (the median of repeats, or of paired ratios where two ways
took turns), so it is judged against an interval for that median, not against the range of single
draws. The interval is read off the sorted repeats by order statistics: [x(k), x(n+1-k)] covers
the true median with probability 1 - 2 P(Binomial(n, 1/2) <= k-1), whatever the distribution of
the repeats, as long as they are independent draws of one quantity. Fewer repeats than the
confidence needs (5 or fewer at 95%) give [min, max] with the coverage it has, marked short.
Experiments report an interval beside their headline as NAME_low and NAME_high (`bounds`), and
tutor/checks/predict.py judges a prediction against it (`judge`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

CONFIDENCE = 0.95
# How far separate runs of one experiment on one machine land beyond one run's interval: the
# factor (less 1) a verdict widens the interval by each way before deciding. A metric measured by
# bench/verdict_study.py carries its own (Metric.guard in its spec: 2% to 54% on a 2-core CPU,
# docs/PERFORMANCE.md); this is the default for one that was not, such as a GPU-only speedup.
GUARD = 0.05


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
    below: float = sum(math.comb(n, i) for i in range(k)) / 2**n  # 2**n is typed Any (n could be < 0)
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


def ratio_interval(top: list[float], bottom: list[float], confidence: float = CONFIDENCE) -> MedianInterval | None:
    """median(top) / median(bottom) for two ways timed one after the other, not in turns, with an
    interval that holds the ratio of the true medians: each median's own interval at half the
    error allowance (Bonferroni: both hold together with at least `confidence`), divided end to end.
    No k-th repeat of one ran beside the k-th of the other, so pairing by index would claim a
    cancelling of noise that never happened. None unless both ways have a positive finite value."""
    split = 1 - (1 - confidence) / 2
    above = median_interval([v for v in top if _positive(v)], split)
    below = median_interval([v for v in bottom if _positive(v)], split)
    if above is None or below is None:
        return None
    held = max(0.0, 1 - (1 - above.coverage) - (1 - below.coverage))
    return MedianInterval(
        above.median / below.median,
        above.low / below.high,
        above.high / below.low,
        held,
        min(above.n, below.n),
        short=above.short or below.short,
    )


def _positive(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def scaled(interval: MedianInterval | None, factor: float) -> MedianInterval | None:
    """The same interval in another unit (a share of a peak, a percentage): every end times `factor` > 0."""
    if interval is None:
        return None
    return MedianInterval(
        interval.median * factor,
        interval.low * factor,
        interval.high * factor,
        interval.coverage,
        interval.n,
        interval.short,
    )


def over_peak(interval: MedianInterval | None, peak: float, typical: float | None = None) -> MedianInterval | None:
    """A rate's interval as a share of a measured peak (MFU): the headline against the peak, and the
    ends carrying the peak's own spread too, from the low end over the peak (the best a sweep
    timed) to the high end over its typical block (where a sweep at another moment lands)."""
    if interval is None or not peak > 0:
        return None
    below = typical if typical is not None and 0 < typical <= peak else peak
    return MedianInterval(
        interval.median / peak,
        interval.low / peak,
        interval.high / below,
        interval.coverage,
        interval.n,
        interval.short,
    )


def bounds(interval: MedianInterval | None) -> tuple[float | None, float | None]:
    """(low, high) as a run reports them beside its headline (NAME_low, NAME_high): (None, None)
    from a single repeat, whose interval is a point that says nothing of the noise."""
    if interval is None or interval.n < 2:
        return None, None
    return interval.low, interval.high


def _confidence(coverage: float) -> str:
    """96%; 99.8% rather than a rounded 100%, which no interval of a few repeats can claim."""
    return f"{coverage:.0%}" if coverage < 0.995 else f"{math.floor(coverage * 1000) / 10:g}%"


def in_words(interval: MedianInterval, show: Callable[[float], str], of: str = "repeats") -> str:
    """'the median of 10 rounds, its 96% interval 1.02x to 1.10x', the interval beside the headline."""
    if interval.n < 2:
        return f"one {of[:-1] if of.endswith('s') else of}: no interval"
    words = (
        f"the median of {interval.n} {of}, its {_confidence(interval.coverage)} interval {show(interval.low)} "
        f"to {show(interval.high)}"
    )
    if interval.short:
        words += f" (their whole range: too few {of} for {CONFIDENCE:.0%})"
    return words


def widened(low: float, high: float, guard: float) -> tuple[float, float]:
    """[low, high] widened by the guard band, by a factor each way (a negative end by its size)."""
    factor = 1 + guard
    return (low / factor if low > 0 else low * factor), (high * factor if high > 0 else high / factor)


class Decision(Enum):
    """What a measurement says of a prediction (tutor.checks.answers.Verdict is a graded answer's feedback)."""

    HIT = "hit"
    MISS = "miss"
    UNDECIDED = "undecided"


def judge(interval: MedianInterval | None, low: float | None, high: float | None, guard: float = 0.0) -> Decision:
    """A prediction that the typical value lies in [low, high] (None: unbounded on that side),
    against `interval` widened by `guard` (how far separate runs on this machine move, as a
    factor: the low end divided by 1 + guard, the high end times it, since timings move by
    factors, not by amounts). Hit: all of it inside; miss: all of it outside; else undecided."""
    if interval is None or guard < 0 or not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return Decision.UNDECIDED
    lo_seen, hi_seen = widened(interval.low, interval.high, guard)
    below = low if low is not None else -math.inf
    above = high if high is not None else math.inf
    if below <= lo_seen and hi_seen <= above:
        return Decision.HIT
    if hi_seen < below or lo_seen > above:
        return Decision.MISS
    return Decision.UNDECIDED


def clear_of(interval: MedianInterval | None, edges: Sequence[float], guard: float = 0.0) -> bool:
    """Whether `interval` (widened by `guard`) decides every prediction bounded by `edges`: no edge
    lies inside it, as the lower or the upper end of a range, so each option is a hit or a miss."""
    return all(
        judge(interval, edge, None, guard) is not Decision.UNDECIDED
        and judge(interval, None, edge, guard) is not Decision.UNDECIDED
        for edge in edges
    )
