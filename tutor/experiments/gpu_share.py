"""One GPU shared by a class: each run's cap on device memory, and what is free to take.

Twenty learners on one server must not push each other out of memory. The cap, in MiB, is
$GPUTUTOR_GPU_MEMORY_MB (settings.toml's `gpu_memory_mb` sets it), else $GPUTUTOR_MEMORY_MB
(which also caps each run's host memory, see engine.py). During a run it is applied with
PyTorch's own per-process fraction (CUDA: of the card's total; MPS: of its recommended working
set) and restored afterwards; past it the allocator raises its out-of-memory error, which the
run reports in one sentence. Limits that experiments pick for themselves (batch-sweep's budget,
the pitfall runs' limits) come from `available()`: the memory free on the device now (other
processes' memory is not ours to take), within the cap.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

GPU_MEMORY_ENV = "GPUTUTOR_GPU_MEMORY_MB"
HOST_MEMORY_ENV = "GPUTUTOR_MEMORY_MB"
MIB = 1 << 20
_mps_fraction: float | None = None  # the MPS fraction set_mps_fraction() last applied


def mib_from(name: str) -> int | None:
    """A MiB setting from the environment; None when unset, 0, or not a plain number."""
    value = os.environ.get(name, "").strip()
    if not (value.isascii() and value.isdigit() and len(value) <= 9):  # "²", or 5000 digits
        return None
    return int(value) or None


def cap_mib() -> int | None:
    """MiB of device memory one run may use (None: no cap but the card's own)."""
    return mib_from(GPU_MEMORY_ENV) or mib_from(HOST_MEMORY_ENV)


def cap_source() -> str:
    """Which setting the cap comes from, as the learner would change it."""
    return GPU_MEMORY_ENV if mib_from(GPU_MEMORY_ENV) else HOST_MEMORY_ENV


def free_and_total(kind: str, index: int | None = None) -> tuple[int, int] | None:
    """(free, total) bytes of the device as its driver sees them, other processes included;
    None off CUDA and MPS. MPS: total is the recommended working set, free what this process's
    driver allocations leave of it (other processes' use is not visible there)."""
    import torch

    if kind == "cuda":
        free, total = torch.cuda.mem_get_info(index or 0)
        return int(free), int(total)
    if kind == "mps":
        total = int(torch.mps.recommended_max_memory())
        return max(0, total - int(torch.mps.driver_allocated_memory())), total
    return None


def available(kind: str, index: int | None = None) -> int | None:
    """Bytes this run may still take on the device ("cuda" and its index, or "mps"): free memory,
    within the cap less what this process already holds; None off CUDA and MPS."""
    import torch

    reading = free_and_total(kind, index)
    if reading is None:
        return None
    free, _ = reading
    cap = cap_mib()
    if cap is None:
        return free
    held = torch.cuda.memory_reserved(index or 0) if kind == "cuda" else int(torch.mps.driver_allocated_memory())
    return max(0, min(free, cap * MIB - held))


def current_mps_fraction() -> float:
    """The MPS memory fraction in force. torch.mps has no getter, so it is the one this module
    last applied, else the process's start-up one (PYTORCH_MPS_HIGH_WATERMARK_RATIO, or PyTorch's
    default): what a limit set inside a capped run must go back to, not the start-up one."""
    if _mps_fraction is not None:
        return _mps_fraction
    return float(os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.7"))


def set_mps_fraction(fraction: float) -> None:
    """torch.mps.set_per_process_memory_fraction, remembered for current_mps_fraction()."""
    global _mps_fraction
    import torch

    torch.mps.set_per_process_memory_fraction(fraction)
    _mps_fraction = fraction


@contextmanager
def capped(dev: Any) -> Iterator[int | None]:
    """Apply the cap to this process for the block (a run); yields it in bytes, or None."""
    cap = cap_mib()
    if cap is None or dev.kind not in ("cuda", "mps"):
        yield None
        return
    import torch

    if dev.kind == "cuda":
        index = dev.index or 0
        total = torch.cuda.get_device_properties(index).total_memory
        get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
        before = get(index) if get else 1.0
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap * MIB / total), index)
        try:
            yield cap * MIB
        finally:
            torch.cuda.set_per_process_memory_fraction(before, index)
    else:
        before = current_mps_fraction()
        set_mps_fraction(min(2.0, cap * MIB / torch.mps.recommended_max_memory()))
        try:
            yield cap * MIB
        finally:
            set_mps_fraction(before)
