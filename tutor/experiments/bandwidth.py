"""bandwidth: how fast memory moves against how fast the device computes, as a roofline.

Every operation reads and writes memory and does some arithmetic. Its **arithmetic intensity**
is FLOPs per byte moved. A device can move at most B bytes/s and compute at most P FLOP/s, so
an operation of intensity I runs at most min(P, I x B): the **roofline**. Below the ridge point
P / B FLOP/B an operation is memory-bound (a faster memory would help, more FLOP/s would not);
above it, compute-bound.

Measured here with PyTorch's own timer (torch.utils.benchmark.Timer, with this run's thread
count: measurement.timing.timed_blocks): each operation warmed up, then blocks of back-to-back
calls, the device synchronised at every clock read, for about `repeats` blocks of 20 ms (or of
one call, where a call is longer); the best block counts for the roofs:

- host to device (CUDA, MPS): a copy from ordinary (pageable) host memory, and on CUDA from
  page-locked (pinned) memory with non_blocking=True; on a CPU there is no such copy;
- device to device: dst.copy_(src), counted as bytes read + bytes written;
- an elementwise multiply c = a * b (float32): 1 FLOP per 12 bytes;
- an n x n float32 matmul: 2 n^3 FLOPs on 3 n^2 x 4 bytes at the least, intensity n / 6.

The compute roof is the device's measured float32 matmul peak (tutor/measurement/peak.py, a
cached sweep), or this run's matmul where it was faster; the memory roof is the best bandwidth
measured here. TF32 is off throughout (full float32, the precision the peak is for).

The multiply's share of the peak, the figure a prediction is graded against, is its typical
repeat's (the median of the repeats' shares, with the median's interval as
elementwise_peak_share_low .. _high); the roofline's own figures are best repeats.

The memory measurements are `MemoryTraffic`, which `gpututor calibrate`
(tutor/measurement/calibration.py) measures a machine's memory roof with too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import torch

from tutor.charts import Point, roofline
from tutor.experiments import gpu_share
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.specs.bandwidth import BandwidthParams
from tutor.experiments.training import full_float32_matmuls, seed_everything
from tutor.measurement import peak as matmul_peak
from tutor.measurement import vendor_peaks
from tutor.measurement.intervals import bounds, in_words, median_interval
from tutor.measurement.timing import timed_blocks
from tutor.present import flops_text, metric, number, size

OPERATION_BUDGET_S = 3.0  # one operation's timing stops after about this long (one block at least)
CACHE_SAFE_MIB = 64  # smaller arrays may sit in a cache (a CPU's L3, a GPU's L2) and measure it
FLOAT32 = 4
ELEMENTWISE_BYTES = 3 * FLOAT32  # c = a * b reads a and b and writes c
ELEMENTWISE_INTENSITY = 1 / ELEMENTWISE_BYTES  # one multiply per element


def best_seconds(fn: Callable[[], object], device: str, repeats: int) -> float:
    """Seconds per fn() call: the best block PyTorch's timer measured (timing.timed_blocks)."""
    return timed_blocks(fn, device, repeats, OPERATION_BUDGET_S).best


class Arrays:
    """Three float32 device arrays of `n` elements, and a host copy to upload (made pinned by `pin`)."""

    def __init__(self, n: int, device: str) -> None:
        self.a = torch.rand(n, device=device)
        self.b = torch.rand(n, device=device)
        self.c = torch.empty(n, device=device)
        self.host = torch.rand(n) if torch.device(device).type != "cpu" else None
        self.pinned = False

    def pin(self) -> None:
        assert self.host is not None
        self.host = self.host.pin_memory()
        self.pinned = True

    def from_host(self) -> None:
        assert self.host is not None  # made off the CPU, the only place a copy from the host is timed
        self.c.copy_(self.host, non_blocking=self.pinned)  # only a pinned source can be copied asynchronously

    def copy(self) -> None:
        self.c.copy_(self.a)

    def multiply(self) -> None:
        torch.mul(self.a, self.b, out=self.c)


class Matrices:
    """Two random n x n float32 matrices and an output."""

    def __init__(self, n: int, device: str) -> None:
        self.a = torch.randn(n, n, device=device)
        self.b = torch.randn(n, n, device=device)
        self.c = torch.empty(n, n, device=device)

    def multiply(self) -> None:
        torch.mm(self.a, self.b, out=self.c)


def _free_bytes(dev: Device) -> int | None:
    """Memory free for this run's arrays: on a GPU what this run may take (free on the card, within
    the class's per-run cap: gpu_share.py), else the host's available memory."""
    if dev.kind in ("cuda", "mps"):
        return gpu_share.available(dev.kind, dev.index)
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def _gbps(nbytes: float, seconds: float) -> float:
    return nbytes / seconds / 1e9


class MemoryTraffic:
    """The memory half of a roofline, measured: the host-to-device copies (pageable on a GPU,
    pinned on CUDA), the device copy and c = a * b on float32 arrays of `megabytes` MiB each.
    The bandwidth experiment and `gpututor calibrate` both measure through this one class.

    `steps()` measures one operation at a time and yields its name after each (for a run's
    progress and a cancel between operations); `run()` measures all of them at once. The
    results are attributes; None for what this device has no such copy for."""

    def __init__(self, dev: Device, megabytes: int, repeats: int) -> None:
        self.dev, self.megabytes, self.repeats = dev, megabytes, repeats
        self.nbytes = megabytes * 2**20
        self.copy_gbps: float | None = None
        self.pinned_gbps: float | None = None
        self.device_copy_gbps: float | None = None
        self.elementwise_gbps: float | None = None
        self.elementwise_tflops: float | None = None  # the best timing's
        self.elementwise_repeat_tflops: list[float] = []  # each timing's, for the spread of its repeats

    @property
    def operations(self) -> int:
        """How many operations `steps()` times on this device."""
        return (2 if self.dev.kind == "cuda" else 1 if self.dev.kind == "mps" else 0) + 2

    def check_fits(self) -> None:
        """Three device arrays (and on a GPU a pageable and a pinned host copy): refuse before allocating."""
        need = 3 * self.nbytes
        free = _free_bytes(self.dev)
        if free is not None and need > free // 2:
            raise ValueError(
                f"megabytes={self.megabytes} needs {size(need)} on {self.dev.torch_device}, more "
                f"than half of the {size(free)} free for this run there: choose a smaller megabytes"
            )

    def steps(self) -> Iterator[str]:
        device = self.dev.torch_device
        n_elements = self.nbytes // FLOAT32
        with torch.no_grad():
            arrays = Arrays(n_elements, device)
            if self.dev.kind != "cpu":
                self.copy_gbps = _gbps(self.nbytes, best_seconds(arrays.from_host, device, self.repeats))
                yield "host to device"
                if self.dev.kind == "cuda":
                    arrays.pin()
                    self.pinned_gbps = _gbps(self.nbytes, best_seconds(arrays.from_host, device, self.repeats))
                    yield "pinned host to device"
            self.device_copy_gbps = _gbps(2 * self.nbytes, best_seconds(arrays.copy, device, self.repeats))
            yield "device copy"
            blocks = timed_blocks(arrays.multiply, device, self.repeats, OPERATION_BUDGET_S)
            self.elementwise_gbps = _gbps(ELEMENTWISE_BYTES * n_elements, blocks.best)
            self.elementwise_tflops = n_elements / blocks.best / 1e12
            self.elementwise_repeat_tflops = [n_elements / t / 1e12 for t in blocks.times if t > 0]
            del arrays  # released before the caller allocates anything else
            yield "elementwise"

    def run(self) -> MemoryTraffic:
        self.check_fits()
        for _ in self.steps():
            pass
        return self

    @property
    def bandwidth_gbps(self) -> float:
        """The memory roof: the best of the device copy and the multiply."""
        assert self.device_copy_gbps is not None and self.elementwise_gbps is not None, "not measured yet"
        return max(self.device_copy_gbps, self.elementwise_gbps)


def measure(p: BandwidthParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = dev.torch_device
    cuda, cpu = dev.kind == "cuda", dev.kind == "cpu"
    n = p.matmul_size
    threads = torch.get_num_threads() if cpu else None
    yield Started(
        "bandwidth",
        device,
        dev.name,
        "random float32 tensors (the timing does not depend on the data)",
        f"arrays of {p.megabytes:,} MiB, a {n} x {n} matmul, the best of about {p.repeats} timed "
        "blocks each (torch.utils.benchmark)",
    )

    traffic = MemoryTraffic(dev, p.megabytes, p.repeats)
    traffic.check_fits()
    if cpu:
        yield Note(
            f"No GPU here: this measures the CPU ({dev.name}) with {threads} thread"
            f"{'s' if threads != 1 else ''}: its memory bandwidth (RAM to the cores and back) and its "
            "matmul FLOP/s. A CPU computes where its data already is, so there is no host-to-device "
            "copy to time: those figures are n/a. On a GPU the same run would time the copy over the "
            "bus (PCIe) from pageable and from pinned memory, and the GPU's own memory (HBM or GDDR).",
            "warning",
        )
    if p.megabytes < CACHE_SAFE_MIB:
        yield Note(
            f"Arrays of {p.megabytes:,} MiB may fit, at least partly, in the caches (tens of MiB on a CPU, "
            "up to about 50 MiB of L2 on a large GPU): the bandwidth measured is then partly the caches', "
            f"higher than the memory's. The default, {BandwidthParams.model_fields['megabytes'].default:,} "
            "MiB, is larger than any cache.",
            "warning",
        )
    peak: matmul_peak.Peak | None
    if matmul_peak.cached(dev, "float32") is None:
        yield Note(
            f"Measuring this device's float32 matmul peak first: {matmul_peak.sweep_words(dev.kind)}; "
            "kept for later runs "
            f"(`{matmul_peak.MEASURE_COMMAND}` measures it again)."
        )
        peak = matmul_peak.measure(dev, "float32")
        if (crowded := matmul_peak.not_kept_words(peak)) is not None:
            yield Note(crowded, "warning")
    else:
        peak = matmul_peak.cached(dev, "float32")
    assert peak is not None

    started = time.perf_counter()
    done = 0
    total = traffic.operations + 1  # and the matmul

    def progress(what: str) -> Step:
        nonlocal done
        done += 1
        return Step(done, total, float("nan"), time.perf_counter() - started, 0.0, label=what)

    with full_float32_matmuls(), torch.no_grad():
        for what in traffic.steps():  # the arrays are released before the matrices are made
            yield progress(what)
        copy_gbps, pinned_gbps = traffic.copy_gbps, traffic.pinned_gbps
        device_copy_gbps, elementwise_gbps = traffic.device_copy_gbps, traffic.elementwise_gbps
        elementwise_tflops = traffic.elementwise_tflops
        assert device_copy_gbps is not None and elementwise_gbps is not None and elementwise_tflops is not None
        matrices = Matrices(n, device)
        matmul_tflops = 2 * n**3 / best_seconds(matrices.multiply, device, p.repeats) / 1e12
        yield progress("matmul")
        del matrices

    peak_tflops = max(peak.tflops, matmul_tflops)
    best_share = elementwise_tflops / peak_tflops
    # The multiply's share of the peak, per repeat. The denominator is the one compute roof, not a
    # matmul repeat paired with each multiply repeat: a roof is the best the device was seen to do,
    # and the two operations were timed one after the other, so pairing their k-th repeats would
    # not cancel a slow moment, only add the matmul's noise. What is graded is the typical repeat's
    # share (the median, with its interval); the roofline plots the best.
    share = median_interval([t / peak_tflops for t in traffic.elementwise_repeat_tflops])
    elementwise_share = share.median if share else best_share
    share_low, share_high = bounds(share)
    bandwidth_gbps = traffic.bandwidth_gbps
    ridge = peak_tflops * 1e12 / (bandwidth_gbps * 1e9)
    matmul_intensity = n / 6
    pinned_speedup = pinned_gbps / copy_gbps if pinned_gbps is not None and copy_gbps else None
    memory_name = "RAM" if cpu else "device memory"

    def roof(intensity: float) -> float:  # TFLOP/s
        return min(peak_tflops, intensity * bandwidth_gbps * 1e9 / 1e12)

    def bound(intensity: float) -> str:
        return "memory" if intensity < ridge else "compute"

    rows = []
    if not cpu:
        assert copy_gbps is not None  # timed on every device but the CPU
        rows.append(["host to device, pageable", number(copy_gbps, "GB/s"), "over the bus to the device"])
    if cuda:
        assert pinned_gbps is not None  # timed on CUDA
        rows.append(["host to device, pinned", number(pinned_gbps, "GB/s"), "page-locked: DMA straight from it"])
    rows += [
        ["device to device copy", number(device_copy_gbps, "GB/s"), f"{memory_name} read + written"],
        ["c = a * b", number(elementwise_gbps, "GB/s"), "12 bytes per element, 1 FLOP"],
    ]
    yield Table(
        f"Memory traffic on {device}, arrays of {p.megabytes:,} MiB (the best block of each)",
        ["operation", "bandwidth", "what moves"],
        rows,
    )

    # The roofs are this run's own best: an operation that set the roof over it sits on that roof by
    # construction, which its row says rather than a bare 100%.
    on_own_roof = {
        "c = a * b": elementwise_gbps >= device_copy_gbps and bound(ELEMENTWISE_INTENSITY) == "memory",
        f"matmul {n}": matmul_tflops > peak.tflops and bound(matmul_intensity) == "compute",
    }
    ops = [("c = a * b", ELEMENTWISE_INTENSITY, elementwise_tflops), (f"matmul {n}", matmul_intensity, matmul_tflops)]
    yield Table(
        f"Roofline on {device} (float32): roof = min({flops_text(peak_tflops)}, FLOP/B x "
        f"{number(bandwidth_gbps, 'GB/s')}), ridge at {number(ridge)} FLOP/B",
        ["operation", "FLOP/B", "achieved", "roof there", "of roof", "bound by"],
        [
            [
                name,
                number(i),
                flops_text(achieved),
                flops_text(roof(i)),
                "100% (its own)" if on_own_roof[name] else metric(achieved / roof(i), "%"),
                bound(i),
            ]
            for name, i, achieved in ops
        ],
    )
    setters = [name for name, on in on_own_roof.items() if on]
    if setters:
        yield Note(
            f"{' and '.join(setters)} {'each ' if len(setters) > 1 else ''}set the roof it is placed "
            "against: the roofs in this table are this run's own best, so such a point sits on its roof by "
            "construction. `gpututor roofline` places this run on the machine's calibrated roofline "
            "instead, measured apart from it."
        )
    yield Note(
        roofline(
            peak_tflops,
            bandwidth_gbps,
            [
                Point("e", "c = a * b", ELEMENTWISE_INTENSITY, elementwise_tflops),
                Point("m", f"matmul {n}", matmul_intensity, matmul_tflops),
            ],
        ),
        "figure",
    )
    yield Note(
        f"The roofline of this {'CPU' if cpu else 'device'}, from its own numbers: the memory roof is "
        f"{number(bandwidth_gbps, 'GB/s')} (the best of the device copy and the multiply), the compute "
        f"roof {flops_text(peak_tflops)} (float32 matmul, "
        + (
            "this run's matmul, faster than the cached sweep"
            if matmul_tflops > peak.tflops
            else f"{peak.how_text()}, {peak.measured_on}"
        )
        + f"). Their ratio, {number(ridge)} FLOP per byte, "
        "is the ridge point: an operation that does fewer FLOPs per byte it moves waits on memory; "
        "one that does more waits on arithmetic.",
        "result",
    )
    sheet = vendor_peaks.for_device(dev, "float32")
    if sheet is not None:
        yield Note(
            f"Beside the spec sheet: the compute roof measured here is "
            f"{vendor_peaks.beside(peak_tflops, sheet, 'float32')}, and this run's matmul reached "
            f"{vendor_peaks.beside(matmul_tflops, sheet, 'float32')}. The roofline uses the measured roof: "
            "what a real matmul reaches on this device, not the chip's best case."
        )
    share_noise = (
        f" ({in_words(share, lambda v: metric(v, '%'))})"
        if share is not None and share_low is not None  # (bounds() is None, None without an interval)
        else ""
    )
    yield Note(
        f"c = a * b does 1 multiply per 12 bytes ({number(ELEMENTWISE_INTENSITY)} FLOP/B), far left of the "
        f"ridge: at best it ran at {flops_text(elementwise_tflops)} ({metric(best_share, '%')} of the compute "
        f"peak), and a typical repeat reached {metric(elementwise_share, '%')} of it{share_noise}, while moving "
        f"{number(elementwise_gbps, 'GB/s')}. The {n} x {n} matmul uses each number it loads {n:,} times: "
        f"{number(matmul_intensity)} FLOP/B, and reached "
        f"{flops_text(matmul_tflops)}, {metric(matmul_tflops / peak_tflops, '%')} of the peak: "
        + (
            "compute-bound."
            if bound(matmul_intensity) == "compute"
            else "still left of the ridge here, so memory-bound too (a larger matmul_size moves it right)."
        )
        + " Activations, normalisations, the optimizer's update and copies are elementwise: memory-bound "
        "on every device; matmuls are where the FLOP/s are. Fusing elementwise operations (fewer trips "
        "to memory) speeds them up; more FLOP/s do not."
    )
    if cuda:
        assert copy_gbps is not None and pinned_gbps is not None  # both timed on CUDA
        yield Note(
            f"Host to device: {number(copy_gbps, 'GB/s')} from pageable memory, "
            f"{number(pinned_gbps, 'GB/s')} from pinned memory ({metric(pinned_speedup, 'x')}): the driver "
            "copies pageable memory through a pinned staging buffer first, and only a pinned buffer can "
            "be copied with non_blocking=True while the GPU computes. Either is a small fraction of the "
            f"GPU's own {number(bandwidth_gbps, 'GB/s')}: keep data on the GPU, and let DataLoader "
            "(pin_memory=True) hand over pinned batches."
        )
    elif dev.kind == "mps":
        assert copy_gbps is not None  # timed on every device but the CPU
        yield Note(
            f"Host to device: {number(copy_gbps, 'GB/s')}. On Apple silicon the CPU and GPU share one "
            "memory, but .to('mps') still copies into the GPU's buffers; pinned memory is a CUDA idea "
            "(n/a here)."
        )
    a100_peak = vendor_peaks.vendor_peak_tflops("A100", "float32")
    assert a100_peak is not None
    a100_ridge = a100_peak[0] * 1e12 / (vendor_peaks.A100_40GB_BANDWIDTH_GBPS * 1e9)
    yield Note(
        f"Beside the lab's A100 (40 GB): its spec sheet gives {number(vendor_peaks.A100_40GB_BANDWIDTH_GBPS, 'GB/s')} "
        f"of HBM2, {metric(vendor_peaks.A100_40GB_BANDWIDTH_GBPS / bandwidth_gbps, 'x')} the memory roof measured "
        f"here, and {flops_text(a100_peak[0])} float32 on {vendor_peaks.A100_FP32_CORES:,} FP32 cores (108 SMs), "
        f"{metric(a100_peak[0] / peak_tflops, 'x')} the compute roof here: a ridge at {number(a100_ridge)} FLOP/B "
        f"against {number(ridge)} here. Spec figures, not measured here: real kernels reach somewhat less."
    )
    if cpu:
        yield Note(
            "On a GPU both roofs are far higher (its memory bandwidth is many times a CPU's, its FLOP/s "
            "more so), and its ridge point is usually further right: even more operations end up "
            "memory-bound there. Run this on a GPU to measure its roofline."
        )

    yield Finished(
        {
            "copy_gbps": copy_gbps,
            "pinned_copy_gbps": pinned_gbps,
            "pinned_speedup": pinned_speedup,
            "device_copy_gbps": device_copy_gbps,
            "elementwise_gbps": elementwise_gbps,
            "elementwise_tflops": elementwise_tflops,
            "matmul_tflops": matmul_tflops,
            "peak_tflops": peak_tflops,
            "bandwidth_gbps": bandwidth_gbps,
            "ridge_point": ridge,
            "elementwise_intensity": ELEMENTWISE_INTENSITY,
            "matmul_intensity": matmul_intensity,
            "elementwise_peak_share": elementwise_share,
            "elementwise_peak_share_low": share_low,
            "elementwise_peak_share_high": share_high,
            "matmul_peak_share": matmul_tflops / peak_tflops,
            "elementwise_bound": bound(ELEMENTWISE_INTENSITY),
            "matmul_bound": bound(matmul_intensity),
            "threads": threads,
            "device": device,
        }
    )
