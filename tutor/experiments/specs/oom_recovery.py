"""The spec of `oom-recovery`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/oom_recovery.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class OomRecoveryParams(Params):
    limit_mb: int = Field(128, ge=64, le=1 << 20, description="the memory limit the run sets itself (MiB)")
    batch_size: int | None = Field(
        None, ge=1, le=1 << 24, description="the batch that is too big (default: about twice what fits)"
    )
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")


SPEC = Experiment(
    name="oom-recovery",
    title="Out of memory: the error, the clean-up and the fix",
    module="oom_recovery",
    params=OomRecoveryParams,
    metrics={
        "limit_bytes": Metric("memory limit", "B", "the memory limit the run set itself"),
        "batch_size": Metric("too-big batch", "", "the batch that was too big"),
        "predicted_bytes": Metric(
            "memory it needs by the formula",
            "B",
            "the memory that batch needs by the formula (weights, grads, Adam, activations)",
        ),
        "fits_batch": Metric("largest batch that fits", "", "the largest batch the formula says fits under the limit"),
        "oom": Metric(
            "ran out of memory", "bool", "True if the too-big batch really failed with an out-of-memory error"
        ),
        "error_type": Metric("error type", "text", "the exception's type, e.g. OutOfMemoryError", none="no error"),
        "error_message": Metric("error message", "text", "the first line of its message", none="no error"),
        "released": Metric(
            "memory back after the clean-up",
            "bool",
            "True if the memory was back to where it started after the clean-up",
            none="n/a: no out-of-memory error",
        ),
        "recovered": Metric(
            "trained in micro-batches",
            "bool",
            "True if the same batch then trained with gradient accumulation under the limit",
            none="n/a: not tried",
        ),
        "micro_batches": Metric(
            "micro-batches (k)", "", "k: the micro-batches the batch was split into", none="n/a: not recovered"
        ),
        "method": Metric(
            "how the limit was set",
            "text",
            "how the limit was set (set_per_process_memory_fraction, RLIMIT_DATA, or none)",
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"limit_mb": 64, "width": 256, "layers": 2},
)
