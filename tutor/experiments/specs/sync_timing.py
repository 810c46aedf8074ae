"""The spec of `sync-timing`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/sync_timing.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import DecidedParams, Experiment, Metric


class SyncTimingParams(DecidedParams):
    size: int = Field(2048, ge=16, le=16384, description="n of the n x n float32 matmuls timed")
    calls: int = Field(20, ge=1, le=10000, description="matmuls per timing")
    # 9: the median's 96% interval runs from the 2nd to the 8th ratio, so one stray repeat cannot widen it.
    repeats: int = Field(
        9,
        ge=1,
        le=100,
        description="timings per method at least (the median is reported); from 6, "
        "more until the ratio's interval decides every edge in `decide` (none given: until it is within 5% "
        "of its median): up to 40, or 15 s of timing",
    )


# How far separate runs' ratio land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 1.0% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.02

SPEC = Experiment(
    name="sync-timing",
    title="Timing GPU work with and without synchronize",
    module="sync_timing",
    params=SyncTimingParams,
    metrics={
        "unsynced_seconds": Metric(
            "time without synchronize", "s", "median time.perf_counter() time for `calls` matmuls, no synchronize"
        ),
        "synced_seconds": Metric(
            "time with synchronize", "s", "the same with the device synchronised before the clock stops"
        ),
        "events_seconds": Metric(
            "time by CUDA events", "s", "the same measured with CUDA events (None off CUDA)", none="n/a off CUDA"
        ),
        "ratio": Metric(
            "synchronised vs unsynchronised time",
            "x",
            "the median of the repeats' synced / unsynced (the ways take turns; about 1 on a CPU, large on a GPU)",
            guard=MEASURED_GUARD,
        ),
        "ratio_low": Metric(
            "ratio, interval low",
            "x",
            "the low end of the median ratio's 95% interval (order statistics; the lowest ratio under 6 repeats)",
            none="one repeat: no interval",
        ),
        "ratio_high": Metric(
            "ratio, interval high", "x", "the high end of the same interval", none="one repeat: no interval"
        ),
        "asynchronous": Metric(
            "device runs work asynchronously", "bool", "True if the device runs work asynchronously (cuda, mps)"
        ),
        "tflops": Metric(
            "matmul throughput", "TFLOP/s", "matmul throughput from the synced time (2 n^3 FLOPs per matmul, TFLOP/s)"
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"size": 128, "calls": 3, "repeats": 2},
    decides="ratio",
)
