"""pipeline-breakdown: where one training step's time goes, and how close it gets to the peak.

The learner's own training loop (Adam, cross-entropy) is timed phase by phase, with the
device synchronised after each phase so the phases are told apart:

    data wait   next(batches): index resident tensors, or wait for the DataLoader
    copy        .to(device) of the batch (a no-op for resident tensors)
    forward     the model and the loss (under autocast when amp is on)
    backward    loss.backward() (scaled by a GradScaler for float16)
    optimizer   optimizer.step() and zero_grad()

A few untimed steps warm up first. Synchronising between phases removes the overlap a real
loop gets (the CPU queueing the next kernels while the GPU works), so a second pass of the
same number of steps runs with no syncs inside a step; its throughput is the honest one. It is
timed in STRETCHES stretches of steps (one step each when there are fewer steps), the device
synchronised only where one stretch ends and the next begins; the two passes run in turns, a
stretch of each, so what else the machine does falls on both alike.

Model FLOPs per step = 6 x (sum of in x out over the Linear layers) x batch (2 in the
forward, 4 in the backward). Achieved FLOP/s = the median of the stretches' FLOPs / seconds:
a moment when something else had the machine slows a stretch or two and counts for none
(data-bottleneck's reasoning). mfu_low and mfu_high are the median MFU's interval over the
stretches (measurement.intervals: order statistics), so the median lies within it.
MFU = achieved / peak, for the dtype in use, against two peaks: the vendor's dense spec (a
known GPU) and this device's measured one (peak.py: the best of a matmul sweep, cached per
machine, on a CPU with the threads training uses). `mfu` uses the spec where there is one (what
published MFUs mean), else the measured peak. A run whose fastest stretch beats the measured peak
proves it too low: it is measured again, and if the stretch still wins, raised to its figure and
said so (so no stretch's MFU against the measured peak passes 100%).
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Generator, Iterator
from typing import Any

import torch
from torch import nn

from tutor.experiments import data as mnist
from tutor.experiments.amp_benchmark import benchmark_mlp
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier, count_parameters
from tutor.experiments.specs.pipeline_breakdown import PipelineBreakdownParams
from tutor.experiments.training import autocast_settings, float32_matmul_dtype, make_scaler, seed_everything
from tutor.measurement import peak as matmul_peak
from tutor.measurement import vendor_peaks
from tutor.measurement.intervals import bounds, in_words, median_interval, over_peak
from tutor.measurement.timing import Stopwatch, synchronize
from tutor.measurement.vendor_peaks import vendor_peak_tflops  # noqa: F401  (tests and older imports)
from tutor.present import metric, number

WARMUP_STEPS = 5  # untimed: allocator, kernel selection, worker start-up
REPORT_S = 0.2  # seconds between Step events, so cancelling is heard
STRETCHES = 10  # the unsynced pass is timed in this many stretches: 8 or more give an interquartile range
PHASES = ["data_wait", "copy", "forward", "backward", "optimizer"]
PHASE_NAMES = {
    "data_wait": "data wait",
    "copy": "copy to device",
    "forward": "forward + loss",
    "backward": "backward",
    "optimizer": "optimizer step",
}


def linear_macs(model: nn.Module) -> int:
    """Sum of in_features x out_features over the model's Linear layers (multiply-adds per sample)."""
    return sum(m.in_features * m.out_features for m in model.modules() if isinstance(m, nn.Linear))


def stretch_ends(steps: int, stretches: int = STRETCHES) -> set[int]:
    """The step numbers (1-based) after which a stretch of a timed pass ends: `stretches` stretches
    of (nearly) equal length, one step each when there are fewer steps than that."""
    n = max(1, min(stretches, steps))
    return {(k * steps) // n for k in range(1, n + 1)}


# The profiler step measures this MLP too; its MFU is not this one's, and the learner sees both.
SAME_MLP_ELSEWHERE = (
    "The profile-step run (the profiler step) measures this same MLP, but its MFU is not this one: each of its "
    "steps slices a batch from host memory and copies it (on a GPU, a host-to-device copy inside every step), "
    "where this run's resident data is already there, and each run's stretches spread as far as their own "
    "noise range says. Compare the two only within those ranges."
)


def synced_faster(synced_per_s: float, unsynced_per_s: float) -> str | None:
    """A synced pass faster than the unsynced one cannot be the syncs' doing (they only add waiting):
    say so, and what it means for the figures, rather than leave the two side by side."""
    if not synced_per_s > unsynced_per_s > 0:
        return None
    return (
        f"The synced pass came out faster ({synced_per_s:,.0f}/s against {unsynced_per_s:,.0f}/s), which the "
        "syncs cannot cause: they only add waiting. The difference is noise, from other work on the machine "
        "while one pass's stretches ran or from the stretch boundaries' own syncs, so neither throughput is "
        "good to better than that gap, and neither is the MFU: run it again when the machine is quieter."
    )


def _batches(p: PipelineBreakdownParams, dev: Device, pin: bool) -> tuple[Generator[Any, None, None], str]:
    """An endless stream of (x, y) batches for the chosen data path, and a sentence about it."""
    if p.data_path == "resident":
        d = mnist.load(dev.torch_device)
        g = torch.Generator(device=d.train_x.device).manual_seed(p.seed)

        def resident() -> Generator[Any, None, None]:
            while True:
                yield from mnist.batches(d.train_x, d.train_y, p.batch_size, generator=g)

        return resident(), (
            f"resident tensors: all {d.train_x.shape[0]:,} images normalised once and "
            f"moved to {dev.torch_device} once; a batch is an index into them."
        )
    loader, _, _ = mnist.loaders(p.batch_size, num_workers=p.num_workers, pin_memory=pin, test_samples=1, seed=p.seed)

    def endless() -> Generator[Any, None, None]:
        while True:
            yield from loader

    how = (
        f"the notebook's DataLoader (ToTensor + Normalize per image), num_workers={p.num_workers}"
        + (", pin_memory=True with non_blocking copies" if pin else "")
        + "."
    )
    if p.num_workers:
        how += " Worker processes prepare (prefetch) the next batches while this one trains."
    return endless(), how


def measure(p: PipelineBreakdownParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = dev.torch_device
    source = mnist.source()
    yield Started(
        "pipeline-breakdown",
        device,
        dev.name,
        source.description,
        f"{p.model} model, {p.steps} timed steps of batch {p.batch_size}, data {p.data_path}",
    )

    model: nn.Module = MNISTClassifier() if p.model == "mlp" else benchmark_mlp(p.width, p.layers)
    model = model.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    amp = autocast_settings(p.amp, dev)
    scaler = make_scaler(amp, dev)
    if amp.note:
        yield Note(amp.note)

    # The peaks for the dtype the matmuls run in; measured (if not cached) before any DataLoader
    # workers exist, so they do not compete with it.
    dtype_name = amp.dtype_name if amp.enabled else float32_matmul_dtype(dev)
    spec = None
    if dev.kind == "cuda":
        spec = vendor_peaks.for_device(dev, dtype_name)
    measured = matmul_peak.cached(dev, dtype_name)
    swept_now = measured is None
    if measured is None:
        n = torch.get_num_threads()
        threads = f" with the {n} thread{'s' if n != 1 else ''} training uses" if dev.kind == "cpu" else ""
        yield Note(
            f"Measuring this device's {dtype_name} peak{threads}: {matmul_peak.sweep_words(dev.kind)}; "
            "kept for later runs "
            f"(`{matmul_peak.MEASURE_COMMAND}` measures it again)."
        )
        measured = matmul_peak.measure(dev, dtype_name)
        if (crowded := matmul_peak.not_kept_words(measured)) is not None:
            yield Note(crowded, "warning")

    pin = p.pin_memory and p.data_path == "loader" and dev.kind == "cuda"
    if p.pin_memory and not pin:
        yield Note(
            "pin_memory ignored: page-locked memory speeds up copies from the host to a CUDA GPU, "
            + (
                "and resident tensors are not copied at all."
                if p.data_path == "resident"
                else f"and this run is on {device}."
            ),
            "warning",
        )
    batches, how = _batches(p, dev, pin)
    yield Note(f"Data path: {how}")

    def train_step(timed: bool) -> tuple[list[float], int, torch.Tensor]:
        """One step; with timed=True the device is synchronised after each phase."""
        marks = [time.perf_counter()]

        def mark() -> None:
            if timed:
                synchronize(device)
                marks.append(time.perf_counter())

        xb, yb = next(batches)
        mark()
        xb, yb = xb.to(device, non_blocking=pin), yb.to(device, non_blocking=pin)
        mark()
        with amp.autocast(dev.kind):
            loss = loss_fn(model(xb), yb)
        mark()
        scaler.scale(loss).backward()  # a no-op scale when the scaler is disabled
        mark()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        mark()
        return [b - a for a, b in itertools.pairwise(marks)], yb.shape[0], loss

    model.train()
    for _ in range(WARMUP_STEPS):
        train_step(timed=False)
    synchronize(device)

    # The two passes run in turns, stretch by stretch: a stretch of steps synced phase by phase, then
    # the same number with no syncs inside a step. Run one after the other, a change in what else the
    # machine was doing fell on one pass only, and the synced pass could come out the faster.
    ends = sorted(stretch_ends(p.steps))
    macs = linear_macs(model)
    totals = dict.fromkeys(PHASES, 0.0)
    samples = 0
    stretch_tflops: list[float] = []  # model TFLOP/s of each unsynced stretch
    free_samples, free_seconds = 0, 0.0
    last_report = time.perf_counter()
    first = 1
    for end in ends:
        # Pass 1, this stretch: phase by phase.
        for i in range(first, end + 1):
            seconds, n, loss = train_step(timed=True)
            for phase, s in zip(PHASES, seconds):
                totals[phase] += s
            samples += n
            if i == p.steps or time.perf_counter() - last_report >= REPORT_S:
                last_report = time.perf_counter()
                elapsed = sum(totals.values())
                yield Step(i, p.steps, loss.item(), elapsed, samples / elapsed, label="phases synced")
        # Pass 2, the same stretch: no syncs inside a step, only where the stretch ends.
        sw = Stopwatch(device)
        stretch_samples = 0
        for _ in range(first, end + 1):
            _, n, loss = train_step(timed=False)
            stretch_samples += n
        stretch_seconds = sw.elapsed()  # synchronises: the stretch's work has finished
        if stretch_seconds > 0:
            stretch_tflops.append(6 * macs * stretch_samples / stretch_seconds / 1e12)
        free_samples += stretch_samples
        free_seconds += stretch_seconds
        if end == p.steps or time.perf_counter() - last_report >= REPORT_S:
            last_report = time.perf_counter()
            yield Step(
                end, p.steps, loss.item(), free_seconds, free_samples / max(free_seconds, 1e-9), label="no inner syncs"
            )
        first = end + 1
    step_seconds = sum(totals.values())
    samples_per_s = samples / step_seconds
    samples_per_s_unsynced = free_samples / max(free_seconds, 1e-9)

    # FLOPs and the peak for the dtype the matmuls run in.
    flops_per_step = 6 * macs * p.batch_size
    if not stretch_tflops:  # no stretch measurable (a clock too coarse): the pass as a whole
        stretch_tflops = [6 * macs * free_samples / max(free_seconds, 1e-9) / 1e12]
    achieved = statistics.median(stretch_tflops)
    fastest = max(stretch_tflops)
    raised = False
    if fastest > measured.tflops:
        # The matmuls ran at least this fast, so the measured peak is too low: a cached one
        # may date from a busy moment, so sweep again; if the run still wins, it is the evidence.
        batches.close()  # DataLoader workers stop before the sweep, so they do not compete with it
        if not swept_now:
            yield Note(
                f"This run's {metric(fastest, 'TFLOP/s')} beat the cached peak of "
                f"{metric(measured.tflops, 'TFLOP/s')} (measured {measured.measured_on}): measuring it again.",
                "warning",
            )
            again = matmul_peak.sweep(dev, dtype_name)
            measured = again if again.tflops >= measured.tflops else measured
            matmul_peak.store(measured)
        if fastest > measured.tflops:
            swept = measured.tflops
            measured = matmul_peak.raise_to(measured, fastest)
            raised = True
            yield Note(
                f"This run's model FLOPs ran at {metric(fastest, 'TFLOP/s')} in its fastest stretch of steps, "
                f"faster than the best matmul the sweep timed ({metric(swept, 'TFLOP/s')}): the sweep was "
                "slowed by other work on the machine, or these shapes run faster than square ones. No run can "
                "beat a realistic peak, so the measured peak is raised to this run's fastest figure (and "
                "kept): MFU against it is 100% at most, meaning as fast as anything measured here, not a "
                "perfect run.",
                "warning",
            )
    mfu_measured = achieved / measured.tflops
    mfu_spec = achieved / spec[0] if spec else None
    if spec:
        peak, peak_source = spec[0], "vendor spec"
    else:
        peak, peak_source = measured.tflops, "measured matmul"
    mfu = achieved / peak
    # The median stretch is reported, with the median's interval over the stretches; against the
    # measured peak the interval carries the peak's own spread too (a spec sheet's figure has none).
    interval = over_peak(median_interval(stretch_tflops), peak, None if spec else measured.typical_tflops)
    mfu_low, mfu_high = bounds(interval)
    noise = (
        f" ({in_words(interval, lambda v: number(v * 100, '%'), 'stretches of steps')})"
        if interval is not None and mfu_low is not None  # (bounds() is None, None without an interval)
        else ""
    )

    shares = {k: v / step_seconds for k, v in totals.items()}
    bottleneck = max(PHASES, key=lambda k: totals[k])
    ms = 1000 / p.steps
    yield Table(
        f"{p.model} model, batch {p.batch_size}, {p.steps} steps on {device} ({dtype_name})",
        ["phase", "total s", "ms/step", "share"],
        [[PHASE_NAMES[k], f"{totals[k]:.3f}", f"{totals[k] * ms:.2f}", f"{shares[k]:.0%}"] for k in PHASES]
        + [["whole step", f"{step_seconds:.3f}", f"{step_seconds * ms:.2f}", "100%"]],
    )
    yield Note(
        f"FLOPs per step = 6 x {macs:,} (in x out summed over the Linear layers) x {p.batch_size} "
        f"(batch) = {flops_per_step / 1e9:,.3f} GFLOP: 2 per multiply-add in the forward, 4 in the "
        "backward. The optimizer, activations and loss are left out: few FLOPs next to the matmuls, though not always little time."
    )
    yield Note(
        f"Throughput: {samples_per_s:,.0f} samples/s with a sync after every phase, "
        f"{samples_per_s_unsynced:,.0f} samples/s with none inside a step (the two passes ran in turns, "
        "a stretch of steps each, so the machine's other work fell on both alike). Syncing between phases "
        "removes the overlap a real loop gets, so the phase shares are an upper bound on waiting; "
        f"FLOP/s use the unsynced pass, timed in {len(stretch_tflops)} stretch"
        + ("es" if len(stretch_tflops) != 1 else "")
        + " of steps."
    )
    paradox = synced_faster(samples_per_s, samples_per_s_unsynced)
    if paradox:
        yield Note(paradox, "warning")
    measured_text = (
        f"{metric(measured.tflops, 'TFLOP/s')} {dtype_name}{measured.threads_text()}, measured here "
        f"({measured.how_text()}{measured.spread_text()}; {measured.measured_on}, torch {measured.torch})"
    )
    if p.model == "mlp" and p.data_path == "resident":
        yield Note(SAME_MLP_ELSEWHERE)
    if spec:
        yield Note(
            f"Achieved {metric(achieved, 'TFLOP/s')}. MFU = achieved / peak = {number(mfu * 100, '%')}{noise} "
            f"against the vendor's spec, {metric(spec[0], 'TFLOP/s')} {dtype_name} dense for the {spec[1]}: "
            f"the MFU papers report. Against this GPU's measured peak, {measured_text}: "
            f"{number(mfu_measured * 100, '%')}, the share of what its matmuls really reach.",
            "result",
        )
    else:
        yield Note(
            f"Achieved {metric(achieved, 'TFLOP/s')} against a peak of {measured_text}: MFU = achieved / "
            f"peak = {number(mfu * 100, '%')}{noise}."
            + (
                " No vendor spec is known for this GPU, so only the measured peak is used."
                if dev.kind == "cuda"
                else ""
            ),
            "result",
        )

    if bottleneck in ("data_wait", "copy"):
        advice = (
            "the step waits for its batch: resident tensors (data_path=resident), or DataLoader workers "
            "(num_workers) with pin_memory on CUDA, take that wait away."
        )
    elif bottleneck == "optimizer":
        advice = (
            "Adam reads and writes every parameter and two moment buffers per step: memory traffic, "
            "not matmul FLOPs, and the same whatever the batch, so a bigger batch_size spreads it "
            "over more samples."
        )
    elif mfu < 0.05:
        advice = (
            "the arithmetic is far from the peak: each step is many small operations whose fixed cost "
            "(on a GPU, kernel launches and Python) outweighs their math. A bigger batch_size or a wider "
            "model (model=wide) gives each operation more work."
        )
    elif dev.kind == "cpu":
        advice = (
            "the step is busy with arithmetic. On a GPU, mixed precision (amp=auto) would run the "
            "matmuls on tensor cores; "
            + (
                "this CPU has native bfloat16, so amp=auto may help here too."
                if dev.bf16
                else "this CPU has no native bfloat16, so it would not help here."
            )
        )
    else:
        advice = (
            "the step is busy with arithmetic: mixed precision (amp=auto) runs the matmuls on faster "
            "tensor-core paths where the device has them."
        )
    yield Note(f"Largest phase: {PHASE_NAMES[bottleneck]} ({shares[bottleneck]:.0%}); {advice}")
    if dev.kind == "cpu":
        yield Note(
            "No GPU here: this ran on the CPU, where each operation's fixed cost is small and there is "
            "no host-to-device copy, so even a small model keeps the cores fairly busy. On a GPU every "
            "kernel launch costs microseconds whatever its size, which is what pushes a small model's "
            "MFU far down; run this on a GPU to measure it."
        )

    yield Finished(
        {
            "mfu": mfu,
            "mfu_low": mfu_low,
            "mfu_high": mfu_high,
            "achieved_tflops": achieved,
            "peak_tflops": peak,
            "peak_source": peak_source,
            "peak_measured_tflops": measured.tflops,
            "peak_spec_tflops": spec[0] if spec else None,
            "mfu_vs_measured": mfu_measured,
            "mfu_vs_spec": mfu_spec,
            "peak_threads": measured.threads,
            "peak_measured_on": measured.measured_on,
            "peak_raised": raised,
            "dtype": dtype_name,
            "flops_per_step": flops_per_step,
            **{f"{k}_seconds": totals[k] for k in PHASES},
            **{f"{k}_share": shares[k] for k in PHASES},
            "samples_per_s": samples_per_s,
            "samples_per_s_unsynced": samples_per_s_unsynced,
            "bottleneck": bottleneck,
            "model": p.model,
            "parameters": count_parameters(model),
            "batch_size": p.batch_size,
            "data_path": p.data_path,
            "device": device,
        }
    )
