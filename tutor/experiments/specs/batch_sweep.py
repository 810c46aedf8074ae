"""The spec of `batch-sweep`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/batch_sweep.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


class BatchSweepParams(Params):
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(4, ge=1, le=48, description="Linear + ReLU pairs")
    start_batch: int = Field(32, ge=1, le=1 << 20)
    max_batch: int = Field(4096, ge=1, le=1 << 24, description="the largest batch to try")
    steps: int = Field(3, ge=1, le=1000, description="timed steps per batch size")
    budget_mb: int | None = Field(
        None, ge=1, description="memory budget in MiB (default: the GPU's memory on CUDA, 1024 elsewhere)"
    )


SPEC = Experiment(
    name='batch-sweep',
    title='Throughput and memory as the batch grows',
    module='batch_sweep',
    params=BatchSweepParams,
    metrics={
        "best_batch": "the batch size with the most samples/s",
        "best_samples_per_s": "its training samples/s (synchronised)",
        "best_memory_bytes": "its memory (CUDA: peak allocated; elsewhere: weights+grads+Adam+activations)",
        "largest_batch": "the largest batch that ran",
        "largest_memory_bytes": "its memory",
        "batches_tried": "batch sizes that ran",
        "oom_batch": "the batch size that ran out of memory (CUDA), or None",
        "stop_reason": "why the sweep stopped: max_batch, the budget, or out of memory",
        "fixed_bytes": "parameters x 16 bytes: weights, gradients, Adam's two moments",
        "memory_method": "how memory was measured",
        "device": "torch device used",
    },
    quick={"width": 64, "layers": 2, "start_batch": 8, "max_batch": 32, "steps": 1},
)
