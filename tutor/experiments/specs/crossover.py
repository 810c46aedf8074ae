"""The spec of `crossover`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/crossover.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class CrossoverParams(Params):
    model: Literal["tiny", "mlp", "both"] = Field(
        "both", description="tiny: ~500-parameter model; mlp: the notebook's MNISTClassifier"
    )
    tiny_samples: int = Field(200, ge=1)
    tiny_batch_size: int = Field(32, ge=1)
    mlp_samples: int = Field(60000, ge=1)
    mlp_batch_size: int = Field(64, ge=1)
    epochs: int = Field(1, ge=1, le=20)
    repeats: int = Field(3, ge=1, le=20, description="timed repeats per case (the median is reported)")


# The speedups' noise: the devices run one after the other, so no repeat has a partner of its own.
NOISE_LOW = (
    "the low end of the speedup's 95% interval: each device's median interval, divided end to end "
    "(measurement.intervals.ratio_interval). None without an accelerator or with one repeat"
)
NOISE_HIGH = "the high end of the same interval. None as for the low end"
ONE_REPEAT = "n/a: no GPU or one repeat"

SPEC = Experiment(
    name="crossover",
    title="When does the GPU pay off? CPU vs accelerator",
    module="crossover",
    params=CrossoverParams,
    metrics={
        "cpu_seconds_tiny": Metric(
            "tiny model on the CPU", "s", "median seconds to train the tiny model on the CPU", none="n/a: not run"
        ),
        "accel_seconds_tiny": Metric(
            "tiny model on the accelerator", "s", "same on the accelerator (None without one)", none="n/a: no GPU here"
        ),
        "speedup_tiny": Metric(
            "tiny model: accelerator speedup",
            "x",
            "cpu / accelerator time for the tiny model (None without an accelerator)",
            none="n/a: no GPU here",
        ),
        "cpu_seconds_mlp": Metric(
            "MNISTClassifier on the CPU",
            "s",
            "median seconds to train MNISTClassifier on the CPU (projected to all its images where fewer were timed)",
            none="n/a: not run",
        ),
        "accel_seconds_mlp": Metric(
            "MNISTClassifier on the accelerator",
            "s",
            "same on the accelerator (None without one)",
            none="n/a: no GPU here",
        ),
        "speedup_mlp": Metric(
            "MNISTClassifier: accelerator speedup",
            "x",
            "cpu / accelerator time for MNISTClassifier (None without an accelerator)",
            none="n/a: no GPU here",
        ),
        "speedup": Metric(
            "accelerator speedup",
            "x",
            "the headline speedup: speedup_mlp (None without an accelerator)",
            none="n/a: no GPU here",
        ),
        "speedup_tiny_low": Metric("tiny model speedup, interval low", "x", NOISE_LOW, none=ONE_REPEAT),
        "speedup_tiny_high": Metric("tiny model speedup, interval high", "x", NOISE_HIGH, none=ONE_REPEAT),
        "speedup_mlp_low": Metric("MNISTClassifier speedup, interval low", "x", NOISE_LOW, none=ONE_REPEAT),
        "speedup_mlp_high": Metric("MNISTClassifier speedup, interval high", "x", NOISE_HIGH, none=ONE_REPEAT),
        "speedup_low": Metric("accelerator speedup, interval low", "x", NOISE_LOW, none=ONE_REPEAT),
        "speedup_high": Metric("accelerator speedup, interval high", "x", NOISE_HIGH, none=ONE_REPEAT),
        "accelerator": Metric("accelerator", "text", "the accelerator's name, or 'none'"),
        "cpu_images_timed_mlp": Metric(
            "images the CPU timed (MNISTClassifier)",
            "",
            "images the CPU timed for MNISTClassifier where not all fit the step's time "
            "budget (its time is then projected); n/a when all were timed",
            none="all",
        ),
    },
    quick={"tiny_samples": 200, "mlp_samples": 1024, "repeats": 1},
)
