"""The spec of `forgot-zero-grad`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/forgot_zero_grad.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class ForgotZeroGradParams(Params):
    steps: int = Field(50, ge=2, le=1000, description="SGD steps for each loop")
    batch_size: int = Field(64, ge=1, le=4096)
    lr: float = Field(0.1, gt=0, le=10, description="SGD learning rate")


SPEC = Experiment(
    name="forgot-zero-grad",
    title="Training without optimizer.zero_grad(): gradients pile up",
    module="forgot_zero_grad",
    params=ForgotZeroGradParams,
    metrics={
        "grad_norm_first": Metric("first step's gradient norm", "", "gradient norm of the first step (both loops)"),
        "grad_norm_last_with": Metric(
            "last gradient norm, with zero_grad()", "", "gradient norm at the last step, with zero_grad()"
        ),
        "grad_norm_last_without": Metric(
            "last gradient norm, without zero_grad()", "", "gradient norm at the last step, without zero_grad()"
        ),
        "growth_with": Metric(
            "gradient growth, with zero_grad()", "x", "last / first gradient norm, with zero_grad() (x)"
        ),
        "growth_without": Metric(
            "gradient growth, without zero_grad()", "x", "last / first gradient norm, without zero_grad() (x)"
        ),
        "loss_last_with": Metric("last loss, with zero_grad()", "", "loss at the last step, with zero_grad()"),
        "loss_last_without": Metric("last loss, without zero_grad()", "", "loss at the last step, without zero_grad()"),
        "steps": Metric("steps per loop", "", "steps in each loop"),
    },
    quick={"steps": 20},
)
