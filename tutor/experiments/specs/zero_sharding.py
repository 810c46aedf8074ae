"""The spec of `zero-sharding`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` (and each rank's `rank_main`) in
tutor/experiments/zero_sharding.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


def ledger(parameters: int, world_size: int) -> dict[str, dict[str, float]]:
    """Bytes per rank of FP32 weights (4 B a parameter), gradients (4 B) and Adam's two moments
    (8 B), by the ZeRO paper's accounting: each divided by N where that stage shards it."""
    psi, n = parameters, world_size
    full: dict[str, float] = {"weights": 4 * psi, "gradients": 4 * psi, "adam": 8 * psi}
    rows: dict[str, dict[str, float]] = {
        "ddp": full,
        "zero1": {**full, "adam": 8 * psi / n},
        "zero2": {**full, "gradients": 4 * psi / n, "adam": 8 * psi / n},
        "zero3": {"weights": 4 * psi / n, "gradients": 4 * psi / n, "adam": 8 * psi / n},
    }
    return {name: {**row, "total": sum(row.values())} for name, row in rows.items()}


class ZeroShardingParams(Params):
    world_size: int = Field(2, ge=2, le=8, description="processes torchrun starts (ranks): N")
    batch_size: int = Field(64, ge=2, le=8192, description="the global batch: each rank trains batch_size / world_size")
    steps: int = Field(3, ge=1, le=50, description="Adam steps each way before the state and the weights are read")
    lr: float = Field(1e-3, gt=0, le=1, description="Adam's learning rate")
    fsdp: bool = Field(True, description="also train with FSDP (fully_shard): the ZeRO-3 row measured")

    @model_validator(mode="after")
    def _divisible(self) -> ZeroShardingParams:
        if self.batch_size % self.world_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of world_size ({self.world_size})")
        return self


_NOT_RUN = "not measured"

SPEC = Experiment(
    name="zero-sharding",
    title="ZeRO: Adam's state split over the ranks, and the same weights as DDP",
    module="zero_sharding",
    params=ZeroShardingParams,
    metrics={
        "world_size": Metric("processes (world size)", "", "N: ranks torchrun started"),
        "backend": Metric("backend", "text", "gloo (CPU processes) or nccl (one GPU per rank)"),
        "parameters": Metric("parameters", "", "Ψ: MNISTClassifier's parameter count"),
        "ddp_param_bytes": Metric("weights per rank, DDP", "B", "numel x element size of the parameters on a rank"),
        "ddp_grad_bytes": Metric("gradients per rank, DDP", "B", "numel x element size of the .grad tensors on a rank"),
        "ddp_state_bytes": Metric(
            "Adam state per rank, DDP",
            "B",
            "every tensor in torch.optim.Adam's state on a rank after a step (the same on all)",
        ),
        "zero1_param_bytes": Metric(
            "weights per rank, ZeRO-1", "B", "as DDP's: ZeRO-1 keeps every weight on every rank"
        ),
        "zero1_grad_bytes": Metric("gradients per rank, ZeRO-1", "B", "as DDP's: ZeRO-1 keeps every gradient"),
        "zero1_max_state_bytes": Metric(
            "Adam state, ZeRO-1's largest rank",
            "B",
            "ZeroRedundancyOptimizer's local Adam state on the rank holding the most",
        ),
        "zero1_min_state_bytes": Metric(
            "Adam state, ZeRO-1's smallest rank",
            "B",
            "ZeroRedundancyOptimizer's local Adam state on the rank holding the least",
        ),
        "zero1_max_state_share": Metric(
            "largest rank's share of Adam's state",
            "%",
            "zero1_max_state_bytes / ddp_state_bytes; 1/N if the split were even",
        ),
        "zero1_largest_rank_params": Metric(
            "parameters on ZeRO-1's largest rank",
            "",
            "parameters whose Adam state that rank holds (whole tensors per rank)",
        ),
        "zero1_state_formula_bytes": Metric(
            "Adam state per rank, formula 8Ψ/N", "B", "ZeRO-1's optimizer state per rank by the formula, for comparison"
        ),
        "fsdp_param_bytes": Metric(
            "weights per rank, FSDP (ZeRO-3)",
            "B",
            "the local shards of fully_shard's parameters (None: FSDP not run)",
            none=_NOT_RUN,
        ),
        "fsdp_grad_bytes": Metric(
            "gradients per rank, FSDP (ZeRO-3)",
            "B",
            "the local shards of the gradients (None: FSDP not run)",
            none=_NOT_RUN,
        ),
        "fsdp_state_bytes": Metric(
            "Adam state per rank, FSDP (ZeRO-3)",
            "B",
            "the local shards of Adam's state (None: FSDP not run)",
            none=_NOT_RUN,
        ),
        "ddp_total_bytes": Metric("weights+grads+state per rank, DDP", "B", "measured, the same on every rank"),
        "zero1_max_total_bytes": Metric(
            "weights+grads+state, ZeRO-1's largest", "B", "measured, the rank with the most"
        ),
        "fsdp_total_bytes": Metric(
            "weights+grads+state per rank, FSDP",
            "B",
            "measured, the rank with the most (None: FSDP not run)",
            none=_NOT_RUN,
        ),
        "ddp_formula_bytes": Metric("DDP per rank by formula", "B", "4Ψ weights + 4Ψ gradients + 8Ψ Adam"),
        "zero1_formula_bytes": Metric("ZeRO-1 per rank by formula", "B", "4Ψ + 4Ψ + 8Ψ/N"),
        "zero2_formula_bytes": Metric("ZeRO-2 per rank by formula", "B", "4Ψ + 4Ψ/N + 8Ψ/N (not measured)"),
        "zero3_formula_bytes": Metric("ZeRO-3/FSDP per rank by formula", "B", "(4Ψ + 4Ψ + 8Ψ)/N"),
        "zero1_weights_max_diff": Metric(
            "weight gap, ZeRO-1 against DDP", "", "largest difference after the same Adam steps from the same start"
        ),
        "fsdp_weights_max_diff": Metric(
            "weight gap, FSDP against DDP",
            "",
            "the full weights (gathered) against DDP's (None: FSDP not run)",
            none=_NOT_RUN,
        ),
        "ranks_max_diff": Metric(
            "weight gap between ranks", "", "every rank's full weights against rank 0's, every method (0 = identical)"
        ),
        "weights_match": Metric(
            "same weights every way",
            "bool",
            "True if each sharded run's weights are allclose to DDP's (rtol 1e-5, atol 1e-6)",
        ),
        "launch_seconds": Metric(
            "launch: until every rank joined",
            "s",
            "torchrun started to every rank in the process group (python, torch, rendezvous)",
        ),
        "job_seconds": Metric("whole job", "s", "torchrun started to all processes ended"),
        "attempts": Metric("launches", "", "torchrun launches it took (a failed start is tried once more)"),
    },
    quick={"batch_size": 16, "steps": 2},
)
