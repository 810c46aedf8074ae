"""An exercise's `inspect` requirements: the learner's program watched as `gpututor inspect` watches
a script (tutor/inspect/), its findings and its step time judged against the starter's own run.

The starter is watched right after the learner's program, so the two runs see the same machine: a
run kept from minutes before had drifted (the starter against its own kept run: 1.10x, 1.06 to
1.39x). Back to back on a quiet machine, eight starter runs differed by at most 5% (two of fourteen
pairs' intervals missed 1.0, by 0.4% and 0.3%: the guard band covers that). A run is reused only
within a minute (`lesson test` grading the solution and each mistake in a row). The speed-up is a
ratio of two runs timed one after the other, with the interval `intervals.ratio_interval` gives
it, widened by the guard band: hit, miss, or not told apart yet.
"""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.course.lesson import ExerciseStep, InspectRequirement
from tutor.measurement.intervals import GUARD, Decision, judge, ratio_interval

WARMUP, STEPS = 3, 20  # what `gpututor inspect` watches by default
STARTER_KEEP_S = 60.0  # a starter's run older than this is watched again, beside the learner's
LEARNER_FILE = "inspected.py"
STARTER_FILE = "starter_inspected.py"


@dataclass
class Watched:
    """One watched run: the report (tutor/inspect/findings.py) and each timed step's seconds."""

    report: Any
    step_seconds: list[float]
    timing_shared: bool = False  # it ran beside another run on a class's machine (measurement/slots.py)
    batch: int | None = None  # samples a step: the model's inputs' first dimension, summed over the step
    at: float = field(default_factory=time.monotonic)

    def per_sample(self, other: Watched) -> tuple[list[float], bool]:
        """Its step times, per sample where its batch and `other`'s differ (so a smaller batch is no
        speed-up), and whether they did."""
        if self.batch and other.batch and self.batch != other.batch:
            return [t / self.batch for t in self.step_seconds], True
        return self.step_seconds, False


_starters: dict[str, Watched] = {}


def forget_starter_runs() -> None:
    """The next grading watches its starter again (lesson test's grading alone: the kept run was
    timed beside other programs)."""
    _starters.clear()


def watch(code: str, workdir: Path, name: str, step: ExerciseStep, cancelled: Callable[[], bool]) -> Watched:
    from tutor.inspect import findings, launch

    script = workdir / name
    script.write_text(code, encoding="utf-8")
    ran = launch.run_script(
        script,
        [],
        warmup=WARMUP,
        steps=STEPS,
        timeout=step.timeout,
        memory_mb=step.memory_mb,
        measure_roof=False,
        cancelled=cancelled,
    )
    report = findings.build(script, [], ran, step.timeout)
    # a GPU's timed steps are synchronised only at the window's ends: its split steps, at each boundary
    rows = ran.watched.get("split") or ran.watched.get("timed") or []
    timed = [float(r["total"]) for r in rows]
    # summed over the step's calls of the model, so gradient accumulation's micro-batches count whole
    counted = [int(r.get("samples") or 0) for r in rows]
    batch = int(statistics.median(counted)) if counted and min(counted) > 0 else None
    return Watched(report, timed, bool(ran.watched.get("timing_shared")), batch)


def starter(step: ExerciseStep, workdir: Path, cancelled: Callable[[], bool]) -> Watched:
    key = hashlib.sha256(step.starter.encode()).hexdigest()
    kept = _starters.get(key)
    if kept is None or time.monotonic() - kept.at > STARTER_KEEP_S:  # an old run drifts from the machine now
        watched = watch(step.starter, workdir, STARTER_FILE, step, cancelled)
        if not watched.report.ok or watched.timing_shared:
            return watched  # not kept: a cancelled, failed or shared run says nothing of the starter
        _starters[key] = watched
    return _starters[key]


def check(
    req: InspectRequirement,
    step: ExerciseStep,
    learner: Watched,
    workdir: Path,
    cancelled: Callable[[], bool],
) -> tuple[bool, bool, str]:
    """(passed, judged, feedback) for one requirement against the learner's watched run."""
    report = learner.report
    if not report.ok:
        return False, True, f"gpututor inspect could not watch your program through: {report.problem}."
    if req.finding is not None:
        seen = next((f for f in report.findings if f.key == req.finding), None)
        if seen is not None:
            return False, True, f"The run still shows it ({seen.title}): {seen.evidence}. {req.feedback}"
    if req.min_speedup is None:
        return True, True, ""
    before = starter(step, workdir, cancelled)
    if not before.report.ok:
        return False, False, f"not checked: the starter's own run could not be watched ({before.report.problem})"
    if learner.timing_shared or before.timing_shared:
        return False, False, "not checked: a run waited past a minute for its turn and ran beside another; run it again"
    theirs, per_sample = before.per_sample(learner)
    yours, _ = learner.per_sample(before)
    speedup = ratio_interval(theirs, yours)
    if speedup is None:
        return False, False, "not checked: no timed steps to compare"
    what = (
        f"per sample ({learner.batch} samples a step against {before.batch}), yours took {_ms(yours, 1e6, 'µs')}"
        if per_sample
        else f"your steps took {_ms(yours)}"
    )
    said = (
        f"{what} against the starter's {_ms(theirs, 1e6, 'µs') if per_sample else _ms(theirs)}: "
        f"{speedup.median:.2f}x (95% interval {speedup.low:.2f}x to {speedup.high:.2f}x)"
    )
    decision = judge(speedup, req.min_speedup, None, GUARD)
    if decision is Decision.HIT:
        return True, True, said
    if decision is Decision.MISS:
        smaller = per_sample and (learner.batch or 0) < (before.batch or 0)
        why = " A smaller batch makes each step shorter, not each sample faster." if smaller else ""
        return False, True, f"Measured: {said}, short of {req.min_speedup:g}x.{why} {req.feedback}"
    return False, False, f"this machine can't tell yet whether it reaches {req.min_speedup:g}x: {said}; run it again"


def _ms(seconds: list[float], scale: float = 1e3, unit: str = "ms") -> str:
    """The median step, as the speed-up's own median is read."""
    return f"{statistics.median(seconds) * scale:.2f} {unit}" if seconds else "-"
