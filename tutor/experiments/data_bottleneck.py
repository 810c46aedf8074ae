"""data-bottleneck: the same training step fed four ways, and how much of each step waits for data.

1. loader: the notebook's DataLoader, num_workers=0: every sample is a PIL image turned into
   a tensor by ToTensor + Normalize, in the training process, between two steps.
2. resident: the whole set normalised once and moved to the device once; a batch is an index.
3. workers: the same DataLoader with worker processes preparing batches in parallel.
4. pinned: workers plus pin_memory=True and non_blocking copies (CUDA only: page-locked host
   memory is what lets a copy to the GPU run asynchronously).

Each path runs warm-up steps, then `batches` timed steps. Within a step, "waiting for data" is
the time to get the next batch and copy it to the device, and "compute" is forward, backward
and the optimiser step. The device is synchronised after the copy and after the step so the
two are told apart; that removes the overlap a real loop gets between copying and computing,
which is said on screen.

Robust to what else the machine does (issue 24): resident_speedup compares two rates, and a
resident step is ~3x shorter than a loader step (200 of them take ~0.25 s on a 2-core CPU).
Timed one after the other, whatever took the CPU during the resident quarter-second (the
TUI's own re-layout when a Note arrives, a terminal, another process) came out as a lower
speedup: a median 2.7x in a real terminal against 3.2x in process on the same machine, and
2.35-6.6x run to run either way. So loader and resident take turns of TURN steps, and each
path's rate is the median of its REPORT_EVERY-step stretches: a burst lands on a few
stretches of either path and counts for neither, and a machine that slows down slows both
alike. Workers are timed after them, in a block of their own: their processes keep preparing
batches after their turn, which would slow the path after them.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from tutor.experiments import data as mnist
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.data_bottleneck import DataBottleneckParams
from tutor.experiments.training import seed_everything
from tutor.measurement.intervals import bounds, median_interval
from tutor.measurement.timing import synchronize

WARMUP_BATCHES = 5  # untimed: worker start-up, first allocations, kernel selection
REPORT_EVERY = 10  # steps per stretch: one Step event and one rate for the median
TURN = REPORT_EVERY  # timed steps one path trains before the other takes over: quick runs (20) alternate too
REWARM_BATCHES = 1  # untimed at the start of each later turn: the other path has just used the caches


class _Case:
    def __init__(self, name: str, label: str) -> None:
        self.name, self.label = name, label
        self.wait = self.compute = 0.0
        self.samples = 0
        self.rates: list[float] = []  # samples/s of each finished stretch
        self._stretch_s = 0.0
        self._stretch_n = 0

    def add(self, wait: float, compute: float, samples: int) -> None:
        self.wait += wait
        self.compute += compute
        self.samples += samples
        self._stretch_s += wait + compute
        self._stretch_n += samples

    def end_stretch(self) -> None:
        if self._stretch_s > 0:
            self.rates.append(self._stretch_n / self._stretch_s)
        self._stretch_s, self._stretch_n = 0.0, 0

    @property
    def seconds(self) -> float:
        return self.wait + self.compute

    @property
    def samples_per_s(self) -> float:
        """The median stretch's rate: robust to a moment when something else had the CPU."""
        if self.rates:
            return statistics.median(self.rates)
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def wait_share(self) -> float:
        return self.wait / self.seconds if self.seconds > 0 else 0.0


class _Path:
    """One data path: its own model and optimiser (same seed as the others), fed from `source`."""

    def __init__(
        self,
        case: _Case,
        source: Iterator[Any],
        dev: Device,
        p: DataBottleneckParams,
        non_blocking: bool,
        show_loss: bool = True,
    ) -> None:
        self.case, self.source, self.dev, self.p = case, source, dev, p
        self.non_blocking, self.show_loss = non_blocking, show_loss
        self.device = torch.device(dev.torch_device)
        seed_everything(p.seed)
        self.model = MNISTClassifier().to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        self.model.train()
        self.done = 0  # timed steps so far

    def _step(self) -> tuple[float, float, torch.Tensor, int]:
        """(waiting for data, compute, loss, samples) of one training step."""
        t0 = time.perf_counter()
        inputs, labels = next(self.source)
        inputs = inputs.to(self.device, non_blocking=self.non_blocking)
        labels = labels.to(self.device, non_blocking=self.non_blocking)
        synchronize(self.dev.torch_device)  # the copy has landed: what follows is compute
        t1 = time.perf_counter()
        self.optimizer.zero_grad()
        loss = F.cross_entropy(self.model(inputs), labels)
        loss.backward()
        self.optimizer.step()
        synchronize(self.dev.torch_device)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, loss, labels.shape[0]

    def warm(self, steps: int) -> None:
        for _ in range(steps):
            self._step()

    def timed(self, steps: int) -> Iterator[Event]:
        case, total = self.case, self.p.batches
        for _ in range(steps):
            wait, compute, loss, samples = self._step()
            case.add(wait, compute, samples)
            self.done += 1
            if self.done % REPORT_EVERY == 0 or self.done == total:
                case.end_stretch()
                # Paths that take turns show no loss: a chart of either would restart every turn.
                shown = loss.item() if self.show_loss else float("nan")
                yield Step(self.done, total, shown, case.seconds, case.samples_per_s, label=case.label)


def _resident_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, seed: int) -> Iterator[Any]:
    g = torch.Generator(device=x.device).manual_seed(seed)
    while True:  # as many passes as the timed steps need
        yield from mnist.batches(x, y, batch_size, generator=g)


def _endless(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


def _loader(p: DataBottleneckParams, workers: int, pin: bool) -> Any:
    train, _, _ = mnist.loaders(p.batch_size, num_workers=workers, pin_memory=pin, test_samples=1, seed=p.seed)
    return train


def _alone(path: _Path) -> Iterator[Event]:
    path.warm(WARMUP_BATCHES)
    yield from path.timed(path.p.batches)


def measure(p: DataBottleneckParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    cores = os.cpu_count() or 1
    source = mnist.source()
    yield Started(
        "data-bottleneck",
        dev.torch_device,
        dev.name,
        source.description,
        f"{p.batches} timed batches of {p.batch_size} per case",
    )

    first = _loader(p, 0, False)
    epoch_samples = len(first.dataset)  # 60,000 for MNIST; the offline digits' own count otherwise
    loader = _Case("loader", "loader")
    resident = _Case("resident", "resident")
    yield Note(
        f"1/4 The notebook's DataLoader, num_workers=0: each of the {p.batch_size} images in a batch is "
        "decoded and converted (PIL -> ToTensor -> Normalize) in this process, between two steps."
    )
    yield Note(
        f"2/4 Resident tensors: all {epoch_samples:,} images normalised once and moved to "
        f"{dev.torch_device} once; a batch is an index into them, with no per-sample work at all."
    )
    yield Note(
        f"The two take turns, {min(TURN, p.batches)} steps at a time, and each one's samples/s is the median of its "
        f"{REPORT_EVERY}-step stretches: whatever else this machine does meanwhile slows both alike, "
        "and a moment when something else had the CPU counts for neither."
    )
    data = mnist.load(dev.torch_device)
    pair = [
        _Path(loader, _endless(first), dev, p, non_blocking=False, show_loss=False),
        _Path(
            resident,
            _resident_batches(data.train_x, data.train_y, p.batch_size, p.seed),
            dev,
            p,
            non_blocking=False,
            show_loss=False,
        ),
    ]
    for path in pair:
        path.warm(WARMUP_BATCHES)
    while pair[0].done < p.batches:
        steps = min(TURN, p.batches - pair[0].done)
        for path in pair:
            if path.done:
                path.warm(REWARM_BATCHES)
            yield from path.timed(steps)
    del pair, data

    workers = _Case("workers", f"{p.workers} worker" + ("s" if p.workers > 1 else ""))
    yield Note(
        f"3/4 The same DataLoader with num_workers={p.workers}: worker processes prepare the next "
        f"batches while this one trains. This machine has {cores} CPU core(s)"
        + (", so the workers compete with training for them." if cores <= p.workers else ".")
    )
    yield from _alone(_Path(workers, _endless(_loader(p, p.workers, False)), dev, p, non_blocking=False))

    pinned: _Case | None = None
    if dev.kind == "cuda":
        pinned = _Case("pinned", "pinned")
        yield Note(
            "4/4 Workers plus pin_memory=True and .to(device, non_blocking=True): batches wait in "
            "page-locked memory, which the GPU can copy from without a staging copy."
        )
        yield from _alone(_Path(pinned, _endless(_loader(p, p.workers, True)), dev, p, non_blocking=True))
    else:
        yield Note(
            "4/4 pin_memory skipped: page-locked memory speeds up copies from the host to a CUDA GPU, "
            f"and this run is on {dev.torch_device}, so there is no such copy to speed up.",
            "warning",
        )

    cases = [loader, workers] + ([pinned] if pinned else []) + [resident]
    yield Table(
        f"{p.batches} training steps of batch {p.batch_size} on {dev.torch_device} "
        f"(samples/s: the median of {REPORT_EVERY}-step stretches)",
        ["data path", "samples/s", "waiting for data", "compute", "epoch (est.)"],
        [
            [
                c.label,
                f"{c.samples_per_s:,.0f}",
                f"{c.wait_share:.0%} ({c.wait:.2f} s)",
                f"{c.compute:.2f} s",
                f"{epoch_samples / c.samples_per_s:.1f} s" if c.samples_per_s else "-",
            ]
            for c in cases
        ],
    )
    best = max(cases, key=lambda c: c.samples_per_s)
    # The paths take turns, so the k-th stretch of each ran at about the same time and a slow moment
    # hits both: the speedup is the median of the stretches' paired ratios, with its interval.
    interval = median_interval([t / b for t, b in zip(resident.rates, loader.rates) if b > 0])
    speedup = (
        interval.median
        if interval
        else (resident.samples_per_s / loader.samples_per_s if loader.samples_per_s else None)
    )
    speedup_low, speedup_high = bounds(interval)
    yield Note(
        f"The same model and optimiser step took {loader.compute:.2f} s of compute with the loader and "
        f"{resident.compute:.2f} s with resident tensors; the difference in total time is the data path. "
        f"The loader spent {loader.wait_share:.0%} of each step waiting for data; resident tensors "
        f"{resident.wait_share:.0%}. Fastest here: {best.label}"
        + (f", {speedup:.1f}x the notebook's loader." if speedup else "."),
        "result",
    )
    if workers.compute > 1.5 * loader.compute:
        yield Note(
            f"With {p.workers} workers, compute itself slowed from {loader.compute:.2f} s to "
            f"{workers.compute:.2f} s: on {cores} core(s) the workers took CPU time the training "
            "step needed. Workers pay off when there are cores to spare."
        )
    yield Note(
        "How this was timed: the device is synchronised after each copy and each step so data and "
        "compute can be told apart. A real loop lets a GPU compute while the next batch is "
        "prepared, so these waits are an upper bound on what overlapping can hide."
    )

    def projected(c: _Case | None) -> float | None:
        return round(epoch_samples / c.samples_per_s, 3) if c and c.samples_per_s else None

    yield Finished(
        {
            "loader_samples_per_s": loader.samples_per_s,
            "workers_samples_per_s": workers.samples_per_s,
            "pinned_samples_per_s": pinned.samples_per_s if pinned else None,
            "resident_samples_per_s": resident.samples_per_s,
            "loader_wait_share": loader.wait_share,
            "workers_wait_share": workers.wait_share,
            "pinned_wait_share": pinned.wait_share if pinned else None,
            "resident_wait_share": resident.wait_share,
            "loader_epoch_seconds": projected(loader),
            "resident_epoch_seconds": projected(resident),
            "resident_speedup": speedup,
            "resident_speedup_low": speedup_low,
            "resident_speedup_high": speedup_high,
            "fastest": best.name,
            "workers": p.workers,
            "cpu_cores": cores,
            "device": dev.torch_device,
            "data_source": source.source,
        }
    )
