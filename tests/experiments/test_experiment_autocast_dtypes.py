"""autocast-dtypes: each operation's output dtype under autocast, and the rule it follows."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.autocast_dtypes import FLOAT32, FOLLOWS, LOWERED, OPS, rule
from tutor.experiments.events import Note, Table
from tutor.experiments.spec import COMMON_METRICS

OP_METRIC = {op: metric for _, op, metric in OPS}


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


def _lists(m) -> dict[str, list[str]]:
    return {
        kind: m[name].split(", ")
        for kind, name in ((LOWERED, "lowered_ops"), (FLOAT32, "float32_ops"), (FOLLOWS, "input_dtype_ops"))
    }


@pytest.fixture(scope="module")
def cpu_run():
    return run_experiment("autocast-dtypes", experiments.get("autocast-dtypes").quick, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("autocast-dtypes").metrics)
    assert m["device"] == "cpu" and m["autocast_dtype"] == "bfloat16"  # amp=auto on a CPU


def test_linear_is_lowered_and_the_loss_kept_in_float32(cpu_run):
    _, m = cpu_run
    assert m["linear_dtype"] == "bfloat16" and m["loss_dtype"] == "float32"
    lists = _lists(m)
    assert "linear" in lists[LOWERED] and "cross_entropy" in lists[FLOAT32] and "relu" in lists[FOLLOWS]


def test_every_op_is_in_exactly_one_list_and_its_dtype_agrees_with_it(cpu_run):
    _, m = cpu_run
    lists = _lists(m)
    listed = [op for ops in lists.values() for op in ops]
    assert sorted(listed) == sorted(OP_METRIC)
    for op in lists[LOWERED]:
        assert m[OP_METRIC[op]] == "bfloat16", op
    for op in lists[FLOAT32]:
        assert m[OP_METRIC[op]] == "float32", op
    # everything after the linear gets a bfloat16 input in this model, so a follower runs in bfloat16
    for op in lists[FOLLOWS]:
        assert m[OP_METRIC[op]] == "bfloat16", op


def test_autocast_never_changes_the_weights_or_their_gradients(cpu_run):
    events, m = cpu_run
    assert m["weight_dtype"] == "float32" and m["grad_dtype"] == "float32"
    assert "never changes the model" in _notes(events)


def test_the_table_shows_each_ops_input_output_and_rule(cpu_run):
    events, m = cpu_run
    table = next(e for e in events if isinstance(e, Table))
    assert table.columns == ["operation", "its input", "its output", "autocast's rule"]
    assert [row[0] for row in table.rows] == list(OP_METRIC)
    by_op = {row[0]: row for row in table.rows}
    assert by_op["linear"][1:3] == ["float32", "bfloat16"]
    for op, row in by_op.items():
        assert row[2] == m[OP_METRIC[op]]
        if row[3] == FOLLOWS:
            assert row[1] == row[2]


def test_on_a_cpu_the_note_says_what_cuda_would_keep_in_float32(cpu_run):
    events, _ = cpu_run
    notes = _notes(events)
    assert "No GPU here" in notes and "CUDA's float32 list" in notes
    assert "elementwise op such as relu is on no list" in notes


def test_float16_autocast_on_the_cpu():
    _, m = run_experiment("autocast-dtypes", {"amp": "fp16", "batch_size": 4}, "cpu")
    assert m["autocast_dtype"] == "float16" and m["linear_dtype"] == "float16" and m["loss_dtype"] == "float32"


@pytest.mark.parametrize(
    "from_float32, from_low, expected",
    [
        (torch.bfloat16, torch.bfloat16, LOWERED),
        (torch.float32, torch.float32, FLOAT32),
        (torch.float32, torch.bfloat16, FOLLOWS),
        (torch.bfloat16, torch.float32, "bfloat16 / float32"),  # no rule autocast has: shown as measured
    ],
)
def test_rule_from_the_two_output_dtypes(from_float32, from_low, expected):
    assert rule(from_float32, from_low, torch.bfloat16) == expected


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_keeps_softmax_layer_norm_sum_and_the_loss_in_float32():
    events, m = run_experiment("autocast-dtypes", {}, "cuda")
    assert m["autocast_dtype"] == "float16" and m["linear_dtype"] == "float16" and m["relu_dtype"] == "float16"
    for name in ("softmax_dtype", "layernorm_dtype", "sum_dtype", "loss_dtype"):
        assert m[name] == "float32", name
    assert set(_lists(m)[FLOAT32]) == {"layer_norm", "softmax", "cross_entropy", "sum"}
    assert "No GPU here" not in _notes(events)


@pytest.mark.gpu
def test_an_accelerator_lowers_the_linear(accelerator):
    _, m = run_experiment("autocast-dtypes", {}, accelerator)
    assert m["device"].startswith(accelerator)
    if m["autocast_dtype"] != "off":  # MPS autocast may be unsupported by this torch/macOS
        assert m["linear_dtype"] == m["autocast_dtype"] and m["grad_dtype"] == "float32"
