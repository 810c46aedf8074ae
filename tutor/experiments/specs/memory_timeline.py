"""The spec of `memory-timeline`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/memory_timeline.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import WRITES_FILE, Experiment, Metric, Params

# The phases of one training step, in order: what each point of the timeline belongs to.
PHASES = ("start", "forward", "backward", "optimizer step", "zero_grad")


class MemoryTimelineParams(Params):
    batch_size: int = Field(64, ge=1, le=8192, description="the notebook's 64; activations grow with it")
    steps: int = Field(3, ge=2, le=20, description="training steps recorded (2 to 20)")
    snapshot: str | None = Field(
        None,
        description="where to write the CUDA allocator snapshot (default: a file in the cache dir's "
        "scratch folder, kept for a day); CUDA only",
        json_schema_extra=WRITES_FILE,
    )


NO_CUDA = "n/a off CUDA"

SPEC = Experiment(
    name="memory-timeline",
    title="Memory through one training step, phase by phase",
    module="memory_timeline",
    params=MemoryTimelineParams,
    metrics={
        "peak_bytes": Metric(
            "peak of the tracked memory",
            "B",
            "the most the hooks counted at once: parameters + gradients + optimizer state + saved activations",
        ),
        "peak_phase": Metric(
            "phase of the peak", "text", "where the peak was first reached: forward, backward or optimizer step"
        ),
        "peak_step": Metric("step of the peak", "", "the training step (from 1) where the peak was first reached"),
        "peak_point": Metric("point of the peak", "text", "the timeline's point at the peak, as the chart labels it"),
        "params_bytes": Metric("parameters", "B", "the model's parameters (float32)"),
        "grads_bytes": Metric("gradients", "B", "every .grad after backward: as many bytes as the parameters"),
        "adam_state_bytes": Metric(
            "Adam state", "B", "optimizer state after the first step: exp_avg, exp_avg_sq and a step counter each"
        ),
        "saved_peak_bytes": Metric(
            "saved activations at their most", "B", "the most bytes autograd held saved for backward at one point"
        ),
        "saved_peak_point": Metric("point saved activations peak", "text", "where saved activations were most"),
        "first_start_bytes": Metric("tracked at step 1's start", "B", "parameters alone: no gradients, no state"),
        "later_start_bytes": Metric(
            "tracked at step 2's start", "B", "parameters + Adam state: zero_grad(set_to_none=True) freed the grads"
        ),
        "cuda_peak_bytes": Metric(
            "peak allocated (CUDA)",
            "B",
            "torch.cuda.max_memory_allocated over the steps, above what was allocated before the model",
            none=NO_CUDA,
        ),
        "snapshot_path": Metric(
            "allocator snapshot file", "text", "the pickle torch.cuda.memory._dump_snapshot wrote", none=NO_CUDA
        ),
        "final_loss": Metric("loss at the last step", "", "cross-entropy of the last step's batch"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"batch_size": 16, "steps": 2},
)
