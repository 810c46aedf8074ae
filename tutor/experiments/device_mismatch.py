"""device-mismatch: the model moved to the accelerator, the batch left on the CPU (or, with
`reverse`, every batch moved and the model left behind).

This is the notebook's CPU training loop after adding only `model.to(device)` (reverse: only
the batch moves). The forward pass raises; we catch the real exception and show where it
came from. Then the fix - moving each batch inside the loop, or the model once - runs a
real optimiser step.

Without an accelerator the model goes to PyTorch's `meta` device instead (tensors with
shapes but no storage), which is a different device from the CPU batch: a genuine
device mismatch raised by PyTorch, with a message that names meta instead of cuda:0.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import optim
from torch.utils.data import DataLoader, TensorDataset

from tutor.experiments.data import load
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.device_mismatch import DeviceMismatchParams
from tutor.experiments.training import seed_everything

BATCH_SIZE = 64
SAMPLES = 256  # a few batches is all the loop gets through


def _short(filename: str) -> str:
    """'torch/nn/modules/linear.py' rather than the full site-packages path."""
    parts = filename.replace("\\", "/").split("/")
    for anchor in ("torch", "tutor"):
        if anchor in parts:
            return "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor) :])
    return os.path.basename(filename)


def _path(f: traceback.FrameSummary) -> str:
    return f.filename.replace("\\", "/")


def _frame_text(f: traceback.FrameSummary) -> str:
    return f"{_short(f.filename)}:{f.lineno} in {f.name}: {(f.line or '').strip()}"


def _origin(exc: BaseException) -> tuple[traceback.FrameSummary | None, list[traceback.FrameSummary]]:
    """(the line of this file that raised, the frames from there inward worth showing)."""
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.abspath(__file__)
    ours = [i for i, f in enumerate(frames) if os.path.abspath(f.filename) == here]
    line = frames[ours[-1]] if ours else None
    inner = frames[ours[-1] + 1 :] if ours else frames
    # The model's own forward (tutor/experiments/model.py), the last torch.nn layer (F.linear), the raise itself.
    keep = [f for f in inner if "/torch/" not in _path(f)]
    keep += [f for f in inner if "/torch/nn/" in _path(f) and not _path(f).endswith("modules/module.py")][-1:]
    if inner and inner[-1] not in keep:
        keep.append(inner[-1])
    return line, keep


def measure(p: DeviceMismatchParams, dev: Device) -> Iterator[Event]:
    accelerated = dev.is_accelerator
    method = dev.kind if accelerated else "meta"
    device = torch.device(dev.torch_device if accelerated else "meta")
    seed_everything(p.seed)
    data = load("cpu", train_samples=SAMPLES, test_samples=BATCH_SIZE)
    yield Started(
        "device-mismatch",
        str(device),
        dev.name if accelerated else "meta (no accelerator here)",
        data.description,
        "the reverse: batches moved, the model left on the CPU" if p.reverse else "",
    )
    if not accelerated:
        moved, stays = ("the batches go", "model stays") if p.reverse else ("the model goes", "batch stays")
        yield Note(
            f"No GPU here, so {moved} to PyTorch's 'meta' device (shapes, no numbers) while the "
            f"{stays} on the CPU: a real mismatch between two devices, raised by PyTorch itself. "
            "On a GPU the same loop fails at the same line, and the message names cuda:0 and cpu.",
            "warning",
        )

    # A DataLoader yields new CPU tensors every iteration, as in the notebook.
    loader = DataLoader(TensorDataset(data.train_x, data.train_y), batch_size=BATCH_SIZE, shuffle=True)
    # The only change made to the CPU loop: the model moved (reverse: each batch moved instead).
    model = MNISTClassifier() if p.reverse else MNISTClassifier().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    model_device = str(next(model.parameters()).device)

    error: BaseException | None = None
    inputs = data.train_x[:0]
    try:
        model.train()
        for inputs, labels in loader:
            if p.reverse:
                inputs, labels = inputs.to(device), labels.to(device)
            optimizer.zero_grad()
            outputs = model(inputs)  # inputs and weights on two devices
            loss = F.cross_entropy(outputs, labels)
            loss.backward()
            optimizer.step()
    except RuntimeError as exc:  # what a device mismatch raises
        error = exc
    input_device = str(inputs.device)

    metrics: dict = {"model_device": model_device, "input_device": input_device, "method": method}
    if error is None:
        yield Note(f"No error was raised with the model on {model_device} and the batch on {input_device}.", "warning")
        metrics.update(error_type=None, error_message=None, error_line=None, error_frame=None)
    else:
        line, frames = _origin(error)
        layer = [f for f in frames if "/torch/nn/" in _path(f)]
        message = str(error).strip()
        metrics.update(
            error_type=type(error).__name__,
            error_message=message,
            error_line=(line.line or "").split("  #")[0].strip() if line else None,
            # The torch.nn layer whose call raised (F.linear); on cuda the raise is in C++ below it.
            error_frame=_frame_text(layer[-1]) if layer else None,
        )
        yield Note(f"{type(error).__name__}: {message}", "result")
        where = f"line {line.lineno} of {_short(line.filename)}: {metrics['error_line']}" if line else "?"
        chain = "\n".join("  -> " + _frame_text(f) for f in frames)
        yield Note(
            f"It was raised by the forward pass, {where}\n(model on {model_device}, batch on {input_device})."
            f" From there, inside the model and PyTorch:\n{chain}"
        )

    # The fix: move every batch inside the loop, right where the loader hands it over (and the
    # model once: in the reverse case that is the line that was missing).
    fix_device = device if accelerated else torch.device("cpu")
    if not accelerated or p.reverse:  # a meta model has no weights to train: build a real one
        model = MNISTClassifier().to(fix_device)
        optimizer = optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for inputs, labels in loader:
        inputs, labels = inputs.to(fix_device), labels.to(fix_device)  # the fix
        optimizer.zero_grad()
        outputs = model(inputs)
        loss = F.cross_entropy(outputs, labels)
        loss.backward()
        optimizer.step()
        break  # one real step is enough to show it works
    fix_loss = loss.item()
    fix = (
        "model = MNISTClassifier().to(device), once, before the optimizer is made (as the PyTorch docs advise)"
        if p.reverse
        else "inputs, labels = inputs.to(device), labels.to(device) as the first line inside the loop"
    )
    yield Note(
        f"The fix: {fix}. One real Adam step ran on {fix_device} with a batch on {inputs.device}: loss {fix_loss:.4f}."
        + ("" if accelerated else " (On this machine device is cpu, the only real device here.)"),
        "result",
    )
    metrics.update(fix_ran=True, fix_device=str(fix_device), fix_loss=fix_loss)

    # The lab's own fix moves the whole batch at once: `batch.to('cuda')`. Tried for real, on what
    # this loader hands over.
    batch = next(iter(loader))
    try:
        batch.to(fix_device)
        batch_error = None
    except AttributeError as exc:
        batch_error = f"{type(exc).__name__}: {exc}"
    metrics["batch_to_error"] = batch_error
    if batch_error is not None:
        yield Note(
            f"The lab's fix writes `batch_gpu = batch.to('cuda')`. Tried on this DataLoader's batch (a "
            f"{type(batch).__name__} of {len(batch)} tensors): {batch_error}. A DataLoader over (inputs, "
            "labels) pairs yields a list, and a list has no .to: move each tensor, as the fix above does.",
            "result",
        )
    yield Finished(metrics)
