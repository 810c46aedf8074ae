"""The process a script runs in for `gpututor inspect`:
`python -m tutor.inspect.watched_main OUT.json SCRIPT [ARGS...]`, started in the script's own
directory.

As `python SCRIPT ARGS` would run it: sys.argv, sys.path[0] the script's folder, `__name__ ==
"__main__"`. Before it runs: the sandbox's limits (tutor/exercises/child.py: host memory, the
GPU cap; the process ends itself when the tutor is gone) and the watch (hooks.py). How it ended
is written to OUT.json: stopped after the window on purpose, finished, exited, crashed (the
traceback as the exercises show it) or ran out of time (a watchdog writes what was seen so far,
and which phase the script was in, before the limit). The machine's roof for the dtype the model
ran in is read (measured once and cached: tutor/measurement/peak.py) after the script stopped.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from tutor.exercises.child import (
    learner_traceback,
    limit_gpu_memory,
    limit_memory,
    start_torch,
    take_turn,
    watch_parent,
)
from tutor.inspect.hooks import Stopped, Watch

ENV_STEPS = "GPUTUTOR_INSPECT_STEPS"  # "warmup,steps,split,overhead_pairs"
ENV_DEADLINE = "GPUTUTOR_INSPECT_DEADLINE"  # time.time() by which OUT.json must be written
ENV_ROOF = "GPUTUTOR_INSPECT_ROOF"  # "0": do not measure a roof that is not cached


def _write(path: str, data: dict[str, Any]) -> None:
    tmp = path + ".tmp"
    Path(tmp).write_text(json.dumps(data, default=str), encoding="utf-8")
    os.replace(tmp, path)


def _run_dtype(forward: dict[str, Any] | None) -> str:
    """The dtype the model's matmuls ran in: autocast's, else the weights'; float32 on a GPU
    with TF32 allowed is tfloat32."""
    if not forward:
        return "float32"
    if forward.get("autocast") and forward.get("autocast_dtype"):
        return str(forward["autocast_dtype"])
    dtype = str(forward.get("weights_dtype") or "float32")
    if dtype == "float32" and forward.get("device_type") == "cuda" and forward.get("tf32"):
        return "tfloat32"
    return dtype


def _roof(forward: dict[str, Any] | None, measure: bool) -> dict[str, Any] | None:
    """This machine's measured matmul peak for the device and dtype the model ran in (cached, or
    measured now where allowed), and the spec sheet's where known."""
    if not forward:
        return None
    try:
        from tutor.experiments import devices
        from tutor.measurement import peak, vendor_peaks

        kind = str(forward.get("weights_device") or forward.get("device_type") or "cpu")
        dev = devices.resolve(kind if kind != "meta" else "cpu")
        dtype = _run_dtype(forward)
        found = peak.cached(dev, dtype)
        if found is None and measure:
            found = peak.measure(dev, dtype)
        sheet = vendor_peaks.for_device(dev, dtype)
        return {
            "device": dev.describe(),
            "dtype": dtype,
            "tflops": found.tflops if found else None,
            "typical_tflops": found.typical_tflops if found else None,
            "how": found.how if found else None,
            "measured_on": found.measured_on if found else None,
            "others_busy_cores": found.others_busy_cores if found else None,
            "sheet_tflops": sheet[0] if sheet else None,
            "sheet_label": sheet[1] if sheet else None,
        }
    except Exception as exc:  # noqa: BLE001 - no roof: the report says MFU could not be given
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _without_own_frame(text: str) -> str:
    """The traceback less this file's frame (the runpy call) and its source line."""
    lines, skip = [], False
    for line in text.splitlines(keepends=True):
        if skip:
            skip = False
            if not line.lstrip().startswith(("File ", ">>")):
                continue
        if __file__ in line or "watched_main.py" in line:
            skip = True
            continue
        lines.append(line)
    return "".join(lines)


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit("usage: python -m tutor.inspect.watched_main OUT.json SCRIPT [ARGS...]")
    out_file, script, args = os.path.abspath(argv[1]), os.path.abspath(argv[2]), argv[3:]
    owner = os.environ.get("GPUTUTOR_SANDBOX_OWNER", "")
    watch_parent(int(owner) if owner.isdigit() else None, False)
    mb = os.environ.get("GPUTUTOR_SANDBOX_MEMORY_MB")
    dev = None
    if mb and mb.isdigit():
        dev = start_torch(None)
        limit_gpu_memory(dev)
        limit_memory(int(mb))
    turn = take_turn(dev, "inspect")  # a class's shared machine: the script's timed window in its turn
    shared = turn.shared
    warmup, steps, split, pairs = (int(x) for x in (os.environ.get(ENV_STEPS) or "3,20,5,0").split(","))
    watcher: Watch | None = None
    try:
        import torch  # noqa: F401 - the watch needs it; a script without it still runs

        watcher = Watch(script, warmup, steps, split, pairs)
        watcher.install()
    except ImportError:
        watcher = None
    lock = threading.Lock()
    started = time.perf_counter()

    def report(outcome: str, **extra: Any) -> None:
        with lock:
            data: dict[str, Any] = watcher.result() if watcher is not None else {"steps_done": 0}
            data.update(outcome=outcome, seconds=time.perf_counter() - started, torch_imported="torch" in sys.modules)
            data.update(timing_shared=shared)
            data.update(extra)
            _write(out_file, data)

    deadline = float(os.environ.get(ENV_DEADLINE) or 0)
    if deadline:
        deadline += turn.waited_s  # time in the class queue is not the script's
        if watcher is not None:
            watcher.deadline = deadline  # the overhead window is cut to what fits before it

        def watchdog() -> None:
            time.sleep(max(0.0, deadline - time.time()))
            report("timed_out")
            turn.release()  # into the class queue's history: os._exit runs no atexit handler
            os._exit(3)

        threading.Thread(target=watchdog, name="gpututor-inspect-watchdog", daemon=True).start()

    # torch.compile warns of global module hooks: the watch's own, not the script's to read about
    warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(script)  # as `python SCRIPT` would
    outcome, code = "finished", 0
    extra: dict[str, Any] = {}
    try:
        runpy.run_path(script, run_name="__main__")
    except Stopped:
        outcome = "stopped"
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if exc.code is not None and not isinstance(exc.code, int):  # sys.exit("message"): python prints it
            print(exc.code, file=sys.stderr, flush=True)
        outcome, extra = "exited", {"exit_code": code}
    except BaseException as exc:  # noqa: BLE001 - every error the script raises is reported
        text, line = learner_traceback(exc, script)
        text = _without_own_frame(text)
        sys.stderr.write(text)
        sys.stderr.flush()
        outcome, code = "crashed", 1
        extra = {"error_type": type(exc).__name__, "error": str(exc)[:1000], "error_line": line, "traceback": text}
    if watcher is not None:
        watcher.close()
        watcher.uninstall()
        if watcher.timed:
            extra["roof"] = _roof(watcher.forward_info, os.environ.get(ENV_ROOF) != "0")
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    report(outcome, **extra)
    turn.release()  # into the class queue's history: os._exit runs no atexit handler
    os._exit(0)  # not sys.exit: DataLoader workers and the script's atexit handlers could hang


if __name__ == "__main__":
    main(sys.argv)
