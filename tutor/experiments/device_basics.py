"""device-basics: what this machine has, and where a model's parameters live.

Every figure comes from PyTorch on this machine: the devices it can use, their memory and
compute capability, which low-precision formats run natively, the TF32 setting, then
MNISTClassifier built on the CPU and moved with `.to(device)`, with every parameter checked.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from tutor.experiments import devices
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.device_basics import DeviceBasicsParams
from tutor.experiments.training import seed_everything

GIB = 2**30


def _device_row(d: Device) -> list[str]:
    memory = f"{d.total_memory / GIB:.1f} GiB" if d.total_memory else "system RAM"
    capability = f"{d.capability[0]}.{d.capability[1]}" if d.capability else "-"
    fast = [name for name, ok in (("fp16", d.fp16), ("bf16", d.bf16)) if ok]
    native = " + ".join(fast) or "none (emulated)"
    if d.tensor_cores:
        native += ", tensor cores"
    return [d.torch_device, d.name, memory, capability, native]


def _tf32() -> tuple[bool, bool, str]:
    """(matmuls may use TF32, cuDNN convolutions may use TF32, float32 matmul precision)."""
    return (
        bool(torch.backends.cuda.matmul.allow_tf32),
        bool(torch.backends.cudnn.allow_tf32),
        torch.get_float32_matmul_precision(),
    )


def measure(p: DeviceBasicsParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    yield Started("device-basics", str(device), dev.name, "no data: this run only inspects the machine")

    found = devices.available()
    cuda_ok = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None)
    mps_ok = bool(mps is not None and mps.is_available())
    yield Table(
        "Devices PyTorch can use here",
        ["device", "name", "memory", "capability", "native fp16/bf16"],
        [_device_row(d) for d in found],
    )
    yield Note(
        f"torch.cuda.is_available(): {cuda_ok} · torch.backends.mps.is_available(): {mps_ok} · "
        f"torch {torch.__version__}"
        + (f", built for CUDA {torch.version.cuda}" if torch.version.cuda else ", built without CUDA")
    )
    if not dev.is_accelerator:
        yield Note(
            "No GPU here: the rest of this run uses the CPU. On a GPU machine the table above gains a "
            "cuda row with its memory and compute capability (8.0 and up: bf16 and TF32; 7.0 and up: "
            "tensor cores for fp16).",
            "warning",
        )
    elif dev.kind == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        yield Note(
            f"{dev.name}: {free / GIB:.1f} GiB of {total / GIB:.1f} GiB free right now "
            "(torch.cuda.mem_get_info; other processes count too)."
        )

    tf32_matmul, tf32_cudnn, precision = _tf32()
    tf32_hardware = dev.kind == "cuda" and dev.capability is not None and dev.capability >= (8, 0)
    if tf32_hardware:
        effect = (
            "float32 matmuls on this GPU run in TF32 (10-bit mantissa) on tensor cores"
            if tf32_matmul
            else "float32 matmuls on this GPU run in full float32; "
            "torch.backends.cuda.matmul.allow_tf32 = True would let them use TF32"
        )
    else:
        effect = "TF32 needs an NVIDIA GPU of compute capability 8.0 or newer, so the setting changes nothing here"
    yield Note(
        f"TF32: torch.backends.cuda.matmul.allow_tf32 = {tf32_matmul}, "
        f"torch.backends.cudnn.allow_tf32 = {tf32_cudnn}, "
        f"torch.get_float32_matmul_precision() = {precision!r}: {effect}."
    )

    # Where a model lives: built on the CPU, then moved; every parameter is checked.
    model = MNISTClassifier()
    before = {str(t.device) for t in model.parameters()}
    model = model.to(device)
    params = list(model.named_parameters())
    placed = {str(t.device) for _, t in params}
    all_on_device = all(
        t.device.type == device.type and (device.index is None or t.device.index == device.index) for _, t in params
    )
    count = sum(t.numel() for _, t in params)
    size = sum(t.numel() * t.element_size() for _, t in params)
    yield Table(
        "MNISTClassifier().to(device): every parameter",
        ["parameter", "shape", "dtype", "device"],
        [[name, "x".join(map(str, t.shape)), str(t.dtype).replace("torch.", ""), str(t.device)] for name, t in params],
    )
    shapes = " + ".join(f"{t.numel():,}" for _, t in params)
    yield Note(
        f"{count:,} parameters ({shapes}) x 4 bytes (float32) = {size:,} bytes. Built on "
        f"{', '.join(sorted(before))}, moved with .to({str(device)!r}): "
        + (
            "every parameter is on " + str(device)
            if all_on_device
            else f"NOT all on {device}: found {', '.join(sorted(placed))}"
        )
        + "."
        + (" (On the CPU, .to('cpu') hands back the same tensors: nothing is copied.)" if device.type == "cpu" else ""),
        "result" if all_on_device else "warning",
    )

    yield Finished(
        {
            "device": str(device),
            "device_name": dev.name,
            "devices": ", ".join(d.torch_device for d in found),
            "cuda_available": cuda_ok,
            "mps_available": mps_ok,
            "cuda_device_count": torch.cuda.device_count() if cuda_ok else 0,
            "total_memory_gib": round(dev.total_memory / GIB, 2) if dev.total_memory else None,
            "compute_capability": f"{dev.capability[0]}.{dev.capability[1]}" if dev.capability else None,
            "bf16_native": dev.bf16,
            "fp16_fast": dev.fp16,
            "tensor_cores": dev.tensor_cores,
            "tf32_matmul": tf32_matmul,
            "tf32_active": tf32_hardware and tf32_matmul,
            "float32_matmul_precision": precision,
            "parameters": count,
            "parameter_bytes": size,
            "parameter_devices": ", ".join(sorted(placed)),
            "all_on_device": all_on_device,
            "torch_version": torch.__version__,
        }
    )
