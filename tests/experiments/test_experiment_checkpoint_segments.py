"""checkpoint-segments: the activations kept fall and rise again with the segment count, least near
sqrt(depth), exactly as the formula counts them; recomputing costs time; the gradients never change."""

from __future__ import annotations

import math

import pydantic
import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.specs.checkpoint_segments import kept_activations, segment_counts

QUICK = {"depth": 16, "width": 32, "batch_size": 8, "most_segments": 16, "rounds": 3}
TENSOR = QUICK["batch_size"] * QUICK["width"] * 4  # one activation, float32


def run(device, **params):
    return run_experiment("checkpoint-segments", {**QUICK, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run("cpu")


def test_the_sweep_doubles_from_one_segment():
    assert segment_counts(16) == [1, 2, 4, 8, 16]
    assert segment_counts(2) == [1, 2]
    assert [kept_activations(16, k) for k in segment_counts(16)] == [17, 10, 8, 10, 17]
    assert min(segment_counts(64), key=lambda k: kept_activations(64, k)) == 8 == math.sqrt(64)


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("checkpoint-segments").metrics)
    assert m["plain_peak_bytes"] is None and m["best_peak_bytes"] is None  # CUDA only


def test_memory_is_least_at_the_square_root_of_the_depth_and_as_the_formula_counts(cpu_run):
    events, m = cpu_run
    assert m["best_segments"] == 4 and m["sqrt_depth"] == 4
    assert m["formula_matches"] is True
    assert m["plain_kept_bytes"] == 17 * TENSOR  # 1 segment: the plain forward, every layer's output
    assert m["best_kept_bytes"] == 8 * TENSOR  # 3 checkpointed inputs, and the last segment's input and 4 layers
    assert m["most_kept_bytes"] == m["plain_kept_bytes"]  # 16 segments: 15 inputs + the last layer whole
    assert m["best_saving"] == pytest.approx(1 - 8 / 17) and m["most_saving"] == 0
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["1", "2", "4", "8", "16"]
    assert [row[2] for row in table.rows] == ["0%", "41%", "53%", "41%", "0%"]
    chart = next(e.text for e in events if isinstance(e, Note) and e.level == "figure")
    assert all(f"{k} seg |" in chart for k in (1, 2, 4, 8, 16))
    assert max(len(line) for line in chart.splitlines()) <= 72


def test_recomputing_costs_time_and_changes_no_gradient(cpu_run):
    events, m = cpu_run
    assert m["grads_match"] is True
    assert m["most_time_ratio"] > 1  # 15 segments' forwards run again, each with checkpoint's own overhead
    assert m["best_time_ratio_low"] <= m["best_time_ratio"] <= m["best_time_ratio_high"]
    assert m["best_seconds_per_step"] > 0 and m["plain_seconds_per_step"] > 0
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "No GPU here" in said and "sqrt(16)" in said


def test_counts_that_do_not_split_the_depth_into_whole_layers_are_refused():
    spec = experiments.get("checkpoint-segments")
    for values in ({"most_segments": 6}, {"depth": 12, "most_segments": 8}, {"depth": 4, "most_segments": 8}):
        with pytest.raises(pydantic.ValidationError, match="most_segments"):
            spec.make_params(values)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_peak_is_lower_at_the_best_count():
    _, m = run("cuda", depth=16, width=1024, batch_size=512, most_segments=16, rounds=3)
    assert m["best_segments"] == 4 and m["grads_match"] is True
    assert m["best_peak_bytes"] < m["plain_peak_bytes"]
