"""memory-timeline: memory through one training step, phase by phase.

The course's lab asks for a "memory profiling dashboard": memory over time, where it is allocated.
This trains the course's MNISTClassifier with Adam for a few steps on real MNIST batches and
records, at every point of each step, what the step holds:

- forward: after each layer (module forward hooks), the activations autograd saved for backward;
- backward: as each layer's gradients appear (post-accumulate-grad hooks), saved activations freed;
- the optimizer step (Adam's state appears on the first one), then zero_grad(set_to_none=True).

What is counted, on any device: the parameters, their .grad tensors, the optimizer's state tensors,
and the tensors autograd saved for backward, each storage once. Saved tensors are followed through
torch.autograd.graph.saved_tensors_hooks: each is wrapped when saved, and a weakref finalizer takes
it off when autograd drops it (backward frees each node's saved tensors once the node has run).
On CUDA, torch.cuda.memory_allocated is read at every point too, and the allocator's history is
recorded (torch.cuda.memory._record_memory_history) and written as a snapshot pickle for
https://pytorch.org/memory_viz.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tutor.charts import stacked_bars
from tutor.experiments import data as mnist
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.memory_timeline import MemoryTimelineParams
from tutor.experiments.training import checkpoint_target, seed_everything
from tutor.paths import scratch_dir
from tutor.present import size

MIB = 2**20
PARTS = [("█", "params"), ("▓", "grads"), ("▒", "Adam"), ("░", "saved")]
HISTORY_ENTRIES = 100_000  # allocator events the CUDA history keeps (a few steps need far fewer)


@dataclass(frozen=True)
class Point:
    """The memory held at one point of a step, by component (bytes), and CUDA's allocated figure."""

    step: int
    phase: str  # one of specs.memory_timeline.PHASES
    label: str  # as the chart shows it: "fwd fc1", "bwd fc3", "step()"
    params: int
    grads: int
    state: int
    saved: int
    allocated: int | None  # torch.cuda.memory_allocated above the baseline (CUDA only)

    @property
    def total(self) -> int:
        return self.params + self.grads + self.state + self.saved


class _Held:
    """A saved tensor as autograd keeps it: when autograd drops this, its bytes are freed."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class Tracker:
    """Counts the bytes a training step holds, at the points the hooks record."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, device: torch.device, base: int) -> None:
        self.model, self.optimizer, self.device = model, optimizer, device
        self.base = base  # CUDA: what was allocated before the model (the data)
        self.params = {p.data_ptr() for p in model.parameters()}
        self.live: dict[tuple[int, int], int] = {}  # (data_ptr, bytes) -> how many saved references
        self.points: list[Point] = []
        self.step = 0
        self.phase = "start"

    def pack(self, t: torch.Tensor) -> object:
        if t.data_ptr() in self.params:
            return t  # a weight the layer saved: counted once, as a parameter
        key = (t.data_ptr(), t.numel() * t.element_size())
        self.live[key] = self.live.get(key, 0) + 1
        held = _Held(t.detach())  # detached: a saved output kept as itself would hold its own graph
        weakref.finalize(held, self._release, key)
        return held

    @staticmethod
    def unpack(held: object) -> torch.Tensor:
        return held.tensor if isinstance(held, _Held) else held  # type: ignore[return-value]

    def _release(self, key: tuple[int, int]) -> None:
        self.live[key] -= 1
        if not self.live[key]:
            del self.live[key]

    def record(self, label: str) -> None:
        params = list(self.model.parameters())
        state = [v for s in self.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
        cuda = self.device.type == "cuda"
        self.points.append(
            Point(
                self.step,
                self.phase,
                label,
                sum(_bytes(p) for p in params),
                sum(_bytes(p.grad) for p in params if p.grad is not None),
                sum(_bytes(v) for v in state),
                sum(key[1] for key in self.live),
                torch.cuda.memory_allocated(self.device) - self.base if cuda else None,
            )
        )


def _bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def hook_layers(model: nn.Module, tracker: Tracker) -> None:
    """Forward hooks on each layer (a view such as Flatten keeps nothing: skipped), and a gradient
    hook on each parameter that records once all of its layer's gradients are in."""
    for name, module in model.named_children():
        if isinstance(module, nn.Flatten):
            continue
        module.register_forward_hook(lambda *_, name=name: tracker.record(f"fwd {name}"))
        own = list(module.parameters(recurse=False))

        def grad_in(_: torch.Tensor, name: str = name, own: list[nn.Parameter] = own) -> None:
            if all(p.grad is not None for p in own):
                tracker.record(f"bwd {name}")

        for p in own:
            p.register_post_accumulate_grad_hook(grad_in)


def record_step(
    tracker: Tracker, model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, step: int
) -> float:
    """One training step of the notebook's loop, recorded point by point (the layers' hooks record
    within it, as hook_layers set them); returns its loss."""
    tracker.step, tracker.phase = step, "start"
    tracker.record("start")
    tracker.phase = "forward"
    with torch.autograd.graph.saved_tensors_hooks(tracker.pack, tracker.unpack):
        loss = nn.functional.cross_entropy(model(x), y)
    tracker.record("fwd loss")
    tracker.phase = "backward"
    loss.backward()
    tracker.phase = "optimizer step"
    optimizer.step()
    tracker.record("step()")
    tracker.phase = "zero_grad"
    optimizer.zero_grad(set_to_none=True)  # at the top of the next step in the notebook: the same point
    tracker.record("zero_grad()")
    return loss.item()


def _snapshot_target(p: MemoryTimelineParams) -> Path:
    if p.snapshot:
        return checkpoint_target(p.snapshot, "snapshot")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return scratch_dir() / f"memory-timeline-{stamp}-{os.getpid()}.pickle"


def measure(p: MemoryTimelineParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    cuda = device.type == "cuda"
    target = _snapshot_target(p) if cuda else None  # a path that cannot be written fails before any work
    d = mnist.load_first(p.steps * p.batch_size)
    x, y = d.train_x.to(device), d.train_y.to(device)
    yield Started(
        "memory-timeline",
        str(device),
        dev.name,
        d.description,
        f"MNISTClassifier, Adam, batch {p.batch_size}, {p.steps} steps",
    )
    base = 0
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)  # the data alone
    model = MNISTClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = Tracker(model, optimizer, device, base)
    hook_layers(model, tracker)

    recording = snapshot_error = None
    if cuda:
        try:
            torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)
            recording = True
        except (RuntimeError, AttributeError) as exc:  # an allocator without history (a custom one)
            snapshot_error = f"{type(exc).__name__}: {exc}"

    losses: list[float] = []
    step_cuda_peaks: list[int | None] = []
    for step in range(1, p.steps + 1):
        batch = slice((step - 1) * p.batch_size, step * p.batch_size)
        losses.append(record_step(tracker, model, optimizer, x[batch], y[batch], step))
        if cuda:
            step_cuda_peaks.append(torch.cuda.max_memory_allocated(device) - tracker.base)
            torch.cuda.reset_peak_memory_stats(device)
        else:
            step_cuda_peaks.append(None)

    snapshot_path = None
    if recording and target is not None:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            torch.cuda.memory._dump_snapshot(str(target))
            snapshot_path = str(target)
        except (RuntimeError, OSError) as exc:
            snapshot_error = f"{type(exc).__name__}: {exc}"
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)

    points = tracker.points
    peak = max(points, key=lambda pt: pt.total)  # max keeps the first of equals: where it was first reached
    saved_peak = max(points, key=lambda pt: pt.saved)
    first = [pt for pt in points if pt.step == 1]

    def text(pt: Point) -> str:
        shown = f"{pt.total / MIB:.2f}" + (f" (alloc {pt.allocated / MIB:.2f})" if pt.allocated is not None else "")
        return shown + (" ◀ peak" if pt is peak else "")

    chart = stacked_bars(
        [(pt.label, [pt.params, pt.grads, pt.state, pt.saved], text(pt)) for pt in first],
        PARTS,
        unit="step 1, MiB held" + (" (and CUDA's allocated)" if cuda else ""),
        width=72,
    )
    yield Note(f"Step 1, top to bottom in time order:\n{chart}", "figure")

    rows = []
    for step in range(1, p.steps + 1):
        ours = [pt for pt in points if pt.step == step]
        top = max(ours, key=lambda pt: pt.total)
        rows.append(
            [str(step), f"{ours[0].total / MIB:.2f}", f"{top.total / MIB:.2f}", top.label, f"{losses[step - 1]:.3f}"]
            + ([f"{step_cuda_peaks[step - 1] / MIB:.2f}"] if cuda else [])  # type: ignore[operator]
        )
    yield Table(
        "Each step: MiB tracked at its start and at its peak",
        ["step", "start", "peak", "peak at", "loss"] + (["CUDA max"] if cuda else []),
        rows,
    )

    params_bytes = first[0].params
    grads_bytes = max(pt.grads for pt in first)
    state_bytes = first[-1].state
    yield Note(
        f"Peak: {size(peak.total)} at step {peak.step}, {peak.label} ({peak.phase}). Parameters are "
        f"{size(params_bytes)}; backward adds gradients of the same size; the first optimizer.step() "
        f"adds Adam's state, {size(state_bytes)} (exp_avg and exp_avg_sq, twice the parameters), which "
        f"stays for the rest of training: step 2 starts at {size(points_start(points, 2))}, not "
        f"{size(first[0].total)}.",
        "result",
    )
    per_sample = saved_peak.saved / p.batch_size
    yield Note(
        f"Saved activations grow layer by layer through the forward pass and are most at {saved_peak.label} "
        f"(step {saved_peak.step}): {size(saved_peak.saved)} at batch {p.batch_size}, {per_sample:,.0f} B a "
        "sample. Backward frees each layer's as its gradients appear. Activations grow with the batch; "
        "parameters, gradients and Adam's state do not, so a larger batch moves the peak from the optimizer "
        "step into backward, then to the end of the forward.",
        "result",
    )
    yield Note(
        "Counted: the parameters, their .grad tensors, the optimizer's state tensors, and the tensors "
        "autograd saved for backward, each storage once (saved_tensors_hooks, released when autograd drops "
        "them). Not counted: temporaries inside one operation (the gradient flowing back, the logits), the "
        "data set, and memory an allocator keeps cached for reuse."
    )
    if cuda:
        if snapshot_path:
            yield Note(
                f"CUDA allocator snapshot written to {snapshot_path}: open https://pytorch.org/memory_viz and "
                "drop the file on it to see every allocation of these steps over time, with the Python stack "
                "that made it" + ("" if p.snapshot else "; files in that scratch folder are removed after a day") + "."
            )
        else:
            yield Note(f"No allocator snapshot: {snapshot_error}.", "warning")
    else:
        yield Note(
            "No GPU here: the figures are what the hooks count, not an allocator's. On CUDA this run also "
            "reads torch.cuda.memory_allocated at every point, and records the allocator's history "
            "(torch.cuda.memory._record_memory_history) as a snapshot for pytorch.org/memory_viz."
        )

    yield Finished(
        {
            "peak_bytes": peak.total,
            "peak_phase": peak.phase,
            "peak_step": peak.step,
            "peak_point": peak.label,
            "params_bytes": params_bytes,
            "grads_bytes": grads_bytes,
            "adam_state_bytes": state_bytes,
            "saved_peak_bytes": saved_peak.saved,
            "saved_peak_point": saved_peak.label,
            "first_start_bytes": first[0].total,
            "later_start_bytes": points_start(points, 2),
            "cuda_peak_bytes": max(step_cuda_peaks) if cuda else None,  # type: ignore[type-var]
            "snapshot_path": snapshot_path,
            "final_loss": losses[-1],
            "device": str(device),
        }
    )


def points_start(points: list[Point], step: int) -> int:
    """Bytes tracked at the start of `step`."""
    return next(pt.total for pt in points if pt.step == step and pt.phase == "start")
