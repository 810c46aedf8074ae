"""The spec of `amp-benchmark`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/amp_benchmark.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class AmpBenchmarkParams(Params):
    width: int = Field(2048, ge=16, le=16384, description="features per hidden layer of the benchmark MLP")
    layers: int = Field(3, ge=1, le=16, description="hidden Linear + ReLU layers")
    batch_size: int = Field(256, ge=1, le=65536)
    epochs: int = Field(1, ge=1, le=20)
    lr: float = Field(1e-3, gt=0, le=10)
    train_samples: int | None = Field(
        None, ge=1, description="training images per epoch on the accelerator (default: all)"
    )
    cpu_samples: int = Field(
        4096, ge=1, description="training images the CPU cases run; their epoch time is projected from them"
    )
    test_samples: int | None = Field(None, ge=1, description="test images for the accuracy (default: all)")


# How far separate runs' amp_speedup land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU with the cases in turns: at most 17.2% over 23 runs at the lesson's
# settings (bench/verdict_study.py, 2026-11-28). With one case after the other it was 26-38%.
MEASURED_GUARD = 0.18

SPEC = Experiment(
    name="amp-benchmark",
    title="End to end: CPU, GPU float32, TF32 and mixed precision",
    module="amp_benchmark",
    params=AmpBenchmarkParams,
    metrics={
        "cpu_seconds": Metric(
            "CPU float32 epoch", "s", "CPU float32 seconds per epoch (projected from cpu_samples images)"
        ),
        "fp32_seconds": Metric(
            "GPU float32 epoch",
            "s",
            "float32 seconds per epoch on the accelerator, TF32 off (None without one)",
            none="n/a on the CPU",
        ),
        "tf32_seconds": Metric(
            "TF32 epoch",
            "s",
            "the same with TF32 matmuls (None unless a CUDA GPU of compute capability 8.0+)",
            none="n/a: TF32 needs compute capability 8.0+ (Ampere)",
        ),
        "amp_seconds": Metric(
            "autocast epoch",
            "s",
            "seconds per epoch with autocast on the device (on a CPU-only machine: the CPU, projected)",
            none="n/a: no autocast here",
        ),
        "gpu_speedup": Metric(
            "GPU float32 speedup over the CPU",
            "x",
            "cpu_seconds / fp32_seconds (None without an accelerator)",
            none="n/a on the CPU",
        ),
        "tf32_speedup": Metric(
            "TF32 speedup over float32",
            "x",
            "fp32_seconds / tf32_seconds (None where TF32 does not apply)",
            none="n/a: TF32 needs compute capability 8.0+ (Ampere)",
        ),
        "amp_speedup": Metric(
            "autocast speedup over float32",
            "x",
            "the median over paired epochs (the cases take turns) of float32 seconds / autocast "
            "seconds on the same device",
            none="n/a: no autocast here",
            guard=MEASURED_GUARD,
        ),
        "amp_speedup_low": Metric(
            "autocast speedup, interval low",
            "x",
            "the low end of the median speedup's interval over the paired epochs (the cases "
            "take turns, an epoch each; order statistics; None with epochs=1, or without "
            "autocast)",
            none="n/a: one epoch, or no autocast",
        ),
        "amp_speedup_high": Metric(
            "autocast speedup, interval high",
            "x",
            "the high end of the same interval (None with epochs=1, or without autocast)",
            none="n/a: one epoch, or no autocast",
        ),
        "best_speedup": Metric("fastest case's speedup over the CPU", "x", "cpu_seconds / the fastest case's seconds"),
        "best_case": Metric("fastest case", "text", "the fastest case: cpu, fp32, tf32 or amp"),
        "cpu_accuracy": Metric(
            "CPU float32 test accuracy", "%", "test accuracy of the CPU float32 case (0..1; after cpu_samples images)"
        ),
        "fp32_accuracy": Metric(
            "GPU float32 test accuracy",
            "%",
            "test accuracy, accelerator float32 (0..1; None without one)",
            none="n/a on the CPU",
        ),
        "tf32_accuracy": Metric(
            "TF32 test accuracy",
            "%",
            "test accuracy, TF32 (0..1; None where TF32 does not apply)",
            none="n/a: TF32 needs compute capability 8.0+ (Ampere)",
        ),
        "amp_accuracy": Metric(
            "autocast test accuracy", "%", "test accuracy with autocast (0..1)", none="n/a: no autocast here"
        ),
        "fp32_peak_mb": Metric(
            "float32 peak memory added",
            "MB",
            "peak memory training adds, float32 (MB; CUDA only, else None)",
            none="n/a off CUDA",
        ),
        "tf32_peak_mb": Metric(
            "TF32 peak memory added",
            "MB",
            "the same with TF32 (MB; CUDA only, else None)",
            none="n/a: TF32 needs compute capability 8.0+ (Ampere)",
        ),
        "amp_peak_mb": Metric(
            "autocast peak memory added", "MB", "the same with autocast (MB; CUDA only, else None)", none="n/a off CUDA"
        ),
        "amp_dtype": Metric("autocast dtype", "text", "the autocast dtype: float16 or bfloat16"),
        "cpu_images_timed": Metric(
            "images the CPU case timed",
            "",
            "images the CPU float32 case timed per epoch (sized to this CPU's speed; its "
            "time is projected to the full epoch)",
        ),
        "amp_images_timed": Metric(
            "images the CPU autocast case timed",
            "",
            "images the CPU autocast case timed (n/a where autocast ran on a GPU)",
            none="n/a: autocast ran on the GPU",
        ),
        "parameters": Metric("parameters", "", "the benchmark model's parameter count"),
        "accelerator": Metric("accelerator", "text", "the accelerator's name, or 'none'"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"width": 64, "layers": 1, "train_samples": 1024, "cpu_samples": 512, "test_samples": 256},
)
