"""Exercise start: today's `python -m tutor.exercises.child` start against the warm fork server.

For a print-only program, in the same run, taking turns:
- first line: from `grade_exercise` (what ctrl+r calls) to the program's first line reaching
  `on_output`, in this process (the TUI's case; goal 0.5 s);
- end to end: `python -m tutor exercise LESSON STEP --file print_only.py --json` as a fresh
  command, to its exit (goal 1.5 s); with the fork server, one a previous command left warm.
Also the first run of a session, when no server runs yet (the server starts then), and what the
TUI does about it: an exercise step that opens warms the server (TutorApp.warm_sandbox), so the
first ctrl+r after reading the step for READ_S finds it up; one pressed as the step opens waits
for the server starting rather than importing torch a second time. Medians of --repeats runs each, and the ratios.

    python bench/exercise_start.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAM = "print('hello from the exercise')\n"
LESSON, STEP = "cpu-vs-gpu", "practice-basic"
WAYS = {"today": "0", "fork server": "1"}
READ_S = 3.0  # a learner reading an exercise step before pressing ctrl+r (the shortest step takes longer)


def first_line(step, workdir: Path) -> float:
    from tutor.exercises.grader import grade_exercise

    seen: list[float] = []
    start = time.perf_counter()
    grade_exercise(step, PROGRAM, workdir, on_output=lambda text: seen or seen.append(time.perf_counter()))
    if not seen:
        raise RuntimeError("the program's line never arrived")
    return seen[0] - start


def opened_then_run(step, workdir: Path, read_s: float) -> float:
    """First line of a run `read_s` after the step opened, with no server before it opened."""
    from tutor.exercises.grader import prestart

    tag = os.environ["GPUTUTOR_FORKSERVER_TAG"]
    os.environ["GPUTUTOR_FORKSERVER_TAG"] = f"{tag}-opened{time.monotonic_ns()}"  # a server not yet started
    try:
        threading.Thread(target=prestart, args=(step, workdir), daemon=True).start()  # as the TUI does
        time.sleep(read_s)  # the learner reads the step
        return first_line(step, workdir)
    finally:
        os.environ["GPUTUTOR_FORKSERVER_TAG"] = tag


def end_to_end(path: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "tutor", "exercise", LESSON, STEP, "--file", str(path), "--json"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="exercise-start-"))
    os.environ.setdefault("GPUTUTOR_HOME", str(scratch / "home"))
    os.environ["GPUTUTOR_FORKSERVER_TAG"] = f"bench{os.getpid()}"  # a server of this run's own,
    os.environ["GPUTUTOR_FORKSERVER_IDLE_S"] = "30"  # gone soon after the last run
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    from tutor.course import catalog
    from tutor.exercises import forkserver

    lesson = catalog.discover().get(LESSON).lesson
    step = next(s for s in lesson.steps if s.id == STEP)
    program = scratch / "print_only.py"
    program.write_text(PROGRAM, encoding="utf-8")
    env = dict(os.environ)

    os.environ["GPUTUTOR_FORKSERVER"] = "1"
    cold_line = first_line(step, scratch / "cold")  # no server yet: this run starts it
    os.environ["GPUTUTOR_FORKSERVER"] = "0"
    cold_today = first_line(step, scratch / "cold-today")
    lines: dict[str, list[float]] = {way: [] for way in WAYS}
    ends: dict[str, list[float]] = {way: [] for way in WAYS}
    for i in range(args.repeats):
        for way, switch in WAYS.items() if i % 2 == 0 else reversed(WAYS.items()):
            os.environ["GPUTUTOR_FORKSERVER"] = switch
            lines[way].append(first_line(step, scratch / f"{way}-{i}"))
            ends[way].append(end_to_end(program, {**env, "GPUTUTOR_FORKSERVER": switch}))
    os.environ["GPUTUTOR_FORKSERVER"] = "1"
    opened = {
        read_s: [opened_then_run(step, scratch / f"opened-{read_s}-{i}", read_s) for i in range(3)]
        for read_s in (READ_S, 0.0)
    }
    load = os.getloadavg()
    os.environ["GPUTUTOR_FORKSERVER"] = "1"
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
        f"Python {sys.version.split()[0]}; fork server {'' if forkserver.enabled() else 'not '}available here"
    )
    print(
        f"first run of a session (no server yet): first line {cold_line:.2f} s with the server starting, "
        f"{cold_today:.2f} s today's start"
    )
    for read_s, times in opened.items():
        print(
            f"the step opened {read_s:g} s before ctrl+r, no server before: first line "
            f"{statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}, {len(times)} runs)"
        )
    print(f"{'':22} {'today (median, range)':>26} {'fork server':>26} {'ratio':>7}  goal")
    for name, table, goal in (("first line", lines, 0.5), ("gpututor exercise", ends, 1.5)):
        today, forked = statistics.median(table["today"]), statistics.median(table["fork server"])
        spread = {way: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f}) s" for way, v in table.items()}
        print(
            f"{name:22} {spread['today']:>26} {spread['fork server']:>26} {today / forked:6.1f}x  "
            f"<= {goal} s: {'met' if forked <= goal else 'not met'}"
        )


if __name__ == "__main__":
    main()
