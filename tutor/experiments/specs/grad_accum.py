"""The spec of `grad-accum`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/grad_accum.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import DecidedParams, Experiment, Metric


class GradAccumParams(DecidedParams):
    batch_size: int = Field(256, ge=2, le=60000, description="the large batch the micro-batches add up to")
    micro_batches: int = Field(4, ge=2, le=256, description="k: micro-batches per update")
    updates: int = Field(20, ge=1, le=10000, description="timed updates per method")

    @model_validator(mode="after")
    def _divisible(self) -> GradAccumParams:
        if self.batch_size % self.micro_batches:
            raise ValueError(
                f"batch_size ({self.batch_size}) must be a multiple of micro_batches ({self.micro_batches})"
            )
        return self


# How far separate runs' time_ratio land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 1.4% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.02

SPEC = Experiment(
    name="grad-accum",
    title="Gradient accumulation: k micro-batches, one update",
    module="grad_accum",
    params=GradAccumParams,
    metrics={
        "batch_size": Metric("large batch", "", "the large batch"),
        "micro_batches": Metric("micro-batches (k)", "", "k, the micro-batches it was split into"),
        "micro_batch_size": Metric("micro-batch size", "", "batch_size / k"),
        "max_abs_diff": Metric(
            "largest gradient difference", "", "largest difference between accumulated and large-batch gradients"
        ),
        "allclose": Metric(
            "gradients match", "bool", "torch.allclose(accumulated, large-batch gradient, rtol=1e-4, atol=1e-6)"
        ),
        "cosine": Metric(
            "cosine similarity of the gradients", "", "cosine similarity of the two gradients (1 = same direction)"
        ),
        "undivided_norm_ratio": Metric(
            "gradient norm without dividing by k",
            "x",
            "gradient norm without dividing each loss by k, over the right one (about k)",
        ),
        "weights_max_diff": Metric(
            "largest weight difference after a step", "", "largest weight difference after one SGD step from each"
        ),
        "big_seconds_per_update": Metric(
            "update with one large batch",
            "s",
            "seconds per update with one large batch (synchronised; the median "
            "of the rounds, the two ways taking turns)",
        ),
        "accum_seconds_per_update": Metric(
            "update with k micro-batches",
            "s",
            "seconds per update with k micro-batches (synchronised; the median of the rounds)",
        ),
        "time_ratio": Metric(
            "accumulation time vs one batch",
            "x",
            "the median over the rounds of accumulated / one-batch seconds per update, the two "
            "ways taking turns (up to 10 rounds sharing the `updates` timed updates)",
            guard=MEASURED_GUARD,
        ),
        "time_ratio_low": Metric(
            "time ratio, interval low",
            "x",
            "the low end of the median ratio's 95% interval (order statistics of the rounds' "
            "ratios; their lowest under 6 rounds; None: a single round, updates=1)",
            none="one round: no interval",
        ),
        "time_ratio_high": Metric(
            "time ratio, interval high",
            "x",
            "the high end of the same interval (None: a single round, updates=1)",
            none="one round: no interval",
        ),
        "big_activation_bytes": Metric(
            "activations kept, large batch", "B", "activations a large-batch forward keeps for backward"
        ),
        "micro_activation_bytes": Metric(
            "activations kept, micro-batch", "B", "activations a micro-batch forward keeps"
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"batch_size": 64, "micro_batches": 4, "updates": 2},
    decides="time_ratio",
)
