"""memory-ledger: what training a model costs in memory, part by part, against a budget.

Static memory, per parameter (the ZeRO paper's accounting, Rajbhandari et al. 2020):

    precision  weights  gradients  16-bit copies  SGD  momentum  Adam (exp_avg + exp_avg_sq)
    fp32          4         4            -          0       4        8
    fp16          2         2            -          0       2        4
    mixed         4         4            2          0       4        8

"mixed" is what torch.amp does (autocast + GradScaler), the layout a learner measures: the
weights, their gradients and the optimizer state stay FP32, and autocast casts each weight
to FP16/BF16 for the matmuls. Autograd keeps those copies for the backward pass (measured:
the tensors saved under autocast are the 16-bit copies, not the FP32 weights), so a step
holds 2 bytes more per parameter: 18 with Adam, against FP32's 16. Mixed precision saves
activation memory and time, not static memory. (Older recipes, apex O2 or DeepSpeed's
fp16, keep FP16 weights and gradients with an FP32 master copy: 2 + 2 + 4 + 8 = 16.)

Activations of a GPT-style transformer layer, per sample (Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", eq. 1): with sequence s,
hidden size h and a attention heads, s*h*(34 + 5*a*s/h) bytes in 16-bit. Of that,
the dropout masks are one byte per element (2*s*h + a*s^2) and the rest is 16*s*h + 2*a*s^2
tensor elements, at 2 bytes in FP16 and 4 in FP32. The paper leaves out the output layer;
a training step cannot: GPT-2's vocabulary is 50,257 tokens, so the logits are s*V numbers
per sample (in the precision's width), and the loss keeps its log-softmax of them for the
backward pass (FP32 under autocast and in FP32, FP16 in pure FP16). At batch 4 that is
1.6 GB in FP32, 1.2 GB mixed, 0.8 GB in pure FP16: enough to move a tight fit.

Gradient checkpointing here keeps only each layer's input and recomputes one layer at
a time in the backward pass: L*s*h elements plus one layer's activations, at the cost
of a second forward pass (8 instead of 6 FLOPs per parameter per token: +33%).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tutor.instruments.base import (
    GIB,
    Bar,
    Chart,
    Context,
    Control,
    Instrument,
    Reading,
    Segment,
    gb,
    gb_gib,
)


@dataclass(frozen=True)
class Preset:
    label: str
    params: float
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    seq: int = 1024


# Parameter counts as they are usually quoted (GPT-2 XL is "1.5B"; exactly 1,557,611,200).
PRESETS: dict[str, Preset] = {
    "gpt2": Preset("GPT-2 small (124M)", 124e6, 12, 768, 12),
    "gpt2-medium": Preset("GPT-2 medium (355M)", 355e6, 24, 1024, 16),
    "gpt2-large": Preset("GPT-2 large (774M)", 774e6, 36, 1280, 20),
    "gpt2-xl": Preset("GPT-2 XL (1.5B)", 1.5e9, 48, 1600, 25),
}
MY_MODEL = "mine"

# Cards are sold as "80 GB" and "8 GB", but HBM and GDDR come in powers of two: they have
# 80 GiB and 8 GiB. PyTorch sees a little less (the driver keeps some), and the CUDA
# context takes a few hundred MiB more before any tensor.
BUDGETS: dict[str, tuple[str, int | None]] = {
    "h100": ('H100, sold as "80 GB"', 80 * GIB),
    "a100": ('A100, sold as "80 GB"', 80 * GIB),
    "laptop": ('laptop GPU, sold as "8 GB"', 8 * GIB),
    "this": ("this machine's device", None),
}

# bytes per parameter: (weights, gradients, autocast's 16-bit weight copies, {optimizer: state})
BYTES_PER_PARAM: dict[str, tuple[int, int, int, dict[str, int]]] = {
    "fp32": (4, 4, 0, {"sgd": 0, "momentum": 4, "adam": 8}),
    "fp16": (2, 2, 0, {"sgd": 0, "momentum": 2, "adam": 4}),
    "mixed": (4, 4, 2, {"sgd": 0, "momentum": 4, "adam": 8}),
}
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "mixed": 2}

COLOURS = {"weights": "blue", "gradients": "magenta", "16-bit weight copies": "cyan",
           "optimizer state": "yellow", "activations": "green"}


def layer_activation_bytes(p: Preset, precision: str) -> float:
    """One transformer layer's saved activations for one sample (Korthikanti et al. eq. 1)."""
    s, h, a = p.seq, p.hidden, p.heads
    elements = 16 * s * h + 2 * a * s * s
    masks = 2 * s * h + a * s * s
    return ELEMENT_BYTES[precision] * elements + masks


VOCAB = 50_257  # GPT-2's tokens: the output layer's width
LOSS_BYTES = {"fp32": 4, "fp16": 2, "mixed": 4}  # the saved log-softmax; autocast runs it in FP32


def output_bytes(p: Preset, precision: str) -> float:
    """One sample's logits and the loss's saved log-softmax: s x V x (width + loss width)."""
    return p.seq * VOCAB * (ELEMENT_BYTES[precision] + LOSS_BYTES[precision])


def activation_bytes(p: Preset, precision: str, batch: int, checkpointing: bool) -> float:
    per_layer = layer_activation_bytes(p, precision)
    if checkpointing:
        kept_inputs = p.layers * p.seq * p.hidden * ELEMENT_BYTES[precision]
        return batch * (kept_inputs + per_layer + output_bytes(p, precision))
    return batch * (p.layers * per_layer + output_bytes(p, precision))


@dataclass(frozen=True)
class Ledger:
    """The numbers of one configuration, in bytes."""

    params: float
    weights: float
    gradients: float
    copies: float  # autocast's 16-bit casts of the weights, kept for the backward pass
    optimizer: float
    activations: float

    @property
    def static(self) -> float:
        return self.weights + self.gradients + self.copies + self.optimizer

    @property
    def total(self) -> float:
        return self.static + self.activations


def ledger(preset: Preset, precision: str, optimizer: str, batch: int, checkpointing: bool,
           activation_per_sample: float | None = None) -> Ledger:
    w, g, m, opt = BYTES_PER_PARAM[precision]
    n = preset.params
    if activation_per_sample is not None:  # measured ("my model"): float32, scaled for 16-bit
        acts = activation_per_sample * batch * ELEMENT_BYTES[precision] / 4
    else:
        acts = activation_bytes(preset, precision, batch, checkpointing)
    return Ledger(n, n * w, n * g, n * m, n * opt[optimizer], acts)


class MemoryLedger(Instrument):
    name = "memory-ledger"
    title = "Memory ledger"
    summary = "Training memory part by part (weights, gradients, optimizer state, activations) against a budget"
    controls = (
        Control("model", "Model", "choice", (*PRESETS, MY_MODEL), "gpt2-xl",
                labels=(*(p.label for p in PRESETS.values()), "my model (latest memory-ledger run)")),
        Control("optimizer", "Optimizer", "choice", ("sgd", "momentum", "adam"), "adam",
                labels=("SGD", "SGD + momentum", "Adam")),
        Control("precision", "Precision", "choice", ("fp32", "fp16", "mixed"), "fp32",
                labels=("FP32", "FP16 (pure, no master copy)", "mixed (torch.amp: FP32 weights, 16-bit matmuls)")),
        Control("batch", "Batch size", "stepper", tuple(2**k for k in range(17)), 4),
        Control("checkpointing", "Checkpointing", "toggle", (False, True), False),
        Control("budget", "Budget", "choice", tuple(BUDGETS), "h100", labels=tuple(v[0] for v in BUDGETS.values())),
    )
    outputs = {
        "parameters": "parameters of the model",
        "weights_bytes": "the weights (B)",
        "gradients_bytes": "one gradient per parameter (B)",
        "weight_copies_bytes": "autocast's 16-bit copies of the weights, kept for the backward pass (B)",
        "optimizer_bytes": "optimizer state (B)",
        "activations_bytes": "activations saved for the backward pass (B)",
        "static_bytes": "weights + gradients + 16-bit copies + optimizer state: the floor at any batch size (B)",
        "total_bytes": "static + activations (B)",
        "bytes_per_param": "static bytes per parameter",
        "adam_extra_bytes": "what Adam adds over plain SGD at this precision (B)",
        "adam_extra_gb": "the same, in GB (10^9 bytes)",
        "static_gb": "the static floor in GB",
        "activations_gb": "activations in GB",
        "total_gb": "total in GB",
        "budget_bytes": "the chosen device's memory (B); null when unknown",
        "budget_gb": "the same, in GB",
        "fits": "total <= budget (null when the budget is unknown)",
        "breaks": "what breaks the budget: none, static floor, activations, or unknown (no budget)",
    }
    outputs_kind = {"fits": bool, "breaks": str}

    def needs_context(self, settings: Mapping[str, Any]) -> bool:
        return settings.get("model") == MY_MODEL or settings.get("budget") == "this"

    def compute(self, settings: Mapping[str, Any], context: Context | None = None) -> Reading:
        ctx = context or Context()
        s = self.settings(settings)
        precision, optimizer, batch, ckpt = s["precision"], s["optimizer"], s["batch"], s["checkpointing"]
        notes: list[str] = []
        if s["model"] == MY_MODEL:
            mine = ctx.my_model
            if not mine or not mine.get("parameters"):
                return self._no_model(s)
            preset = Preset(mine.get("label") or "my model", float(mine["parameters"]))
            per_sample = float(mine["activation_bytes_per_sample"])
            led = ledger(preset, precision, optimizer, batch, ckpt, per_sample)
            notes.append(f"{preset.label}: {int(preset.params):,} parameters and {per_sample:,.0f} B of activations "
                         "per sample, measured by your memory-ledger run (FP32; halved for 16-bit).")
            if ckpt:
                notes.append("Checkpointing is not modelled for a measured model: its activations are as measured.")
        else:
            preset = PRESETS[s["model"]]
            led = ledger(preset, precision, optimizer, batch, ckpt)
        budget_label, budget = BUDGETS[s["budget"]]
        if s["budget"] == "this":
            budget = ctx.device_memory
            budget_label = f"this machine: {ctx.device_name}" if ctx.device_name else "this machine (not detected yet)"

        adam_extra = led.params * BYTES_PER_PARAM[precision][3]["adam"]
        fits = None if budget is None else led.total <= budget
        if budget is None:
            breaks, level = "unknown", "warning"
            verdict = f"Needs {gb(led.total)}. The budget is unknown: {budget_label}."
        elif led.static > budget:
            breaks, level = "static floor", "error"
            verdict = (f"Out of memory before the first batch: the static floor is {gb(led.static)} "
                       f"({led.static / led.params:.0f} B per parameter), more than the {gb_gib(budget)} budget. "
                       "No batch size or checkpointing can fix that: change the optimizer or the precision.")
        elif led.total > budget:
            breaks, level = "activations", "error"
            verdict = (f"Out of memory in the forward pass: activations need {gb(led.activations)}, but only "
                       f"{gb(budget - led.static)} is left after the {gb(led.static)} static floor. "
                       "A smaller batch or checkpointing can fix this one.")
        else:
            breaks, level = "none", "ok"
            verdict = f"Fits: {gb(led.total)} of {gb_gib(budget)}, {led.total / budget:.0%} full."
            if led.total > 0.85 * budget:
                notes.append("Tight: the CUDA context takes a few hundred MiB before any tensor, and the "
                             "allocator's fragmentation more, so a plan this close to the budget can still fail.")
        if precision == "mixed":
            notes.append("Mixed precision as torch.amp does it: weights, gradients and optimizer state stay FP32, "
                         "and autocast's 16-bit copies of the weights are kept from the forward pass to the "
                         "backward, 2 B more per parameter. It shrinks the activations, not the static floor. "
                         "(Older recipes, apex O2 or DeepSpeed fp16, keep FP16 weights and gradients with an FP32 "
                         "master copy: 2 + 2 + 4 + 8 = 16 B with Adam.)")
        if precision == "fp16":
            notes.append("Pure FP16 keeps no FP32 master copy: an update smaller than half an FP16 step rounds "
                         "away, so training stalls or diverges. It saves memory; it does not train well.")

        segments = [Segment("weights", led.weights, COLOURS["weights"]),
                    Segment("gradients", led.gradients, COLOURS["gradients"])]
        if led.copies:
            segments.append(Segment("16-bit weight copies", led.copies, COLOURS["16-bit weight copies"]))
        segments += [Segment("optimizer state", led.optimizer, COLOURS["optimizer state"]),
                     Segment("activations", led.activations, COLOURS["activations"])]
        w, g, m, opt = BYTES_PER_PARAM[precision]
        n = led.params
        math_lines = [
            f"N = {n:,.0f} parameters ({preset.label})",
            f"weights     = N x {w} B = {gb(led.weights)}",
            f"gradients   = N x {g} B = {gb(led.gradients)}",
        ]
        if m:
            math_lines.append(f"16-bit copies = N x {m} B = {gb(led.copies)}  (autocast's casts, kept for backward)")
        math_lines.append(f"{optimizer:<11} = N x {opt[optimizer]} B = {gb(led.optimizer)}"
                          + ("  (exp_avg + exp_avg_sq)" if optimizer == "adam" else ""))
        if s["model"] != MY_MODEL:
            p = preset
            ckpt_text = (f"checkpointing: b x (L x s x h x {ELEMENT_BYTES[precision]} B + one layer + output)"
                         if ckpt else "b x (L x per-layer + output)")
            math_lines += [
                f"per layer, per sample = {ELEMENT_BYTES[precision]} B x (16sh + 2as^2) + (2sh + as^2) mask bytes",
                f"  s={p.seq}, h={p.hidden}, a={p.heads}, L={p.layers}: "
                f"{gb(layer_activation_bytes(p, precision))} per layer",
                f"output per sample = s x V x ({ELEMENT_BYTES[precision]} B logits + {LOSS_BYTES[precision]} B "
                f"saved log-softmax), V={VOCAB:,}: {gb(output_bytes(p, precision))}",
                f"activations = {ckpt_text} = {gb(led.activations)}  (batch {batch})",
                "  (every activation in the precision's width; autocast keeps softmax and norms in FP32, "
                "FlashAttention drops the a*s^2 terms)",
            ]
        math_lines.append(f"static floor = {gb(led.static)}; total = {gb(led.total)}")
        math_lines.append("GB = 10^9 bytes, GiB = 2^30 bytes")

        outputs = {
            "parameters": int(led.params),
            "weights_bytes": led.weights, "gradients_bytes": led.gradients, "weight_copies_bytes": led.copies,
            "optimizer_bytes": led.optimizer, "activations_bytes": led.activations,
            "static_bytes": led.static, "total_bytes": led.total,
            "bytes_per_param": led.static / led.params,
            "adam_extra_bytes": adam_extra, "adam_extra_gb": adam_extra / 1e9,
            "static_gb": led.static / 1e9, "activations_gb": led.activations / 1e9, "total_gb": led.total / 1e9,
            "budget_bytes": budget, "budget_gb": None if budget is None else budget / 1e9,
            "fits": fits, "breaks": breaks,
        }
        figures = (
            ("static floor", f"{gb(led.static)}  ({led.static / led.params:.0f} B per parameter)"),
            ("activations", f"{gb(led.activations)}  (batch {batch}{', checkpointed' if ckpt else ''})"),
            ("total", gb_gib(led.total)),
            ("Adam adds", f"{gb(adam_extra)} over SGD at this precision"),
        )
        return Reading(
            outputs=outputs,
            chart=Chart("bytes", (Bar("memory", tuple(segments)),), budget, budget_label),
            verdict=verdict, level=level, figures=figures, math=tuple(math_lines), notes=tuple(notes),
            reference=("Chapter: GPT-2 XL in FP32 needs 6 GB of weights, 6 GB of gradients and 12 GB of Adam "
                       "state (24 GB before one activation).",) if s["model"] == "gpt2-xl" else (),
        )

    def _no_model(self, s: Mapping[str, Any]) -> Reading:
        return Reading(
            outputs={k: None for k in self.outputs},
            chart=Chart("bytes", ()),
            verdict=("No measurement of your model yet: run the memory-ledger experiment (the lesson's run "
                     "step, or `gpututor run memory-ledger`) and 'my model' uses what it measured."),
            level="warning",
        )
