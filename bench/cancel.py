"""Cancel latency: from escape (the cancel request) to the run's "cancelled" end, per experiment.

Runs each experiment in the tutor's engine process, asks it to stop after its third event,
and times how long the end takes to arrive. An experiment that yields often stops at its
next event; one that is busy between events (a long CPU epoch) is stopped by the engine
after CANCEL_GRACE_S. Baseline: the same experiment's median gap between two events, in
the same run, which is what a cancel would wait without the grace.

    GPUTUTOR_DATA_DIR=../shared/data python bench/cancel.py [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time

from tutor.engine import CANCEL_GRACE_S, Engine

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
    print(f"goal: stopped within 500 ms; the engine's grace before it kills a busy run: "
          f"{CANCEL_GRACE_S * 1000:.0f} ms")
    print(f"{'experiment':18} {'cancel -> ended':>16} {'median event gap':>17}")
    try:
        for name, params in CASES:
            asked: list[float] = []
            arrivals: list[float] = []
            for message in engine.run(name, params, args.device, cancelled=lambda: bool(asked)):
                arrivals.append(time.monotonic())
                if message[0] == "event" and len(arrivals) == 3:
                    asked.append(time.monotonic())
            stopped = (arrivals[-1] - asked[0]) * 1000 if asked else float("nan")
            gaps = [b - a for a, b in zip(arrivals, arrivals[1:3])]
            gap = statistics.median(gaps) * 1000 if gaps else float("nan")
            print(f"{name:18} {stopped:13.0f} ms {gap:14.0f} ms   ({message[1]})")
    finally:
        engine.close()


if __name__ == "__main__":
    main()
