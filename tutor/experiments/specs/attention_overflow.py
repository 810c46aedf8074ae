"""The spec of `attention-overflow`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/attention_overflow.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class AttentionOverflowParams(Params):
    # The score of a token with itself is |q|^2 = magnitude^2 x dim: past float16's 65504 at the
    # defaults (40^2 x 64 = 102,400), inside it after the 1/sqrt(dim) scaling (12,800).
    dim: int = Field(64, ge=8, le=1024, description="the head dimension (8 to 1024)")
    tokens: int = Field(16, ge=2, le=256, description="the sequence length (2 to 256)")
    magnitude: float = Field(
        40.0, gt=0, le=1000, description="the typical size of each activation entry (above 0, up to 1000)"
    )
    seed: int = Field(0, description="the random seed of the activations")


SPEC = Experiment(
    name="attention-overflow",
    title="Attention scores in float16, bfloat16 and float32",
    module="attention_overflow",
    params=AttentionOverflowParams,
    metrics={
        "largest_score": Metric("largest attention score", "", "the largest q·k score, computed in float32"),
        "fp16_inf_scores": Metric("float16 scores that overflowed", "", "scores that came out inf in float16"),
        "fp16_nan_rows": Metric(
            "rows of NaN attention (float16 scores)",
            "",
            "rows whose softmax, taken in float32 of the float16 scores, came out NaN",
        ),
        "bf16_inf_scores": Metric("bfloat16 scores that overflowed", "", "scores that came out inf in bfloat16"),
        "bf16_error": Metric(
            "bfloat16 attention's error",
            "",
            "the largest difference between the bfloat16 and the float32 attention output, over float32's largest",
        ),
        "scaled_fp16_nan_rows": Metric(
            "NaN rows with q scaled first",
            "",
            "rows of NaN attention in float16 when q is divided by sqrt(dim) before the product",
        ),
        "sdpa_fp16_nan_rows": Metric(
            "NaN rows from PyTorch's own attention",
            "",
            "rows of NaN from torch.nn.functional.scaled_dot_product_attention in float16",
        ),
        "autocast_matmul_dtype": Metric("autocast's q·k dtype", "text", "the dtype autocast gave the scores here"),
        "autocast_softmax_dtype": Metric(
            "autocast's softmax dtype", "text", "the dtype autocast gave the softmax here"
        ),
        "autocast_nan_rows": Metric("NaN rows under autocast", "", "rows of NaN attention under float16 autocast"),
        "rows": Metric("rows", "", "the attention rows computed (tokens)"),
    },
    quick={},  # under a second at the lesson's own size
)
