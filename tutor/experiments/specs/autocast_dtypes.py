"""The spec of `autocast-dtypes`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/autocast_dtypes.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class AutocastDtypesParams(Params):
    amp: Literal["auto", "fp16", "bf16"] = Field(
        "auto", description="autocast's dtype: auto = float16 on cuda, bfloat16 on cpu"
    )
    batch_size: int = Field(32, ge=1, le=4096, description="rows of the random input")


SPEC = Experiment(
    name="autocast-dtypes",
    title="Which operations autocast lowers, and which it keeps in float32",
    module="autocast_dtypes",
    params=AutocastDtypesParams,
    metrics={
        "autocast_dtype": Metric(
            "autocast's low-precision dtype",
            "text",
            "the dtype autocast was asked for here (float16 or bfloat16; off where this "
            "device's autocast does not support it)",
        ),
        "linear_dtype": Metric("linear output dtype", "text", "dtype of the nn.Linear's output under autocast"),
        "relu_dtype": Metric("relu output dtype", "text", "dtype of the ReLU's output (an elementwise op)"),
        "layernorm_dtype": Metric("layer norm output dtype", "text", "dtype of the nn.LayerNorm's output"),
        "softmax_dtype": Metric("softmax output dtype", "text", "dtype of the softmax's output"),
        "loss_dtype": Metric("loss output dtype", "text", "dtype of the cross-entropy loss"),
        "sum_dtype": Metric("sum output dtype", "text", "dtype of the sum's output (a reduction)"),
        "weight_dtype": Metric(
            "linear weight dtype", "text", "dtype of the Linear's weight after the forward pass (autocast casts a copy)"
        ),
        "grad_dtype": Metric("weight gradient dtype", "text", "dtype of the Linear's weight.grad after backward"),
        "lowered_ops": Metric(
            "ops autocast lowers", "text", "operations whose output was low precision even from a float32 input"
        ),
        "float32_ops": Metric(
            "ops autocast keeps in float32",
            "text",
            "operations whose output was float32 even from a low-precision input",
        ),
        "input_dtype_ops": Metric(
            "ops that follow their input",
            "text",
            "operations whose output dtype was their input's, float32 or low precision",
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"batch_size": 4},
)
