"""The spec of `pipeline-breakdown`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/pipeline_breakdown.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


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


SPEC = Experiment(
    name='pipeline-breakdown',
    title='One training step by phase, achieved FLOP/s and MFU',
    module='pipeline_breakdown',
    params=PipelineBreakdownParams,
    metrics={
        "mfu": "model FLOPs utilisation: achieved_tflops / peak_tflops (0..1)",
        "achieved_tflops": "model FLOPs per second of the pass without inner syncs (TFLOP/s)",
        "peak_tflops": "the device's peak for the dtype in use (TFLOP/s)",
        "peak_source": "vendor spec (dense, known GPU) or measured matmul",
        "dtype": "the matmuls' dtype: float32, tfloat32, bfloat16 or float16",
        "flops_per_step": "6 x (sum of in x out over the Linear layers) x batch_size",
        "data_wait_seconds": "time getting the next batch, all timed steps (s)",
        "copy_seconds": "time copying batches to the device (s)",
        "forward_seconds": "time in the forward pass and loss (s)",
        "backward_seconds": "time in loss.backward() (s)",
        "optimizer_seconds": "time in optimizer.step() and zero_grad() (s)",
        "data_wait_share": "data wait / whole step time (0..1)",
        "copy_share": "copy / whole step time (0..1)",
        "forward_share": "forward / whole step time (0..1)",
        "backward_share": "backward / whole step time (0..1)",
        "optimizer_share": "optimizer / whole step time (0..1)",
        "samples_per_s": "training samples/s with a sync after every phase",
        "samples_per_s_unsynced": "training samples/s with no syncs inside the loop",
        "bottleneck": "the largest phase: data_wait, copy, forward, backward or optimizer",
        "model": "mlp or wide",
        "parameters": "trainable parameters of the model",
        "batch_size": "samples per step",
        "data_path": "resident or loader",
        "device": "torch device used",
    },
    quick={"steps": 10, "width": 256},
)
