"""The spec of `calibrate`, torch-free: this machine's roofline measured once, as a lesson's run
step (gpututor calibrate is the same measurement from the command line). The measurement is
`measure` in tutor/experiments/calibrate_machine.py."""

from __future__ import annotations

from tutor.experiments.spec import Experiment, Metric, Params


class CalibrateParams(Params):
    pass


NOT_NATIVE = "n/a: not native here"

# How far separate runs' bfloat16_speedup land beyond one run's interval (the factor, less 1, that holds
# them), on this 2-core CPU: at most 1.1% over four studies of 5 runs each at the lesson's
# settings (bench/verdict_study.py, 2026-11-28; at least 2%).
MEASURED_GUARD = 0.02

SPEC = Experiment(
    name="calibrate",
    title="This machine's roofline, measured once",
    module="calibrate_machine",
    params=CalibrateParams,
    metrics={
        "float32_peak_tflops": Metric(
            "float32 matmul peak",
            "TFLOP/s",
            "the fastest float32 matmul of a sweep of sizes, each warmed up, the best of its "
            "repeats: the realistic compute roof",
        ),
        "tfloat32_peak_tflops": Metric(
            "TF32 matmul peak",
            "TFLOP/s",
            "the same with TF32 tensor cores (None where the device has none)",
            none=NOT_NATIVE,
        ),
        "bfloat16_peak_tflops": Metric(
            "bfloat16 matmul peak", "TFLOP/s", "the same in bfloat16 (None where it is not native)", none=NOT_NATIVE
        ),
        "float16_peak_tflops": Metric(
            "float16 matmul peak", "TFLOP/s", "the same in float16 (None where it is not native)", none=NOT_NATIVE
        ),
        "bfloat16_speedup": Metric(
            "bfloat16 vs float32 matmul speed",
            "x",
            "the median bfloat16 sweep's TFLOP/s over the median float32 sweep's: what a "
            "16-bit matmul typically gains here (None where bfloat16 is not native)",
            none=NOT_NATIVE,
            guard=MEASURED_GUARD,
        ),
        "bfloat16_speedup_low": Metric(
            "bfloat16 vs float32 speed, interval low",
            "x",
            "the low end of that ratio's interval: each dtype's median interval, divided "
            "end to end (None where bfloat16 is not native)",
            none=NOT_NATIVE,
        ),
        "bfloat16_speedup_high": Metric(
            "bfloat16 vs float32 speed, interval high",
            "x",
            "the high end of the same interval (None where bfloat16 is not native)",
            none=NOT_NATIVE,
        ),
        "bandwidth_gbps": Metric(
            "memory bandwidth (GB/s)",
            "",
            "the best of the device copy and c = a * b on arrays larger than any cache, GB/s: the memory roof",
        ),
        "ridge_point": Metric(
            "ridge point (FLOP per byte)",
            "",
            "float32 peak / bandwidth: below it an operation waits on memory, above on arithmetic",
        ),
        "float32_spec_share": Metric(
            "float32 peak, share of the spec sheet",
            "%",
            "the measured float32 peak / the vendor's dense float32 figure (None where "
            "the device has no spec sheet here: every CPU, unknown GPUs)",
            none="n/a: no spec sheet for this device",
        ),
        "seconds": Metric("time to calibrate", "s", "seconds the whole measurement took"),
        "device": Metric("device", "text", "the device identity the record is kept under"),
    },
)
