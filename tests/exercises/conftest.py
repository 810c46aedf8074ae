"""A time limit tested from the moment that matters: `limit_clock` replaces the clock of the module that
keeps a run's time limit (the sandbox, a lesson's grader) with one that a test moves past the limit
once the event it waits for has come (the program is in its loop, every rank is up, the grader
has printed). So the limit never has to cover Python's or torch's start-up, which a loaded machine
can stretch past any fixed figure, and the test does not wait the limit out.

`as_lesson_test`: a built-in lesson's own program graded on the data slice `lesson test` grades
it on, that one grading shared with it (tests/conftest.py's shared_gradings)."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType

import pytest


class LimitClock:
    """time, with monotonic() that jumps a day ahead once `when` (polled where the module polls
    its cancel) says the moment has come. Everything else is the time module's own."""

    DAY = 86_400.0

    def __init__(self) -> None:
        self.skipped = 0.0

    def __getattr__(self, name: str):
        return getattr(time, name)

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def run_out_when(self, event: Callable[[], bool]) -> Callable[[], bool]:
        """A `cancelled` callback that never cancels: the first time `event()` holds, the limit has passed."""

        def cancelled() -> bool:
            if not self.skipped and event():
                self.skipped = self.DAY
            return False

        return cancelled


@pytest.fixture
def limit_clock(monkeypatch) -> Callable[[ModuleType], LimitClock]:
    """limit_clock(module): put a LimitClock in place of `module.time` for this test."""

    def install(module: ModuleType) -> LimitClock:
        assert module.time is time, f"{module.__name__} keeps its time limit some other way"
        clock = LimitClock()
        monkeypatch.setattr(module, "time", clock)
        return clock

    return install


@pytest.fixture
def as_lesson_test(monkeypatch: pytest.MonkeyPatch, shared_gradings: None) -> None:
    """The data slice `lesson test` grades on (its QUICK_LAB): a test that grades one of a built-in
    lesson's programs with accuracy_bars=False, as `lesson test` does without --full, judges the
    grading `lesson test` makes of it in the same session (or makes it for both)."""
    from tutor.authoring.lesson_test import QUICK_LAB

    for key, value in QUICK_LAB.items():
        monkeypatch.setenv(key, value)
