"""The spec of `graph-leak`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/graph_leak.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


class GraphLeakParams(Params):
    steps: int = Field(100, ge=1, le=100000, description="batches per loop")
    batch_size: int = Field(256, ge=1, le=65536)


SPEC = Experiment(
    name='graph-leak',
    title='A loss list that keeps the graph alive',
    module='graph_leak',
    params=GraphLeakParams,
    metrics={
        "train_kept_bytes": "tensor bytes still alive after a training loop that appends `loss` (after backward)",
        "eval_kept_bytes": "the same after an evaluation loop that appends `loss` without torch.no_grad()",
        "fixed_kept_bytes": "the same after the loop that appends `loss.item()` under torch.no_grad()",
        "eval_bytes_per_step": "eval_kept_bytes / steps: the activations each kept graph holds",
        "train_graph_nodes": "autograd nodes the training loop's list keeps alive",
        "eval_graph_nodes": "autograd nodes the evaluation loop's list keeps alive",
        "allocator_growth_bytes": "memory_allocated() growth across the evaluation loop (CUDA; None elsewhere)",
        "steps": "batches per loop",
        "device": "torch device used",
    },
    quick={"steps": 5, "batch_size": 32},
)
