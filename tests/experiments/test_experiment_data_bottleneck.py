"""data-bottleneck: one training step fed by the DataLoader and by resident tensors, split into
waiting for data and compute. Behaviour only: no test compares timings."""

from __future__ import annotations

import types

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS

BATCHES = 12
BATCH = 48  # not the default 64: a note that says 64 was not read from the run


@pytest.fixture(scope="module")
def cpu_run():
    return run_experiment("data-bottleneck", {"batches": BATCHES, "workers": 1, "batch_size": BATCH})


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("data-bottleneck").metrics)
    assert m["device"] == "cpu" and m["workers"] == 1 and m["cpu_cores"] >= 1


def test_each_path_is_measured_and_its_shares_add_up(cpu_run):
    _, m = cpu_run
    for case in ("loader", "workers", "resident"):
        assert m[f"{case}_samples_per_s"] > 0
        assert 0 <= m[f"{case}_wait_share"] <= 1
    from tutor.experiments import data

    epoch = data.load("cpu").train_x.shape[0]  # MNIST's 60,000, or the offline digits' count
    assert m["loader_epoch_seconds"] == pytest.approx(epoch / m["loader_samples_per_s"], rel=1e-3)
    # the median of stretches that ran side by side, inside its interval
    assert m["resident_speedup_low"] <= m["resident_speedup"] <= m["resident_speedup_high"]
    assert m["fastest"] in ("loader", "workers", "resident")


def test_the_notes_say_the_batch_the_run_used(cpu_run):
    events, _ = cpu_run
    loader_note = next(e.text for e in events if isinstance(e, Note) and e.text.startswith("1/4"))
    assert f"each of the {BATCH} images in a batch" in loader_note


def test_pinned_memory_is_skipped_off_cuda_and_says_why(cpu_run):
    events, m = cpu_run
    assert m["pinned_samples_per_s"] is None and m["pinned_wait_share"] is None
    assert any("pin_memory skipped" in e.text for e in events if isinstance(e, Note))


def test_steps_stream_per_path_and_the_table_has_a_row_each(cpu_run):
    events, _ = cpu_run
    steps = [e for e in events if isinstance(e, Step)]
    assert {s.label for s in steps} == {"loader", "1 worker", "resident"}
    for label in {s.label for s in steps}:
        mine = [s for s in steps if s.label == label]
        assert mine[-1].step == BATCHES and all(s.total == BATCHES for s in mine)
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["loader", "1 worker", "resident"]


def test_loader_and_resident_take_turns_before_the_workers_run(cpu_run):
    # Timed one after the other, whatever took the CPU while one path ran (the TUI re-laying out
    # its screen when a Note arrives, another process) counted against that path alone (issue 24).
    events, _ = cpu_run
    labels = [e.label for e in events if isinstance(e, Step)]
    first_worker = labels.index("1 worker")
    turns = [label for i, label in enumerate(labels[:first_worker]) if i == 0 or labels[i - 1] != label]
    assert turns[:4] == ["loader", "resident", "loader", "resident"]
    assert set(labels[first_worker:]) == {"1 worker"}


def _fake_clock_run(monkeypatch, stall_at: int | None) -> dict:
    """A run on a clock that only moves when a batch is fetched (loader 4 ms, resident 1 ms) or the
    device is synchronised (0.5 ms): deterministic rates. `stall_at`: the resident batch (1-based,
    warm-up included) that arrives 50 ms late, as if another process had the core meanwhile."""
    from tutor.experiments import data_bottleneck as db

    now = [0.0]
    fetched = [0]

    def endless(loader):
        for batch in real_endless(loader):
            now[0] += 0.004
            yield batch

    def resident(*args):
        for batch in real_resident(*args):
            fetched[0] += 1
            now[0] += 0.001 + (0.050 if fetched[0] == stall_at else 0.0)
            yield batch

    def synchronize(_device):
        now[0] += 0.0005

    real_endless, real_resident = db._endless, db._resident_batches
    with monkeypatch.context() as patch:
        patch.setattr(db, "_endless", endless)
        patch.setattr(db, "_resident_batches", resident)
        patch.setattr(db, "synchronize", synchronize)
        patch.setattr(db, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
        _, metrics = run_experiment("data-bottleneck", {"batches": 40, "workers": 1})
    return metrics


def test_a_stall_during_a_few_steps_does_not_change_the_rates(monkeypatch):
    clean = _fake_clock_run(monkeypatch, stall_at=None)
    assert clean["resident_speedup"] == pytest.approx(5.0 / 2.0)  # (4 + 1) ms against (1 + 1) ms a step
    stalled = _fake_clock_run(monkeypatch, stall_at=9)  # the 4th timed resident step
    for metric in ("loader_samples_per_s", "resident_samples_per_s", "resident_speedup"):
        assert stalled[metric] == pytest.approx(clean[metric]), metric


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_adds_the_pinned_path():
    _, m = run_experiment("data-bottleneck", {"batches": BATCHES}, "cuda")
    assert m["pinned_samples_per_s"] > 0 and 0 <= m["pinned_wait_share"] <= 1
    assert m["device"].startswith("cuda")
