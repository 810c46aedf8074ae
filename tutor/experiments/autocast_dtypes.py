"""autocast-dtypes: what dtype each operation really runs in under torch.autocast.

autocast does not convert a model: inside its block every operation looks itself up in the
device type's lists. Some are run in the low-precision dtype (matmuls, linear: fast there and
tolerant of rounding), some in float32 (ops that need range or precision), and everything on
neither list runs in the dtype of its inputs. The lists differ between CUDA and the CPU.

A small model (Linear -> ReLU -> LayerNorm, then softmax, a cross-entropy loss and a sum) runs
one forward pass under autocast; forward hooks read each module's input and output dtypes. Then
each operation runs alone, under the same autocast, once on a float32 input and once on a
low-precision one, which tells its rule apart from its input: low from both is "lowered",
float32 from both is "kept in float32", the input's own dtype each time is "follows its input".
Finally backward runs (outside autocast, as it should) and the weight's gradient dtype is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.autocast_dtypes import AutocastDtypesParams
from tutor.experiments.training import autocast_settings, grad_of, seed_everything

FEATURES, CLASSES = 64, 10
LOWERED, FLOAT32, FOLLOWS = "lowered", "kept in float32", "follows its input"
# The model's modules in forward order: (attribute, the operation's name, the metric it reports)
OPS = [
    ("linear", "linear", "linear_dtype"),
    ("relu", "relu", "relu_dtype"),
    ("layernorm", "layer_norm", "layernorm_dtype"),
    ("softmax", "softmax", "softmax_dtype"),
    ("loss", "cross_entropy", "loss_dtype"),
    ("sum", "sum", "sum_dtype"),
]


class Sum(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum()


class AutocastProbe(nn.Module):
    """linear -> relu -> layernorm gives logits; softmax of them, their cross-entropy loss, and the
    sum of the probabilities."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(FEATURES, CLASSES)
        self.relu = nn.ReLU()
        self.layernorm = nn.LayerNorm(CLASSES)
        self.softmax = nn.Softmax(dim=-1)
        self.loss = nn.CrossEntropyLoss()
        self.sum = Sum()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.layernorm(self.relu(self.linear(x)))
        return self.loss(logits, y), self.sum(self.softmax(logits))


def name(dtype: torch.dtype | None) -> str:
    return "off" if dtype is None else str(dtype).removeprefix("torch.")


def rule(from_float32: torch.dtype, from_low: torch.dtype, low: torch.dtype) -> str:
    """What autocast did to an operation, from its output dtypes on a float32 and a low input."""
    if from_float32 == low and from_low == low:
        return LOWERED
    if from_float32 == torch.float32 and from_low == torch.float32:
        return FLOAT32
    if from_float32 == torch.float32 and from_low == low:
        return FOLLOWS
    return f"{name(from_float32)} / {name(from_low)}"


def _listed(ops: list[str]) -> str:
    return ", ".join(ops) if ops else "none"


def measure(p: AutocastDtypesParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = dev.torch_device
    amp = autocast_settings(p.amp, dev)
    yield Started(
        "autocast-dtypes",
        device,
        dev.name,
        "random inputs (the dtypes do not depend on the data)",
        f"Linear({FEATURES}, {CLASSES}) -> ReLU -> LayerNorm, softmax, cross-entropy, sum; batch {p.batch_size}",
    )
    if amp.note:
        yield Note(amp.note)

    model = AutocastProbe().to(device)
    x = torch.randn(p.batch_size, FEATURES, device=device)
    y = torch.randint(0, CLASSES, (p.batch_size,), device=device)

    seen: dict[str, tuple[str, str]] = {}  # attribute -> (input dtype, output dtype)

    def hook(attr: str) -> Callable[..., None]:
        def record(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
            seen[attr] = (name(inputs[0].dtype), name(output.dtype))

        return record

    handles = [getattr(model, attr).register_forward_hook(hook(attr)) for attr, _, _ in OPS]
    try:
        with amp.autocast(dev.kind):
            loss, _ = model(x, y)
    finally:
        for h in handles:
            h.remove()
    loss.backward()  # outside autocast: the backward ops run in the dtypes their forward ops chose
    weight_dtype, grad_dtype = name(model.linear.weight.dtype), name(grad_of(model.linear.weight).dtype)

    low = amp.dtype if amp.enabled else None
    rules: dict[str, str] = {}
    if low is not None:
        # Each operation alone, on a float32 input and on a low-precision one, under the same autocast.
        h32 = torch.randn(p.batch_size, CLASSES, device=device)
        alone: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]] = {
            "linear": (model.linear, x),
            "relu": (torch.relu, h32),
            "layer_norm": (model.layernorm, h32),
            "softmax": (lambda t: torch.softmax(t, dim=-1), h32),
            "cross_entropy": (lambda t: F.cross_entropy(t, y), h32),
            "sum": (torch.sum, h32),
        }
        with torch.no_grad(), amp.autocast(dev.kind):
            for op, (fn, inp) in alone.items():
                rules[op] = rule(fn(inp).dtype, fn(inp.to(low)).dtype, low)

    rows = []
    for attr, op, _ in OPS:
        source, out = seen[attr]
        rows.append([op, source, out, rules.get(op, "autocast off")])
    yield Table(
        f"Under torch.autocast('{dev.kind}', dtype={name(low)}) on {device}",
        ["operation", "its input", "its output", "autocast's rule"],
        rows,
    )

    lowered = [op for op, r in rules.items() if r == LOWERED]
    kept = [op for op, r in rules.items() if r == FLOAT32]
    follows = [op for op, r in rules.items() if r == FOLLOWS]
    metrics_dtypes = {metric: seen[attr][1] for attr, _, metric in OPS}

    if low is None:
        yield Note(
            f"Autocast is off on {device} with amp={p.amp}, so every operation ran in float32: there is "
            "nothing to see here. Try another amp setting, or a device whose autocast supports it.",
            "warning",
        )
    else:
        low_name = name(low)
        in_low = [op for op in follows if metrics_dtypes[next(m for _, o, m in OPS if o == op)] == low_name]
        yield Note(
            f"Lowered to {low_name} whatever their input: {_listed(lowered)}. Kept in float32 even from a "
            f"{low_name} input: {_listed(kept)}. On neither list, so they follow their input: "
            f"{_listed(follows)}"
            + (
                f"; in this model {_listed(in_low)} ran in {low_name} only because the linear before them "
                f"gave them {low_name}."
                if in_low
                else "."
            )
            + f" The Linear's weight is still {weight_dtype} and its gradient {grad_dtype}: autocast casts "
            "a copy of the weight for the matmul and never changes the model.",
            "result",
        )
        yield Note(
            "A common list says autocast runs elementwise ops in float16 and reductions, losses, "
            "normalisation and softmax in float32. What ran here: an elementwise op such as relu is on no "
            "list, it keeps whatever dtype it is given"
            + (
                f"; and on this device {_listed([o for o in ('sum', 'layer_norm', 'softmax') if o in follows])} "
                f"followed their input too, so they ran in {low_name} after the linear."
                if any(o in follows for o in ("sum", "layer_norm", "softmax"))
                else "."
            ),
            "result",
        )
        if dev.kind == "cpu":
            yield Note(
                "No GPU here: this is the CPU's autocast. Its float32 list holds losses (cross_entropy, "
                "mse_loss, nll_loss, ...), linear algebra and FFTs, but not softmax, layer_norm or sum. "
                "CUDA's float32 list also holds softmax, log_softmax, layer_norm, sum, exp and log, so on a "
                "GPU those come out float32 even after a float16 linear. Run this on a GPU to see its rules."
            )
    yield Finished(
        {
            "autocast_dtype": name(low),
            **metrics_dtypes,
            "weight_dtype": weight_dtype,
            "grad_dtype": grad_dtype,
            "lowered_ops": _listed(lowered) if low is not None else "none (autocast off)",
            "float32_ops": _listed(kept) if low is not None else "none (autocast off)",
            "input_dtype_ops": _listed(follows) if low is not None else "none (autocast off)",
            "device": device,
        }
    )
