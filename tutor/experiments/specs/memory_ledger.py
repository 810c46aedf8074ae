"""The spec of `memory-ledger`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/memory_ledger.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


class MemoryLedgerParams(Params):
    width: int = Field(4096, ge=16, le=16384, description="features per Linear layer (PyTorch's AMP recipe: 4096)")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")
    batch_size: int = Field(256, ge=1, le=65536)


SPEC = Experiment(
    name='memory-ledger',
    title='Training memory by component, measured beside the formula',
    module='memory_ledger',
    params=MemoryLedgerParams,
    metrics={
        "parameters": "parameter count P",
        "param_bytes": "bytes of the parameters (P x 4)",
        "grad_bytes": "bytes of the gradients after backward (P x 4)",
        "sgd_state_bytes": "optimizer state of plain SGD (0)",
        "momentum_state_bytes": "optimizer state of SGD with momentum (P x 4)",
        "adam_state_bytes": "optimizer state of Adam (2 x P x 4, plus step counters)",
        "activation_bytes": "bytes autograd saved for backward at batch_size",
        "activation_formula_bytes": "(layers + 1) x batch x width x 4",
        "activation_bytes_smallest_batch": "the same at a quarter of the batch",
        "no_grad_activation_bytes": "bytes saved by the same forward under torch.no_grad() (0)",
        "bytes_per_param_adam": "(parameters + gradients + Adam state) / P: about 16",
        "total_adam_bytes": "parameters + gradients + Adam state + activations (bytes)",
        "allocator_param_bytes": "memory_allocated() delta for the model (CUDA; None elsewhere)",
        "allocator_activation_bytes": "memory_allocated() delta across the forward pass (CUDA; None elsewhere)",
        "allocator_adam_state_bytes": "memory_allocated() delta across Adam's first step (CUDA; None elsewhere)",
        "peak_bytes": "max_memory_allocated() above the start (CUDA; None elsewhere)",
        "reserved_bytes": "memory_reserved(): what the caching allocator holds (CUDA; None elsewhere)",
        "cublas_workspace_bytes": "cuBLAS workspaces the first matmul and backward took, left out of the ledger "
                                  "(0 when an earlier run in this process took them; CUDA; None elsewhere)",
        "method": "how the figures were measured",
        "device": "torch device used",
    },
    quick={"width": 128, "layers": 2, "batch_size": 16},
)
