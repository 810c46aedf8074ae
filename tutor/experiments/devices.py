"""Detect the training devices this machine has: cuda, mps, cpu.

torch is imported inside the functions, never at module top, so the TUI can start
(and show "detecting device...") before paying for the torch import.
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, replace
from functools import lru_cache

from tutor.threads import decide as decide_threads
from tutor.threads import usable_cores


class DeviceError(Exception):
    """A requested device is not available here (message says what to do instead)."""


@dataclass(frozen=True)
class Device:
    kind: str  # "cuda" | "mps" | "cpu"
    index: int | None  # cuda device index
    name: str  # "NVIDIA H100 80GB HBM3", "Apple M2 (MPS)", "AMD EPYC"
    total_memory: int | None = None  # bytes (cuda: torch.cuda.get_device_properties(i).total_memory)
    capability: tuple[int, int] | None = None  # cuda compute capability
    bf16: bool = False  # native bfloat16 support
    fp16: bool = False  # fast float16 (tensor cores on cuda)
    tensor_cores: bool = False
    threads: int | None = None  # cpu: the threads a run starting now trains with (the load decides)
    cores: int | None = None  # cpu: the cores this process may use
    free_memory: int | None = None  # bytes free when detected, other processes' use taken off (cuda, mps)

    @property
    def torch_device(self) -> str:
        """The string to pass to `torch.device(...)` / `.to(...)`."""
        return f"cuda:{self.index}" if self.kind == "cuda" and self.index is not None else self.kind

    @property
    def is_accelerator(self) -> bool:
        return self.kind in ("cuda", "mps")

    def describe(self) -> str:
        """One line for headers: 'cuda: NVIDIA H100 (79.1 GiB, sm_90, bf16)'."""
        bits: list[str] = []
        if self.total_memory:
            bits.append(f"{self.total_memory / 2**30:.1f} GiB")
        if self.capability:
            bits.append(f"sm_{self.capability[0]}{self.capability[1]}")
        if self.threads:
            cores = f"{self.cores} cores, " if self.cores and self.cores != self.threads else ""
            bits.append(f"{cores}{self.threads} training thread{'s' if self.threads != 1 else ''}")
        if self.bf16:
            bits.append("bf16")
        extra = f" ({', '.join(bits)})" if bits else ""
        return f"{self.torch_device}: {self.name}{extra}"

    def sharing(self, cap_mib: int | None = None, cap_source: str = "") -> str | None:
        """On a GPU: what is free and what others hold, and each run's cap (None off a GPU)."""
        if not self.is_accelerator or self.free_memory is None or not self.total_memory:
            return None
        gib = 2**30
        others = self.total_memory - self.free_memory
        text = f"{self.free_memory / gib:.1f} of {self.total_memory / gib:.1f} GiB free" + (
            f" ({others / gib:.1f} GiB held by other processes or the driver)" if others > 0 else ""
        )
        if cap_mib:
            text += f"; each run capped at {cap_mib:,} MiB ({cap_source})"
        return text

    def as_dict(self) -> dict:
        d = asdict(self)
        d["torch_device"] = self.torch_device
        return d


def cpu_model_name() -> str:
    """The CPU's marketing name, best effort, without torch."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            import subprocess

            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=2
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "CPU"


def _cpu() -> Device:
    import torch

    # bf16 matmuls are native on CPUs with bfloat16 instructions: AVX512-BF16 or AMX on x86, the BF16
    # extension on ARM (Graviton 3, Neoverse V1/N2, Apple M2 and later); elsewhere they are emulated (slow).
    capability = ""
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except Exception:  # noqa: BLE001 - older torch
        pass
    native_bf16 = "AMX" in capability.upper() or _cpu_flag("avx512_bf16") or _cpu_flag("amx_bf16") or _arm_bf16()
    return Device(
        kind="cpu",
        index=None,
        name=cpu_model_name(),
        bf16=native_bf16,
        threads=decide_threads(),  # what a run starting now trains with (tutor/threads.py)
        cores=usable_cores(),
    )


def _cpu_flag(flag: str, field: str = "flags") -> bool:
    """Whether /proc/cpuinfo lists `flag` (x86 says "flags", ARM "Features")."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(field):
                    return flag in line.split(":", 1)[-1].split()
    except OSError:
        pass
    return False


def _arm_bf16() -> bool:
    """ARM's BF16 extension: Linux lists it in /proc/cpuinfo's Features, macOS in sysctl."""
    if platform.machine().lower() not in ("arm64", "aarch64"):
        return False
    if platform.system() == "Darwin":
        import subprocess

        try:
            out = subprocess.run(
                ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"], capture_output=True, text=True, timeout=2
            )
        except (OSError, subprocess.SubprocessError):
            return False
        return out.stdout.strip() == "1"
    return _cpu_flag("bf16", "Features")


def _cuda(index: int) -> Device:
    import torch

    props = torch.cuda.get_device_properties(index)  # no context: the driver's record of the card
    major, minor = props.major, props.minor
    return Device(
        kind="cuda",
        index=index,
        name=props.name,
        total_memory=props.total_memory,
        capability=(major, minor),
        bf16=major >= 8,  # Ampere and newer
        fp16=True,
        tensor_cores=major >= 7,  # Volta and newer
    )


def mps_name(chip: str) -> str:
    """The Mac's GPU by its chip's name: "Apple M2" (sysctl's brand string) -> "Apple M2 GPU (MPS)"."""
    chip = chip.strip()
    if not chip.lower().startswith("apple"):
        chip = f"Apple {chip}".strip()
    return f"{chip} GPU (MPS)"


def _mps() -> Device:
    import torch

    name = mps_name(cpu_model_name()) if platform.system() == "Darwin" else "Apple GPU (MPS)"
    total: int | None
    free: int | None
    try:  # the working set macOS recommends for the GPU, and what this process's driver holds of it
        total = int(torch.mps.recommended_max_memory())
        free = max(0, total - int(torch.mps.driver_allocated_memory()))
    except (AttributeError, RuntimeError):
        total = free = None
    # MPS supports float16 autocast; bfloat16 needs macOS 14+ (checked by a real op below).
    return Device(kind="mps", index=None, name=name, total_memory=total, free_memory=free, bf16=_mps_bf16(), fp16=True)


def _mps_bf16() -> bool:
    import torch

    try:
        torch.ones(1, device="mps", dtype=torch.bfloat16)
        return True
    except Exception:  # noqa: BLE001 - a probe: any failure means "no"
        return False


def with_free_memory(dev: Device) -> Device:
    """`dev` with what its card has free now (others use it too). Read for the device a process
    uses only: torch.cuda.mem_get_info creates a CUDA context on the card it asks about, hundreds
    of MiB of it, which every tutor and exercise on a shared 8-GPU box would hold on all 8."""
    if dev.kind != "cuda" or dev.index is None:
        return dev
    import torch

    try:
        return replace(dev, free_memory=int(torch.cuda.mem_get_info(dev.index)[0]))
    except RuntimeError:
        return dev


@lru_cache(maxsize=1)
def available() -> tuple[Device, ...]:
    """Every device torch can train on here, best first (cuda..., mps, cpu)."""
    import torch

    found: list[Device] = []
    if torch.cuda.is_available():
        found.extend(_cuda(i) for i in range(torch.cuda.device_count()))
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        found.append(_mps())
    found.append(_cpu())
    return tuple(found)


def resolve(requested: str | None = None, free_memory: bool = True) -> Device:
    """The device to train on: `requested` ("cuda", "cuda:1", "mps", "cpu", "auto"/None) or the best,
    with what its card has free (`free_memory=False`: not read, and no CUDA context made for it).

    Raises DeviceError with what *is* available when the request cannot be met.
    """
    requested = (requested or os.environ.get("GPUTUTOR_DEVICE") or "auto").strip().lower()
    devs = available()
    found = _find(requested, devs)
    return with_free_memory(found) if free_memory else found


def _find(requested: str, devs: tuple[Device, ...]) -> Device:
    if requested in ("", "auto"):
        return devs[0]
    kind, _, idx = requested.partition(":")
    choices = ", ".join(d.torch_device for d in devs)
    if kind not in ("cuda", "mps", "cpu"):
        raise DeviceError(f"unknown device {requested!r}: use one of auto, {choices}")
    for d in devs:
        if d.kind == kind and (not idx or str(d.index) == idx):
            return d
    same_kind = [d for d in devs if d.kind == kind]
    if same_kind:  # e.g. cuda:1 on a machine with one GPU
        why = f"there is no {kind} device with index {idx} (found {', '.join(d.torch_device for d in same_kind)})"
    else:
        why = {
            "cuda": "no CUDA GPU is visible to PyTorch here (torch.cuda.is_available() is False)",
            "mps": "Apple's MPS backend is not available here (torch.backends.mps.is_available() is False)",
        }.get(kind, f"device {requested!r} is not present")
    raise DeviceError(f"device {requested!r}: {why}. Available: {choices}.")  # --device, --set device=, GPUTUTOR_DEVICE


def accelerator() -> Device | None:
    """The first cuda or mps device, if any."""
    return next((d for d in available() if d.is_accelerator), None)


def start_up(dev: Device) -> None:
    """Create `dev`'s context and cuBLAS handles now: for the forward's thread and for autograd's
    backward thread, which gets its own at the first backward. Cheap after the first call. Do it
    before a memory budget takes its baseline: a CUDA context alone takes hundreds of MiB of host
    memory, which would otherwise count against the first run (or exercise) that touches the GPU."""
    import torch

    if dev.kind == "cuda":
        w = torch.ones(8, 8, device=dev.torch_device, requires_grad=True)
        (w @ w).sum().backward()
        torch.cuda.synchronize(dev.torch_device)
    elif dev.kind == "mps":
        w = torch.ones(8, 8, device="mps", requires_grad=True)
        (w @ w).sum().backward()
        torch.mps.synchronize()
