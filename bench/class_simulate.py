"""A simulated class from real headless runs, then `gpututor class` on it, timed.

    GPUTUTOR_DATA_DIR=../shared/data python bench/class_simulate.py [--learners 30] [--out DIR]

Each learner has a GPUTUTOR_HOME of their own and does, through the recording verbs (in this one
process, so torch is imported once): predicts the size of gpu-lab's model (a factor of the
true size drawn per learner: the class's bias is known in advance), runs device-basics recorded
against the step (a real run each), answers check-tf32 (right, or wrong then right), and submits.
Then the class report is built from the folder and timed against a plain json.load of the same
files in the same process; the report is printed at 80 columns, and written as HTML and CSV.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

# MNISTClassifier's parameters in float32 (fc1 784x256+256, fc2 256x128+128, fc3 128x10+10)
PARAMETER_BYTES = (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10) * 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=30)
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the homes and the class (default: a temp dir)"
    )
    args = parser.parse_args()

    from tutor.cli import main as gpututor

    root = args.out or Path(tempfile.mkdtemp(prefix="class-sim-"))
    class_dir = root / "class"
    class_dir.mkdir(parents=True, exist_ok=True)
    os.environ["GPUTUTOR_CLASS_DIR"] = str(class_dir)
    rng = random.Random(39)
    factors = []

    def cli(*argv: str) -> int:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return gpututor(list(argv))

    started = time.perf_counter()
    for i in range(args.learners):
        home = root / f"learner-{i:02d}"
        home.mkdir(exist_ok=True)
        (home / "settings.toml").write_text(f'learner = "learner-{i:02d}"\n', encoding="utf-8")
        os.environ["GPUTUTOR_HOME"] = str(home)
        factor = math.exp(rng.gauss(math.log(3), 0.8))  # a class that over-predicts memory about x3
        factors.append(factor)
        assert (
            cli("check", "gpu-lab", "basics-predict", "--answer", str(round(factor * PARAMETER_BYTES)), "--record") == 0
        )
        assert cli("run", "--record", "gpu-lab:basics-run") == 0
        for answer in ["1"] if rng.random() < 0.4 else ["2", "1"]:
            assert cli("check", "gpu-lab", "check-tf32", "--answer", answer, "--record") == 0
        assert cli("submit", "gpu-lab") == 0
    made = time.perf_counter() - started
    print(f"{args.learners} learners made with real headless runs in {made:.1f} s ({made / args.learners:.2f} s each)")
    expected = math.exp(statistics.fmean(math.log(f) for f in factors))
    print(f"the class's bias by construction (geometric mean of the factors drawn): x{expected:.3f}")

    from tutor.classroom import html, report, terminal
    from tutor.cli.context import rich_console
    from tutor.course.catalog import discover

    lessons = [(item.lesson, item.path) for item in discover().lessons]
    files = sorted(class_dir.rglob("*.json"))
    t0 = time.perf_counter()
    built = report.build(report.load_dir(class_dir), lessons)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    for f in files:
        json.loads(f.read_text(encoding="utf-8"))
    plain = time.perf_counter() - t0
    (memory,) = [c for c in built.concepts if c.concept == "memory"]
    print(f"report: {len(files)} bundles read and built in {seconds:.3f} s; plain json.load {plain:.3f} s "
          f"({seconds / plain:.1f}x); class bias x{memory.bias:.3f} (expected x{expected:.3f})")  # fmt: skip
    (root / "class.html").write_text(html.render(built), encoding="utf-8")
    console = rich_console()
    console.width = 80
    console.print(terminal.render(built), soft_wrap=False)
    print(f"HTML: {root / 'class.html'}")


if __name__ == "__main__":
    main()
