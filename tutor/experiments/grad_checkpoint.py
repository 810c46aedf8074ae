"""grad-checkpoint: trade compute for memory with torch.utils.checkpoint.

A deep stack of `depth` x (Linear(width, width) + ReLU) trains on random data twice: plainly,
and with torch.utils.checkpoint.checkpoint_sequential in `segments` segments (non-reentrant).
Plainly, the forward pass keeps every layer's activations until backward. Checkpointed, it
keeps only each segment's input, and backward runs each segment's forward again to get the
rest back. Measured: the activations kept between forward and backward (the tensors autograd
saves, parameters excluded), on CUDA the peak allocated memory of a whole step, the time per
step (warmed up, synchronised), and that both give the same gradients.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import linear_stack
from tutor.experiments.specs.grad_checkpoint import GradCheckpointParams
from tutor.experiments.training import (
    grad_of,
    saved_for_backward,
    seconds_per_call,
    seed_everything,
)

WARMUP_STEPS = 2
MIB = 2**20


def loss_of(model: nn.Sequential, x: torch.Tensor, segments: int | None) -> torch.Tensor:
    out = model(x) if segments is None else checkpoint_sequential(model, segments, x, use_reentrant=False)
    return out.pow(2).mean()


def peak_above_start(step: Callable[[], None], device: torch.device) -> int | None:
    """Peak bytes allocated above the start of one step (CUDA only)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    start = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - start


def measure(p: GradCheckpointParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    yield Started(
        "grad-checkpoint",
        str(device),
        dev.name,
        "random inputs",
        f"{p.depth} x Linear({p.width}, {p.width}) + ReLU, batch {p.batch_size}, {p.segments} segments",
    )
    plain = linear_stack(p.width, p.depth).to(device)
    ckpt = copy.deepcopy(plain)
    x = torch.randn(p.batch_size, p.width, device=device)

    kept: dict[str, int] = {}
    for name, model, segments in (("plain", plain, None), ("checkpointed", ckpt, p.segments)):
        model.zero_grad()
        with saved_for_backward(model) as saved:
            loss = loss_of(model, x, segments)
        kept[name] = sum(saved.values())
        loss.backward()
    grads_match = all(
        torch.allclose(grad_of(a), grad_of(b), rtol=1e-4, atol=1e-6)
        for a, b in zip(plain.parameters(), ckpt.parameters())
    )
    max_diff = max((grad_of(a) - grad_of(b)).abs().max().item() for a, b in zip(plain.parameters(), ckpt.parameters()))

    def step(model: nn.Sequential, segments: int | None) -> Callable[[], None]:
        def one() -> None:
            model.zero_grad(set_to_none=False)  # gradients stay allocated: the peak is the step's own
            loss_of(model, x, segments).backward()

        return one

    peaks = {
        "plain": peak_above_start(step(plain, None), device),
        "checkpointed": peak_above_start(step(ckpt, p.segments), device),
    }
    seconds = {
        "plain": seconds_per_call(step(plain, None), dev.torch_device, p.steps, WARMUP_STEPS),
        "checkpointed": seconds_per_call(step(ckpt, p.segments), dev.torch_device, p.steps, WARMUP_STEPS),
    }
    formula = (p.depth + 1) * p.batch_size * p.width * 4
    rows = [
        [
            name,
            f"{kept[name] / MIB:,.1f} MiB",
            "-" if (peak := peaks[name]) is None else f"{peak / MIB:,.1f} MiB",
            f"{seconds[name] * 1000:,.1f} ms",
        ]
        for name in ("plain", "checkpointed")
    ]
    yield Table(
        f"One training step, {p.depth} layers, batch {p.batch_size}, on {device}",
        ["forward", "kept for backward", "peak (CUDA)", "time per step"],
        rows,
    )
    saving = 1 - kept["checkpointed"] / kept["plain"] if kept["plain"] else 0.0
    slower = seconds["checkpointed"] / seconds["plain"]
    yield Note(
        f"Plainly, the forward pass kept {kept['plain'] / MIB:,.1f} MiB for backward (formula: "
        f"(depth + 1) x B x W x 4 = {formula / MIB:,.1f} MiB). Checkpointed in {p.segments} segments it "
        f"kept {kept['checkpointed'] / MIB:,.1f} MiB ({saving:.0%} less: the inputs of the first "
        f"{p.segments - 1} segments, and all of the last, which checkpoint_sequential runs plainly "
        f"because backward needs it at once), and each step took "
        f"{slower:.2f}x as long, because backward runs the forward of each segment again. The gradients "
        + ("match" if grads_match else "DO NOT match")
        + f" (largest difference {max_diff:.1e}).",
        "result",
    )
    if device.type != "cuda":
        yield Note(
            "The peak column needs CUDA's allocator counters. What checkpointing saves on any device is "
            "the memory held between forward and backward, which is what the second column measures; "
            "during backward one segment's activations are rebuilt at a time.",
            "warning",
        )

    yield Finished(
        {
            "plain_kept_bytes": kept["plain"],
            "checkpointed_kept_bytes": kept["checkpointed"],
            "kept_formula_bytes": formula,
            "memory_saving": saving,
            "plain_peak_bytes": peaks["plain"],
            "checkpointed_peak_bytes": peaks["checkpointed"],
            "plain_seconds_per_step": seconds["plain"],
            "checkpointed_seconds_per_step": seconds["checkpointed"],
            "time_ratio": slower,
            "grads_match": grads_match,
            "max_grad_diff": max_diff,
            "device": str(device),
        }
    )
