"""Plain training helpers shared by the experiments, in the notebook's style.

    seed_everything(seed)                       python, numpy (if present) and torch RNGs
    autocast_settings(amp, dev) -> Amp          what torch.autocast / GradScaler to use, and why
    make_scaler(amp, dev)                       torch.amp.GradScaler, enabled only where Amp says so
    to_device(t, device)                        t.to(device), non_blocking only into CUDA
    train_epoch(model, opt, batches, device, amp=..., scaler=..., report_every=..., max_steps=...)
                                                one pass over `batches`; a generator of Progress
                                                reports (one loss.item() per report, not per step)
    evaluate(model, x, y, batch_size, amp=...)  test accuracy (0..1) of resident tensors
    evaluate_batches(model, batches, device)    same for any iterable of (x, y), e.g. a DataLoader
    train_steps(model, opt, data, steps, batch_size, device) -> mean loss of the last pass
                                                "train briefly" for experiments that need a model
    warm_up(model, batches, device, amp=..., lr=...)
                                                WARMUP_STEPS untimed steps on a throwaway copy, so
                                                timed work starts warm; the caller's model is untouched
    report_interval(steps)                      steps between loss reports (~75 per pass)
    checkpoint_target(path, param) -> Path      checks before training that `path` can be written
    save_atomically(obj, target)                torch.save via `<target>.tmp`, removed on failure
    train_timed(model, x, y, test_x, test_y, device, ...)
                                                warm up, then train epochs of resident (x, y) with
                                                Adam, timed and evaluated per epoch: yields Step and
                                                Epoch events, then a dict of results (amp-compare,
                                                amp-benchmark)
    seconds_per_call(fn, device, calls, warmup) mean seconds of fn() after `warmup` untimed calls,
                                                the device synchronised before and after the clock
    float32_matmul_dtype(dev)                   'tfloat32' where TF32 is allowed and the GPU has it
    saved_for_backward(model)                   a context that adds up the bytes autograd saves for
                                                backward (the activations), parameters excluded
    seconds_per_sample(model, x, y, device, ...) training seconds per sample, measured on a few warm
                                                batches of a throwaway copy
    fit_samples(asked, per_sample_s, budget_s)  how many samples a CPU run can time within its budget
                                                (a Fit that says what was cut and projects the rest)

Timing uses tutor.measurement.timing.Stopwatch (synchronised, with `with sw.paused(): yield event`).

Why losses are accumulated on the device: `loss.item()` copies to the host and waits for
the GPU, so calling it every step serialises the CPU and GPU. The loop adds `loss.detach()`
into a device tensor and reads it only when it reports.
"""

from __future__ import annotations

import copy
import functools
import itertools
import os
import random
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from tutor.experiments.devices import Device
from tutor.measurement.timing import synchronize
from tutor.measurement.warmup import WarmUp, steady

WARMUP_STEPS = 5  # untimed steps before a timed run at least: device context, cuBLAS handles, kernels, allocator
WARMUP_MOST_STEPS = 30  # and more while their times still fall (warm_up), up to this many
WARMUP_BUDGET_S = 2.0  # or this long
CPU_BUDGET_S = 30.0  # timed CPU work one run step may do, so the step ends within a minute (see Fit)


def cpu_budget_s() -> float:
    """Seconds of timed CPU work a run step plans for: CPU_BUDGET_S, or GPUTUTOR_CPU_BUDGET_S (tests
    set a tiny one to see the cut without a slow machine)."""
    try:
        value = float(os.environ.get("GPUTUTOR_CPU_BUDGET_S", ""))
    except ValueError:
        return CPU_BUDGET_S
    return value if value > 0 and value == value else CPU_BUDGET_S


def shell_try(experiment: str, params: Any, **changes: Any) -> str:
    """A suggestion the learner can act on: a lesson's run step offers only the settings its
    lesson lists, so "try a larger width" names the command that runs it ("" when the values
    are not allowed)."""
    try:
        type(params).model_validate({**params.model_dump(), **changes})
    except ValueError:
        return ""
    sets = " ".join(f"--set {name}={value}" for name, value in changes.items())
    return f" (from a shell: gpututor run {experiment} {sets})"


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
    """Mixed-precision settings: enabled, dtype, use_scaler, note, and the Device they are for."""

    enabled: bool
    dtype: Any  # torch.float16 / torch.bfloat16 / None
    use_scaler: bool
    note: str  # a sentence for the learner ("" when there is nothing to say)
    dev: Device | None = None

    @property
    def dtype_name(self) -> str:
        """'float16', 'bfloat16' or 'off'."""
        return str(self.dtype).removeprefix("torch.") if self.enabled else "off"

    @property
    def emulated(self) -> bool:
        """Autocast runs on a CPU without a fast path for its dtype (float16 on any CPU,
        bfloat16 without AVX512-BF16/AMX or ARM's BF16): expect it to be slower than float32."""
        return (
            self.enabled
            and self.dev is not None
            and self.dev.kind == "cpu"
            and (self.dtype == torch.float16 or not self.dev.bf16)
        )

    def autocast(self, device_type: str) -> Any:
        """The context manager for the forward pass (a no-op when disabled)."""
        if not self.enabled:
            return nullcontext()
        return torch.autocast(device_type=device_type, dtype=self.dtype)


OFF = Amp(False, None, False, "")


@functools.cache
def _mps_autocast_ok(dtype: Any) -> bool:
    """Whether autocast to `dtype` really switches on for MPS (where macOS lacks the dtype,
    torch warns and silently disables autocast rather than raising)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast(device_type="mps", dtype=dtype):
                return bool(torch.is_autocast_enabled("mps"))
    except Exception:  # noqa: BLE001 - a probe: any failure means "no"
        return False


@functools.cache
def _scaler_step_error(device: str) -> str | None:
    """None if one real GradScaler step (scale, backward, step, update) works on `device`,
    else the error. On MPS, torch 2.5-2.7's GradScaler.unscale_ converts the scale to
    float64, which MPS lacks (pytorch issue 142397)."""
    try:
        w = nn.Parameter(torch.ones(1, device=device))  # float32 master weight, as under autocast
        opt = torch.optim.SGD([w], lr=0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scaler = torch.amp.GradScaler(torch.device(device).type)
        if not scaler.is_enabled():  # some versions disable it for a device with only a warning
            return "it disabled itself for this device"
        loss = (w.half() * w.half()).float().sum()  # a float16 product, a float32 loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        synchronize(device)
        return None
    except Exception as exc:  # noqa: BLE001 - whatever this backend raises, the answer is "not usable"
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def autocast_settings(amp: str, dev: Device) -> Amp:
    """Map the `amp` parameter (off/auto/fp16/bf16) to what this device can do.

    auto: float16 + GradScaler on cuda, float16 on mps where supported, bfloat16 on cpu.
    float16 gets a GradScaler (its range is too narrow for small gradients); bfloat16 has
    float32's exponent range and needs none. On MPS, where GradScaler fails in some torch
    versions, auto falls back to bfloat16 and fp16 runs without a scaler; the note says why.
    """
    if amp == "off":
        return OFF
    requested = amp
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
            raise ValueError(
                f"bfloat16 autocast needs an Ampere (sm_80) or newer GPU; {dev.name} is {cap}: use amp=fp16"
            )
        note = f"autocast to {name} on {dev.name}" + (" with GradScaler (loss scaling)" if scaler else "")
        if not dev.tensor_cores:
            note += "; this GPU has no tensor cores, so expect little or no speedup"
        return Amp(True, dtype, scaler, note + ".", dev)
    if kind == "mps":
        if not _mps_autocast_ok(dtype):
            return Amp(
                False,
                None,
                False,
                f"autocast to {name} is not supported by this PyTorch/macOS on MPS; running in float32.",
                dev,
            )
        if not scaler:
            return Amp(True, dtype, False, f"autocast to {name} on the Apple GPU (MPS).", dev)
        error = _scaler_step_error(dev.torch_device)
        if error is None:
            return Amp(True, dtype, True, "autocast to float16 on the Apple GPU (MPS) with GradScaler.", dev)
        why = f"GradScaler does not work on MPS in PyTorch {torch.__version__} (a one-step test: {error})"
        if requested == "auto" and _mps_autocast_ok(torch.bfloat16):
            return Amp(
                True,
                torch.bfloat16,
                False,
                why + "; using bfloat16 autocast instead, which has float32's range and needs no loss scaling.",
                dev,
            )
        return Amp(
            True,
            torch.float16,
            False,
            why + "; running float16 autocast without loss scaling, so very small gradients can underflow to zero.",
            dev,
        )
    # cpu
    if dtype == torch.bfloat16:
        note = "autocast to bfloat16 on the CPU (CPU autocast supports bfloat16; no GradScaler needed)"
        if not dev.bf16:
            note += (
                f". {dev.name} has no native bfloat16 instructions (AVX512-BF16/AMX on x86, BF16 on ARM), so bfloat16 "
                "matmuls are emulated and will be slower than float32"
            )
        return Amp(True, dtype, False, note + ".", dev)
    return Amp(
        True,
        dtype,
        True,
        "autocast to float16 on the CPU: supported but emulated on most CPUs, so expect it to be slower than float32.",
        dev,
    )


def make_scaler(amp: Amp, dev: Device | str) -> Any:
    """A torch.amp.GradScaler for `dev` (a Device or a torch device string), enabled only
    when float16 needs loss scaling."""
    kind = dev.kind if isinstance(dev, Device) else torch.device(dev).type
    return torch.amp.GradScaler(kind, enabled=amp.enabled and amp.use_scaler)


def to_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """`t.to(device)`, asynchronous only into CUDA, the one target where a copy from ordinary
    (pageable) host memory is documented safe; on MPS a non_blocking copy can read its source
    after it was freed and silently corrupt the batch (pytorch issues 139550, 189690)."""
    return t.to(device, non_blocking=torch.device(device).type == "cuda")


def grad_of(param: torch.Tensor) -> torch.Tensor:
    """`param.grad`, read after a backward() that reached `param` (the models here use every
    parameter in their forward, so backward() fills each one's gradient)."""
    grad = param.grad
    assert grad is not None, "backward() did not reach this parameter"
    return grad


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
        xb, yb = to_device(xb, device), to_device(yb, device)
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
        xb, yb = to_device(xb, device), to_device(yb, device)
        with amp.autocast(device_type):
            logits = model(xb)
        correct += (logits.argmax(dim=1) == yb).sum()
        total += yb.shape[0]
    model.train()
    return correct.item() / total if total else float("nan")


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000, *, amp: Amp = OFF) -> float:
    """Test accuracy (0..1) of resident tensors x, y (on the model's device)."""
    from tutor.experiments.data import batches

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
    """Train for exactly `steps` optimiser steps on `data` (a MnistData on `device`) with
    `train_epoch`, reshuffling each pass; returns the mean loss of the last pass's steps."""
    from tutor.experiments.data import batches

    gen = torch.Generator().manual_seed(seed)
    done = 0
    loss = float("nan")
    while done < steps:
        last = None
        for last in train_epoch(  # noqa: B007 - runs the steps, keeps the last report
            model,
            optimizer,
            batches(data.train_x, data.train_y, batch_size, generator=gen),
            device,
            report_every=steps,
            max_steps=steps - done,
        ):
            pass
        if last is None or last.steps == 0:  # no data: nothing more to train on
            break
        done += last.steps
        loss = last.epoch_loss
    return loss


def warm_up(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: str,
    *,
    amp: Amp = OFF,
    lr: float = 1e-3,
    steps: int = WARMUP_STEPS,
    most: int = WARMUP_MOST_STEPS,
    budget_s: float = WARMUP_BUDGET_S,
) -> WarmUp:
    """Untimed Adam steps (with `amp` and its GradScaler) on a throwaway deep copy of `model`, each
    clocked (synchronised) for the rule, until their times stop falling (measurement.warmup.steady),
    `steps` at least and at most `most` or `budget_s` seconds, so that a timed run after it does
    not pay one-time costs: the device context, cuBLAS handles, kernel selection, the caching
    allocator. Returns what they took (the first step's cost is what a GPU's start-up costs).

    `model` and its optimizer are untouched, and the RNG states (CPU, and the GPU's on cuda)
    are restored, so a seeded run trains exactly as it would without the warm-up. Pass
    batches that do not draw from the training run's generator (e.g. shuffle=False).
    """
    target = torch.device(device)
    gpus = [target.index or 0] if target.type == "cuda" else []
    times: list[float] = []
    with torch.random.fork_rng(devices=gpus):
        warm = copy.deepcopy(model)
        opt = torch.optim.Adam(warm.parameters(), lr=lr)
        scaler = make_scaler(amp, device)
        source = iter(batches)
        started = time.perf_counter()
        while True:
            synchronize(device)
            t0 = time.perf_counter()
            last = None
            for last in train_epoch(  # noqa: B007 - runs the steps, keeps the last report
                warm,
                opt,
                itertools.islice(source, 1),
                device,
                amp=amp,
                scaler=scaler,
                report_every=1,
                max_steps=1,
            ):
                pass
            synchronize(device)
            if last is None or last.steps == 0:
                break  # the batches ran out: as warm as they can make it
            times.append(time.perf_counter() - t0)
            if len(times) >= steps and (
                steady(times) or len(times) >= most or time.perf_counter() - started >= budget_s
            ):
                break
    return WarmUp(tuple(times), steady(times))


def report_interval(steps: int, target: int = 75) -> int:
    """Steps between loss reports so that `steps` steps give about `target` reports."""
    return max(1, steps // target)


def checkpoint_target(path: str, param: str = "checkpoint") -> Path:
    """Check, before any training, that a checkpoint can be written to `path`; return it expanded.

    Missing parent folders are fine (saving creates them) as long as the nearest existing
    one accepts new files. Raises ValueError with a sentence naming `param` and the fix.
    """
    target = Path(path).expanduser()
    if target.is_dir() or path.endswith(("/", os.sep)):
        raise ValueError(
            f"{param}={path} is a folder, not a file: give a file path such as {param}={target / 'mnist.pt'}"
        )
    folder = target.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{param}={path} cannot be written: {folder} is a file, not a folder")
    try:  # root passes every permission check, so create a file there rather than ask os.access
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".gpututor-write-test-")
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise ValueError(
            f"{param}={path} cannot be written: the folder {folder} does not accept new files "
            f"({exc.strerror or exc}); choose a path in a folder you can write to"
        ) from exc
    return target


def save_atomically(obj: Any, target: Path) -> None:
    """torch.save `obj` to `<target>.tmp`, then rename it over `target`, so a crash never leaves
    a half-written checkpoint; the .tmp file is removed if anything fails."""
    tmp = target.with_name(target.name + ".tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.save(obj, tmp)
        os.replace(tmp, target)
    except BaseException:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


@contextmanager
def full_float32_matmuls() -> Iterator[bool]:
    """Float32 matmuls at full precision inside the block (TF32 off), restored after. Yields
    whether TF32 was on: NVIDIA's containers turn it on by default, and a comparison of float32
    results across devices would then measure TF32's 10-bit mantissa, not what it meant to."""
    try:
        precision = torch.get_float32_matmul_precision()
        cublas = torch.backends.cuda.matmul.allow_tf32
    except RuntimeError:  # the program set the newer per-backend API, and the legacy getters refuse
        with _ieee_float32() as was_on:
            yield was_on
        return
    cudnn = torch.backends.cudnn.allow_tf32
    was_on = precision != "highest" or cublas
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield was_on
    finally:
        torch.set_float32_matmul_precision(precision)
        torch.backends.cuda.matmul.allow_tf32 = cublas
        torch.backends.cudnn.allow_tf32 = cudnn


@contextmanager
def _ieee_float32() -> Iterator[bool]:
    """full_float32_matmuls through the per-backend API (`fp32_precision`: "ieee" or "tf32")."""
    backends = [
        b
        for b in (torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None))
        if b is not None and hasattr(b, "fp32_precision")
    ]
    before = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = "ieee"
    try:
        yield any(p == "tf32" for p in before)
    finally:
        for b, p in zip(backends, before):
            b.fp32_precision = p


def float32_matmul_dtype(dev: Device) -> str:
    """The dtype float32 matmuls run in on `dev` ('tfloat32' or 'float32'), for the matmul peak
    they are measured against: TF32 when the precision allows it ('high'/'medium', as NVIDIA's
    containers set) and the GPU has it, compute capability 8.0 (Ampere) or newer; a T4 or V100
    runs plain float32 whatever the setting."""
    tf32 = dev.kind == "cuda" and dev.capability is not None and dev.capability >= (8, 0)
    return "tfloat32" if tf32 and tf32_allowed() else "float32"


def tf32_allowed() -> bool:
    """Are float32 matmuls allowed TF32 in this process, whichever of torch's two APIs set it?"""
    try:
        return torch.get_float32_matmul_precision() != "highest"
    except RuntimeError:  # the newer per-backend API was used, and the legacy getter refuses
        return getattr(torch.backends.cuda.matmul, "fp32_precision", "ieee") == "tf32"


@contextmanager
def saved_for_backward(model: nn.Module) -> Iterator[dict[tuple[int, int], int]]:
    """Within it, the distinct tensors autograd saves for backward ((data_ptr, bytes) -> bytes),
    the model's parameters excluded: what a forward pass keeps alive until backward. Sum the
    values. A tensor counts its own bytes, not its storage's: a batch sliced from a resident
    data set is a view of the whole set, but keeps only its own rows in use."""
    params = {t.data_ptr() for t in model.parameters()}
    saved: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in params:
            nbytes = t.numel() * t.element_size()
            saved[(t.data_ptr(), nbytes)] = nbytes
        # Detached: a saved *output* (ReLU's) returned as itself refers back to its own grad_fn,
        # a cycle through C++ that gc cannot break, so a graph dropped without backward() leaked.
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved


def seconds_per_call(fn: Callable[[], Any], device: str, calls: int, warmup: int) -> float:
    """Mean seconds per `fn()` over `calls` timed calls, after `warmup` untimed ones; the device
    is synchronised before the clock starts and before it stops, so queued GPU work counts."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / calls


def train_timed(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    device: str,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    seed: int,
    amp: Amp = OFF,
    label: str = "",
) -> Iterator[Any]:
    """Train `model` (already on `device`, with the caller's starting weights) for `epochs` epochs
    of resident (x, y) with Adam: the one timed training loop of the precision comparisons.

    Warm-up steps run first on a throwaway copy (same precision), the batch order comes from a
    generator seeded with `seed` (the same in every case), seconds are device-synchronised and
    exclude evaluation. Yields Step and Epoch events (labelled), then one dict: seconds (median
    per epoch), accuracy (after the last epoch), loss (its mean), scale (GradScaler's, or None),
    and on CUDA peak_mb (max_memory_allocated above what was allocated when the timed epochs
    started) and base_mb (that baseline), else None.
    """
    from tutor.experiments.data import batches
    from tutor.experiments.events import Epoch, Step
    from tutor.measurement.timing import Stopwatch, median

    warm_up(model, batches(x, y, batch_size, shuffle=False), device, amp=amp, lr=lr)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = make_scaler(amp, device)
    gen = torch.Generator().manual_seed(seed)
    n = x.shape[0]
    steps_per_epoch = -(-n // batch_size)
    every = report_interval(steps_per_epoch)

    base = None
    if device.startswith("cuda"):  # data and weights are allocated by now: the baseline
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)

    clock = Stopwatch(device)
    epoch_seconds: list[float] = []
    steps = 0
    acc = float("nan")
    last = None
    for epoch in range(1, epochs + 1):
        ep_clock = Stopwatch(device)
        for last in train_epoch(
            model, opt, batches(x, y, batch_size, generator=gen), device, amp=amp, scaler=scaler, report_every=every
        ):
            if last.steps:
                seconds = clock.elapsed()
                event = Step(
                    step=steps + last.steps,
                    total=steps_per_epoch * epochs,
                    loss=last.loss,
                    seconds=seconds,
                    epoch=epoch,
                    label=label,
                    samples_per_s=((epoch - 1) * n + last.samples) / seconds if seconds > 0 else 0.0,
                )
                with clock.paused(), ep_clock.paused():
                    yield event
        secs = ep_clock.elapsed()
        epoch_seconds.append(secs)
        assert last is not None  # train_epoch always yields at least one Progress
        steps += last.steps
        with clock.paused():
            acc = evaluate(model, test_x, test_y, 1000, amp=amp)
            yield Epoch(
                epoch, epochs, last.epoch_loss, acc, secs, last.samples / secs if secs > 0 else 0.0, label=label
            )

    peak = None if base is None else (torch.cuda.max_memory_allocated(device) - base) / 1e6
    yield {
        "seconds": median(epoch_seconds),
        "accuracy": acc,
        "loss": last.epoch_loss if last else float("nan"),
        "scale": float(scaler.get_scale()) if scaler.is_enabled() else None,
        "peak_mb": peak,
        "base_mb": None if base is None else base / 1e6,
    }


@dataclass(frozen=True)
class Fit:
    """Work sized to a time budget: `used` of the `asked` samples are timed; per-epoch figures
    are projected to `asked` (seconds x asked / used), and `note()` says so on screen."""

    asked: int
    used: int
    per_sample_s: float  # a first estimate, from a few batches timed before the timed work
    budget_s: float | None = None  # the seconds it was sized to fit (one epoch of one case's run)

    @property
    def cut(self) -> bool:
        return self.used < self.asked

    @property
    def factor(self) -> float:
        return self.asked / self.used if self.used else 1.0

    def project(self, seconds: float) -> float:
        return seconds * self.factor

    def note(self, what: str, why: str = "") -> str:
        """'<what> timed on 4,096 of 60,000 images (0.93 ms per image measured here, so all of them
        would take 56 s, over the 30 s it may take); its epoch time is projected: measured seconds x
        60,000 / 4,096 (x 14.65).'"""
        whole = self.per_sample_s * self.asked
        over = f", over the {_seconds(self.budget_s)} it may take" if self.budget_s else ""
        return (
            f"{what} timed on {self.used:,} of {self.asked:,} images{why} ({self.per_sample_s * 1e3:.2f} ms per "
            f"image measured here, so all of them would take {_seconds(whole)}{over}); its epoch time is "
            f"projected: measured seconds x {self.asked:,} / {self.used:,} (x {self.factor:.2f}). "
            "Runs on a GPU are never cut."
        )

    def afterwards(self, what: str, projected_s: float) -> str | None:
        """Where the timed images' projection fits the budget the first estimate said it would not
        (a few batches on a busy machine read slow), a sentence that says so: the two numbers
        side by side would not add up otherwise. None when they agree."""
        if not self.cut or not self.budget_s or projected_s > self.budget_s:
            return None
        return (
            f"{what}: the {self.used:,} images timed project to {_seconds(projected_s)} for all {self.asked:,}, "
            f"within the {_seconds(self.budget_s)} it may take, though the first estimate (from a few batches) "
            f"said {_seconds(self.per_sample_s * self.asked)}. That estimate decided the cut before the timing; "
            "the projection, from every image timed, is the figure shown."
        )


def _seconds(s: float) -> str:
    """One decimal under 10 s, whole seconds above: '2.9 s', '56 s'."""
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


def fit_samples(
    asked: int, per_sample_s: float, budget_s: float, *, batch_size: int = 1, minimum_batches: int = 8
) -> Fit:
    """The samples (whole batches, at least `minimum_batches` of them, never more than `asked`)
    whose training fits in `budget_s` at the measured `per_sample_s`."""
    if per_sample_s <= 0 or per_sample_s != per_sample_s or asked <= 0:
        return Fit(asked, asked, max(per_sample_s, 0.0), budget_s)
    fits = int(budget_s / per_sample_s)
    if fits >= asked:
        return Fit(asked, asked, per_sample_s, budget_s)
    used = max(fits // batch_size * batch_size, minimum_batches * batch_size)
    return Fit(asked, min(asked, used), per_sample_s, budget_s)


def seconds_per_sample(
    make_model: Callable[[], nn.Module],
    x: torch.Tensor,
    y: torch.Tensor,
    device: str,
    *,
    batch_size: int,
    amp: Amp = OFF,
    batches: int = 3,
) -> float:
    """Training seconds per sample for a model from `make_model()` on `device`: one untimed batch,
    then `batches` timed ones (synchronised), on a throwaway model; the RNG state is restored."""
    from tutor.experiments.data import batches as batch_iter

    target = torch.device(device)
    gpus = [target.index or 0] if target.type == "cuda" else []
    with torch.random.fork_rng(devices=gpus):
        model = make_model().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = make_scaler(amp, device)
        n = min(x.shape[0], batch_size * (batches + 1))
        data = list(batch_iter(x[:n], y[:n], batch_size, shuffle=False))
        for _ in train_epoch(model, opt, data[:1], device, amp=amp, scaler=scaler, report_every=10**9):
            pass
        timed = data[1:] or data
        synchronize(device)
        start = time.perf_counter()
        for _ in train_epoch(model, opt, timed, device, amp=amp, scaler=scaler, report_every=10**9):
            pass
        synchronize(device)
        seconds = time.perf_counter() - start
    return seconds / max(sum(b[0].shape[0] for b in timed), 1)
