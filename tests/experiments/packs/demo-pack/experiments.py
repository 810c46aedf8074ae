"""A lesson pack's own experiment: how long a float32 matrix product takes, measured here."""

from __future__ import annotations

import time

from pydantic import Field

from tutor.experiments import Experiment, Params
from tutor.experiments.events import Finished, Note, Started


class MatmulParams(Params):
    size: int = Field(256, ge=8, le=8192, description="n for an n x n matrix product")
    repeats: int = Field(5, ge=1, le=1000)


def run(p: MatmulParams, dev):
    import torch

    torch.manual_seed(p.seed)
    a = torch.randn(p.size, p.size, device=dev.torch_device)
    yield Started("pack-matmul", str(dev.torch_device), dev.name, "random matrices", f"{p.size} x {p.size}")
    a @ a  # warm-up
    t0 = time.perf_counter()
    for _ in range(p.repeats):
        a @ a
    if dev.kind == "cuda":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - t0) / p.repeats
    gflops = 2 * p.size**3 / seconds / 1e9
    yield Note(f"one {p.size} x {p.size} product: {seconds * 1e3:.2f} ms, {gflops:.1f} GFLOP/s", "result")
    yield Finished({"seconds": seconds, "gflops": gflops})


EXPERIMENTS = [
    Experiment("pack-matmul", "A matrix product, timed (from a lesson pack)", "", MatmulParams,
               {"seconds": "seconds per product", "gflops": "achieved GFLOP/s"}, {"size": 64}, run=run),
]
