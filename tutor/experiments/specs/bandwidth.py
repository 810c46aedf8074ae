"""The spec of `bandwidth`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/bandwidth.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class BandwidthParams(Params):
    megabytes: int = Field(128, ge=1, le=4096, description="MiB per float32 array copied or multiplied")
    matmul_size: int = Field(2048, ge=16, le=16384, description="n of the n x n float32 matmul timed")
    repeats: int = Field(
        10,
        ge=1,
        le=100,
        description="timed blocks per operation, about: blocks of 20 ms or of one call, "
        "by torch.utils.benchmark (the best counts for the roofs)",
    )


# How far separate runs' elementwise_peak_share land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 47.0% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%). Whole runs land near 1.4% or near 2%.
MEASURED_GUARD = 0.47

SPEC = Experiment(
    name="bandwidth",
    title="Memory bandwidth against compute: a roofline of your device",
    module="bandwidth",
    params=BandwidthParams,
    metrics={
        "copy_gbps": Metric(
            "host-to-device copy in GB/s",
            "",
            "host-to-device copy from ordinary (pageable) memory, GB/s (None on a CPU: there is no device to copy to)",
            none="n/a: no host-to-device copy on a CPU",
        ),
        "pinned_copy_gbps": Metric(
            "pinned host-to-device copy in GB/s",
            "",
            "host-to-device copy from page-locked (pinned) memory, GB/s (None off CUDA)",
            none="n/a off CUDA",
        ),
        "pinned_speedup": Metric(
            "pinned against pageable copy", "x", "pinned_copy_gbps / copy_gbps (None off CUDA)", none="n/a off CUDA"
        ),
        "device_copy_gbps": Metric(
            "on-device copy in GB/s", "", "device-to-device copy, bytes read + bytes written per second, GB/s"
        ),
        "elementwise_gbps": Metric(
            "elementwise multiply in GB/s",
            "",
            "c = a * b, float32: 12 bytes moved per element (two reads, one write), GB/s",
        ),
        "elementwise_tflops": Metric(
            "elementwise multiply throughput", "TFLOP/s", "c = a * b: one FLOP per element (TFLOP/s)"
        ),
        "matmul_tflops": Metric(
            "matmul throughput", "TFLOP/s", "the n x n float32 matmul: 2 n^3 FLOPs per product (TFLOP/s)"
        ),
        "peak_tflops": Metric(
            "compute roof",
            "TFLOP/s",
            "the roofline's flat part: this device's measured float32 matmul peak (cached "
            "sweep), or this run's matmul where it was faster (TFLOP/s)",
        ),
        "bandwidth_gbps": Metric(
            "memory roof in GB/s",
            "",
            "the roofline's slope: the best bandwidth measured on the device (device copy or elementwise), GB/s",
        ),
        "ridge_point": Metric(
            "ridge point in FLOP per byte",
            "",
            "peak_tflops / bandwidth_gbps: the arithmetic intensity (FLOP/B) above which an "
            "operation is limited by compute, below which by memory",
        ),
        "elementwise_intensity": Metric(
            "elementwise FLOP per byte", "", "arithmetic intensity of c = a * b: 1 FLOP / 12 B"
        ),
        "matmul_intensity": Metric(
            "matmul FLOP per byte", "", "arithmetic intensity of the matmul: 2 n^3 FLOPs / (3 n^2 x 4 B) = n / 6"
        ),
        "elementwise_peak_share": Metric(
            "elementwise share of the peak",
            "%",
            "the median over the multiply's timings of its FLOP/s / peak_tflops (the one roof; 0..1)",
            guard=MEASURED_GUARD,
        ),
        "elementwise_peak_share_low": Metric(
            "elementwise share, interval low",
            "%",
            "the low end of that median's 95% interval (order statistics; the "
            "lowest under 6 timings; 0..1; None with one timing: repeats=1)",
            none="one timing: no interval",
        ),
        "elementwise_peak_share_high": Metric(
            "elementwise share, interval high",
            "%",
            "the high end of the same interval (0..1; None with one timing)",
            none="one timing: no interval",
        ),
        "matmul_peak_share": Metric("matmul share of the peak", "%", "matmul_tflops / peak_tflops (0..1)"),
        "elementwise_bound": Metric(
            "the multiply is limited by", "text", "memory (its intensity is below the ridge point) or compute"
        ),
        "matmul_bound": Metric(
            "the matmul is limited by", "text", "memory (its intensity is below the ridge point) or compute"
        ),
        "threads": Metric("CPU threads", "", "intra-op threads the CPU used (None on a GPU)", none="n/a on a GPU"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"megabytes": 8, "matmul_size": 256, "repeats": 2},
)
