"""The spec of `amp-compare`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/amp_compare.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class AmpCompareParams(Params):
    epochs: int = Field(1, ge=1, le=20)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-3, gt=0)
    amp: Literal["auto", "fp16", "bf16"] = Field("auto", description="auto = fp16 on cuda/mps, bf16 on cpu")
    train_samples: int | None = Field(None, ge=1)
    test_samples: int | None = Field(None, ge=1)


# How far separate runs' speedup land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 11.6% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.12

SPEC = Experiment(
    name='amp-compare',
    title='fp32 vs mixed precision on the same data and seed',
    module='amp_compare',
    params=AmpCompareParams,
    metrics={
        "fp32_seconds": Metric("float32 epoch", "s", "training seconds per epoch in fp32"),
        "amp_seconds": Metric("autocast epoch", "s",
                              "training seconds per epoch with autocast", none="n/a: no autocast here"),
        "speedup": Metric("autocast speedup", "x", "fp32_seconds / amp_seconds", none="n/a: no autocast here", guard=MEASURED_GUARD),
        "speedup_low": Metric("autocast speedup, interval low", "x",
                              "the low end of the speedup's interval: each mode's median interval, divided end to "
                              "end (the modes ran one after the other; None with epochs=1, or without autocast)",
                              none="n/a: one epoch, or no autocast"),
        "speedup_high": Metric("autocast speedup, interval high", "x",
                               "the high end of the same interval (None with epochs=1, or without autocast)",
                               none="n/a: one epoch, or no autocast"),
        "fp32_accuracy": Metric("float32 test accuracy", "%", "test accuracy in fp32 (0..1)"),
        "amp_accuracy": Metric("autocast test accuracy", "%",
                               "test accuracy with autocast (0..1)", none="n/a: no autocast here"),
        "fp32_peak_mb": Metric("float32 peak memory", "MB",
                               "peak device memory in fp32 (MB; None where not measurable)", none="n/a off CUDA"),
        "amp_peak_mb": Metric("autocast peak memory", "MB",
                              "peak device memory with autocast (MB; None where not measurable)", none="n/a off CUDA"),
        "amp_dtype": Metric("autocast dtype", "text", "float16 or bfloat16"),
        "grad_scaler": Metric("GradScaler used", "bool", "True if a GradScaler was used"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"train_samples": 2048, "test_samples": 512},
)
