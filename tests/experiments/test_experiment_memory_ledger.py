"""memory-ledger: each component of training memory, measured, equals its formula on the CPU."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Table
from tutor.experiments.spec import COMMON_METRICS

QUICK = {"width": 128, "layers": 2, "batch_size": 16}


def run(device, **params):
    return run_experiment("memory-ledger", {**QUICK, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run("cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("memory-ledger").metrics)
    assert m["method"] == "storage accounting" and m["device"] == "cpu"


def test_components_match_their_formulas(cpu_run):
    _, m = cpu_run
    w, layers, b = QUICK["width"], QUICK["layers"], QUICK["batch_size"]
    count = layers * (w * w + w)
    assert m["parameters"] == count
    assert m["param_bytes"] == m["grad_bytes"] == m["momentum_state_bytes"] == 4 * count
    assert m["sgd_state_bytes"] == 0
    # Adam: exp_avg and exp_avg_sq, plus one 4-byte step counter per parameter tensor.
    assert m["adam_state_bytes"] == 8 * count + 4 * 2 * layers
    assert m["activation_bytes"] == m["activation_formula_bytes"] == (layers + 1) * b * w * 4
    assert m["activation_bytes_smallest_batch"] == (layers + 1) * (b // 4) * w * 4
    assert m["no_grad_activation_bytes"] == 0
    assert m["bytes_per_param_adam"] == pytest.approx(16, abs=0.01)
    assert m["total_adam_bytes"] == m["param_bytes"] + m["grad_bytes"] + m["adam_state_bytes"] + m["activation_bytes"]


def test_allocator_figures_are_absent_off_cuda_and_it_says_so(cpu_run):
    events, m = cpu_run
    for key in (
        "allocator_param_bytes",
        "allocator_activation_bytes",
        "peak_bytes",
        "reserved_bytes",
        "cublas_workspace_bytes",
    ):
        assert m[key] is None
    assert any("no allocator counter" in e.text for e in events if isinstance(e, Note))
    ledger = next(e for e in events if isinstance(e, Table))
    assert ledger.columns == ["component", "measured", "formula"]
    assert [r[0] for r in ledger.rows][:5] == ["parameters", "gradients", "SGD state", "momentum state", "Adam state"]


def test_activations_grow_with_the_batch_and_nothing_else_does():
    _, small = run("cpu", batch_size=8)
    _, large = run("cpu", batch_size=32)
    assert large["activation_bytes"] == 4 * small["activation_bytes"]
    for key in ("param_bytes", "grad_bytes", "adam_state_bytes"):
        assert large[key] == small[key]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_allocator_deltas_match_the_accounting():
    events, m = run("cuda", width=1024, layers=2, batch_size=64)
    assert m["method"].startswith("torch.cuda.memory_allocated")
    # The caching allocator rounds each tensor up to 512-byte blocks: close, never exact.
    tensors = 2 * 2  # a weight and a bias per layer
    assert 0 <= m["allocator_param_bytes"] - m["param_bytes"] <= 512 * tensors
    assert m["allocator_adam_state_bytes"] >= 8 * m["parameters"]
    # The same tensors counted both ways, the input x included: the allocator adds the output and the loss.
    output_and_loss = 64 * 1024 * 4 + 512
    assert m["activation_bytes"] <= m["allocator_activation_bytes"] <= m["activation_bytes"] + output_and_loss + 512 * 8
    assert m["peak_bytes"] >= m["param_bytes"] + m["grad_bytes"] + m["adam_state_bytes"]
    assert m["reserved_bytes"] >= m["peak_bytes"]
    assert m["cublas_workspace_bytes"] is not None and m["cublas_workspace_bytes"] >= 0
    # A second run in the same process (a long-lived engine) reads the same ledger; where it finds the
    # workspaces already taken it says so rather than showing "0.0 MiB".
    events, again = run("cuda", width=1024, layers=2, batch_size=64)
    assert again["allocator_param_bytes"] == m["allocator_param_bytes"]
    assert again["allocator_activation_bytes"] == m["allocator_activation_bytes"]
    if again["cublas_workspace_bytes"] == 0:
        assert any("an earlier run in this process took them" in e.text for e in events if isinstance(e, Note))


def test_counting_saved_tensors_keeps_no_graph_alive():
    """saved_for_backward's hook must not tie a saved output (ReLU's) to its own grad_fn: that
    cycle runs through C++, gc cannot break it, and every graph measured without backward()
    stayed in memory for the rest of the session."""
    import gc
    import weakref

    from tutor.experiments.model import linear_stack
    from tutor.experiments.training import saved_for_backward

    model = linear_stack(32, 2)

    def measure() -> tuple[int, list[weakref.ref]]:
        x = torch.randn(4, 32)
        with saved_for_backward(model) as saved:
            out = model(x)
        relu_outputs = [weakref.ref(out)]  # the last ReLU's output, saved by the graph
        return sum(saved.values()), relu_outputs

    counted, refs = measure()
    gc.collect()
    assert counted == (2 + 1) * 4 * 32 * 4  # inputs of both Linears + the last ReLU's output
    assert all(r() is None for r in refs)

    x = torch.randn(4, 32)
    model.zero_grad()
    model(x).sum().backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with saved_for_backward(model):
        y = model(x).sum()
    y.backward()
    assert all(torch.equal(a, p.grad) for a, p in zip(plain, model.parameters()))
