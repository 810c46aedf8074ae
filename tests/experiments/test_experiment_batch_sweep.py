"""batch-sweep: doubling batches until max_batch, the budget, or out of memory (caught and reported)."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Table
from tutor.experiments.spec import COMMON_METRICS

QUICK = {"width": 64, "layers": 2, "start_batch": 8, "max_batch": 64, "steps": 1}


def run(device="cpu", **params):
    return run_experiment("batch-sweep", {**QUICK, **params}, device)


def test_sweeps_every_doubling_up_to_max_batch():
    events, m = run()
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("batch-sweep").metrics)
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["8", "16", "32", "64"]
    assert m["batches_tried"] == 4 and m["largest_batch"] == 64 and m["oom_batch"] is None
    assert m["stop_reason"] == "reached max_batch 64"
    assert m["best_batch"] in (8, 16, 32, 64) and m["best_samples_per_s"] > 0
    params = 2 * (64 * 64 + 64)
    assert m["fixed_bytes"] == 16 * params
    # off CUDA: weights + gradients + Adam + the activations saved, which grow with the batch
    assert m["largest_memory_bytes"] == m["fixed_bytes"] + 3 * 64 * 64 * 4


def test_the_budget_stops_the_sweep_before_it_is_exceeded():
    fixed = 16 * 2 * (64 * 64 + 64)  # 266,240 bytes
    budget_mib = 1
    _, m = run(max_batch=4096, budget_mb=budget_mib)
    assert "over the 1 MiB budget" in m["stop_reason"]
    assert m["largest_memory_bytes"] <= budget_mib * 2**20 and m["largest_batch"] < 4096
    assert m["largest_memory_bytes"] > fixed


def test_out_of_memory_is_caught_reported_and_the_run_finishes(monkeypatch):
    real_randn = torch.randn

    def randn(*shape, **kw):
        if shape and shape[0] >= 32:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_randn(*shape, **kw)

    monkeypatch.setattr(torch, "randn", randn)
    events, m = run()
    assert m["oom_batch"] == 32 and m["largest_batch"] == 16
    assert m["stop_reason"].startswith("out of memory at batch 32")
    assert any("out of memory" in e.text and e.level == "warning" for e in events if isinstance(e, Note))


def test_other_errors_are_not_mistaken_for_out_of_memory(monkeypatch):
    def randn(*shape, **kw):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(torch, "randn", randn)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        run()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_sweep_runs_into_real_out_of_memory_and_recovers():
    _, m = run("cuda", width=8192, layers=4, start_batch=4096, max_batch=1 << 22, budget_mb=10**7)
    assert m["oom_batch"] is not None and m["largest_batch"] < m["oom_batch"]
    free, _ = torch.cuda.mem_get_info()
    assert free > 0.5 * torch.cuda.get_device_properties(0).total_memory  # the memory was given back


def test_the_fastest_batch_is_every_batch_that_cannot_be_told_from_it():
    """Issue 37: a discrete result's own rule. On a plateau the fastest is a set: batches whose
    samples/s ranges (widened by the guard) overlap the fastest's; a clear winner stands alone."""
    from tutor.experiments.batch_sweep import _tied

    plateau = {32: (600, 700), 256: (2300, 2500), 512: (2400, 2700), 1024: (2500, 2600), 4096: (2550, 2750)}
    assert _tied(plateau, 4096) == [256, 512, 1024, 4096]
    clear = {32: (600, 700), 256: (1000, 1100), 4096: (3000, 3100)}
    assert _tied(clear, 4096) == [4096]


def test_a_run_reports_the_tied_batches_around_the_fastest():
    events, m = run(steps=3)
    assert m["best_batch_low"] <= m["best_batch"] <= m["best_batch_high"]
    assert {m["best_batch_low"], m["best_batch_high"]} <= {8, 16, 32, 64}
    if m["best_batch_low"] < m["best_batch_high"]:
        assert any("too nearly as fast to be told apart" in e.text for e in events if isinstance(e, Note))
