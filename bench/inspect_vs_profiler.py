"""Does `gpututor inspect`'s step-time split agree with a torch.profiler trace of the same steps,
and what does watching cost? (issue 40: the split within 10% of the trace's, overhead <= 5%)

For each script (the two examples the package ships, unless --script names one):

1. The split, inspect against the profiler, on the same steps: one process runs the script with
   inspect's watch (tutor/inspect/hooks.py) and, over its timed steps, torch.profiler with its
   Python tracer. Each step is a range of the trace (a record_function opened at each optimizer
   step's end); the trace's phases come from its own events: data, a DataLoader's `__next__`
   range or the script's `get_batch` call; copy, a top-level `aten::_to_copy`; optimizer, the
   `Optimizer.step#` and `Optimizer.zero_grad#` ranges; backward, the `Tensor.backward` call;
   forward, from the step's first `nn.Module` call to backward (the loss with it, as the report
   counts it), less the ranges above inside it; other, the rest of the step. Both clocks see the
   same (profiled, so slower) steps. Agreement: each phase's share of the step within 10
   percentage points of the trace's (the issue's "within 10%", read as 10% of the step: a
   relative 10% of a phase of 1% would be noise); the relative difference is printed beside it.
   The last profiled step is left out (the profiler stops inside its optimizer range). On a GPU
   the steps compared are inspect's split window, where a synchronize at each phase boundary
   makes the host's clock the device's (the timed window before it has no split to compare).
2. The overhead, the CLI's --compare-plain (tutor/inspect/hooks.py, the overhead window): after
   the report's windows, the same run goes on in blocks of steps (about 0.1 s each), one plain
   (every patch and module hook off, only the optimizer's step clock) and one watched, in turns,
   --pairs pairs; each pair's ratio, their median and its order-statistic interval. Runs in turns
   in one process see the same memory layout, threads and machine, which separate processes did
   not (their pairs spread 0.84 to 1.21x on a quiet machine). --runs runs; all pairs pooled too.

Run: python bench/inspect_vs_profiler.py [--steps 20] [--pairs 10] [--runs 3] [--script PATH [-- ARGS]]
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXAMPLES = ROOT / "tutor" / "inspect" / "examples"
PHASES = ("data", "copy", "forward", "backward", "optimizer", "other")
STEP_RANGE = "inspect-bench step#"
AGREE_POINTS = 0.10


def default_scripts() -> list[tuple[Path, list[str]]]:
    data = os.environ.get("GPUTUTOR_DATA_DIR", "")
    mnist = ["--batch-size", "32", "--workers", "1", *(["--data-dir", data] if data else [])]
    return [
        (EXAMPLES / "char_gpt.py", ["--max-iters", "500"]),
        (EXAMPLES / "mnist_cnn.py", mnist),
        (ROOT / "tests" / "inspect_scripts" / "small_train.py", ["--steps", "5000"]),  # 2 ms steps: hooks weigh most
    ]


# The profiled child of small_train.py dies in torch's profiler (SIGSEGV, then no trace to export:
# torch 2.14.1, this VM), so its split is not compared; the watch itself runs it cleanly.
NO_PROFILE = {"small_train.py"}


# ------------------------------------------------------------------ the child: watched and profiled


def child(out_file: str, script: str, args: list[str], warmup: int, steps: int) -> None:
    import torch
    from torch.optim import optimizer as optim
    from torch.profiler import ProfilerActivity, profile

    from tutor.inspect.hooks import Stopped, Watch

    # One step more than compared: the profiler stops inside its optimizer range. A CPU's split is
    # its timed window's; a GPU's comes from the split window (a synchronize at each boundary).
    cuda = torch.cuda.is_available()
    watch = Watch(script, warmup, 2, split_steps=steps + 1) if cuda else Watch(script, warmup, steps + 1, 0)
    first = watch.last_timed if cuda else watch.probe_step  # the profiled steps follow this one
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(activities=activities, with_stack=True)
    state: dict[str, Any] = {"step": 0, "range": None}

    def new_range(n: int) -> None:
        state["range"] = torch.autograd.profiler.record_function(f"{STEP_RANGE}{n}")
        state["range"].__enter__()

    def step_end(opt: Any, a: tuple, kw: dict) -> None:  # runs before the watch's own step end
        state["step"] += 1
        n = state["step"] - first  # profiled steps finished
        if n == 0:
            prof.start()
            new_range(1)
        elif 0 < n <= steps + 1:
            state["range"].__exit__(None, None, None)
            if n <= steps:
                new_range(n + 1)
            else:
                prof.stop()

    handle = optim.register_optimizer_step_post_hook(step_end)  # before the watch's: runs first
    watch.install()
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(script)
    try:
        runpy.run_path(script, run_name="__main__")
    except Stopped:
        pass
    finally:
        watch.uninstall()
        handle.remove()
    trace = out_file + ".trace.json"
    prof.export_chrome_trace(trace)
    events = json.loads(Path(trace).read_text())["traceEvents"]
    Path(trace).unlink()
    rows = watch.split if cuda else watch.timed
    result = {"watch": rows[:steps], "profiler": profiler_steps(events, steps), "cuda": cuda}
    Path(out_file).write_text(json.dumps(result))


def profiler_steps(events: list[dict[str, Any]], steps: int) -> list[dict[str, float]]:
    """Each step's phases, in seconds, from the trace's own events (the main thread's)."""
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    marks = {e["name"]: e for e in spans if e["name"].startswith(STEP_RANGE)}
    main_tid = next(iter(marks.values()))["tid"] if marks else None
    spans = [e for e in spans if e.get("tid") == main_tid]
    rows = []
    for n in range(1, steps + 1):
        mark = marks.get(f"{STEP_RANGE}{n}")
        if mark is None:
            continue
        start, end = float(mark["ts"]), float(mark["ts"]) + float(mark["dur"])
        inside = [e for e in spans if float(e["ts"]) < end and float(e["ts"]) + float(e["dur"]) > start]
        rows.append(split_one(inside, start, end))
    return rows


def _clip(e: dict[str, Any], start: float, end: float) -> tuple[float, float]:
    return max(start, float(e["ts"])), min(end, float(e["ts"]) + float(e["dur"]))


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def _within(intervals: list[tuple[float, float]], a: float, b: float) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in intervals)


def split_one(inside: list[dict[str, Any]], start: float, end: float) -> dict[str, float]:
    name = lambda e: str(e["name"])  # noqa: E731
    modules = [e for e in inside if name(e).startswith("nn.Module: ")]
    data = _union(
        [
            _clip(e, start, end)
            for e in inside
            if name(e).startswith("enumerate(DataLoader)#") or name(e).endswith(": get_batch")
        ]
    )
    optimizer = _union(
        [_clip(e, start, end) for e in inside if name(e).startswith(("Optimizer.step#", "Optimizer.zero_grad#"))]
    )
    backward = _union(
        [
            _clip(e, start, end)
            for e in inside
            if name(e).startswith("torch/_tensor.py") and name(e).endswith(": backward")
        ]
    )
    # a copy is the loop's own: not one inside the model, backward, the optimizer or the loader
    owned = _union([_clip(e, start, end) for e in modules] + backward + optimizer + data)
    copy = _union(
        [
            _clip(e, start, end)
            for e in inside
            if name(e) == "aten::_to_copy" and _within(owned, *_clip(e, start, end)) == 0
        ]
    )
    phases = {"data": _length(data), "copy": _length(copy), "optimizer": _length(optimizer)}
    phases["backward"] = _length(backward)
    forward = 0.0
    first_module = min((float(e["ts"]) for e in modules if float(e["ts"]) >= start), default=None)
    if first_module is not None:
        until = min((a for a, _ in backward), default=end)
        taken = _union(data + copy + optimizer)
        forward = max(0.0, until - first_module) - _within(taken, first_module, until)
    phases["forward"] = forward
    total = end - start
    phases["other"] = max(0.0, total - sum(phases.values()))
    return {k: v / 1e6 for k, v in {**phases, "total": total}.items()}


# ------------------------------------------------------------------ the parent


def shares(rows: list[dict[str, Any]]) -> tuple[dict[str, float], float]:
    total = statistics.fmean(float(r["total"]) for r in rows)
    parts = {p: statistics.fmean(float(r.get(p, 0.0)) for r in rows) for p in PHASES}
    parts["other"] = max(0.0, total - sum(v for k, v in parts.items() if k != "other"))
    return {k: v / total for k, v in parts.items()}, total


def compare_split(script: Path, args: list[str], warmup: int, steps: int) -> bool:
    from tutor.exercises import sandbox

    env = sandbox._child_env(script.parent, 4096, None)
    env.pop("GPUTUTOR_SANDBOX_OWNER", None)
    with tempfile.TemporaryDirectory(prefix="inspect-vs-profiler-") as tmp:
        out = Path(tmp, "out.json")
        options = ["--warmup", str(warmup), "--steps", str(steps)]
        command = [sys.executable, __file__, "--child", str(out), *options, str(script), *args]
        ran = subprocess.run(command, cwd=script.parent, env=env, capture_output=True, text=True, timeout=600)
        if not out.exists():
            print(f"  the profiled run gave no result (exit {ran.returncode}):\n{ran.stderr[-2000:]}")
            return False
        got = json.loads(out.read_text())
    watch, w_total = shares(got["watch"])
    trace, t_total = shares(got["profiler"])
    print(
        f"  split over the same {len(got['profiler'])} profiled steps: inspect {w_total * 1e3:.2f} ms a step, "
        f"the trace {t_total * 1e3:.2f} ms"
    )
    print(f"  {'phase':<10}{'inspect':>9}{'profiler':>10}{'points':>8}{'relative':>10}")
    worst = 0.0
    for p in PHASES:
        diff = watch[p] - trace[p]
        worst = max(worst, abs(diff))
        rel = f"{diff / trace[p]:+.0%}" if trace[p] >= 0.01 else "-"
        print(f"  {p:<10}{watch[p]:>9.1%}{trace[p]:>10.1%}{diff * 100:>+8.1f}{rel:>10}")
    agree = worst <= AGREE_POINTS
    print(f"  largest difference {worst * 100:.1f} points: {'within' if agree else 'NOT within'} 10 points")
    return agree


def compare_overhead(script: Path, args: list[str], warmup: int, steps: int, pairs: int, runs: int) -> None:
    from tutor.cli.inspect import overhead
    from tutor.inspect import launch
    from tutor.measurement.intervals import median_interval

    pooled: list[float] = []
    for _ in range(runs):
        ran = launch.run_script(script, args, warmup=warmup, steps=steps, timeout=300, overhead_pairs=pairs)
        o = overhead(ran.watched)
        if not o.get("ratio"):
            print(f"  a run gave no overhead: {ran.watched.get('outcome')}")
            continue
        pooled += o["ratios"]
        print(
            f"  {o['pairs']} pairs of {o['block_steps']}-step blocks: watched {o['watched_ms']:.2f} ms a step, "
            f"plain {o['plain_ms']:.2f}: {o['ratio']:.3f}x ({o['coverage']:.0%} interval {o['low']:.3f} to {o['high']:.3f}x)"
        )
    held = median_interval(pooled)
    if held is not None:
        print(
            f"  all {held.n} pairs: median {held.median:.3f}x, {held.coverage:.0%} interval {held.low:.3f}x to "
            f"{held.high:.3f}x: " + ("within" if held.high <= 1.05 else "not shown within") + " the 5% goal"
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        parser = argparse.ArgumentParser()
        parser.add_argument("--child")
        parser.add_argument("--warmup", type=int)
        parser.add_argument("--steps", type=int)
        parser.add_argument("script")
        known, rest = parser.parse_known_args(sys.argv[1:])
        child(known.child, known.script, rest, known.warmup, known.steps)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--script", help="a training script (default: the two shipped examples)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=10, help="plain/watched pairs of blocks in each run")
    parser.add_argument("--runs", type=int, default=3, help="runs of the overhead window")
    parser.add_argument("script_args", nargs="*", help="after --: the script's own arguments")
    args = parser.parse_args()
    scripts = [(Path(args.script).resolve(), args.script_args)] if args.script else default_scripts()
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} cores, load {load:.2f}; {args.warmup} warm-up steps, {args.steps} timed")
    for script, script_args in scripts:
        print(f"\n{script.name} {' '.join(script_args)}")
        if script.name not in NO_PROFILE:
            compare_split(script, script_args, args.warmup, args.steps)
        compare_overhead(script, script_args, args.warmup, args.steps, args.pairs, args.runs)


if __name__ == "__main__":
    main()
