"""calibrate: how long `gpututor calibrate` takes, and its roofs against plain PyTorch loops.

1. The whole command, as a learner runs it: `python -m tutor calibrate --json` in a fresh
   process with an empty cache dir (GPUTUTOR_CACHE_DIR in a temporary folder, so nothing is
   reused), `--repeats` times: seconds each against the goal of 60 s, and the calibration's own
   seconds (measuring only, without Python and torch starting).
2. Its figures against plain loops in this process, with the same thread policy as the command
   (tutor/threads.py, set before torch is imported), in `--repeats` rounds that take turns:
   `calibration.measure()` (caches in a temporary folder), then for each calibrated dtype a plain
   loop of back-to-back `torch.mm` at the size the sweep found best (5 timings of about 0.1 s,
   each between two syncs), and a plain `dst.copy_(src)` loop over arrays of the calibration's size
   for the memory roof. Printed: the calibration's median, the plain loops' best and median,
   and calibrated / plain best: near 1.0, the sweep finds what a plain loop gets at its best;
   above 1.0, the sweep's best-of-repeats found more (the plain loop was slowed by something).

    python bench/calibrate.py [--device cpu] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 60.0


def run_command(device: str | None) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp:
        env = {**os.environ, "GPUTUTOR_CACHE_DIR": str(Path(tmp) / "cache"), "GPUTUTOR_HOME": str(Path(tmp) / "home")}
        argv = [sys.executable, "-m", "tutor", "calibrate", "--json"] + (["--device", device] if device else [])
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        took = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"gpututor calibrate failed ({done.returncode}): {done.stderr.strip()}")
    return took, json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best here)")
    ap.add_argument("--repeats", type=int, default=3, help="command runs, and plain timings per figure")
    args = ap.parse_args(argv)

    from tutor import threads

    threads.set_env(os.environ)  # as the CLI does, before torch is imported
    print(f"gpututor calibrate, {args.repeats} fresh runs (empty cache each time):")
    runs = []
    for i in range(args.repeats):
        took, record = run_command(args.device)
        runs.append((took, record))
        print(f"  run {i + 1}: command {took:.1f} s, of which measuring {record['seconds']:.1f} s")
    commands = [t for t, _ in runs]
    print(
        f"  command: median {statistics.median(commands):.1f} s, worst {max(commands):.1f} s "
        f"(goal {GOAL_S:.0f} s: {'ok' if max(commands) <= GOAL_S else 'OVER'})"
    )
    record = runs[-1][1]

    import torch

    from tutor.experiments import devices
    from tutor.measurement import calibration
    from tutor.measurement import peak as matmul_peak
    from tutor.measurement.timing import synchronize

    dev = devices.resolve(args.device)
    device = dev.torch_device
    print(
        f"\nin this process: {record['device']}; torch {torch.__version__}, {torch.get_num_threads()} threads here, "
        f"{record['threads']} in the command; {args.repeats} rounds, each calibration.measure() then the plain loops"
    )

    def plain(fn, work: float, seconds: float = 0.1, loops: int = 5) -> list[float]:
        """work per second of plain loops: a warm-up call, then `loops` timings of as many calls as fill
        `seconds`, each between two syncs."""
        fn()
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        iters = max(1, int(seconds / max(time.perf_counter() - t0, 1e-7)))
        rates = []
        for _ in range(loops):
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            synchronize(device)
            rates.append(work * iters / (time.perf_counter() - t0))
        return rates

    calibrated: dict[str, list[float]] = {}
    plain_rates: dict[str, list[float]] = {}
    sizes: dict[str, set[int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as tmp:
        matmul_peak.cache_file = lambda: Path(tmp) / "peaks.json"  # never the user's caches
        calibration.cache_file = lambda: Path(tmp) / "calibration.json"
        for _ in range(args.repeats):
            c = calibration.measure(dev)
            with torch.no_grad():
                for p in c.peaks:
                    n = p.best_size or 1024
                    key = f"{p.dtype} matmul"
                    sizes.setdefault(key, set()).add(n)
                    with matmul_peak._matmul_precision(p.dtype, dev.kind):
                        a = torch.randn(n, n, device=device, dtype=matmul_peak._torch_dtype(p.dtype))
                        b = torch.randn(n, n, device=device, dtype=matmul_peak._torch_dtype(p.dtype))
                        plain_rates.setdefault(key, []).extend(plain(lambda a=a, b=b: torch.mm(a, b), 2 * n**3 / 1e9))
                    calibrated.setdefault(key, []).append(p.tflops * 1e3)
                    del a, b
                nbytes = c.bandwidth.megabytes * 2**20
                src = torch.rand(nbytes // 4, device=device)
                dst = torch.empty_like(src)
                key = f"memory, copy of {c.bandwidth.megabytes} MiB"
                plain_rates.setdefault(key, []).extend(plain(lambda dst=dst, src=src: dst.copy_(src), 2 * nbytes / 1e9))
                calibrated.setdefault(key, []).append(c.bandwidth.gbps)
                del src, dst
    print(
        f"{'figure (GFLOP/s, GB/s)':32} {'calibrated':>11} {'plain best':>11} {'plain median':>13} "
        f"{'calibrated/plain best':>22}"
    )
    for key, values in calibrated.items():
        cal, best, med = statistics.median(values), max(plain_rates[key]), statistics.median(plain_rates[key])
        at = f" ({', '.join(map(str, sorted(sizes[key])))})" if key in sizes else ""
        print(f"{key + at:32} {cal:>11.1f} {best:>11.1f} {med:>13.1f} {cal / best:>21.2f}x")
    return 0 if max(commands) <= GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
