"""Repeats that stop when the question is decided, or the budget is spent.

The way `torch.utils.benchmark`'s `adaptive_autorange` stops on a precision target: the run looks
at its repeats on a fixed schedule (never after every repeat), and stops at the first look where
the median's interval decides every prediction it will be judged against (no edge of an option,
or of a predicted number's tolerance, inside it once widened by the guard band), or, where it is
told no edges (a run outside a lesson), is narrower than a precision target; or when the next look
would not fit its time.
Looking more than once gives the interval more chances to mislead, so each look's interval is taken
at a confidence that keeps the whole schedule at measurement.intervals.CONFIDENCE (Bonferroni: the
error allowance split over the looks). Pure Python: the clock and the repeats are the caller's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tutor.measurement.intervals import CONFIDENCE, GUARD, MedianInterval, clear_of, median_interval

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
    decided: bool | None = None  # clear of every edge it is judged against; None: told no edges

    @property
    def enough(self) -> bool:
        """Stop here: every edge decided, or (told none) precise enough."""
        return self.precise if self.decided is None else self.decided


def look(
    values: Sequence[float],
    looks: Sequence[int],
    precision: float = PRECISION,
    edges: Sequence[float] = (),
    guard: float = GUARD,
) -> Look:
    """The interval at this look (at the schedule's per-look confidence), whether it is precise
    enough, and, given the `edges` a verdict will judge it against, whether it decides them all."""
    found = median_interval(list(values), per_look(looks))
    decided = None if not edges else (found is not None and not found.short and clear_of(found, edges, guard))
    if found is None or found.median == 0:
        return Look(found, False, decided)
    precise = not found.short and (found.high - found.low) / abs(found.median) <= precision
    return Look(found, precise, decided)
