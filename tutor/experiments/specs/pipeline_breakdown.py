"""The spec of `pipeline-breakdown`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/pipeline_breakdown.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class PipelineBreakdownParams(Params):
    model: Literal["mlp", "wide"] = Field(
        "mlp", description="mlp: the notebook's MNISTClassifier; wide: width x layers benchmark MLP"
    )
    width: int = Field(2048, ge=16, le=16384, description="features per hidden layer (model=wide)")
    layers: int = Field(3, ge=1, le=16, description="hidden Linear + ReLU layers (model=wide)")
    batch_size: int = Field(64, ge=1, le=65536)
    steps: int = Field(50, ge=1, le=100000, description="timed training steps per pass")
    data_path: Literal["resident", "loader"] = Field(
        "resident", description="resident: whole set as tensors on the device; loader: DataLoader + ToTensor"
    )
    num_workers: int = Field(0, ge=0, le=64, description="DataLoader workers, which prefetch batches (loader path)")
    pin_memory: bool = Field(False, description="page-locked batches + non_blocking copies (loader path, CUDA)")
    amp: Literal["off", "auto", "fp16", "bf16"] = Field(
        "off", description="mixed precision: auto = fp16 on cuda, bf16 on cpu"
    )


# How far separate runs' mfu land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 2.1% over four studies of 5 runs each at the lesson's
# settings, 4.2% in a fifth (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.05

# The interval of MFU's median over the timed stretches: this experiment's, and profile-step's.
MFU_INTERVAL = {
    "mfu_low": Metric(
        "MFU, interval low",
        "%",
        "the low end of the median MFU's 95% interval over the timed stretches of steps "
        "(order statistics; the lowest under 6 stretches; 0..1; None with a single stretch: "
        "steps=1)",
        none="one stretch: no interval",
    ),
    "mfu_high": Metric(
        "MFU, interval high",
        "%",
        "the high end of the same interval, over the measured peak's typical block rather "
        "than its best (the peak's own spread: where a sweep at another moment lands; 0..1; "
        "None with a single stretch: steps=1)",
        none="one stretch: no interval",
    ),
}


SPEC = Experiment(
    name="pipeline-breakdown",
    title="One training step by phase, achieved FLOP/s and MFU",
    module="pipeline_breakdown",
    params=PipelineBreakdownParams,
    metrics={
        "mfu": Metric(
            "MFU", "%", "model FLOPs utilisation: achieved_tflops / peak_tflops (0..1)", guard=MEASURED_GUARD
        ),
        **MFU_INTERVAL,
        "achieved_tflops": Metric(
            "achieved throughput",
            "TFLOP/s",
            "model FLOPs per second of the pass without inner syncs: the median of its "
            "stretches of steps, the device synchronised only between them (TFLOP/s)",
        ),
        "peak_tflops": Metric(
            "peak for MFU",
            "TFLOP/s",
            "the peak MFU is against: the vendor's spec where known, else the measured peak (TFLOP/s)",
        ),
        "peak_source": Metric(
            "where that peak comes from", "text", "vendor spec (dense, known GPU) or measured matmul"
        ),
        "peak_measured_tflops": Metric(
            "measured peak",
            "TFLOP/s",
            "this device's realistic peak for the dtype, measured here: the best of a "
            "matmul sweep (cached per machine), raised to the FLOP/s of a run's fastest "
            "stretch of steps that beat it (TFLOP/s)",
        ),
        "peak_spec_tflops": Metric(
            "vendor's spec peak",
            "TFLOP/s",
            "the vendor's dense spec for this GPU and dtype (TFLOP/s; None where none is known)",
            none="n/a: no spec known",
        ),
        "mfu_vs_measured": Metric(
            "MFU against the measured peak", "%", "achieved_tflops / peak_measured_tflops (0..1, never above 1)"
        ),
        "mfu_vs_spec": Metric(
            "MFU against the vendor's spec",
            "%",
            "achieved_tflops / peak_spec_tflops (0..1; None where no spec is known)",
            none="n/a: no spec known",
        ),
        "peak_threads": Metric(
            "CPU threads",
            "",
            "CPU threads the measured peak and the training used (None on a GPU)",
            none="n/a on a GPU",
        ),
        "peak_measured_on": Metric("peak measured on", "text", "the date the measured peak was taken (YYYY-MM-DD)"),
        "peak_raised": Metric(
            "this run raised the measured peak",
            "bool",
            "True if this run's fastest stretch of steps beat the measured peak, which was then raised to its FLOP/s",
        ),
        "dtype": Metric("matmul dtype", "text", "the matmuls' dtype: float32, tfloat32, bfloat16 or float16"),
        "flops_per_step": Metric("FLOPs per step", "", "6 x (sum of in x out over the Linear layers) x batch_size"),
        "data_wait_seconds": Metric("data wait, all steps", "s", "time getting the next batch, all timed steps (s)"),
        "copy_seconds": Metric("copy, all steps", "s", "time copying batches to the device (s)"),
        "forward_seconds": Metric("forward, all steps", "s", "time in the forward pass and loss (s)"),
        "backward_seconds": Metric("backward, all steps", "s", "time in loss.backward() (s)"),
        "optimizer_seconds": Metric("optimizer, all steps", "s", "time in optimizer.step() and zero_grad() (s)"),
        "data_wait_share": Metric("data wait, share of the step", "%", "data wait / whole step time (0..1)"),
        "copy_share": Metric("copy, share of the step", "%", "copy / whole step time (0..1)"),
        "forward_share": Metric("forward, share of the step", "%", "forward / whole step time (0..1)"),
        "backward_share": Metric("backward, share of the step", "%", "backward / whole step time (0..1)"),
        "optimizer_share": Metric("optimizer, share of the step", "%", "optimizer / whole step time (0..1)"),
        "samples_per_s": Metric(
            "throughput, synced every phase", "/s", "training samples/s with a sync after every phase"
        ),
        "samples_per_s_unsynced": Metric(
            "throughput without syncs",
            "/s",
            "training samples/s with no syncs inside a step (only between stretches of steps), over the whole pass",
        ),
        "bottleneck": Metric(
            "largest phase", "text", "the largest phase: data_wait, copy, forward, backward or optimizer"
        ),
        "model": Metric("model", "text", "mlp or wide"),
        "parameters": Metric("parameters", "", "trainable parameters of the model"),
        "batch_size": Metric("batch size", "", "samples per step"),
        "data_path": Metric("data path", "text", "resident or loader"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"steps": 10, "width": 256},
)
