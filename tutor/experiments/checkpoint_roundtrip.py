"""checkpoint-roundtrip: save on the training device, load on the CPU, check nothing changed.

The notebook's checkpoint dict {model_state_dict, optimizer_state_dict, epoch, loss,
accuracy} is written with torch.save on the device the model trained on, read back with
torch.load(path, map_location="cpu", weights_only=True) into a fresh MNISTClassifier on
the CPU, and the two models' predictions on the same test batch are compared.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import optim

from tutor.experiments.data import load
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started
from tutor.experiments.model import MNISTClassifier, count_parameters
from tutor.experiments.specs.checkpoint_roundtrip import CheckpointParams
from tutor.experiments.training import (
    checkpoint_target,
    evaluate,
    full_float32_matmuls,
    save_atomically,
    seed_everything,
    train_steps,
)
from tutor.paths import scratch_dir

COMPARE_SAMPLES = 1000  # the test batch both models predict
ATOL = 1e-5  # cuda and cpu kernels sum in different orders; identical weights differ by ~1e-6


# A checkpoint saved on a CPU or MPS, written again the way torch.save writes one on a GPU (each
# storage tagged with the card it came from), then loaded as the course's exercise 2 asks: with
# plain torch.load, on a machine that has no CUDA. In a process of its own: the tag is global.
AS_IF_SAVED_ON_A_GPU = """
import sys, torch
state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
torch.serialization.register_package(0, lambda s: "cuda:0" if s.device.type == "cpu" else None, lambda o, loc: None)
torch.save(state, sys.argv[2])
torch.load(sys.argv[2], weights_only=True)
"""


def _cpu_only_load_error(path: str) -> str | None:
    """Load a CUDA checkpoint without map_location in a process that cannot see the GPU."""
    return _error_where_cuda_is_hidden(f"import torch; torch.load({path!r}, weights_only=True)")


def _gpu_file_load_error(path: str) -> str | None:
    """The same, for this machine's checkpoint written as a GPU would have written it."""
    tagged = path + ".as-if-cuda"
    try:
        return _error_where_cuda_is_hidden(AS_IF_SAVED_ON_A_GPU, path, tagged)
    finally:
        if os.path.exists(tagged):
            os.remove(tagged)


def _error_where_cuda_is_hidden(code: str, *args: str) -> str | None:
    """The error line of `code` run by a Python that sees no CUDA (None: it ran, or could not start)."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    try:
        out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
    if out.returncode == 0 or not lines:
        return None
    return next((ln for ln in lines if "Error" in ln and "map_location" in ln), lines[-1])


def _unpickling_reason(message: str) -> str:
    """The line of torch's long weights_only message that says what was refused."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", message)  # torch bolds part of it with ANSI codes
    for line in text.splitlines():
        if "Unsupported global" in line:
            return line.strip().split(". ")[0]
    return text.strip().splitlines()[0]


def measure(p: CheckpointParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    # Before any training: a bad path should fail now, not after training.
    target = checkpoint_target(p.path, "path") if p.path else None
    seed_everything(p.seed)
    data = load(device, train_samples=p.steps * p.batch_size)
    yield Started("checkpoint-roundtrip", device, dev.name, data.description)

    model = MNISTClassifier().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    loss = train_steps(model, optimizer, data, p.steps, p.batch_size, device, seed=p.seed)
    accuracy = evaluate(model, data.test_x, data.test_y)
    batches_per_epoch = math.ceil(len(data.train_x) / p.batch_size)
    epoch = math.ceil(p.steps / batches_per_epoch)
    yield Note(
        f"Trained {p.steps} steps on {device}: mean loss {loss:.4f} over the last pass through the "
        f"{len(data.train_x)} training images, test accuracy {accuracy:.1%}."
    )

    model.eval()
    batch = data.test_x[:COMPARE_SAMPLES]
    # Both predictions in full float32: with TF32 on (the default in NVIDIA's containers) the GPU's
    # matmuls keep a 10-bit mantissa, and the comparison would measure that, not the checkpoint.
    with torch.no_grad(), full_float32_matmuls() as tf32_was_on:
        before = model(batch).cpu()  # predictions on the training device

    if target is not None:
        path = str(target)
    else:
        fd, path = tempfile.mkstemp(suffix=".pt", prefix="checkpoint-", dir=scratch_dir())
        os.close(fd)
    try:
        save_atomically(
            {
                "model_state_dict": model.state_dict(),  # tensors still on `device`
                "optimizer_state_dict": optimizer.state_dict(),
                "epoch": epoch,
                "loss": loss,
                "accuracy": accuracy,
            },
            Path(path),
        )
        file_bytes = os.path.getsize(path)

        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        restored = MNISTClassifier()  # fresh, on the CPU
        restored.load_state_dict(checkpoint["model_state_dict"])
        resumed = optim.Adam(restored.parameters(), lr=1e-3)
        resumed.load_state_dict(checkpoint["optimizer_state_dict"])  # ready to continue training
        restored.eval()
        with torch.no_grad(), full_float32_matmuls():
            after = restored(batch.cpu())

        cuda_error = _cpu_only_load_error(path) if dev.kind == "cuda" else _gpu_file_load_error(path)
    finally:
        if target is None:
            os.remove(path)

    original = {k: v.cpu() for k, v in model.state_dict().items()}
    weights_equal = all(torch.equal(original[k], v) for k, v in restored.state_dict().items())
    allclose = torch.allclose(before, after, atol=ATOL)
    max_abs_diff = (before - after).abs().max().item()
    same_classes = bool((before.argmax(1) == after.argmax(1)).all())

    params = count_parameters(model)
    float_bytes = 4 * params * 3  # weights + Adam's exp_avg and exp_avg_sq, float32
    yield Note(
        f"Saved on {device} to {'a temporary file' if not p.path else path}: {file_bytes:,} bytes. "
        f"{params:,} parameters x 4 bytes x 3 (weights, Adam's two moment estimates) = {float_bytes:,} "
        f"bytes; the other {file_bytes - float_bytes:,} are the file's zip/pickle structure, Adam's "
        "step counters and the epoch, loss and accuracy numbers."
    )
    yield Note(
        f"Loaded with torch.load(path, map_location='cpu', weights_only=True) into a fresh "
        f"MNISTClassifier on the CPU. Weights bit-identical: {weights_equal}. Predictions on the same "
        f"{len(batch)} test images: torch.allclose(before, after, atol={ATOL:g}) = {allclose}, max "
        f"|difference| = {max_abs_diff:.3g}, same predicted digit for every image: {same_classes}."
        + (
            ""
            if max_abs_diff == 0
            else f" The tiny difference comes from {dev.kind} and the CPU adding numbers in a different order, "
            "not from the checkpoint."
        )
        + (
            " Both predictions ran with TF32 off (torch.set_float32_matmul_precision('highest'), restored "
            "after): TF32 was on here, and its 10-bit mantissa would have made the two differ far more."
            if tf32_was_on
            else ""
        ),
        "result",
    )
    # What weights_only=True does refuse: a whole pickled nn.Module.
    buffer = io.BytesIO()
    torch.save(restored, buffer)
    buffer.seek(0)
    try:
        torch.load(buffer, weights_only=True)
        refused = None
    except pickle.UnpicklingError as exc:
        refused = _unpickling_reason(str(exc))
    yield Note(
        "weights_only=True (the default since PyTorch 2.6) loaded this dict with its epoch, loss and "
        "accuracy numbers without complaint: it accepts tensors, dicts, lists, strings and numbers. "
        + (
            f"It refuses arbitrary pickled objects, which could run code when unpickled: torch.save(model) "
            f"of the whole nn.Module, loaded the same way, gave UnpicklingError: {refused}. "
            "Save state_dicts, not models."
            if refused
            else "(A whole pickled nn.Module loaded too in this PyTorch version.)"
        )
    )
    if cuda_error and dev.kind == "cuda":
        yield Note(f"Without map_location, loading this file where CUDA is not visible fails:\n{cuda_error}")
    elif cuda_error:
        yield Note(
            f"This file was saved on {device}. Written again as a GPU writes it (every tensor tagged "
            "with the card it came from, cuda:0) and loaded by torch.load with no map_location, in a process "
            f"that sees no GPU, as on a CPU-only laptop, it fails for real:\n{cuda_error}\n"
            "torch.load puts every tensor back on the device it was saved from, unless map_location "
            "says otherwise: passing map_location='cpu' (or map_location=device) to torch.load loads it "
            "anywhere."
        )
    elif dev.kind == "cuda":
        yield Note(
            "Without map_location, torch.load puts every tensor back on the GPU it was saved from "
            "(loading this file in a process without CUDA could not be checked here)."
        )
    else:
        yield Note(
            "map_location='cpu' matters for checkpoints saved on a GPU: without it torch.load puts every "
            "tensor back on the device it was saved from, so on a machine without CUDA it stops with a "
            "RuntimeError that asks you to pass map_location (that load could not be tried here)."
        )

    # Some course material calls `torch.save(model.cpu().state_dict(), ...)` the robust save. But
    # nn.Module.cpu() moves the module itself and returns it: the live model leaves the GPU.
    live = MNISTClassifier().to(device)
    returned = live.cpu()
    cpu_call_moves_model = returned is live
    device_after = str(next(live.parameters()).device)
    if dev.kind == "cpu":
        yield Note(
            "The save some course material calls robust, torch.save(model.cpu().state_dict(), path), is not: "
            f"model.cpu() moves the module itself and returns it (returned is model: {cpu_call_moves_model}). "
            "Here everything is on the CPU already, so nothing visibly moves; on a GPU the training model would "
            "now be on the CPU, and the next step with its batch on the GPU stops with a device mismatch "
            "(or, if the batch follows the model, trains on the CPU, slowly and silently). A checkpoint saved "
            "from the GPU loads anywhere with map_location; no .cpu() is needed on the model.",
            "warning",
        )
    else:
        yield Note(
            "The save some course material calls robust, torch.save(model.cpu().state_dict(), path), is not: "
            f"model.cpu() moved the model itself (returned is model: {cpu_call_moves_model}); its parameters "
            f"are now on {device_after}, not {device}. The next training step, with its batch on {device}, "
            "stops with a device mismatch, or trains on the CPU if the batch follows the model. Save "
            "model.state_dict() as it is and load with map_location.",
            "warning",
        )

    yield Finished(
        {
            "cpu_call_moves_model": cpu_call_moves_model,
            "params_after_cpu_call": device_after,
            "allclose": allclose,
            "max_abs_diff": max_abs_diff,
            "weights_equal": weights_equal,
            "same_predictions": same_classes,
            "file_bytes": file_bytes,
            "parameters": params,
            "saved_on": device,
            "loaded_on": "cpu",
            "epoch": checkpoint["epoch"],
            "loss": checkpoint["loss"],
            "accuracy": checkpoint["accuracy"],
            "path": p.path,
            "cpu_only_load_error": cuda_error,
            "loads_without_map_location": False if cuda_error else None,
            "whole_model_refused": refused is not None,
        }
    )
