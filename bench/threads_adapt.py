"""Threads that adapt (issue 36): the tutor's `train` against a plain PyTorch loop in this process,
idle and then with one core kept busy by another process.

The plain loop runs at PyTorch's own default thread count (what a learner's script gets); the
tutor's run decides its threads as it starts (tutor/threads.py: every usable core, less those
others keep busy). Rounds alternate plain and tutor, so a slow moment of the machine falls on
both; the medians and their ratios are printed. Goals: tutor / plain >= 0.97 idle, and the
tutor's epoch with one busy core <= 1.3x its idle epoch.

    GPUTUTOR_DATA_DIR=../shared/data python bench/threads_adapt.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from busy_core import Busy  # noqa: E402
from learner_wait import plain_epoch_seconds  # noqa: E402

SAMPLES = 60_000  # one epoch of MNIST's training set


def tutor_samples_per_s() -> tuple[float, int]:
    """One epoch of the tutor's `train` (batch 64, resident data): its own throughput and threads."""
    import torch

    from tutor import experiments

    events = list(experiments.start("train", {"epochs": 1, "batch_size": 64}, device="cpu"))
    return float(events[-1].metrics["samples_per_s"]), torch.get_num_threads()


def plain_samples_per_s(default_threads: int) -> float:
    import torch

    torch.set_num_threads(default_threads)  # PyTorch's own default, not the tutor's decision
    return SAMPLES / plain_epoch_seconds("cpu")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    from tutor import threads

    default_threads = torch.get_num_threads()  # before the tutor sets anything in this process
    print(
        f"usable cores {threads.usable_cores()}; PyTorch's default threads {default_threads}; "
        f"{args.rounds} alternated rounds each\n"
    )
    results: dict[str, dict[str, list[float]]] = {}
    for label, busy in (("idle", 0), ("one core busy", 1)):
        plain, tutor, used = [], [], []
        with Busy(busy):
            for _ in range(args.rounds):
                plain.append(plain_samples_per_s(default_threads))
                rate, n = tutor_samples_per_s()
                tutor.append(rate)
                used.append(n)
        results[label] = {"plain": plain, "tutor": tutor}
        p, t = statistics.median(plain), statistics.median(tutor)
        print(
            f"{label:<14} plain {p:9,.0f} samples/s   tutor {t:9,.0f} samples/s ({'/'.join(map(str, used))} "
            f"threads)   tutor/plain {t / p:.2f}",
            flush=True,
        )
    idle, busy = (statistics.median(results[k]["tutor"]) for k in ("idle", "one core busy"))
    print(f"\ntutor, one busy core against idle: epoch {idle / busy:.2f}x as long (goal <= 1.3x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
