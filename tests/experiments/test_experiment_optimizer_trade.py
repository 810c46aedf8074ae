"""optimizer-trade: Adam, SGD with momentum and SGD to a target accuracy; their state, measured.
Behaviour only: no test compares timings with fixed numbers."""

from __future__ import annotations

import pytest
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.optimizer_trade import OPTIMIZERS
from tutor.experiments.spec import COMMON_METRICS

PARAMETERS = 235_146  # MNISTClassifier
QUICK = experiments.get("optimizer-trade").quick


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


@pytest.fixture(scope="module")
def quick_run():
    """The quick settings, never cut: a busy machine's slow moment must not change what is asserted."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUTOR_CPU_BUDGET_S", "3600")
        return run_experiment("optimizer-trade", QUICK, "cpu")


def test_every_declared_metric_is_reported(quick_run):
    _, m = quick_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("optimizer-trade").metrics)
    assert m["device"] == "cpu" and m["step_cap"] == QUICK["max_steps"]


def test_optimizer_state_is_measured_adam_two_copies_momentum_one_sgd_none(quick_run):
    _, m = quick_run
    weights = PARAMETERS * 4
    assert m["parameter_bytes"] == weights
    assert m["adam_state_bytes"] == 2 * weights + 6 * 4  # exp_avg, exp_avg_sq, and a float32 step per tensor
    assert m["momentum_state_bytes"] == weights
    assert m["sgd_state_bytes"] == 0


def test_steps_to_the_target_are_evaluation_points_and_the_accuracy_agrees(quick_run):
    _, m = quick_run
    for key, _ in OPTIMIZERS:
        steps, accuracy = m[f"{key}_steps"], m[f"{key}_accuracy"]
        if steps is None:
            assert accuracy < QUICK["target_accuracy"], key
        else:
            assert steps % QUICK["eval_every"] == 0 and steps <= QUICK["max_steps"], key
            assert accuracy >= QUICK["target_accuracy"], key
    for key in ("momentum", "sgd"):
        ratio = m[f"{key}_steps_ratio"]
        if m["adam_steps"] is None or m[f"{key}_steps"] is None:
            assert ratio is None
        else:
            assert ratio == pytest.approx(m[f"{key}_steps"] / m["adam_steps"])


def test_the_table_and_notes(quick_run):
    events, _m = quick_run
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == [label for _, label in OPTIMIZERS]
    assert [row[2] for row in table.rows] == ["2x", "1x", "0x"]  # state in copies of the weights
    notes = _notes(events)
    assert "paid for in steps" in notes and "1.5 billion parameters need 12 GB more" in notes
    assert "learning rates" in notes
    assert {s.label for s in events if isinstance(s, Step)} <= {label for _, label in OPTIMIZERS}


def test_sgd_saves_memory_and_costs_steps(monkeypatch):
    """The course's trade, measured: plain SGD keeps no state and needs more steps than Adam."""
    monkeypatch.setenv("GPUTUTOR_CPU_BUDGET_S", "3600")  # never cut, however busy the machine
    _, m = run_experiment(
        "optimizer-trade", {"target_accuracy": 0.8, "max_steps": 400, "eval_every": 20, "eval_samples": 500}, "cpu"
    )
    assert m["adam_steps"] is not None
    assert m["sgd_steps"] is None or m["sgd_steps"] > m["adam_steps"]
    assert m["sgd_state_bytes"] < m["momentum_state_bytes"] < m["adam_state_bytes"]


def test_a_cpu_run_over_its_budget_cuts_the_step_cap_and_says_so(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_CPU_BUDGET_S", "0.05")
    events, m = run_experiment("optimizer-trade", {**QUICK, "max_steps": 5000}, "cpu")
    assert QUICK["eval_every"] <= m["step_cap"] < 5000
    assert "The step cap is cut from 5,000" in _notes(events)
    assert all(s.total == m["step_cap"] for s in events if isinstance(s, Step))


@pytest.mark.gpu
def test_an_accelerator_measures_the_same_state(accelerator):
    _, m = run_experiment("optimizer-trade", {"target_accuracy": 0.9, "max_steps": 2000}, accelerator)
    assert m["device"].startswith(accelerator) and m["step_cap"] == 2000  # never cut on a GPU
    assert m["adam_state_bytes"] == 2 * PARAMETERS * 4 + 6 * 4 and m["momentum_state_bytes"] == PARAMETERS * 4
    assert m["adam_steps"] is not None and (m["sgd_steps"] is None or m["sgd_steps"] > m["adam_steps"])
