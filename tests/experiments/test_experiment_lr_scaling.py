"""lr-scaling: over the same images a k times bigger batch at the same lr falls behind, k times
the lr wins most of it back, and far past that the lr is too large to train at all."""

from __future__ import annotations

import pydantic
import pytest

from tutor import experiments
from tutor.experiments import data as mnist
from tutor.experiments.events import Finished, Note, Started, Table
from tutor.experiments.lr_scaling import Result, Setting, train_once


def run(values):
    events = list(experiments.start("lr-scaling", values, device="cpu"))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_the_big_batch_falls_behind_and_the_scaled_lr_wins_it_back():
    events, m = run({"train_samples": 2048, "test_samples": 500, "seeds": 2, "limit_scale": 0})
    assert set(experiments.get("lr-scaling").metrics) <= set(m)
    assert (m["base_steps"], m["big_steps"]) == (2048 // 32, 2048 // 256)  # the same images, 8x fewer steps
    assert m["same_lr_drop"] > 0.1  # 8 steps of lr 0.02 against 64: far behind
    assert m["same_lr_drop"] == pytest.approx(m["base_accuracy"] - m["same_lr_accuracy"], abs=0.05)
    assert m["scaled_accuracy"] > m["same_lr_accuracy"] + 0.1
    assert m["scaled_drop"] < m["same_lr_drop"] and 0.5 < m["recovered"] <= 1.5
    for name in ("same_lr_drop", "scaled_drop"):
        assert m[f"{name}_low"] <= m[name] <= m[f"{name}_high"]
    assert m["limit_accuracy"] is None and m["limit_failed"] is None  # the row was left out
    [table] = [e for e in events if isinstance(e, Table)]
    assert [(r[1], r[2]) for r in table.rows] == [("32", "0.02"), ("256", "0.02"), ("256", "0.16")]
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "linear scaling rule" in said and "points behind" in said


def test_far_past_the_rule_the_lr_is_too_large_to_train():
    # lr 0.25 x 64 = 16: every seed ends at chance or with its loss blown up.
    _, m = run({"train_samples": 2048, "test_samples": 500, "seeds": 2, "batch_size": 16, "lr": 0.25, "scale": 2})
    assert m["limit_failed"] == 2
    assert m["limit_accuracy"] < 0.2


def test_a_seed_fixes_the_run():
    data = mnist.load("cpu", train_samples=512, test_samples=100)
    setting = Setting("base", 64, 0.05, "base")
    first, second = ([e for e in train_once(setting, 3, data, "cpu", "x") if isinstance(e, Result)] for _ in range(2))
    assert first == second and first[0].steps == 8


def test_failed_means_diverged_or_at_chance():
    assert Result(0.1, float("nan"), 1).failed and Result(0.95, float("inf"), 1).failed
    assert Result(0.15, 2.3, 1).failed and not Result(0.9, 0.3, 1).failed


def test_the_limit_must_lie_past_the_scale():
    with pytest.raises(pydantic.ValidationError):
        experiments.get("lr-scaling").make_params({"scale": 8, "limit_scale": 8})
