"""The spec of `graph-leak`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/graph_leak.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class GraphLeakParams(Params):
    steps: int = Field(100, ge=1, le=100000, description="batches per loop")
    batch_size: int = Field(256, ge=1, le=65536)


SPEC = Experiment(
    name="graph-leak",
    title="A loss list that keeps the graph alive",
    module="graph_leak",
    params=GraphLeakParams,
    metrics={
        "train_kept_bytes": Metric(
            "kept after the training loop",
            "B",
            "tensor bytes still alive after a training loop that appends `loss` (after backward)",
        ),
        "eval_kept_bytes": Metric(
            "kept after the eval loop",
            "B",
            "the same after an evaluation loop that appends `loss` without torch.no_grad()",
        ),
        "fixed_kept_bytes": Metric(
            "kept after the fixed loop", "B", "the same after the loop that appends `loss.item()` under torch.no_grad()"
        ),
        "eval_bytes_per_step": Metric(
            "kept per eval step", "B", "eval_kept_bytes / steps: the activations each kept graph holds"
        ),
        "train_graph_nodes": Metric(
            "graph nodes kept, training loop", "", "autograd nodes the training loop's list keeps alive"
        ),
        "eval_graph_nodes": Metric(
            "graph nodes kept, eval loop", "", "autograd nodes the evaluation loop's list keeps alive"
        ),
        "allocator_growth_bytes": Metric(
            "allocator growth, eval loop",
            "B",
            "memory_allocated() growth across the evaluation loop (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "steps": Metric("batches per loop", "", "batches per loop"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"steps": 5, "batch_size": 32},
)
