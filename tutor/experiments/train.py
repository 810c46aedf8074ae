"""`train`: the notebook's MNISTClassifier + Adam + CrossEntropyLoss on the chosen device.

Timing: before the clock starts, WARMUP_STEPS untimed steps run on a throwaway copy of the
model (CUDA context, cuBLAS handles, kernel selection, the caching allocator), so the first
epoch does not pay one-time set-up; the trained model and its batch order are unchanged by
it. Each epoch's seconds are device-synchronised and exclude evaluation, checkpoint writing
and the time the consumer holds a yielded event. `seconds_per_epoch` is the median over full
epochs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from tutor.experiments.devices import Device
from tutor.experiments.events import Epoch, Event, Finished, Note, Started, Step
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.train import TrainParams
from tutor.experiments.training import (
    autocast_settings,
    checkpoint_target,
    evaluate_batches,
    make_scaler,
    report_interval,
    save_atomically,
    seed_everything,
    train_epoch,
    warm_up,
)
from tutor.measurement.timing import Stopwatch, median


def save_checkpoint(
    target: Path, model: nn.Module, optimizer: torch.optim.Optimizer, epoch: int, loss: float, accuracy: float
) -> None:
    """The notebook's checkpoint dict: tensors and plain numbers only, so that
    torch.load(path, map_location="cpu", weights_only=True) accepts it. Written atomically."""
    save_atomically(
        {
            "model_state_dict": model.state_dict(),
            "optimizer_state_dict": optimizer.state_dict(),
            "epoch": int(epoch),
            "loss": float(loss),
            "accuracy": float(accuracy),
        },
        target,
    )


def measure(p: TrainParams, dev: Device) -> Iterator[Event]:
    from tutor.experiments import data as mnist

    device = dev.torch_device
    # Before any training: a bad path should fail now, not after the last epoch.
    target = checkpoint_target(p.checkpoint, "checkpoint") if p.checkpoint else None
    amp = autocast_settings(p.amp, dev)
    seed_everything(p.seed)

    if p.data_path == "resident":
        d = mnist.load(device, train_samples=p.train_samples, test_samples=p.test_samples)
        info = d.info
        n_train, n_test = d.train_x.shape[0], d.test_x.shape[0]
        # A CPU generator makes the shuffling order the same on every device for a given seed.
        gen = torch.Generator().manual_seed(p.seed)

        def train_batches():
            return mnist.batches(d.train_x, d.train_y, p.batch_size, generator=gen)

        def warmup_batches():  # in order: draws nothing from `gen`, so the batch order is unchanged
            return mnist.batches(d.train_x, d.train_y, p.batch_size, shuffle=False)

        def test_batches():
            return mnist.batches(d.test_x, d.test_y, 1000, shuffle=False)

        mb = (d.train_x.numel() * d.train_x.element_size()) / 1e6
        path_note = (
            f"Data path: resident. The {n_train} training images ({mb:.0f} MB as float32) were normalised "
            f"once and copied to {device} once; each step slices a batch that is already there."
        )
    else:
        pin = dev.kind == "cuda"
        train_loader, test_loader, info = mnist.loaders(
            p.batch_size,
            num_workers=p.num_workers,
            pin_memory=pin,
            train_samples=p.train_samples,
            test_samples=p.test_samples,
            seed=p.seed,
        )
        n_train, n_test = len(train_loader.dataset), len(test_loader.dataset)

        def train_batches():
            return train_loader

        def warmup_batches():
            # Same dataset and transforms, unshuffled and in this process: iterating train_loader
            # would advance its shuffling generator (and start its workers) before the timed run.
            from torch.utils.data import DataLoader

            return DataLoader(train_loader.dataset, batch_size=p.batch_size, shuffle=False)

        def test_batches():
            return test_loader

        path_note = (
            f"Data path: loader (the notebook's). A DataLoader with {p.num_workers} worker process(es) "
            "turns every sample into a PIL image, then ToTensor + Normalize, collates a batch on the CPU, "
            f"and the loop copies each batch to {device}" + (" from pinned memory." if pin else ".")
        )

    yield Started(
        "train",
        device,
        dev.name,
        info.description,
        detail=f"{p.data_path} data path, batch {p.batch_size}, {p.epochs} epoch(s), lr {p.lr:g}, amp {amp.dtype_name}",
    )
    yield Note(f"Training on {dev.describe()}.")
    if info.fallback_reason:
        yield Note(f"Data: {info.description}. Accuracy here is on synthetic digits, not MNIST.", "warning")
    else:
        yield Note(f"Data: {info.description} ({n_train} training, {n_test} test images).")
    yield Note(path_note)
    if amp.note:
        slow = not amp.enabled or amp.emulated or (amp.dtype == torch.float16 and not amp.use_scaler)
        yield Note(amp.note, "warning" if slow else "info")

    model = MNISTClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=p.lr)
    scaler = make_scaler(amp, dev)

    steps_per_epoch = math.ceil(n_train / p.batch_size)
    planned = p.epochs * steps_per_epoch
    if p.max_steps is not None:
        planned = min(planned, p.max_steps)
    every = report_interval(min(steps_per_epoch, planned))

    warmed = warm_up(model, warmup_batches(), device, amp=amp, lr=p.lr)
    start_up = (
        f" The first step took {warmed.first / max(warmed.last, 1e-9):,.0f}x as long as a settled one: that "
        "is the one-time cost itself. On a GPU the first CUDA call creates the context and cuBLAS handles "
        "and picks kernels, which can take longer than a whole epoch after it."
        if warmed.times and warmed.first > 2 * warmed.last
        else ""
    )
    yield Note(
        f"Before the clock started, {warmed.words(lambda s: f'{s * 1000:,.1f} ms', 'step')} ran on a throwaway "
        "copy of the model (device context, cuBLAS handles, kernel selection, memory allocator), so epoch times, "
        "total_seconds and samples_per_s leave that one-time set-up out." + start_up + " The model trained below "
        "starts from the same weights and sees the same batches as it would without them."
    )

    clock = Stopwatch(device)  # all epochs' training
    steps = samples = 0
    full_epoch_seconds: list[float] = []
    all_epoch_seconds: list[float] = []
    acc = best = float("nan")
    final_loss = float("nan")
    saved: str | None = None
    for epoch in range(1, p.epochs + 1):
        remaining = None if p.max_steps is None else p.max_steps - steps
        ep_clock = Stopwatch(device)
        last = None
        for prog in train_epoch(
            model,
            optimizer,
            train_batches(),
            device,
            amp=amp,
            scaler=scaler,
            report_every=every,
            max_steps=remaining,
        ):
            last = prog
            seconds = clock.elapsed()
            if prog.steps:
                event = Step(
                    step=steps + prog.steps,
                    total=planned,
                    loss=prog.loss,
                    seconds=seconds,
                    samples_per_s=(samples + prog.samples) / seconds if seconds > 0 else 0.0,
                    epoch=epoch,
                )
                with clock.paused(), ep_clock.paused():
                    yield event
        epoch_seconds = ep_clock.elapsed()
        assert last is not None
        steps += last.steps
        samples += last.samples
        final_loss = last.epoch_loss
        all_epoch_seconds.append(epoch_seconds)
        partial = last.steps < steps_per_epoch
        if not partial:
            full_epoch_seconds.append(epoch_seconds)

        with clock.paused():  # evaluation and saving are not training time
            acc = evaluate_batches(model, test_batches(), device, amp=amp)
            improved = not acc <= best  # also true for the first epoch (best is NaN)
            if improved:
                best = acc
                if target is not None:
                    save_checkpoint(target, model, optimizer, epoch, last.epoch_loss, acc)
                    saved = str(target)
            yield Epoch(
                epoch=epoch,
                epochs=p.epochs,
                train_loss=last.epoch_loss,
                test_acc=acc,
                seconds=epoch_seconds,
                samples_per_s=last.samples / epoch_seconds if epoch_seconds > 0 else 0.0,
            )
            if improved and target is not None:
                yield Note(f"Saved the best checkpoint so far (epoch {epoch}, accuracy {acc:.2%}) to {saved}.")
        if p.max_steps is not None and steps >= p.max_steps:
            if epoch < p.epochs or partial:
                yield Note(f"Stopped after max_steps={p.max_steps} optimiser steps (epoch {epoch} of {p.epochs}).")
            break

    total_seconds = clock.elapsed()
    if full_epoch_seconds:
        per_epoch = median(full_epoch_seconds)
        listed = ", ".join(f"{s:.2f}" for s in full_epoch_seconds)
        if len(full_epoch_seconds) >= 3:
            yield Note(
                f"seconds_per_epoch is the median of {len(full_epoch_seconds)} epochs ({listed} s): "
                "one epoch slowed by something else on the machine does not move it."
            )
        else:
            yield Note(
                f"seconds_per_epoch is the median of {len(full_epoch_seconds)} epoch(s) ({listed} s); "
                "3 or more epochs give a steadier figure."
            )
    else:  # stopped inside the first epoch: scale the partial epoch to a full one, and say so
        per_epoch = all_epoch_seconds[-1] * steps_per_epoch / steps if steps else float("nan")
        yield Note(
            f"seconds_per_epoch is extrapolated from {steps} of {steps_per_epoch} steps "
            f"({all_epoch_seconds[-1]:.2f} s x {steps_per_epoch}/{steps})."
        )

    yield Finished(
        {
            "accuracy": float(acc),
            "best_accuracy": float(best),
            "final_loss": float(final_loss),
            "seconds_per_epoch": float(per_epoch),
            "samples_per_s": samples / total_seconds if total_seconds > 0 else 0.0,
            "total_seconds": float(total_seconds),
            "steps": steps,
            "device": device,
            "device_name": dev.name,
            "data_source": info.source,
            "data_path": p.data_path,
            "amp_dtype": amp.dtype_name,
            "checkpoint": saved,
        }
    )
