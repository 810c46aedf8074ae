"""The vendors' spec-sheet peaks: what a chip's data sheet promises, to put beside what this
device measured (the measured peak is the fair yardstick; the spec sheet says how far from the
chip's best case a real matmul lands). Torch-free but for `for_device`, which reads a CUDA
device's SM count (a MIG slice has only some of them). No CPU has a figure here, and none is
made up: where this returns None, the screen shows the measured peak alone.
"""

from __future__ import annotations

import re
from typing import Any

# Vendor peak TFLOP/s, dense (no sparsity), from the vendors' data sheets.
# Keys: float32 (plain FP32 cores), tfloat32, bfloat16, float16 (tensor cores).
VENDOR_PEAKS: list[tuple[str, str, int, dict[str, float]]] = [
    # (regex on torch.cuda.get_device_name(), label, the full chip's SMs, peaks)
    # Not GH200 (its GPU is an H100-class die, but its power and clocks are set per system) nor
    # H200 NVL (a lower power limit, lower peaks): neither gets the H200 SXM's figures.
    (
        r"\bH200\b(?! NVL)",
        "NVIDIA H200",
        132,
        {"float32": 67.0, "tfloat32": 494.7, "bfloat16": 989.4, "float16": 989.4},
    ),
    (r"H100.*PCIe", "NVIDIA H100 PCIe", 114, {"float32": 51.0, "tfloat32": 378.0, "bfloat16": 756.0, "float16": 756.0}),
    (
        r"H100 (80GB HBM3|SXM)",
        "NVIDIA H100 SXM",
        132,
        {"float32": 67.0, "tfloat32": 494.7, "bfloat16": 989.4, "float16": 989.4},
    ),
    (r"A100", "NVIDIA A100", 108, {"float32": 19.5, "tfloat32": 156.0, "bfloat16": 312.0, "float16": 312.0}),
    (r"\bL4\b", "NVIDIA L4", 58, {"float32": 30.3, "tfloat32": 60.0, "bfloat16": 121.0, "float16": 121.0}),
    (r"\bT4\b", "NVIDIA T4", 40, {"float32": 8.1, "float16": 65.0}),
    (
        r"RTX 4090",
        "NVIDIA GeForce RTX 4090",
        128,
        {"float32": 82.6, "tfloat32": 82.6, "bfloat16": 165.2, "float16": 165.2},
    ),
]

# The lab's reference GPU, from NVIDIA's A100 data sheet and the Ampere whitepaper: the 40 GB card's
# HBM2 bandwidth (the 80 GB card's HBM2e: 2,039 GB/s) and its FP32 cores (108 SMs x 64).
A100_40GB_BANDWIDTH_GBPS = 1555.0
A100_FP32_CORES = 6912


def vendor_peak_tflops(gpu_name: str, dtype: str, sms: int | None = None) -> tuple[float, str] | None:
    """(TFLOP/s, GPU label) from the vendor's dense spec, or None for an unknown GPU or dtype.

    `sms`: the streaming multiprocessors this device really has. A MIG slice ("... MIG 3g.40gb")
    keeps its chip's name but only some of its SMs; its peak is the chip's in proportion (the
    full chip's peak would understate MFU up to 7x). Any other SM count is another chip under a
    matching name (an RTX 4090 Laptop GPU, an RTX 4090 D), whose sheet is not this one: None."""
    for pattern, label, full_sms, peaks in VENDOR_PEAKS:
        if re.search(pattern, gpu_name, re.IGNORECASE):
            if dtype not in peaks:
                return None
            if sms and re.search(r"\bMIG\b", gpu_name) and sms < full_sms:
                return peaks[dtype] * sms / full_sms, f"{label}, {sms} of its {full_sms} SMs (a MIG slice)"
            if sms and sms != full_sms:
                return None
            return peaks[dtype], label
    return None


def for_device(dev: Any, dtype: str) -> tuple[float, str] | None:
    """(TFLOP/s, label) of `dev`'s spec sheet for `dtype`; None off CUDA or for an unknown GPU."""
    if getattr(dev, "kind", "") != "cuda":
        return None
    import torch

    sms = torch.cuda.get_device_properties(dev.index or 0).multi_processor_count
    return vendor_peak_tflops(dev.name, dtype, sms)


def beside(achieved_tflops: float, sheet: tuple[float, str], dtype: str) -> str:
    """'62% of the spec sheet's 67 TFLOP/s (NVIDIA H100 SXM, float32 dense)'."""
    from tutor.present import flops_text, metric

    return (
        f"{metric(achieved_tflops / sheet[0], '%')} of the spec sheet's {flops_text(sheet[0])} "
        f"({sheet[1]}, {dtype} dense)"
    )
