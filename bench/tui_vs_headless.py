"""Same numbers in the TUI and headless (issue 24): every run step of the built-in lessons, with
the lesson's own parameters, run both ways a learner or an instructor meets it, taking turns.

- TUI: the App in a real pseudo-terminal (100x40, drawn as the learner sees it and read by this
  process as a terminal would), the step shown, `r` (the step's run action), the engine process,
  the live panel; the metrics are the panel's.
- headless: `experiments.start` in this process, as `gpututor run` and `lesson test` run it.

Each step's headline metric (what its predict step compares; seconds per epoch too for `train`)
is printed both ways, median and range over the repeats, and TUI/headless against the goal of
within 10%. The baseline, in this process before each round: one plain PyTorch epoch (the
course model, Adam, batch 64, 60,000 resident MNIST images), so the figures can be read against
how fast the machine was meanwhile; each run's headless time is given in plain epochs. Rounds
alternate which way goes first (A, B then B, A).

    GPUTUTOR_DATA_DIR=../shared/data python bench/tui_vs_headless.py [--repeats 3] [--lesson ID ...]
                                                                      [--step ID ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import pty
import re
import signal
import statistics
import struct
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL = 0.10  # TUI/headless within 10%
ROWS, COLUMNS = 40, 100
RUN_TIMEOUT_S = 600.0
EXTRA = {"train": ["seconds_per_epoch"]}  # timings worth comparing beside what a prediction compares
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07")


def run_steps(lessons: list[str], steps: list[str]) -> list[dict[str, Any]]:
    """The built-in lessons' run steps, one per (experiment, params), with the metrics to compare."""
    from tutor import experiments
    from tutor.course.catalog import discover
    from tutor.course.lesson import PredictStep, RunStep

    found, seen = [], set()
    for item in discover([]).lessons:
        lesson = item.lesson
        if lessons and lesson.id not in lessons:
            continue
        predict = None
        for step in lesson.steps:
            if isinstance(step, PredictStep):
                predict = step
                continue
            if not isinstance(step, RunStep):
                continue
            compare, predict = (predict.compare if predict else None), None
            key = (step.experiment, json.dumps(step.params, sort_keys=True, default=str))
            if key in seen or (steps and step.id not in steps):
                continue
            seen.add(key)
            metrics = [m for m in dict.fromkeys([compare, *EXTRA.get(step.experiment, [])]) if m]
            found.append(
                {
                    "lesson": lesson.id,
                    "step": step.id,
                    "experiment": step.experiment,
                    "params": dict(step.params),
                    "metrics": metrics or [next(iter(experiments.get(step.experiment).metrics))],
                }
            )
    return found


def headless(step: dict[str, Any], device: str | None) -> dict[str, Any]:
    from tutor import experiments
    from tutor.experiments.events import Finished

    start = time.perf_counter()
    metrics: dict[str, Any] = {}
    try:
        for event in experiments.start(step["experiment"], dict(step["params"]), device=device):
            if isinstance(event, Finished):
                metrics = dict(event.metrics)
        status = "finished" if metrics else "ended without finishing"
    except Exception as e:  # noqa: BLE001 - a failed run is reported in the table
        status = f"{type(e).__name__}: {str(e)[:80]}"
    return {"status": status, "metrics": metrics, "seconds": time.perf_counter() - start}


class Tui:
    """The App in a pseudo-terminal, asked over a pipe to run one step at a time."""

    def __init__(self, device: str | None, home: str) -> None:
        req_r, self._req_w = os.pipe()
        self._res_r, res_w = os.pipe()
        for fd in (req_r, res_w):
            os.set_inheritable(fd, True)
        env = {
            "GPUTUTOR_HOME": home,
            "TERM": "xterm-256color",
            "BENCH_REQ_FD": str(req_r),
            "BENCH_RES_FD": str(res_w),
            "BENCH_DEVICE": device or "",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
        }
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the tutor on a terminal of its own
            os.environ.update(env)
            os.execv(sys.executable, [sys.executable, str(Path(__file__).resolve()), "--tui-child"])
        os.close(req_r)
        os.close(res_w)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.req = os.fdopen(self._req_w, "w", buffering=1)
        self.res = os.fdopen(self._res_r, "r")
        self.tail = ""
        threading.Thread(target=self._terminal, daemon=True).start()

    def _terminal(self) -> None:
        """Read what the app draws, as a terminal would (without painting it)."""
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.tail = (self.tail + data.decode("utf-8", "replace"))[-20000:]

    def run(self, step: dict[str, Any]) -> dict[str, Any]:
        self.req.write(json.dumps({"lesson": step["lesson"], "step": step["step"]}) + "\n")
        line = self.res.readline()
        if not line:
            screen = " ".join(ANSI.sub(" ", self.tail).split())[-1500:]
            raise RuntimeError(f"the TUI ended; its terminal showed: {screen}")
        return json.loads(line)

    def close(self) -> None:
        try:
            self.req.close()
        except OSError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if os.waitpid(self.pid, os.WNOHANG)[0]:
                break
            time.sleep(0.1)
        else:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        os.close(self.fd)


def tui_child() -> None:
    """In the pseudo-terminal: the App as `gpututor` starts it, serving run requests."""
    from tutor import paths, threads

    paths.route_torch_caches(os.environ)  # as `gpututor` does before anything imports torch
    threads.set_env(os.environ)
    from tutor.course.lesson import PredictStep
    from tutor.ui.app import TutorApp
    from tutor.ui.screens.lesson import LessonScreen
    from tutor.ui.widgets.run_panel import RunPanel

    requests = os.fdopen(int(os.environ["BENCH_REQ_FD"]), "r")
    results = os.fdopen(int(os.environ["BENCH_RES_FD"]), "w", buffering=1)

    def open_step(lesson_id: str, step_id: str) -> None:
        screen = app.screen
        if isinstance(screen, LessonScreen) and screen.lesson.id == lesson_id:
            index = next(i for i, s in enumerate(screen.lesson.steps) if s.id == step_id)
            before = screen.lesson.steps[index - 1] if index else None
            if isinstance(before, PredictStep):  # the learner locked a prediction before the run
                app.progress.lock_prediction(lesson_id, before.id, "bench", None)
            screen.show_step(index)
            return
        if isinstance(screen, LessonScreen):
            app.pop_screen()
        app.open_lesson(lesson_id)

    def state() -> tuple[str, dict[str, Any]]:
        panel = app.screen.view.query_one(RunPanel)
        return panel.state, dict(panel.metrics)

    def run(ask: dict[str, Any]) -> dict[str, Any]:
        for _ in range(2):  # the lesson's screen first (when another is open), then the step on it
            app.call_from_thread(open_step, ask["lesson"], ask["step"])
            time.sleep(0.5)  # drawn, as the learner sees it before pressing r
        cpu, start = time.process_time(), time.perf_counter()
        app.call_from_thread(app.screen.action_run)
        while True:
            time.sleep(0.1)
            status, metrics = app.call_from_thread(state)
            if status != "running":
                break
        wall = time.perf_counter() - start
        return {
            "status": status,
            "metrics": metrics,
            "seconds": wall,
            "ui_cpu": (time.process_time() - cpu) / wall if wall > 0 else 0.0,
        }

    def serve() -> None:
        while app.device is None:  # the engine has started and detected the device
            time.sleep(0.1)
        for line in requests:
            try:
                answer = run(json.loads(line))
            except Exception as e:  # noqa: BLE001 - said to the bench, which stops
                answer = {"status": f"bench child: {type(e).__name__}: {e}", "metrics": {}, "seconds": 0.0}
            results.write(json.dumps(answer, default=str) + "\n")
        app.call_from_thread(app.exit)

    class App(TutorApp):
        CSS_PATH = str(ROOT / "tutor" / "ui" / "app.tcss")  # relative paths resolve from this file

        def on_mount(self) -> None:
            super().on_mount()
            threading.Thread(target=serve, daemon=True).start()

    app = App(device=os.environ.get("BENCH_DEVICE") or None)
    app.run()


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _fmt(x: float) -> str:
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:.3g}" if abs(x) < 1e4 else f"{x:,.0f}"


def _cell(values: list[Any]) -> str:
    numbers = [_number(v) for v in values]
    if values and all(n is not None for n in numbers):
        lo, mid, hi = min(numbers), statistics.median(numbers), max(numbers)
        return _fmt(mid) + (f" ({_fmt(lo)}-{_fmt(hi)})" if lo != hi else "")
    shown = sorted({"n/a" if v is None else str(v) for v in values})
    return (shown[0] if len(shown) == 1 else "/".join(shown))[:22]


def _verdict(a: list[Any], b: list[Any]) -> tuple[str, str]:
    """(TUI/headless, verdict): ok within the goal; noise when outside it but the two ranges
    overlap (the difference is within this machine's run-to-run variation); OFF when they do not."""
    na, nb = [_number(v) for v in a], [_number(v) for v in b]
    if a and b and all(n is not None for n in na + nb):
        ma, mb = statistics.median(na), statistics.median(nb)
        if ma == mb:
            return "1.00", "ok"
        if ma == 0:
            return "-", "OFF"
        ratio = mb / ma
        if abs(ratio - 1) <= GOAL:
            return f"{ratio:.2f}", "ok"
        return f"{ratio:.2f}", "noise" if max(na) >= min(nb) and max(nb) >= min(na) else "OFF"
    return ("same", "ok") if [str(v) for v in a] == [str(v) for v in b] else ("-", "OFF")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lesson", action="append", default=[], help="only this lesson (repeatable)")
    parser.add_argument("--step", action="append", default=[], help="only this run step id (repeatable)")
    parser.add_argument("--device", default=None, help="cpu, cuda, ... (default: the best here, both ways)")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--tui-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tui_child:
        tui_child()
        return 0

    from tutor import paths, threads

    paths.route_torch_caches(os.environ)  # this process is the headless side: set up as `gpututor run` is
    threads.set_env(os.environ)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from learner_wait import plain_epoch_seconds

    home = tempfile.TemporaryDirectory(prefix="gpututor-bench-")
    os.environ["GPUTUTOR_HOME"] = home.name
    steps = run_steps(args.lesson, args.step)
    if not steps:
        parser.error("no run step matches")
    device = args.device
    runs: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {
        (s["lesson"], s["step"]): {"tui": [], "headless": []} for s in steps
    }
    plain: list[float] = []
    tui = Tui(device, home.name)
    try:
        for r in range(args.repeats):
            plain.append(plain_epoch_seconds(device or "cpu"))
            print(f"round {r + 1}/{args.repeats}: plain epoch {plain[-1]:.2f} s", file=sys.stderr, flush=True)
            for i, step in enumerate(steps):
                ways = ("tui", "headless") if (r + i) % 2 == 0 else ("headless", "tui")
                for way in ways:
                    result = tui.run(step) if way == "tui" else headless(step, device)
                    runs[(step["lesson"], step["step"])][way].append(result)
                    print(
                        f"  {step['lesson']}/{step['step']} {way}: {result['status']} "
                        f"{result['seconds']:.1f} s "
                        + " ".join(f"{m}={result['metrics'].get(m)!r}" for m in step["metrics"]),
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        tui.close()

    base = statistics.median(plain)
    print(
        f"machine: {os.cpu_count()} CPU(s), training threads {threads.training_threads()}, device {device or 'best'}; "
        f"plain PyTorch epoch before each round: {', '.join(f'{p:.2f}' for p in plain)} s"
    )
    head = (
        f"{'lesson/step':30} {'metric':22} {'headless':>22} {'TUI':>22} {'TUI/headless':>12}  "
        f"{'goal':5}  run (plain epochs)"
    )
    print(head)
    print("-" * len(head))
    verdicts: list[str] = []
    ui_cpu_s = ui_wall_s = 0.0
    for step in steps:
        done = runs[(step["lesson"], step["step"])]
        ok_h = [x for x in done["headless"] if x["status"] == "finished"]
        ok_t = [x for x in done["tui"] if x["status"] == "finished"]
        ui_cpu_s += sum(x.get("ui_cpu", 0.0) * x["seconds"] for x in ok_t)
        ui_wall_s += sum(x["seconds"] for x in ok_t)
        name = f"{step['lesson']}/{step['step']}"
        if len(ok_h) < len(done["headless"]) or len(ok_t) < len(done["tui"]):
            failed = next(x for x in done["headless"] + done["tui"] if x["status"] != "finished")
            print(f"{name:30} failed: {failed['status']}")
            verdicts.append("OFF")
            continue
        seconds = statistics.median(x["seconds"] for x in ok_h) / base
        for metric in step["metrics"]:
            a = [x["metrics"].get(metric) for x in ok_h]
            b = [x["metrics"].get(metric) for x in ok_t]
            ratio, verdict = _verdict(a, b)
            verdicts.append(verdict)
            print(f"{name:30} {metric[:22]:22} {_cell(a):>22} {_cell(b):>22} {ratio:>12}  {verdict:5}  {seconds:.1f}")
            name = ""
    if ui_wall_s:
        print(f"UI process CPU while runs streamed: {ui_cpu_s / ui_wall_s:.0%} of one core (all TUI runs together)")
    print(
        f"{len(verdicts)} figures: {verdicts.count('ok')} within {GOAL:.0%}, {verdicts.count('noise')} outside it "
        f"within run-to-run variation (the ranges overlap), {verdicts.count('OFF')} off"
    )
    off = verdicts.count("OFF")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"plain_epoch_s": plain, "steps": steps, "runs": {f"{k[0]}/{k[1]}": v for k, v in runs.items()}},
                indent=1,
                default=str,
            )
        )
    return 0 if off == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
