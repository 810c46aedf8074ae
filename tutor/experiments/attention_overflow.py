"""attention-overflow: a transformer's attention scores overflow float16 before the softmax.

Each token's score with itself is q·q = |q|^2. With activations of size `magnitude` in `dim`
entries that is magnitude^2 x dim, and float16 holds nothing above 65504: the score becomes inf,
and a softmax over a row holding inf computes inf - inf = NaN, however precise the softmax
itself. The same scores in bfloat16 (float32's 8 exponent bits) stay finite; dividing q by
sqrt(dim) first, as every attention does, brings them back inside float16's range. What
autocast does with each op is read off the tensors it returns on this device, not assumed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.attention_overflow import AttentionOverflowParams

FP16_MAX = torch.finfo(torch.float16).max


def activations(p: AttentionOverflowParams, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention's q (= k, one projection for both) with rows of size magnitude x sqrt(dim),
    and its values."""
    gen = torch.Generator().manual_seed(p.seed)
    x = torch.randn(p.tokens, p.dim, generator=gen)
    q = x / x.norm(dim=1, keepdim=True) * p.magnitude * math.sqrt(p.dim)
    v = torch.randn(p.tokens, p.dim, generator=gen)
    return q.to(device), v.to(device)


def attention(q: torch.Tensor, v: torch.Tensor, dtype: torch.dtype, scaled: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores in `dtype`, the output with the softmax taken in float32 of those scores)."""
    qd = q.to(dtype)
    if scaled:
        qd = qd / math.sqrt(q.shape[1])
    scores = qd @ q.to(dtype).T
    weights = torch.softmax(scores.float(), dim=-1)  # float32: as precise as a softmax gets
    return scores, weights @ v.float()


def nan_rows(out: torch.Tensor) -> int:
    return int(torch.isnan(out.float()).any(dim=-1).sum().item())


def measure(p: AttentionOverflowParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    yield Started(
        "attention-overflow", device, dev.name, "none (random activations)", f"{p.tokens} tokens, head size {p.dim}"
    )
    q, v = activations(p, device)
    scores32, out32 = attention(q, v, torch.float32, scaled=False)
    largest = float(scores32.max().item())
    scores16, out16 = attention(q, v, torch.float16, scaled=False)
    scores_bf, out_bf = attention(q, v, torch.bfloat16, scaled=False)
    scores16s, out16s = attention(q, v, torch.float16, scaled=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q.half()[None], q.half()[None], v.half()[None])[
        0
    ]  # PyTorch's own attention: it scales by 1/sqrt(dim)
    bf16_error = float(((out_bf - out32).abs().max() / out32.abs().max()).item())

    with torch.autocast(device_type=dev.kind if dev.kind in ("cuda", "mps") else "cpu", dtype=torch.float16):
        auto_scores = q @ q.T
        auto_weights = torch.softmax(auto_scores, dim=-1)
        auto_out = auto_weights @ v
    matmul_dtype = str(auto_scores.dtype).removeprefix("torch.")
    softmax_dtype = str(auto_weights.dtype).removeprefix("torch.")

    rows = [
        ["float32", f"{largest:,.0f}", "0", str(nan_rows(out32))],
        ["float16", _shown(scores16), str(_infs(scores16)), str(nan_rows(out16))],
        ["bfloat16", _shown(scores_bf), str(_infs(scores_bf)), str(nan_rows(out_bf))],
        ["float16, q / sqrt(dim) first", _shown(scores16s), str(_infs(scores16s)), str(nan_rows(out16s))],
        ["scaled_dot_product_attention, float16", "-", "-", str(nan_rows(sdpa))],
        [
            f"autocast (q·k in {matmul_dtype}, softmax in {softmax_dtype})",
            _shown(auto_scores),
            str(_infs(auto_scores)),
            str(nan_rows(auto_out)),
        ],
    ]
    yield Table(
        f"{p.tokens} x {p.tokens} attention scores, magnitude {p.magnitude:g} in {p.dim} entries",
        ["scores computed in", "largest score", "inf scores", "NaN rows"],
        rows,
    )
    if largest > FP16_MAX:
        yield Note(
            f"Each token's score with itself is about {p.magnitude:g}^2 x {p.dim} = {p.magnitude**2 * p.dim:,.0f}, "
            f"past float16's largest number ({FP16_MAX:,.0f}): the float16 product wrote inf. The softmax above "
            "ran in float32 and still gave NaN, because inf - inf is NaN whatever the precision: once a score "
            "has overflowed, no later float32 op can bring it back. bfloat16 has float32's 8 exponent bits and "
            f"kept every score finite; dividing q by sqrt({p.dim}) before the product, as every attention does, "
            f"brings the largest score to {largest / math.sqrt(p.dim):,.0f}, inside float16.",
            "result",
        )
    else:
        yield Note(
            f"The largest score, {largest:,.0f}, fits in float16 (up to {FP16_MAX:,.0f}): nothing overflowed at "
            f"this magnitude. Raise magnitude until magnitude^2 x {p.dim} passes {FP16_MAX:,.0f} to see it.",
            "result",
        )
    yield Note(
        f"Under float16 autocast on {dev.kind}, q·k came out {matmul_dtype} and the softmax {softmax_dtype}. "
        "On CUDA autocast runs matmuls in float16 and softmax in float32 (PyTorch's autocast op lists); "
        "a float32 softmax guards its own sum, not a score the float16 matmul before it already overflowed."
    )
    yield Finished(
        {
            "largest_score": largest,
            "fp16_inf_scores": _infs(scores16),
            "fp16_nan_rows": nan_rows(out16),
            "bf16_inf_scores": _infs(scores_bf),
            "bf16_error": bf16_error,
            "scaled_fp16_nan_rows": nan_rows(out16s),
            "sdpa_fp16_nan_rows": nan_rows(sdpa),
            "autocast_matmul_dtype": matmul_dtype,
            "autocast_softmax_dtype": softmax_dtype,
            "autocast_nan_rows": nan_rows(auto_out),
            "rows": p.tokens,
        }
    )


def _infs(scores: torch.Tensor) -> int:
    return int(torch.isinf(scores).sum().item())


def _shown(scores: torch.Tensor) -> str:
    top = float(scores.float().max().item())
    return "inf" if math.isinf(top) else f"{top:,.0f}"
