"""PyTorch's own timer against the hand-rolled loop it replaced, in one process.

The micro-measurements (bandwidth's memory traffic and matmul, the matmul peak sweep) time with
torch.utils.benchmark.Timer.blocked_autorange (measurement.timing.timed_blocks). This study times
the same operations both ways, taking turns, and prints for each: the median and best seconds per
call, the spread of the repeats (IQR / median), the median's interval width, the repeats made and
the wall time spent, and the ratios Timer / plain loop. The plain loop is the one the tutor used
before: one warm-up call, one timed call, then `repeats` timings of enough back-to-back calls to
last 20 ms, the device synchronised at each clock read.

    python bench/timer_study.py [--rounds 5] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from tutor.measurement.intervals import median_interval
from tutor.measurement.timing import BLOCK_S, synchronize, timed_blocks

REPEATS = 9


def plain_loop(fn, device: str, repeats: int) -> list[float]:
    fn()
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    one = time.perf_counter() - start
    calls = max(1, min(1000, int(BLOCK_S / max(one, 1e-7))))
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        synchronize(device)
        times.append((time.perf_counter() - start) / calls)
    return times


def spread(times: list[float]) -> float:
    q = statistics.quantiles(times, n=4)
    return (q[2] - q[0]) / statistics.median(times)


def width(times: list[float]) -> float:
    found = median_interval(times)
    return (found.high - found.low) / found.median if found else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = args.device
    n = 16 * 2**20  # 64 MiB float32 arrays, bandwidth's default
    a, b, c = (torch.rand(n, device=device) for _ in range(3))
    size = 512 if device == "cpu" else 4096
    x, y, out = (torch.randn(size, size, device=device) for _ in range(3))
    operations = {
        "c = a * b (64 MiB)": lambda: torch.mul(a, b, out=c),
        "device copy (64 MiB)": lambda: c.copy_(a),
        f"matmul {size}": lambda: torch.mm(x, y, out=out),
    }
    print(
        f"torch {torch.__version__} on {device}, {torch.get_num_threads()} threads, {args.rounds} rounds, "
        f"{REPEATS} repeats asked each way\n"
    )
    print(
        f"{'operation':22} {'way':6} {'median ms':>10} {'best ms':>9} {'IQR/med':>8} {'interval':>9} "
        f"{'repeats':>8} {'wall s':>7}"
    )
    for name, fn in operations.items():
        rows: dict[str, list[tuple]] = {"plain": [], "Timer": []}
        for _ in range(args.rounds):
            for way in ("plain", "Timer"):  # taking turns, so a slow moment falls on both
                t0 = time.perf_counter()
                times = (
                    plain_loop(fn, device, REPEATS)
                    if way == "plain"
                    else list(timed_blocks(fn, device, REPEATS, 3.0).times)
                )
                wall = time.perf_counter() - t0
                rows[way].append((statistics.median(times), min(times), spread(times), width(times), len(times), wall))
        for way, found in rows.items():
            med = [statistics.median(col) for col in zip(*found)]
            print(
                f"{name:22} {way:6} {med[0] * 1e3:10.3f} {med[1] * 1e3:9.3f} {med[2]:8.1%} {med[3]:9.1%} "
                f"{med[4]:8.0f} {med[5]:7.2f}"
            )
        ratios_median = [t[0] / p[0] for t, p in zip(rows["Timer"], rows["plain"])]
        ratios_best = [t[1] / p[1] for t, p in zip(rows["Timer"], rows["plain"])]
        print(
            f"{'':22} Timer / plain: median {statistics.median(ratios_median):.3f}x "
            f"(rounds {min(ratios_median):.3f}-{max(ratios_median):.3f}), best "
            f"{statistics.median(ratios_best):.3f}x\n"
        )


if __name__ == "__main__":
    main()
