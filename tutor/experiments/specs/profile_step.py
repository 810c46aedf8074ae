"""The spec of `profile-step`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/profile_step.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import WRITES_FILE, Experiment, Metric, Params
from tutor.experiments.specs.pipeline_breakdown import MFU_INTERVAL


class ProfileStepParams(Params):
    steps: int = Field(20, ge=1, le=1000, description="training steps profiled (and timed without the profiler)")
    batch_size: int = Field(64, ge=1, le=65536)
    top: int = Field(10, ge=1, le=50, description="operators listed in the table, by self time")
    trace: str | None = Field(
        None,
        description="where to write the Chrome/Perfetto trace (default: a file in the "
        "cache dir's scratch folder, kept for a day)",
        json_schema_extra=WRITES_FILE,
    )


# How far separate runs' mfu land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 35.9% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.36

SPEC = Experiment(
    name="profile-step",
    title="torch.profiler on the MNIST training step: operators, phases, GPU-Util against MFU",
    module="profile_step",
    params=ProfileStepParams,
    metrics={
        "top_op": Metric(
            "operator with the most self time",
            "text",
            "the operator with the most self time (device time on CUDA, CPU time elsewhere)",
        ),
        "top_op_share": Metric(
            "its share of all operator time", "%", "top_op's self time / every operator's self time (0..1)"
        ),
        "data_share": Metric("data phase", "%", "host time in record_function('data') / the step's (0..1)"),
        "forward_share": Metric("forward phase", "%", "host time in record_function('forward'), with the loss (0..1)"),
        "backward_share": Metric("backward phase", "%", "host time in record_function('backward') (0..1)"),
        "optimizer_share": Metric(
            "optimizer phase", "%", "host time in record_function('optimizer'): step and zero_grad (0..1)"
        ),
        "ops_per_step": Metric(
            "operator calls per step", "", "PyTorch operator calls (aten::) per step, nested ones included"
        ),
        "kernels_per_step": Metric(
            "GPU kernels per step", "", "CUDA kernels launched per step (None off CUDA)", none="n/a off CUDA"
        ),
        "gpu_busy_share": Metric(
            "time a kernel was running",
            "%",
            "share of the profiled steps' time during which at least one kernel ran, what "
            "nvidia-smi's GPU-Util samples (0..1; None off CUDA)",
            none="n/a off CUDA",
        ),
        "launch_gap_seconds": Metric(
            "median gap between kernels",
            "s",
            "median idle time from one kernel's end to the next one's start (None off CUDA)",
            none="n/a off CUDA",
        ),
        "step_seconds": Metric(
            "time per step",
            "s",
            "seconds per training step without the profiler: the steps are timed in up to 10 "
            "stretches, the device synchronised where each ends; the median stretch's",
        ),
        "profiled_step_seconds": Metric(
            "time per step, profiled", "s", "seconds per step with the profiler recording (its overhead included)"
        ),
        "flops_per_step": Metric(
            "model FLOPs per step", "", "6 x (sum of in x out over the Linear layers) x batch_size"
        ),
        "achieved_tflops": Metric("achieved throughput", "TFLOP/s", "flops_per_step / step_seconds (TFLOP/s)"),
        "peak_tflops": Metric(
            "measured peak",
            "TFLOP/s",
            "this device's measured matmul peak (the cached sweep of pipeline-breakdown and "
            "`gpututor doctor`; raised to this run's fastest stretch of steps where that beat "
            "it), TFLOP/s",
        ),
        "mfu": Metric("MFU", "%", "achieved_tflops / peak_tflops (0..1)", guard=MEASURED_GUARD),
        **MFU_INTERVAL,
        "trace_path": Metric("trace file", "text", "the Chrome/Perfetto trace written (open it in ui.perfetto.dev)"),
        "trace_bytes": Metric("trace file size", "B", "its size in bytes"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"steps": 3},
)
