"""The spec of `grad-checkpoint`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/grad_checkpoint.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Params


class GradCheckpointParams(Params):
    depth: int = Field(16, ge=2, le=256, description="Linear + ReLU layers")
    width: int = Field(1024, ge=16, le=16384)
    batch_size: int = Field(256, ge=1, le=65536)
    segments: int = Field(4, ge=1, le=256, description="checkpoint_sequential segments")
    steps: int = Field(5, ge=1, le=1000, description="timed steps per way")

    @model_validator(mode="after")
    def _segments_fit(self) -> "GradCheckpointParams":
        if self.segments > 2 * self.depth:
            raise ValueError(f"segments ({self.segments}) can be at most the model's {2 * self.depth} modules")
        return self


SPEC = Experiment(
    name='grad-checkpoint',
    title='Activation checkpointing: memory for compute',
    module='grad_checkpoint',
    params=GradCheckpointParams,
    metrics={
        "plain_kept_bytes": "activations the plain forward keeps for backward",
        "checkpointed_kept_bytes": "the same with checkpoint_sequential",
        "kept_formula_bytes": "(depth + 1) x batch x width x 4",
        "memory_saving": "1 - checkpointed / plain kept bytes (0..1)",
        "plain_peak_bytes": "peak allocated above the start of a plain step (CUDA; None elsewhere)",
        "checkpointed_peak_bytes": "the same checkpointed (CUDA; None elsewhere)",
        "plain_seconds_per_step": "seconds per plain training step (synchronised)",
        "checkpointed_seconds_per_step": "seconds per checkpointed step (synchronised)",
        "time_ratio": "checkpointed / plain seconds per step",
        "grads_match": "True if both ways give the same gradients (allclose)",
        "max_grad_diff": "largest gradient difference between the two",
        "device": "torch device used",
    },
    quick={"depth": 4, "width": 64, "batch_size": 16, "segments": 2, "steps": 1},
)
