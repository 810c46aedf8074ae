"""sync-timing: timing GPU work without synchronize measures the launch, not the work.

On a GPU, `c = a @ b` only queues a kernel and returns at once; the GPU runs it later. So

    start = time.perf_counter(); for ...: a @ b; seconds = time.perf_counter() - start

measures how long the CPU took to *queue* the matmuls. Here `calls` n x n float32 matmuls
(the same inputs, written into one output buffer: eager PyTorch runs every kernel it is
asked for, nothing is optimised away) are timed, after a warm-up, three ways:

1. perf_counter with no synchronize before the clock stops (the device is synchronised
   after the clock stopped, so every repeat starts with an empty queue);
2. perf_counter with the device synchronised before the clock starts and before it stops;
3. on CUDA, a pair of torch.cuda.Event(enable_timing=True) recorded on the GPU's stream.

The median of `repeats` timings per way is reported; the ways take turns within each repeat, so
`ratio` is the median of the repeats' own synced / unsynced ratios (paired), ratio_low/high
its interval (measurement.intervals).
TF32 is switched off for the measurement (full float32 matmuls) and restored afterwards.
On a CPU, operations are synchronous, so the first two agree: there is nothing to wait for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.specs.sync_timing import MEASURED_GUARD, SyncTimingParams
from tutor.experiments.training import seed_everything, shell_try
from tutor.measurement import vendor_peaks
from tutor.measurement.intervals import bounds
from tutor.measurement.repeats import PRECISION, look, schedule
from tutor.measurement.timing import median, paired_ratios, synchronize, warm_up

CPU_SIZE = 512  # the size a CPU uses unless one is asked for: 2048 is 64x the work, about a minute on 2 cores
WARMUP_CALLS = 3  # untimed matmuls first, at least: cuBLAS handles, kernel choice, the allocator
# More repeats while the ratio's interval straddles an edge a prediction is judged against (or,
# told none, is wider than measurement.repeats.PRECISION of its median): up to this many, within
# this many seconds of timing, for runs that ask for ADAPT_FROM or more.
MOST_REPEATS = 40
TIMING_BUDGET_S = 15.0
ADAPT_FROM = 6


def _unsynced(matmuls: Callable[[], None], device: str) -> float:
    synchronize(device)  # start with an empty queue
    start = time.perf_counter()
    matmuls()
    seconds = time.perf_counter() - start  # the mistake: the GPU may still be working
    synchronize(device)  # drain the queue (untimed) so the next timing starts clean
    return seconds


def _synced(matmuls: Callable[[], None], device: str) -> float:
    synchronize(device)
    start = time.perf_counter()
    matmuls()
    synchronize(device)  # wait for the work before reading the clock
    return time.perf_counter() - start


def _events(matmuls: Callable[[], None], device: torch.device) -> float:
    stream = torch.cuda.current_stream(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record(stream)
    matmuls()
    end.record(stream)
    end.synchronize()  # elapsed_time needs both events to have happened
    return start.elapsed_time(end) / 1000  # milliseconds -> seconds


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.3f} ms"


def measure(p: SyncTimingParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    asynchronous = dev.kind in ("cuda", "mps")
    cuda = dev.kind == "cuda"
    # The default size is chosen for GPUs; on a CPU it would take about a minute, so a CPU run
    # uses CPU_SIZE unless the size was asked for explicitly.
    capped = dev.kind == "cpu" and "size" not in p.model_fields_set and p.size > CPU_SIZE
    n = CPU_SIZE if capped else p.size
    calls = p.calls
    yield Started(
        "sync-timing",
        str(device),
        dev.name,
        "random matrices (the timing does not depend on the data)",
        f"{calls} matmuls of {n} x {n} float32, median of {p.repeats} or more timings per way",
    )
    if capped:
        yield Note(
            f"On the CPU this run uses {n} x {n} matrices instead of the default {p.size} x {p.size}, "
            f"so it finishes in seconds: the full size is ({p.size}/{n})^3 = {(p.size / n) ** 3:,.0f} times "
            f"the work (to run it anyway, from a shell: gpututor run sync-timing --set size={p.size}). "
            "The lesson is the same at any size."
        )
    if not asynchronous:
        yield Note(
            f"No GPU here: this runs on the CPU ({dev.name}). CPU operations are synchronous, so both "
            "clocks should agree. On a GPU they would not; no GPU figures are shown because none "
            "were measured.",
            "warning",
        )

    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    out = torch.empty(n, n, device=device)

    def matmuls() -> None:
        for _ in range(calls):
            torch.mm(a, b, out=out)

    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # full float32: no TF32 on CUDA (restored below)
    try:
        # Untimed until the call times stop falling (a first CUDA call can take 100x a later one).
        warmed = warm_up(lambda: torch.mm(a, b, out=out), dev.torch_device, minimum=WARMUP_CALLS)
        yield Note(f"Warm-up: {warmed.words(_ms)}; what is timed starts after it.")

        unsynced: list[float] = []
        synced: list[float] = []
        events: list[float] = []
        # At least `repeats`, then more on a fixed schedule of looks until the ratio's interval
        # decides every edge in p.decide (or is within PRECISION of its median) or the time is
        # spent (measurement.repeats).
        looks = schedule(p.repeats, MOST_REPEATS if p.repeats >= ADAPT_FROM else p.repeats)
        started = time.perf_counter()
        stopped = None
        for target in looks:
            while len(synced) < target:  # the ways take turns, so a slow moment hits them alike
                unsynced.append(_unsynced(matmuls, dev.torch_device))
                synced.append(_synced(matmuls, dev.torch_device))
                if cuda:
                    events.append(_events(matmuls, device))
                # progress between timings (no loss here: NaN; "samples" are matmuls)
                yield Step(len(synced), looks[-1], float("nan"), synced[-1], 0.0, label="repeat")
            stopped = look(paired_ratios(synced, unsynced), looks, edges=p.decide, guard=MEASURED_GUARD)
            spent = time.perf_counter() - started
            following = next((n for n in looks if n > target), None)
            if stopped.enough or following is None or spent / target * following > TIMING_BUDGET_S:
                if len(synced) < looks[-1]:  # stopped early: the progress ends full, at what was timed
                    yield Step(len(synced), len(synced), float("nan"), synced[-1], 0.0, label="repeat")
                break
    finally:
        torch.set_float32_matmul_precision(precision)

    u, s = median(unsynced), median(synced)
    e = median(events) if cuda else None
    # The ways took turns, so each repeat's own ratio cancels a slow moment of the machine. Its
    # interval is the last look's, at the confidence the schedule of looks keeps.
    interval = stopped.interval if stopped is not None else None
    ratio = interval.median if interval else s / u
    ratio_low, ratio_high = bounds(interval)
    tflops = 2 * n**3 * calls / s / 1e12

    what_u = f"queueing {calls} launches" if asynchronous else "the work (CPU ops are synchronous)"
    what_s = "the launches and the work" if asynchronous else "the same: nothing to wait for"
    rows = [["perf_counter, no sync", _ms(u), what_u], ["perf_counter + synchronize", _ms(s), what_s]]
    if cuda:
        rows.append(["CUDA events", _ms(e), "the work, timed on the GPU"])
    yield Table(
        f"{calls} matmuls of {n} x {n} float32 on {device} (median of {len(synced)})",
        ["method", "time", "what it measured"],
        rows,
    )
    if len(looks) > 1 and stopped is not None and interval is not None:  # (interval is stopped's)
        width = (interval.high - interval.low) / abs(interval.median)
        edges = ", ".join(f"{e:g}x" for e in p.decide)
        why = (
            f"its interval was clear of {edges}, where the predictions' verdicts turn"
            if stopped.decided
            else f"its interval was within {PRECISION:.0%} of its median ({width:.1%})"
            if stopped.enough
            else f"the time for timing was spent; its interval is {width:.1%} of its median"
            if len(synced) < looks[-1]
            else f"that is the most it makes; its interval is {width:.1%} of its median"
        )
        if p.decide and not stopped.decided:
            why += f", and still reaches one of {edges}, where the verdicts turn"
        yield Note(
            f"Repeats: {len(synced)} of each way (at least {p.repeats}, looking at {', '.join(map(str, looks))}): "
            f"it stopped because {why}, at {interval.coverage:.1%} confidence per look."
        )

    if asynchronous:
        sync_call = "torch.cuda.synchronize()" if cuda else "torch.mps.synchronize()"
        yield Note(
            f"Without synchronize the clock stopped after {_ms(u)}: the time the CPU took to queue {calls} "
            f"matmuls, while the GPU was still working. With {sync_call} before reading the clock the "
            f"same work took {_ms(s)}, {ratio:,.1f}x as long.",
            "result",
        )
        if ratio < 2:
            yield Note(
                f"Here the gap is small. Either each matmul is short next to the cost of launching it "
                f"(try a larger size{shell_try('sync-timing', p, size=n * 2)}), or so many were queued that "
                "the CPU had to wait for room in the "
                f"launch queue (calls={calls}), which makes the unsynchronised time approach the real one."
            )
        if cuda:
            assert e is not None  # timed with CUDA events whenever cuda
            yield Note(
                f"CUDA events, recorded on the GPU's stream around the same work, measured {_ms(e)}, "
                f"{e / s:.2f}x the synchronised clock: the same work, timed by the GPU itself."
            )
    else:
        # The noise is measured, not assumed: how far repeats of one way spread around its median.
        spread = max((max(t) - min(t)) / median(t) for t in (unsynced, synced))
        order = (
            "The synchronised time came out shorter here: synchronize does nothing on the CPU, so it "
            "cannot make the work faster. "
            if s < u
            else ""
        )
        noise = (
            f"A difference this size is run-to-run noise: the {len(synced)} repeats of one way spread over "
            f"{spread:.0%} of their median (other programs, the CPU's clock speed, caches). "
            if abs(ratio - 1) <= spread
            else f"The difference is larger than the repeats' own spread ({spread:.0%} of their median): something "
            "else used this CPU during one way's timings; run it again and it will shrink. "
        )
        yield Note(
            f"On the CPU both clocks measure the same thing ({_ms(u)} and {_ms(s)}, ratio {ratio:.2f}): "
            f"when a @ b returns on the CPU, the product is done. {order}{noise}"
            "On a GPU, a @ b only queues a kernel and returns at once, so the clock without synchronize "
            "would stop long before the work ends and report far less time. Run this on a CUDA or Apple "
            "GPU to measure the gap.",
            "result",
        )
    precision_text = "full float32, TF32 off during the measurement" if cuda else "float32"
    sheet = vendor_peaks.for_device(dev, "float32")
    yield Note(
        f"Throughput from the synchronised time: 2 x {n}^3 x {calls} FLOPs / {s:.4g} s = {tflops:.3f} "
        f"TFLOP/s ({precision_text})"
        + (f": {vendor_peaks.beside(tflops, sheet, 'float32')}." if sheet is not None else ".")
    )
    yield Note(
        "The fix: synchronise before starting and before reading the clock (torch.cuda.synchronize(), "
        "torch.mps.synchronize() on a Mac), or time with torch.cuda.Event(enable_timing=True) pairs. "
        "loss.item() also synchronises, because it copies a value the GPU computes to the CPU: that is "
        "why timing a loop that prints the loss every step looks right by accident."
    )

    yield Finished(
        {
            "unsynced_seconds": u,
            "synced_seconds": s,
            "events_seconds": e,
            "ratio": ratio,
            "ratio_low": ratio_low,
            "ratio_high": ratio_high,
            "asynchronous": asynchronous,
            "tflops": tflops,
            "device": str(device),
        }
    )
