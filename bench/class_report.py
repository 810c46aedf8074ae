"""Class report speed: `gpututor class` on 200 bundles, against reading the same files as plain JSON.

The issue's goal is 200 bundles in 2 s or less. Each bundle is a whole course's worth: every lesson
of the catalog, every predict step locked and measured, every check answered (one to three
attempts, the wrong ones matching a misconception), every exercise graded one to three times with
its requirements and the solution's code, hints seen. A bundle file from `gpututor submit` may be
given instead (`--bundle FILE`): its copies are then renamed learner by learner.

Timed in this process, best of `--repeats`: `load_dir` (read and validate every file), `build`
(the report), and the terminal render at 80 columns; then a plain `json.load` of the same files,
the floor any reader pays. The gradebook CSVs are timed too.

    python bench/class_report.py [--bundles 200] [--repeats 3] [--bundle FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from tutor.classroom import gradebook, report  # noqa: E402
from tutor.classroom.bundle import (  # noqa: E402
    AidsRecord,
    Attempt,
    Bundle,
    CheckRecord,
    ExerciseRecord,
    Grading,
    LessonRecord,
    MachineRecord,
    Measured,
    PredictionRecord,
    RequirementVerdict,
    content_hash,
    dumps,
    read,
)
from tutor.classroom.terminal import render  # noqa: E402
from tutor.course.catalog import discover  # noqa: E402
from tutor.measurement.method import METHOD  # noqa: E402

AT = "2026-11-28T10:00:00+00:00"


def course_bundle(learner: str, rng: random.Random, lessons) -> Bundle:
    """One learner through every lesson, answers drawn at random."""
    records = []
    for lesson, path in lessons:
        predictions, checks, exercises, aids = [], [], [], []
        for step in lesson.steps:
            if step.kind == "predict":
                error = rng.gauss(0.4, 0.8)
                verdict = rng.choice(["hit", "miss", "miss", "undecided"])
                measured = Measured(value=3.2, low=3.0, high=3.4, unit="x", run_at=AT, method=METHOD, device="cuda:0")
                predictions.append(
                    PredictionRecord(
                        step=step.id,
                        concept=getattr(step, "concept", None),
                        answer=f"{math.exp(error) * 3.2:.1f}x",
                        value=math.exp(error) * 3.2,
                        locked_at=AT,
                        measured=measured,
                        verdict=verdict,  # type: ignore[arg-type]
                        log_error=error,
                        feedback="off by 2.1x (you said 6.7x, measured 3.2x)",
                    )
                )
            elif step.kind == "check":
                tries = rng.randint(1, 3)
                attempts = [
                    Attempt(
                        answer="an answer of a few words " * 3,
                        correct=i == tries - 1 and rng.random() < 0.8,
                        feedback="Not quite: the gradients add up across backward() calls.",
                        at=AT,
                        misconception=None if i == tries - 1 else rng.choice(["grads-reset", "gpu-always-faster"]),
                    )
                    for i in range(tries)
                ]
                checks.append(
                    CheckRecord(
                        step=step.id,
                        attempts=attempts,
                        correct=any(a.correct for a in attempts),
                        first_try=attempts[0].correct,
                    )
                )
            elif step.kind == "exercise":
                runs = rng.randint(1, 3)
                ids = [str(getattr(r, "id", None) or f"req-{i}") for i, r in enumerate(step.requirements)]
                gradings = [
                    Grading(
                        at=AT,
                        passed=g == runs - 1,
                        requirements=[
                            RequirementVerdict(
                                id=rid, title=rid, passed=g == runs - 1 or rng.random() < 0.6, feedback="why it failed"
                            )
                            for rid in ids
                        ],
                        summary="2 of 3 requirements met",
                    )
                    for g in range(runs)
                ]
                exercises.append(ExerciseRecord(step=step.id, gradings=gradings, passed=True, code=step.solution))
                aids.append(AidsRecord(step=step.id, hints=rng.randint(0, 2)))
        done = [s.id for s in lesson.steps if rng.random() < 0.85]
        records.append(
            LessonRecord(
                id=lesson.id,
                title=lesson.title,
                content_hash=content_hash(path),
                steps=len(lesson.steps),
                completed=done,
                predictions=predictions,
                checks=checks,
                exercises=exercises,
                aids=aids,
            )
        )
    machine = MachineRecord(
        host=f"node{rng.randint(1, 4)}",
        device="cuda:0: NVIDIA H200 (139.8 GiB, sm_90, bf16)",
        device_kind="cuda",
        torch="2.5.1",
        cuda="12.4",
        driver="550.54",
        calibrated=True,
        method=METHOD,
    )
    return Bundle(gpututor="0.bench", learner=learner, submitted_at=AT, machine=machine, lessons=records).sealed()


def best(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bundles", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bundle", type=Path, help="copy this bundle (from `gpututor submit`) instead")
    args = parser.parse_args()
    catalog = discover()
    lessons = [(item.lesson, item.path) for item in catalog.lessons]
    rng = random.Random(39)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for i in range(args.bundles):
            name = f"learner-{i:03d}"
            if args.bundle:
                b = read(args.bundle).model_copy(update={"learner": name}).sealed()
            else:
                b = course_bundle(name, rng, lessons)
            (folder / f"{name}.gpututor.json").write_text(dumps(b), encoding="utf-8")
        size = sum(p.stat().st_size for p in folder.glob("*.json"))
        files = sorted(folder.glob("*.json"))

        def plain() -> list[object]:
            out = []
            for p in files:
                with open(p, encoding="utf-8") as f:
                    out.append(json.load(f))
            return out

        t_json, _ = best(plain, args.repeats)
        t_load, loaded = best(lambda: report.load_dir(folder), args.repeats)
        t_build, built = best(lambda: report.build(loaded, lessons), args.repeats)  # type: ignore[arg-type]

        def draw() -> str:
            console = Console(width=80, record=True, file=io.StringIO())
            console.print(render(built))  # type: ignore[arg-type]
            return console.export_text()

        t_render, _ = best(draw, args.repeats)
        t_csv, _ = best(lambda: (gradebook.gradebook_csv(built), gradebook.long_csv(built)), args.repeats)  # type: ignore[arg-type]
    total = t_load + t_build + t_render
    print(
        f"{args.bundles} bundles, {size / 2**20:.1f} MiB ({size / args.bundles / 1024:.0f} KiB each), best of {args.repeats}"
    )
    print(f"  load_dir (read + validate): {t_load:.3f} s")
    print(f"  build (the report):         {t_build:.3f} s")
    print(f"  render at 80 columns:       {t_render:.3f} s")
    print(f"  load + build + render:      {total:.3f} s (goal <= 2 s)")
    print(f"  both CSVs:                  {t_csv:.3f} s")
    print(f"  plain json.load of the same files: {t_json:.3f} s; ratio {total / t_json:.1f}x")


if __name__ == "__main__":
    main()
