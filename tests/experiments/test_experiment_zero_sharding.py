"""zero-sharding: Adam's state per rank under DDP, ZeRO-1 (ZeroRedundancyOptimizer) and FSDP on
2 gloo processes under torchrun, beside the ledger's formulas; the same weights every way.
One launch for the module."""

from __future__ import annotations

import pydantic
import pytest
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.specs.zero_sharding import ledger

PSI = 235_146  # MNISTClassifier's parameters; fc1.weight alone is 200,704


@pytest.fixture(scope="module")
def cpu_run():
    return run_experiment("zero-sharding", experiments.get("zero-sharding").quick, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("zero-sharding").metrics)
    assert (m["world_size"], m["backend"], m["parameters"]) == (2, "gloo", PSI)


def test_ddp_holds_everything_and_zero1_only_splits_adams_state(cpu_run):
    _, m = cpu_run
    assert m["ddp_param_bytes"] == m["ddp_grad_bytes"] == 4 * PSI == 940_584
    assert m["ddp_state_bytes"] == 8 * PSI + 6 * 4  # two moments, and a 4-byte step per tensor (6 tensors)
    assert m["zero1_param_bytes"] == m["zero1_grad_bytes"] == 4 * PSI  # unchanged by ZeRO-1
    # whole tensors per rank, largest first: fc1.weight on one rank, the other five on the other
    assert m["zero1_largest_rank_params"] == 200_704
    assert m["zero1_max_state_bytes"] == 8 * 200_704 + 4
    assert m["zero1_min_state_bytes"] == 8 * (PSI - 200_704) + 5 * 4
    assert m["zero1_max_state_bytes"] + m["zero1_min_state_bytes"] == m["ddp_state_bytes"]
    assert m["zero1_max_state_share"] == pytest.approx(1_605_636 / 1_881_192)
    assert m["zero1_state_formula_bytes"] == 8 * PSI / 2


def test_fsdp_shards_everything_and_the_formulas_are_the_ledgers(cpu_run):
    _, m = cpu_run
    assert m["fsdp_param_bytes"] == m["fsdp_grad_bytes"] == 2 * PSI
    assert m["fsdp_state_bytes"] == 4 * PSI + 6 * 4
    assert m["fsdp_total_bytes"] == 8 * PSI + 24
    assert (m["ddp_formula_bytes"], m["zero1_formula_bytes"], m["zero2_formula_bytes"], m["zero3_formula_bytes"]) == (
        16 * PSI,
        12 * PSI,
        10 * PSI,
        8 * PSI,
    )
    assert m["ddp_total_bytes"] == 16 * PSI + 24


def test_every_way_trains_to_the_same_weights(cpu_run):
    events, m = cpu_run
    assert m["weights_match"] is True and m["ranks_max_diff"] == 0.0
    assert m["zero1_weights_max_diff"] < 1e-6 and m["fsdp_weights_max_diff"] < 1e-6
    split = next(e for e in events if isinstance(e, Table) and "split" in e.title)
    assert [row[1] for row in split.rows] == ["fc1.weight", "fc1.bias, fc2.weight, fc2.bias, fc3.weight, fc3.bias"]
    assert any("not 1/2" in e.text for e in events if isinstance(e, Note))


def test_ledger_formulas():
    rows = ledger(1000, 4)
    assert rows["ddp"]["total"] == 16_000 and rows["zero1"]["total"] == 4000 + 4000 + 2000
    assert rows["zero2"]["total"] == 4000 + 1000 + 2000 and rows["zero3"]["total"] == 4000


def test_byte_counting_helpers_read_adams_state():
    import torch

    from tutor.experiments.zero_sharding import state_tensors, tensor_bytes

    layer = torch.nn.Linear(3, 2)
    adam = torch.optim.Adam(layer.parameters())
    layer(torch.ones(1, 3)).sum().backward()
    adam.step()
    assert tensor_bytes(layer.parameters()) == 8 * 4 and tensor_bytes([None, 1.0]) == 0
    assert tensor_bytes(state_tensors(adam)) == 2 * 8 * 4 + 2 * 4


def test_the_batch_must_split_evenly_over_the_ranks():
    with pytest.raises(pydantic.ValidationError, match="multiple of world_size"):
        experiments.get("zero-sharding").make_params({"batch_size": 33})


def test_fsdp_shards_on_the_plans_device_not_the_accelerator_torch_finds():
    """On a one-GPU box the plan for 2 ranks is gloo on the CPU; fully_shard left to itself
    shards onto the accelerator it finds (cuda), which one rank cannot use while the other
    waits in a collective. One gloo rank in this process, with torch told a CUDA device is the
    accelerator: FSDP is measured on the CPU as planned."""
    from unittest import mock

    import torch
    import torch.distributed as dist

    from tutor.experiments import zero_sharding
    from tutor.experiments.rank import RankContext

    results: dict = {}

    class Captured(RankContext):
        def _emit(self, kind, **fields):
            if kind == "result":
                results.update(fields["values"])

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        with mock.patch.object(torch._C, "_get_accelerator", return_value=torch.device("cuda")):
            zero_sharding.rank_main(
                Captured(0, 0, 1, "gloo", torch.device("cpu"), {"world_size": 2, "batch_size": 8, "steps": 1})
            )
    finally:
        dist.destroy_process_group()
    assert "fsdp_error" not in results, results.get("fsdp_error")
    assert results["fsdp"]["param_bytes"] == 4 * PSI  # one rank holds every shard
