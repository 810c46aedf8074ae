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

Across d GPUs (data parallelism; the `parallel` and `gpus` controls), every figure is per
GPU. The table above stays; the ZeRO paper's stages divide some of its columns by d:

    parallel   weights  gradients  16-bit copies  optimizer   plus
    single        1        1            1             1        -       (d is 1: `gpus` is ignored)
    ddp           1        1            1             1        -       (a full replica on every GPU)
    zero1         1        1            1            1/d       -
    zero2         1       1/d           1            1/d       -
    zero3        1/d      1/d          1/d           1/d      the gathered weights

The paper's per-GPU model states, (2 + 2 + K)Psi for DDP, 2Psi + 2Psi + K*Psi/d (ZeRO-1),
2Psi + (2 + K)Psi/d (ZeRO-2) and (2 + 2 + K)Psi/d (ZeRO-3), are for apex-style mixed
precision (16-bit weights and gradients, K = 12: an FP32 master copy and Adam's two
moments). torch.amp has no separate master copy, its FP32 weights are the parameters, so
here they shard only at ZeRO-3, and ZeRO-1 shards Adam's 8 bytes, not 12. With d = 1
every mode is one GPU.

ZeRO-3 (FSDP FULL_SHARD) cannot compute with 1/d of a layer: it all-gathers each unit's
weights, in the compute precision (4 B in FP32; 2 B in FP16 and in mixed, which under
ZeRO-3 is modelled as FSDP's MixedPrecision(param_dtype=bfloat16): the FP32 shards are
cast, then gathered, in 16-bit), just before the unit runs, forward and again backward.
With GPT-2 wrapped one transformer block per unit, the root unit (token and position
embeddings, tied to the output layer, and the final norm: V*h + s*h + 2h) stays gathered
from the forward to the backward pass (FSDP does not free the root's weights after
forward), and one block (12h^2 + 13h) is gathered at a time on top: 113M parameters for
GPT-2 XL, 451 MB in FP32. A measured model is counted as one unit (FSDP(model) without a
wrap policy): all its weights at once. Not counted: the next block FSDP prefetches, a
block's full gradient before its reduce-scatter, DDP's all-reduce buckets (a second copy
of the gradients unless gradient_as_bucket_view=True), communication buffers.

`batch` is the per-GPU micro-batch: the activations follow it, and the global batch is
d x batch.

The optimizer state is two parts, as PyTorch keeps it: Adam's `exp_avg` (m) and `exp_avg_sq`
(v), each the size of the weights in the state's precision (4 B in FP32 and mixed, 2 B in
pure FP16); SGD with momentum keeps one buffer (`momentum_buffer`, drawn as m); plain SGD
none. `switch_off` leaves one part out of the bar, a what-if to see what each part weighs:
the verdict, the total and `fits` still count every part, because training keeps them all.

Models without a transformer's shape (ResNet-50, Stable Diffusion's UNet) get their exact
weights, gradients and optimizer state; their activations are not modelled here (the
formula above is a transformer's), and the screen says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from tutor.instruments.instrument import (
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
    layers: int = 0  # 0: not a GPT-style transformer stack; its activations are not modelled
    hidden: int = 0
    heads: int = 0
    seq: int = 1024


# Parameter counts, each from its source, as usually quoted:
# - ResNet-50: 25,557,032, torchvision's ResNet50_Weights.IMAGENET1K_V1 (He et al. 2016).
# - GPT-2: Radford et al. 2019 (the sizes as Hugging Face counts them; GPT-2 XL is "1.5B",
#   exactly 1,557,611,200), 1,024-token context.
# - Stable Diffusion v1: its UNet, the part training updates, "860M" (the CompVis/stable-diffusion
#   README: "a 860M UNet and 123M text encoder"); the frozen text encoder and VAE are in SD_FROZEN.
# - GPT-3: 175.0B, 96 layers, d_model 12,288, 96 heads, 2,048-token context, GPT-2's 50,257-token
#   vocabulary (Brown et al. 2020, Table 2.1).
PRESETS: dict[str, Preset] = {
    "resnet50": Preset("ResNet-50 (25.6M)", 25_557_032),
    "gpt2": Preset("GPT-2 small (124M)", 124e6, 12, 768, 12),
    "gpt2-medium": Preset("GPT-2 medium (355M)", 355e6, 24, 1024, 16),
    "gpt2-large": Preset("GPT-2 large (774M)", 774e6, 36, 1280, 20),
    "sd-unet": Preset("Stable Diffusion v1 UNet (860M)", 860e6),
    "gpt2-xl": Preset("GPT-2 XL (1.5B)", 1.5e9, 48, 1600, 25),
    "gpt3": Preset("GPT-3 (175B)", 175e9, 96, 12288, 96, 2048),
}
MY_MODEL = "mine"
# Stable Diffusion v1's frozen parts, not in the preset: the CLIP ViT-L/14 text encoder (123M, the
# README above) and the VAE (83.7M, diffusers' AutoencoderKL for v1). Their weights are loaded, with
# no gradients or optimizer state.
SD_FROZEN = {"text encoder": 123e6, "VAE": 83.7e6}


class Card(NamedTuple):
    name: str
    memory: int | None  # bytes; None: this machine's, known only once detected
    watts: int | None  # the vendor's TDP (total graphics power for the GeForce cards)

    @property
    def label(self) -> str:
        """'H100 SXM, "80 GB", 700 W': the name, the size it is sold as, its power."""
        if self.memory is None or self.watts is None:
            return self.name
        return f'{self.name}, "{self.memory // GIB} GB", {self.watts} W'


# Cards are sold as "80 GB", "24 GB" and "8 GB", but HBM and GDDR come in powers of two: they
# have 80, 24 and 8 GiB. PyTorch sees a little less (the driver keeps some), and the CUDA
# context takes a few hundred MiB more before any tensor. Power is each vendor's spec sheet:
# H100 SXM5 700 W, A100 SXM4 400 W (40 GB and 80 GB alike), GeForce RTX 4090 450 W and RTX 3090
# 350 W total graphics power, RTX 4060 Laptop GPU 35-115 W (its maximum, the course's figure).
BUDGETS: dict[str, Card] = {
    "h100": Card("H100 SXM", 80 * GIB, 700),
    "a100": Card("A100 SXM", 80 * GIB, 400),
    "a100-40": Card("A100 SXM", 40 * GIB, 400),
    "rtx4090": Card("RTX 4090", 24 * GIB, 450),
    "rtx3090": Card("RTX 3090", 24 * GIB, 350),
    "laptop": Card("RTX 4060 laptop", 8 * GIB, 115),
    "this": Card("this machine's device", None, None),
}
LARGEST_CARD = max(c.memory for c in BUDGETS.values() if c.memory is not None)

# bytes per parameter: (weights, gradients, autocast's 16-bit weight copies, {optimizer: state})
BYTES_PER_PARAM: dict[str, tuple[int, int, int, dict[str, int]]] = {
    "fp32": (4, 4, 0, {"sgd": 0, "momentum": 4, "adam": 8}),
    "fp16": (2, 2, 0, {"sgd": 0, "momentum": 2, "adam": 4}),
    "mixed": (4, 4, 2, {"sgd": 0, "momentum": 4, "adam": 8}),
}
ELEMENT_BYTES = {"fp32": 4, "fp16": 2, "mixed": 2}
# The optimizer's state, buffer by buffer, as torch.optim names them: (m, v)
MOMENTS = {"sgd": (), "momentum": ("momentum_buffer",), "adam": ("exp_avg", "exp_avg_sq")}


def moment_bytes(precision: str, optimizer: str) -> tuple[int, int]:
    """Bytes per parameter of m and v: each buffer is the size of the weights in the state's precision."""
    buffers = MOMENTS[optimizer]
    each = BYTES_PER_PARAM[precision][3][optimizer] // len(buffers) if buffers else 0
    return each, each if len(buffers) == 2 else 0


COLOURS = {
    "weights": "blue",
    "gradients": "magenta",
    "copies": "cyan",
    "m": "yellow",
    "v": "dark_orange",
    "gathered": "bright_blue",
    "activations": "green",
}
# The parts `switch_off` can leave out of the bar: (the option's label, why training keeps it)
PARTS: dict[str, tuple[str, str]] = {
    "none": ("nothing: every part counted", ""),
    "weights": ("weights", "the model is its weights"),
    "gradients": ("gradients", "backward writes one per parameter"),
    "copies": ("16-bit weight copies", "autocast keeps them from forward to backward"),
    "m": ("m: exp_avg or momentum_buffer", "the optimizer reads it every step"),
    "v": ("v: exp_avg_sq (Adam)", "Adam reads it every step"),
    "gathered": ("gathered weights (ZeRO-3)", "ZeRO-3 computes a unit only when it is whole"),
    "activations": ("activations", "backward needs them; without them the bar is the static floor"),
}

# Data parallelism: (the control's label, the short name, the parts split 1/d across the GPUs)
PARALLEL: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "single": ("one GPU", "one GPU", ()),
    "ddp": ("DDP (a full replica on every GPU)", "DDP", ()),
    "zero1": ("ZeRO-1 (optimizer state sharded)", "ZeRO-1", ("optimizer",)),
    "zero2": ("ZeRO-2 (+ gradients sharded)", "ZeRO-2", ("optimizer", "gradients")),
    "zero3": ("ZeRO-3 / FSDP FULL_SHARD (all sharded)", "ZeRO-3", ("optimizer", "gradients", "weights", "copies")),
}
ZERO_PAPER = (
    "ZeRO paper (reference; Rajbhandari et al. 2020, Figure 1): 7.5B parameters, K = 12 (FP32 master + "
    "Adam), 64 GPUs: per GPU DDP 120 GB, ZeRO-1 31.4 GB, ZeRO-2 16.6 GB, ZeRO-3 1.9 GB."
)
GPUS = (1, 2, 4, 8, 16, 32, 64)  # the keys' steps; any whole number in between is accepted


def data_parallel(parallel: str, gpus: int) -> int:
    """d, the GPUs training is spread over: 1 on one GPU, whatever `gpus` says."""
    return 1 if parallel == "single" else gpus


def block_params(p: Preset) -> float:
    """One GPT-2 transformer block: attention 4h^2 + 4h, MLP 8h^2 + 5h, two LayerNorms 4h."""
    return 12 * p.hidden**2 + 13 * p.hidden


def root_params(p: Preset) -> float:
    """FSDP's root unit when each block is its own unit: the token and position embeddings
    (the token one tied to the output layer) and the final LayerNorm."""
    return VOCAB * p.hidden + p.seq * p.hidden + 2 * p.hidden


def gathered_params(p: Preset) -> float:
    """Parameters ZeRO-3 holds whole at once: the root unit, kept gathered from forward to
    backward, and one block; a model of unknown layers (measured) is one unit, all of it."""
    if not p.layers:
        return p.params
    return root_params(p) + block_params(p)


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
    m: float  # Adam's exp_avg, or SGD's momentum_buffer
    v: float  # Adam's exp_avg_sq
    activations: float
    gathered: float = 0.0  # ZeRO-3: the weights all-gathered whole at once (per GPU)
    gpus: int = 1  # d: every figure above is per GPU

    @property
    def optimizer(self) -> float:
        return self.m + self.v

    @property
    def static(self) -> float:
        return self.weights + self.gradients + self.copies + self.optimizer + self.gathered

    @property
    def total(self) -> float:
        return self.static + self.activations

    def part(self, name: str) -> float:
        """One part by its `switch_off` name; 'none' is 0."""
        return 0.0 if name == "none" else float(getattr(self, name))


def ledger(
    preset: Preset,
    precision: str,
    optimizer: str,
    batch: int,
    checkpointing: bool,
    activation_per_sample: float | None = None,
    parallel: str = "single",
    gpus: int = 1,
) -> Ledger:
    """Bytes per GPU; `batch` is each GPU's micro-batch."""
    w, g, c, _ = BYTES_PER_PARAM[precision]
    m, v = moment_bytes(precision, optimizer)
    n = preset.params
    d = data_parallel(parallel, gpus)
    sharded = PARALLEL[parallel][2] if d > 1 else ()

    def part(name: str, per_param: int) -> float:
        return n * per_param / d if name in sharded else n * per_param

    if activation_per_sample is not None:  # measured ("my model"): float32, scaled for 16-bit
        acts = activation_per_sample * batch * ELEMENT_BYTES[precision] / 4
    elif preset.layers:
        acts = activation_bytes(preset, precision, batch, checkpointing)
    else:
        acts = 0.0  # not modelled: the formula here is a transformer's
    gathered = gathered_params(preset) * ELEMENT_BYTES[precision] if "weights" in sharded else 0.0
    return Ledger(
        n,
        part("weights", w),
        part("gradients", g),
        part("copies", c),
        part("optimizer", m),
        part("optimizer", v),
        acts,
        gathered,
        d,
    )


@dataclass(frozen=True)
class _Numbers:
    """One reading's figures before any words: what compute() draws and compute_outputs() returns."""

    preset: Preset
    per_sample: float | None  # a measured model's activations per sample (FP32), else None
    led: Ledger
    budget: float | None
    budget_label: str
    adam_extra: float
    acts_modelled: bool  # False: a model this ledger has no activation formula for
    outputs: dict[str, Any]


class MemoryLedger(Instrument):
    name = "memory-ledger"
    title = "Memory ledger"
    summary = "Training memory part by part (weights, gradients, optimizer state, activations) against a budget"
    controls = (
        Control(
            "model",
            "Model",
            "choice",
            (*PRESETS, MY_MODEL),
            "gpt2-xl",
            labels=(*(p.label for p in PRESETS.values()), "my model (latest memory-ledger run)"),
            help="GPT-2 and GPT-3 with their activations; ResNet-50 and the SD UNet without",
        ),
        Control(
            "optimizer",
            "Optimizer",
            "choice",
            ("sgd", "momentum", "adam"),
            "adam",
            labels=("SGD", "SGD + momentum", "Adam"),
        ),
        Control(
            "precision",
            "Precision",
            "choice",
            ("fp32", "fp16", "mixed"),
            "fp32",
            labels=("FP32", "FP16 (pure, no master copy)", "mixed (torch.amp: FP32 weights, 16-bit matmuls)"),
        ),
        Control(
            "batch",
            "Batch size",
            "stepper",
            tuple(2**k for k in range(17)),
            4,
            help="each GPU's micro-batch; the global batch is GPUs x batch",
        ),
        Control("checkpointing", "Checkpointing", "toggle", (False, True), False),
        Control(
            "parallel",
            "Parallelism",
            "choice",
            tuple(PARALLEL),
            "single",
            labels=tuple(v[0] for v in PARALLEL.values()),
            help="how the model's states are spread over the GPUs; one GPU ignores `gpus`",
        ),
        Control("gpus", "GPUs", "stepper", GPUS, 1, help="data-parallel GPUs; ignored on one GPU"),
        Control(
            "budget",
            "Budget",
            "choice",
            tuple(BUDGETS),
            "h100",
            labels=tuple(card.label for card in BUDGETS.values()),
            help="each GPU's memory, with the card's power (TDP)",
        ),
        Control(
            "switch_off",
            "Switch off",
            "choice",
            tuple(PARTS),
            "none",
            labels=tuple(label for label, _ in PARTS.values()),
            help="leave one part out of the bar to see what it weighs; the verdict still counts it",
            affects=("switched_off_bytes", "counted_bytes", "counted_gb"),
        ),
    )
    outputs = {
        "parameters": "parameters of the model",
        "weights_bytes": "the weights, per GPU (B)",
        "gradients_bytes": "one gradient per parameter, per GPU (B)",
        "weight_copies_bytes": "autocast's 16-bit copies of the weights, kept for the backward pass, per GPU (B)",
        "optimizer_bytes": "optimizer state, per GPU (B): m_bytes + v_bytes",
        "m_bytes": "m: Adam's exp_avg or SGD's momentum_buffer, per GPU (B); 0 for plain SGD",
        "v_bytes": "v: Adam's exp_avg_sq, per GPU (B); 0 for SGD",
        "gathered_bytes": "ZeRO-3: the weights all-gathered whole at once, per GPU (B); 0 otherwise",
        "activations_bytes": "activations saved for the backward pass, per GPU (B); 0 where not modelled",
        "activations_modelled": "whether this model's activations are counted (not for ResNet-50 or the SD UNet)",
        "static_bytes": "weights + gradients + 16-bit copies + optimizer state + gathered weights: "
        "the floor at any batch size, per GPU (B)",
        "total_bytes": "static + activations, per GPU (B)",
        "bytes_per_param": "static bytes per GPU per parameter of the model",
        "weights_16bit_gb": "the weights alone in 16-bit, 2 B x parameters, in GB, on all GPUs together",
        "switched_off_bytes": "the part switch_off leaves out of the bar, per GPU (B); 0 with nothing off",
        "counted_bytes": "what the bar draws: total_bytes - switched_off_bytes, per GPU (B)",
        "counted_gb": "the same, in GB",
        "adam_extra_bytes": "what Adam adds over plain SGD at this precision, per GPU (B)",
        "adam_extra_gb": "the same, in GB (10^9 bytes)",
        "static_gb": "the static floor per GPU, in GB",
        "activations_gb": "activations per GPU, in GB",
        "total_gb": "total per GPU, in GB",
        "gpus_used": "d, the GPUs training is spread over: the gpus control, or 1 on one GPU",
        "global_batch": "samples per step over all GPUs: gpus_used x batch",
        "all_gpus_gb": "total over all the GPUs, in GB: gpus_used x total_gb",
        "budget_bytes": "the chosen device's memory (B), each GPU's; null when unknown",
        "budget_gb": "the same, in GB",
        "budget_watts": "the chosen card's power, the vendor's TDP (W); null for this machine",
        "fits": "total per GPU <= budget (null when the budget is unknown)",
        "breaks": "what breaks the budget: none, static floor, activations, or unknown (no budget)",
    }
    outputs_kind = {"fits": bool, "breaks": str, "activations_modelled": bool}

    def needs_context(self, settings: Mapping[str, Any]) -> bool:
        return settings.get("model") == MY_MODEL or settings.get("budget") == "this"

    def _numbers(self, s: Mapping[str, Any], ctx: Context) -> _Numbers | None:
        """The figures of parsed settings `s`, no words; None when "my model" has no measurement."""
        precision, optimizer, batch, ckpt = s["precision"], s["optimizer"], s["batch"], s["checkpointing"]
        parallel = s["parallel"]
        d = data_parallel(parallel, s["gpus"])
        per_sample = None
        if s["model"] == MY_MODEL:
            mine = ctx.my_model
            if not mine or not mine.get("parameters"):
                return None
            preset = Preset(mine.get("label") or "my model", float(mine["parameters"]))
            per_sample = float(mine["activation_bytes_per_sample"])
        else:
            preset = PRESETS[s["model"]]
        acts_modelled = per_sample is not None or bool(preset.layers)
        led = ledger(preset, precision, optimizer, batch, ckpt, per_sample, parallel, d)
        card = BUDGETS[s["budget"]]
        budget_label, budget = card.label, card.memory
        if s["budget"] == "this":
            budget = ctx.device_memory
            budget_label = f"this machine: {ctx.device_name}" if ctx.device_name else "this machine (not detected yet)"
        adam_extra = led.params * BYTES_PER_PARAM[precision][3]["adam"]
        if d > 1 and "optimizer" in PARALLEL[parallel][2]:
            adam_extra /= d
        fits = None if budget is None else led.total <= budget
        if budget is None:
            breaks = "unknown"
        elif led.static > budget:
            breaks = "static floor"
        elif led.total > budget:
            breaks = "activations"
        else:
            breaks = "none"
        off = led.part(s["switch_off"])
        outputs = {
            "parameters": int(led.params),
            "weights_bytes": led.weights,
            "gradients_bytes": led.gradients,
            "weight_copies_bytes": led.copies,
            "optimizer_bytes": led.optimizer,
            "m_bytes": led.m,
            "v_bytes": led.v,
            "gathered_bytes": led.gathered,
            "activations_bytes": led.activations,
            "activations_modelled": acts_modelled,
            "static_bytes": led.static,
            "total_bytes": led.total,
            "bytes_per_param": led.static / led.params,
            "weights_16bit_gb": 2 * led.params / 1e9,
            "switched_off_bytes": off,
            "counted_bytes": led.total - off,
            "counted_gb": (led.total - off) / 1e9,
            "adam_extra_bytes": adam_extra,
            "adam_extra_gb": adam_extra / 1e9,
            "static_gb": led.static / 1e9,
            "activations_gb": led.activations / 1e9,
            "total_gb": led.total / 1e9,
            "gpus_used": d,
            "global_batch": d * batch,
            "all_gpus_gb": d * led.total / 1e9,
            "budget_bytes": budget,
            "budget_gb": None if budget is None else budget / 1e9,
            "budget_watts": card.watts,
            "fits": fits,
            "breaks": breaks,
        }
        return _Numbers(preset, per_sample, led, budget, budget_label, adam_extra, acts_modelled, outputs)

    def compute_outputs(self, settings: Mapping[str, Any], context: Context | None = None) -> dict[str, Any]:
        numbers = self._numbers(self.settings(settings), context or Context())
        return dict.fromkeys(self.outputs) if numbers is None else numbers.outputs

    def compute(self, settings: Mapping[str, Any], context: Context | None = None) -> Reading:
        s = self.settings(settings)
        numbers = self._numbers(s, context or Context())
        if numbers is None:
            return self._no_model(s)
        preset, led, budget, budget_label = numbers.preset, numbers.led, numbers.budget, numbers.budget_label
        adam_extra, outputs, breaks = numbers.adam_extra, numbers.outputs, numbers.outputs["breaks"]
        precision, optimizer, batch, ckpt = s["precision"], s["optimizer"], s["batch"], s["checkpointing"]
        parallel = s["parallel"]
        d = led.gpus
        multi = parallel != "single"  # every figure is "per GPU", and said so
        per_gpu = " per GPU" if multi else ""
        sharded = PARALLEL[parallel][2] if d > 1 else ()
        mode = PARALLEL[parallel][1]
        notes: list[str] = []
        if numbers.per_sample is not None:
            notes.append(
                f"{preset.label}: {int(preset.params):,} parameters and {numbers.per_sample:,.0f} B of "
                "activations per sample, measured by your memory-ledger run (FP32; halved for 16-bit)."
            )
            if ckpt:
                notes.append("Checkpointing is not modelled for a measured model: its activations are as measured.")
        per_param = f"{led.static / led.params:.3g}" if multi else f"{led.static / led.params:.0f}"
        level: Literal["ok", "warning", "error"]
        if breaks == "unknown" or budget is None:  # the same test: "unknown" is what no budget breaks
            level = "warning"
            verdict = f"Needs {gb(led.total)}{per_gpu}. The budget is unknown: {budget_label}."
        elif breaks == "static floor":
            level = "error"
            verdict = (
                f"Out of memory before the first batch: the static floor is {gb(led.static)}{per_gpu} "
                f"({per_param} B per parameter), more than the {gb_gib(budget)} budget. "
            )
            least = ledger(preset, "fp16", "sgd", 1, False, numbers.per_sample, parallel, d).static
            if least > budget:  # no optimizer or precision fits either: say so, not "change them"
                verdict += (
                    "No batch size, checkpointing, optimizer or precision can fix that: the least, SGD in "
                    f"pure FP16, is {gb(least)}{per_gpu}. "
                    + {
                        "single": "Only spreading it over GPUs can (Parallelism).",
                        "ddp": "DDP puts all of it on every GPU: shard it (a ZeRO stage).",
                        "zero3": "Add GPUs.",
                    }.get(parallel, "Shard more (a higher ZeRO stage) or add GPUs.")
                )
            else:
                verdict += "No batch size or checkpointing can fix that: change the optimizer or the precision" + {
                    "single": ".",
                    "ddp": ", or shard it: DDP puts all of it on every GPU, so more GPUs do not help.",
                    "zero3": ", or add GPUs.",
                }.get(parallel, ", shard more (a higher ZeRO stage) or add GPUs.")
        elif breaks == "activations":
            level = "error"
            verdict = (
                f"Out of memory in the forward pass: activations need {gb(led.activations)}{per_gpu}, but only "
                f"{gb(budget - led.static)} is left after the {gb(led.static)} static floor. "
                + (
                    "A smaller per-GPU batch (more GPUs keep the global batch) or checkpointing can fix this one."
                    if multi
                    else "A smaller batch or checkpointing can fix this one."
                )
            )
        else:
            level = "ok"
            filled = led.total / budget
            verdict = f"Fits: {gb(led.total)} of {gb_gib(budget)}{per_gpu}, " + (
                f"{filled:.0%} full." if filled >= 0.01 else f"{filled:.1%} full."
            )
            if led.total > 0.85 * budget:
                notes.append(
                    "Tight: the CUDA context takes a few hundred MiB before any tensor, and the "
                    "allocator's fragmentation more, so a plan this close to the budget can still fail."
                )
        if precision == "mixed":
            notes.append(
                "Mixed precision as torch.amp does it: weights, gradients and optimizer state stay FP32, "
                "and autocast's 16-bit copies of the weights are kept from the forward pass to the "
                "backward, 2 B more per parameter. It shrinks the activations, not the static floor. "
                "(Older recipes, apex O2 or DeepSpeed fp16, keep FP16 weights and gradients with an FP32 "
                "master copy: 2 + 2 + 4 + 8 = 16 B with Adam.)"
            )
        if precision == "fp16":
            notes.append(
                "Pure FP16 keeps no FP32 master copy: an update smaller than half an FP16 step rounds "
                "away, so training stalls or diverges. It saves memory; it does not train well."
            )
        if not numbers.acts_modelled:
            verdict += " Activations not counted: this ledger has no formula for this model's."
        notes += _model_notes(s["model"], preset, budget)
        notes += self._parallel_notes(parallel, s["gpus"], d, precision, preset, led)
        off = s["switch_off"]
        names = part_names(optimizer)
        if off != "none":
            notes.append(_switch_off_note(off, names[off], led, optimizer, per_gpu))

        segments = [Segment(names[p], led.part(p), COLOURS[p], off=p == off) for p in _drawn_parts(led, numbers)]
        w, g, m, opt = BYTES_PER_PARAM[precision]
        n = led.params

        def share(part: str, name: str, size: int, value: float, why_full: str, why_sharded: str) -> str:
            if part in sharded:
                return f"{name:<11} = N x {size} B / {d} = {gb(value)}  ({mode}: {why_sharded})"
            return f"{name:<11} = N x {size} B = {gb(value)}" + (f"  ({why_full})" if why_full else "")

        full = "full on each GPU" if d > 1 else ""
        math_lines = [
            f"N = {n:,.0f} parameters ({preset.label})"
            + (f"; {mode} over {d} GPU{'s' if d > 1 else ''}, figures per GPU" if multi else ""),
            share(
                "weights",
                "weights",
                w,
                led.weights,
                "a full replica on each GPU" if d > 1 else "",
                f"each of the {d} GPUs keeps 1/{d}",
            ),
            share(
                "gradients",
                "gradients",
                g,
                led.gradients,
                "all-reduced, full on each GPU" if d > 1 else "",
                f"reduce-scattered, each GPU keeps the 1/{d} it updates",
            ),
        ]
        if m:
            math_lines.append(
                share(
                    "copies",
                    "16-bit copies",
                    m,
                    led.copies,
                    "autocast's casts, kept for backward",
                    f"16-bit casts of each GPU's 1/{d}",
                )
            )
        state_full = {"adam": "exp_avg + exp_avg_sq" + (f"; {full}" if full else ""), "momentum": full, "sgd": ""}[
            optimizer
        ]
        state = {"adam": "Adam's moments", "momentum": "the momentum buffers"}.get(optimizer)
        state_sharded = (
            f"each of the {d} GPUs keeps 1/{d} of {state} and updates its 1/{d} of the weights"
            if state
            else f"no state; each GPU updates its 1/{d} of the weights"
        )
        math_lines.append(share("optimizer", optimizer, opt[optimizer], led.optimizer, state_full, state_sharded))
        if optimizer == "adam":
            each, split = moment_bytes(precision, optimizer)[0], ("optimizer" in sharded)
            per = f"N x {each} B" + (f" / {d}" if split else "")
            math_lines.append(f"  m exp_avg = {per} = {gb(led.m)};  v exp_avg_sq = {per} = {gb(led.v)}")
        if led.gathered:
            e = ELEMENT_BYTES[precision]
            if preset.layers:
                math_lines += [
                    f"gathered    = (Vh + sh + 2h) + (12h^2 + 13h) = {gathered_params(preset) / 1e6:,.1f}M "
                    f"x {e} B = {gb(led.gathered)}",
                    f"  ({mode} all-gathers a unit's weights whole, in the compute precision, just before it "
                    "runs: the root unit, embeddings tied to the output layer, stays gathered from forward to "
                    "backward, and one block at a time joins it)",
                ]
            else:
                whose = "your model is" if s["model"] == MY_MODEL else "counted as"
                math_lines.append(
                    f"gathered    = N x {e} B = {gb(led.gathered)}  ({mode}: {whose} one FSDP unit, gathered whole)"
                )
        if not numbers.acts_modelled:
            math_lines.append("activations: not modelled (the formula here is a GPT-style transformer's)")
        elif s["model"] != MY_MODEL:
            p = preset
            ckpt_text = (
                f"checkpointing: b x (L x s x h x {ELEMENT_BYTES[precision]} B + one layer + output)"
                if ckpt
                else "b x (L x per-layer + output)"
            )
            math_lines += [
                f"per layer, per sample = {ELEMENT_BYTES[precision]} B x (16sh + 2as^2) + (2sh + as^2) mask bytes",
                f"  s={p.seq}, h={p.hidden}, a={p.heads}, L={p.layers}: "
                f"{gb(layer_activation_bytes(p, precision))} per layer",
                f"output per sample = s x V x ({ELEMENT_BYTES[precision]} B logits + {LOSS_BYTES[precision]} B "
                f"saved log-softmax), V={VOCAB:,}: {gb(output_bytes(p, precision))}",
                f"activations = {ckpt_text} = {gb(led.activations)}  (batch {batch}"
                + (f" per GPU; global batch {d} x {batch} = {d * batch:,})" if multi else ")"),
                "  (every activation in the precision's width; autocast keeps softmax and norms in FP32, "
                "FlashAttention drops the a*s^2 terms)",
            ]
        if multi:
            math_lines.append(
                f"per GPU: static floor = {gb(led.static)}; total = {gb(led.total)}; "
                f"all {d} GPU{'s' if d > 1 else ''}: {d} x {gb(led.total)} = {gb(d * led.total)}"
            )
        else:
            math_lines.append(f"static floor = {gb(led.static)}; total = {gb(led.total)}")
        if off != "none":
            math_lines.append(
                f"the bar, {names[off]} switched off = total - {gb(led.part(off))} = {gb(led.total - led.part(off))}"
            )
        math_lines.append(f"weights alone in 16-bit = N x 2 B = {gb(2 * n)}")
        math_lines.append("GB = 10^9 bytes, GiB = 2^30 bytes")

        figures: tuple[tuple[str, str], ...]
        acts = (
            f"{gb(led.activations)}{per_gpu}  (batch {batch}{per_gpu}{', checkpointed' if ckpt else ''})"
            if numbers.acts_modelled
            else "not modelled for this model: the total is the static floor"
        )
        if multi:
            figures = (
                ("static floor", f"{gb(led.static)} per GPU  ({per_param} B per parameter)"),
                ("activations", acts),
                ("total", f"{gb_gib(led.total)} per GPU; {gb(d * led.total)} on all {d}"),
                (
                    "global batch",
                    f"{d * batch:,} = {d} GPU{'s' if d > 1 else ''} x {batch} per GPU  (Batch "
                    "size is each GPU's micro-batch)",
                ),
                _adam_line(optimizer, adam_extra, precision, " per GPU"),
            )
        else:
            figures = (
                ("static floor", f"{gb(led.static)}  ({per_param} B per parameter)"),
                ("activations", acts),
                ("total", gb_gib(led.total)),
                _adam_line(optimizer, adam_extra, precision),
            )
        if off != "none":
            figures = (_switched_off_line(off, names[off], led, per_gpu), *figures)
        reference: tuple[str, ...] = ()
        if s["model"] == "gpt2-xl":
            reference += (
                "Chapter: GPT-2 XL in FP32 needs 6 GB of weights, 6 GB of gradients and 12 GB of Adam "
                "state (24 GB before one activation).",
            )
        reference += _course_reference(s["model"], preset)
        if multi:
            reference += (ZERO_PAPER,)
        ignored: tuple[str, ...] = () if multi else ("gpus",)
        if not numbers.acts_modelled:
            ignored += ("batch", "checkpointing")
        return Reading(
            outputs=outputs,
            chart=Chart("bytes", (Bar("per GPU" if multi else "memory", tuple(segments)),), budget, budget_label),
            verdict=verdict,
            level=level,
            figures=figures,
            math=tuple(math_lines),
            notes=tuple(notes),
            reference=reference,
            ignored=ignored,
        )

    @staticmethod
    def _parallel_notes(parallel: str, gpus: int, d: int, precision: str, preset: Preset, led: Ledger) -> list[str]:
        mode = PARALLEL[parallel][1]
        if parallel == "single":
            return (
                []
                if gpus == 1
                else [
                    f"GPUs = {gpus} is ignored: Parallelism is one GPU. Pick DDP or a ZeRO "
                    "stage to spread training over several."
                ]
            )
        if d == 1:
            return [f"With 1 GPU there is nothing to replicate or shard: {mode} is one GPU. Raise GPUs."]
        notes = [
            {
                "ddp": (
                    f"DDP: each of the {d} GPUs holds a full replica (weights, gradients, optimizer state) and "
                    "runs its own micro-batch; gradients are all-reduced after backward. Per GPU that is one "
                    "GPU's memory: more GPUs buy throughput, not room. Not counted: DDP's all-reduce buckets, a "
                    "second copy of the gradients unless gradient_as_bucket_view=True."
                ),
                "zero1": (
                    f"ZeRO-1: each GPU keeps and updates 1/{d} of the optimizer state, then the updated weights "
                    "are all-gathered: the same communication volume as DDP (Rajbhandari et al. 2020)."
                ),
                "zero2": (
                    f"ZeRO-2: gradients are reduce-scattered, so each GPU keeps only the 1/{d} it updates, with "
                    f"its 1/{d} of the optimizer state: the same communication volume as DDP."
                ),
                "zero3": (
                    f"ZeRO-3 / FSDP FULL_SHARD: each GPU keeps 1/{d} of everything and all-gathers a unit's "
                    "weights just before it runs, forward and again backward: 1.5x DDP's communication "
                    "volume (Rajbhandari et al. 2020)."
                ),
            }[parallel]
        ]
        if parallel == "zero3" and preset.layers:
            e = ELEMENT_BYTES[precision]
            notes.append(
                f"Gathered and counted: the root unit (embeddings, tied to the output layer), "
                f"{gb(root_params(preset) * e)}, and one block, {gb(block_params(preset) * e)}. Not "
                f"counted: the next block FSDP prefetches and a block's full gradient before its "
                f"reduce-scatter, up to {gb(block_params(preset) * e)} each."
            )
        if parallel == "zero3" and not preset.layers:
            whose = f"{preset.label} is" if preset in PRESETS.values() else "Your model is"
            notes.append(
                f"{whose} counted as one FSDP unit (FSDP(model) with no wrap policy): all its weights are "
                "gathered at once. Wrapping each block as a unit would gather less."
            )
        if parallel == "zero3" and precision == "mixed":
            notes.append(
                "Mixed precision under ZeRO-3 is modelled as FSDP's MixedPrecision(param_dtype="
                "bfloat16): the FP32 shards are cast and gathered in 16-bit, so the 16-bit copies shard "
                "too. torch.amp's autocast over FSDP would keep every layer's 16-bit copy for the backward "
                f"pass instead: {gb(2 * led.params)} per GPU, unsharded."
            )
        if parallel in ("zero1", "zero2") and precision == "mixed":
            paper = (
                f"2 + 2 + 12/{d} = {4 + 12 / d:.3g}" if parallel == "zero1" else f"2 + (2 + 12)/{d} = {2 + 14 / d:.3g}"
            )
            notes.append(
                "DeepSpeed's ZeRO keeps 16-bit weights and gradients and shards an FP32 master copy "
                f"with Adam's state: {paper} B per parameter at {mode} with Adam, the paper's accounting. "
                "torch.amp has no master copy: its FP32 weights are the parameters, and shard only at "
                "ZeRO-3."
            )
        return notes

    def _no_model(self, s: Mapping[str, Any]) -> Reading:
        return Reading(
            outputs={k: None for k in self.outputs},
            chart=Chart("bytes", ()),
            verdict=(
                "No measurement of your model yet: run the memory-ledger experiment (the lesson's run "
                "step, or `gpututor run memory-ledger`) and 'my model' uses what it measured."
            ),
            level="warning",
        )


def _adam_line(optimizer: str, adam_extra: float, precision: str, per_gpu: str = "") -> tuple[str, str]:
    """What Adam costs beside the optimizer chosen: over plain SGD when Adam or SGD is chosen, and
    over the momentum buffers too when SGD + momentum is (it already keeps one of Adam's two)."""
    if optimizer == "adam":
        return ("Adam adds", f"{gb(adam_extra)}{per_gpu} over plain SGD at this precision")
    if optimizer == "sgd":
        return ("Adam instead", f"would add {gb(adam_extra)}{per_gpu} to this plain SGD, at this precision")
    state = BYTES_PER_PARAM[precision][3]
    over_momentum = adam_extra * (state["adam"] - state["momentum"]) / state["adam"]
    return (
        "Adam instead",
        f"would add {gb(over_momentum)}{per_gpu} to this SGD + momentum "
        f"({gb(adam_extra)} over plain SGD), at this precision",
    )


def part_names(optimizer: str) -> dict[str, str]:
    """Each part's name on the chart; m and v by the names torch.optim keeps them under."""
    buffers = MOMENTS[optimizer]
    return {
        "weights": "weights",
        "gradients": "gradients",
        "copies": "16-bit weight copies",
        "m": f"m {buffers[0]}" if buffers else "m",
        "v": f"v {buffers[1]}" if len(buffers) == 2 else "v",
        "gathered": "gathered weights",
        "activations": "activations",
    }


def _drawn_parts(led: Ledger, numbers: _Numbers) -> list[str]:
    """The parts this setup has, in the order the bar stacks them."""
    has = {
        "weights": True,
        "gradients": True,
        "copies": bool(led.copies),
        "m": bool(led.m),
        "v": bool(led.v),
        "gathered": bool(led.gathered),
        "activations": numbers.acts_modelled,
    }
    return [p for p in PARTS if p != "none" and has[p]]


def _switched_off_line(off: str, name: str, led: Ledger, per_gpu: str) -> tuple[str, str]:
    part = led.part(off)
    if not part:
        return ("switched off", f"{name}: this setup has none, so the bar does not move")
    return ("switched off", f"{name}, {gb(part)}: the bar shows {gb(led.total - part)} of {gb(led.total)}{per_gpu}")


def _switch_off_note(off: str, name: str, led: Ledger, optimizer: str, per_gpu: str) -> str:
    """Why the verdict still counts the part the bar leaves out."""
    if not led.part(off):
        return f"Switch off {name}: this setup keeps none of it."
    why = PARTS[off][1]
    real = {
        ("v", "adam"): " Without v, Adam is roughly SGD + momentum: the Optimizer control gives that for real.",
        ("m", "adam"): " Plain SGD keeps neither m nor v: the Optimizer control gives it for real.",
        ("m", "momentum"): " Plain SGD keeps no momentum: the Optimizer control gives it for real.",
        ("activations", optimizer): "",
    }.get((off, optimizer), "")
    return (
        f"A what-if: the bar leaves out {name} ({gb(led.part(off))}{per_gpu}), but training keeps it ({why}), "
        f"so the verdict, the total and fits still count it.{real}"
    )


def _model_notes(model: str, preset: Preset, budget: float | None) -> list[str]:
    """What a preset counts, where that needs saying, and a model whose 16-bit weights alone outgrow a GPU."""
    notes = []
    if model == "resnet50":
        notes.append(
            f"ResNet-50 ({preset.params:,.0f} parameters, torchvision): weights, gradients and optimizer state "
            "are exact. A CNN's activations (batch x channels x height x width per layer) are not modelled "
            "here: this ledger's formula is a transformer's."
        )
    if model == "sd-unet":
        frozen = sum(SD_FROZEN.values())
        notes.append(
            f"Stable Diffusion v1: counted is its UNet ({preset.params / 1e6:,.0f}M), the part training updates. "
            f"The frozen text encoder and VAE ({frozen / 1e6:,.0f}M) add {gb(4 * frozen)} of FP32 weights with "
            "no gradients or optimizer state. Its activations (a UNet's) are not modelled here."
        )
    if model == "gpt3":
        notes.append(
            "GPT-3 alternates dense and locally banded sparse attention layers (Brown et al. 2020); the "
            "activations here count every layer dense."
        )
    weights = 2 * preset.params
    if weights > LARGEST_CARD:
        notes.append(
            f"The weights alone, in 16-bit (N x 2 B), are {gb(weights)}: more than the largest card here, "
            f"{gb_gib(LARGEST_CARD)}, so no one of these GPUs can even hold the model, let alone train it. "
            "Training it takes many GPUs, each holding a share (Parallelism: ZeRO-3)."
        )
    elif budget is not None and weights > budget:
        notes.append(f"The weights alone, in 16-bit (N x 2 B), are {gb(weights)}: more than this budget.")
    return notes


def _course_reference(model: str, preset: Preset) -> tuple[str, ...]:
    """The model sizes GPU Lab's source gives (the course's Lab 5, "Modern models are HUGE"), each beside
    what it counts."""
    n = preset.params
    if model == "resnet50":
        return (f'GPU Lab: "ResNet-50: ~100 MB". Its FP32 weights: N x 4 B = {gb(4 * n)}.',)
    if model == "sd-unet":
        whole = n + sum(SD_FROZEN.values())
        return (
            f'GPU Lab: "Stable Diffusion: ~5 GB". The whole v1 model (UNet, text encoder, VAE: '
            f"{whole / 1e9:.2f}B parameters) in FP32 is {gb(4 * whole)}; the UNet alone {gb(4 * n)}.",
        )
    if model == "gpt3":
        return (
            f'GPU Lab: "GPT-3: 350 GB (just weights!)". Right for 16-bit weights: N x 2 B = {gb(2 * n)}; '
            f"in FP32 {gb(4 * n)}, and training with Adam in FP32 needs 16 B a parameter: {gb(16 * n)}.",
        )
    return ()
