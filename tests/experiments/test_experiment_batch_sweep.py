"""batch-sweep: doubling batches until max_batch, the budget, or out of memory (caught and reported)."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.events import Note, Table

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
