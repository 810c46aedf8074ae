"""calibrate: this machine's roofline measured once, as a lesson's run step.

The measurement is calibration.py's (`gpututor calibrate` runs the same): each native dtype's
matmul peak by peak.py's sweep, then the memory bandwidth by the bandwidth experiment's own
MemoryTraffic. The record is stored as the command stores it, so doctor shows it, MFU uses its
peaks and `gpututor roofline` places the learner's runs on it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from tutor.charts import roofline
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.specs.calibrate_machine import CalibrateParams
from tutor.measurement import calibration, vendor_peaks
from tutor.measurement import peak as matmul_peak
from tutor.measurement.intervals import bounds, ratio_interval
from tutor.present import flops_text, number

SWEEPS = 3  # each dtype's sweep, run again: the best is kept, the spread says how far the peak moves here


def measure(p: CalibrateParams, dev: Device) -> Iterator[Event]:
    plan = calibration.planned(dev)
    yield Started("calibrate", dev.torch_device, dev.name, "no data: matmuls and array copies", f"{', '.join(plan)}")
    yield Note(
        "Two numbers bound every operation on this device: how fast it multiplies (the compute roof) and "
        "how fast it moves bytes to and from memory (the memory roof). Each is measured, not read off a "
        "spec sheet: the matmul peak is the fastest of a sweep of sizes, each warmed up (the 'maximum "
        "achievable matmul' method), and the bandwidth is a copy and c = a * b on arrays larger than any cache."
    )
    started = time.perf_counter()
    steps = calibration.measuring(dev, sweeps=SWEEPS)
    done = 0
    swept: dict[str, list[float]] = {}  # dtype -> every sweep's peak
    while True:
        try:
            what, seconds, result, every = next(steps)
        except StopIteration as finished:
            record: calibration.Calibration = finished.value
            break
        done += 1
        yield Step(done, len(plan), float("nan"), time.perf_counter() - started, 0.0, label=what)
        if isinstance(result, matmul_peak.Peak):
            swept[result.dtype] = every
            moved = (
                f"; its {len(every)} sweeps reached {flops_text(min(every))} to {flops_text(max(every))}"
                if len(every) > 1
                else ""
            )
            yield Note(
                f"{what}: {flops_text(result.tflops)} ({result.how_text()}, the best of {len(every)} "
                f"sweep{'s' if len(every) != 1 else ''}{moved}; {seconds:.1f} s)."
            )
        else:
            yield Note(
                f"{what}: {number(result.gbps, 'GB/s')} (device copy {number(result.device_copy_gbps, 'GB/s')}, "
                f"c = a * b {number(result.elementwise_gbps, 'GB/s')}; {seconds:.1f} s)."
            )

    rows = []
    shares: dict[str, float | None] = {}
    for peak in record.peaks:
        sheet = vendor_peaks.for_device(dev, peak.dtype)
        shares[peak.dtype] = peak.tflops / sheet[0] if sheet else None
        peak_ridge = record.ridge(peak.dtype)
        assert peak_ridge is not None  # None only for a dtype without a peak, and this is one of record.peaks
        rows.append(
            [
                peak.dtype,
                flops_text(peak.tflops),
                number(peak_ridge),
                f"{flops_text(sheet[0])} ({number(peak.tflops / sheet[0] * 100, '%')} of it)"
                if sheet
                else "none known",
            ]
        )
    yield Table(
        f"The roofs of {dev.name}, measured {record.measured_on}",
        ["dtype", "matmul peak", "ridge (FLOP/B)", "spec sheet"],
        rows,
    )
    roof = record.peak(calibration.ROOF_DTYPE)
    assert roof is not None  # measuring raises when the float32 roof cannot be measured
    yield Note(roofline(roof.tflops, record.bandwidth.gbps, []), "figure")
    ridge = record.ridge()
    assert ridge is not None  # None only without the float32 roof, asserted above
    yield Note(
        f"The roofs meet at {number(ridge)} FLOP per byte (float32): an operation doing fewer FLOPs per byte "
        "it moves waits on memory, however fast the arithmetic; one doing more waits on arithmetic. "
        + (
            "A spec sheet's peak is the chip's best case; the measured peak is what a real matmul reaches "
            "here, and the fair thing to judge MFU against. "
            if any(v is not None for v in shares.values())
            else "No spec sheet is known for this device, so the measured peak is the only fair yardstick. "
        )
        + f"Kept for later: `gpututor doctor` shows it, MFU uses these peaks, and `{calibration.ROOFLINE_COMMAND}` "
        "places every run you have made on this roofline.",
        "result",
    )
    if record.others_said:
        yield Note(f"While it measured: {record.others_said}")
    for note in record.notes:
        yield Note(note, "warning")

    def tflops(dtype: str) -> float | None:
        found = record.peak(dtype)
        return found.tflops if found else None

    # What 16 bits buy, with its noise: the typical sweep of each (the peaks above are the best), and
    # the interval of their ratio.
    interval = ratio_interval(swept.get("bfloat16", []), swept.get("float32", [])) if tflops("bfloat16") else None
    bf16_speedup = interval.median if interval else None
    low, high = bounds(interval)

    yield Finished(
        {
            "float32_peak_tflops": roof.tflops,
            "tfloat32_peak_tflops": tflops("tfloat32"),
            "bfloat16_peak_tflops": tflops("bfloat16"),
            "float16_peak_tflops": tflops("float16"),
            "bfloat16_speedup": bf16_speedup,
            "bfloat16_speedup_low": low,
            "bfloat16_speedup_high": high,
            "bandwidth_gbps": record.bandwidth.gbps,
            "ridge_point": ridge,
            "float32_spec_share": shares.get("float32"),
            "seconds": record.seconds,
            "device": record.device,
        }
    )
