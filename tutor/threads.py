"""How many threads PyTorch uses in the processes that train: decided here, once.

The processes that train are the engine (the TUI's runs), an exercise's sandboxed program and
`gpututor run` (with `lesson test`). PyTorch's CPU operations split their work across an
intra-op pool, one thread per core by default, and every operation ends at a barrier where the
threads wait for each other. On a small machine that is rarely idle (a browser, an IDE, another
learner's job, the tutor's own UI), a core taken by another process deschedules one of those
threads and every operation waits for it. Measured by bench/busy_core.py on a 2-core VM with one
core kept busy: with 2 threads a plain epoch took 3.1x its idle time, `gpututor run train` 3.7x,
and exercise 4 13x (an epoch of 171 s against 3.8 s idle, past its time limit); with 1 thread
every long step took 0.9-1.03x its idle time, for 15-30% more time when the machine is idle.

Policy, decided when a run starts and kept for the whole run (a timing compares like with like):
every core this process may run on (os.sched_getaffinity: a container's or taskset's limit, not
the machine's count) while nothing else is using them, and one fewer for each core other programs
keep busy, read from /proc/stat over a short look (`decide`); at least one. An idle machine then
trains as fast as a plain PyTorch loop, and a busy one keeps the step times of its idle runs.
Where the load cannot be read (no /proc/stat), or before any run (a process starting up), the
cautious count: one core left for everything else when there are few. GPUTUTOR_THREADS overrides
it all. A learner's own torch.set_num_threads still wins in their code (it runs after this), so a
lesson that teaches threads can set them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import MutableMapping

from tutor import cpu_load

FEW_CORES = 4  # at or below this, the cautious count leaves one core for the UI and whatever else runs
LOOK_S = 0.1  # how long `decide` watches the cores before a run
BUSY_CORE = 0.5  # other programs keeping this much of a core busy take one core from the run
ENV_KEYS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")  # read by OpenMP and MKL when torch is imported
OURS = "GPUTUTOR_THREADS_SET"  # which of ENV_KEYS the tutor set (so a later decision may change them)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def _override() -> int | None:
    value = os.environ.get("GPUTUTOR_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def training_threads(cores: int | None = None, others_busy: float | None = None) -> int:
    """Intra-op threads for a process that trains, given how many cores' worth of time other
    programs are taking (`others_busy`; None: not known, the cautious count)."""
    override = _override()
    if override is not None:
        return override
    cores = usable_cores() if cores is None else cores
    if others_busy is None:
        return max(1, cores - 1) if cores <= FEW_CORES else cores
    taken = int(others_busy + (1 - BUSY_CORE))  # rounds from half a core up: 0.5 -> 1, 1.4 -> 1, 1.5 -> 2
    return max(1, cores - taken)


def others_busy(look_s: float = LOOK_S) -> float | None:
    """Cores' worth of time other programs take now, watched for `look_s` (None: cannot be read)."""
    before = cpu_load.read()
    if before.busy_s is None:
        return None
    time.sleep(look_s)
    return cpu_load.others_busy_cores(before, cpu_load.read())


def _users_own() -> int | None:
    """OMP_NUM_THREADS as the user set it (not the tutor), which the policy leaves alone."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    mine = "OMP_NUM_THREADS" in os.environ.get(OURS, "").split(",")
    return int(value) if not mine and value.isdigit() and int(value) > 0 else None


def decide() -> int:
    """The thread count for a run about to start: the cores, less those other programs keep busy."""
    fixed = _override() or _users_own()
    if fixed is not None:
        return fixed
    return training_threads(others_busy=others_busy())


def set_env(env: MutableMapping[str, str], threads: int | None = None) -> None:
    """Set the thread count (`threads`, else the cautious count) in the environment of a process
    that may import torch (OpenMP and MKL read it then). A variable the user set stays theirs; one
    the tutor set before is set again, so each run's decision reaches what it starts."""
    n = str(training_threads() if threads is None else threads)
    ours = set(filter(None, env.get(OURS, "").split(",")))
    for key in ENV_KEYS:
        if key not in env or key in ours:
            env[key] = n
            ours.add(key)
    if ours:
        env[OURS] = ",".join(sorted(ours))


def apply(threads: int | None = None) -> int:
    """Set this process's intra-op pool to `threads` (else a fresh `decide()`), and the environment
    what it starts inherits; returns the count. torch must be imported already."""
    torch = sys.modules["torch"]
    n = decide() if threads is None else threads
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    set_env(os.environ, n)
    return n
