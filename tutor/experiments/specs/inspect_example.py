"""The spec of `inspect-example`, torch-free: `gpututor inspect` run on one of the training scripts
the package ships (tutor/inspect/examples/), its report as metrics a lesson's predictions compare
with. The measurement is `measure` in tutor/experiments/inspect_example.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class InspectExampleParams(Params):
    example: Literal["mnist-cnn", "char-gpt"] = Field(
        "mnist-cnn",
        description="the shipped script: mnist-cnn (PyTorch's examples/mnist) or char-gpt (a nanoGPT-style model)",
    )
    steps: int = Field(20, ge=2, le=500, description="timed training steps (after the warm-up and the probe step)")
    warmup: int = Field(3, ge=1, le=50, description="untimed steps before the probe step")
    batch_size: int | None = Field(
        None, ge=1, le=4096, description="passed as --batch-size; default: the script's own (mnist-cnn 64, char-gpt 16)"
    )


SPEC = Experiment(
    name="inspect-example",
    title="gpututor inspect on a shipped training script: step split, MFU, memory, findings",
    module="inspect_example",
    params=InspectExampleParams,
    metrics={
        "step_seconds": Metric(
            "time per step",
            "s",
            "the median of the timed steps' seconds (a clock at each step's end); on a GPU, where one step's "
            "clock times its launches, the timed window's mean, synchronised at its two ends, with no interval",
        ),
        "step_seconds_low": Metric(
            "time per step, interval low", "s", "the low end of that median's 95% interval (order statistics)"
        ),
        "step_seconds_high": Metric("time per step, interval high", "s", "the high end of the same interval"),
        "data_share": Metric(
            "step time waiting for data",
            "%",
            "the median over the timed steps (a GPU: the split steps, synchronised at each boundary) of each "
            "step's share spent getting the next batch (0..1)",
        ),
        "data_share_low": Metric("data wait, interval low", "%", "the low end of that median's 95% interval"),
        "data_share_high": Metric("data wait, interval high", "%", "the high end of the same interval"),
        "forward_share": Metric("forward phase", "%", "the forward and loss's mean share of a step (0..1)"),
        "backward_share": Metric("backward phase", "%", "backward's mean share of a step (0..1)"),
        "optimizer_share": Metric("optimizer phase", "%", "the optimizer step and zero_grad's mean share (0..1)"),
        "flops_per_step": Metric(
            "model FLOPs per step", "", "counted by torch.utils.flop_counter on an untimed step, forward and backward"
        ),
        "mfu": Metric(
            "model FLOPs utilisation",
            "%",
            "flops_per_step / step_seconds / this machine's measured dense matmul peak in the model's dtype (0..1)",
            none="no measured peak here",
        ),
        "mfu_low": Metric("MFU, interval low", "%", "from step_seconds_high", none="no measured peak here"),
        "mfu_high": Metric("MFU, interval high", "%", "from step_seconds_low", none="no measured peak here"),
        "peak_mb": Metric(
            "peak memory of a step",
            "MB",
            "CUDA: the allocator's peak over the probe step; CPU: weights + gradients + optimizer state + "
            "the activations autograd saved (MB: 10^6 bytes)",
        ),
        "findings": Metric("findings", "", "how many of the course's mistakes the run showed"),
        "first_finding": Metric("first finding", "text", "the first finding's name, or none", none="none"),
    },
    quick={"steps": 6, "warmup": 1},
)
