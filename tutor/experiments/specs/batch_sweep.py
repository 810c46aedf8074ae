"""The spec of `batch-sweep`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/batch_sweep.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class BatchSweepParams(Params):
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(4, ge=1, le=48, description="Linear + ReLU pairs")
    start_batch: int = Field(32, ge=1, le=1 << 20)
    max_batch: int = Field(4096, ge=1, le=1 << 24, description="the largest batch to try")
    steps: int = Field(3, ge=1, le=1000, description="timed steps per batch size, each timed on its own")
    budget_mb: int | None = Field(
        None, ge=1, description="memory budget in MiB (default: the GPU's memory on CUDA, 1024 elsewhere)"
    )


SPEC = Experiment(
    name="batch-sweep",
    title="Throughput and memory as the batch grows",
    module="batch_sweep",
    params=BatchSweepParams,
    metrics={
        # A batch size is not a timing: the tie rule already widened the throughputs, and widening
        # the sizes as well would reach from 1,024 past an option's edge at 1,025 (guard 0).
        "best_batch": Metric(
            "fastest batch size",
            "",
            "the batch size with the most samples/s (its median step's)",
            none="none ran",
            guard=0.0,
            interval_words="the batch sizes tied with it",
        ),
        "best_batch_low": Metric(
            "fastest batch, tied low",
            "",
            "the smallest batch whose samples/s cannot be told from the fastest's (their "
            "ranges over the timed steps, widened by the guard band, overlap)",
            none="none ran",
        ),
        "best_batch_high": Metric("fastest batch, tied high", "", "the largest such batch", none="none ran"),
        "best_samples_per_s": Metric(
            "throughput at the fastest batch", "/s", "its training samples/s (synchronised)", none="none ran"
        ),
        "best_memory_bytes": Metric(
            "memory at the fastest batch",
            "B",
            "its memory (CUDA: peak allocated; elsewhere: weights+grads+Adam+activations)",
            none="none ran",
        ),
        "largest_batch": Metric("largest batch that ran", "", "the largest batch that ran", none="none ran"),
        "largest_memory_bytes": Metric("memory at the largest batch", "B", "its memory", none="none ran"),
        "batches_tried": Metric("batch sizes that ran", "", "batch sizes that ran"),
        "oom_batch": Metric(
            "batch that ran out of memory", "", "the batch size that ran out of memory (CUDA), or None", none="none"
        ),
        "stop_reason": Metric(
            "why the sweep stopped", "text", "why the sweep stopped: max_batch, the budget, or out of memory"
        ),
        "fixed_bytes": Metric(
            "weights, gradients and Adam state", "B", "parameters x 16 bytes: weights, gradients, Adam's two moments"
        ),
        "memory_method": Metric("how memory was measured", "text", "how memory was measured"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"width": 64, "layers": 2, "start_batch": 8, "max_batch": 32, "steps": 1},
)
