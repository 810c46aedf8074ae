"""The experiment registry: name -> parameters, metrics, and the generator that runs it.

This module is torch-free so that the CLI, the lesson linter and the TUI can list and
validate experiments without importing torch. Each experiment lives in its own module
(`tutor/experiments/<module>.py`) with a function

    def run(p: <Params>, dev: Device) -> Iterator[Event]

that imports torch, never Textual, and yields `tutor.experiments.events` objects; its last event is
`Finished(metrics)` with (at least) the metrics declared here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tutor.experiments.events import Event

# Marks a parameter that names a file the run writes. The learner may set it (`gpututor run
# --set`); a lesson may not, or opening a lesson could overwrite any file of theirs.
WRITES_FILE: dict[str, Any] = {"writes_file": True}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str | None = Field(None, description="cpu, cuda, cuda:1, mps; default: the best device here")
    seed: int = Field(0, description="random seed for weights, shuffling and data")


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
    checkpoint: str | None = Field(None, description="path: save the best-accuracy checkpoint dict here",
                                   json_schema_extra=WRITES_FILE)


class DeviceBasicsParams(Params):
    pass


class DataBottleneckParams(Params):
    batches: int = Field(200, ge=1, le=100000, description="timed training steps per data path")
    batch_size: int = Field(64, ge=1, le=65536)
    workers: int = Field(2, ge=1, le=64, description="DataLoader worker processes for the workers case")


class MemoryLedgerParams(Params):
    width: int = Field(4096, ge=16, le=16384, description="features per Linear layer (PyTorch's AMP recipe: 4096)")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")
    batch_size: int = Field(256, ge=1, le=65536)


class GradAccumParams(Params):
    batch_size: int = Field(256, ge=2, le=60000, description="the large batch the micro-batches add up to")
    micro_batches: int = Field(4, ge=2, le=256, description="k: micro-batches per update")
    updates: int = Field(20, ge=1, le=10000, description="timed updates per method")

    @model_validator(mode="after")
    def _divisible(self) -> "GradAccumParams":
        if self.batch_size % self.micro_batches:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of micro_batches "
                             f"({self.micro_batches})")
        return self


class GradCheckpointParams(Params):
    depth: int = Field(16, ge=2, le=256, description="Linear + ReLU layers")
    width: int = Field(1024, ge=16, le=16384)
    batch_size: int = Field(256, ge=1, le=65536)
    segments: int = Field(4, ge=1, le=256, description="checkpoint_sequential segments")
    steps: int = Field(5, ge=1, le=1000, description="timed steps per way")

    @model_validator(mode="after")
    def _segments_fit(self) -> "GradCheckpointParams":
        if self.segments > 2 * self.depth:
            raise ValueError(f"segments ({self.segments}) can be at most the model's {2 * self.depth} modules")
        return self


class BatchSweepParams(Params):
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(4, ge=1, le=48, description="Linear + ReLU pairs")
    start_batch: int = Field(32, ge=1, le=1 << 20)
    max_batch: int = Field(4096, ge=1, le=1 << 24, description="the largest batch to try")
    steps: int = Field(3, ge=1, le=1000, description="timed steps per batch size")
    budget_mb: int | None = Field(
        None, ge=1, description="memory budget in MiB (default: the GPU's memory on CUDA, 1024 elsewhere)"
    )


class CrossoverParams(Params):
    model: Literal["tiny", "mlp", "both"] = Field(
        "both", description="tiny: ~500-parameter model; mlp: the notebook's MNISTClassifier"
    )
    tiny_samples: int = Field(200, ge=1)
    tiny_batch_size: int = Field(32, ge=1)
    mlp_samples: int = Field(60000, ge=1)
    mlp_batch_size: int = Field(64, ge=1)
    epochs: int = Field(1, ge=1, le=20)
    repeats: int = Field(3, ge=1, le=20, description="timed repeats per case (the median is reported)")


class DeviceMismatchParams(Params):
    reverse: bool = Field(False, description="the reverse mistake: batches moved, the model left on the CPU")


class ForgotZeroGradParams(Params):
    steps: int = Field(50, ge=2, le=1000, description="SGD steps for each loop")
    batch_size: int = Field(64, ge=1, le=4096)
    lr: float = Field(0.1, gt=0, le=10, description="SGD learning rate")


class ShapeMismatchParams(Params):
    pass


class CheckpointParams(Params):
    steps: int = Field(200, ge=1, le=100000, description="training steps before saving")
    batch_size: int = Field(64, ge=1)
    path: str | None = Field(None, description="where to write the checkpoint (default: a scratch file in the "
                             "cache dir, removed after)", json_schema_extra=WRITES_FILE)


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


class AmpCompareParams(Params):
    epochs: int = Field(1, ge=1, le=20)
    batch_size: int = Field(256, ge=1)
    lr: float = Field(1e-3, gt=0)
    amp: Literal["auto", "fp16", "bf16"] = Field("auto", description="auto = fp16 on cuda/mps, bf16 on cpu")
    train_samples: int | None = Field(None, ge=1)
    test_samples: int | None = Field(None, ge=1)


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


class SyncTimingParams(Params):
    size: int = Field(2048, ge=16, le=16384, description="n of the n x n float32 matmuls timed")
    calls: int = Field(20, ge=1, le=10000, description="matmuls per timing")
    repeats: int = Field(5, ge=1, le=100, description="timings per method (the median is reported)")


class GraphLeakParams(Params):
    steps: int = Field(100, ge=1, le=100000, description="batches per loop")
    batch_size: int = Field(256, ge=1, le=65536)


class AutocastMisuseParams(Params):
    steps: int = Field(300, ge=1, le=100000, description="training steps of the model.half() case and its autocast twin")
    batch_size: int = Field(64, ge=1, le=65536)
    lr: float = Field(1e-3, gt=0, le=10, description="Adam's learning rate, both cases")


class OomRecoveryParams(Params):
    limit_mb: int = Field(128, ge=64, le=1 << 20, description="the memory limit the run sets itself (MiB)")
    batch_size: int | None = Field(
        None, ge=1, le=1 << 24, description="the batch that is too big (default: about twice what fits)"
    )
    width: int = Field(1024, ge=16, le=16384, description="features per Linear layer")
    layers: int = Field(3, ge=1, le=48, description="Linear + ReLU pairs")


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


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    module: str  # tutor.experiments.<module>
    params: type[Params]
    metrics: dict[str, str]  # metric name -> what it means (with unit)
    quick: dict[str, Any] = field(default_factory=dict)  # small params for tests and `lesson test`
    # A lesson pack's experiment brings its generator function itself (module is then "").
    run: Callable[[Any, Any], Iterator[Event]] | None = field(default=None, compare=False)

    def load(self) -> Callable[[Params, Any], Iterator[Event]]:
        """The generator function (imports torch)."""
        if self.run is not None:
            return self.run
        return importlib.import_module(f"tutor.experiments.{self.module}").run

    def make_params(self, values: dict[str, Any] | None = None) -> Params:
        return self.params(**(values or {}))

    def file_params(self) -> list[str]:
        """Parameters that name a file the run writes (marked WRITES_FILE)."""
        return [name for name, f in self.params.model_fields.items()
                if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("writes_file")]


REGISTRY: dict[str, Experiment] = {
    e.name: e
    for e in [
        Experiment(
            "train",
            "Train the MNIST classifier",
            "train",
            TrainParams,
            {
                "accuracy": "test accuracy after the last epoch (0..1)",
                "best_accuracy": "best test accuracy of any epoch (0..1)",
                "final_loss": "mean training loss of the last epoch",
                "seconds_per_epoch": "median training seconds per epoch (device-synchronised)",
                "samples_per_s": "training samples per second",
                "total_seconds": "training seconds, all epochs",
                "steps": "optimiser steps taken",
                "device": "torch device used",
                "device_name": "device's name",
                "data_source": "MNIST or the synthetic fallback",
                "data_path": "resident or loader",
                "amp_dtype": "autocast dtype, or off",
                "checkpoint": "checkpoint path, if one was written",
            },
            {"epochs": 1, "train_samples": 2048, "test_samples": 512, "batch_size": 128},
        ),
        Experiment(
            "crossover",
            "When does the GPU pay off? CPU vs accelerator",
            "crossover",
            CrossoverParams,
            {
                "cpu_seconds_tiny": "median seconds to train the tiny model on the CPU",
                "accel_seconds_tiny": "same on the accelerator (None without one)",
                "speedup_tiny": "cpu / accelerator time for the tiny model (None without an accelerator)",
                "cpu_seconds_mlp": "median seconds to train MNISTClassifier on the CPU (projected to all its "
                                   "images where fewer were timed)",
                "accel_seconds_mlp": "same on the accelerator (None without one)",
                "speedup_mlp": "cpu / accelerator time for MNISTClassifier (None without an accelerator)",
                "speedup": "the headline speedup: speedup_mlp (None without an accelerator)",
                "accelerator": "the accelerator's name, or 'none'",
                "cpu_images_timed_mlp": "images the CPU timed for MNISTClassifier where not all fit the step's "
                                        "time budget (its time is then projected); n/a when all were timed",
            },
            {"tiny_samples": 200, "mlp_samples": 1024, "repeats": 1},
        ),
        Experiment(
            "device-basics",
            "What this machine has, and where a model lives",
            "device_basics",
            DeviceBasicsParams,
            {
                "device": "the torch device the model was moved to",
                "device_name": "its name",
                "devices": "every device PyTorch can use here, best first",
                "cuda_available": "torch.cuda.is_available()",
                "mps_available": "torch.backends.mps.is_available()",
                "cuda_device_count": "number of CUDA GPUs visible (0 without CUDA)",
                "total_memory_gib": "the device's memory in GiB (None for the CPU: it shares system RAM)",
                "compute_capability": "CUDA compute capability, e.g. 8.0 (None off CUDA)",
                "bf16_native": "True if bfloat16 runs natively (CUDA 8.0+, or a CPU with AVX512-BF16/AMX)",
                "fp16_fast": "True if float16 is fast here (CUDA tensor cores, MPS)",
                "tensor_cores": "True on NVIDIA GPUs of compute capability 7.0 and newer",
                "tf32_matmul": "torch.backends.cuda.matmul.allow_tf32",
                "tf32_active": "True if float32 matmuls really run in TF32 here (the setting on a CUDA 8.0+ GPU)",
                "float32_matmul_precision": "torch.get_float32_matmul_precision(): highest, high or medium",
                "parameters": "MNISTClassifier's parameter count",
                "parameter_bytes": "their size in bytes (4 per float32 parameter)",
                "parameter_devices": "the devices the parameters ended up on",
                "all_on_device": "True if every parameter is on the chosen device",
                "torch_version": "torch.__version__",
            },
            {},
        ),
        Experiment(
            "data-bottleneck",
            "Where the step time goes: DataLoader vs resident tensors",
            "data_bottleneck",
            DataBottleneckParams,
            {
                "loader_samples_per_s": "training samples/s fed by the notebook's DataLoader (num_workers=0)",
                "workers_samples_per_s": "the same with worker processes",
                "pinned_samples_per_s": "workers plus pin_memory and non_blocking copies (None off CUDA)",
                "resident_samples_per_s": "training samples/s from tensors resident on the device",
                "loader_wait_share": "share of step time spent getting and copying the batch, loader (0..1)",
                "workers_wait_share": "the same with workers (0..1)",
                "pinned_wait_share": "the same pinned (0..1; None off CUDA)",
                "resident_wait_share": "the same with resident tensors (0..1)",
                "loader_epoch_seconds": "one epoch of the training set at the loader's rate (projected, s)",
                "resident_epoch_seconds": "one epoch at the resident rate (projected, s)",
                "resident_speedup": "resident samples/s / loader samples/s",
                "fastest": "the fastest data path: loader, workers, pinned or resident",
                "workers": "worker processes used in the workers case",
                "cpu_cores": "CPU cores on this machine (os.cpu_count())",
                "device": "torch device used",
                "data_source": "MNIST or the synthetic fallback",
            },
            {"batches": 20},
        ),
        Experiment(
            "memory-ledger",
            "Training memory by component, measured beside the formula",
            "memory_ledger",
            MemoryLedgerParams,
            {
                "parameters": "parameter count P",
                "param_bytes": "bytes of the parameters (P x 4)",
                "grad_bytes": "bytes of the gradients after backward (P x 4)",
                "sgd_state_bytes": "optimizer state of plain SGD (0)",
                "momentum_state_bytes": "optimizer state of SGD with momentum (P x 4)",
                "adam_state_bytes": "optimizer state of Adam (2 x P x 4, plus step counters)",
                "activation_bytes": "bytes autograd saved for backward at batch_size",
                "activation_formula_bytes": "(layers + 1) x batch x width x 4",
                "activation_bytes_smallest_batch": "the same at a quarter of the batch",
                "no_grad_activation_bytes": "bytes saved by the same forward under torch.no_grad() (0)",
                "bytes_per_param_adam": "(parameters + gradients + Adam state) / P: about 16",
                "total_adam_bytes": "parameters + gradients + Adam state + activations (bytes)",
                "allocator_param_bytes": "memory_allocated() delta for the model (CUDA; None elsewhere)",
                "allocator_activation_bytes": "memory_allocated() delta across the forward pass (CUDA; None elsewhere)",
                "allocator_adam_state_bytes": "memory_allocated() delta across Adam's first step (CUDA; None elsewhere)",
                "peak_bytes": "max_memory_allocated() above the start (CUDA; None elsewhere)",
                "reserved_bytes": "memory_reserved(): what the caching allocator holds (CUDA; None elsewhere)",
                "cublas_workspace_bytes": "allocated by the first matmul, reported apart (CUDA; None elsewhere)",
                "method": "how the figures were measured",
                "device": "torch device used",
            },
            {"width": 128, "layers": 2, "batch_size": 16},
        ),
        Experiment(
            "grad-accum",
            "Gradient accumulation: k micro-batches, one update",
            "grad_accum",
            GradAccumParams,
            {
                "batch_size": "the large batch",
                "micro_batches": "k, the micro-batches it was split into",
                "micro_batch_size": "batch_size / k",
                "max_abs_diff": "largest difference between accumulated and large-batch gradients",
                "allclose": "torch.allclose(accumulated, large-batch gradient, rtol=1e-4, atol=1e-6)",
                "cosine": "cosine similarity of the two gradients (1 = same direction)",
                "undivided_norm_ratio": "gradient norm without dividing each loss by k, over the right one (about k)",
                "weights_max_diff": "largest weight difference after one SGD step from each",
                "big_seconds_per_update": "seconds per update with one large batch (synchronised)",
                "accum_seconds_per_update": "seconds per update with k micro-batches (synchronised)",
                "time_ratio": "accum_seconds_per_update / big_seconds_per_update",
                "big_activation_bytes": "activations a large-batch forward keeps for backward",
                "micro_activation_bytes": "activations a micro-batch forward keeps",
                "device": "torch device used",
            },
            {"batch_size": 64, "micro_batches": 4, "updates": 2},
        ),
        Experiment(
            "grad-checkpoint",
            "Activation checkpointing: memory for compute",
            "grad_checkpoint",
            GradCheckpointParams,
            {
                "plain_kept_bytes": "activations the plain forward keeps for backward",
                "checkpointed_kept_bytes": "the same with checkpoint_sequential",
                "kept_formula_bytes": "(depth + 1) x batch x width x 4",
                "memory_saving": "1 - checkpointed / plain kept bytes (0..1)",
                "plain_peak_bytes": "peak allocated above the start of a plain step (CUDA; None elsewhere)",
                "checkpointed_peak_bytes": "the same checkpointed (CUDA; None elsewhere)",
                "plain_seconds_per_step": "seconds per plain training step (synchronised)",
                "checkpointed_seconds_per_step": "seconds per checkpointed step (synchronised)",
                "time_ratio": "checkpointed / plain seconds per step",
                "grads_match": "True if both ways give the same gradients (allclose)",
                "max_grad_diff": "largest gradient difference between the two",
                "device": "torch device used",
            },
            {"depth": 4, "width": 64, "batch_size": 16, "segments": 2, "steps": 1},
        ),
        Experiment(
            "batch-sweep",
            "Throughput and memory as the batch grows",
            "batch_sweep",
            BatchSweepParams,
            {
                "best_batch": "the batch size with the most samples/s",
                "best_samples_per_s": "its training samples/s (synchronised)",
                "best_memory_bytes": "its memory (CUDA: peak allocated; elsewhere: weights+grads+Adam+activations)",
                "largest_batch": "the largest batch that ran",
                "largest_memory_bytes": "its memory",
                "batches_tried": "batch sizes that ran",
                "oom_batch": "the batch size that ran out of memory (CUDA), or None",
                "stop_reason": "why the sweep stopped: max_batch, the budget, or out of memory",
                "fixed_bytes": "parameters x 16 bytes: weights, gradients, Adam's two moments",
                "memory_method": "how memory was measured",
                "device": "torch device used",
            },
            {"width": 64, "layers": 2, "start_batch": 8, "max_batch": 32, "steps": 1},
        ),
        Experiment(
            "amp-benchmark",
            "End to end: CPU, GPU float32, TF32 and mixed precision",
            "amp_benchmark",
            AmpBenchmarkParams,
            {
                "cpu_seconds": "CPU float32 seconds per epoch (projected from cpu_samples images)",
                "fp32_seconds": "float32 seconds per epoch on the accelerator, TF32 off (None without one)",
                "tf32_seconds": "the same with TF32 matmuls (None unless a CUDA GPU of compute capability 8.0+)",
                "amp_seconds": "seconds per epoch with autocast on the device (on a CPU-only machine: the CPU, projected)",
                "gpu_speedup": "cpu_seconds / fp32_seconds (None without an accelerator)",
                "tf32_speedup": "fp32_seconds / tf32_seconds (None where TF32 does not apply)",
                "amp_speedup": "float32 seconds / autocast seconds on the same device",
                "best_speedup": "cpu_seconds / the fastest case's seconds",
                "best_case": "the fastest case: cpu, fp32, tf32 or amp",
                "cpu_accuracy": "test accuracy of the CPU float32 case (0..1; after cpu_samples images)",
                "fp32_accuracy": "test accuracy, accelerator float32 (0..1; None without one)",
                "tf32_accuracy": "test accuracy, TF32 (0..1; None where TF32 does not apply)",
                "amp_accuracy": "test accuracy with autocast (0..1)",
                "fp32_peak_mb": "peak memory training adds, float32 (MB; CUDA only, else None)",
                "tf32_peak_mb": "the same with TF32 (MB; CUDA only, else None)",
                "amp_peak_mb": "the same with autocast (MB; CUDA only, else None)",
                "amp_dtype": "the autocast dtype: float16 or bfloat16",
                "cpu_images_timed": "images the CPU float32 case timed per epoch (sized to this CPU's speed; "
                                    "its time is projected to the full epoch)",
                "amp_images_timed": "images the CPU autocast case timed (n/a where autocast ran on a GPU)",
                "parameters": "the benchmark model's parameter count",
                "accelerator": "the accelerator's name, or 'none'",
                "device": "torch device used",
            },
            {"width": 64, "layers": 1, "train_samples": 1024, "cpu_samples": 512, "test_samples": 256},
        ),
        Experiment(
            "sync-timing",
            "Timing GPU work with and without synchronize",
            "sync_timing",
            SyncTimingParams,
            {
                "unsynced_seconds": "median time.perf_counter() time for `calls` matmuls, no synchronize",
                "synced_seconds": "the same with the device synchronised before the clock stops",
                "events_seconds": "the same measured with CUDA events (None off CUDA)",
                "ratio": "synced_seconds / unsynced_seconds (about 1 on a CPU; large on a GPU)",
                "asynchronous": "True if the device runs work asynchronously (cuda, mps)",
                "tflops": "matmul throughput from the synced time (2 n^3 FLOPs per matmul, TFLOP/s)",
                "device": "torch device used",
            },
            {"size": 128, "calls": 3, "repeats": 2},
        ),
        Experiment(
            "graph-leak",
            "A loss list that keeps the graph alive",
            "graph_leak",
            GraphLeakParams,
            {
                "train_kept_bytes": "tensor bytes still alive after a training loop that appends `loss` (after backward)",
                "eval_kept_bytes": "the same after an evaluation loop that appends `loss` without torch.no_grad()",
                "fixed_kept_bytes": "the same after the loop that appends `loss.item()` under torch.no_grad()",
                "eval_bytes_per_step": "eval_kept_bytes / steps: the activations each kept graph holds",
                "train_graph_nodes": "autograd nodes the training loop's list keeps alive",
                "eval_graph_nodes": "autograd nodes the evaluation loop's list keeps alive",
                "allocator_growth_bytes": "memory_allocated() growth across the evaluation loop (CUDA; None elsewhere)",
                "steps": "batches per loop",
                "device": "torch device used",
            },
            {"steps": 5, "batch_size": 32},
        ),
        Experiment(
            "autocast-misuse",
            "Mixed precision done wrong: the wrong device_type, and model.half()",
            "autocast_misuse",
            AutocastMisuseParams,
            {
                "wrong_type_dtype": "dtype of a Linear output under autocast with the other device_type",
                "right_type_dtype": "the same under autocast with this device's type",
                "autocast_dtype": "the low-precision dtype this device's autocast uses",
                "half_final_loss": "mean loss of the last steps, model.half() with Adam (NaN once it broke)",
                "half_nan_step": "the step at which model.half()'s loss first became NaN or inf (None if never)",
                "half_accuracy": "test accuracy after the model.half() run (0..1)",
                "autocast_final_loss": "mean loss of the last steps, the same training with autocast",
                "autocast_accuracy": "test accuracy after the autocast run (0..1)",
                "lost_update_share": "share of one SGD update's weight changes that float16 weights round away (0..1)",
                "device": "torch device used",
            },
            {"steps": 20, "batch_size": 32},
        ),
        Experiment(
            "oom-recovery",
            "Out of memory: the error, the clean-up and the fix",
            "oom_recovery",
            OomRecoveryParams,
            {
                "limit_bytes": "the memory limit the run set itself",
                "batch_size": "the batch that was too big",
                "predicted_bytes": "the memory that batch needs by the formula (weights, grads, Adam, activations)",
                "fits_batch": "the largest batch the formula says fits under the limit",
                "oom": "True if the too-big batch really failed with an out-of-memory error",
                "error_type": "the exception's type, e.g. OutOfMemoryError",
                "error_message": "the first line of its message",
                "released": "True if the memory was back to where it started after the clean-up",
                "recovered": "True if the same batch then trained with gradient accumulation under the limit",
                "micro_batches": "k: the micro-batches the batch was split into",
                "method": "how the limit was set (set_per_process_memory_fraction, RLIMIT_DATA, or none)",
                "device": "torch device used",
            },
            {"limit_mb": 64, "width": 256, "layers": 2},
        ),
        Experiment(
            "forgot-zero-grad",
            "Training without optimizer.zero_grad(): gradients pile up",
            "forgot_zero_grad",
            ForgotZeroGradParams,
            {
                "grad_norm_first": "gradient norm of the first step (both loops)",
                "grad_norm_last_with": "gradient norm at the last step, with zero_grad()",
                "grad_norm_last_without": "gradient norm at the last step, without zero_grad()",
                "growth_with": "last / first gradient norm, with zero_grad() (x)",
                "growth_without": "last / first gradient norm, without zero_grad() (x)",
                "loss_last_with": "loss at the last step, with zero_grad()",
                "loss_last_without": "loss at the last step, without zero_grad()",
                "steps": "steps in each loop",
            },
            {"steps": 20},
        ),
        Experiment(
            "shape-mismatch",
            "Three shape mistakes, their real errors and fixes",
            "shape_mismatch",
            ShapeMismatchParams,
            {
                "flatten_error_type": "exception type for images into Linear without flattening",
                "flatten_error": "its message (first line)",
                "flatten_fixed": "the fix ran",
                "channel_error_type": "exception type for a Conv2d batch without its channel dimension",
                "channel_error": "its message (first line)",
                "channel_fixed": "the fix ran",
                "target_error_type": "exception type for labels of shape [B, 1] in cross_entropy",
                "target_error": "its message (first line)",
                "target_fixed": "the fix ran",
                "all_fixed": "every fix ran",
            },
            {},
        ),
        Experiment(
            "device-mismatch",
            "Model on one device, data on another",
            "device_mismatch",
            DeviceMismatchParams,
            {
                "error_type": "the exception's type, e.g. RuntimeError",
                "error_message": "the exception's message",
                "error_line": "the source line that raised it",
                "model_device": "where the model's parameters were",
                "input_device": "where the batch was",
                "method": "cuda/mps (real accelerator) or meta (stand-in without one)",
            },
            {},
        ),
        Experiment(
            "checkpoint-roundtrip",
            "Save on the training device, load on the CPU",
            "checkpoint_roundtrip",
            CheckpointParams,
            {
                "allclose": "torch.allclose(predictions before saving, after loading on the CPU)",
                "max_abs_diff": "largest absolute difference between the two predictions",
                "file_bytes": "checkpoint size in bytes",
                "saved_on": "device the model trained and was saved on",
                "loaded_on": "device the checkpoint was loaded onto (cpu)",
                "epoch": "epoch stored in the checkpoint",
                "loss": "loss stored in the checkpoint",
            },
            {"steps": 20},
        ),
        Experiment(
            "fp16-underflow",
            "A small gradient in float16, with and without loss scaling",
            "fp16_underflow",
            Fp16UnderflowParams,
            {
                "gradient_fp32": "the gradient computed in float32",
                "gradient_fp16": "the same gradient computed in float16 (0.0 if it underflowed)",
                "gradient_scaled_fp16": "the float16 gradient with the loss scaled, then unscaled in float32",
                "flushed_to_zero": "True if float16 without scaling lost the gradient",
                "scale": "the loss scale used",
                "fp16_smallest_subnormal": "smallest positive float16 (2**-24)",
                "fp16_smallest_normal": "smallest normal float16 (2**-14)",
                "fp16_max": "largest float16",
            },
            {},
        ),
        Experiment(
            "amp-compare",
            "fp32 vs mixed precision on the same data and seed",
            "amp_compare",
            AmpCompareParams,
            {
                "fp32_seconds": "training seconds per epoch in fp32",
                "amp_seconds": "training seconds per epoch with autocast",
                "speedup": "fp32_seconds / amp_seconds",
                "fp32_accuracy": "test accuracy in fp32 (0..1)",
                "amp_accuracy": "test accuracy with autocast (0..1)",
                "fp32_peak_mb": "peak device memory in fp32 (MB; None where not measurable)",
                "amp_peak_mb": "peak device memory with autocast (MB; None where not measurable)",
                "amp_dtype": "float16 or bfloat16",
                "grad_scaler": "True if a GradScaler was used",
                "device": "torch device used",
            },
            {"train_samples": 2048, "test_samples": 512},
        ),
        Experiment(
            "pipeline-breakdown",
            "One training step by phase, achieved FLOP/s and MFU",
            "pipeline_breakdown",
            PipelineBreakdownParams,
            {
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
            {"steps": 10, "width": 256},
        ),
    ]
}


class UnknownExperiment(KeyError):
    pass


def register(exp: Experiment) -> None:
    """Add a lesson pack's experiment; a name already taken (built-in or another pack's) is refused."""
    taken = REGISTRY.get(exp.name)
    if taken is not None and taken is not exp:
        raise ValueError(f"experiment {exp.name!r} is already defined; choose another name")
    REGISTRY[exp.name] = exp


def get(name: str) -> Experiment:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownExperiment(
            f"unknown experiment {name!r}; available: {', '.join(sorted(REGISTRY))}"
        ) from None


def start(name: str, values: dict[str, Any] | None = None, device: str | None = None) -> Iterator[Event]:
    """Validate params, resolve the device, and return the experiment's event stream.

    `device` (the CLI's --device or the app's setting) is used unless `values` names one.
    Raises UnknownExperiment, pydantic.ValidationError or devices.DeviceError before any
    work starts; errors during the run surface while iterating.
    """
    from tutor.experiments import devices

    exp = get(name)
    params = exp.make_params(values)
    dev = devices.resolve(params.device or device)
    return exp.load()(params, dev)
