"""Device-synchronised timing.

GPU kernels run asynchronously: `time.perf_counter()` around a CUDA call measures the
launch, not the work. Every clock read here synchronises the device first.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def synchronize(device: str) -> None:
    """Wait for all queued work on `device` ("cuda", "cuda:0", "mps", "cpu")."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    elif device == "mps":
        torch.mps.synchronize()


class Stopwatch:
    """Wall-clock seconds between synchronised points.

    >>> sw = Stopwatch("cuda"); ...; seconds = sw.elapsed()
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self.start = self._now()

    def _now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def elapsed(self) -> float:
        return self._now() - self.start

    def restart(self) -> None:
        self.start = self._now()


def timed(fn: Callable[[], object], device: str, *, warmup: int = 1, repeats: int = 3) -> list[float]:
    """Seconds of each of `repeats` calls of `fn`, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sw = Stopwatch(device)
        fn()
        times.append(sw.elapsed())
    return times


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
