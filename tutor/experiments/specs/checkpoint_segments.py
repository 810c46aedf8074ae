"""The spec of `checkpoint-segments`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/checkpoint_segments.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class CheckpointSegmentsParams(Params):
    depth: int = Field(16, ge=2, le=256, description="Linear + ReLU layers")
    # 256 x 256: one activation is 256 KiB, and a 16-layer step takes about 20 ms on a 2-core CPU.
    width: int = Field(256, ge=16, le=16384)
    batch_size: int = Field(256, ge=1, le=65536)
    most_segments: int = Field(
        16, ge=2, le=256, description="the sweep's last segment count: 1, 2, 4, ... up to this power of two"
    )
    rounds: int = Field(7, ge=3, le=21, description="timed rounds, the segment counts taking turns (3 to 21)")

    @model_validator(mode="after")
    def _counts_divide_the_depth(self) -> CheckpointSegmentsParams:
        if self.most_segments & (self.most_segments - 1):
            raise ValueError(f"most_segments must be a power of two (2, 4, 8, ...), not {self.most_segments}")
        if self.most_segments > self.depth or self.depth % self.most_segments:
            raise ValueError(
                f"most_segments ({self.most_segments}) must divide depth ({self.depth}), so every segment "
                "holds whole layers: for example depth 16 with most_segments 16, or depth 64 with 16"
            )
        return self


def segment_counts(most: int) -> list[int]:
    """1, 2, 4, ... up to `most` (a power of two); 1 segment is no checkpointing at all."""
    counts = [1]
    while counts[-1] * 2 <= most:
        counts.append(counts[-1] * 2)
    return counts


def kept_activations(depth: int, segments: int) -> int:
    """Activations (in tensors of batch x width) a forward in `segments` segments keeps for backward:
    the input of each of the first segments - 1 (checkpointed), and the last segment, which runs
    plainly, its input and each of its depth / segments layers' outputs. segments + depth / segments,
    least at segments = sqrt(depth)."""
    return (segments - 1) + 1 + depth // segments


SPEC = Experiment(
    name="checkpoint-segments",
    title="Checkpoint segments swept: activation memory against step time",
    module="checkpoint_segments",
    params=CheckpointSegmentsParams,
    metrics={
        "best_segments": Metric(
            "segment count keeping the least", "", "the segment count whose forward kept the fewest bytes for backward"
        ),
        "sqrt_depth": Metric("square root of the depth", "", "sqrt(depth): where segments + depth / segments is least"),
        "plain_kept_bytes": Metric(
            "activations kept, 1 segment", "B", "activations kept for backward with 1 segment: no checkpointing"
        ),
        "best_kept_bytes": Metric("activations kept, best count", "B", "the same at best_segments"),
        "most_kept_bytes": Metric("activations kept, most segments", "B", "the same at most_segments"),
        "best_saving": Metric("activation memory saved, best count", "%", "1 - best / plain kept bytes (0..1)"),
        "most_saving": Metric("activation memory saved, most segments", "%", "1 - most / plain kept bytes (0..1)"),
        "formula_matches": Metric(
            "every count kept what the formula says",
            "bool",
            "True if each count kept (segments + depth / segments) x batch x width x 4 bytes",
        ),
        "plain_seconds_per_step": Metric("step time, 1 segment", "s", "median seconds per training step, plain"),
        "best_seconds_per_step": Metric("step time, best count", "s", "the same at best_segments"),
        "best_time_ratio": Metric(
            "best count's step time vs plain", "x", "median over the rounds of best / plain seconds per step"
        ),
        "best_time_ratio_low": Metric("that ratio, low", "x", "the low end of best_time_ratio's interval"),
        "best_time_ratio_high": Metric("that ratio, high", "x", "the high end of best_time_ratio's interval"),
        "most_time_ratio": Metric(
            "most segments' step time vs plain", "x", "median over the rounds of most / plain seconds per step"
        ),
        "plain_peak_bytes": Metric(
            "peak memory, 1 segment",
            "B",
            "peak allocated above the start of a plain step (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "best_peak_bytes": Metric(
            "peak memory, best count", "B", "the same at best_segments (CUDA; None elsewhere)", none="n/a off CUDA"
        ),
        "grads_match": Metric(
            "same gradients at every count", "bool", "True if every segment count gives the plain gradients (allclose)"
        ),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"depth": 16, "width": 32, "batch_size": 8, "most_segments": 16, "rounds": 3},
)
