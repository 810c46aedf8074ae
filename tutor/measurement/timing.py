"""Device-synchronised timing.

GPU kernels run asynchronously: `time.perf_counter()` around a CUDA call measures the
launch, not the work. Every clock read here synchronises the device first.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from tutor.measurement.warmup import WarmUp, steady


def synchronize(device: Any) -> None:
    """Wait for all queued work on `device` ("cuda", "cuda:0", "mps", "mps:0" as an MPS tensor
    prints its device, "cpu", or a torch.device): decided by the device's type, not its spelling."""
    import torch

    kind = str(device).split(":", 1)[0]
    if kind == "cuda":
        torch.cuda.synchronize(device)
    elif kind == "mps":
        torch.mps.synchronize()


class Stopwatch:
    """Wall-clock seconds between synchronised points, minus the time spent in `paused()`.

    >>> sw = Stopwatch("cuda"); ...; seconds = sw.elapsed()

    Experiments are generators: between `yield` and the next `next()` the UI or a test runs,
    and that time is not training. Wrap each yield in `with sw.paused():`.
    """

    def __init__(self, device: str) -> None:
        self.device = device
        self._excluded = 0.0  # seconds spent in finished pauses
        self._paused_at: float | None = None  # set while inside the outermost pause
        self._depth = 0
        self.start = self._now()

    def _now(self) -> float:
        synchronize(self.device)
        return time.perf_counter()

    def elapsed(self) -> float:
        """Timed seconds so far (frozen at the pause's start while paused)."""
        now = self._paused_at if self._paused_at is not None else self._now()
        return now - self.start - self._excluded

    def restart(self) -> None:
        self._excluded = 0.0
        self._paused_at = None
        self._depth = 0
        self.start = self._now()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Leave the block's time out of `elapsed()`.

        Synchronises on entry, so device work queued before the pause is counted as timed,
        and on exit, so work queued inside the pause (an evaluation) is not. Nested pauses
        of the same stopwatch count once.
        """
        self._depth += 1
        if self._depth == 1:
            self._paused_at = self._now()
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                assert self._paused_at is not None
                self._excluded += self._now() - self._paused_at
                self._paused_at = None


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def paired_ratios(top: list[float], bottom: list[float]) -> list[float]:
    """top[k] / bottom[k] for two ways timed in turns: the k-th repeat of each ran at about the
    same moment, so a slow moment of the machine falls on both and mostly cancels in the ratio."""
    return [t / b for t, b in zip(top, bottom, strict=True) if b and t is not None]


# A warm-up's caps: it stops when its times settle, or after this many calls or seconds (a way that
# keeps speeding up still leaves the step within its minute; its WarmUp says it had not settled).
WARMUP_MAX_CALLS = 30
WARMUP_MAX_S = 2.0


def warm_up(
    fn: Callable[[], Any],
    device: Any,
    minimum: int = 1,
    maximum: int = WARMUP_MAX_CALLS,
    budget_s: float = WARMUP_MAX_S,
) -> WarmUp:
    """Call `fn` untimed (for the measurement; each call is clocked, synchronised, for the rule)
    until its times stop falling (measurement.warmup.steady), `minimum` calls at least, and at
    most `maximum` calls or `budget_s` seconds."""
    times: list[float] = []
    started = time.perf_counter()
    while True:
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
        if len(times) >= minimum and (
            steady(times) or len(times) >= maximum or time.perf_counter() - started >= budget_s
        ):
            return WarmUp(tuple(times), steady(times))


def seconds_in_turns(
    ways: dict[str, Callable[[], Any]],
    device: Any,
    repeats: int,
    calls: int,
    warmup: int = 1,
    warmed: dict[str, WarmUp] | None = None,
) -> dict[str, list[float]]:
    """Seconds per call of each way, `repeats` times, the ways taking turns (a, b, a, b, ...).

    Each way is first warmed up untimed until its call times stop falling, `warmup` calls at
    least (`warm_up`; what each took goes into `warmed` when given); each repeat then times `calls`
    back-to-back calls, the device synchronised before the clock starts and before it stops.
    Taking turns is what makes the repeats comparable: a slow moment of the machine falls on every
    way instead of on whichever happened to run then."""
    for name, fn in ways.items():
        done = warm_up(fn, device, minimum=warmup)
        if warmed is not None:
            warmed[name] = done
    return take_turns(ways, device, repeats, calls)


def take_turns(
    ways: dict[str, Callable[[], Any]],
    device: Any,
    repeats: int,
    calls: int,
    times: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """`repeats` more rounds of seconds_in_turns (the ways already warm), added to `times`."""
    times = times if times is not None else {name: [] for name in ways}
    for _ in range(repeats):
        for name, fn in ways.items():
            synchronize(device)
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            synchronize(device)
            times[name].append((time.perf_counter() - start) / calls)
    return times


# A timed block of an operation lasts at least this long (unless one call is longer): clock reads
# and a launch's cost vanish beside it.
BLOCK_S = 0.02


@dataclass(frozen=True)
class Blocks:
    """One operation timed by PyTorch's own timer: seconds per call of each block of calls."""

    times: tuple[float, ...]
    calls: int  # calls per block

    @property
    def best(self) -> float:
        return min(self.times)


def _benchmark():
    """torch.utils.benchmark, imported without the warning its import logs on a machine whose
    CUDA_HOME names a toolkit that this torch cannot use (it is about compiling extensions)."""
    import logging

    quiet = logging.getLogger("torch.utils.cpp_extension")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        from torch.utils import benchmark
    finally:
        quiet.setLevel(level)
    return benchmark


def timed_blocks(
    fn: Callable[[], Any], device: Any, repeats: int, budget_s: float, threads: int | None = None
) -> Blocks:
    """`fn` timed with torch.utils.benchmark.Timer: its warm-up calls, then blocked_autorange's
    blocks of back-to-back calls (as many per block as keep its clock's cost under 0.01% of the
    block), for about `repeats` blocks of BLOCK_S or one call, whichever is longer, and never much
    past `budget_s` (one block at least). Every clock read synchronises `device` (the Timer's own
    clock synchronises only the current accelerator). `threads`: the intra-op threads it times
    with, by default this process's; the Timer's own default is one thread, which would time
    another machine than the one the run uses."""
    import torch

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    timer = _benchmark().Timer(
        "fn()", globals={"fn": fn}, timer=clock, num_threads=threads if threads is not None else torch.get_num_threads()
    )
    started = time.perf_counter()
    one = timer.timeit(1).times[0]  # after its own two warm-up calls
    measured = timer.blocked_autorange(min_run_time=max(min(budget_s, repeats * max(BLOCK_S, one)), 1e-6))
    times = list(measured.times)
    # Its block size can come out as long as the whole run time (a clock read that happened to be
    # slow while it sized them asks for long blocks): then it times one block, which says nothing
    # of the spread. More blocks of that size, while the budget lasts, up to `repeats`.
    while len(times) < repeats and time.perf_counter() - started + measured.number_per_run * max(times) < budget_s:
        times.extend(timer.timeit(measured.number_per_run).times)
    return Blocks(tuple(times), measured.number_per_run)
