"""autocast-misuse: two real ways to get mixed precision wrong, each run and measured.

1. The wrong device_type. Autocast is switched on per device type: `torch.autocast("cuda")`
   changes CUDA ops only, `torch.autocast("cpu")` CPU ops only. A Linear whose input lives on
   this device is run under autocast with the *other* type and with this device's own type,
   and the dtype of its output is read: float32 means autocast did nothing for it. Any
   warning torch gives (a CPU-only machine has no CUDA autocast to switch on) is reported.

2. model.half() instead of autocast. The same MNISTClassifier, from the same initial weights
   and the same batches, is trained `steps` Adam steps twice: once with the model and inputs
   cast to float16 (every weight, gradient and Adam moment in float16, no float32 master
   copy), once with torch.autocast (float32 weights; low-precision matmuls; GradScaler where
   training.autocast_settings says so). Recorded: each step's loss (kept on the device, read
   at reports), the first step whose loss is NaN or inf, the mean loss of the last steps,
   the test accuracy and the synchronised time per step. After the half model's first step
   the share of its Adam second moments that are exactly 0 and of its weights that are no
   longer finite is read, which is how a NaN gets in: Adam divides by sqrt(v) + eps, and in
   float16 eps = 1e-8 is 0.

   Lost updates: one SGD update, u = -lr x gradient, computed on the float32 weights for the
   first batch, is added to the weights in float16. Where (w16 + u16) == w16 the update was
   rounded away: float16 has 10 mantissa bits, so the spacing of float16 numbers near |w| is
   2**(floor(log2 |w|) - 10), about |w| x 2**-10, and anything under half of that is lost.
"""

from __future__ import annotations

import copy
import itertools
import math
import time
import warnings
from collections.abc import Iterator

import torch
from torch import nn

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.autocast_misuse import AutocastMisuseParams
from tutor.experiments.training import (
    OFF,
    WARMUP_STEPS,
    Amp,
    autocast_settings,
    evaluate,
    grad_of,
    make_scaler,
    report_interval,
    seed_everything,
    warm_up,
)
from tutor.measurement.timing import Stopwatch, synchronize

LAST_STEPS = 20  # the final loss is the mean of this many last steps (fewer for short runs)
REPORT_S = 0.25  # report at least this often, so cancelling is heard


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def linear_output_dtype(device: str, device_type: str) -> tuple[str, bool, list[str]]:
    """(dtype of a Linear's output, autocast enabled for `device_type`, warnings) when a
    float32 Linear on `device` runs inside torch.autocast(device_type=device_type)."""
    lin = nn.Linear(16, 16).to(device)
    x = torch.randn(4, 16, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autocast(device_type=device_type):
                enabled = torch.is_autocast_enabled(device_type)
                out = lin(x)
        except RuntimeError as exc:  # a build that refuses the device type outright: autocast never started
            caught.append(warnings.WarningMessage(f"it raised {type(exc).__name__}: {exc}", RuntimeWarning, "", 0))
            enabled, out = False, lin(x)
    return _name(out.dtype), enabled, [str(w.message) for w in caught]


def _batches(d, batch_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Shuffled batches without end (a new order each pass), the same for the same seed."""
    from tutor.experiments.data import batches

    gen = torch.Generator().manual_seed(seed)
    while True:
        yield from batches(d.train_x, d.train_y, batch_size, generator=gen)


def lost_updates(model: nn.Module, xb: torch.Tensor, yb: torch.Tensor, lr: float) -> tuple[float, list[list[str]]]:
    """Share of one SGD update's (u = -lr x grad) nonzero elements that float16 weights round away, and a
    row per parameter: name, median |w|, float16 spacing there, median |update|, share lost."""
    model.zero_grad(set_to_none=True)
    nn.functional.cross_entropy(model(xb), yb).backward()
    rows: list[list[str]] = []
    lost = total = 0
    with torch.no_grad():
        for name, w in model.named_parameters():
            u = -lr * grad_of(w)  # the float32 update SGD adds: w + u
            moved = u != 0  # an exactly-zero gradient has nothing to lose
            w16, u16 = w.half(), u.half()
            gone = ((w16 + u16) == w16) & moved  # the add, done in float16
            n_lost, n = int(gone.sum()), int(moved.sum())
            lost += n_lost
            total += n
            w_med = w.abs().median().item()
            spacing = 2.0 ** (math.floor(math.log2(w_med)) - 10) if w_med > 0 else float("nan")
            rows.append(
                [
                    name,
                    f"{w_med:.2g}",
                    f"{spacing:.1e}",
                    f"{u.abs().median().item():.1e}",
                    f"{n_lost / n:.0%}" if n else "-",
                ]
            )
    model.zero_grad(set_to_none=True)
    return (lost / total if total else float("nan")), rows


def _train(
    label: str,
    model: nn.Module,
    p: AutocastMisuseParams,
    d,
    device: str,
    *,
    half: bool,
    amp: Amp,
) -> Iterator[Event | dict]:
    """Train `p.steps` Adam steps; yields Step events, then a result dict."""
    opt = torch.optim.Adam(model.parameters(), lr=p.lr)
    scaler = make_scaler(amp, device)
    device_type = torch.device(device).type
    losses = torch.zeros(p.steps, device=device)  # per-step losses stay on the device until a report
    probe = None
    every = report_interval(p.steps)
    clock = Stopwatch(device)
    last_report = time.perf_counter()
    since = 0
    data = _batches(d, p.batch_size, p.seed)  # the same batches for both runs
    model.train()
    for i in range(p.steps):
        xb, yb = next(data)
        if half:
            xb = xb.half()  # a float16 model needs float16 inputs, or the matmul fails on mixed dtypes
        opt.zero_grad(set_to_none=True)
        with amp.autocast(device_type):
            loss = nn.functional.cross_entropy(model(xb), yb)
        if scaler.is_enabled():
            scaler.scale(loss).backward()
            scaler.step(opt)  # skips the step if a gradient is inf/NaN
            scaler.update()
        else:
            loss.backward()
            opt.step()
        losses[i] = loss.detach().float()
        since += 1
        if i == 0 and half:  # how a NaN gets in: read the float16 Adam state after the first step
            with clock.paused(), torch.no_grad():
                params = list(model.parameters())
                v = [opt.state[w]["exp_avg_sq"] for w in params]
                probe = {
                    "v_zero": sum(int((t == 0).sum()) for t in v) / sum(t.numel() for t in v),
                    "w_bad": sum(int((~torch.isfinite(w)).sum()) for w in params) / sum(w.numel() for w in params),
                }
        if i + 1 == p.steps or since >= every or time.perf_counter() - last_report >= REPORT_S:
            seconds = clock.elapsed()
            mean = losses[i + 1 - since : i + 1].mean().item()  # the one host sync per report
            event = Step(
                i + 1, p.steps, mean, seconds, (i + 1) * p.batch_size / seconds if seconds > 0 else 0.0, label=label
            )
            since = 0
            with clock.paused():
                yield event
            last_report = time.perf_counter()
    seconds = clock.elapsed()
    values = losses.cpu()
    bad = (~torch.isfinite(values)).nonzero()
    last = max(1, min(LAST_STEPS, p.steps // 2))
    yield {
        "nan_step": int(bad[0]) + 1 if len(bad) else None,
        "first_loss": values[0].item(),
        "final_loss": values[-last:].mean().item(),
        "last": last,
        "seconds_per_step": seconds / p.steps,
        "probe": probe,
        "scale": float(scaler.get_scale()) if scaler.is_enabled() else None,
    }


def measure(p: AutocastMisuseParams, dev: Device) -> Iterator[Event]:
    from tutor.experiments import data as mnist

    device = dev.torch_device
    kind = dev.kind
    other = "cpu" if kind in ("cuda", "mps") else "cuda"
    d = mnist.load(device)
    yield Started(
        "autocast-misuse",
        device,
        dev.name,
        d.description,
        f"autocast device_type {other!r} vs {kind!r}; model.half() vs autocast, "
        f"{p.steps} Adam steps, batch {p.batch_size}, lr {p.lr:g}",
    )
    if d.fallback_reason:
        yield Note(f"Data: {d.description}.", "warning")

    # 1. The wrong device_type.
    seed_everything(p.seed)
    wrong, wrong_on, wrong_warn = linear_output_dtype(device, other)
    right, right_on, right_warn = linear_output_dtype(device, kind)
    autocast_dtype = _name(torch.get_autocast_dtype(kind))
    yield Table(
        f"A float32 Linear on {kind}, inside torch.autocast(device_type=...)",
        ["device_type", "autocast on for it", "output dtype"],
        [[repr(other), str(wrong_on), wrong], [repr(kind), str(right_on), right]],
    )
    if wrong_warn:
        yield Note(
            f'torch.autocast(device_type={other!r}) warned: "{wrong_warn[0]}" It switched itself off, '
            f"and the Linear ran in {wrong}.",
            "warning",
        )
    elif wrong_on:
        yield Note(
            f"torch.autocast(device_type={other!r}) was switched on, but only for {other} ops: the "
            f"Linear's input is on {kind}, so it ran in {wrong}."
        )
    if right_warn:
        yield Note(f'torch.autocast(device_type={kind!r}) warned: "{right_warn[0]}"', "warning")
    verdict = "did nothing here" if wrong == "float32" else f"still gave {wrong}"
    yield Note(
        f"Autocast is switched on per device type: the wrong device_type {verdict}, while this device's "
        f"own type gave {right} (its autocast dtype is {autocast_dtype}). Nothing fails, so the mistake "
        "goes unseen. Write torch.autocast(device_type=x.device.type) so it follows the data.",
        "result",
    )

    # 2. model.half() vs autocast, from the same weights and batches.
    amp = autocast_settings("auto", dev)
    seed_everything(p.seed)
    init = copy.deepcopy(MNISTClassifier().state_dict())
    reference = MNISTClassifier().to(device)
    reference.load_state_dict(init)
    xb, yb = next(_batches(d, p.batch_size, p.seed))  # both runs' first batch
    lost_share, lost_rows = lost_updates(reference, xb, yb, p.lr)

    half_model = MNISTClassifier().to(device)
    half_model.load_state_dict(init)
    half_model.half()
    with torch.no_grad():
        rounding = max(
            (a.float() - b).abs().max().item() for a, b in zip(half_model.parameters(), reference.parameters())
        )
    amp_label = f"autocast {amp.dtype_name}" if amp.enabled else "float32"
    yield Note(
        f"Both runs start from the same weights and see the same batches. model.half() already rounds "
        f"them: the largest change is {rounding:.1e}."
    )
    if not amp.enabled:
        yield Note(amp.note or "Autocast is not available on this device: the comparison run is float32.", "warning")
    elif amp.note:
        yield Note(amp.note, "warning" if amp.emulated else "info")

    # Untimed warm-up of both first: otherwise the first timed run, model.half(), pays the device's
    # one-time start-up (context, cuBLAS handles, kernel choice) in its seconds per step.
    warm = list(itertools.islice(_batches(d, p.batch_size, p.seed + 1), WARMUP_STEPS))
    warm_up(half_model, [(xb.half(), yb) for xb, yb in warm], device, lr=p.lr)
    warm_up(reference, warm, device, amp=amp, lr=p.lr)

    results = {}
    for label, model, half, mode in (("model.half()", half_model, True, OFF), (amp_label, reference, False, amp)):
        yield Note(f"Training {label} ...")
        for item in _train(label, model, p, d, device, half=half, amp=mode):
            if isinstance(item, dict):
                results[label] = item
            else:
                yield item
    synchronize(device)
    half_acc = evaluate(half_model, d.test_x.half(), d.test_y, 1000)
    amp_acc = evaluate(reference, d.test_x, d.test_y, 1000, amp=amp)
    h, a = results["model.half()"], results[amp_label]

    def loss(v: float) -> str:
        return f"{v:.3f}" if math.isfinite(v) else str(v)

    yield Table(
        f"{p.steps} Adam steps, lr {p.lr:g}, batch {p.batch_size}, on {device}",
        ["training", "NaN at step", f"loss (last {h['last']})", "test acc", "ms/step"],
        [
            [
                "model.half()",
                str(h["nan_step"] or "never"),
                loss(h["final_loss"]),
                f"{half_acc:.1%}",
                f"{h['seconds_per_step'] * 1000:.1f}",
            ],
            [
                amp_label,
                str(a["nan_step"] or "never"),
                loss(a["final_loss"]),
                f"{amp_acc:.1%}",
                f"{a['seconds_per_step'] * 1000:.1f}",
            ],
        ],
    )

    eps16 = torch.tensor(1e-8, dtype=torch.float16).item()
    probe = h["probe"] or {"v_zero": float("nan"), "w_bad": float("nan")}
    if h["nan_step"] is not None:
        yield Note(
            f"model.half() broke: its loss was {loss(h['first_loss'])} at step 1 and first NaN or inf at "
            f"step {h['nan_step']}; test accuracy {half_acc:.1%} against {amp_acc:.1%} with {amp_label}. "
            f"After its first Adam step {probe['v_zero']:.0%} of the second moments v were exactly 0 "
            f"(v = (1 - 0.999) x grad**2: a gradient of 1e-3 gives 1e-9, below float16's smallest "
            f"number, 6e-8) and "
            f"{probe['w_bad']:.0%} of the weights were inf or NaN: Adam divides by sqrt(v) + eps, and "
            f"eps = 1e-8 is {eps16:g} in float16.",
            "result",
        )
    else:
        yield Note(
            f"model.half() did not go NaN within {p.steps} step{'s' * (p.steps != 1)} here. Its "
            f"last-steps loss was {loss(h['final_loss'])} against {loss(a['final_loss'])} with "
            f"{amp_label}, test accuracy {half_acc:.1%} against {amp_acc:.1%}. After its first step "
            f"{probe['v_zero']:.0%} of Adam's second moments were exactly 0 in float16 (eps = 1e-8 is "
            f"{eps16:g} there).",
            "result",
        )
    if a["nan_step"] is None and amp.enabled:
        yield Note(
            f"Autocast kept float32 weights and Adam state and computed only the matmuls in "
            f"{amp.dtype_name}"
            + (f", with a GradScaler (final scale {a['scale']:g})" if a["scale"] else "")
            + f": its loss went from {loss(a['first_loss'])} to {loss(a['final_loss'])}."
        )
    yield Table(
        "One SGD step (u = -lr x grad) added to float16 weights, first batch",
        ["parameter", "median |w|", "fp16 spacing", "median |u|", "lost"],
        lost_rows,
    )
    yield Note(
        f"Lost updates: for {lost_share:.0%} of the weights with a nonzero update, w16 + u16 == w16 in "
        "float16: the step left them unchanged. Float16 has 10 mantissa bits, so near |w| its numbers are "
        "2**(floor(log2 |w|) - 10), about |w| x 2**-10, apart; an update under half that spacing rounds "
        "away. Float32 (23 bits) keeps them: that is why autocast keeps float32 master weights.",
        "result",
    )
    if dev.kind == "cpu":
        ratio = h["seconds_per_step"] / a["seconds_per_step"] if a["seconds_per_step"] > 0 else float("nan")
        yield Note(
            f"Speed on this CPU: model.half() took {ratio:.1f}x the time per step of {amp_label}; CPUs "
            "have no fast float16 arithmetic (GPUs do)."
        )

    yield Finished(
        {
            "wrong_type_dtype": wrong,
            "right_type_dtype": right,
            "autocast_dtype": autocast_dtype,
            "half_final_loss": h["final_loss"],
            "half_nan_step": h["nan_step"],
            "half_accuracy": half_acc,
            "autocast_final_loss": a["final_loss"],
            "autocast_accuracy": amp_acc,
            "lost_update_share": lost_share,
            "device": device,
        }
    )
