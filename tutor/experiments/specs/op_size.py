"""The spec of `op-size`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/op_size.py."""

from __future__ import annotations

from pydantic import Field, field_validator

from tutor.experiments.spec import Experiment, Metric, Params

SMALLEST = 10  # elements: the sweep starts here and goes up by tenfold steps


class OpSizeParams(Params):
    # 10M float32 elements: three 40 MB tensors, past any CPU's cache, a few milliseconds an add.
    largest: int = Field(
        10_000_000, ge=1_000, le=10_000_000, description="elements of the largest add: a power of ten, 1,000 to 10M"
    )
    repeats: int = Field(7, ge=3, le=21, description="timed blocks of adds per size, at least (3 to 21)")

    @field_validator("largest")
    @classmethod
    def _a_power_of_ten(cls, value: int) -> int:
        if sizes(value)[-1] != value:
            raise ValueError(f"largest must be a power of ten (1,000 to 10,000,000), not {value:,}")
        return value


def sizes(largest: int) -> list[int]:
    """10, 100, 1,000, ... up to `largest` (the last power of ten not above it)."""
    out = [SMALLEST]
    while out[-1] * 10 <= largest:
        out.append(out[-1] * 10)
    return out


NO_GPU = "no GPU here"

SPEC = Experiment(
    name="op-size",
    title="One elementwise add, from 10 to 10M elements",
    module="op_size",
    params=OpSizeParams,
    metrics={
        "seconds_smallest": Metric(
            "one add of 10 elements", "s", "torch.add(a, b, out=c) of 10 float32 elements on the CPU (median)"
        ),
        "seconds_largest": Metric("one add at the largest size", "s", "the same add at `largest` elements (median)"),
        "size_ratio": Metric(
            "largest add's time over the smallest's",
            "x",
            "how many times longer one add of `largest` elements took than one of 10, on the CPU",
        ),
        "size_ratio_low": Metric("that ratio, low", "x", "the low end of size_ratio's interval"),
        "size_ratio_high": Metric("that ratio, high", "x", "the high end of size_ratio's interval"),
        "elements_ratio": Metric(
            "elements, largest over smallest", "x", "how many times more elements the largest add has"
        ),
        "fixed_seconds": Metric(
            "fixed cost of one add",
            "s",
            "the 10-element add's time: its arithmetic is nanoseconds, the rest is the cost of any op "
            "(the Python call, PyTorch's dispatch, setting up the loop)",
        ),
        "flat_up_to": Metric(
            "largest size under twice the fixed cost",
            "",
            "elements: the largest size, from 10 up, whose add took under 2x the 10-element add's time",
        ),
        "ns_per_element_largest": Metric(
            "ns per element at the largest size", "", "the largest add's time over its elements, in ns"
        ),
        "gbps_largest": Metric(
            "memory traffic at the largest size, GB/s",
            "",
            "12 bytes per element (read a and b, write c) over the largest add's time",
        ),
        "a100_bandwidth_ratio": Metric(
            "the A100's bandwidth over this CPU's",
            "x",
            "the A100 40 GB data sheet's 1,555 GB/s over gbps_largest: about the most a GPU gains on a memory-bound add this size "
            "(None when the largest add's 12 bytes per element fit in 64 MiB, a cache's reach)",
            none="the largest add fits in a cache",
        ),
        "alloc_seconds_largest": Metric(
            "a + b, a new output each call, largest",
            "s",
            "c = a + b at the largest size, a new c each call (median): the allocator's cost too",
        ),
        "accel_seconds_smallest": Metric(
            "one add of 10 elements on the GPU", "s", "the same add on the run's GPU (median)", none=NO_GPU
        ),
        "accel_seconds_largest": Metric(
            "one add at the largest size on the GPU", "s", "the largest add on the run's GPU (median)", none=NO_GPU
        ),
        "accel_speedup_smallest": Metric(
            "the GPU over the CPU at 10 elements",
            "x",
            "CPU time over GPU time at 10 elements (below 1: the CPU wins)",
            none=NO_GPU,
        ),
        "accel_speedup_largest": Metric(
            "the GPU over the CPU at the largest size", "x", "CPU time over GPU time at the largest size", none=NO_GPU
        ),
        "crossover_elements": Metric(
            "smallest size the GPU wins from",
            "",
            "elements: from this size up, every add was faster on the GPU (None: no GPU, or it never won)",
            none="no GPU here, or it never won",
        ),
    },
    quick={"largest": 100_000, "repeats": 3},
)
