"""Test doubles. `ScriptedEngine` stands in for the engine process in TUI tests that test the
screens, not the engine: no process, no torch, a run takes milliseconds. Tests of the engine and
of real runs use the real one (tests/experiments, tests/system, `gpututor lesson test`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from tutor import experiments
from tutor.experiments.devices import Device
from tutor.experiments.events import Epoch, Event, Finished, Started, Step, Waiting

TEST_CPU = Device("cpu", None, "Test CPU", threads=1, cores=2)


class ScriptedEngine:
    """Says this machine is a CPU and plays each run as: Started, `steps` Steps, one Epoch, then
    Finished with the metrics the test gave for that experiment (each metric the experiment
    declares is None otherwise: "not measured", never a made-up number).

    `fail={"train": "why"}` ends that experiment's runs as failed; `hold=True` keeps a run going
    until it is cancelled (for escape, quit and navigation tests); `events={"train": [Table(...)]}`
    sends those events too, after the Epoch (a table or note the experiment would report)."""

    def __init__(
        self,
        metrics: dict[str, dict[str, Any]] | None = None,
        *,
        fail: dict[str, str] | None = None,
        hold: bool = False,
        steps: int = 3,
        pace_s: float = 0.0,
        ranks: int = 0,
        events: dict[str, list[Event]] | None = None,
        in_line: tuple[int, int] | None = None,
    ) -> None:
        self.metrics = metrics or {}
        # (running, waiting ahead): each run first waits in a class's line, its choice offered at
        # once, until cancelled or run now (then its metrics say timing_shared)
        self.in_line = in_line
        self.fail = fail or {}
        self.hold = hold
        self.steps = steps
        self.pace_s = pace_s  # seconds between steps (the UI throttles Step events it gets faster)
        self.ranks = ranks  # > 0: each step comes from every rank of a distributed run ("rank 0", ...)
        self.events = events or {}
        self.runs: list[tuple[str, dict[str, Any], str | None]] = []  # (experiment, params, device) asked for
        self.closed = False
        self.running = threading.Event()

    def detect(self, requested: str | None) -> tuple[list[Device], Device, str | None]:
        return [TEST_CPU], TEST_CPU, None

    def run(
        self,
        name: str,
        params: dict[str, Any],
        device: str | None,
        cancelled: Callable[[], bool],
        run_now: Callable[[], bool] | None = None,
    ) -> Iterator[tuple]:
        self.runs.append((name, dict(params), device))
        self.running.set()
        shared = {}
        try:
            waited = 0.0
            while self.in_line is not None:
                if cancelled() or self.closed:
                    yield ("ended", "cancelled", None)
                    return
                if run_now is not None and run_now():
                    shared = {"timing_shared": True}
                    break
                yield ("event", Waiting("cpu", "the CPU", self.in_line[1], self.in_line[0], waited, True))
                time.sleep(0.02)
                waited += 0.02
            yield ("event", Started(name, "cpu", TEST_CPU.name, "scripted (no data)"))
            for i in range(1, self.steps + 1):
                if cancelled():
                    yield ("ended", "cancelled", None)
                    return
                if self.ranks:
                    for r in range(self.ranks):
                        yield ("event", Step(i, self.steps, 2.3 / i + r, i * 0.01, 1000.0, label=f"rank {r}"))
                else:
                    yield ("event", Step(i, self.steps, 2.3 / i, i * 0.01, 1000.0))
                time.sleep(self.pace_s)
            while self.hold:
                if cancelled() or self.closed:
                    yield ("ended", "cancelled", None)
                    return
                time.sleep(0.01)
            if name in self.fail:
                yield ("ended", "failed", self.fail[name])
                return
            yield ("event", Epoch(1, 1, 0.5, 0.9, 0.03, 1000.0))
            for event in self.events.get(name, []):
                yield ("event", event)
            declared = experiments.get(name).metrics
            yield ("event", Finished({**{m: None for m in declared}, **self.metrics.get(name, {}), **shared}))
            yield ("ended", "finished", None)
        finally:
            self.running.clear()

    def close(self, timeout: float = 0.3) -> None:
        self.closed = True

    @property
    def pid(self) -> int | None:
        return None


class ScriptedGrader:
    """Stands in for the exercise sandbox in TUI tests of the screens: the step's own solution
    passes every requirement, any other code fails them all, and no process starts. Whether the
    real solutions pass and the mistakes fail is `gpututor lesson test`'s job (tests/system)."""

    def __init__(self) -> None:
        self.graded: list[str] = []  # the code each run was asked to grade

    def __call__(
        self,
        step: Any,
        code: str,
        workdir: Any,
        *,
        on_output: Callable[[str], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
        accuracy_bars: bool = True,
    ) -> Any:
        from tutor.exercises.grader import ExerciseResult, RequirementResult
        from tutor.exercises.sandbox import SandboxResult

        self.graded.append(code)
        passed = code.strip() == (step.solution or "").strip()
        if on_output is not None:
            on_output("scripted: no program ran\n")
        requirements = [
            RequirementResult(r.id, r.type, passed, "" if passed else "not met (scripted)", title=r.title)
            for r in step.requirements
        ]
        summary = f"all {len(requirements)} requirements met" if passed else "scripted: not the solution"
        return ExerciseResult(passed, requirements, SandboxResult(exit_code=0), summary)
