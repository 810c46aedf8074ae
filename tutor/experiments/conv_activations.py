"""conv-activations: how much a conv net keeps for backward, measured against B x C x H x W.

The course's lab estimates a CNN layer's activations as B x C x H x W per layer and works
ResNet-50's training memory from it. This counts what autograd really keeps: every tensor saved
for backward passes through `torch.autograd.graph.saved_tensors_hooks`, and the bytes of the
distinct storages behind them are added up (a storage saved twice, or a view of one, counts
once; the weights and BatchNorm's buffers are left out, they are the model's own).

First a small Conv2d stack, with and without BatchNorm, beside the formula summed over its conv
outputs. Then torchvision's real ResNet-50 (random weights, nothing downloaded): one forward and
backward at batch 1 and at `batch`, in float32 and under autocast. The difference of the two
batches is the activation memory per image; the worked example scales it to `target_batch` and
256, beside the weights, gradients and Adam state counted from the real tensors. On CUDA the
step's peak is read from torch.cuda.max_memory_allocated as well.

Transformers are not run: Korthikanti et al.'s per-layer formula is set beside 2 x b x s x h
for a GPT-2 layer, as a formula.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.conv_activations import ConvActivationsParams
from tutor.experiments.training import autocast_settings, seed_everything
from tutor.measurement.timing import synchronize
from tutor.present import metric

FULL_SIZE = 224  # ImageNet's crop, the lab's worked example
LARGE_BATCH = 256  # ResNet-50's usual ImageNet batch, here on one device
STACK_CHANNELS = 64  # ResNet's first stage
CLASSES = 1000

# What a saved tensor is, by the autograd node that made it.
CONV, RELU, WEIGHT_COPY, REST = "conv", "relu", "weight copy", "rest"
KIND_ROWS = {
    CONV: "conv outputs (BatchNorm's input)",
    RELU: "ReLU outputs (next conv's input)",
    WEIGHT_COPY: "16-bit weight copies",
    REST: "the rest (input, pooling, BN stats)",
}
# Nodes that only cast or reshape one tensor: a chain of them back to a weight is a copy of it.
CAST_OR_VIEW = {"ToCopyBackward0", "TBackward0", "ViewBackward0", "TransposeBackward0", "PermuteBackward0"}

# A GPT-2 small layer for the transformer formula (sequence, hidden size, heads; batch 1).
GPT2_SEQ, GPT2_HIDDEN, GPT2_HEADS = 1024, 768, 12


@dataclass
class Saved:
    """What one forward pass saved for backward: bytes per distinct storage, and its kind."""

    storages: dict[int, int] = field(default_factory=dict)
    kinds: dict[int, str] = field(default_factory=dict)
    per_save: int = 0  # a storage's bytes at every save that keeps it
    saves: int = 0
    views: int = 0  # saves of a view of another tensor

    @property
    def total(self) -> int:
        return sum(self.storages.values())

    def of(self, kind: str) -> int:
        return sum(n for ptr, n in self.storages.items() if self.kinds[ptr] == kind)

    @property
    def activations(self) -> int:
        """Everything but the 16-bit weight copies, which do not grow with the batch."""
        return self.total - self.of(WEIGHT_COPY)


def _copy_of_a_weight(t: torch.Tensor, weights: set[int]) -> bool:
    """Whether `t` is a cast or view of one of `weights` (ids): autocast's copy of a weight."""
    fn = t.grad_fn
    while fn is not None and fn.name() in CAST_OR_VIEW:
        inputs = [f for f, _ in fn.next_functions if f is not None]
        if len(inputs) != 1:
            return False
        fn = inputs[0]
    return fn is not None and id(getattr(fn, "variable", None)) in weights


def _kind(t: torch.Tensor, weights: set[int]) -> str:
    if _copy_of_a_weight(t, weights):
        return WEIGHT_COPY
    name = t.grad_fn.name() if t.grad_fn is not None else ""
    return {"ConvolutionBackward0": CONV, "ReluBackward0": RELU}.get(name, REST)


def _storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind `tensors`."""
    seen = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(seen.values())


@contextmanager
def saved_storages(model: nn.Module) -> Iterator[Saved]:
    """Within it, what autograd saves for backward, storage by storage, the model's parameters
    and buffers excluded. All saved tensors live until backward, so no storage address is
    reused while counting."""
    resident = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers())}
    weights = {id(t) for t in model.parameters()}
    saved = Saved()

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr not in resident:
            saved.saves += 1
            saved.per_save += storage.nbytes()
            saved.views += int(t._is_view())
            saved.storages[ptr] = storage.nbytes()
            saved.kinds.setdefault(ptr, _kind(t, weights))
        # Detached, so a saved output does not refer back to its own grad_fn (a cycle gc cannot break).
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield saved


@contextmanager
def conv_output_elements(model: nn.Module) -> Iterator[list[int]]:
    """Within it, B x C x H x W of every Conv2d output, one entry per conv call."""
    counts: list[int] = []
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: counts.append(out.numel()))
        for m in model.modules()
        if isinstance(m, nn.Conv2d)
    ]
    try:
        yield counts
    finally:
        for h in hooks:
            h.remove()


def conv_stack(layers: int, batch_norm: bool) -> nn.Sequential:
    """`layers` x (Conv2d 3x3 [+ BatchNorm2d] + ReLU) at 64 channels, the size kept by padding."""
    modules: list[nn.Module] = []
    channels = 3
    for _ in range(layers):
        modules.append(nn.Conv2d(channels, STACK_CHANNELS, 3, padding=1, bias=not batch_norm))
        if batch_norm:
            modules.append(nn.BatchNorm2d(STACK_CHANNELS))
        modules.append(nn.ReLU())
        channels = STACK_CHANNELS
    return nn.Sequential(*modules)


def step_saved(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor | None, amp_dtype: torch.dtype | None
) -> tuple[Saved, int]:
    """One forward and backward: what the forward saved, and B x C x H x W x 4 summed over its
    conv outputs. With y a cross-entropy loss on the logits, else the output's mean (which saves
    nothing of its own)."""
    model.zero_grad(set_to_none=True)
    device_type = x.device.type
    with (
        conv_output_elements(model) as elements,
        saved_storages(model) as saved,
        torch.autocast(device_type, dtype=amp_dtype, enabled=amp_dtype is not None),
    ):
        out = model(x)
        loss = F.cross_entropy(out, y) if y is not None else out.mean()
    loss.backward()
    return saved, 4 * sum(elements)


def korthikanti_bytes(seq: int, hidden: int, heads: int, batch: int = 1) -> float:
    """One transformer layer's activations in 16-bit (Korthikanti et al. 2022, eq. 1)."""
    return seq * batch * hidden * (34 + 5 * heads * seq / hidden)


def lab_bytes(seq: int, hidden: int, batch: int = 1) -> float:
    """The lab's "~2BLH" bytes per layer."""
    return 2 * batch * seq * hidden


def _size(n: float | None) -> str:
    """Bytes in decimal MB and GB, the units the lab's worked example uses."""
    if n is None:
        return "-"
    return metric(n / 1e9, "GB") if n >= 1e9 else metric(n / 1e6, "MB")


def measure(p: ConvActivationsParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    cuda = device.type == "cuda"
    amp = autocast_settings("auto", dev)
    amp_dtype = amp.dtype if amp.enabled else None
    amp_name = amp.dtype_name
    size, b = p.image_size, p.batch
    yield Started(
        "conv-activations",
        str(device),
        dev.name,
        "random images (memory does not depend on the data)",
        f"a {p.stack_layers}-layer conv stack; ResNet-50, random weights, {size} x {size}, batch 1 and {b}",
    )

    # ---- the conv stack: one activation a layer, or two with BatchNorm
    side = size // 4  # ResNet's first stage: 56 x 56 at 224
    xs = torch.randn(b, 3, side, side, device=device)
    stack_rows, stack_ratio = [], {}
    for batch_norm in (False, True):
        stack = conv_stack(p.stack_layers, batch_norm).to(device)
        saved, formula = step_saved(stack, xs, None, None)
        stack_ratio[batch_norm] = saved.total / formula
        name = "Conv+BN+ReLU" if batch_norm else "Conv+ReLU"
        stack_rows.append([name, _size(saved.total), _size(formula), metric(stack_ratio[batch_norm], "x")])
        del stack
    yield Table(
        f"{p.stack_layers} conv layers, batch {b}, {STACK_CHANNELS} ch, {side} x {side}: saved for backward",
        ["stack", "saved", "B x C x H x W x 4", "ratio"],
        stack_rows,
    )
    yield Note(
        "Conv+ReLU: each conv saves its input, each ReLU its output, and a ReLU's output is the next "
        "conv's input: one storage, counted once. So one B x C x H x W tensor a layer is kept, plus the "
        "input images. BatchNorm saves its input too, the conv's output, which nothing else kept: two a layer."
    )

    # ---- ResNet-50, torchvision's own, random weights (nothing downloaded)
    model = torchvision.models.resnet50(weights=None, num_classes=CLASSES).to(device).train()
    params = list(model.parameters())
    count = sum(t.numel() for t in params)
    param_bytes = _storage_bytes(params)

    def batch_of(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(n, 3, size, size, device=device), torch.randint(0, CLASSES, (n,), device=device)

    amp_saved: dict[int, Saved] = {}
    amp_grad_bytes = None
    if amp_dtype is not None:
        for n in (1, b):
            amp_saved[n], _ = step_saved(model, *batch_of(n), amp_dtype)
        amp_grad_bytes = _storage_bytes(t.grad for t in params if t.grad is not None)
        assert all(t.grad is None or t.grad.dtype == torch.float32 for t in params)  # float32, as the weights

    fp32_saved: dict[int, Saved] = {}
    fp32_saved[1], _ = step_saved(model, *batch_of(1), None)
    peak = None
    model.zero_grad(set_to_none=True)  # the last pass's gradients, freed before the peak's baseline
    if cuda:
        gc.collect()
        synchronize(dev.torch_device)
        torch.cuda.reset_peak_memory_stats(device)
    x, y = batch_of(b)
    base = torch.cuda.memory_allocated(device) if cuda else 0
    fp32_saved[b], formula = step_saved(model, x, y, None)
    if cuda:
        synchronize(dev.torch_device)
        peak = torch.cuda.max_memory_allocated(device) - base
    del x, y
    grad_bytes = _storage_bytes(t.grad for t in params if t.grad is not None)
    adam = torch.optim.Adam(params, lr=1e-4)
    adam.step()  # Adam's state is made at the first step
    adam_bytes = _storage_bytes(v for s in adam.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    del adam
    gc.collect()

    big = fp32_saved[b]
    kinds = list(KIND_ROWS)
    amp_big = amp_saved.get(b)
    rows = [
        [KIND_ROWS[k], _size(big.of(k)) if k != WEIGHT_COPY else "-", _size(amp_big.of(k) if amp_big else None)]
        for k in kinds
    ]
    rows += [
        ["total, each storage once", _size(big.total), _size(amp_big.total if amp_big else None)],
        ["total, counted at every save", _size(big.per_save), _size(amp_big.per_save if amp_big else None)],
        ["B x C x H x W x bytes, conv outs", _size(formula), _size(formula // 2 if amp_big else None)],
    ]
    yield Table(
        f"ResNet-50, batch {b}, {size} x {size}: saved for backward",
        ["what autograd kept", "float32", f"autocast {amp_name}"],
        rows,
    )
    ratio = big.total / formula
    yield Note(
        f"Measured {_size(big.total)} against the formula's {_size(formula)}: {ratio:.2f}x. The formula counts one "
        "tensor per conv; autograd keeps two per conv-BN-ReLU: BatchNorm's input (the conv's output, the "
        "formula's own row) and ReLU's output, which the next conv saves as its input. "
        f"Autograd made {big.saves} saves of {len(big.storages)} storages ({big.views} of the saves were views): "
        "counted at every save, the ReLU outputs count twice.",
        "result",
    )

    # ---- per image, and the worked example at 224 x 224
    area = (FULL_SIZE / size) ** 2

    def per_image(saved: dict[int, Saved]) -> tuple[float, float]:
        """(bytes per 224 x 224 image, bytes that do not grow with the batch) from batches 1 and b."""
        slope = (saved[b].activations - saved[1].activations) / (b - 1)
        return slope * area, max(0.0, saved[1].activations - slope)

    fp32_image, fp32_fixed = per_image(fp32_saved)
    amp_image, amp_fixed = per_image(amp_saved) if amp_big else (None, 0.0)
    copies = amp_big.of(WEIGHT_COPY) if amp_big else None

    def activations(batch: int, image: float | None, fixed: float) -> float | None:
        return None if image is None else fixed + batch * image

    static = param_bytes + grad_bytes + adam_bytes
    amp_static = param_bytes + (amp_grad_bytes or 0) + adam_bytes + (copies or 0)
    worked: list[list[str]] = [
        ["weights", _size(param_bytes), _size(param_bytes if amp_big else None)],
        ["gradients", _size(grad_bytes), _size(amp_grad_bytes)],
        ["Adam m + v", _size(adam_bytes), _size(adam_bytes if amp_big else None)],
        [f"{amp_name} weight copies", "-", _size(copies)],
    ]
    totals: dict[int, tuple[float, float | None]] = {}
    for batch in dict.fromkeys((p.target_batch, LARGE_BATCH)):
        act = activations(batch, fp32_image, fp32_fixed)
        act_amp = activations(batch, amp_image, amp_fixed)
        assert act is not None
        totals[batch] = (static + act, None if act_amp is None else amp_static + act_amp)
        worked += [
            [f"activations, batch {batch}", _size(act), _size(act_amp)],
            [f"total, batch {batch}", _size(static + act), _size(totals[batch][1])],
        ]
    yield Table(
        f"ResNet-50 training memory, {FULL_SIZE} x {FULL_SIZE}, {count / 1e6:.1f}M parameters, Adam",
        ["part", "float32", f"torch.amp ({amp_name})"],
        worked,
    )
    if size != FULL_SIZE:
        yield Note(
            f"Measured at {size} x {size} to save time; per {FULL_SIZE} x {FULL_SIZE} image the activations are "
            f"scaled by area, ({FULL_SIZE}/{size})^2 = {area:.1f}x, a formula: every stage's feature maps grow "
            "with the image's area. At the lesson's settings the run measures 224 x 224 itself.",
            "warning",
        )
    target_act = activations(p.target_batch, fp32_image, fp32_fixed)
    assert target_act is not None
    over_weights = target_act / param_bytes
    shrink = fp32_image / amp_image if amp_image else None
    if amp_big and shrink is not None and copies is not None:
        yield Note(
            f"torch.amp keeps the weights, their gradients and Adam's state in float32 (counted: {_size(static)}, "
            f"as in float32 training). Autocast casts each weight to {amp_name} for the convs and autograd holds "
            f"those copies until backward: {_size(copies)} a step, whatever the batch. The activations are saved "
            f"in {amp_name}: {_size(fp32_image)} an image in float32, {_size(amp_image)} under autocast "
            f"({shrink:.2f}x smaller). At batch {p.target_batch} the activations are {over_weights:.0f}x the "
            "weights.",
            "result",
        )
    else:
        yield Note(f"Autocast is not measured here: {amp.note}", "warning")

    ratio_t = korthikanti_bytes(GPT2_SEQ, GPT2_HIDDEN, GPT2_HEADS) / lab_bytes(GPT2_SEQ, GPT2_HIDDEN)
    yield Note(
        "Transformers, by formula (not run here): Korthikanti et al. 2022 count s*b*h*(34 + 5*a*s/h) bytes "
        f"a layer in 16-bit. A GPT-2 small layer (s = {GPT2_SEQ}, h = {GPT2_HIDDEN}, a = {GPT2_HEADS}, b = 1): "
        f"{_size(korthikanti_bytes(GPT2_SEQ, GPT2_HIDDEN, GPT2_HEADS))}. 2*b*s*h bytes, the layer's 16-bit "
        f"input alone, is {_size(lab_bytes(GPT2_SEQ, GPT2_HIDDEN))}: {ratio_t:.0f}x too low, at any batch and for "
        f"every GPT-2 size (all have heads {GPT2_HIDDEN // GPT2_HEADS} wide). Without the "
        "attention scores (a*s^2 terms; FlashAttention keeps none) still 34/2 = 17x."
    )
    if cuda:
        yield Note(
            f"torch.cuda.max_memory_allocated during the float32 step at batch {b}: {_size(peak)} above the "
            f"weights and the batch. It holds the {_size(big.total)} saved for backward, the gradients as "
            f"backward makes them ({_size(grad_bytes)} in all) while it frees the saved tensors, and cuDNN's "
            "workspaces and temporaries."
        )
    else:
        yield Note(
            "No CUDA here: torch.cuda.max_memory_allocated is not read. The saved tensors above are what "
            "autograd keeps on any device; a GPU's step adds cuDNN workspaces and temporaries on top."
        )

    fp32_total, amp_total = totals[p.target_batch]
    yield Finished(
        {
            "stack_over_formula": stack_ratio[False],
            "bn_stack_over_formula": stack_ratio[True],
            "parameters": count,
            "param_bytes": param_bytes,
            "grad_bytes": grad_bytes,
            "adam_state_bytes": adam_bytes,
            "activation_bytes": big.total,
            "per_save_bytes": big.per_save,
            "formula_bytes": formula,
            "saved_over_formula": ratio,
            "activation_bytes_per_image": fp32_image,
            "amp_activation_bytes_per_image": amp_image,
            "weight_copy_bytes": copies,
            "autocast_shrink": shrink,
            "target_activation_bytes": target_act,
            "activation_bytes_256": activations(LARGE_BATCH, fp32_image, fp32_fixed),
            "activations_over_weights": over_weights,
            "fp32_total_bytes": fp32_total,
            "amp_total_bytes": amp_total,
            "transformer_ratio": ratio_t,
            "peak_step_bytes": peak,
            "autocast_dtype": amp_name,
            "device": str(device),
        }
    )
