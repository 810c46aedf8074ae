"""Learner wait: how long each step of the built-in lessons keeps a learner waiting.

Every run step, every check's verify run and every exercise's reference solution (and, with
--mistakes, each listed mistake) runs with the lesson's own parameters, as the learner meets it:
runs through the experiment registry on this machine's device, exercises through the grader in
the sandbox on the full data. Nothing is shared between steps (a learner pays each one). Prints
a table (lesson, step, what, seconds), the worst step and the count over the goal of 60 s.

The baseline, measured in the same process first: one epoch of the notebook's loop (the course
model, Adam, batch 64) over all 60,000 resident MNIST images with plain PyTorch, so the figures
can be read against this machine's speed ("the worst step is N plain epochs").

    GPUTUTOR_DATA_DIR=../shared/data python bench/learner_wait.py [--lesson ID ...] [--kind run,verify,exercise]
                                                                  [--step ID ...] [--mistakes] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 60.0


def plain_epoch_seconds(device: str) -> float:
    """One epoch of the notebook's loop over resident MNIST, plain PyTorch, after 5 warm-up steps."""
    import torch
    from torch import nn

    from tutor.experiments import data
    from tutor.experiments.model import MNISTClassifier
    from tutor.measurement.timing import synchronize

    resident = data.load(device)
    torch.manual_seed(0)
    model = MNISTClassifier().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = resident.train_x, resident.train_y
    order = torch.randperm(x.shape[0], device=device)

    def steps(count: int | None) -> None:
        for i, start in enumerate(range(0, x.shape[0], 64)):
            if count is not None and i == count:
                break
            idx = order[start : start + 64]
            opt.zero_grad()
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()

    steps(5)
    synchronize(device)
    start = time.perf_counter()
    steps(None)
    synchronize(device)
    return time.perf_counter() - start


def timed_run(experiment: str, params: dict, device: str | None) -> tuple[float, str]:
    from tutor import experiments
    from tutor.experiments.events import Finished, Note

    start = time.perf_counter()
    notes: list[str] = []
    try:
        finished = False
        for event in experiments.start(experiment, dict(params), device=device):
            if isinstance(event, Note) and ("timed on" in event.text or "cut" in event.text):
                notes.append(event.text)
            finished = finished or isinstance(event, Finished)
        status = "ok" if finished else "ended without finishing"
    except Exception as e:  # noqa: BLE001 - a failed run is a figure too
        status = f"{type(e).__name__}: {str(e)[:80]}"
    return time.perf_counter() - start, status if status != "ok" or not notes else "ok; " + notes[0][:90]


def timed_exercise(step, code: str) -> tuple[float, str]:
    from tutor.exercises.grader import grade_exercise

    with tempfile.TemporaryDirectory(prefix="gpututor-bench-") as tmp:
        start = time.perf_counter()
        result = grade_exercise(step, code, Path(tmp))
        seconds = time.perf_counter() - start
    return seconds, "passed" if result.passed else f"not passed: {result.summary[:90]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lessons-dir", default=str(ROOT / "lessons"))
    ap.add_argument("--lesson", action="append", default=[], help="only these lesson ids (repeatable)")
    ap.add_argument("--step", action="append", default=[], help="only these step ids (repeatable)")
    ap.add_argument("--kind", default="run,verify,exercise", help="which steps: run, verify, exercise")
    ap.add_argument("--mistakes", action="store_true", help="also grade each exercise's listed mistakes")
    ap.add_argument("--device", default=None)
    ap.add_argument("--json", default=None, help="also write the rows to this file")
    args = ap.parse_args(argv)
    kinds = set(args.kind.split(","))

    from tutor.course.lesson import CheckStep, ExerciseStep, RunStep
    from tutor.course.loader import load_file
    from tutor.experiments import devices

    dev = devices.resolve(args.device)
    print(f"device: {dev.describe()}")
    baseline = plain_epoch_seconds(dev.torch_device)
    print(f"baseline: one plain PyTorch epoch (60,000 resident images, batch 64): {baseline:.2f} s\n")

    rows: list[dict] = []
    print(f"{'lesson':<24} {'step':<28} {'what':<30} {'seconds':>8} {'x goal':>7}  result")
    for path in sorted(Path(args.lessons_dir).glob("*.yaml")):
        lesson = load_file(path)
        if args.lesson and lesson.id not in args.lesson:
            continue
        for step in lesson.steps:
            if args.step and step.id not in args.step:
                continue
            jobs = []
            if isinstance(step, RunStep) and "run" in kinds:
                jobs.append((f"run {step.experiment}", lambda s=step: timed_run(s.experiment, s.params, args.device)))
            if isinstance(step, CheckStep) and step.verify is not None and "verify" in kinds:
                v = step.verify
                jobs.append((f"verify {v.experiment}", lambda v=v: timed_run(v.experiment, v.params, args.device)))
            if isinstance(step, ExerciseStep) and "exercise" in kinds:
                jobs.append(("exercise solution", lambda s=step: timed_exercise(s, s.solution)))
                if args.mistakes:
                    jobs += [
                        (f"mistake: {m.name}"[:30], lambda s=step, m=m: timed_exercise(s, m.code))
                        for m in step.mistakes
                    ]
            for what, job in jobs:
                seconds, status = job()
                row = {
                    "lesson": lesson.id,
                    "step": step.id,
                    "what": what,
                    "seconds": round(seconds, 1),
                    "status": status,
                }
                rows.append(row)
                flag = " OVER" if seconds > GOAL_S else ""
                print(
                    f"{lesson.id[:24]:<24} {step.id[:28]:<28} {what[:30]:<30} {seconds:8.1f} "
                    f"{seconds / GOAL_S:7.2f}  {status}{flag}",
                    flush=True,
                )
    if not rows:
        print("no steps matched")
        return 2
    worst = max(rows, key=lambda r: r["seconds"])
    over = [r for r in rows if r["seconds"] > GOAL_S]
    total = sum(r["seconds"] for r in rows)
    print(
        f"\nworst: {worst['lesson']} / {worst['step']} ({worst['what']}): {worst['seconds']:.1f} s = "
        f"{worst['seconds'] / GOAL_S:.2f} x the {GOAL_S:.0f} s goal = {worst['seconds'] / baseline:.1f} plain epochs"
    )
    print(f"steps over {GOAL_S:.0f} s: {len(over)} of {len(rows)}; all of them: {total / 60:.1f} min")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"device": dev.describe(), "baseline_epoch_s": baseline, "rows": rows}, indent=1),
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
