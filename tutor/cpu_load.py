"""What the cores are doing: every core's busy and steal seconds (/proc/stat), this process's own
CPU seconds, and from two readings the cores other programs kept busy in between.

Read by the thread policy (tutor/threads.py: how many threads a run may use) and by the noise
reading (tutor/measurement/noise.py: what else ran while a run measured). Standard library only;
where /proc/stat is missing (macOS, Windows) the busy time is None and nothing is guessed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuReading:
    wall: float  # time.monotonic()
    busy_s: float | None  # every core's busy seconds since boot, None where unreadable
    steal_s: float | None  # seconds a VM's host gave to other machines
    own_s: float  # this process's and its waited-for children's CPU seconds


def proc_stat() -> tuple[float, float] | None:
    """(busy, steal) seconds summed over the cores, from /proc/stat's first line."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        ticks = [int(v) for v in fields[1:]]
    except (OSError, ValueError):
        return None
    if len(ticks) < 8:
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    # guest time is already counted in user and nice
    return (user + nice + system + irq + softirq) / hz, steal / hz


def own_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def read() -> CpuReading:
    stat = proc_stat()
    return CpuReading(time.monotonic(), stat[0] if stat else None, stat[1] if stat else None, own_cpu())


def others_busy_cores(before: CpuReading, after: CpuReading) -> float | None:
    """How many cores' worth of time other programs took between the two readings (0.0 to all)."""
    wall = after.wall - before.wall
    if before.busy_s is None or after.busy_s is None or wall <= 0:
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return max(0.0, others / wall)
