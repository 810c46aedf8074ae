"""python-matmul: most of "1000x faster" is the interpreter, not the GPU.

The course's lab sets a triple loop of Python against `A @ B` on a GPU and calls the gap "1000x,
all at once". This times the loop and torch.mm on the same CPU: the compiled, vectorised kernel
against one Python bytecode at a time is most of that gap before any GPU is involved. Where the
run has a GPU, its torch.mm is timed too, so the two parts of the gap are seen apart.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.python_matmul import PythonMatmulParams
from tutor.measurement.intervals import bounds, ratio_interval
from tutor.measurement.timing import median, timed_blocks, warm_up
from tutor.present import seconds

TORCH_BUDGET_S = 1.0  # torch.mm's timing, per device


def python_matmul(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """C = A @ B the way the course writes it: three loops, one multiply-add at a time."""
    n, k, m = len(a), len(b), len(b[0])
    c = [[0.0] * m for _ in range(n)]
    for i in range(n):
        for j in range(m):
            total = 0.0
            for p in range(k):
                total += a[i][p] * b[p][j]
            c[i][j] = total
    return c


def measure(p: PythonMatmulParams, dev: Device) -> Iterator[Event]:
    n = p.size
    yield Started("python-matmul", dev.torch_device, dev.name, "none (random matrices)", f"{n} x {n}")
    rng = random.Random(0)
    a = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(n)]
    b = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(n)]
    ta, tb = torch.tensor(a), torch.tensor(b)

    # The same numbers either way: the loops compute what torch computes (float64 against float32).
    assert torch.allclose(torch.tensor(python_matmul(a, b), dtype=torch.float32), ta @ tb, atol=1e-3)

    loops: list[float] = []
    for _ in range(p.repeats):
        started = time.perf_counter()
        python_matmul(a, b)
        loops.append(time.perf_counter() - started)
    warm_up(lambda: ta @ tb, "cpu")
    cpu = timed_blocks(lambda: ta @ tb, "cpu", repeats=p.repeats, budget_s=TORCH_BUDGET_S)

    interval = ratio_interval(loops, list(cpu.times))
    speedup = interval.median if interval else median(loops) / median(list(cpu.times))
    low, high = bounds(interval)
    rows = [
        ["Python, three loops", seconds(median(loops)), "1x"],
        ["torch.mm on the CPU", seconds(median(list(cpu.times))), f"{speedup:,.0f}x"],
    ]

    accel_s = accel_speedup = None
    if dev.kind != "cpu":
        ga, gb = ta.to(dev.torch_device), tb.to(dev.torch_device)
        warm_up(lambda: ga @ gb, dev.torch_device)
        accel = timed_blocks(lambda: ga @ gb, dev.torch_device, repeats=p.repeats, budget_s=TORCH_BUDGET_S)
        accel_s = median(list(accel.times))
        accel_speedup = median(list(cpu.times)) / accel_s
        rows.append([f"torch.mm on {dev.kind}", seconds(accel_s), f"{median(loops) / accel_s:,.0f}x"])

    yield Table(f"C = A @ B, {n} x {n} float32 ({n**3:,} multiply-adds)", ["how", "time", "vs the loops"], rows)
    yield Note(
        f"On one machine, before any GPU: torch.mm was {speedup:,.0f}x faster than the Python loops"
        + (f" (its interval {low:,.0f}x to {high:,.0f}x)" if low is not None and high is not None else "")
        + ". The loops run one bytecode at a time, each float a Python object; torch.mm runs compiled, "
        "vectorised code (SIMD, cache blocking, threads where the size pays). The course's lab calls the loop-against-A @ B gap "
        "'1000x faster, all at once' and credits the GPU: most of it is the interpreter against a compiled "
        "kernel.",
        "result",
    )
    if accel_speedup is not None:
        yield Note(
            f"The GPU's part of the gap is the last row: its torch.mm against the CPU's, {accel_speedup:,.1f}x at "
            f"{n} x {n}. At this size a GPU launch costs about as much as the work; larger matrices widen it.",
            "result",
        )
    else:
        yield Note(
            "No GPU here: the GPU's own part of the gap (its torch.mm against the CPU's) is not measured. "
            "On a GPU this run adds that row; at this size its launch cost is about as large as the work."
        )
    yield Finished(
        {
            "python_seconds": median(loops),
            "torch_seconds": median(list(cpu.times)),
            "speedup": speedup,
            "speedup_low": low,
            "speedup_high": high,
            "accelerator_seconds": accel_s,
            "accelerator_speedup": accel_speedup,
        }
    )
