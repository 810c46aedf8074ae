"""`amp-compare`: float32 vs mixed precision (torch.autocast) on the same data and seed.

Both runs start from the same initial weights and see the batches in the same order. Each
mode first runs a few untimed warm-up steps on a throwaway copy of the model (so neither pays
the other's one-time costs: autocast's kernel selection, cuBLAS handles), then trains
`epochs` epochs; seconds per epoch are device-synchronised medians, evaluation excluded.
Peak memory (cuda only) is measured per mode with torch.cuda.reset_peak_memory_stats and
reported as the peak *above* what was allocated when the mode's timed epochs started: the
resident train and test tensors, the model's weights and the device copy of the initial
weights. What is left is what training adds: gradients, optimizer state, activations and
autocast's cached low-precision weights.

The speedup graded is measured apart from the two trainings, whose epochs ran one mode after the
other and so cannot be paired (and are few: 3 epochs hold their median with 75% at best): after
them, a fresh copy of the starting model per mode trains on one resident batch, the two modes
taking turns, TURNS rounds of about ROUND_S each (measurement.timing.seconds_in_turns); speedup
is the median of the rounds' float32 / autocast ratios, speedup_low/high its interval (10 rounds:
98%). The table's s/epoch are the trainings' own.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier, count_parameters
from tutor.experiments.specs.amp_compare import AmpCompareParams
from tutor.experiments.training import (
    OFF,
    Amp,
    autocast_settings,
    full_float32_matmuls,
    make_scaler,
    seed_everything,
    shell_try,
    train_epoch,
    train_timed,
)
from tutor.measurement.intervals import bounds, in_words, median_interval
from tutor.measurement.timing import paired_ratios, seconds_in_turns, synchronize

TURNS = 10  # rounds of steps, the modes taking turns: 10 ratios hold their median with 98%
ROUND_S = 0.05  # one mode's round lasts about this long: a slow moment falls on both modes


def _peak_supported(dev: Device) -> bool:
    return dev.kind == "cuda"


def _train_mode(label: str, amp: Amp, init_state: dict, d, p: AmpCompareParams, device: str) -> Iterator[Event | dict]:
    """Train one mode from `init_state`; yields Step/Epoch events, then train_timed's result dict."""
    seed_everything(p.seed)
    model = MNISTClassifier().to(device)
    model.load_state_dict(init_state)  # identical starting weights for both modes
    yield from train_timed(
        model,
        d.train_x,
        d.train_y,
        d.test_x,
        d.test_y,
        device,
        epochs=p.epochs,
        batch_size=p.batch_size,
        lr=p.lr,
        seed=p.seed,
        amp=amp,
        label=label,
    )


def _steps(
    amp: Amp, init_state: dict, batch: tuple, p: AmpCompareParams, dev: Device, calls: int
) -> Callable[[], None]:
    """`calls` training steps of a fresh copy of the starting model on one resident batch, as the
    trainings step (train_epoch: autocast, GradScaler), with one host sync at the end."""
    model = MNISTClassifier().to(dev.torch_device)
    model.load_state_dict(init_state)
    optimizer = torch.optim.Adam(model.parameters(), lr=p.lr)
    scaler = make_scaler(amp, dev)

    def steps() -> None:
        for _ in train_epoch(
            model,
            optimizer,
            itertools.repeat(batch, calls),
            dev.torch_device,
            amp=amp,
            scaler=scaler,
            report_every=calls,
            max_steps=calls,
            max_interval_s=float("inf"),
        ):
            pass

    return steps


def _paired_speedup(amp: Amp, init_state: dict, d, p: AmpCompareParams, dev: Device):
    """The modes' steps in turns (see the module's docstring): the ratios' interval, and how."""
    batch = (d.train_x[: p.batch_size], d.train_y[: p.batch_size])
    with full_float32_matmuls():  # float32 is true float32, as in its training
        probe = _steps(OFF, init_state, batch, p, dev, 1)
        probe()  # a first step pays the one-time costs; the second says how long one takes
        synchronize(dev.torch_device)
        t0 = time.perf_counter()
        probe()
        synchronize(dev.torch_device)
        calls = max(1, round(ROUND_S / max(time.perf_counter() - t0, 1e-6)))
        ways = {
            "fp32": _steps(OFF, init_state, batch, p, dev, calls),
            "amp": _steps(amp, init_state, batch, p, dev, calls),
        }
        times = seconds_in_turns(ways, dev.torch_device, repeats=TURNS, calls=1, warmup=2)
    return median_interval(paired_ratios(times["fp32"], times["amp"])), calls


def measure(p: AmpCompareParams, dev: Device) -> Iterator[Event]:
    from tutor.experiments import data as mnist

    device = dev.torch_device
    amp = autocast_settings(p.amp, dev)
    d = mnist.load(device, train_samples=p.train_samples, test_samples=p.test_samples)

    yield Started(
        "amp-compare",
        device,
        dev.name,
        d.description,
        detail=f"float32 vs autocast {amp.dtype_name}; batch {p.batch_size}, {p.epochs} epoch(s)",
    )
    yield Note(f"Device: {dev.describe()}.")
    if d.fallback_reason:
        yield Note(f"Data: {d.description}.", "warning")
    if not amp.enabled:
        yield Note(amp.note or "Mixed precision is not available on this device.", "warning")
    else:
        unscaled_fp16 = amp.dtype == torch.float16 and not amp.use_scaler
        yield Note(amp.note, "warning" if amp.emulated or unscaled_fp16 else "info")
    if not _peak_supported(dev):
        yield Note(
            f"Peak memory is reported only on CUDA (torch.cuda.max_memory_allocated); on {dev.kind} "
            "PyTorch keeps no per-run peak, so the memory columns show None."
        )
    else:
        data_mb = sum(t.numel() * t.element_size() for t in (d.train_x, d.train_y, d.test_x, d.test_y)) / 1e6
        weights_mb = count_parameters(MNISTClassifier()) * 4 / 1e6
        yield Note(
            "Peak memory is the peak above what was already allocated when each mode's timed epochs "
            f"started: the train and test tensors ({data_mb:.1f} MB), the model's float32 weights and a "
            f"copy of the initial weights ({weights_mb:.1f} MB each). What is left is what training adds: "
            "gradients, Adam's state, activations and autocast's cached low-precision weight copies."
        )

    seed_everything(p.seed)
    init_state = copy.deepcopy(MNISTClassifier().state_dict())

    results = {}
    precision = torch.get_float32_matmul_precision()  # the learner's, for the note below
    for label, mode in (("fp32", OFF), ("amp", amp)):
        if label == "amp" and not amp.enabled:
            break
        yield Note(f"Training in {'float32' if label == 'fp32' else 'autocast ' + amp.dtype_name} ...")
        # The baseline in true float32: where TF32 is allowed (NVIDIA's containers allow it), "float32"
        # would run TF32 matmuls on Ampere and newer, and the speedup would be measured against TF32.
        with full_float32_matmuls() if label == "fp32" else nullcontext(False) as tf32_was_on:
            if tf32_was_on:
                yield Note(
                    f"Float32 matmuls were allowed a lower precision here (precision '{precision}'; TF32 "
                    "on NVIDIA GPUs from Ampere on, as NVIDIA's containers set): the float32 run sets it "
                    "to 'highest' (restored after), so the speedup is measured against true float32."
                )
            for item in _train_mode(label, mode, {k: v.to(device) for k, v in init_state.items()}, d, p, device):
                if isinstance(item, dict):
                    results[label] = item
                else:
                    yield item

    fp32 = results["fp32"]
    mixed = results.get("amp")
    interval = None
    if mixed:
        yield Note(
            f"Timing the two precisions in turns for the speedup: {TURNS} rounds of training steps on one "
            f"batch of {p.batch_size} each ..."
        )
        interval, calls = _paired_speedup(amp, init_state, d, p, dev)
    speedup = interval.median if interval is not None else None
    speedup_low, speedup_high = bounds(interval)

    def mb(v):
        return "n/a" if v is None else f"{v:.1f}"

    rows = [["float32", f"{fp32['seconds']:.3f}", f"{fp32['accuracy']:.2%}", mb(fp32["peak_mb"]), "1.00x"]]
    if mixed:
        rows.append(
            [
                f"autocast {amp.dtype_name}" + (" + GradScaler" if amp.use_scaler else ""),
                f"{mixed['seconds']:.3f}",
                f"{mixed['accuracy']:.2%}",
                mb(mixed["peak_mb"]),
                f"{speedup:.2f}x" if speedup is not None else "n/a",
            ]
        )
    yield Table(
        f"float32 vs mixed precision on {device} (median s/epoch; the speedup from steps in turns)",
        ["precision", "s/epoch", "test accuracy", "peak MB", "speedup"],
        rows,
    )

    if mixed and speedup is not None:
        if speedup < 1:
            reasons = [
                f"Mixed precision was {1 / speedup:.2f}x slower here, and that is a real result, not a bug.",
                "This model's matmuls are small (at most 784x256 weights), so each step is dominated by "
                "fixed costs, and autocast adds work: casting weights and activations to the lower precision "
                "each step.",
            ]
            if dev.kind == "cpu":
                if amp.dtype == torch.bfloat16 and not dev.bf16:
                    reasons.append(
                        f"{dev.name} has no native bfloat16 arithmetic, so bfloat16 matmuls are emulated "
                        "(converted back and forth around float32 math): slower, never faster."
                    )
                elif amp.dtype == torch.float16:
                    reasons.append("CPUs have no fast float16 matmul path, so float16 is emulated.")
                else:
                    reasons.append("Even with native bfloat16, matmuls this small gain little on a CPU.")
            elif not dev.tensor_cores:
                reasons.append("This GPU has no tensor cores, which is where float16 gets its speed.")
            else:
                reasons.append(
                    "Tensor cores pay off on large matmuls (big layers, big batches); try a larger batch_size"
                    + shell_try("amp-compare", p, batch_size=p.batch_size * 4)
                    + "."
                )
            yield Note(" ".join(reasons), "result")
        elif amp.emulated:
            yield Note(
                f"Mixed precision measured {speedup:.2f}x faster, which this CPU's emulated {amp.dtype_name} "
                "does not explain: the difference is most likely noise (other programs sharing the CPU). "
                "Run more train_samples or epochs for a steadier comparison.",
                "warning",
            )
        else:
            yield Note(
                f"Mixed precision was {speedup:.2f}x faster: the matmuls ran in {amp.dtype_name}"
                + (" on tensor cores" if dev.tensor_cores else "")
                + ", moving half the bytes of float32, while the weights and the optimizer step stayed in float32.",
                "result",
            )
        if speedup_low is not None and interval is not None:  # (bounds() is None, None without an interval)
            yield Note(
                f"The noise: the speedup is {in_words(interval, lambda v: f'{v:.2f}x', 'rounds')} of {calls} "
                "training steps per precision, the two taking turns so that a slow moment of the machine falls on "
                f"both. The trainings' own epochs ({fp32['seconds']:.3f} s and {mixed['seconds']:.3f} s) ran one "
                "precision after the other, so their ratio is not graded."
            )
        diff = (mixed["accuracy"] - fp32["accuracy"]) * 100
        yield Note(
            f"Accuracy: float32 {fp32['accuracy']:.2%}, mixed {mixed['accuracy']:.2%} ({diff:+.2f} points): "
            "autocast keeps float32 master weights, so training quality matches float32 closely.",
            "result",
        )
        if fp32["peak_mb"] is not None and mixed["peak_mb"] is not None:
            yield Note(
                f"Peak training memory above the baseline ({fp32['base_mb']:.1f} MB allocated before training): "
                f"float32 {fp32['peak_mb']:.1f} MB, mixed {mixed['peak_mb']:.1f} MB. "
                "Mixed precision halves activation memory, but this model's activations are small and autocast "
                "also caches low-precision copies of the weights, so the difference can go either way here.",
                "result",
            )
        if mixed["scale"] is not None:
            yield Note(f"GradScaler's loss scale at the end: {mixed['scale']:g}.")

    yield Finished(
        {
            "fp32_seconds": fp32["seconds"],
            "amp_seconds": mixed["seconds"] if mixed else None,
            "speedup": speedup,
            "speedup_low": speedup_low,
            "speedup_high": speedup_high,
            "fp32_accuracy": fp32["accuracy"],
            "amp_accuracy": mixed["accuracy"] if mixed else None,
            "fp32_peak_mb": fp32["peak_mb"],
            "amp_peak_mb": mixed["peak_mb"] if mixed else None,
            "amp_dtype": amp.dtype_name if amp.enabled else "off",
            "grad_scaler": bool(amp.enabled and amp.use_scaler),
            "device": device,
        }
    )
