"""The exercise environment: what the course notebook's shared setup cells gave, in one import.

    from tutor.lab import MNISTClassifier, device, train_loader, test_loader, \
        train_one_epoch, evaluate, report, synchronize, epochs_here

Data is the tutor's own (tutor.experiments.data: MNIST, or the offline digits when MNIST is absent), read
lazily on first use of `train_loader`, `test_loader`, `train_x` ... so a program that does not
use them does not pay for them. `train_set` and `test_set` are the same images as a `Dataset`
(a TensorDataset of normalised tensors), what a DistributedSampler splits among processes: read
from MNIST's files without torchvision, so each rank of a torchrun launch starts in a fraction
of a second. GPUTUTOR_LAB_TRAIN_SAMPLES / GPUTUTOR_LAB_TEST_SAMPLES take
the first N samples (the tutor's tests run small). `report(name=value)` hands values to the
grader through the file $GPUTUTOR_REPORT.
"""

from __future__ import annotations

import json
import math
import os
from functools import lru_cache
from typing import Any

import torch

from tutor.experiments import data as _data
from tutor.experiments import devices as _devices
from tutor.experiments.model import MNISTClassifier
from tutor.measurement import timing as _timing

BATCH_SIZE = 64  # the notebook's

__all__ = [
    "BATCH_SIZE",
    "MNISTClassifier",
    "data_source",
    "device",
    "epochs_here",
    "evaluate",
    "is_synthetic",
    "report",
    "synchronize",
    "test_loader",
    "test_set",
    "test_x",
    "test_y",
    "train_loader",
    "train_one_epoch",
    "train_set",
    "train_x",
    "train_y",
]

# Free memory is not read: reading it makes a CUDA context on the card, which a program training
# elsewhere (a rank of a gloo launch, on the CPU) would hold for nothing.
device = torch.device(_devices.resolve(None, free_memory=False).torch_device)


def _samples(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


@lru_cache(maxsize=1)
def _loaders() -> tuple[Any, Any]:
    train, test, _ = _data.loaders(
        BATCH_SIZE,
        train_samples=_samples("GPUTUTOR_LAB_TRAIN_SAMPLES"),
        test_samples=_samples("GPUTUTOR_LAB_TEST_SAMPLES"),
    )
    return train, test


@lru_cache(maxsize=1)
def _resident() -> Any:
    return _data.load(
        "cpu",
        train_samples=_samples("GPUTUTOR_LAB_TRAIN_SAMPLES"),
        test_samples=_samples("GPUTUTOR_LAB_TEST_SAMPLES"),
    )


@lru_cache(maxsize=1)
def _datasets() -> tuple[Any, Any]:
    """(train_set, test_set): TensorDatasets of (image 1x28x28, label) pairs, normalised as the
    loaders' are; the first GPUTUTOR_LAB_*_SAMPLES of each when set."""
    from torch.utils.data import TensorDataset

    data = _data.load_first(
        _samples("GPUTUTOR_LAB_TRAIN_SAMPLES") or 60_000, _samples("GPUTUTOR_LAB_TEST_SAMPLES") or 10_000
    )
    return TensorDataset(data.train_x, data.train_y), TensorDataset(data.test_x, data.test_y)


def __getattr__(name: str) -> Any:
    # Module-level lazy attributes (PEP 562): the data is read only when a program asks for it.
    if name == "train_set":
        return _datasets()[0]
    if name == "test_set":
        return _datasets()[1]
    if name == "train_loader":
        return _loaders()[0]
    if name == "test_loader":
        return _loaders()[1]
    if name in ("train_x", "train_y", "test_x", "test_y"):
        return getattr(_resident(), name)  # CPU tensors; move them with .to(device)
    if name == "data_source":
        return _data.source().description
    raise AttributeError(f"module 'tutor.lab' has no attribute {name!r}")


def is_synthetic() -> bool:
    """True when MNIST is absent and the offline synthetic digits stand in for it."""
    return _data.source().source == _data.SYNTHETIC


def train_one_epoch(model: torch.nn.Module, loader: Any, optimizer: Any, criterion: Any, device: Any) -> float:
    """One pass over `loader` (batches moved to `device`); the mean training loss."""
    model.train()
    total, batches = 0.0, 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        total += loss.detach()  # summed on the device: .item() every step would wait for the GPU each time
        batches += 1
    return float(total) / max(batches, 1)


@torch.no_grad()
def evaluate(model: torch.nn.Module, loader: Any, device: Any) -> float:
    """Accuracy (0..1) of `model` on `loader`."""
    model.eval()
    correct, seen = 0, 0
    for images, labels in loader:
        images, labels = images.to(device), labels.to(device)
        correct += (model(images).argmax(dim=1) == labels).sum().item()
        seen += labels.shape[0]
    return correct / max(seen, 1)


def epochs_here(gpu: int, cpu: int) -> int:
    """How many epochs a long script trains on this machine: `gpu` on a GPU (or Apple MPS), `cpu`
    on a CPU, where each epoch takes seconds and `gpu` of them would keep the learner waiting for
    minutes. Only for epochs a GPU makes fast (resident tensors such as train_x): through
    `train_loader` an epoch takes seconds on a GPU too, its per-image work being on the CPU. Prints
    the choice, so the run says what it cut (in rank 0 only, under torchrun)."""
    said = os.environ.get("RANK", "0") in ("", "0")
    if device.type == "cpu" and cpu < gpu:
        if said:
            print(
                f"epochs: {cpu} on this CPU ({gpu} on a GPU; a CPU epoch takes seconds, not milliseconds)", flush=True
            )
        return cpu
    if said:
        print(f"epochs: {gpu} on {device.type}", flush=True)
    return gpu


def synchronize(device: Any) -> None:
    """Wait for the device's queued work before reading a clock (tutor.measurement.timing.synchronize)."""
    _timing.synchronize(str(device))


def _plain(name: str, value: Any) -> float | int | str | bool:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise TypeError(f"report({name}=...): a tensor must hold one number; got shape {tuple(value.shape)}")
        value = value.item()
    if isinstance(value, (bool, int, str)):
        return value
    try:
        number = float(value)  # numpy scalars and the like
    except (TypeError, ValueError):
        raise TypeError(
            f"report({name}=...): report a number, text or True/False, not {type(value).__name__}"
        ) from None
    return number


def report(**values: Any) -> None:
    """Hand values to the tutor's checker: report(speedup=3.2, synchronized=True)."""
    plain = {k: _plain(k, v) for k, v in values.items()}
    shown = ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) and math.isfinite(v) else f"{k}={v}" for k, v in plain.items()
    )
    print(f"reported: {shown}", flush=True)  # one line: the program's own output stays in view
    path = os.environ.get("GPUTUTOR_REPORT")
    if path:
        safe = {k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in plain.items()}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(safe) + "\n")
