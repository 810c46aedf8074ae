"""A cached matmul peak planted for this process's CPU, as if measured earlier: for every thread
count a run may choose, since a run decides its threads from the machine's load as it starts."""

from __future__ import annotations

import dataclasses
import datetime

import torch

from tutor.experiments import devices
from tutor.measurement import peak as matmul_peak
from tutor.threads import usable_cores


def plant_peak(tflops: float, device: str = "cpu", **changes) -> matmul_peak.Peak:
    """Store a float32 peak of `tflops` (with `changes`) under every thread count; return the one
    for this process's threads now."""
    name, threads = matmul_peak.identity(devices.resolve(device))
    p = matmul_peak.Peak(
        tflops=tflops,
        dtype="float32",
        device=name,
        threads=threads,
        torch=torch.__version__,
        measured_on="2000-01-02",
        measured_at=datetime.datetime.now().timestamp() - 86400,
        best_size=512,
        sizes=(256, 512),
    )
    p = dataclasses.replace(p, **changes)
    for count in [None] if threads is None else range(1, usable_cores() + 1):
        matmul_peak.store(dataclasses.replace(p, threads=count))
    return p
