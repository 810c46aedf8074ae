"""op-size: one elementwise add, from 10 to 10M float32 elements.

The course's lesson plan says "10 elements: CPU 12x faster; 10M elements: GPU 350x faster".
Both halves come from how one op's time splits: a fixed cost every op pays (the Python call,
PyTorch's dispatch, setting up the loop; on a GPU, a kernel launch) and a cost per element
(for an add, memory traffic). This sweeps one op over tenfold sizes on the CPU and, where the
run has a GPU, on the GPU too, each size warmed up and timed by PyTorch's own timer.

The op is `torch.add(a, b, out=c)`: one kernel, reading two arrays and writing a third, 12 bytes
per element. With `out=` no call allocates, so the sweep times the op and not the allocator;
`a * b + c` would be two kernels and a temporary. At the largest size `c = a + b` is timed too,
allocating its output each call, as a notebook's `a + b` does: on a CPU a block that big goes
back to the operating system when freed, and each call's new pages are faulted in again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.op_size import OpSizeParams, sizes
from tutor.measurement.intervals import bounds, in_words, ratio_interval
from tutor.measurement.timing import median, timed_blocks, warm_up
from tutor.measurement.vendor_peaks import A100_40GB_BANDWIDTH_GBPS
from tutor.present import seconds

SIZE_BUDGET_S = 0.5  # one size's timing on one device stops about here (one block at least)
BYTES_PER_ELEMENT = 12  # float32: read a, read b, write c
PAST_CACHES_BYTES = 64 * 2**20  # three arrays this big sit in no CPU's cache: the add streams from memory
FLAT = 2.0  # a size is still "flat" while its add takes under this many times the smallest's


def timed(fn: Callable[[], object], device: str, repeats: int) -> list[float]:
    """Seconds per call of each timed block of back-to-back calls, after a warm-up."""
    warm_up(fn, device)
    return list(timed_blocks(fn, device, repeats=repeats, budget_s=SIZE_BUDGET_S).times)


def add_times(n: int, device: str, repeats: int) -> list[float]:
    """torch.add(a, b, out=c) of n float32 elements on `device`, timed."""
    a, b = torch.rand(n, device=device), torch.rand(n, device=device)
    c = torch.empty(n, device=device)
    return timed(lambda: torch.add(a, b, out=c), device, repeats)


def allocating_add_times(n: int, repeats: int) -> list[float]:
    """c = a + b on the CPU, a new c each call, timed."""
    a, b = torch.rand(n), torch.rand(n)
    return timed(lambda: a + b, "cpu", repeats)


def flat_up_to(sweep: list[int], medians: list[float]) -> int:
    """The largest size, counting up from the smallest, whose add took under FLAT times the smallest's."""
    flat = sweep[0]
    for n, t in zip(sweep, medians, strict=True):
        if t >= FLAT * medians[0]:
            break
        flat = n
    return flat


def crossover(sweep: list[int], cpu: list[float], gpu: list[float]) -> int | None:
    """The smallest size from which every larger add too was faster on the GPU; None if the largest was not."""
    found = None
    for n, c, g in reversed(list(zip(sweep, cpu, gpu, strict=True))):
        if g >= c:
            break
        found = n
    return found


def elements(n: int) -> str:
    """10, 1k, 10M: the sizes as the lesson names them (powers of ten)."""
    if n >= 1_000_000:
        return f"{n // 1_000_000}M"
    return f"{n // 1_000}k" if n >= 1_000 else f"{n}"


def measure(p: OpSizeParams, dev: Device) -> Iterator[Event]:
    sweep = sizes(p.largest)
    gpu = dev.torch_device if dev.kind != "cpu" else None
    threads = torch.get_num_threads()
    yield Started(
        "op-size",
        dev.torch_device,
        dev.name,
        "none (random float32 tensors)",
        f"torch.add(a, b, out=c), {elements(sweep[0])} to {elements(sweep[-1])} elements, "
        f"CPU with {threads} thread{'s' if threads != 1 else ''}" + (f", and {gpu}" if gpu else ""),
    )

    with torch.no_grad():
        cpu_times = [add_times(n, "cpu", p.repeats) for n in sweep]
        gpu_times = [add_times(n, gpu, p.repeats) for n in sweep] if gpu else None
        alloc_times = allocating_add_times(sweep[-1], p.repeats)
    cpu = [median(t) for t in cpu_times]
    accel = [median(t) for t in gpu_times] if gpu_times else None

    columns = ["elements", "CPU per add", "ns/element"] + (["GPU per add", "GPU gain"] if accel else [])
    rows = []
    for i, n in enumerate(sweep):
        row = [elements(n), seconds(cpu[i]), f"{cpu[i] / n * 1e9:,.2f}"]
        if accel:
            row += [seconds(accel[i]), f"{cpu[i] / accel[i]:,.2f}x"]
        rows.append(row)
    yield Table("torch.add(a, b, out=c), float32, median of blocks", columns, rows)

    ratio = ratio_interval(cpu_times[-1], cpu_times[0])
    size_ratio = ratio.median if ratio else cpu[-1] / cpu[0]
    low, high = bounds(ratio)
    elements_ratio = sweep[-1] / sweep[0]
    flat = flat_up_to(sweep, cpu)
    gbps = BYTES_PER_ELEMENT * sweep[-1] / cpu[-1] / 1e9
    alloc = median(alloc_times)

    said = in_words(ratio, lambda v: f"{v:,.0f}x", of="blocks") if ratio else "one block: no interval"
    yield Note(
        f"Fixed cost: an add of 10 elements took {seconds(cpu[0])}; its arithmetic is nanoseconds, the "
        f"rest is what every op pays (Python, PyTorch's dispatch, loop set-up). Time stayed under "
        f"{FLAT:g}x that up to {elements(flat)} elements.",
        "result",
    )
    yield Note(
        f"{elements(sweep[-1])} elements took {size_ratio:,.0f}x as long as 10 ({said}), for "
        f"{elements_ratio:,.0f}x the elements: {cpu[-1] / sweep[-1] * 1e9:,.2f} ns per element "
        f"against {cpu[0] / sweep[0] * 1e9:,.0f} at 10.",
        "result",
    )
    past_caches = BYTES_PER_ELEMENT * sweep[-1] >= PAST_CACHES_BYTES
    a100_ratio = A100_40GB_BANDWIDTH_GBPS / gbps if past_caches else None
    if a100_ratio is not None:
        yield Note(
            f"At {elements(sweep[-1])} the add moved {gbps:,.1f} GB/s (12 bytes per element, past the "
            f"caches): it is memory-bound, so a GPU's gain there is its bandwidth over this CPU's, "
            f"not its FLOPs. An A100's {A100_40GB_BANDWIDTH_GBPS:,.0f} GB/s is {a100_ratio:,.0f}x this.",
        )
    if alloc > FLAT * cpu[-1]:
        yield Note(
            f"c = a + b, a new output each call, took {seconds(alloc)} at {elements(sweep[-1])} "
            f"against {seconds(cpu[-1])} with out= ({BYTES_PER_ELEMENT * sweep[-1] / alloc / 1e9:,.1f} GB/s): "
            "a block this big goes back to the system when freed, and every call faults its pages in anew.",
        )
    if accel:
        where = crossover(sweep, cpu, accel)
        yield Note(
            f"The GPU: {seconds(accel[0])} at 10 elements (a launch), {seconds(accel[-1])} at "
            f"{elements(sweep[-1])}; "
            + (f"it won from {elements(where)} elements up." if where else "it did not win at any size here."),
            "result",
        )
    else:
        where = None
        yield Note(
            "No GPU here, so no GPU column. On one, each add pays a kernel launch of about 5-10 µs "
            "whatever its size, a floor the CPU's fixed cost beats at small sizes; at 10M elements "
            "the GPU's memory bandwidth wins by about the ratio of the two bandwidths."
        )

    yield Finished(
        {
            "seconds_smallest": cpu[0],
            "seconds_largest": cpu[-1],
            "size_ratio": size_ratio,
            "size_ratio_low": low,
            "size_ratio_high": high,
            "elements_ratio": elements_ratio,
            "fixed_seconds": cpu[0],
            "flat_up_to": flat,
            "ns_per_element_largest": cpu[-1] / sweep[-1] * 1e9,
            "gbps_largest": gbps,
            "a100_bandwidth_ratio": a100_ratio,
            "alloc_seconds_largest": alloc,
            "accel_seconds_smallest": accel[0] if accel else None,
            "accel_seconds_largest": accel[-1] if accel else None,
            "accel_speedup_smallest": cpu[0] / accel[0] if accel else None,
            "accel_speedup_largest": cpu[-1] / accel[-1] if accel else None,
            "crossover_elements": where,
        }
    )
