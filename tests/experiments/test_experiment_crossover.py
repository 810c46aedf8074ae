"""The `crossover` experiment: CPU timing always; the comparison only with an accelerator."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tutor import experiments
from tutor.experiments import devices
from tutor.experiments.events import Finished, Note, Started, Step, Table

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
QUICK = {"tiny_samples": 200, "mlp_samples": 512, "repeats": 2}


@pytest.fixture
def cpu_only(monkeypatch):
    """Pretend this machine has no accelerator (so the test means the same on a GPU box)."""
    monkeypatch.setattr(devices, "accelerator", lambda: None)
    return devices.resolve("cpu")


def run(values: dict, dev) -> list:
    exp = experiments.get("crossover")
    events = list(exp.load()(exp.make_params(values), dev))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    assert set(exp.metrics) <= set(events[-1].metrics)
    return events


def test_cpu_only_reports_none_and_says_so(cpu_only):
    events = run(QUICK, cpu_only)
    m = events[-1].metrics
    for key in (
        "accel_seconds_tiny",
        "speedup_tiny",
        "accel_seconds_mlp",
        "speedup_mlp",
        "speedup",
        "speedup_low",
        "speedup_high",
        "speedup_tiny_low",
        "speedup_mlp_high",
    ):
        assert m[key] is None, key
    assert m["accelerator"] == "none"
    assert m["cpu_seconds_tiny"] > 0 and m["cpu_seconds_mlp"] > 0
    notes = [e.text for e in events if isinstance(e, Note)]
    assert any("nothing to compare" in t and "No GPU or MPS" in t for t in notes)
    table = next(e for e in events if isinstance(e, Table))
    assert [r[0] for r in table.rows] == ["tiny model", "MNISTClassifier"]
    assert all(len(r) == len(table.columns) for r in table.rows)
    steps = [e for e in events if isinstance(e, Step)]
    assert steps and {s.label for s in steps} == {"cpu"}
    # repeats=2: the tiny case (7 steps per run) reports up to step 14 of 14
    tiny_steps = [s for s in steps if s.total == 14]
    assert tiny_steps and tiny_steps[-1].step == 14


def test_model_choice_runs_only_that_case(cpu_only):
    m = run({**QUICK, "model": "tiny", "repeats": 1}, cpu_only)[-1].metrics
    assert m["cpu_seconds_tiny"] > 0
    assert m["cpu_seconds_mlp"] is None and m["speedup_mlp"] is None
    m = run({**QUICK, "model": "mlp", "repeats": 1}, cpu_only)[-1].metrics
    assert m["cpu_seconds_mlp"] > 0 and m["cpu_seconds_tiny"] is None


def test_tiny_model_is_tiny(cpu_only):
    events = run({**QUICK, "model": "tiny", "repeats": 1}, cpu_only)
    table = next(e for e in events if isinstance(e, Table))
    assert int(table.rows[0][1].replace(",", "")) < 1000  # params column


def test_the_speedup_comes_with_the_interval_of_its_repeats(monkeypatch):
    """The CPU stands in for the accelerator (a second device of kind cpu), so the comparison's
    own path runs here: each device's median interval, divided end to end, and the headline lies
    in it."""
    cpu = devices.resolve("cpu")
    stand_in = dataclasses.replace(cpu, name="a second CPU")
    monkeypatch.setattr(devices, "accelerator", lambda: stand_in)
    events = run({**QUICK, "repeats": 3}, cpu)
    m = events[-1].metrics
    for case in ("tiny", "mlp"):
        low, mid, high = m[f"speedup_{case}_low"], m[f"speedup_{case}"], m[f"speedup_{case}_high"]
        assert 0 < low <= mid <= high, (case, low, mid, high)
    assert (m["speedup_low"], m["speedup_high"]) == (m["speedup_mlp_low"], m["speedup_mlp_high"])
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "the speedup is the median of 3 repeats per device, its" in notes


@cuda
@pytest.mark.gpu
def test_compares_with_cuda():
    events = run(QUICK, devices.resolve("cuda"))
    m = events[-1].metrics
    assert m["accel_seconds_tiny"] > 0 and m["accel_seconds_mlp"] > 0
    assert m["speedup_mlp"] == pytest.approx(m["cpu_seconds_mlp"] / m["accel_seconds_mlp"])
    assert m["speedup"] == m["speedup_mlp"]
    assert m["speedup_low"] <= m["speedup"] <= m["speedup_high"]
    assert m["accelerator"] != "none"
    assert {e.label for e in events if isinstance(e, Step)} == {"cpu", "cuda"}


@pytest.mark.gpu
def test_compares_with_any_accelerator(accelerator):
    events = run(QUICK, devices.resolve(accelerator))
    m = events[-1].metrics
    assert m["accel_seconds_mlp"] > 0 and m["speedup"] == m["speedup_mlp"]
    assert {e.label for e in events if isinstance(e, Step)} == {"cpu", accelerator}
