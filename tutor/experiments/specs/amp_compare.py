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
# them), on this 2-core CPU, with the steps in turns: 0.7%, 0.0%, 0.0% in three studies of 5 runs
# each at the lesson's settings, and 4.4% between studies (the machine's state moved: medians near
# 1.25x in one, 1.33x in the next). bench/verdict_study.py, 2026-11-28. (11.6% when the speedup was
# the trainings' epochs divided end to end.)
MEASURED_GUARD = 0.05

SPEC = Experiment(
    name="amp-compare",
    title="fp32 vs mixed precision on the same data and seed",
    module="amp_compare",
    params=AmpCompareParams,
    metrics={
        "fp32_seconds": Metric("float32 epoch", "s", "training seconds per epoch in fp32"),
        "amp_seconds": Metric(
            "autocast epoch", "s", "training seconds per epoch with autocast", none="n/a: no autocast here"
        ),
        "speedup": Metric(
            "autocast speedup",
            "x",
            "the median of 10 rounds' float32 / autocast seconds, each round a stretch of training "
            "steps on one batch per precision, the two taking turns (after the trainings)",
            none="n/a: no autocast here",
            guard=MEASURED_GUARD,
        ),
        "speedup_low": Metric(
            "autocast speedup, interval low",
            "x",
            "the low end of the median ratio's interval (order statistics of the 10 rounds' "
            "ratios: 98%; None without autocast)",
            none="n/a: no autocast here",
        ),
        "speedup_high": Metric(
            "autocast speedup, interval high",
            "x",
            "the high end of the same interval (None without autocast)",
            none="n/a: no autocast here",
        ),
        "fp32_accuracy": Metric("float32 test accuracy", "%", "test accuracy in fp32 (0..1)"),
        "amp_accuracy": Metric(
            "autocast test accuracy", "%", "test accuracy with autocast (0..1)", none="n/a: no autocast here"
        ),
        "fp32_peak_mb": Metric(
            "float32 peak memory",
            "MB",
            "peak device memory in fp32 (MB; None where not measurable)",
            none="n/a off CUDA",
        ),
        "amp_peak_mb": Metric(
            "autocast peak memory",
            "MB",
            "peak device memory with autocast (MB; None where not measurable)",
            none="n/a off CUDA",
        ),
        "amp_dtype": Metric("autocast dtype", "text", "float16 or bfloat16"),
        "grad_scaler": Metric("GradScaler used", "bool", "True if a GradScaler was used"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"train_samples": 2048, "test_samples": 512},
)
