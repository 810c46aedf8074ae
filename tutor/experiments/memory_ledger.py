"""memory-ledger: what training memory is made of, measured beside the formula.

The model is PyTorch's AMP-recipe shape: `layers` x (Linear(width, width) + ReLU), float32,
trained on random data with a mean-square loss. Four components:

- parameters: P x 4 bytes (float32);
- gradients: one per parameter, P x 4 bytes, created by the first backward;
- optimizer state, created by the first step: SGD keeps none, SGD with momentum one buffer
  (P x 4), Adam two (exp_avg and exp_avg_sq: 2 x P x 4) plus a step counter per parameter;
- activations: the tensors autograd saves in the forward pass for the backward pass. Here
  each Linear keeps its input and each ReLU its output, and a ReLU's output is the next
  Linear's input, so (layers + 1) tensors of batch x width x 4 bytes are kept.

How it is measured. On CUDA, from torch.cuda.memory_allocated() before and after each stage
(after a warm-up matmul, so the cuBLAS workspace is allocated first and reported on its own
line; memory_reserved() shows what the caching allocator holds on top). Everywhere, also by
accounting: adding up the bytes of the distinct storages of the parameters, the gradients,
the optimizer state, and the tensors autograd saves (seen through saved_tensors_hooks).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import linear_stack
from tutor.experiments.specs.memory_ledger import MemoryLedgerParams
from tutor.experiments.training import saved_for_backward, seed_everything
from tutor.measurement.timing import synchronize
from tutor.present import mib

MIB = 2**20
OPTIMIZERS = ("sgd", "momentum", "adam")


def _storage_bytes(tensors: Any) -> int:
    """Bytes of the distinct storages behind `tensors` (views of one storage count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            s = t.untyped_storage()
            seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def _state_tensors(optimizer: torch.optim.Optimizer) -> Iterator[torch.Tensor]:
    for state in optimizer.state.values():
        yield from (v for v in state.values() if isinstance(v, torch.Tensor))


class _Allocator:
    """torch.cuda.memory_allocated() readings; None everywhere off CUDA."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.device = device

    def now(self) -> int | None:
        if not self.cuda:
            return None
        torch.cuda.synchronize(self.device)
        return torch.cuda.memory_allocated(self.device)

    def reserved(self) -> int | None:
        return torch.cuda.memory_reserved(self.device) if self.cuda else None


def _forward_saved(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Loss of one forward pass, and the bytes of what autograd saved for backward."""
    with saved_for_backward(model) as saved:
        loss = model(x).pow(2).mean()
    return loss, sum(saved.values())


def measure(p: MemoryLedgerParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    alloc = _Allocator(device)
    method = "torch.cuda.memory_allocated deltas, and storage accounting" if alloc.cuda else "storage accounting"
    yield Started(
        "memory-ledger",
        str(device),
        dev.name,
        "random inputs (memory does not depend on the data)",
        f"{p.layers} x Linear({p.width}, {p.width}) + ReLU, batch {p.batch_size}, float32",
    )
    if not alloc.cuda:
        yield Note(
            f"On {device.type} there is no allocator counter like CUDA's, so each component is measured "
            "by adding up the bytes of the tensors that hold it. On a CUDA GPU this run also reads "
            "torch.cuda.memory_allocated() around each stage.",
            "warning",
        )

    workspace = None
    if alloc.cuda:
        # Out of the ledger first: what the previous run left in the cache, and the cuBLAS
        # workspaces, which the first matmul takes for the forward's thread and the first backward
        # for autograd's own (they then stay for this process's life: in a long-lived engine an
        # earlier run has taken them, and this one finds nothing new to take).
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        before = alloc.now()
        w = torch.ones(64, 64, device=device, requires_grad=True)
        (w @ w).sum().backward()
        del w
        gc.collect()
        after_warm = alloc.now()
        assert before is not None and after_warm is not None  # alloc.cuda: now() reads an int
        workspace = after_warm - before

    base = alloc.now()
    model = linear_stack(p.width, p.layers).to(device)
    count = sum(t.numel() for t in model.parameters())
    after_model = alloc.now()
    param_bytes = _storage_bytes(model.parameters())

    # The activations' reading starts before the input exists: the first Linear saves x for
    # backward, so the tensors counted below include it, and the allocator's delta must too.
    before_input = after_model
    x = torch.randn(p.batch_size, p.width, device=device)
    loss, act_bytes = _forward_saved(model, x)
    after_forward = alloc.now()
    loss.backward()
    after_backward = alloc.now()
    grad_bytes = _storage_bytes(t.grad for t in model.parameters())
    act_formula = (p.layers + 1) * p.batch_size * p.width * 4

    state: dict[str, int] = {}
    state_alloc: dict[str, int | None] = {}
    for name in OPTIMIZERS:
        if name == "adam":
            opt: torch.optim.Optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
        else:
            opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9 if name == "momentum" else 0.0)
        before = alloc.now()
        opt.step()  # state is created lazily, at the first step
        after = alloc.now()
        state[name] = _storage_bytes(_state_tensors(opt))
        state_alloc[name] = None if before is None or after is None else after - before
        del opt
        gc.collect()
    synchronize(dev.torch_device)
    peak = torch.cuda.max_memory_allocated(device) - base if alloc.cuda and base is not None else None
    reserved = alloc.reserved()

    def delta(a: int | None, b: int | None) -> int | None:
        return None if a is None or b is None else b - a

    rows = [
        ["parameters", mib(param_bytes), mib(delta(base, after_model)), f"P x 4 = {mib(count * 4)}"],
        [
            "gradients",
            mib(grad_bytes),
            mib(delta(after_forward, after_backward) if alloc.cuda else None),
            f"P x 4 = {mib(count * 4)}",
        ],
        ["SGD state", mib(state["sgd"]), mib(state_alloc["sgd"]), "none: 0 MiB"],
        ["momentum state", mib(state["momentum"]), mib(state_alloc["momentum"]), f"P x 4 = {mib(count * 4)}"],
        ["Adam state", mib(state["adam"]), mib(state_alloc["adam"]), f"2 x P x 4 = {mib(count * 8)}"],
        [
            f"activations (batch {p.batch_size})",
            mib(act_bytes),
            mib(delta(before_input, after_forward)),
            f"(L+1) x B x W x 4 = {mib(act_formula)}",
        ],
    ]
    columns = ["component", "tensors", "allocator", "formula"]
    if not alloc.cuda:  # no allocator figures to show: keep the table inside 80 columns
        columns, rows = [columns[0], "measured", columns[3]], [[r[0], r[1], r[3]] for r in rows]
    yield Table(
        f"Training memory: P = {count:,} parameters, L = {p.layers} layers, B = {p.batch_size}, "
        f"W = {p.width}, float32, on {device}",
        columns,
        rows,
    )
    if alloc.cuda:
        yield Note(
            "The allocator column: memory_allocated() deltas. Gradients show as the change across "
            "backward, where the activations are freed as the gradients arrive, so that figure is "
            "gradients minus activations. Also allocated, and left out: "
            + (
                f"the cuBLAS workspaces, {mib(workspace)}, taken by the first matmul and the first backward."
                if workspace
                else "no new cuBLAS workspace (an earlier run in this process took them)."
            )
            + f" Peak during all this: {mib(peak)} above the start; the caching "
            f"allocator holds {mib(reserved)} reserved, which nvidia-smi shows as used."
        )
    adam_total = param_bytes + grad_bytes + state["adam"]
    yield Note(
        f"Weights, gradients and Adam state: {adam_total / count:.1f} bytes per parameter "
        f"(4 + 4 + 8 = 16 expected; Adam's per-parameter step counters add "
        f"{state['adam'] - 2 * param_bytes:,} bytes). Adam needs twice what SGD with momentum does for its "
        f"state, and the activations depend on the batch size, not on the optimizer.",
        "result",
    )

    # Activations grow with the batch; the other components do not.
    sweep: list[list[str]] = []
    sizes = sorted({max(1, p.batch_size // 4), max(1, p.batch_size // 2), p.batch_size})
    per_batch: dict[int, int] = {}
    for b in sizes:
        xb = torch.randn(b, p.width, device=device)
        lb, saved = _forward_saved(model, xb)
        per_batch[b] = saved
        del lb, xb
        sweep.append([str(b), mib(saved), mib((p.layers + 1) * b * p.width * 4)])
    yield Table("Activations saved for backward, by batch size", ["batch", "measured", "formula"], sweep)
    with torch.no_grad():
        _, no_grad_saved = _forward_saved(model, x)
    yield Note(
        f"Under torch.no_grad() the same forward saves {mib(no_grad_saved)}: evaluation keeps no "
        "activations, which is why it fits batches that training cannot."
    )

    yield Finished(
        {
            "parameters": count,
            "param_bytes": param_bytes,
            "grad_bytes": grad_bytes,
            "sgd_state_bytes": state["sgd"],
            "momentum_state_bytes": state["momentum"],
            "adam_state_bytes": state["adam"],
            "activation_bytes": act_bytes,
            "activation_formula_bytes": act_formula,
            "activation_bytes_smallest_batch": per_batch[sizes[0]],
            "no_grad_activation_bytes": no_grad_saved,
            "bytes_per_param_adam": adam_total / count,
            "total_adam_bytes": adam_total + act_bytes,
            "allocator_param_bytes": delta(base, after_model),
            "allocator_activation_bytes": delta(before_input, after_forward),
            "allocator_adam_state_bytes": state_alloc["adam"],
            "peak_bytes": peak,
            "reserved_bytes": reserved,
            "cublas_workspace_bytes": workspace,
            "method": method,
            "device": str(device),
        }
    )
