"""What else the machine was doing while a run measured: the words a noisy measurement needs.

A run whose interval leaves a prediction undecided (checks.predict, tutor/measurement) owes the
learner the reason, not a shrug. Read before and after the run:

- the CPU: how much of every core's time went to other programs (/proc/stat's busy time less
  this process's own and its children's), the time a virtual machine's host gave to others
  (steal), and where /proc is missing (macOS) the load average;
- a CUDA GPU, through NVML (the nvidia-ml-py package) where it is installed: other processes
  holding memory on it, whether it was already busy before the run, and whether it slowed its
  clocks (thermal or power limits) by the end.

Nothing here needs torch but what names the CUDA device (its PCI address, its UUID on a MIG
slice) and what this process holds on it. Every reading is best effort: what cannot be read is
left out of the sentence, never guessed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tutor.cpu_load import own_cpu, proc_stat
from tutor.threads import usable_cores

__all__ = ["NOISE_GATE", "NOISE_WHY", "Reading", "Sharing", "gate", "read", "sharing", "why"]

# The metrics experiments.start adds beside a run's interval (declared in experiments/spec.py).
NOISE_WHY = "noise_why"
NOISE_GATE = "noise_gate"

OTHERS_CPU_SHARE = 0.25  # other programs took this share of every core's time: say so
STEAL_SHARE = 0.10  # the VM's host gave this share of the time to other machines
GPU_BUSY_BEFORE = 10  # % utilisation of the GPU before this run started: someone else's work

# Clock event reasons that make a GPU timing not this card's own (the routine power cap does not:
# a card at its power limit is running as it always will).
SLOWDOWNS = ("too hot (software thermal limit)", "too hot (hardware thermal limit)", "hardware slowdown", "power brake")

# NVML's clock event reasons worth a learner's attention, and their words.
_THROTTLE_WORDS = (
    ("SwThermalSlowdown", "too hot (software thermal limit)"),
    ("HwThermalSlowdown", "too hot (hardware thermal limit)"),
    ("HwSlowdown", "hardware slowdown"),
    ("HwPowerBrakeSlowdown", "power brake"),
    ("SwPowerCap", "held to its power limit"),
)


@dataclass(frozen=True)
class GpuReading:
    others: int | None  # other processes with memory on this GPU (None: NVML would not list them)
    others_mib: float
    utilization: int | None  # % of the last sample period a kernel ran
    throttle: tuple[str, ...] | None  # why the clocks are held down now, in words (None: unreadable)


@dataclass(frozen=True)
class Reading:
    wall: float  # time.monotonic()
    busy_s: float | None  # every core's busy seconds since boot (/proc/stat), None where unreadable
    steal_s: float | None
    own_s: float  # this process's and its waited-for children's CPU seconds
    load: float | None  # 1-minute load average
    gpu: GpuReading | None


def _load() -> float | None:
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return None


def _nvml_handle(pynvml: Any, index: int) -> Any:
    """The NVML handle of torch's CUDA device `index` (the same card even under
    CUDA_VISIBLE_DEVICES, matched by its PCI address). On a MIG slice this is the whole card."""
    import torch

    # Any: the PCI fields are read where this torch has them, and are not in its stubs.
    props: Any = torch.cuda.get_device_properties(index)
    try:
        bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        return pynvml.nvmlDeviceGetHandleByPciBusId(bus)
    except Exception:  # an older torch without PCI fields, or NVML spelling it otherwise
        return pynvml.nvmlDeviceGetHandleByIndex(index)


def _uuid_hex(uuid: Any) -> str:
    """A UUID's hex digits: torch prints its bare (8-4-4-4-12), NVML prefixes "GPU-" or "MIG-"
    (an old driver's "MIG-GPU-<card>/gi/ci" keeps a "/" and so matches nothing)."""
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return text.lower().removeprefix("mig-").removeprefix("gpu-").replace("-", "")


def _slice_handle(pynvml: Any, card: Any, index: int) -> Any:
    """The handle whose processes and utilisation are torch's device `index`'s: the card's own,
    or with MIG on, the slice whose UUID is torch's (the card's list would count the other
    slices' processes, or be refused without privileges); None when that slice is not found."""
    try:
        if pynvml.nvmlDeviceGetMigMode(card)[0] != pynvml.NVML_DEVICE_MIG_ENABLE:
            return card
    except Exception:  # a card without MIG
        return card
    import torch

    want = _uuid_hex(getattr(torch.cuda.get_device_properties(index), "uuid", ""))
    try:
        count = pynvml.nvmlDeviceGetMaxMigDeviceCount(card)
    except Exception:
        return None
    for i in range(count):
        try:
            handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(card, i)
            if want and _uuid_hex(pynvml.nvmlDeviceGetUUID(handle)) == want:
                return handle
        except Exception:  # an unused slot
            continue
    return None


def _mine(procs: list[Any], index: int) -> Any:
    """The entry that is this process under another PID (in a container an older driver lists the
    host's), when this process has a CUDA context on the device: the smallest holding at least
    what torch reserved (the context adds to it), else the largest. None without a context."""
    import torch

    # torch.cuda.is_initialized() is no sign: reading the device's properties initialised it, and
    # that makes no context. torch's own check is private; where gone, memory held there stands in.
    has_context = getattr(torch._C, "_cuda_hasPrimaryContext", None)
    try:
        ours = has_context(index) if has_context else torch.cuda.memory_reserved(index) > 0
        reserved = torch.cuda.memory_reserved(index)
    except Exception:
        return None
    if not ours or not procs:
        return None

    def used(p: Any) -> int:
        return p.usedGpuMemory or 0  # None where the driver will not say

    fits = [p for p in procs if used(p) >= reserved]
    return min(fits, key=used) if fits else max(procs, key=used)


def _others(pynvml: Any, handle: Any, index: int) -> tuple[int | None, float]:
    """(how many other processes hold memory on the device, their MiB); None where unlisted."""
    try:
        procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(handle))
    except Exception:  # no permission, or an old driver
        return None, 0.0
    me = os.getpid()
    if any(p.pid == me for p in procs):
        others = [p for p in procs if p.pid != me]
    else:
        mine = _mine(procs, index)
        others = [p for p in procs if p is not mine]
    return len(others), sum((p.usedGpuMemory or 0) for p in others) / 2**20


def _throttle(pynvml: Any, handle: Any) -> tuple[str, ...] | None:
    """Why the clocks are held down, in words; None where unreadable. The EventReasons call is in
    recent bindings but only in drivers from R535: older ones raise FunctionNotFound."""
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        try:
            mask = int(getattr(pynvml, name)(handle))
        except Exception:
            continue
        return tuple(
            words
            for reason, words in _THROTTLE_WORDS
            if mask
            & int(
                getattr(pynvml, f"nvmlClocksEventReason{reason}", 0)
                or getattr(pynvml, f"nvmlClocksThrottleReason{reason}", 0)
            )
        )
    return None


@contextlib.contextmanager
def _nvml_session() -> Iterator[Any]:
    """pynvml, initialised for the block and shut down after it; None where NVML cannot start
    (not installed, no NVIDIA driver library)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        yield None
        return
    try:
        yield pynvml
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _gpu(dev: Any) -> GpuReading | None:
    if getattr(dev, "kind", "") != "cuda":
        return None
    with _nvml_session() as pynvml:
        if pynvml is None:
            return None
        try:
            # Each reading on its own: one refused (MIG, a container) loses only itself.
            index = dev.index or 0
            card = _nvml_handle(pynvml, index)
            own = _slice_handle(pynvml, card, index)
            others, mib = _others(pynvml, own, index) if own is not None else (None, 0.0)
            try:  # not supported on MIG
                utilization = int(pynvml.nvmlDeviceGetUtilizationRates(own).gpu) if own is not None else None
            except Exception:
                utilization = None
            return GpuReading(others, mib, utilization, _throttle(pynvml, card))  # clocks are the card's
        except Exception:
            return None


@dataclass(frozen=True)
class Sharing:
    """How a CUDA card is shared, as NVML sees it (`doctor`): a MIG slice, other processes on it."""

    mig: bool | None  # the card is split into MIG slices and this device is one (None: unreadable)
    others: int | None  # other processes holding memory on this device (None: NVML would not list them)
    others_mib: float


def sharing(dev: Any) -> Sharing | None:
    """Whether `dev` is a MIG slice, and the other processes NVML lists on it; None off CUDA or
    without NVML. Time-slicing (several containers handed one card in turns) cannot be seen from
    inside: only the processes NVML lists here are."""
    if getattr(dev, "kind", "") != "cuda":
        return None
    with _nvml_session() as pynvml:
        if pynvml is None:
            return None
        try:
            index = dev.index or 0
            card = _nvml_handle(pynvml, index)
            try:
                mig: bool | None = pynvml.nvmlDeviceGetMigMode(card)[0] == pynvml.NVML_DEVICE_MIG_ENABLE
            except Exception:  # a card without MIG (or a driver that will not say): not a slice
                mig = False
            own = _slice_handle(pynvml, card, index)
            others, mib = _others(pynvml, own, index) if own is not None else (None, 0.0)
            return Sharing(mig, others, mib)
        except Exception:
            return None


def read(dev: Any = None) -> Reading:
    """What the machine is doing now (and `dev`'s GPU, when it is a CUDA device)."""
    stat = proc_stat()
    return Reading(
        time.monotonic(), stat[0] if stat else None, stat[1] if stat else None, own_cpu(), _load(), _gpu(dev)
    )


def others_cpu_share(before: Reading, after: Reading, cores: int) -> float | None:
    """The share of every core's time other programs took between the two readings."""
    wall = after.wall - before.wall
    if before.busy_s is None or after.busy_s is None or wall <= 0 or cores <= 0:
        return None
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return min(1.0, max(0.0, others / (wall * cores)))


def gate(before: Reading, after: Reading) -> str | None:
    """Why a GPU run's timings cannot decide a verdict at all, or None: the card slowed its clocks
    for heat or a hardware limit by the end of the run, or another program's kernels had it busy
    as the run began. A CPU run is never gated: other programs' share of the cores is said (`why`),
    and the interval is what it is."""
    reasons = []
    if after.gpu is not None and after.gpu.throttle:
        held = [w for w in after.gpu.throttle if w in SLOWDOWNS]
        if held:
            reasons.append(f"the GPU slowed its clocks ({', '.join(held)})")
    if before.gpu is not None and (before.gpu.utilization or 0) >= GPU_BUSY_BEFORE:
        reasons.append(f"another program's work had the GPU {before.gpu.utilization}% busy as this run began")
    if not reasons:
        return None
    text = "; ".join(reasons)
    return text[0].upper() + text[1:] + ", so its timings are not this card's own."


def why(before: Reading, after: Reading, cores: int | None = None) -> str:
    """One or two sentences: what else used the machine while it measured, in figures; or that
    nothing else was seen, and what that leaves."""
    cores = cores or usable_cores()
    seen: list[str] = []
    share = others_cpu_share(before, after, cores)
    wall = after.wall - before.wall
    if share is not None and share >= OTHERS_CPU_SHARE:
        seen.append(
            f"other programs took {share:.0%} of this machine's {cores} core{'s' if cores != 1 else ''} while it ran"
        )
    elif share is None and after.load is not None and after.load > cores:
        seen.append(
            f"the load average was {after.load:.1f} on {cores} core{'s' if cores != 1 else ''}: "
            "more work waiting than cores to run it"
        )
    if before.steal_s is not None and after.steal_s is not None and wall > 0:
        steal = (after.steal_s - before.steal_s) / (wall * cores)
        if steal >= STEAL_SHARE:
            seen.append(f"this virtual machine's host gave {steal:.0%} of its CPU time to other machines")
    gpu_before, gpu_after = before.gpu, after.gpu
    if gpu_after is not None and gpu_after.others:
        n = gpu_after.others
        seen.append(f"{n} other process{'es' if n != 1 else ''} held {gpu_after.others_mib:,.0f} MiB on the GPU")
    if gpu_before is not None and (gpu_before.utilization or 0) >= GPU_BUSY_BEFORE:
        seen.append(f"the GPU was already {gpu_before.utilization}% busy before this run started")
    if gpu_after is not None and gpu_after.throttle:
        seen.append(f"the GPU slowed its clocks ({', '.join(gpu_after.throttle)})")
    if seen:
        text = "; ".join(seen)
        return text[0].upper() + text[1:] + "."
    checked = "other programs took " + (f"{share:.0%} of the CPU" if share is not None else "no CPU this could see")
    if gpu_after is not None:  # only what was read is said
        quiet = gpu_after.others == 0, gpu_after.throttle is not None
        checked += {
            (True, True): ", no other process was on the GPU and its clocks were not held down",
            (True, False): ", no other process was on the GPU",
            (False, True): ", the GPU's clocks were not held down",
            (False, False): "",
        }[quiet]
    return (
        f"Nothing else was seen using the machine ({checked}): the spread came from the device itself "
        "(clock speed changes, caches) or from timings too short to measure steadily."
    )
