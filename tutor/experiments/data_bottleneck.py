"""data-bottleneck: the same training step fed four ways, and how much of each step waits for data.

1. loader: the notebook's DataLoader, num_workers=0: every sample is a PIL image turned into
   a tensor by ToTensor + Normalize, in the training process, between two steps.
2. workers: the same DataLoader with worker processes preparing batches in parallel.
3. pinned: workers plus pin_memory=True and non_blocking copies (CUDA only: page-locked host
   memory is what lets a copy to the GPU run asynchronously).
4. resident: the whole set normalised once and moved to the device once; a batch is an index.

Each case runs warm-up steps, then `batches` timed steps. Within a step, "waiting for data" is
the time to get the next batch and copy it to the device, and "compute" is forward, backward
and the optimiser step. The device is synchronised after the copy and after the step so the
two are told apart; that removes the overlap a real loop gets between copying and computing,
which is said on screen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from tutor.experiments import data as mnist
from tutor.experiments.common import seed_everything
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.data_bottleneck import DataBottleneckParams
from tutor.experiments.timing import synchronize

WARMUP_BATCHES = 5  # untimed: worker start-up, first allocations, kernel selection
REPORT_EVERY = 10  # steps between Step events (a loader step takes ~10 ms on a CPU)


class _Case:
    def __init__(self, name: str, label: str) -> None:
        self.name, self.label = name, label
        self.wait = self.compute = 0.0
        self.samples = 0

    @property
    def seconds(self) -> float:
        return self.wait + self.compute

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def wait_share(self) -> float:
        return self.wait / self.seconds if self.seconds > 0 else 0.0


def _resident_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int) -> Iterator[Any]:
    g = torch.Generator(device=x.device).manual_seed(seed)
    while True:  # as many passes as the timed steps need
        yield from mnist.batches(x, y, batch_size, generator=g)


def _endless(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


def _measure(case: _Case, source: Iterator[Any], dev: Device, p: DataBottleneckParams,
             non_blocking: bool) -> Iterator[Event]:
    """Train `p.batches` timed steps from `source`, splitting each step into data wait and compute."""
    device = torch.device(dev.torch_device)
    seed_everything(p.seed)
    model = MNISTClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    total = WARMUP_BATCHES + p.batches
    for i in range(total):
        t0 = time.perf_counter()
        inputs, labels = next(source)
        inputs = inputs.to(device, non_blocking=non_blocking)
        labels = labels.to(device, non_blocking=non_blocking)
        synchronize(dev.torch_device)  # the copy has landed: what follows is compute
        t1 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), labels)
        loss.backward()
        optimizer.step()
        synchronize(dev.torch_device)
        t2 = time.perf_counter()
        if i >= WARMUP_BATCHES:
            case.wait += t1 - t0
            case.compute += t2 - t1
            case.samples += labels.shape[0]
            done = i + 1 - WARMUP_BATCHES
            if done % REPORT_EVERY == 0 or done == p.batches:
                yield Step(done, p.batches, loss.item(), case.seconds, case.samples_per_s, label=case.label)


def _loader(p: DataBottleneckParams, workers: int, pin: bool) -> Any:
    train, _, _ = mnist.loaders(p.batch_size, num_workers=workers, pin_memory=pin, test_samples=1, seed=p.seed)
    return train


def measure(p: DataBottleneckParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    cores = os.cpu_count() or 1
    source = mnist.source()
    yield Started("data-bottleneck", dev.torch_device, dev.name, source.description,
                  f"{p.batches} timed batches of {p.batch_size} per case")
    cases: list[_Case] = []

    case = _Case("loader", "loader")
    yield Note("1/4 The notebook's DataLoader, num_workers=0: each of the 64 images in a batch is rebuilt "
               "from MNIST's stored bytes (PIL image -> ToTensor -> Normalize; nothing to decode) in this "
               "process, between two steps.")
    first = _loader(p, 0, False)
    epoch_samples = len(first.dataset)  # 60,000 for MNIST; the offline digits' own count otherwise
    yield from _measure(case, _endless(first), dev, p, non_blocking=False)
    cases.append(case)

    case = _Case("workers", f"{p.workers} worker" + ("s" if p.workers > 1 else ""))
    yield Note(f"2/4 The same DataLoader with num_workers={p.workers}: worker processes prepare the next "
               f"batches while this one trains. This machine has {cores} CPU core(s)"
               + (", so the workers compete with training for them." if cores <= p.workers else "."))
    yield from _measure(case, _endless(_loader(p, p.workers, False)), dev, p, non_blocking=False)
    cases.append(case)

    pinned: _Case | None = None
    if dev.kind == "cuda":
        pinned = _Case("pinned", "pinned")
        yield Note("3/4 Workers plus pin_memory=True and .to(device, non_blocking=True): batches wait in "
                   "page-locked memory, which the GPU can copy from without a staging copy.")
        yield from _measure(pinned, _endless(_loader(p, p.workers, True)), dev, p, non_blocking=True)
        cases.append(pinned)
    else:
        yield Note("3/4 pin_memory skipped: page-locked memory speeds up copies from the host to a CUDA GPU, "
                   f"and this run is on {dev.torch_device}, so there is no such copy to speed up.", "warning")

    case = _Case("resident", "resident")
    yield Note(f"4/4 Resident tensors: all {epoch_samples:,} images normalised once and moved to "
               f"{dev.torch_device} once; a batch is an index into them, with no per-sample work at all.")
    resident = mnist.load(dev.torch_device)
    yield from _measure(case, _resident_batches(resident.train_x, resident.train_y, p.batch_size, p.seed),
                        dev, p, non_blocking=False)
    cases.append(case)
    del resident

    loader, workers, resident_case = cases[0], cases[1], cases[-1]
    yield Table(
        f"{p.batches} training steps of batch {p.batch_size} on {dev.torch_device}",
        ["data path", "samples/s", "waiting for data", "compute", "epoch (est.)"],
        [[c.label, f"{c.samples_per_s:,.0f}", f"{c.wait_share:.0%} ({c.wait:.2f} s)", f"{c.compute:.2f} s",
          f"{epoch_samples / c.samples_per_s:.1f} s" if c.samples_per_s else "-"] for c in cases],
    )
    best = max(cases, key=lambda c: c.samples_per_s)
    speedup = resident_case.samples_per_s / loader.samples_per_s if loader.samples_per_s else None
    yield Note(
        f"The same model and optimiser step took {loader.compute:.2f} s of compute with the loader and "
        f"{resident_case.compute:.2f} s with resident tensors; the difference in total time is the data path. "
        f"The loader spent {loader.wait_share:.0%} of each step waiting for data; resident tensors "
        f"{resident_case.wait_share:.0%}. Fastest here: {best.label}"
        + (f", {speedup:.1f}x the notebook's loader." if speedup else "."), "result")
    if workers.compute > 1.5 * loader.compute:
        yield Note(f"With {p.workers} workers, compute itself slowed from {loader.compute:.2f} s to "
                   f"{workers.compute:.2f} s: on {cores} core(s) the workers took CPU time the training "
                   "step needed. Workers pay off when there are cores to spare.")
    yield Note("How this was timed: the device is synchronised after each copy and each step so data and "
               "compute can be told apart. A real loop lets a GPU compute while the next batch is "
               "prepared, so these waits are an upper bound on what overlapping can hide.")

    def projected(c: _Case | None) -> float | None:
        return round(epoch_samples / c.samples_per_s, 3) if c and c.samples_per_s else None

    yield Finished({
        "loader_samples_per_s": loader.samples_per_s,
        "workers_samples_per_s": workers.samples_per_s,
        "pinned_samples_per_s": pinned.samples_per_s if pinned else None,
        "resident_samples_per_s": resident_case.samples_per_s,
        "loader_wait_share": loader.wait_share,
        "workers_wait_share": workers.wait_share,
        "pinned_wait_share": pinned.wait_share if pinned else None,
        "resident_wait_share": resident_case.wait_share,
        "loader_epoch_seconds": projected(loader),
        "resident_epoch_seconds": projected(resident_case),
        "resident_speedup": speedup,
        "fastest": best.name,
        "workers": p.workers,
        "cpu_cores": cores,
        "device": dev.torch_device,
        "data_source": source.source,
    })
