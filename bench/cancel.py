"""Cancel latency: from escape (the cancel request) to the run's "cancelled" end, per experiment.

Runs each experiment in the tutor's engine process, asks it to stop after its third event,
and times how long the end takes to arrive. An experiment that yields often stops at its
next event; one that is busy between events (a long CPU epoch) is stopped by the engine
after CANCEL_GRACE_S. Baseline: the same experiment's median gap between two events, in
the same run, which is what a cancel would wait without the grace.

Then the exercise path: a learner's program in the sandbox (a training loop, and one stuck in
a C call that never returns to Python) and the whole grader around it, cancelled 3 s after the
start: from the cancel to run_code / grade_exercise returning, with the process group gone.

    GPUTUTOR_DATA_DIR=../shared/data python bench/cancel.py [--device cpu]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from tutor.experiments.engine import CANCEL_GRACE_S, Engine

CASES = [
    ("train", {"epochs": 3}),
    ("batch-sweep", {}),
    ("amp-benchmark", {}),
    ("data-bottleneck", {}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    engine = Engine()
    print(f"goal: stopped within 500 ms; the engine's grace before it kills a busy run: {CANCEL_GRACE_S * 1000:.0f} ms")
    print(f"{'experiment':18} {'cancel -> ended':>16} {'median event gap':>17}")
    try:
        for name, params in CASES:
            asked: list[float] = []
            arrivals: list[float] = []
            for message in engine.run(name, params, args.device, cancelled=lambda asked=asked: bool(asked)):
                arrivals.append(time.monotonic())
                if message[0] == "event" and len(arrivals) == 3:
                    asked.append(time.monotonic())
            stopped = (arrivals[-1] - asked[0]) * 1000 if asked else float("nan")
            gaps = [b - a for a, b in itertools.pairwise(arrivals[:3])]  # before the cancel
            gap = statistics.median(gaps) * 1000 if gaps else float("nan")
            print(f"{name:18} {stopped:13.0f} ms {gap:14.0f} ms   ({message[1]})")
    finally:
        engine.close()
    sandbox_cases()


TRAINING = """
import torch
from tutor.lab import MNISTClassifier, train_loader, device
model = MNISTClassifier().to(device)
opt = torch.optim.Adam(model.parameters())
for epoch in range(100):
    for x, y in train_loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device)).backward()
        opt.step()
"""
STUCK = "import time\nwhile True:\n    time.sleep(3600)\n"


def sandbox_cases() -> None:
    import tempfile
    from pathlib import Path

    from tutor.course.loader import load_file
    from tutor.exercises.grader import grade_exercise
    from tutor.exercises.sandbox import run_code

    step = load_file(Path(__file__).resolve().parents[1] / "lessons" / "gpu-training-practice.yaml").step(
        "ex4-portable-script"
    )

    def timed(fn) -> float:
        start = time.monotonic()
        asked: list[float] = []

        def cancelled() -> bool:
            if not asked and time.monotonic() - start > 3.0:
                asked.append(time.monotonic())
            return bool(asked)

        fn(cancelled)
        return (time.monotonic() - asked[0]) * 1000 if asked else float("nan")

    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            (
                "sandbox: training",
                lambda c: run_code(TRAINING, Path(tmp) / "a", timeout=120, memory_mb=4096, cancelled=c),
            ),
            (
                "sandbox: asleep in C",
                lambda c: run_code(STUCK, Path(tmp) / "b", timeout=120, memory_mb=4096, cancelled=c),
            ),
            ("exercise 4, graded", lambda c: grade_exercise(step, step.solution, Path(tmp) / "c", cancelled=c)),
        ]
        for name, fn in rows:
            print(f"{name:22} {timed(fn):9.0f} ms  (cancel -> returned, process group killed)")


if __name__ == "__main__":
    main()
