"""The spec of `grad-checkpoint`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/grad_checkpoint.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class GradCheckpointParams(Params):
    depth: int = Field(16, ge=2, le=256, description="Linear + ReLU layers")
    width: int = Field(1024, ge=16, le=16384)
    batch_size: int = Field(256, ge=1, le=65536)
    segments: int = Field(4, ge=1, le=256, description="checkpoint_sequential segments")
    steps: int = Field(5, ge=1, le=1000, description="timed steps per way")

    @model_validator(mode="after")
    def _segments_fit(self) -> GradCheckpointParams:
        if self.segments > 2 * self.depth:
            raise ValueError(f"segments ({self.segments}) can be at most the model's {2 * self.depth} modules")
        return self


SPEC = Experiment(
    name="grad-checkpoint",
    title="Activation checkpointing: memory for compute",
    module="grad_checkpoint",
    params=GradCheckpointParams,
    metrics={
        "plain_kept_bytes": Metric("activations kept, plain", "B", "activations the plain forward keeps for backward"),
        "checkpointed_kept_bytes": Metric("activations kept, checkpointed", "B", "the same with checkpoint_sequential"),
        "kept_formula_bytes": Metric("activations by the formula", "B", "(depth + 1) x batch x width x 4"),
        "memory_saving": Metric("activation memory saved", "%", "1 - checkpointed / plain kept bytes (0..1)"),
        "plain_peak_bytes": Metric(
            "peak memory, plain step",
            "B",
            "peak allocated above the start of a plain step (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "checkpointed_peak_bytes": Metric(
            "peak memory, checkpointed step", "B", "the same checkpointed (CUDA; None elsewhere)", none="n/a off CUDA"
        ),
        "plain_seconds_per_step": Metric("plain step", "s", "seconds per plain training step (synchronised)"),
        "checkpointed_seconds_per_step": Metric(
            "checkpointed step", "s", "seconds per checkpointed step (synchronised)"
        ),
        "time_ratio": Metric("checkpointed vs plain step time", "x", "checkpointed / plain seconds per step"),
        "grads_match": Metric(
            "same gradients both ways", "bool", "True if both ways give the same gradients (allclose)"
        ),
        "max_grad_diff": Metric("largest gradient difference", "", "largest gradient difference between the two"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"depth": 4, "width": 64, "batch_size": 16, "segments": 2, "steps": 1},
)
