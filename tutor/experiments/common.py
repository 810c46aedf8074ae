"""Plain training helpers shared by the experiments, in the notebook's style.

    seed_everything(seed)                       python, numpy (if present) and torch RNGs
    autocast_settings(amp, dev) -> Amp          what torch.autocast / GradScaler to use, and why
    make_scaler(amp, dev)                       torch.amp.GradScaler, enabled only where Amp says so
    train_epoch(model, opt, batches, device, amp=..., scaler=..., report_every=..., max_steps=...)
                                                one pass over `batches`; a generator of Progress
                                                reports (one loss.item() per report, not per step)
    evaluate(model, x, y, batch_size, amp=...)  test accuracy (0..1) of resident tensors
    evaluate_batches(model, batches, device)    same for any iterable of (x, y), e.g. a DataLoader
    train_steps(model, opt, data, steps, batch_size, device) -> last loss (float)
                                                "train briefly" for experiments that need a model
    RunClock(device)                            synchronised seconds, minus time spent paused at
                                                yields (`with clock.paused(): yield event`)
    report_interval(steps)                      steps between loss reports (~75 per pass)

Why losses are accumulated on the device: `loss.item()` copies to the host and waits for
the GPU, so calling it every step serialises the CPU and GPU. The loop adds `loss.detach()`
into a device tensor and reads it only when it reports.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn

from tutor.devices import Device


def seed_everything(seed: int) -> None:
    """Seed every RNG a run touches (torch.manual_seed also seeds CUDA and MPS)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % 2**32)
    except ImportError:
        pass
    torch.manual_seed(seed)


class Amp(NamedTuple):
    """Mixed-precision settings: unpack as (enabled, dtype, use_scaler, note)."""

    enabled: bool
    dtype: Any  # torch.float16 / torch.bfloat16 / None
    use_scaler: bool
    note: str  # a sentence for the learner ("" when there is nothing to say)

    @property
    def dtype_name(self) -> str:
        """'float16', 'bfloat16' or 'off'."""
        return str(self.dtype).removeprefix("torch.") if self.enabled else "off"

    def autocast(self, device_type: str) -> Any:
        """The context manager for the forward pass (a no-op when disabled)."""
        if not self.enabled:
            return nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.dtype)


OFF = Amp(False, None, False, "")


def _mps_autocast_ok(dtype: Any) -> bool:
    try:
        with torch.autocast(device_type="mps", dtype=dtype):
            pass
        return True
    except Exception:
        return False


def autocast_settings(amp: str, dev: Device) -> Amp:
    """Map the `amp` parameter (off/auto/fp16/bf16) to what this device can do.

    auto: float16 + GradScaler on cuda, float16 on mps where supported, bfloat16 on cpu.
    float16 always gets a GradScaler (its range is too narrow for small gradients); bfloat16
    has float32's exponent range and needs none.
    """
    if amp == "off":
        return OFF
    kind = dev.kind
    if amp == "auto":
        amp = "bf16" if kind == "cpu" else "fp16"
    if amp not in ("fp16", "bf16"):
        raise ValueError(f"amp must be off, auto, fp16 or bf16, not {amp!r}")
    dtype = torch.float16 if amp == "fp16" else torch.bfloat16
    name = "float16" if amp == "fp16" else "bfloat16"
    scaler = dtype == torch.float16

    if kind == "cuda":
        if dtype == torch.bfloat16 and not dev.bf16:
            cap = f"sm_{dev.capability[0]}{dev.capability[1]}" if dev.capability else "this GPU"
            raise ValueError(f"bfloat16 autocast needs an Ampere (sm_80) or newer GPU; {dev.name} is {cap}: use amp=fp16")
        note = f"autocast to {name} on {dev.name}" + (" with GradScaler (loss scaling)" if scaler else "")
        if not dev.tensor_cores:
            note += "; this GPU has no tensor cores, so expect little or no speedup"
        return Amp(True, dtype, scaler, note + ".")
    if kind == "mps":
        if not _mps_autocast_ok(dtype):
            return Amp(False, None, False, f"autocast to {name} is not supported by this PyTorch/macOS on MPS; running in float32.")
        return Amp(True, dtype, scaler, f"autocast to {name} on the Apple GPU (MPS)" + (" with GradScaler." if scaler else "."))
    # cpu
    if dtype == torch.bfloat16:
        note = "autocast to bfloat16 on the CPU (CPU autocast supports bfloat16; no GradScaler needed)"
        if not dev.bf16:
            note += (
                f". {dev.name} has no native bfloat16 instructions (AVX512-BF16/AMX), so bfloat16 "
                "matmuls are emulated and will be slower than float32"
            )
        return Amp(True, dtype, False, note + ".")
    return Amp(
        True, dtype, True,
        "autocast to float16 on the CPU: supported but emulated on most CPUs, so expect it to be slower than float32.",
    )


def make_scaler(amp: Amp, dev: Device) -> Any:
    """A torch.amp.GradScaler for `dev`, enabled only when float16 needs loss scaling."""
    return torch.amp.GradScaler(dev.kind, enabled=amp.enabled and amp.use_scaler)


@dataclass(frozen=True)
class Progress:
    """A report from `train_epoch` (every `report_every` steps and once at the end)."""

    steps: int  # optimiser steps taken in this call
    samples: int  # samples seen in this call
    loss: float  # mean loss over the steps since the previous report
    epoch_loss: float  # mean loss over all steps so far in this call
    done: bool  # True for the last report (the pass ended or max_steps was reached)


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: str,
    *,
    amp: Amp = OFF,
    scaler: Any = None,
    loss_fn: nn.Module | None = None,
    report_every: int = 20,
    max_steps: int | None = None,
    max_interval_s: float = 0.25,
) -> Iterator[Progress]:
    """The notebook's training loop over `batches`, yielding a Progress every `report_every` steps.

    Also reports when `max_interval_s` passed since the last report, so a consumer that
    stops iterating (escape, quit) is heard quickly even on a slow or busy machine.

    Batches are moved with `.to(device)` inside the loop (a no-op for resident tensors; a
    host-to-device copy for a DataLoader's CPU batches). The last report has done=True.
    """
    loss_fn = loss_fn or nn.CrossEntropyLoss()
    device_type = torch.device(device).type
    model.train()
    run_sum = torch.zeros((), device=device)  # loss since the last report, kept on the device
    total_sum = 0.0
    since = steps = samples = 0
    it = iter(batches)
    last_report = time.perf_counter()
    nxt = next(it, None)  # one batch of look-ahead, so the last report is known to be the last
    if nxt is None or max_steps == 0:
        yield Progress(0, 0, float("nan"), float("nan"), True)
        return
    while nxt is not None:
        xb, yb = nxt
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with amp.autocast(device_type):
            loss = loss_fn(model(xb), yb)
        if scaler is not None and scaler.is_enabled():
            scaler.scale(loss).backward()
            scaler.step(optimizer)  # skips the step if any gradient is inf/NaN
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        run_sum += loss.detach().float()
        steps += 1
        since += 1
        samples += xb.shape[0]
        done = max_steps is not None and steps >= max_steps
        nxt = None if done else next(it, None)
        if nxt is None or steps % report_every == 0 or time.perf_counter() - last_report >= max_interval_s:
            last_report = time.perf_counter()
            value = run_sum.item() / since  # the one host sync per report
            total_sum += value * since
            run_sum.zero_()
            since = 0
            yield Progress(steps, samples, value, total_sum / steps, nxt is None)


@torch.no_grad()
def evaluate_batches(
    model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], device: str, *, amp: Amp = OFF
) -> float:
    """Accuracy (0..1) over `batches`; counts stay on the device until the end."""
    model.eval()
    device_type = torch.device(device).type
    correct = torch.zeros((), dtype=torch.long, device=device)
    total = 0
    for xb, yb in batches:
        xb = xb.to(device, non_blocking=True)
        yb = yb.to(device, non_blocking=True)
        with amp.autocast(device_type):
            logits = model(xb)
        correct += (logits.argmax(dim=1) == yb).sum()
        total += yb.shape[0]
    model.train()
    return correct.item() / total if total else float("nan")


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000, *, amp: Amp = OFF) -> float:
    """Test accuracy (0..1) of resident tensors x, y (on the model's device)."""
    from tutor.data import batches

    return evaluate_batches(model, batches(x, y, max(batch_size, 1), shuffle=False), str(x.device), amp=amp)


def train_steps(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Any,
    steps: int,
    batch_size: int,
    device: str,
    *,
    seed: int = 0,
) -> float:
    """Train for exactly `steps` optimiser steps on `data` (a MnistData on `device`),
    reshuffling each pass; returns the last step's loss as a float."""
    from tutor.data import batches

    gen = torch.Generator().manual_seed(seed)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    done = 0
    loss = None
    while done < steps:
        for xb, yb in batches(data.train_x, data.train_y, batch_size, generator=gen):
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            done += 1
            if done >= steps:
                break
    return float(loss.item()) if loss is not None else float("nan")


def report_interval(steps: int, target: int = 75) -> int:
    """Steps between loss reports so that `steps` steps give about `target` reports."""
    return max(1, steps // target)


class RunClock:
    """Device-synchronised training seconds that leave out the time a consumer holds a yielded event.

    Experiments are generators: between `yield` and the next `next()` the UI or a test runs,
    and that time is not training. Wrap each yield in `with clock.paused():`.
    """

    def __init__(self, device: str) -> None:
        from tutor.timing import synchronize

        self._sync = synchronize
        self.device = device
        self._excluded = 0.0
        self._sync(device)
        self._start = time.perf_counter()

    def elapsed(self) -> float:
        self._sync(self.device)
        return time.perf_counter() - self._start - self._excluded

    @contextmanager
    def paused(self) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self._excluded += time.perf_counter() - t
