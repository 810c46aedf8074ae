"""Start a learner's script for `gpututor inspect` as `python SCRIPT ARGS` would, watched, under
the sandbox's limits; no torch here (the CLI and a TUI screen call it).

The process is the sandbox's (tutor/exercises/sandbox.py: the environment with its memory limit
and the GPU cap, its own process group streamed and killed at the time limit), started in the
script's directory as `python -m tutor.inspect.watched_main OUT.json SCRIPT ARGS`. What the
script wrote is kept (head and tail) and the files it made or changed in its folder are listed.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.exercises import sandbox
from tutor.inspect.watched_main import ENV_DEADLINE, ENV_ROOF, ENV_STEPS
from tutor.measurement.slots import CHOICE_S, CLASS_DIR_ENV

WATCHDOG_MARGIN_S = 3.0  # the child writes what it saw this long before the limit
ROOF_ALLOWANCE_S = 20.0  # after the script stops: measuring the roof once (cached after)
MAX_FILES = 2000  # entries of the script's folder compared before and after


@dataclass
class Ran:
    """What one watched run of a script gave: the child's record and how the process ended."""

    watched: dict[str, Any]
    exit_code: int | None
    timed_out: bool
    output: str
    files_written: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Files in the script's folder (and one level down): name -> (size, mtime_ns)."""
    found: dict[str, tuple[int, int]] = {}
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return found
    for entry in entries:
        if len(found) >= MAX_FILES or entry.name == "__pycache__":
            continue
        try:
            if entry.is_dir():
                for sub in sorted(entry.iterdir())[:200]:
                    if sub.is_file():
                        st = sub.stat()
                        found[f"{entry.name}/{sub.name}"] = (st.st_size, st.st_mtime_ns)
            elif entry.is_file():
                st = entry.stat()
                found[entry.name] = (st.st_size, st.st_mtime_ns)
        except OSError:
            continue
    return found


def run_script(
    script: Path,
    args: list[str],
    *,
    warmup: int = 3,
    steps: int = 20,
    split_steps: int = 5,
    timeout: float = 120.0,
    memory_mb: int = 4096,
    overhead_pairs: int = 0,
    measure_roof: bool = True,
    hold_slot: bool = True,
    on_output: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Ran:
    """Run `script` watched; with `overhead_pairs`, then that many pairs of blocks of steps plain and
    watched in turns (hooks.py: watching's overhead, measured in this run)."""
    script = script.resolve()
    folder = script.parent
    before = _listing(folder)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpututor-inspect-") as tmp:
        out_file = Path(tmp, "watched.json")
        env = sandbox._child_env(folder, memory_mb, None)
        env[ENV_STEPS] = f"{warmup},{steps},{split_steps},{overhead_pairs}"
        env[ENV_DEADLINE] = str(time.time() + max(1.0, timeout - WATCHDOG_MARGIN_S))
        env[ENV_ROOF] = "1" if measure_roof else "0"
        env.pop("GPUTUTOR_REPORT", None)  # the exercises' report file: not this run's
        if not hold_slot:  # its caller holds the device's slot already (an experiment's turn): no second place in line
            env.pop(CLASS_DIR_ENV, None)
        elif env.get(CLASS_DIR_ENV):  # a minute in the class queue at most, not taken from the script's time
            timeout += CHOICE_S
        ran = sandbox._run(
            [sys.executable, "-m", "tutor.inspect.watched_main", str(out_file), str(script), *args],
            folder,
            env,
            deadline=start + timeout + (ROOF_ALLOWANCE_S if measure_roof else 0.0),
            on_output=on_output,
            cancelled=cancelled,
        )
        try:
            watched = json.loads(out_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            watched = {}
    after = _listing(folder)
    written = [name for name, stat in after.items() if before.get(name) != stat]
    return Ran(
        watched=watched if isinstance(watched, dict) else {},
        exit_code=ran.returncode,
        timed_out=ran.timed_out or watched.get("outcome") == "timed_out",
        output=ran.output,
        files_written=written,
        seconds=time.monotonic() - start,
    )


def example_args(script: Path) -> list[str]:
    """The arguments a shipped example needs from the tutor: for mnist_cnn.py, where the tutor's own
    MNIST is (and leave to download it there, where the tutor itself would download)."""
    if script.name != "mnist_cnn.py":
        return []
    from tutor import paths

    root, may_download = paths.data_dir()
    return ["--data-dir", str(root), *(["--download"] if may_download else [])]


def uses_torch(script: Path) -> bool:
    """Whether the script's own text imports torch (or a package that names it)."""
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return "torch" in text
