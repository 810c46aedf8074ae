"""The spec of `oom-recovery`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/oom_recovery.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


class OomRecoveryParams(Params):
    limit_mb: int = Field(128, ge=64, le=1 << 20, description="the memory limit the run sets itself (MiB)")
    batch_size: int | None = Field(
        None, ge=1, le=1 << 24, description="the batch that is too big (default: about twice what fits)"
    )
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")


SPEC = Experiment(
    name='oom-recovery',
    title='Out of memory: the error, the clean-up and the fix',
    module='oom_recovery',
    params=OomRecoveryParams,
    metrics={
        "limit_bytes": "the memory limit the run set itself",
        "batch_size": "the batch that was too big",
        "predicted_bytes": "the memory that batch needs by the formula (weights, grads, Adam, activations)",
        "fits_batch": "the largest batch the formula says fits under the limit",
        "oom": "True if the too-big batch really failed with an out-of-memory error",
        "error_type": "the exception's type, e.g. OutOfMemoryError",
        "error_message": "the first line of its message",
        "released": "True if the memory was back to where it started after the clean-up",
        "recovered": "True if the same batch then trained with gradient accumulation under the limit",
        "micro_batches": "k: the micro-batches the batch was split into",
        "method": "how the limit was set (set_per_process_memory_fraction, RLIMIT_DATA, or none)",
        "device": "torch device used",
    },
    quick={"limit_mb": 64, "width": 256, "layers": 2},
)
