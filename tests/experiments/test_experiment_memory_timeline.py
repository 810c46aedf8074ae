"""memory-timeline: through one step, saved activations grow over the forward and are freed in
backward as gradients appear, Adam's state appears at the first optimizer step and stays, and the
peak moves from the optimizer step to the forward as the batch grows."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Table
from tutor.experiments.memory_timeline import Tracker, hook_layers, record_step
from tutor.experiments.model import MNISTClassifier, count_parameters
from tutor.experiments.spec import COMMON_METRICS

PARAMS = count_parameters(MNISTClassifier()) * 4  # float32
SAVED_PER_SAMPLE = (784 + 256 + 128 + 10) * 4 + 8  # input, two ReLU outputs, log-softmax, the int64 target
LABELS = [
    "start",
    "fwd fc1",
    "fwd relu",
    "fwd fc2",
    "fwd relu",
    "fwd fc3",
    "fwd loss",
    "bwd fc3",
    "bwd fc2",
    "bwd fc1",
    "step()",
    "zero_grad()",
]


def run(device="cpu", **params):
    return run_experiment("memory-timeline", {"batch_size": 16, "steps": 2, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run()


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("memory-timeline").metrics)
    assert m["cuda_peak_bytes"] is None and m["snapshot_path"] is None  # CUDA only


def test_one_step_point_by_point():
    torch.manual_seed(0)
    model = MNISTClassifier()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = Tracker(model, optimizer, torch.device("cpu"), 0)
    hook_layers(model, tracker)
    x, y = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))
    for step in (1, 2):
        record_step(tracker, model, optimizer, x, y, step)
    first = [pt for pt in tracker.points if pt.step == 1]
    assert [pt.label for pt in first] == LABELS
    forward = first[:7]
    assert [pt.saved for pt in forward] == sorted(pt.saved for pt in forward)  # saved only grows in forward
    assert forward[0].saved == 0 and forward[-1].saved > 0
    backward = first[7:10]
    assert [pt.saved for pt in backward] == sorted((pt.saved for pt in backward), reverse=True)
    assert backward[-1].saved == 0  # backward freed every saved activation
    assert [pt.grads for pt in backward] == sorted(pt.grads for pt in backward) and backward[-1].grads == PARAMS
    assert all(pt.state == 0 for pt in first[:10])  # no Adam state before the first optimizer step
    step_point, cleared = first[10], first[11]
    assert 2 * PARAMS < step_point.state < 2 * PARAMS + 100  # exp_avg, exp_avg_sq, and a step counter each
    assert cleared.grads == 0 and cleared.state == step_point.state
    second_start = next(pt for pt in tracker.points if pt.step == 2)
    assert second_start.total == PARAMS + step_point.state  # Adam's state stays
    assert not tracker.live  # nothing saved is left once the steps are done


def test_at_a_small_batch_the_peak_is_the_first_optimizer_step(cpu_run):
    events, m = cpu_run
    assert (m["peak_phase"], m["peak_step"], m["peak_point"]) == ("optimizer step", 1, "step()")
    assert m["params_bytes"] == m["grads_bytes"] == PARAMS
    assert m["peak_bytes"] == 2 * PARAMS + m["adam_state_bytes"]
    assert m["first_start_bytes"] == PARAMS and m["later_start_bytes"] == PARAMS + m["adam_state_bytes"]
    assert m["saved_peak_point"] == "fwd loss"
    assert 0 <= m["saved_peak_bytes"] - 16 * SAVED_PER_SAMPLE <= 16  # (+ nll_loss's total weight)
    assert 0 < m["final_loss"] < 5
    chart = next(e.text for e in events if isinstance(e, Note) and e.level == "figure")
    rows = [line.split("|")[0].strip() for line in chart.splitlines()[1 : 1 + len(LABELS)]]
    assert rows == LABELS
    assert "◀ peak" in next(line for line in chart.splitlines() if line.strip().startswith("step()"))
    assert max(len(line) for line in chart.splitlines()) <= 72
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["1", "2"]
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "No GPU here" in said and "Counted:" in said


def test_a_large_batch_moves_the_peak_to_the_end_of_the_forward():
    _, m = run(batch_size=512)
    assert (m["peak_phase"], m["peak_point"], m["peak_step"]) == ("forward", "fwd loss", 2)
    assert m["peak_bytes"] == PARAMS + m["adam_state_bytes"] + m["saved_peak_bytes"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_reads_the_allocator_and_writes_a_snapshot(tmp_path: Path):
    target = tmp_path / "timeline.pickle"
    events, m = run("cuda", snapshot=str(target))
    assert m["snapshot_path"] == str(target) and target.stat().st_size > 0
    snapshot = pickle.loads(target.read_bytes())
    assert "segments" in snapshot and "device_traces" in snapshot
    assert m["cuda_peak_bytes"] >= m["peak_bytes"]  # the allocator holds at least what the hooks count
    chart = next(e.text for e in events if isinstance(e, Note) and e.level == "figure")
    assert "alloc" in chart
    assert any("memory_viz" in e.text for e in events if isinstance(e, Note))
