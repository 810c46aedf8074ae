"""A class on one machine: do learners' timed windows take turns, and are their figures their own?

Issue 39's measurement. LEARNERS learners (each their own GPUTUTOR_HOME, one GPUTUTOR_CLASS_DIR)
start `gpututor run crossover --json` at the same moment. From the runs' own record of the slot
each held (the class folder's queue/history.jsonl: took, released, per pid) it checks that no two
timed windows overlap, that all finished, and that each run that waited showed its place (its
`waiting` events); then it compares each learner's timings with the same learner's run alone
(the ratio shared / alone: near 1 when the queue kept the timing the learner's own).

    GPUTUTOR_DATA_DIR=/work/shared/data python bench/class_queue.py [--learners 4] [--experiment crossover]

It takes a few minutes on a 2-core machine: the runs alone one after another, then the class.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tutor.measurement import slots  # noqa: E402 - after the path above


def _run(experiment: str, home: Path, folder: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "GPUTUTOR_HOME": str(home), "GPUTUTOR_CLASS_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tutor", "run", experiment, "--json"],
        env=env,
        cwd=ROOT,
        stdout=out.open("w"),
        stderr=subprocess.STDOUT,
    )


def _events(out: Path) -> list[dict]:
    rows = []
    for line in out.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def _timings(events: list[dict]) -> dict[str, float]:
    """The run's timed figures: its metrics in seconds (the unit tells), non-zero."""
    finished = next((e for e in events if e.get("event") == "finished"), None)
    if finished is None:
        return {}
    return {
        k: v
        for k, v in finished["metrics"].items()
        if "seconds" in k and isinstance(v, (int, float)) and not isinstance(v, bool) and v
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--learners", type=int, default=4)
    parser.add_argument("--experiment", default="crossover")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="class-queue-"))
    homes = [work / f"learner{i}" for i in range(args.learners)]
    for h in homes:
        h.mkdir()
    load = os.getloadavg()[0]
    print(f"{args.learners} learners, {args.experiment}, {os.cpu_count()} cores, load {load:.2f} at the start")

    alone: list[dict[str, float]] = []
    alone_s: list[float] = []
    for i, home in enumerate(homes):  # each learner's run alone, with a class folder of its own
        out = work / f"alone{i}.jsonl"
        began = time.monotonic()
        _run(args.experiment, home, work / f"alone-class{i}", out).wait()
        alone_s.append(time.monotonic() - began)
        alone.append(_timings(_events(out)))
        print(f"  learner {i} alone: {alone_s[-1]:.1f} s wall, {alone[-1]}")

    folder = work / "class"
    began = time.monotonic()
    procs = [_run(args.experiment, home, folder, work / f"class{i}.jsonl") for i, home in enumerate(homes)]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - began
    history = {h["pid"]: h for h in slots.read_history(folder)}
    windows = sorted(
        (history[p.pid]["took"], history[p.pid]["released"], i) for i, p in enumerate(procs) if p.pid in history
    )
    overlaps = sum(1 for a, b in itertools.pairwise(windows) if b[0] < a[1])
    print(f"together: {wall:.1f} s wall; exit codes {codes}; {len(windows)} windows recorded, {overlaps} overlapping")
    t0 = min(w[0] for w in windows) if windows else 0.0
    ratios: list[float] = []
    for took, released, i in windows:
        events = _events(work / f"class{i}.jsonl")
        places = [(e["running"], e["waiting_ahead"]) for e in events if e.get("event") == "waiting"]
        waited = history[procs[i].pid]["waited_s"]
        mine = _timings(events)
        shared = [k for k in mine if k in alone[i]]
        r = {k: mine[k] / alone[i][k] for k in shared}
        ratios.extend(r.values())
        shown = ", ".join(f"{k} {mine[k]:.3f}/{alone[i][k]:.3f} = {v:.2f}" for k, v in r.items())
        first = f"first place shown: {places[0][0]} running, {places[0][1]} waiting" if places else "no wait"
        print(
            f"  learner {i}: window {took - t0:6.1f}..{released - t0:6.1f} s, waited {waited:.1f} s "
            f"({first}; {len(places)} waiting events); together/alone: {shown}"
        )
    waited_ok = all(
        any(e.get("event") == "waiting" for e in _events(work / f"class{i}.jsonl"))
        for _, _, i in windows
        if history[procs[i].pid]["waited_s"] > 0.5
    )
    if ratios:
        print(
            f"ratios together/alone: median {statistics.median(ratios):.2f}, "
            f"range {min(ratios):.2f}..{max(ratios):.2f} over {len(ratios)} timings"
        )
    ok = not overlaps and all(c == 0 for c in codes) and len(windows) == args.learners and waited_ok
    print("ok" if ok else "FAILED", f"(files in {work})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
