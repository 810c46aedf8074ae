"""graph-leak: what a list of losses keeps alive, and when that is a lot.

A common warning says "a loss list that keeps the graph alive grows memory". The truth has
two halves, and this run measures both with the notebook's MNISTClassifier on MNIST:

(a) a training loop that appends `loss` after loss.backward() and optimizer.step():
    backward (retain_graph=False) frees the tensors the graph saved, so each kept loss holds
    only its own 4-byte value and its chain of autograd nodes: small, but it grows;
(b) an evaluation loop, model.eval() but no torch.no_grad(), that appends `loss`: no backward
    ever frees the graph, so each kept loss holds every activation of its forward pass;
(c) the fix: an evaluation loop under torch.no_grad() that appends loss.item() (a float).

How "kept" is measured, on any device: saved_tensors_hooks sees every tensor autograd saves
for backward; a weak reference to each (and to each loss) tells, after the loop and
gc.collect(), which are still alive because the list holds them. A tensor counts its own
bytes (numel x element size), the model's parameters excluded, as training.saved_for_backward
counts them. Autograd nodes are counted by walking each kept loss's grad_fn.next_functions.
On CUDA, torch.cuda.memory_allocated() is also read around the evaluation loop, and again
after the lists are dropped.

Each batch is a fresh tensor (x[idx] copies the rows), as a DataLoader's batch would be; a
slice of the resident set would only be a view of memory that is in use anyway.
"""

from __future__ import annotations

import copy
import gc
import time
import weakref
from collections.abc import Generator, Iterator
from contextlib import AbstractContextManager
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tutor.experiments import data as mnist
from tutor.experiments import gpu_share
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.graph_leak import GraphLeakParams
from tutor.experiments.training import saved_for_backward, seed_everything
from tutor.measurement.timing import synchronize

REPORT_S = 0.25  # a progress event at least this often
CPU_LIMIT = 2 * 2**30  # the most the leaking loop may keep off CUDA (bytes)
PROJECT_STEPS = 10_000  # the longer run the notes project to


class _Kept:
    """Weak references to every tensor autograd saves (seen through saved_tensors_hooks) and to
    the losses: after a loop, the bytes of those still alive."""

    def __init__(self, model: nn.Module) -> None:
        self.params = {t.data_ptr() for t in model.parameters()}
        self.refs: list[tuple[weakref.ref, int, int]] = []  # (weak reference, data_ptr, own bytes)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        # The graph keeps this alias, and it lives exactly as long as the graph needs it. Not t
        # itself: for a saved output, that would make a reference cycle through the C++ graph
        # that gc cannot free, and the graph would outlive the list.
        alias = t.detach()
        if t.data_ptr() not in self.params:
            self.refs.append((weakref.ref(alias), t.data_ptr(), t.numel() * t.element_size()))
        return alias

    def hooks(self) -> AbstractContextManager:
        return torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def loss(self, loss: torch.Tensor) -> None:
        self.refs.append((weakref.ref(loss), loss.data_ptr(), loss.numel() * loss.element_size()))

    def alive_bytes(self) -> int:
        gc.collect()
        alive = {(ptr, n): n for ref, ptr, n in self.refs if ref() is not None}  # views of one tensor count once
        return sum(alive.values())


def _graph_nodes(losses: list[Any]) -> int:
    """Distinct autograd nodes reachable from the kept losses' grad_fn."""
    seen: dict[int, Any] = {}  # id -> node: holding the node keeps its id unique during the walk
    stack = [getattr(loss, "grad_fn", None) for loss in losses]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(next_node for next_node, _ in node.next_functions)
    return len(seen)


def _batches(
    x: torch.Tensor, y: torch.Tensor, batch_size: int, steps: int, gen: torch.Generator
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """`steps` full shuffled batches, passing over the data as often as needed."""
    done = 0
    while True:
        for xb, yb in mnist.batches(x, y, batch_size, generator=gen):
            if len(xb) < batch_size:
                continue  # a short last batch would make the steps unequal
            yield xb, yb
            done += 1
            if done == steps:
                return


Loop = Generator[Event, None, list]


def _progress(label: str, i: int, steps: int, loss: torch.Tensor, batch: int, start: float) -> Step:
    value = loss.item()  # waits for the device: the clock is read after the work it times
    seconds = time.perf_counter() - start
    return Step(i, steps, value, seconds, i * batch / seconds if seconds > 0 else 0.0, label=label)


def _train_loop(model, opt, batches, steps: int, kept: _Kept) -> Loop:
    """(a) the notebook's training loop, keeping `loss` after backward."""
    model.train()
    losses = []
    start = last = time.perf_counter()
    for i, (xb, yb) in enumerate(batches, 1):
        opt.zero_grad()
        with kept.hooks():
            loss = F.cross_entropy(model(xb), yb)
        loss.backward()  # frees the tensors the graph saved; loss keeps its grad_fn chain
        opt.step()
        losses.append(loss)  # the pitfall
        kept.loss(loss)
        if i == steps or time.perf_counter() - last >= REPORT_S:
            last = time.perf_counter()
            yield _progress("train: append(loss)", i, steps, loss, len(xb), start)
    return losses


def _eval_loop(model, batches, steps: int, kept: _Kept, fixed: bool) -> Loop:
    """(b) evaluation without torch.no_grad(), keeping `loss`; (c) with no_grad, keeping loss.item()."""
    model.eval()  # switches dropout and batch norm to evaluation: it does NOT stop autograd
    losses = []
    label = "eval: no_grad + item()" if fixed else "eval: append(loss)"
    start = last = time.perf_counter()
    for i, (xb, yb) in enumerate(batches, 1):
        with kept.hooks(), torch.no_grad() if fixed else torch.enable_grad():
            loss = F.cross_entropy(model(xb), yb)
        kept.loss(loss)
        losses.append(loss.item() if fixed else loss)  # the fix, or the pitfall
        if i == steps or time.perf_counter() - last >= REPORT_S:
            last = time.perf_counter()
            yield _progress(label, i, steps, loss, len(xb), start)
    model.train()
    return losses


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n:,.0f} B"


def measure(p: GraphLeakParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    cuda = dev.kind == "cuda"
    steps = p.steps
    data = mnist.load(
        dev.torch_device,
        train_samples=min(60_000, steps * p.batch_size),
        test_samples=min(10_000, steps * p.batch_size),
    )
    batch = min(p.batch_size, data.test_x.shape[0])
    yield Started(
        "graph-leak", str(device), dev.name, data.description, f"MNISTClassifier, {steps} batches of {batch} per loop"
    )
    if batch < p.batch_size:
        yield Note(
            f"The test set has {batch:,} images, so batches of {batch:,} are used instead of {p.batch_size:,}.",
            "warning",
        )

    model = MNISTClassifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(p.seed)

    # What one forward pass saves for backward, counted by the shared helper. backward() then
    # frees that graph (the helper's hook keeps each saved tensor itself, so the graph must not
    # be dropped without backward).
    probe = copy.deepcopy(model)
    xb, yb = next(_batches(data.test_x, data.test_y, batch, 1, gen))
    with saved_for_backward(probe) as saved:
        probe_loss = F.cross_entropy(probe(xb), yb)
    one_forward = sum(saved.values())
    probe_loss.backward()
    del probe, probe_loss, xb, yb
    free = gpu_share.available(dev.kind, dev.index) if cuda else None  # free on the card now, within the class's cap
    limit = free // 2 if free is not None else CPU_LIMIT
    if one_forward * steps > limit:
        raise ValueError(
            f"steps={steps} would keep about {_size(one_forward * steps)} alive in the evaluation loop "
            f"({_size(one_forward)} per batch of {batch}), more than this run allows itself "
            f"({_size(limit)}): choose fewer steps or a smaller batch_size"
        )

    # (a) training, appending loss after backward
    train_kept = _Kept(model)
    train_losses = yield from _train_loop(
        model, opt, _batches(data.train_x, data.train_y, batch, steps, gen), steps, train_kept
    )
    train_bytes = train_kept.alive_bytes()
    train_nodes = _graph_nodes(train_losses)

    # (b) evaluation without no_grad, appending loss; on CUDA the allocator is read around it
    # (Adam's state and cuBLAS's workspace already exist, made by the training loop)
    base = None
    if cuda:
        synchronize(dev.torch_device)
        base = torch.cuda.memory_allocated(device)
    eval_kept = _Kept(model)
    eval_losses = yield from _eval_loop(
        model, _batches(data.test_x, data.test_y, batch, steps, gen), steps, eval_kept, fixed=False
    )
    growth = None
    if cuda:
        gc.collect()
        synchronize(dev.torch_device)
        assert base is not None  # read above whenever cuda
        growth = torch.cuda.memory_allocated(device) - base
    eval_bytes = eval_kept.alive_bytes()
    eval_nodes = _graph_nodes(eval_losses)

    # (c) the fix: no_grad, loss.item()
    fixed_kept = _Kept(model)
    fixed_losses = yield from _eval_loop(
        model, _batches(data.test_x, data.test_y, batch, steps, gen), steps, fixed_kept, fixed=True
    )
    fixed_bytes = fixed_kept.alive_bytes()
    fixed_nodes = _graph_nodes(fixed_losses)

    per_step = eval_bytes / steps
    yield Table(
        f"What each list keeps alive after {steps} batches of {batch} on {device}",
        ["loop", "kept", "per step", "graph nodes"],
        [
            ["train, append(loss)", _size(train_bytes), _size(train_bytes / steps), f"{train_nodes:,}"],
            ["eval, append(loss)", _size(eval_bytes), _size(per_step), f"{eval_nodes:,}"],
            ["eval, no_grad, .item()", _size(fixed_bytes), _size(fixed_bytes / steps), f"{fixed_nodes:,}"],
        ],
    )

    yield Note(
        f"The evaluation loop without torch.no_grad() kept {_size(eval_bytes)}: {per_step:,.0f} bytes per "
        f"batch, which is what one forward pass saves for backward ({one_forward:,} bytes, counted "
        "separately: the flattened input, each ReLU's output, the log-softmax and the labels), plus "
        "the 4-byte loss itself. No "
        "backward ever ran, so each kept loss holds its whole graph with every activation. "
        "model.eval() does not change that: it switches layers like dropout to evaluation, it does "
        "not stop autograd.",
        "result",
    )
    yield Note(
        f"The training loop's list kept only {_size(train_bytes)} of tensors ({_size(train_bytes / steps)} "
        f"per step: each loss's own value) and {train_nodes:,} autograd nodes, as many as the evaluation "
        "loop's. The difference is what the nodes still hold: loss.backward() freed the saved "
        "activations of every training graph, so a kept loss holds only its grad_fn chain, small "
        "but growing with every step."
    )
    yield Note(
        f"Projected from these measurements (bytes per step x {PROJECT_STEPS:,}): over {PROJECT_STEPS:,} "
        f"batches the evaluation loop would keep {_size(per_step * PROJECT_STEPS)}, the training loop "
        f"{_size(train_bytes / steps * PROJECT_STEPS)} of tensors and about "
        f"{round(train_nodes / steps * PROJECT_STEPS):,} nodes, the fixed loop "
        f"{_size(fixed_bytes / steps * PROJECT_STEPS)}."
    )
    yield Note(
        "The fix: keep numbers, not tensors: losses.append(loss.item()) (or loss.detach() if it must "
        "stay on the device; read it with .item() when you report, since .item() waits for the GPU), "
        "and evaluate under torch.no_grad() (or torch.inference_mode()), which builds no graph at all."
    )

    # Drop the lists: everything they held is freed. (The training list existed before the
    # allocator's baseline, so it goes after the reading.)
    del eval_losses, fixed_losses
    after = None
    if cuda:
        gc.collect()
        synchronize(dev.torch_device)
        assert base is not None  # read above whenever cuda
        after = torch.cuda.memory_allocated(device) - base
    del train_losses
    left = train_kept.alive_bytes() + eval_kept.alive_bytes() + fixed_kept.alive_bytes()
    if cuda:
        yield Note(
            f"On CUDA, torch.cuda.memory_allocated() grew by {_size(growth)} across the evaluation loop "
            f"(the weak references counted {_size(eval_bytes)}; the allocator rounds each tensor up to "
            f"512 bytes). After `del` of the lists it is {_size(after)} above where the loop started, "
            f"and the tracked tensors still alive add up to {_size(left)}.",
            "result",
        )
    else:
        yield Note(
            f"After `del` of the lists, the tracked tensors still alive add up to {_size(left)}: "
            "dropping the list frees the graphs. torch.cuda.memory_allocated() is CUDA's counter, so "
            "allocator growth is not measured here; on a CUDA GPU this run reads it too."
        )

    yield Finished(
        {
            "train_kept_bytes": train_bytes,
            "eval_kept_bytes": eval_bytes,
            "fixed_kept_bytes": fixed_bytes,
            "eval_bytes_per_step": per_step,
            "train_graph_nodes": train_nodes,
            "eval_graph_nodes": eval_nodes,
            "allocator_growth_bytes": growth,
            "steps": steps,
            "device": str(device),
        }
    )
