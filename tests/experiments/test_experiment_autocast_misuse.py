"""autocast-misuse: the wrong device_type does nothing; model.half() with Adam breaks or loses updates."""

from __future__ import annotations

import math

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments import autocast_misuse
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS

QUICK = {"steps": 40, "batch_size": 32}


def run(device="cpu", **params):
    return run_experiment("autocast-misuse", {**QUICK, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run()


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("autocast-misuse").metrics)
    assert m["device"] == "cpu"


def test_autocast_with_the_other_device_type_leaves_the_cpu_in_float32(cpu_run):
    events, m = cpu_run
    assert m["wrong_type_dtype"] == "float32"
    assert m["right_type_dtype"] == "bfloat16" and m["autocast_dtype"] == "bfloat16"
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["'cuda'", "'cpu'"]
    assert [row[2] for row in table.rows] == ["float32", "bfloat16"]


def test_a_warning_from_the_wrong_device_type_is_reported():
    dtype, enabled, caught = autocast_misuse.linear_output_dtype("cpu", "cuda")
    assert dtype == "float32"
    # CPU-only: torch switches CUDA autocast off and says so; with CUDA it is on, for CUDA ops only.
    assert (not enabled and caught) if not torch.cuda.is_available() else (enabled and not caught)
    dtype, enabled, caught = autocast_misuse.linear_output_dtype("cpu", "cpu")
    assert dtype == "bfloat16" and enabled and not caught


def test_the_warning_reaches_the_learner(cpu_run):
    events, _ = cpu_run
    notes = [e.text for e in events if isinstance(e, Note)]
    if not torch.cuda.is_available():  # the wrong type's autocast warned and switched itself off
        assert any("warned" in t and "float32" in t for t in notes)
    else:  # on for CUDA ops only, while the Linear's input is on the CPU
        assert any("was switched on, but only for cuda ops" in t for t in notes)
    assert any("Write torch.autocast(device_type=x.device.type)" in t for t in notes)


def test_autocast_trains_and_the_half_model_does_worse(cpu_run):
    events, m = cpu_run
    assert m["autocast_final_loss"] < math.log(10) - 0.1  # ln 10 = 2.30: the loss of a uniform guess
    assert 0 <= m["half_accuracy"] <= 1 and 0 <= m["autocast_accuracy"] <= 1
    assert m["half_accuracy"] < m["autocast_accuracy"]
    labels = {e.label for e in events if isinstance(e, Step)}
    assert labels == {"model.half()", "autocast bfloat16"}


def test_the_half_nan_step_agrees_with_the_final_loss(cpu_run):
    _, m = cpu_run
    step = m["half_nan_step"]
    if step is None:
        assert math.isfinite(m["half_final_loss"])
    else:
        assert 1 <= step <= QUICK["steps"]
        assert math.isnan(m["half_final_loss"]) or math.isinf(m["half_final_loss"])


def test_float16_weights_round_small_updates_away(cpu_run):
    events, m = cpu_run
    assert 0 < m["lost_update_share"] <= 1
    table = next(e for e in events if isinstance(e, Table) and "SGD step" in e.title)
    assert [row[0] for row in table.rows] == [
        "fc1.weight",
        "fc1.bias",
        "fc2.weight",
        "fc2.bias",
        "fc3.weight",
        "fc3.bias",
    ]


def test_lost_updates_follow_the_spacing_rule():
    model = torch.nn.Linear(4, 2, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.5)  # float16 numbers in [1, 2) are 2**-10 apart
    x = torch.tensor([[1.0, 1e-2, 1e-4, 1e-6]])
    y = torch.zeros(1, dtype=torch.long)
    # equal logits: the weight gradients are -0.5 * x (row 0) and +0.5 * x (row 1), so the update
    # -lr * grad is +-0.01 * x: 1e-2, 1e-4, 1e-6, 1e-8. Only 1e-2 is over half the spacing (2**-11).
    share, rows = autocast_misuse.lost_updates(model, x, y, lr=0.02)
    assert share == pytest.approx(0.75)
    assert rows == [["weight", "1.5", f"{2.0**-10:.1e}", "1.0e-06", "75%"]]
    assert model.weight.grad is None  # the measurement leaves no gradient behind


def test_both_runs_start_from_the_same_weights(monkeypatch):
    starts = []
    real_adam = torch.optim.Adam

    def recording_adam(params, *args, **kwargs):
        params = list(params)
        starts.append([t.detach().clone() for t in params])
        return real_adam(params, *args, **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", recording_adam)
    run(steps=2, batch_size=16)
    assert len(starts) == 4  # an untimed warm-up of each (on copies), then the two timed runs
    assert all(torch.equal(a, b) for a, b in zip(starts[0], starts[2]))  # the warm-up trained a copy
    half, full = starts[2:]
    assert [t.dtype for t in half] == [torch.float16] * 6 and [t.dtype for t in full] == [torch.float32] * 6
    assert all(torch.equal(h, f.half()) for h, f in zip(half, full))


def test_tables_fit_80_columns(cpu_run):
    events, _ = cpu_run
    for table in (e for e in events if isinstance(e, Table)):
        widths = [max(len(str(c)) for c in col) for col in zip(table.columns, *table.rows)]
        assert sum(widths) + 3 * len(widths) + 1 <= 80, table.title


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_autocast_with_the_cpu_device_type_does_nothing():
    _events, m = run("cuda")
    assert m["right_type_dtype"] == "float16" and m["autocast_dtype"] == "float16"
    assert m["wrong_type_dtype"] == "float32"
    assert m["device"].startswith("cuda") and m["autocast_final_loss"] < math.log(10) - 0.1
    assert 0 < m["lost_update_share"] <= 1
