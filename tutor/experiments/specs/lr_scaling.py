"""The spec of `lr-scaling`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/lr_scaling.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class LrScalingParams(Params):
    batch_size: int = Field(32, ge=8, le=512, description="the base batch")
    lr: float = Field(0.02, gt=0, le=1, description="the base batch's learning rate (plain SGD)")
    scale: int = Field(8, ge=2, le=64, description="k: the big batch is k x the base batch")
    # 64 x 32 = 2,048 at lr 1.28: on MNIST every seed tried diverged or stuck at chance.
    limit_scale: int = Field(
        64, ge=0, le=256, description="the last row: the rule applied at this k (0: leave the row out)"
    )
    seeds: int = Field(3, ge=1, le=5, description="runs of each setting, seeds seed, seed+1, ...")
    train_samples: int = Field(60000, ge=512, le=60000, description="training images: one pass over the first N")
    test_samples: int = Field(10000, ge=100, le=10000, description="the first N test images each run is scored on")

    @model_validator(mode="after")
    def _limit_above_scale(self) -> LrScalingParams:
        if self.limit_scale and self.limit_scale <= self.scale:
            raise ValueError(f"limit_scale ({self.limit_scale}) must be 0 or larger than scale ({self.scale})")
        return self


SPEC = Experiment(
    name="lr-scaling",
    title="A bigger batch, the same samples: scale the learning rate",
    module="lr_scaling",
    params=LrScalingParams,
    metrics={
        "base_accuracy": Metric("base batch: test accuracy", "%", "median over seeds of the base batch's accuracy"),
        "same_lr_accuracy": Metric("k x batch, same lr: test accuracy", "%", "the big batch at the base lr"),
        "scaled_accuracy": Metric("k x batch, k x lr: test accuracy", "%", "the big batch at k x the base lr"),
        "limit_accuracy": Metric(
            "the rule at limit_scale: test accuracy",
            "%",
            "batch and lr both limit_scale x the base's (None: the row was left out)",
            none="not run",
        ),
        "base_loss": Metric("base batch: test loss", "", "median test cross-entropy", none="diverged"),
        "same_lr_loss": Metric("k x batch, same lr: test loss", "", "median test cross-entropy", none="diverged"),
        "scaled_loss": Metric("k x batch, k x lr: test loss", "", "median test cross-entropy", none="diverged"),
        "limit_loss": Metric(
            "the rule at limit_scale: test loss",
            "",
            "median test cross-entropy (None: diverged, or not run)",
            none="diverged, or not run",
        ),
        "same_lr_drop": Metric(
            "accuracy lost at the same lr",
            "%",
            "median over seeds of base accuracy minus the big batch's at the base lr (percentage points, as 0..1)",
            interval_words="the seeds' drops, low to high",
        ),
        "same_lr_drop_low": Metric("accuracy lost at the same lr, low", "%", "the low end of its interval"),
        "same_lr_drop_high": Metric("accuracy lost at the same lr, high", "%", "the high end of its interval"),
        "scaled_drop": Metric(
            "accuracy lost with the lr scaled",
            "%",
            "the same, for the big batch at k x the lr (below 0: it gained)",
            interval_words="the seeds' drops, low to high",
        ),
        "scaled_drop_low": Metric("accuracy lost, lr scaled, low", "%", "the low end of its interval"),
        "scaled_drop_high": Metric("accuracy lost, lr scaled, high", "%", "the high end of its interval"),
        "recovered": Metric(
            "share of the loss the scaled lr won back",
            "%",
            "(scaled - same-lr accuracy) / (base - same-lr accuracy), medians (None if there was no loss)",
            none="no loss to win back",
        ),
        "limit_failed": Metric(
            "the rule at limit_scale: seeds failed",
            "",
            "seeds whose test loss was NaN/inf or whose accuracy stayed under 20% (chance is 10%)",
            none="not run",
        ),
        "base_steps": Metric("base batch: optimiser steps", "", "steps in one pass over the training images"),
        "big_steps": Metric("k x batch: optimiser steps", "", "steps in the same pass at k x the batch"),
        "seeds": Metric("seeds run", "", "runs of each setting"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"train_samples": 4096, "test_samples": 1000, "seeds": 2, "limit_scale": 0},
)
