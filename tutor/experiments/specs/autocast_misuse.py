"""The spec of `autocast-misuse`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/autocast_misuse.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class AutocastMisuseParams(Params):
    steps: int = Field(
        300, ge=1, le=100000, description="training steps of the model.half() case and its autocast twin"
    )
    batch_size: int = Field(64, ge=1, le=65536)
    lr: float = Field(1e-3, gt=0, le=10, description="Adam's learning rate, both cases")


SPEC = Experiment(
    name="autocast-misuse",
    title="Mixed precision done wrong: the wrong device_type, and model.half()",
    module="autocast_misuse",
    params=AutocastMisuseParams,
    metrics={
        "wrong_type_dtype": Metric(
            "dtype under the other device_type",
            "text",
            "dtype of a Linear output under autocast with the other device_type",
        ),
        "right_type_dtype": Metric(
            "dtype under this device's type", "text", "the same under autocast with this device's type"
        ),
        "autocast_dtype": Metric(
            "this device's autocast dtype", "text", "the low-precision dtype this device's autocast uses"
        ),
        "half_final_loss": Metric(
            "model.half() final loss", "", "mean loss of the last steps, model.half() with Adam (NaN once it broke)"
        ),
        "half_nan_step": Metric(
            "model.half() loss broke at step",
            "",
            "the step at which model.half()'s loss first became NaN or inf (None if never)",
            none="never",
        ),
        "half_accuracy": Metric("model.half() test accuracy", "%", "test accuracy after the model.half() run (0..1)"),
        "autocast_final_loss": Metric(
            "autocast final loss", "", "mean loss of the last steps, the same training with autocast"
        ),
        "autocast_accuracy": Metric("autocast test accuracy", "%", "test accuracy after the autocast run (0..1)"),
        "lost_update_share": Metric(
            "update float16 weights round away",
            "%",
            "share of one SGD update's weight changes that float16 weights round away (0..1)",
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"steps": 20, "batch_size": 32},
)
