"""The spec of `ddp-equivalence`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` (and each rank's `rank_main`) in
tutor/experiments/ddp_equivalence.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class DdpEquivalenceParams(Params):
    world_size: int = Field(2, ge=2, le=8, description="processes torchrun starts (ranks)")
    batch_size: int = Field(64, ge=2, le=8192, description="the global batch: each rank trains batch_size / world_size")
    steps: int = Field(5, ge=1, le=200, description="SGD steps both ways before the weights are compared")
    lr: float = Field(0.1, gt=0, le=10, description="SGD's learning rate")

    @model_validator(mode="after")
    def _divisible(self) -> DdpEquivalenceParams:
        if self.batch_size % self.world_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of world_size ({self.world_size})")
        return self


SPEC = Experiment(
    name="ddp-equivalence",
    title="DDP: N processes with batch/N each train like one with the whole batch",
    module="ddp_equivalence",
    params=DdpEquivalenceParams,
    metrics={
        "world_size": Metric("processes (world size)", "", "ranks torchrun started"),
        "backend": Metric("backend", "text", "gloo (CPU processes) or nccl (one GPU per rank)"),
        "global_batch": Metric("global batch", "", "samples per step over all ranks"),
        "per_rank_batch": Metric("batch per rank", "", "global batch / world size"),
        "weights_differed_before_wrap": Metric(
            "weights differed before DDP wrapped them",
            "bool",
            "each rank seeded its model differently; True if any two differed",
        ),
        "ranks_identical_after_wrap": Metric(
            "weights identical after wrapping",
            "bool",
            "DDP's constructor broadcasts rank 0's weights: every rank equal",
        ),
        "local_grad_max_diff": Metric(
            "gradient gap before all-reduce",
            "",
            "a rank's gradient from its own batch/N samples against the whole batch's",
        ),
        "grad_max_diff": Metric(
            "gradient gap after all-reduce",
            "",
            "DDP's averaged gradient on rank 0 against one process's gradient of the whole batch",
        ),
        "grads_allclose": Metric(
            "gradients match one process's",
            "bool",
            "torch.allclose(DDP gradient, whole-batch gradient, rtol=1e-4, atol=1e-6)",
        ),
        "weights_max_diff": Metric(
            "weight gap after the steps", "", "DDP's weights against the single process's after `steps` SGD steps"
        ),
        "ranks_max_diff": Metric(
            "weight gap between ranks", "", "after the steps, every rank's weights against rank 0's (0 = identical)"
        ),
        "allreduce_bytes": Metric(
            "gradient bytes all-reduced per step", "B", "4 bytes x parameters: every gradient, every step"
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
