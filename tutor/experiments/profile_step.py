"""profile-step: torch.profiler on the course's MNIST training step.

The notebook's loop (MNISTClassifier, Adam, cross-entropy; a batch sliced from the data in host
memory and copied with .to(device), as a DataLoader's batch would be) runs with each phase
inside a torch.profiler.record_function label: data, forward (with the loss), backward,
optimizer (step and zero_grad). After WARMUP_STEPS untimed steps:

1. `steps` steps are timed without the profiler, in up to STRETCHES stretches of steps, the
   device synchronised only where a stretch ends: the step time MFU is computed from is the
   median stretch's seconds per step (a moment when something else had the machine slows a
   stretch or two and counts for none), FLOPs per step = 6 x (in x out over the Linear layers)
   x batch against the device's measured matmul peak (tutor/measurement/peak.py). mfu_low and
   mfu_high are the median MFU's interval over the stretches (measurement.intervals), so the
   median lies within them;
2. `steps` more are recorded by torch.profiler (CPU, and CUDA's kernels on a GPU), after two
   profiler warm-up steps: operators by self time, each label's host time, and on CUDA every
   kernel's start and end, from which the share of time a kernel was running (what nvidia-smi's
   GPU-Util samples) and the gaps between kernels (launch overhead) are read. The recording is
   written as a Chrome trace (ui.perfetto.dev or chrome://tracing open it).
"""

from __future__ import annotations

import bisect
import os
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tutor.experiments import data as mnist
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.pipeline_breakdown import STRETCHES, linear_macs, stretch_ends
from tutor.experiments.specs.profile_step import ProfileStepParams
from tutor.experiments.training import checkpoint_target, float32_matmul_dtype, seed_everything
from tutor.measurement import peak as matmul_peak
from tutor.measurement import vendor_peaks
from tutor.measurement.intervals import bounds, in_words, median_interval, over_peak
from tutor.measurement.timing import Stopwatch, synchronize
from tutor.paths import scratch_dir
from tutor.present import metric, number, seconds, size

WARMUP_STEPS = 5  # untimed steps first: allocator, kernel selection, Adam's state
PROFILER_WARMUP = 2  # steps the profiler runs but discards: its own start-up
PHASES = ("data", "forward", "backward", "optimizer")
NAME_WIDTH = 36  # operator names are cut to this in the table


@contextmanager
def _native_logs_muted() -> Iterator[None]:
    """The profiler's C++ side writes lines straight to the process's stdout and stderr as it
    starts and stops ("USDT ... profiler_start", on a machine without CUDA "gpuGetDeviceCount
    failed"): noise in `gpututor run`'s output that means nothing to a learner. Nothing of ours
    prints inside."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _kineto_events(prof: Any) -> list[Any]:
    """The profiler's raw events (with nanosecond starts and durations; [] if this torch has none)."""
    try:
        return list(prof.profiler.kineto_results.events())
    except AttributeError:
        return []


def _kernel_timeline(prof: Any, index: int) -> list[tuple[int, int]]:
    """(start_ns, end_ns) of every CUDA kernel on GPU `index` the profiler recorded, by start."""
    spans = []
    for e in _kineto_events(prof):
        kernel = "kernel" in str(e.activity_type()).lower() and e.device_type() == torch.autograd.DeviceType.CUDA
        if kernel and e.device_index() == index:
            spans.append((e.start_ns(), e.start_ns() + e.duration_ns()))
    return sorted(spans)


def _busy_and_gaps(spans: list[tuple[int, int]], window: tuple[int, int]) -> tuple[float, list[float]]:
    """(share of `window` during which a kernel ran, idle gaps between kernels in seconds)."""
    busy = 0
    gaps: list[float] = []
    end = None
    for s, e in spans:
        if end is not None and s > end:
            gaps.append((s - end) / 1e9)
        if end is None or s > end:
            busy += e - s
            end = e
        elif e > end:  # overlaps the previous kernel (another stream): count only the new part
            busy += e - end
            end = e
    length = max(window[1] - window[0], 1)
    return min(busy / length, 1.0), gaps


def device_time_by_phase(events: list[Any]) -> dict[str, float]:
    """Microseconds of GPU kernels per phase: each operator's self device time (its own kernels),
    on any thread, goes to the phase whose record_function window contains the operator's start.

    By time rather than by nesting: on CUDA, autograd runs backward on its own device thread, and
    the profiler nests events only within one thread, so the "backward" label itself holds none of
    backward's kernels. `events` are FunctionEvents (prof.events())."""
    cpu = torch.autograd.DeviceType.CPU
    # Host-side events only: the kernels' own entries (and GPU-side annotations) would count twice.
    windows = sorted(
        (e.time_range.start, e.time_range.end, e.name)
        for e in events
        if e.device_type == cpu and e.is_user_annotation and e.name in PHASES
    )
    starts = [w[0] for w in windows]
    out = dict.fromkeys(PHASES, 0.0)
    for e in events:
        if e.device_type != cpu or e.self_device_time_total <= 0:
            continue
        i = bisect.bisect_right(starts, e.time_range.start) - 1
        if i >= 0 and e.time_range.start <= windows[i][1]:
            out[windows[i][2]] += e.self_device_time_total
    return out


def _trace_target(p: ProfileStepParams) -> Path:
    if p.trace:
        return checkpoint_target(p.trace, "trace")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return scratch_dir() / f"profile-step-{stamp}-{os.getpid()}.json"


def measure(p: ProfileStepParams, dev: Device) -> Iterator[Event]:
    target = _trace_target(p)  # a path that cannot be written fails now, before any work
    seed_everything(p.seed)
    device = dev.torch_device
    cuda = dev.kind == "cuda"
    d = mnist.load("cpu")  # the data in host memory, as a DataLoader keeps it
    yield Started(
        "profile-step",
        device,
        dev.name,
        d.description,
        f"MNISTClassifier, Adam, batch {p.batch_size}: {p.steps} steps timed, {p.steps} profiled",
    )

    dtype = float32_matmul_dtype(dev)
    peak = matmul_peak.cached(dev, dtype)
    if peak is None:
        yield Note(
            f"Measuring this device's {dtype} matmul peak first (MFU's denominator): "
            f"{matmul_peak.sweep_words(dev.kind)}; kept for later runs "
            f"(`{matmul_peak.MEASURE_COMMAND}` measures it again)."
        )
        peak = matmul_peak.measure(dev, dtype)
        if (crowded := matmul_peak.not_kept_words(peak)) is not None:
            yield Note(crowded, "warning")

    model = MNISTClassifier().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(p.seed)

    def endless() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            yield from mnist.batches(d.train_x, d.train_y, p.batch_size, generator=gen)

    batches = endless()

    def train_step() -> torch.Tensor:
        with record_function("data"):
            xb, yb = next(batches)
            xb, yb = xb.to(device), yb.to(device)
        with record_function("forward"):
            loss = loss_fn(model(xb), yb)
        with record_function("backward"):
            loss.backward()
        with record_function("optimizer"):
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return loss

    model.train()
    for _ in range(WARMUP_STEPS):
        train_step()
    synchronize(device)

    # 1. Timed, no profiler: in stretches of steps, synchronised only where one ends.
    ends = stretch_ends(p.steps, STRETCHES)
    stretch_seconds: list[float] = []  # seconds per step of each stretch
    clock = Stopwatch(device)
    stretch_start, stretch_first = 0.0, 1
    for i in range(1, p.steps + 1):
        loss = train_step()
        if i in ends:
            now = clock.elapsed()
            if now > stretch_start:
                stretch_seconds.append((now - stretch_start) / (i - stretch_first + 1))
            stretch_start, stretch_first = now, i + 1
    timed_seconds = stretch_start
    if not stretch_seconds:  # no stretch measurable (a clock too coarse): the pass as a whole
        stretch_seconds = [max(timed_seconds, 1e-9) / p.steps]
    step_seconds = statistics.median(stretch_seconds)
    yield Step(p.steps, 2 * p.steps, loss.item(), timed_seconds, p.batch_size / step_seconds, label="timed")

    # 2. Profiled.
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with (
        _native_logs_muted(),
        profile(
            activities=activities,
            record_shapes=False,
            schedule=schedule(wait=0, warmup=PROFILER_WARMUP, active=p.steps, repeat=1),
        ) as prof,
    ):
        for _ in range(PROFILER_WARMUP):
            train_step()
            prof.step()
        synchronize(device)
        start = time.perf_counter()
        for _ in range(p.steps):
            loss = train_step()
            prof.step()
        synchronize(device)
        profiled_seconds = (time.perf_counter() - start) / p.steps
    yield Step(
        2 * p.steps,
        2 * p.steps,
        loss.item(),
        timed_seconds + profiled_seconds * p.steps,
        p.batch_size / profiled_seconds,
        label="profiled",
    )

    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    phase_us = dict.fromkeys(PHASES, 0.0)
    window = [None, None]
    for e in events:
        if e.name in phase_us and e.is_user_annotation:
            phase_us[e.name] += e.cpu_time_total
    phase_device_us = device_time_by_phase(events) if cuda else dict.fromkeys(PHASES, 0.0)
    for e in _kineto_events(prof):
        if e.name() in phase_us and str(e.activity_type()).lower() == "user_annotation":
            window[0] = e.start_ns() if window[0] is None else min(window[0], e.start_ns())
            end = e.start_ns() + e.duration_ns()
            window[1] = end if window[1] is None else max(window[1], end)
    step_host_us = sum(phase_us.values()) or 1.0
    shares = {k: v / step_host_us for k, v in phase_us.items()}
    ops_per_step = sum(1 for e in events if e.name.startswith("aten::")) / p.steps

    # Operators by self time: device time on CUDA (where the work is), CPU time elsewhere.
    skip = set(PHASES)
    # Operators are the host-side entries; on CUDA each one's self device time is the kernels it
    # launched itself (the kernels' own entries would count that time twice).
    averages = [
        a
        for a in prof.key_averages()
        if a.key not in skip
        and not a.key.startswith("ProfilerStep")
        and getattr(a, "device_type", torch.autograd.DeviceType.CPU) == torch.autograd.DeviceType.CPU
    ]
    key = (lambda a: a.self_device_time_total) if cuda else (lambda a: a.self_cpu_time_total)
    averages.sort(key=key, reverse=True)
    total_self = sum(key(a) for a in averages) or 1.0
    top_op = averages[0].key if averages else "none"
    top_op_share = key(averages[0]) / total_self if averages else 0.0
    columns = ["operator", "calls/step", "self CPU ms/step"] + (["self GPU ms/step"] if cuda else []) + ["share"]
    rows = []
    for a in averages[: p.top]:
        name = a.key if len(a.key) <= NAME_WIDTH else a.key[: NAME_WIDTH - 1] + "…"
        row = [name, number(a.count / p.steps), number(a.self_cpu_time_total / 1e3 / p.steps)]
        if cuda:
            row.append(number(a.self_device_time_total / 1e3 / p.steps))
        rows.append([*row, metric(key(a) / total_self, "%")])
    yield Table(
        f"Top {min(p.top, len(averages))} operators by self {'GPU' if cuda else 'CPU'} time, "
        f"{p.steps} profiled steps on {device}",
        columns,
        rows,
    )

    phase_columns = ["phase", "host ms/step", "share"] + (["GPU kernels ms/step"] if cuda else [])
    phase_rows = []
    for k in PHASES:
        row = [k, number(phase_us[k] / 1e3 / p.steps), metric(shares[k], "%")]
        if cuda:
            row.append(number(phase_device_us[k] / 1e3 / p.steps))
        phase_rows.append(row)
    yield Table("The step by record_function label (time the host spent inside each)", phase_columns, phase_rows)

    kernels_per_step = busy_share = gap = None
    if cuda:
        spans = _kernel_timeline(prof, dev.index or 0)
        kernels_per_step = len(spans) / p.steps
        if spans and window[0] is not None:
            span_window = (min(window[0], spans[0][0]), max(window[1], max(e for _, e in spans)))
            busy_share, gaps = _busy_and_gaps(spans, span_window)
            gap = statistics.median(gaps) if gaps else 0.0

    target.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(target))
    trace_bytes = target.stat().st_size

    macs = linear_macs(model)
    flops_per_step = 6 * macs * p.batch_size
    achieved = flops_per_step / step_seconds / 1e12
    fastest = flops_per_step / min(stretch_seconds) / 1e12
    if fastest > peak.tflops:
        swept = peak.tflops
        peak = matmul_peak.raise_to(peak, fastest)
        yield Note(
            f"This run's model FLOPs ran at {metric(fastest, 'TFLOP/s')} in its fastest stretch of steps, "
            f"faster than the best matmul the sweep timed ({metric(swept, 'TFLOP/s')}): the sweep was slowed "
            "by other work on the machine. The measured peak is raised to this run's fastest figure (and "
            "kept), so MFU reads 100% at most: as fast as anything measured here.",
            "warning",
        )
    mfu = achieved / peak.tflops
    # The median stretch is reported, with the median's interval over the stretches, carrying the
    # peak's own spread too (its typical block to its best: measurement.intervals.over_peak).
    interval = over_peak(
        median_interval([flops_per_step / s / 1e12 for s in stretch_seconds]), peak.tflops, peak.typical_tflops
    )
    mfu_low, mfu_high = bounds(interval)

    biggest = max(PHASES, key=lambda k: shares[k])
    yield Note(
        f"Operators: {top_op} took the most self time ({metric(top_op_share, '%')} of all operator time). "
        f"The step made {number(ops_per_step)} PyTorch operator calls"
        + (f" and launched {number(kernels_per_step)} GPU kernels" if cuda and kernels_per_step is not None else "")
        + f". By label, the host spent {metric(shares[biggest], '%')} of the step in {biggest}. "
        f"A step took {seconds(step_seconds)} without the profiler and {seconds(profiled_seconds)} with it: "
        "a profiler records every call, so it slows what it measures; read shares from it, time without it.",
        "result",
    )
    peak_text = (
        f"{metric(peak.tflops, 'TFLOP/s')} {dtype}{peak.threads_text()}, measured here "
        f"({peak.how_text()}{peak.spread_text()}; {peak.measured_on})"
    )
    mfu_text = (
        f"MFU = {number(flops_per_step / 1e6)} MFLOP per step / {seconds(step_seconds)} = "
        f"{metric(achieved, 'TFLOP/s')} of a peak of {peak_text}: {metric(mfu, '%')}"
        + (
            f" ({in_words(interval, lambda v: metric(v, '%'), 'stretches of steps')})"
            if interval is not None and mfu_low is not None  # (bounds() is None, None without an interval)
            else ""
        )
        + "."
    )
    sheet = vendor_peaks.for_device(dev, dtype)
    if sheet is not None:
        mfu_text += f" Against the spec sheet instead: {vendor_peaks.beside(achieved, sheet, dtype)}."
    mfu_text += (
        " pipeline-breakdown (the Iron Law's run) measures this same MLP with its data already on the "
        "device, without this run's copy of each batch, so its MFU is not this one's: compare the two only "
        "within each run's range."
    )
    if cuda:
        yield Note(
            f"A kernel was running {metric(busy_share, '%')} of the profiled time, with a median gap of "
            f"{seconds(gap)} between one kernel's end and the next one's start: that share is what "
            "nvidia-smi's GPU-Util samples (the time at least one kernel was resident, however little of "
            f"the GPU it used). {mfu_text} A GPU can look "
            + ("busy" if (busy_share or 0) >= 0.5 else "half idle")
            + " by GPU-Util while doing a small share of the arithmetic it could: the course's rule of "
            "80% or more utilisation is about GPU-Util, and says nothing of MFU. The gaps are launch "
            "overhead: Python and PyTorch preparing the next kernel; bigger batches or fused kernels "
            "(torch.compile, CUDA graphs) shrink them.",
            "result",
        )
    else:
        yield Note(
            f"{mfu_text} No GPU here: this profiled the CPU. On a GPU the run would also record every "
            "kernel and measure the share of time one was running, which is what nvidia-smi's GPU-Util "
            "reports: a kernel resident on the GPU, however few of its cores it uses, counts as 100% busy "
            "for that moment. So the course's rule of 80% or more utilisation can be met by a loop of "
            "small kernels whose MFU is a few percent or less: GPU-Util is not MFU. Run this on a GPU to "
            "measure both.",
            "result",
        )
    yield Note(
        f"Trace ({size(trace_bytes)}) written to {target}: open https://ui.perfetto.dev and drag the file "
        "in (or chrome://tracing in Chrome) to see each step's data, forward, backward and optimizer "
        "labels and the operators inside them on a timeline"
        + ("" if p.trace else "; files in that scratch folder are removed after a day")
        + "."
    )

    yield Finished(
        {
            "top_op": top_op,
            "top_op_share": top_op_share,
            **{f"{k}_share": shares[k] for k in PHASES},
            "ops_per_step": ops_per_step,
            "kernels_per_step": kernels_per_step,
            "gpu_busy_share": busy_share,
            "launch_gap_seconds": gap,
            "step_seconds": step_seconds,
            "profiled_step_seconds": profiled_seconds,
            "flops_per_step": flops_per_step,
            "achieved_tflops": achieved,
            "peak_tflops": peak.tflops,
            "mfu": mfu,
            "mfu_low": mfu_low,
            "mfu_high": mfu_high,
            "trace_path": str(target),
            "trace_bytes": trace_bytes,
            "device": device,
        }
    )
