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

Policy: the cores this process may run on (os.sched_getaffinity: a container's or taskset's
limit, not the machine's count), less one for everything else when there are few; at least one.
GPUTUTOR_THREADS overrides it. A learner's own torch.set_num_threads still wins in their code
(it runs after this), so a lesson that teaches threads can set them.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

FEW_CORES = 4  # at or below this, one core is left for the UI and whatever else runs


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def training_threads(cores: int | None = None) -> int:
    """Intra-op threads for a process that trains."""
    override = os.environ.get("GPUTUTOR_THREADS", "").strip()
    if override.isdigit() and int(override) > 0:
        return int(override)
    cores = usable_cores() if cores is None else cores
    return max(1, cores - 1) if cores <= FEW_CORES else cores


def set_env(env: MutableMapping[str, str]) -> None:
    """Set the thread count in the environment of a process that may import torch (OpenMP and MKL
    read it then), unless the user's environment already says."""
    n = str(training_threads())
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(key, n)


def apply() -> int:
    """Set this process's intra-op pool (torch imported) to the policy; returns the count."""
    import torch

    n = training_threads()
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    return n
