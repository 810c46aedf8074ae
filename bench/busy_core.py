"""Busy core: the long steps idle, and again with one core kept busy by another process.

Learners rarely have an idle machine (a browser, an IDE, another student's job). Each step runs
twice in a row here, first on the idle machine, then with one busy-loop process per `--busy`
core running beside it (a plain `while True: pass`, started before and stopped after), and the
ratio busy / idle is printed against the goal of 2x. Steps: `gpututor run train` (the engine's
path, in this process), exercise 4's solution graded in the sandbox, and the slowest run step of
each lesson (`--runs`). For the exercise, its own epoch times are read from its output, so the
first epoch can be compared with the rest (goal: within 2x).

The baseline, in the same process: one plain PyTorch epoch over resident MNIST, idle and busy.

    GPUTUTOR_DATA_DIR=../shared/data python bench/busy_core.py [--busy 1] [--threads N] [--runs]

Training threads follow the tutor's policy (tutor/threads.py) unless --threads says otherwise.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from learner_wait import plain_epoch_seconds  # noqa: E402

# The slowest run step of each lesson (bench/learner_wait.py finds them); the first is measured always.
RUNS = [
    ("gpu-training", "practice-run"),
    ("gpu-lab", "sweep-run"),
    ("cpu-vs-gpu", "crossover-run"),
    ("gpu-lab", "bench-run"),
    ("devices", "train-run"),
    ("training-iron-law", "measure"),
]


class Busy:
    """`count` processes spinning on the CPU while the block runs."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Busy:
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.count)]
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def run_step(lesson_id: str, step_id: str) -> float:
    from tutor import experiments
    from tutor.course.loader import load_file

    step = load_file(ROOT / "lessons" / f"{lesson_id}.yaml").step(step_id)
    start = time.perf_counter()
    for _ in experiments.start(step.experiment, dict(step.params), device="cpu"):
        pass
    return time.perf_counter() - start


def exercise4() -> tuple[float, list[float]]:
    from tutor.course.loader import load_file
    from tutor.exercises.grader import grade_exercise

    step = load_file(ROOT / "lessons" / "gpu-training-practice.yaml").step("ex4-portable-script")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = grade_exercise(step, step.solution, Path(tmp))
        seconds = time.perf_counter() - start
    epochs = [float(s) for s in re.findall(r"epoch \d+: ([\d.]+) s", result.sandbox.output)]
    return seconds, epochs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", type=int, default=1, help="cores to keep busy (default 1)")
    ap.add_argument("--runs", action="store_true", help="also the slowest run step of each lesson")
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="training threads instead of the tutor's policy (GPUTUTOR_THREADS), to compare",
    )
    args = ap.parse_args(argv)
    import os

    from tutor import threads

    if args.threads:
        os.environ["GPUTUTOR_THREADS"] = str(args.threads)
    threads.set_env(os.environ)  # as the CLI does, before torch is imported: here and in the sandbox

    import torch

    from tutor.experiments import devices

    print(
        f"device: {devices.resolve('cpu').describe()}; usable cores {threads.usable_cores()}; "
        f"torch threads here {torch.get_num_threads()}; busy processes {args.busy}\n"
    )
    rows = []

    def measure(name: str, fn) -> None:
        idle = fn()
        with Busy(args.busy):
            busy = fn()
        rows.append((name, idle, busy))
        i, b = (idle[0], busy[0]) if isinstance(idle, tuple) else (idle, busy)
        print(
            f"{name:<40} idle {i:7.2f} s   busy {b:7.2f} s   ratio {b / i:5.2f}" + ("   OVER 2x" if b / i > 2 else ""),
            flush=True,
        )
        if isinstance(idle, tuple):
            for label, (_, epochs) in (("idle", idle), ("busy", busy)):
                if epochs:
                    rest = sorted(epochs[1:])[len(epochs[1:]) // 2] if len(epochs) > 1 else epochs[0]
                    print(
                        f"{'':<40} {label} epochs: {', '.join(f'{e:.1f}' for e in epochs)} s; "
                        f"first / median of the rest {epochs[0] / rest:.2f}"
                    )

    measure("plain PyTorch epoch (baseline)", lambda: plain_epoch_seconds("cpu"))
    measure("run train (gpu-training practice-run)", lambda: run_step("gpu-training", "practice-run"))
    measure("exercise 4 solution, graded", exercise4)
    if args.runs:
        for lesson_id, step_id in RUNS[1:]:
            measure(f"run {lesson_id} {step_id}", lambda lesson=lesson_id, step=step_id: run_step(lesson, step))
    return 0


if __name__ == "__main__":
    sys.exit(main())
