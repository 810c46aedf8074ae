"""graph-leak: kept losses after backward hold little; kept losses without backward hold every activation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.training import saved_for_backward

BATCH = 32


def run(device, **params):
    values = {"steps": 6, "batch_size": BATCH, **params}
    return run_experiment("graph-leak", values, device)


def one_forward_bytes(batch: int) -> int:
    """What one forward pass of MNISTClassifier + cross-entropy saves for backward."""
    model = MNISTClassifier()
    with saved_for_backward(model) as saved:
        loss = F.cross_entropy(model(torch.randn(batch, 1, 28, 28)), torch.randint(0, 10, (batch,)))
    loss.backward()  # frees the graph
    return sum(saved.values())


@pytest.fixture(scope="module")
def cpu_run():
    return run("cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("graph-leak").metrics)
    assert m["steps"] == 6 and m["device"] == "cpu"
    assert m["allocator_growth_bytes"] is None


def test_evaluation_without_no_grad_keeps_far_more_than_training(cpu_run):
    _, m = cpu_run
    assert m["eval_kept_bytes"] > 1000 * m["train_kept_bytes"] > 0
    assert m["fixed_kept_bytes"] == 0
    # after backward, a kept loss holds only its own float32 value
    assert m["train_kept_bytes"] == 4 * m["steps"]


def test_eval_keeps_one_forward_of_activations_per_step(cpu_run):
    _, m = cpu_run
    assert m["eval_bytes_per_step"] == pytest.approx(m["eval_kept_bytes"] / m["steps"])
    assert m["eval_bytes_per_step"] == pytest.approx(one_forward_bytes(BATCH), rel=0.03)


def test_both_lists_keep_the_same_graph_nodes(cpu_run):
    _, m = cpu_run
    # per step: 3 Addmm, 3 T (weight.t()), 2 ReLU, LogSoftmax, NllLoss; plus the 6 shared AccumulateGrad
    assert m["train_graph_nodes"] == m["eval_graph_nodes"] == 10 * m["steps"] + 6


def test_table_and_notes(cpu_run):
    events, _ = cpu_run
    table = next(e for e in events if isinstance(e, Table))
    assert table.columns == ["loop", "kept", "per step", "graph nodes"]
    assert len(table.rows) == 3 and table.rows[2][1] == "0 B"
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "no_grad" in notes and "loss.item()" in notes and "10,000" in notes
    assert "still alive add up to 0 B" in notes  # dropping the lists frees everything
    labels = {e.label for e in events if isinstance(e, Step)}
    assert len(labels) == 3


def test_eval_kept_grows_linearly_with_steps(cpu_run):
    _, m = cpu_run
    _, longer = run("cpu", steps=12)
    assert longer["eval_kept_bytes"] == 2 * m["eval_kept_bytes"]
    assert longer["train_kept_bytes"] == 2 * m["train_kept_bytes"]


def test_too_much_to_keep_is_refused_before_leaking():
    with pytest.raises(ValueError, match="choose fewer steps"):
        run("cpu", steps=100_000, batch_size=4096)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_allocator_grows_by_what_the_list_keeps():
    events, m = run("cuda", steps=20, batch_size=256)
    assert m["device"].startswith("cuda")
    assert m["allocator_growth_bytes"] > 0
    # the allocator rounds each tensor up to 512 bytes: a little more than the tensors' own bytes
    assert m["allocator_growth_bytes"] == pytest.approx(m["eval_kept_bytes"], rel=0.05)
    assert m["eval_bytes_per_step"] == pytest.approx(one_forward_bytes(256), rel=0.03)
    assert any("memory_allocated() grew" in e.text for e in events if isinstance(e, Note))
