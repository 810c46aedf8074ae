"""grad-checkpoint: checkpointing keeps fewer activations for backward and gives the same gradients."""

from __future__ import annotations

import pydantic
import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Table
from tutor.experiments.spec import COMMON_METRICS

QUICK = {"depth": 8, "width": 64, "batch_size": 16, "segments": 4, "steps": 1}


def run(device, **params):
    return run_experiment("grad-checkpoint", {**QUICK, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run("cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("grad-checkpoint").metrics)
    assert m["plain_peak_bytes"] is None and m["checkpointed_peak_bytes"] is None  # CUDA only


def test_plain_forward_keeps_what_the_formula_says(cpu_run):
    _, m = cpu_run
    tensor = QUICK["batch_size"] * QUICK["width"] * 4
    assert m["plain_kept_bytes"] == m["kept_formula_bytes"] == (QUICK["depth"] + 1) * tensor


def test_checkpointing_keeps_segment_inputs_and_the_last_segment(cpu_run):
    _, m = cpu_run
    tensor = QUICK["batch_size"] * QUICK["width"] * 4
    layers_per_segment = QUICK["depth"] // QUICK["segments"]
    # the first segments keep only their inputs; the last runs plainly: its input and its layers' outputs
    expected = (QUICK["segments"] - 1) * tensor + (layers_per_segment + 1) * tensor
    assert m["checkpointed_kept_bytes"] == expected < m["plain_kept_bytes"]
    assert m["memory_saving"] == pytest.approx(1 - expected / m["plain_kept_bytes"])


def test_gradients_are_the_same_both_ways(cpu_run):
    events, m = cpu_run
    assert m["grads_match"] is True and m["max_grad_diff"] < 1e-5
    assert m["time_ratio"] == pytest.approx(m["checkpointed_seconds_per_step"] / m["plain_seconds_per_step"])
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["plain", "checkpointed"]


def test_more_segments_than_modules_is_refused():
    with pytest.raises(pydantic.ValidationError, match="segments"):
        experiments.get("grad-checkpoint").make_params({"depth": 2, "segments": 5})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_peak_is_lower_checkpointed():
    _, m = run("cuda", depth=16, width=1024, batch_size=512, segments=4, steps=2)
    assert m["checkpointed_peak_bytes"] < m["plain_peak_bytes"]
    assert m["grads_match"] is True
