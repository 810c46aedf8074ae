"""Repeats that stop when the measurement is precise enough, or the budget is spent.

The way `torch.utils.benchmark`'s `adaptive_autorange` stops on a precision target: the run looks
at its repeats on a fixed schedule (never after every repeat), and stops at the first look where
the median's interval is narrower than the target, or when the next look would not fit its time.
Looking more than once gives the interval more chances to mislead, so each look's interval is taken
at a confidence that keeps the whole schedule at measurement.intervals.CONFIDENCE (Bonferroni: the
error allowance split over the looks). Pure Python: the clock and the repeats are the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tutor.measurement.intervals import CONFIDENCE, MedianInterval, median_interval

PRECISION = 0.05  # stop once the interval's width is at most this share of the median


def schedule(minimum: int, most: int) -> tuple[int, ...]:
    """The repeat counts at which a run looks: `minimum`, then half as many more each time (9, 13,
    19, 28, ...), up to `most`."""
    looks = [max(1, minimum)]
    while looks[-1] < most:
        looks.append(min(most, looks[-1] + max(1, looks[-1] // 2)))
    return tuple(looks)


def per_look(looks: Sequence[int], confidence: float = CONFIDENCE) -> float:
    """The confidence each look's interval is taken at, so all of them hold together with `confidence`."""
    return 1 - (1 - confidence) / max(1, len(looks))


@dataclass(frozen=True)
class Look:
    interval: MedianInterval | None
    precise: bool  # narrow enough to stop


def look(values: Sequence[float], looks: Sequence[int], precision: float = PRECISION) -> Look:
    """The interval at this look (at the schedule's per-look confidence) and whether it is precise enough."""
    found = median_interval(list(values), per_look(looks))
    if found is None or found.median == 0:
        return Look(found, False)
    return Look(found, not found.short and (found.high - found.low) / abs(found.median) <= precision)
