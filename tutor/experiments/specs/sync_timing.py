"""The spec of `sync-timing`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/sync_timing.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class SyncTimingParams(Params):
    size: int = Field(2048, ge=16, le=16384, description="n of the n x n float32 matmuls timed")
    calls: int = Field(20, ge=1, le=10000, description="matmuls per timing")
    repeats: int = Field(5, ge=1, le=100, description="timings per method (the median is reported)")


SPEC = Experiment(
    name='sync-timing',
    title='Timing GPU work with and without synchronize',
    module='sync_timing',
    params=SyncTimingParams,
    metrics={
        "unsynced_seconds": Metric("time without synchronize", "s",
                                   "median time.perf_counter() time for `calls` matmuls, no synchronize"),
        "synced_seconds": Metric("time with synchronize", "s",
                                 "the same with the device synchronised before the clock stops"),
        "events_seconds": Metric("time by CUDA events", "s",
                                 "the same measured with CUDA events (None off CUDA)", none="n/a off CUDA"),
        "ratio": Metric("synchronised vs unsynchronised time", "x",
                        "synced_seconds / unsynced_seconds (about 1 on a CPU; large on a GPU)"),
        "ratio_low": Metric("lowest ratio of one repeat", "x",
                            "the two ways take turns; each repeat's synced / unsynced, the lowest"),
        "ratio_high": Metric("highest ratio of one repeat", "x",
                             "each repeat's synced / unsynced, the highest: how far the repeats spread"),
        "asynchronous": Metric("device runs work asynchronously", "bool",
                               "True if the device runs work asynchronously (cuda, mps)"),
        "tflops": Metric("matmul throughput", "TFLOP/s",
                         "matmul throughput from the synced time (2 n^3 FLOPs per matmul, TFLOP/s)"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"size": 128, "calls": 3, "repeats": 2},
)
