"""Warm-up until steady: untimed calls until their times stop falling, not a fixed count.

A way's first calls pay costs paid once (the allocator, kernel selection, caches; on a GPU the
first CUDA call, cuBLAS handles, cudnn autotuning, torch.compile's compilation) that are not what
its timing is about, and how many calls that takes depends on the machine and the way. The rule is
pure Python; the clock is the caller's (tutor/measurement/timing.py `warm_up`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WINDOW = 3  # calls per look: the median of the last WINDOW against the WINDOW before them
FALLING = 0.05  # still warming while the last look's median is this much below the one before


def steady(times: Sequence[float], window: int = WINDOW, falling: float = FALLING) -> bool:
    """True once the call times stop falling: the median of the last `window` calls is not more
    than `falling` below the median of the `window` before them (so 2 x window calls at least)."""
    if window < 1 or len(times) < 2 * window:
        return False
    last = statistics.median(times[-window:])
    before = statistics.median(times[-2 * window : -window])
    return last >= before * (1 - falling)


@dataclass(frozen=True)
class WarmUp:
    """The untimed calls a way made before it was timed, and whether their times settled."""

    times: tuple[float, ...]
    settled: bool  # False: it stopped at its cap (calls or seconds) with the times still falling

    @property
    def first(self) -> float:
        return self.times[0]

    @property
    def last(self) -> float:
        return statistics.median(self.times[-WINDOW:])

    def words(self, show: Callable[[float], str], noun: str = "call") -> str:
        """'8 untimed calls until their times stopped falling (the first took 41 ms, the last 2.1 ms)'."""
        n = len(self.times)
        if not n:
            return f"no untimed {noun}s"
        how = "until their times stopped falling" if self.settled else "(their times were still falling at the cap)"
        return (
            f"{n} untimed {noun}{'s' if n != 1 else ''} {how} (the first took {show(self.first)}, "
            f"the last {show(self.last)})"
        )
