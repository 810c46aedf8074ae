"""The spec of `memory-ledger`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/memory_ledger.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class MemoryLedgerParams(Params):
    width: int = Field(4096, ge=16, le=16384, description="features per Linear layer (PyTorch's AMP recipe: 4096)")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")
    batch_size: int = Field(256, ge=1, le=65536)


SPEC = Experiment(
    name="memory-ledger",
    title="Training memory by component, measured beside the formula",
    module="memory_ledger",
    params=MemoryLedgerParams,
    metrics={
        "parameters": Metric("parameter count", "", "parameter count P"),
        "param_bytes": Metric("parameters", "B", "bytes of the parameters (P x 4)"),
        "grad_bytes": Metric("gradients", "B", "bytes of the gradients after backward (P x 4)"),
        "sgd_state_bytes": Metric("SGD state", "B", "optimizer state of plain SGD (0)"),
        "momentum_state_bytes": Metric("SGD momentum state", "B", "optimizer state of SGD with momentum (P x 4)"),
        "adam_state_bytes": Metric("Adam state", "B", "optimizer state of Adam (2 x P x 4, plus step counters)"),
        "activation_bytes": Metric("activations", "B", "bytes autograd saved for backward at batch_size"),
        "activation_formula_bytes": Metric("activations by the formula", "B", "(layers + 1) x batch x width x 4"),
        "activation_bytes_smallest_batch": Metric(
            "activations at a quarter of the batch", "B", "the same at a quarter of the batch"
        ),
        "no_grad_activation_bytes": Metric(
            "activations under no_grad()", "B", "bytes saved by the same forward under torch.no_grad() (0)"
        ),
        "bytes_per_param_adam": Metric(
            "bytes per parameter with Adam", "", "(parameters + gradients + Adam state) / P: about 16"
        ),
        "total_adam_bytes": Metric("total with Adam", "B", "parameters + gradients + Adam state + activations (bytes)"),
        "allocator_param_bytes": Metric(
            "allocator: parameters",
            "B",
            "memory_allocated() delta for the model (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "allocator_activation_bytes": Metric(
            "allocator: activations",
            "B",
            "memory_allocated() delta across the forward pass (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "allocator_adam_state_bytes": Metric(
            "allocator: Adam state",
            "B",
            "memory_allocated() delta across Adam's first step (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "peak_bytes": Metric(
            "peak allocated", "B", "max_memory_allocated() above the start (CUDA; None elsewhere)", none="n/a off CUDA"
        ),
        "reserved_bytes": Metric(
            "reserved by the allocator",
            "B",
            "memory_reserved(): what the caching allocator holds (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "cublas_workspace_bytes": Metric(
            "cuBLAS workspaces",
            "B",
            "cuBLAS workspaces the first matmul and backward took, left out of the "
            "ledger (0 when an earlier run in this process took them; CUDA; None "
            "elsewhere)",
            none="n/a off CUDA",
        ),
        "method": Metric("how it was measured", "text", "how the figures were measured"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"width": 128, "layers": 2, "batch_size": 16},
)
