"""An exercise's `inspect` requirement judged from two watched runs' timed steps (no run here: the
runs are made up as the inspector reports them): a finding still there is named with its evidence;
the speed-up over the starter is a hit, a miss, or "can't tell yet" by the runs' intervals."""

from pathlib import Path

import pytest

from tutor.course.lesson import ExerciseStep, InspectRequirement
from tutor.exercises import inspected
from tutor.inspect.findings import Finding, Report

STEP = ExerciseStep.model_validate(
    {
        "id": "ex",
        "kind": "exercise",
        "title": "Ex",
        "starter": "slow = 1",
        "solution": "fast = 1",
        "requirements": [{"type": "inspect", "id": "r", "min_speedup": 1.5, "feedback": "f"}],
    }
)


REPORT = Report("x.py", [], "stopped", None)


def watched(step_ms: list[float], *findings: Finding) -> inspected.Watched:
    report = Report("x.py", [], "stopped", None, findings=list(findings))
    return inspected.Watched(report, [ms / 1e3 for ms in step_ms])


@pytest.fixture
def starter_at_10ms(monkeypatch):
    monkeypatch.setattr(inspected, "starter", lambda step, workdir, cancelled: watched([10.0] * 10 + [10.5] * 10))


def requirement(**kw) -> InspectRequirement:
    return InspectRequirement.model_validate({"type": "inspect", "id": "r", "feedback": "Do the fix.", **kw})


def test_a_finding_still_there_fails_with_its_evidence():
    wait = Finding("data-wait", "the step waits on the DataLoader", "80% of each step", "l:s", "fix")
    ok, judged, said = inspected.check(requirement(finding="data-wait"), STEP, watched([5.0] * 20, wait), Path(), bool)
    assert (ok, judged) == (False, True)
    assert said == "The run still shows it (the step waits on the DataLoader): 80% of each step. Do the fix."


def test_a_finding_gone_passes_without_timing_anything():
    ok, judged, said = inspected.check(requirement(finding="data-wait"), STEP, watched([5.0] * 20), Path(), bool)
    assert (ok, judged, said) == (True, True, "")


def test_clearly_faster_passes_and_says_the_measured_speedup(starter_at_10ms):
    ok, judged, said = inspected.check(requirement(min_speedup=1.5), STEP, watched([2.0] * 20), Path(), bool)
    assert (ok, judged) == (True, True)
    assert said.startswith(
        "your steps took 2.00 ms against the starter's 10.25 ms: 5.12x (95% interval 5.00x to 5.25x)"
    )


def test_clearly_not_fast_enough_fails_with_the_measurement(starter_at_10ms):
    ok, judged, said = inspected.check(requirement(min_speedup=1.5), STEP, watched([9.0] * 20), Path(), bool)
    assert (ok, judged) == (False, True)
    assert said.startswith("Measured: your steps took 9.00 ms") and "short of 1.5x. Do the fix." in said


def test_an_interval_across_the_bar_is_not_graded(starter_at_10ms):
    # steps between 5 and 9 ms against 10-10.5 ms: a speed-up somewhere from 1.1x to 2.1x
    ok, judged, said = inspected.check(requirement(min_speedup=1.5), STEP, watched([5.0, 9.0] * 10), Path(), bool)
    assert (ok, judged) == (False, False)
    assert said.startswith("this machine can't tell yet whether it reaches 1.5x")


def test_a_program_the_inspector_could_not_watch_says_why():
    broken = inspected.Watched(Report("x.py", [], "crashed", "the script crashed: NameError"), [])
    ok, judged, said = inspected.check(requirement(finding="data-wait"), STEP, broken, Path(), bool)
    assert (ok, judged) == (False, True)
    assert said == "gpututor inspect could not watch your program through: the script crashed: NameError."


def test_a_starter_run_timed_beside_another_is_not_kept(monkeypatch):
    """A starter watched while sharing the machine says nothing of the starter: it is not kept, so
    the next grading watches it again instead of answering "run it again" for good."""
    runs = []

    def watch(code, workdir, name, step, cancelled):
        runs.append(name)
        shared = len(runs) == 1
        return inspected.Watched(Report("x.py", [], "stopped", None), [0.01] * 20, timing_shared=shared)

    monkeypatch.setattr(inspected, "watch", watch)
    monkeypatch.setattr(inspected, "_starters", {})
    assert inspected.starter(STEP, Path(), bool).timing_shared
    assert not inspected.starter(STEP, Path(), bool).timing_shared
    assert len(runs) == 2
    inspected.starter(STEP, Path(), bool)
    assert len(runs) == 2  # the quiet one is kept


def test_a_smaller_batch_is_no_speed_up(monkeypatch):
    """The speed-up is per sample where the batches differ: half the batch in half the time is 1x."""
    monkeypatch.setattr(
        inspected, "starter", lambda step, workdir, cancelled: inspected.Watched(REPORT, [0.010] * 20, batch=64)
    )
    halved = inspected.Watched(REPORT, [0.005] * 20, batch=32)
    ok, judged, said = inspected.check(requirement(min_speedup=1.5), STEP, halved, Path(), bool)
    assert (ok, judged) == (False, True)
    assert said.startswith("Measured: per sample (32 samples a step against 64), yours took 156.25 µs against")
    assert ": 1.00x" in said and "A smaller batch makes each step shorter, not each sample faster." in said


def test_a_starter_run_older_than_ten_minutes_is_watched_again(monkeypatch):
    runs = []

    def watch(code, workdir, name, step, cancelled):
        runs.append(name)
        return inspected.Watched(REPORT, [0.01] * 20)

    monkeypatch.setattr(inspected, "watch", watch)
    monkeypatch.setattr(inspected, "_starters", {})
    inspected.starter(STEP, Path(), bool)
    inspected.starter(STEP, Path(), bool)
    assert len(runs) == 1
    (kept,) = inspected._starters.values()
    kept.at -= inspected.STARTER_KEEP_S + 1
    inspected.starter(STEP, Path(), bool)
    assert len(runs) == 2


def test_an_mfu_against_a_crowded_peak_says_it_reads_high():
    from tutor.inspect import findings

    report = Report("x.py", [], "stopped", None)
    report.steps_per_s = 10.0
    roof = {"dtype": "float32", "tflops": 0.1, "how": "sweep", "measured_on": "2026-11-29", "others_busy_cores": 1.6}
    findings._mfu(report, {"probe": {"flops": 1e9}, "roof": roof})
    assert report.mfu == pytest.approx(0.1)
    assert "other programs kept 1.6 cores busy, so it reads low and this MFU high" in report.mfu_how
    findings._mfu(report, {"probe": {"flops": 1e9}, "roof": {**roof, "others_busy_cores": None}})
    assert "busy" not in report.mfu_how
