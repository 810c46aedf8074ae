"""The spec of `optimizer-trade`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/optimizer_trade.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class OptimizerTradeParams(Params):
    target_accuracy: float = Field(0.9, gt=0, lt=1, description="test accuracy (0..1) each optimizer trains to")
    max_steps: int = Field(2000, ge=1, le=100000, description="the step cap each optimizer gets (the same budget)")
    batch_size: int = Field(64, ge=1, le=65536)
    eval_every: int = Field(25, ge=1, le=100000, description="steps between evaluations on the test slice")
    eval_samples: int = Field(2000, ge=1, le=10000, description="test images each evaluation uses")
    adam_lr: float = Field(0.001, gt=0, le=10, description="Adam's learning rate")
    sgd_lr: float = Field(0.01, gt=0, le=10, description="SGD's learning rate (plain and with momentum)")
    momentum: float = Field(0.9, gt=0, lt=1, description="SGD's momentum (the momentum run)")


SPEC = Experiment(
    name="optimizer-trade",
    title="Adam against SGD: optimizer memory against steps to a target",
    module="optimizer_trade",
    params=OptimizerTradeParams,
    metrics={
        "adam_steps": Metric(
            "Adam: steps to the target",
            "",
            "optimizer steps Adam took to reach target_accuracy on the test slice (None if not within the step cap)",
            none="not reached",
        ),
        "momentum_steps": Metric(
            "SGD with momentum: steps to the target",
            "",
            "the same for SGD with momentum (None if not within the step cap)",
            none="not reached",
        ),
        "sgd_steps": Metric(
            "SGD: steps to the target",
            "",
            "the same for plain SGD (None if not within the step cap)",
            none="not reached",
        ),
        "momentum_steps_ratio": Metric(
            "momentum's steps against Adam's",
            "x",
            "momentum_steps / adam_steps (None if either did not reach the target)",
            none="n/a: a target not reached",
        ),
        "sgd_steps_ratio": Metric(
            "SGD's steps against Adam's",
            "x",
            "sgd_steps / adam_steps (None if either did not reach the target)",
            none="n/a: a target not reached",
        ),
        "adam_state_bytes": Metric(
            "Adam: optimizer state",
            "B",
            "bytes of Adam's state tensors, measured: exp_avg and exp_avg_sq per parameter, and a step count",
        ),
        "momentum_state_bytes": Metric(
            "SGD with momentum: optimizer state",
            "B",
            "bytes of its state tensors, measured: one momentum_buffer per parameter",
        ),
        "sgd_state_bytes": Metric(
            "SGD: optimizer state", "B", "bytes of plain SGD's state tensors, measured: none, it keeps no state"
        ),
        "parameter_bytes": Metric("the weights", "B", "bytes of the model's parameters (float32)"),
        "adam_accuracy": Metric("Adam: test accuracy", "%", "Adam's accuracy on the test slice when it stopped (0..1)"),
        "momentum_accuracy": Metric("SGD with momentum: test accuracy", "%", "the same for SGD with momentum (0..1)"),
        "sgd_accuracy": Metric("SGD: test accuracy", "%", "the same for plain SGD (0..1)"),
        "step_cap": Metric(
            "steps allowed each",
            "",
            "the step cap each optimizer had: max_steps, or fewer where a CPU run was cut to fit its time budget",
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"target_accuracy": 0.5, "max_steps": 40, "eval_every": 10, "eval_samples": 256},
)
