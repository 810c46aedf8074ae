"""The spec of `train`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/train.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tutor.experiments.spec import WRITES_FILE, Experiment, Metric, Params


class TrainParams(Params):
    epochs: int = Field(3, ge=1, le=100)
    batch_size: int = Field(64, ge=1, le=65536)
    lr: float = Field(1e-3, gt=0, le=10)
    amp: Literal["off", "auto", "fp16", "bf16"] = Field(
        "off", description="mixed precision: auto = fp16 on cuda, bf16 on cpu"
    )
    data_path: Literal["resident", "loader"] = Field(
        "resident", description="resident: whole set as tensors on the device; loader: DataLoader + ToTensor"
    )
    num_workers: int = Field(0, ge=0, le=64, description="DataLoader workers (loader path)")
    max_steps: int | None = Field(None, ge=1, description="stop after this many optimiser steps")
    train_samples: int | None = Field(None, ge=1, description="use only the first N training images")
    test_samples: int | None = Field(None, ge=1, description="evaluate on the first N test images")
    checkpoint: str | None = Field(
        None, description="path: save the best-accuracy checkpoint dict here", json_schema_extra=WRITES_FILE
    )


SPEC = Experiment(
    name="train",
    title="Train the MNIST classifier",
    module="train",
    params=TrainParams,
    metrics={
        "accuracy": Metric("test accuracy", "%", "test accuracy after the last epoch (0..1)"),
        "best_accuracy": Metric("best test accuracy", "%", "best test accuracy of any epoch (0..1)"),
        "final_loss": Metric("final training loss", "", "mean training loss of the last epoch"),
        "seconds_per_epoch": Metric("time per epoch", "s", "median training seconds per epoch (device-synchronised)"),
        "samples_per_s": Metric("training throughput", "/s", "training samples per second"),
        "total_seconds": Metric("training time", "s", "training seconds, all epochs"),
        "steps": Metric("optimiser steps", "", "optimiser steps taken"),
        "device": Metric("device", "text", "torch device used"),
        "device_name": Metric("device name", "text", "device's name"),
        "data_source": Metric("data", "text", "MNIST or the synthetic fallback"),
        "data_path": Metric("data path", "text", "resident or loader"),
        "amp_dtype": Metric("mixed precision", "text", "autocast dtype, or off"),
        "checkpoint": Metric("checkpoint file", "text", "checkpoint path, if one was written", none="none written"),
    },
    quick={"epochs": 1, "train_samples": 2048, "test_samples": 512, "batch_size": 128},
)
