"""tutor.measurement.timing.Stopwatch: synchronised, and time inside `paused()` is left out.

Behaviour only: a paused stopwatch is compared with an unpaused one over the same interval,
so no assertion depends on how fast this machine is.
"""

from __future__ import annotations

import time

import pytest

from tutor.measurement import timing
from tutor.measurement.timing import Stopwatch, median

SLEEP = 0.2


def test_pause_excludes_the_time_spent_inside_it():
    total = Stopwatch("cpu")
    sw = Stopwatch("cpu")
    with sw.paused():
        time.sleep(SLEEP)
    # Both clocks saw the same interval; only `sw` left the sleep out.
    assert total.elapsed() - sw.elapsed() >= SLEEP
    assert sw.elapsed() >= 0


def test_elapsed_is_frozen_while_paused_and_monotonic():
    sw = Stopwatch("cpu")
    readings = [sw.elapsed()]
    with sw.paused():
        inside = sw.elapsed()
        time.sleep(SLEEP / 4)
        assert sw.elapsed() == inside  # nothing counts while paused
        readings.append(inside)
    for _ in range(3):
        readings.append(sw.elapsed())
        with sw.paused():
            readings.append(sw.elapsed())
    readings.append(sw.elapsed())
    assert readings == sorted(readings)


def test_nested_pauses_of_one_stopwatch_count_once():
    total = Stopwatch("cpu")
    sw = Stopwatch("cpu")
    with sw.paused(), sw.paused():
        time.sleep(SLEEP)
    # Counting the sleep twice would subtract more than really passed.
    assert sw.elapsed() >= 0
    assert total.elapsed() - sw.elapsed() >= SLEEP


def test_pause_ends_when_the_block_raises():
    sw = Stopwatch("cpu")
    with pytest.raises(GeneratorExit), sw.paused():
        raise GeneratorExit  # what a consumer closing the experiment's generator raises
    before = sw.elapsed()
    time.sleep(SLEEP / 4)
    assert sw.elapsed() > before  # counting again


def test_every_clock_read_and_pause_entry_synchronises(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(timing, "synchronize", calls.append)
    sw = Stopwatch("cuda:1")
    assert calls == ["cuda:1"]  # the start
    sw.elapsed()
    assert len(calls) == 2
    with sw.paused():
        assert len(calls) == 3  # on entry: queued work before the pause is timed
    assert len(calls) == 4  # on exit: work queued inside the pause is not


def test_restart_forgets_pauses():
    sw = Stopwatch("cpu")
    with sw.paused():
        time.sleep(SLEEP / 4)
    sw.restart()
    assert sw.elapsed() >= 0  # keeping the excluded sleep would make this about -SLEEP/4


def test_median():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([]) != median([])  # NaN for no values


@pytest.mark.parametrize(
    "device,waits_on",
    [
        ("mps", "mps"),
        ("mps:0", "mps"),  # "mps:0" is how an MPS tensor prints its device
        ("cuda", "cuda"),
        ("cuda:1", "cuda"),
        ("cpu", None),
    ],
)
def test_synchronize_waits_on_the_device_type_however_it_is_spelled(monkeypatch, device, waits_on):
    import torch

    waited = []
    monkeypatch.setattr(torch.mps, "synchronize", lambda: waited.append("mps"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda d=None: waited.append("cuda"))
    timing.synchronize(device)
    timing.synchronize(torch.device(device))
    assert waited == ([waits_on] * 2 if waits_on else [])


def test_paired_ratios_divide_the_repeats_that_ran_side_by_side():
    assert timing.paired_ratios([2.0, 9.0], [1.0, 3.0]) == [2.0, 3.0]
    assert timing.paired_ratios([2.0], [0.0]) == []  # no division by a zero time
    with pytest.raises(ValueError):
        timing.paired_ratios([1.0, 2.0], [1.0])


class FakeClock:
    """perf_counter for timing.py that moves only when a timed call says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def call(self, seconds: float, then=None):
        def fn():
            self.now += seconds
            if then is not None:
                then()

        return fn


def test_ways_in_turns_are_warmed_up_until_steady_then_alternate_each_repeat(monkeypatch):
    calls: list[str] = []
    synced: list[str] = []
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", clock)
    monkeypatch.setattr(timing, "synchronize", lambda device: synced.append(device))
    warmed: dict = {}
    times = timing.seconds_in_turns(
        {"a": clock.call(0.01, lambda: calls.append("a")), "b": clock.call(0.02, lambda: calls.append("b"))},
        "cuda",
        repeats=3,
        calls=2,
        warmup=1,
        warmed=warmed,
    )
    # steady calls settle at once: two looks of 3 calls each, then the ways take turns
    assert calls == ["a"] * 6 + ["b"] * 6 + ["a", "a", "b", "b"] * 3
    assert times == {"a": [pytest.approx(0.01)] * 3, "b": [pytest.approx(0.02)] * 3}
    assert warmed["a"].settled and len(warmed["a"].times) == 6
    assert synced == ["cuda"] * (2 * 12 + 12)  # around every warm-up call and every timing


def test_a_warm_up_runs_until_the_call_times_stop_falling(monkeypatch):
    """Issue 37: not a fixed count. 40 ms, 10 ms, 3 ms, then 2 ms: 8 calls until the last three's
    median is no longer below the three before; and one that keeps speeding up stops at its cap."""
    clock = FakeClock()
    monkeypatch.setattr(timing, "time", clock)
    monkeypatch.setattr(timing, "synchronize", lambda device: None)
    durations = iter([0.040, 0.010, 0.003] + [0.002] * 20)
    done = timing.warm_up(lambda: clock.call(next(durations))(), "cpu")
    assert len(done.times) == 8 and done.settled
    assert done.first == pytest.approx(0.040) and done.last == pytest.approx(0.002)
    assert done.words(lambda s: f"{s * 1000:.0f} ms") == (
        "8 untimed calls until their times stopped falling (the first took 40 ms, the last 2 ms)"
    )
    halving = iter(0.1 / 2**k for k in range(100))
    capped = timing.warm_up(lambda: clock.call(next(halving))(), "cpu", maximum=10)
    assert len(capped.times) == 10 and not capped.settled
    assert "still falling at the cap" in capped.words(str)


def test_pytorchs_timer_times_with_this_process_threads_and_synchronises_each_clock_read(monkeypatch):
    """Issue 37 item 5: torch.utils.benchmark's Timer defaults to one thread; timed_blocks passes the
    process's own, keeps them afterwards, and every clock read waits on the device."""
    import torch

    seen, synced = [], []
    monkeypatch.setattr(timing, "synchronize", lambda device: synced.append(device))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        blocks = timing.timed_blocks(lambda: seen.append(torch.get_num_threads()), "cpu", 3, 0.05)
        assert set(seen) == {2} and torch.get_num_threads() == 2
        assert blocks.times and all(t > 0 for t in blocks.times) and blocks.best == min(blocks.times)
        assert blocks.calls >= 1 and synced and set(synced) == {"cpu"}
        one = timing.timed_blocks(lambda: seen.append(torch.get_num_threads()), "cpu", 3, 0.05, threads=1)
        assert seen[-1] == 1 and torch.get_num_threads() == 2 and one.times
    finally:
        torch.set_num_threads(before)


def test_a_slow_call_is_timed_once_past_the_budget_not_refused():
    """An operation longer than its budget still gets its block: the best of one is a measurement."""
    blocks = timing.timed_blocks(lambda: time.sleep(0.03), "cpu", 9, 0.01)
    assert 1 <= len(blocks.times) <= 2 and blocks.best >= 0.03


def test_blocks_sized_as_long_as_the_run_still_come_to_the_repeats_asked(monkeypatch):
    """A slow clock read while the Timer sizes its blocks can make one block fill the whole run
    time: one block says nothing of the spread, so more of that size follow, within the budget."""
    from torch.utils.benchmark import Timer

    real = Timer._estimate_block_size
    monkeypatch.setattr(Timer, "_estimate_block_size", lambda self, min_run_time: max(real(self, min_run_time), 50))
    blocks = timing.timed_blocks(lambda: time.sleep(0.001), "cpu", 4, 2.0)
    assert blocks.calls == 50 and len(blocks.times) >= 4
