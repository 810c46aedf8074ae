"""shape-mismatch: three shape mistakes on a real MNIST batch, the errors PyTorch raises, the fixes.

1. Images into Linear layers without flattening: Linear works on the last dimension, so a
   [B, 1, 28, 28] batch meets Linear(784, ...) with 28 features.
2. A Conv2d batch without its channel dimension: [B, 28, 28] is read as ONE unbatched image
   with B channels.
3. Labels with an extra dimension: cross_entropy wants class indices of shape [B], not [B, 1].

Each mistake is really run and its exception caught; then the fix is run on the same batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from tutor.experiments.data import load
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.shape_mismatch import ShapeMismatchParams
from tutor.experiments.training import seed_everything

BATCH = 64


def _attempt(fn: Callable[[], torch.Tensor]) -> tuple[str | None, str | None, tuple[int, ...] | None]:
    """(error type, first line of its message, None) if fn raises, else (None, None, output shape)."""
    try:
        out = fn()
    except (RuntimeError, ValueError) as exc:
        return type(exc).__name__, str(exc).strip().splitlines()[0], None
    return None, None, tuple(out.shape)


def measure(p: ShapeMismatchParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    seed_everything(p.seed)
    data = load(device, train_samples=BATCH, test_samples=1)
    images = data.train_x.view(BATCH, 1, 28, 28)  # as a DataLoader of MNIST images yields them
    labels = data.train_y
    yield Started(
        "shape-mismatch",
        device,
        dev.name,
        data.description,
        f"three shape mistakes on one batch of {BATCH} MNIST images {tuple(images.shape)}",
    )

    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    conv = nn.Conv2d(1, 8, kernel_size=3, padding=1).to(device)
    logits = mlp(images.flatten(1))
    cases = [
        (
            "flatten",
            "images into Linear without flattening",
            lambda: mlp(images),
            lambda: mlp(images.flatten(1)),
            "mlp(images.flatten(1))  # or nn.Flatten() first",
        ),
        (
            "channel",
            "a Conv2d batch without its channel dimension",
            lambda: conv(images.squeeze(1)),
            lambda: conv(images.squeeze(1).unsqueeze(1)),
            "conv(x.unsqueeze(1))  # [B, 28, 28] -> [B, 1, 28, 28]",
        ),
        (
            "target",
            "labels of shape [B, 1] for cross_entropy",
            lambda: F.cross_entropy(logits, labels.unsqueeze(1)),
            lambda: F.cross_entropy(logits, labels),
            "F.cross_entropy(logits, labels.view(-1))  # class indices of shape [B]",
        ),
    ]
    metrics: dict = {}
    rows = []
    for key, what, broken, fixed, fix_text in cases:
        err_type, message, _ = _attempt(broken)
        _, fix_error, shape = _attempt(fixed)
        metrics[f"{key}_error_type"] = err_type
        metrics[f"{key}_error"] = message
        metrics[f"{key}_fixed"] = fix_error is None
        if err_type is None:
            yield Note(f"{what}: no error was raised here (PyTorch version {torch.__version__}).", "warning")
        else:
            yield Note(f"{what}\n  {err_type}: {message}\n  fix: {fix_text}", "result")
        rows.append(
            [
                what,
                f"{err_type}: {message}" if err_type else "no error",
                "ok, shape " + "x".join(map(str, shape))
                if fix_error is None and shape is not None
                else ("ok" if fix_error is None else f"still fails: {fix_error}"),
            ]
        )
    yield Table("Each mistake, its error, and the fix on the same batch", ["mistake", "error", "fixed"], rows)
    yield Note(
        "Read the shapes in the message: they say which dimension is wrong. Print x.shape just before "
        "the failing line when it is not obvious."
    )
    metrics["all_fixed"] = all(metrics[f"{k}_fixed"] for k, *_ in cases)
    yield Finished(metrics)
