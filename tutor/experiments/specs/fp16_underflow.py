"""The spec of `fp16-underflow`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/fp16_underflow.py."""

from __future__ import annotations

from pydantic import Field, field_validator

from tutor.experiments.spec import Experiment, Metric, Params


class Fp16UnderflowParams(Params):
    # gradient: from 1e-30 (it and its square root, the activation, are normal float32 and
    # bfloat16 numbers, so float32 always has the true value to compare with; the activation
    # itself underflows float16 below about 3.6e-15) to 1e6 (past float16's max, 65504, so
    # overflow can be shown too). scale: 1 (no scaling) to 2**24 (1 / float16's smallest
    # subnormal; GradScaler starts at 2**16, and a larger float32 scale eventually overflows).
    gradient: float = Field(1e-8, description="the true gradient value to represent (1e-30 to 1e6)")
    scale: float = Field(
        65536.0, ge=1, le=2**24, description="the loss scale (GradScaler's default init_scale; 1 to 2**24)"
    )

    @field_validator("gradient")
    @classmethod
    def _gradient_in_range(cls, v: float) -> float:
        # A validator rather than ge/le: pydantic spells 1e-30 out as 0.000...001 in its message.
        if not 1e-30 <= v <= 1e6:
            raise ValueError("gradient must be between 1e-30 and 1e6")
        return v


SPEC = Experiment(
    name="fp16-underflow",
    title="A small gradient in float16, with and without loss scaling",
    module="fp16_underflow",
    params=Fp16UnderflowParams,
    metrics={
        "gradient_fp32": Metric("gradient in float32", "", "the gradient computed in float32"),
        "gradient_fp16": Metric(
            "gradient in float16", "", "the same gradient computed in float16 (0.0 if it underflowed)"
        ),
        "gradient_scaled_fp16": Metric(
            "float16 gradient with loss scaling",
            "",
            "the float16 gradient with the loss scaled, then unscaled in float32",
        ),
        "flushed_to_zero": Metric(
            "float16 lost the gradient", "bool", "True if float16 without scaling lost the gradient"
        ),
        "scale": Metric("loss scale", "", "the loss scale used"),
        "fp16_smallest_subnormal": Metric("smallest float16", "", "smallest positive float16 (2**-24)"),
        "fp16_smallest_normal": Metric("smallest normal float16", "", "smallest normal float16 (2**-14)"),
        "fp16_max": Metric("largest float16", "", "largest float16"),
    },
    quick={},
)
