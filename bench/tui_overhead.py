"""Overhead of training inside the TUI: the `train` experiment through the runner with the
app up (headless Textual driver) vs the same experiment iterated plainly, in one process.

    python bench/tui_overhead.py [--epochs 2] [--train-samples 60000]

Prints seconds per epoch for each and the ratio (goal: <= 1.03).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

POLL_S = 0.05  # the lag probe: how late a 50 ms sleep wakes up while training runs


def plain(params: dict) -> float:
    from tutor import experiments
    from tutor.experiments.events import Finished

    for event in experiments.start("train", params, "cpu"):
        if isinstance(event, Finished):
            return float(event.metrics["seconds_per_epoch"])
    raise RuntimeError("no result")


async def in_tui(params: dict) -> tuple[float, float, float]:
    """(seconds per epoch, p99 event-loop lag in ms, share of one core the UI process used while
    the run went on) with the lesson screen showing the run."""
    from tutor.course.lesson import RunStep
    from tutor.ui.app import TutorApp
    from tutor.ui.widgets.run_panel import RunPanel

    app = TutorApp(home=Path(os.environ["GPUTUTOR_HOME"]), device="cpu")
    lags: list[float] = []
    async with app.run_test(size=(100, 40)) as pilot:
        app.open_lesson("gpu-training")
        await pilot.pause()
        screen = app.screen
        index = next(i for i, s in enumerate(screen.lesson.steps) if isinstance(s, RunStep) and s.experiment == "train")
        app.progress.lock_prediction("gpu-training", screen.lesson.steps[index - 1].id, "bench", None)
        screen.show_step(index)
        await pilot.pause()
        panel = screen.view.query_one(RunPanel)
        panel.params = params
        panel.start("cpu")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        expected = time.perf_counter()
        while panel.state == "running":
            await asyncio.sleep(POLL_S)
            now = time.perf_counter()
            lags.append(max(0.0, now - expected - POLL_S))
            expected = now
        assert panel.state == "finished", panel.state
        ui_share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
        seconds = float(panel.metrics["seconds_per_epoch"])
    lags.sort()
    p99 = lags[int(0.99 * (len(lags) - 1))] * 1000 if lags else float("nan")
    return seconds, p99, ui_share


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--train-samples", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    home = tempfile.TemporaryDirectory(prefix="gpututor-bench-")  # removed at exit
    os.environ.setdefault("GPUTUTOR_HOME", home.name)
    params = {"epochs": args.epochs}
    if args.train_samples:
        params["train_samples"] = args.train_samples
    plain(dict(params, epochs=1))  # load data and warm up once
    base, tui, lag, ui = [], [], [], []
    for _ in range(args.repeats):
        base.append(plain(params))
        s, p99, share = asyncio.run(in_tui(params))
        tui.append(s)
        lag.append(p99)
        ui.append(share)
    b, t = statistics.median(base), statistics.median(tui)
    print(f"plain loop (baseline)    {b:6.3f} s/epoch")
    print(f"through the TUI          {t:6.3f} s/epoch   ratio {t / b:5.2f}   goal <= 1.03")
    print(f"event-loop lag p99 while training: {statistics.median(lag):.1f} ms   goal <= 50 ms")
    print(
        f"UI process CPU while training: {statistics.median(ui):.0%} of one core "
        f"(of {os.cpu_count()} cores; PyTorch's threads in the engine share them)"
    )
    print("ratios per repeat: " + ", ".join(f"{t_ / b_:.2f}" for b_, t_ in zip(base, tui)))


if __name__ == "__main__":
    main()
