"""fp16-underflow: a small gradient vanishes in float16 and survives with loss scaling.

The computation is one link of the chain rule, the way it happens under autocast: an
activation `x` (float16) times a weight `w`, and a loss computed in float32 whose
gradient flowing back into the float16 part is `g`. Then d loss / d w = g * x.
Both factors are sqrt(gradient): for the default 1e-8 each is 1e-4, above float16's
smallest normal (6.1e-5), but their product, the gradient itself, is not representable.
Every sentence the run prints is chosen from the values it computed, so it stays true
across the whole parameter range (Fp16UnderflowParams documents the bounds).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.fp16_underflow import Fp16UnderflowParams
from tutor.present import significant


def weight_gradient(dtype: torch.dtype, factor: float, scale: float, device: str) -> float:
    """d loss / d w for loss = (w * x) * g with x = g = factor, computed in `dtype`.

    The loss is multiplied by `scale` before backward() and the gradient divided by it
    afterwards in float32, as GradScaler does (scale=1: no scaling).
    """
    w = torch.tensor(1.0, dtype=dtype, device=device, requires_grad=True)
    x = torch.tensor(factor, dtype=dtype, device=device)  # the activation
    g = torch.tensor(factor, dtype=torch.float32, device=device)  # upstream gradient, fp32 loss
    loss = (w * x).float() * g  # autocast computes losses in float32
    (loss * scale).backward()  # backward casts scale*g to `dtype`, then multiplies by x in `dtype`
    assert w.grad is not None  # backward() from a loss that depends on w always fills w.grad
    return w.grad.float().item() / scale


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The first representable number above zero (torch.finfo has no field for it)."""
    zero = torch.zeros(1, dtype=dtype)
    return torch.nextafter(zero, torch.ones(1, dtype=dtype)).item()


def scaler_step(factor: float, upstream: float, scale: float) -> dict[str, float | bool]:
    """One real torch.amp.GradScaler step on the CPU; returns what it saw and did."""
    w = torch.nn.Parameter(torch.zeros(1))  # fp32 master weight
    # With momentum, SGD creates its momentum buffer on its first real step: proof the step ran,
    # even when the gradient (and so the change to w) is 0.
    optimizer = torch.optim.SGD([w], lr=1.0, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    x = torch.tensor([factor], dtype=torch.float16)
    scale_before = scaler.get_scale()
    loss = ((w.half() * x).float() * upstream).sum()
    scaler.scale(loss).backward()
    assert w.grad is not None  # backward() from a loss that depends on w always fills w.grad
    scaled_grad = w.grad.item()
    scaler.unscale_(optimizer)  # divides by the scale in fp32 and looks for inf/NaN
    unscaled_grad = w.grad.item()
    scaler.step(optimizer)  # skipped if an inf/NaN was found
    scaler.update()  # halves the scale after a skipped step
    return {
        "scale_before": scale_before,
        "scaled_grad": scaled_grad,
        "unscaled_grad": unscaled_grad,
        "stepped": "momentum_buffer" in optimizer.state.get(w, {}),
        "scale_after": scaler.get_scale(),
    }


def measure(p: Fp16UnderflowParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    yield Started("fp16-underflow", device, dev.name, "none (a single weight and activation)")

    factor = math.sqrt(p.gradient)
    try:
        g16 = weight_gradient(torch.float16, factor, 1.0, device)
    except (RuntimeError, TypeError) as exc:  # a backend without float16 kernels
        yield Note(f"float16 failed on {device} ({exc}); computing on the CPU instead.", "warning")
        device = "cpu"
        g16 = weight_gradient(torch.float16, factor, 1.0, device)
    g32 = weight_gradient(torch.float32, factor, 1.0, device)
    g16_scaled = weight_gradient(torch.float16, factor, p.scale, device)
    try:
        gbf16 = weight_gradient(torch.bfloat16, factor, 1.0, device)
    except (RuntimeError, TypeError):  # e.g. MPS before macOS 14 has no bfloat16
        gbf16 = weight_gradient(torch.bfloat16, factor, 1.0, "cpu")
    stored16 = torch.tensor(p.gradient, dtype=torch.float16).item()
    flushed = g16 == 0.0 and g32 != 0.0

    factor16 = torch.tensor(factor, dtype=torch.float16).item()
    yield Note(
        f"Computed on {device}. loss = (w * x) * g with x = g = sqrt({p.gradient:g}) = {factor:.4g} "
        f"({factor16:.4g} as float16), so d loss / d w = g * x = {p.gradient:g}: the product that "
        "backward() must store in float16."
    )
    yield Table(
        "d loss / d w, computed in each number format",
        ["computation", "d loss / d w"],
        [
            ["true value (Python float64)", significant(p.gradient)],
            ["float32", significant(g32)],
            ["float16", significant(g16)],
            [f"float16, loss x {p.scale:g}, then / {p.scale:g} in float32", significant(g16_scaled)],
            ["bfloat16 (no scaling)", significant(gbf16)],
            [f"the number {p.gradient:g} stored as float16", significant(stored16)],
        ],
    )

    f16, bf16, f32 = torch.finfo(torch.float16), torch.finfo(torch.bfloat16), torch.finfo(torch.float32)
    sub16 = smallest_subnormal(torch.float16)
    yield Table(
        "Range of each format (torch.finfo; smallest subnormal by torch.nextafter)",
        ["dtype", "max", "smallest normal", "smallest subnormal", "eps"],
        [
            [
                str(d).removeprefix("torch."),
                significant(fi.max),
                significant(fi.smallest_normal),
                significant(smallest_subnormal(d)),
                significant(fi.eps),
            ]
            for d, fi in ((torch.float16, f16), (torch.bfloat16, bf16), (torch.float32, f32))
        ],
    )

    # What the scaled computation did, from its measured value.
    scaled = p.gradient * p.scale
    if not math.isfinite(g16_scaled):
        scaled_text = (
            f"With the loss multiplied by {p.scale:g}, the gradient during backward() ({significant(scaled)}) is above "
            f"float16's max ({f16.max:g}) and became {g16_scaled:g}: GradScaler would skip that step and "
            "lower its scale."
        )
    elif g16_scaled == 0.0:
        scaled_text = (
            f"Even with the loss multiplied by {p.scale:g}, the gradient during backward() ({scaled:.3g}) is "
            "still too small for float16 and rounds to 0.0: this gradient needs a larger scale."
        )
    else:
        scaled_text = (
            f"Multiplying the loss by {p.scale:g} makes the gradient {p.scale:g} times larger during "
            f"backward() ({scaled:.3g}), inside float16's range; dividing by {p.scale:g} afterwards in "
            f"float32 gives back {g16_scaled:.4g}."
        )

    if g32 == 0.0:  # outside the validated range; said plainly rather than called "kept"
        yield Note(
            f"Even float32 computed 0.0: {p.gradient:g} is too small for float32 (smallest subnormal "
            f"{smallest_subnormal(torch.float32):.3g}), so there is no reference to compare float16 with.",
            "warning",
        )
    elif flushed and factor16 == 0.0:
        yield Note(
            f"float16 lost the gradient before the multiplication: the activation x = {factor:.3g} is itself "
            f"too small for float16 (smallest subnormal {sub16:.3g}) and is stored as 0.0, so g * x is 0.0. "
            "Loss scaling multiplies the gradients flowing backward, not the activations"
            + (
                f", so it cannot bring this one back: with the loss x {p.scale:g} the result is still 0.0."
                if g16_scaled == 0.0
                else f". {scaled_text}"
            ),
            "result",
        )
    elif flushed:
        yield Note(
            f"float16 lost the gradient: backward() multiplies g and x in float16, and their product "
            f"{p.gradient:g} is too small for float16 (anything below about half of its smallest subnormal, "
            f"{sub16:.3g}, rounds to 0.0), so this weight would never learn. {scaled_text}",
            "result",
        )
    elif not math.isfinite(g16):
        yield Note(
            f"float16 overflowed: {p.gradient:g} is above its max ({f16.max:g}), so the gradient became "
            f"{g16:g}. Loss scaling makes gradients larger, so it cannot help here; GradScaler would skip "
            "this step and lower its scale.",
            "result",
        )
    else:
        subnormal = abs(g16) < f16.smallest_normal
        lifted = f16.smallest_normal <= abs(g16_scaled) * p.scale <= f16.max
        parts = [f"float16 kept this gradient ({g16:.4g}): {p.gradient:g} is within float16's range."]
        if subnormal:
            parts.append(
                f"It is below float16's smallest normal ({f16.smallest_normal:.3g}), so it is stored as a "
                "subnormal with fewer significant bits"
                + ("; loss scaling lifts it back into the normal range." if lifted else ".")
            )
        if not math.isfinite(g16_scaled):
            parts.append(scaled_text)
        parts.append("Try gradient=1e-8 to see it vanish.")
        yield Note(" ".join(parts), "result")
    if g32 != 0.0 and gbf16 != 0.0 and math.isfinite(gbf16):
        bf_text = f"it keeps this gradient ({gbf16:.4g}), which is why bf16 autocast usually needs no GradScaler."
    else:
        bf_text = f"here it gives {gbf16:.4g}."
    yield Note(
        f"bfloat16 has float32's exponent range (smallest normal {bf16.smallest_normal:.3g}) with "
        f"only 8 bits of precision (eps {bf16.eps:g}): {bf_text}"
    )

    # What GradScaler itself does: one step with this gradient, one whose scaled gradient overflows.
    ok = scaler_step(factor, factor, p.scale)
    # A true gradient of 1.0 overflows once scaled by 65536 (> 65504); smaller scales need a bigger
    # one: 2 * 65504 / scale is twice float16's max once scaled. x = 1.0 keeps the activation exact.
    scale_overflows = math.isinf(torch.tensor(p.scale, dtype=torch.float16).item())
    big = 1.0 if scale_overflows else 2 * f16.max / p.scale
    over = scaler_step(1.0, big, p.scale)
    yield Table(
        "torch.amp.GradScaler('cpu'), one real SGD step each",
        ["true gradient", "scale before", "grad after backward", "grad after unscale_", "step taken", "scale after"],
        [
            [
                significant(p.gradient),
                significant(ok["scale_before"]),
                significant(ok["scaled_grad"]),
                significant(ok["unscaled_grad"]),
                str(ok["stepped"]),
                significant(ok["scale_after"]),
            ],
            [
                significant(big),
                significant(over["scale_before"]),
                significant(over["scaled_grad"]),
                significant(over["unscaled_grad"]),
                str(over["stepped"]),
                significant(over["scale_after"]),
            ],
        ],
    )
    if not over["stepped"]:
        second = (
            f"update() then lowered the scale ({over['scale_before']:g} -> {over['scale_after']:g} in the "
            f"second row, where the scaled gradient, {over['scaled_grad']:g}, exceeded float16's max of "
            f"{f16.max:g})."
        )
    else:  # not expected: report what happened rather than what should have
        second = f"In the second row the step was taken (scale {over['scale_before']:g} -> {over['scale_after']:g})."
    yield Note(
        "GradScaler multiplies the loss by its scale before backward(), unscale_ divides the "
        "gradients by it in float32, and step() skips the update when any gradient is inf or NaN; "
        f"{second} After enough good steps it grows the scale again."
    )

    yield Finished(
        {
            "gradient_fp32": g32,
            "gradient_fp16": g16,
            "gradient_scaled_fp16": g16_scaled,
            "gradient_bf16": gbf16,
            "flushed_to_zero": flushed,
            "scale": p.scale,
            "fp16_smallest_subnormal": sub16,
            "fp16_smallest_normal": f16.smallest_normal,
            "fp16_max": f16.max,
            "bf16_smallest_normal": bf16.smallest_normal,
            "computed_on": device,
            "scaler_skipped_overflow_step": not over["stepped"],
            "scaler_scale_before": over["scale_before"],
            "scaler_scale_after_overflow": over["scale_after"],
            "scaler_unscaled_gradient": ok["unscaled_grad"],
        }
    )
