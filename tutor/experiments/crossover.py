"""`crossover`: the same training timed on the CPU and on the accelerator, for a tiny model
and for the notebook's MNISTClassifier: when does the GPU pay off?

Method, per case and device: fresh model with the same seed, Adam, the lesson's
device-aware loop (batches sliced from CPU tensors and copied with `.to(device)` inside the
loop, as a DataLoader loop does). A few untimed warm-up steps first (CUDA context, cuBLAS
handles, kernel selection, the allocator), then `repeats` timed runs of `epochs` epochs;
the median is reported. Clocks synchronise the device; time spent by the consumer of a
yielded event is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypedDict

import torch
from torch import nn

from tutor.experiments import devices
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier, TinyClassifier, count_parameters
from tutor.experiments.specs.crossover import CrossoverParams
from tutor.experiments.training import (
    WARMUP_STEPS,
    cpu_budget_s,
    fit_samples,
    report_interval,
    seconds_per_sample,
    seed_everything,
    train_epoch,
    warm_up,
)
from tutor.measurement.intervals import MedianInterval, bounds, in_words, ratio_interval
from tutor.measurement.timing import Stopwatch, median
from tutor.present import seconds


@dataclass(frozen=True)
class Case:
    key: str  # "tiny" | "mlp"
    title: str
    make: type[nn.Module]
    samples: int
    batch_size: int


def _cases(p: CrossoverParams) -> list[Case]:
    cases = []
    if p.model in ("tiny", "both"):
        cases.append(Case("tiny", "tiny model", TinyClassifier, p.tiny_samples, p.tiny_batch_size))
    if p.model in ("mlp", "both"):
        cases.append(Case("mlp", "MNISTClassifier", MNISTClassifier, p.mlp_samples, p.mlp_batch_size))
    return cases


def _cpu_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int, gen: torch.Generator):
    from tutor.experiments.data import batches

    return batches(x, y, batch_size, generator=gen)


def _time_case(
    case: Case, x: torch.Tensor, y: torch.Tensor, p: CrossoverParams, dev: Device
) -> Iterator[Event | list[float]]:
    """Warm up, then yield Step events for each timed run and finally every run's seconds (a list)."""
    device = dev.torch_device
    label = dev.kind
    steps_per_epoch = math.ceil(x.shape[0] / case.batch_size)
    steps_per_run = steps_per_epoch * p.epochs
    total = steps_per_run * p.repeats
    # Few reports per run: each one reads the loss back (a sync), which we keep rare.
    every = report_interval(steps_per_run, target=10)

    seed_everything(p.seed)
    warm_up(case.make().to(device), _cpu_batches(x, y, case.batch_size, torch.Generator().manual_seed(p.seed)), device)

    times: list[float] = []
    for r in range(p.repeats):
        seed_everything(p.seed)
        gen = torch.Generator().manual_seed(p.seed)
        clock = Stopwatch(device)
        model = case.make().to(device)  # creating and moving the model is part of the timed work
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        done = 0
        for epoch in range(p.epochs):
            for prog in train_epoch(model, opt, _cpu_batches(x, y, case.batch_size, gen), device, report_every=every):
                if prog.steps:
                    elapsed = clock.elapsed()
                    event = Step(
                        step=r * steps_per_run + done + prog.steps,
                        total=total,
                        loss=prog.loss,
                        seconds=elapsed,
                        samples_per_s=(epoch * x.shape[0] + prog.samples) / elapsed if elapsed > 0 else 0.0,
                        epoch=epoch + 1,
                        label=label,
                    )
                    with clock.paused():
                        yield event
            done += prog.steps
        times.append(clock.elapsed())
    yield times


class _Result(TypedDict):
    """One case's timings: median seconds per device (None: not timed), the speedup and its interval."""

    cpu: float | None
    accel: float | None
    speedup: float | None
    steps: int
    low: float | None
    high: float | None
    interval: MedianInterval | None


def measure(p: CrossoverParams, dev: Device) -> Iterator[Event]:
    from tutor.experiments import data as mnist

    # The accelerator to compare with: the chosen device if it is one, else the first found.
    accel = dev if dev.is_accelerator else devices.accelerator()
    cpu = next(d for d in devices.available() if d.kind == "cpu")
    cases = _cases(p)
    n_max = max(c.samples for c in cases)
    # Both devices train from the same CPU tensors; each batch is copied inside the loop.
    d = mnist.load("cpu", train_samples=n_max, test_samples=1)

    yield Started(
        "crossover",
        accel.torch_device if accel else "cpu",
        accel.name if accel else cpu.name,
        d.description,
        detail=f"cases: {', '.join(c.key for c in cases)}; {p.epochs} epoch(s), median of {p.repeats} run(s)",
    )
    if accel is None:
        yield Note("No GPU or MPS device here: nothing to compare with; here is what the CPU takes.", "warning")
    else:
        yield Note(f"Comparing {cpu.describe()} with {accel.describe()}.")
    if d.fallback_reason:
        yield Note(f"Data: {d.description}.", "warning")
    yield Note(
        f"Each device first runs untimed warm-up steps ({WARMUP_STEPS} at least, more while their times still "
        f"fall: device context, cuBLAS, kernel selection), then {p.repeats} timed run(s) of {p.epochs} epoch(s); "
        "the median is reported. "
        "Batches are copied to the device inside the loop, as in the lesson's device-aware loop."
    )

    results: dict[str, _Result] = {}
    cut: dict[str, int] = {}  # images the CPU timed per case, where it timed fewer than asked
    rows: list[list[str]] = []
    for case in cases:
        x, y = d.train_x[: case.samples], d.train_y[: case.samples]
        n = x.shape[0]
        params = count_parameters(case.make())
        steps = math.ceil(n / case.batch_size) * p.epochs
        yield Note(
            f"{case.title}: {params:,} parameters, {n} samples, batch {case.batch_size} ({steps} steps per run)."
        )
        timing: dict[str, float | None] = {"cpu": None, "accel": None}
        repeats: dict[str, list[float]] = {"cpu": [], "accel": []}
        for which, target in (("cpu", cpu), ("accel", accel)):
            if target is None:
                continue
            cx, cy, fit = x, y, None
            if which == "cpu":  # sized by what this CPU measures; the accelerator is never cut
                per = seconds_per_sample(case.make, x, y, "cpu", batch_size=case.batch_size)
                runs = len(cases) * p.repeats * p.epochs
                fit = fit_samples(n, per, cpu_budget_s() / runs, batch_size=case.batch_size)
                if fit.cut:
                    # The budget is the whole step's: say how it is shared, or "all of them would take
                    # 6 s" reads as well within a minute.
                    why = (
                        f" to keep this step within a minute: its {cpu_budget_s():.0f} s of CPU timing are shared "
                        f"by {len(cases)} case{'s' if len(cases) != 1 else ''} x {p.repeats} run{'s' if p.repeats != 1 else ''}"
                        f" x {p.epochs} epoch{'s' if p.epochs != 1 else ''}, so an epoch may take {fit.budget_s:.1f} s"
                    )
                    yield Note(fit.note(f"{case.title} on the CPU", why), "warning")
                    cx, cy = x[: fit.used], y[: fit.used]
            for item in _time_case(case, cx, cy, p, target):
                if isinstance(item, list):
                    repeats[which] = [fit.project(t) if fit is not None else t for t in item]
                    timing[which] = median(repeats[which])
                else:
                    yield item
            if fit is not None and fit.cut:
                cut[case.key] = fit.used
                later = fit.afterwards(f"{case.title} on the CPU", timing["cpu"] / p.epochs) if timing["cpu"] else None
                if later:
                    yield Note(later)
        cpu_s, acc_s = timing["cpu"], timing["accel"]
        speedup = cpu_s / acc_s if (cpu_s and acc_s) else None
        # The devices run one after the other, so no CPU repeat has an accelerator repeat of its own.
        interval = ratio_interval(repeats["cpu"], repeats["accel"]) if speedup else None
        low, high = bounds(interval)
        results[case.key] = {
            "cpu": cpu_s,
            "accel": acc_s,
            "speedup": speedup,
            "steps": steps,
            "low": low,
            "high": high,
            "interval": interval,
        }
        star = "*" if case.key in cut else ""
        row = [
            case.title,
            f"{params:,}",
            str(n),
            str(case.batch_size),
            seconds(cpu_s) + star,
            f"{cpu_s / steps * 1000:.2f}" if cpu_s else "-",
        ]
        if accel is not None:
            row += [
                seconds(acc_s),
                f"{acc_s / steps * 1000:.2f}" if acc_s else "-",
                f"{speedup:.2f}x" if speedup else "-",
            ]
        rows.append(row)

    columns = ["case", "params", "samples", "batch", "cpu time", "cpu ms/step"]
    if accel is not None:
        columns += [f"{accel.kind} time", f"{accel.kind} ms/step", "speedup"]
    yield Table(
        f"Training time, median of {p.repeats} run(s)"
        + ("; * projected from the images timed (see the notes)" if cut else ""),
        columns,
        rows,
    )

    for key, r in results.items():
        title = "tiny model" if key == "tiny" else "MNISTClassifier"
        if r["speedup"] is None:
            projected = f", projected from {cut[key]:,} images timed" if key in cut else ""
            cpu_time = r["cpu"]
            assert cpu_time is not None  # the CPU times every case
            yield Note(
                f"{title}: {seconds(cpu_time)} on the CPU ({cpu_time / r['steps'] * 1000:.2f} ms per step{projected}).",
                "result",
            )
            continue
        s = r["speedup"]
        assert accel is not None  # a speedup is only computed from the accelerator's time
        if r["low"] is not None and r["interval"] is not None:  # (low is None without an interval)
            yield Note(
                f"{title}: the speedup is {in_words(r['interval'], lambda v: f'{v:.2f}x', 'repeats per device')}."
            )
        if s < 1:
            why = (
                f"the {accel.kind} was {1 / s:.1f}x slower. Each step launches dozens of small kernels and copies "
                "a batch across the bus; at this size that fixed cost per step outweighs the arithmetic the GPU "
                "could do in parallel, while the CPU runs the same small matmuls from its caches."
            )
        elif s < 1.5:
            why = (
                f"about even ({s:.2f}x): the work per step is just large enough to cover the {accel.kind}'s launch "
                "and copy overhead, not enough to use its parallelism."
            )
        else:
            why = (
                f"the {accel.kind} was {s:.1f}x faster: each step's matmuls are large enough to keep thousands of "
                "GPU cores busy, so the per-step overhead is paid back."
            )
        yield Note(f"{title}: {why}", "result")
    if accel is None:
        yield Note(
            "On a GPU this step would time the same two cases there and divide: expect the tiny model to be "
            "slower on the GPU (overhead per step dominates) and the larger model to gain; run it on a GPU "
            "machine to see real numbers.",
        )

    # {}: that case did not run
    tiny: _Result | dict[str, None] = results.get("tiny", {})
    mlp: _Result | dict[str, None] = results.get("mlp", {})
    yield Finished(
        {
            "cpu_seconds_tiny": tiny.get("cpu"),
            "accel_seconds_tiny": tiny.get("accel"),
            "speedup_tiny": tiny.get("speedup"),
            "cpu_seconds_mlp": mlp.get("cpu"),
            "accel_seconds_mlp": mlp.get("accel"),
            "speedup_mlp": mlp.get("speedup"),
            # the headline: MNISTClassifier's, or the tiny model's when only that one ran
            "speedup": mlp.get("speedup") if mlp else tiny.get("speedup"),
            "speedup_tiny_low": tiny.get("low"),
            "speedup_tiny_high": tiny.get("high"),
            "speedup_mlp_low": mlp.get("low"),
            "speedup_mlp_high": mlp.get("high"),
            "speedup_low": mlp.get("low") if mlp else tiny.get("low"),
            "speedup_high": mlp.get("high") if mlp else tiny.get("high"),
            "accelerator": accel.name if accel else "none",
            "cpu_images_timed_mlp": cut.get("mlp"),  # None: every image was timed
        }
    )
