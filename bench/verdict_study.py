"""Verdicts decided by the measurement (issue 37): every built-in predict step whose run reports an
interval, made N times with the lesson's own parameters, and each option's verdicts over them.

Prints, per step: each option's hit / miss / undecided counts, the runs' medians and intervals,
whether an option flipped (a hit in one run, a miss in another: the goal is none), and the share
of (step, option) verdicts left undecided (the goal is at most 1 in 10 on an idle machine). Then
the guard band the runs call for: how far each run's median lies beyond another run's interval,
as a share of that interval's end (tutor/measurement/intervals.py GUARD is set from it).

    GPUTUTOR_DATA_DIR=../shared/data python bench/verdict_study.py [--repeats 5] [--busy] [--json F] [--only STEP]

--busy keeps one core busy with another process throughout (bench/busy_core.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from busy_core import Busy  # noqa: E402


def timed_pairs():
    """(lesson, predict step, run step) for every built-in prediction of a metric its run reports
    an interval for (NAME_low), in course order."""
    from tutor import experiments
    from tutor.course.catalog import discover
    from tutor.course.lesson import PredictStep, RunStep

    for loaded in discover().lessons:
        lesson = loaded.lesson
        predict = None
        for step in lesson.steps:
            if isinstance(step, PredictStep) and step.compare:
                predict = step
            elif isinstance(step, RunStep):
                if predict is not None and predict.compare + "_low" in experiments.get(step.experiment).metrics:
                    yield lesson, predict, step
                predict = None


def excess(median: float, low: float, high: float) -> float:
    """The guard [low, high] would need to hold `median`: by what factor, less 1, it lies beyond
    the end it passes (0 inside), as measurement.intervals.widened widens."""
    if 0 < median < low:
        return low / median - 1
    if median > high > 0:
        return median / high - 1
    return 0.0


def study(repeats: int, only: str = "") -> list[dict]:
    from tutor.authoring.lesson_test import Player

    player = Player(None, repeats=repeats)
    rows = []
    for lesson, predict, run in timed_pairs():
        if only and only not in f"{lesson.id}/{predict.id}":
            continue
        t0 = time.perf_counter()
        ran, runs = player._repeated_run_step(lesson, run, predict)
        seconds = time.perf_counter() - t0
        if not runs:
            rows.append({"step": f"{lesson.id}/{predict.id}", "failed": ran.detail})
            print(f"{lesson.id}/{predict.id}: {ran.detail}", flush=True)
            continue
        judged = player._noise_outcome(lesson, predict, runs)
        measured = [m for m in judged.measured if m[1] is not None]
        guard = max((excess(a[0], b[1], b[2]) for a in measured for b in measured if a is not b), default=0.0)
        row = {
            "step": f"{lesson.id}/{predict.id}",
            "experiment": run.experiment,
            "metric": predict.compare,
            "ok": judged.ok,
            "verdicts": judged.verdicts,
            "measured": judged.measured,
            "guard_needed": guard,
            "seconds_per_run": seconds / repeats,
            "detail": judged.detail,
        }
        rows.append(row)
        print(
            f"{row['step']} ({run.experiment}, {seconds / repeats:.1f} s a run): "
            f"{'ok' if judged.ok else 'FAILS'}; guard needed {guard:.1%}\n    {judged.detail}",
            flush=True,
        )
    return rows


def summary(rows: list[dict]) -> str:
    verdicts = [c for r in rows for c in r.get("verdicts", {}).values()]
    flips = sum(1 for c in verdicts if c.get("hit") and c.get("miss"))
    undecided = sum(c.get("undecided", 0) for c in verdicts)
    total = sum(sum(c.values()) for c in verdicts)
    guard = max((r["guard_needed"] for r in rows if "guard_needed" in r), default=0.0)
    slowest = max((r["seconds_per_run"] for r in rows if "seconds_per_run" in r), default=0.0)
    return (
        f"{len(rows)} steps, {len(verdicts)} (step, option) pairs: {flips} flipped (hit in one run, miss in "
        f"another); {undecided} of {total} verdicts undecided ({undecided / max(total, 1):.0%}); the largest "
        f"guard any pair of runs needed: {guard:.1%}; the slowest run: {slowest:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="keep one core busy with another process")
    parser.add_argument("--json", type=Path, help="write every row here")
    parser.add_argument("--only", default="", help="only the steps whose lesson/step contains this")
    args = parser.parse_args()
    if args.busy:
        with Busy(1):
            rows = study(args.repeats, args.only)
    else:
        rows = study(args.repeats, args.only)
    print(summary(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
