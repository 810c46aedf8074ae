"""The spec of `python-matmul`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/python_matmul.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class PythonMatmulParams(Params):
    # 64: 262,144 multiply-adds, a few tenths of a second for the Python loops on a laptop core.
    size: int = Field(64, ge=8, le=128, description="n, for n x n matrices (8 to 128)")
    repeats: int = Field(7, ge=3, le=21, description="timings of the Python loops (3 to 21)")


SPEC = Experiment(
    name="python-matmul",
    title="A matrix product in Python loops, against A @ B",
    module="python_matmul",
    params=PythonMatmulParams,
    metrics={
        "python_seconds": Metric("Python triple loop", "s", "one n x n product in three nested Python loops"),
        "torch_seconds": Metric("A @ B on the CPU", "s", "the same product by torch.mm on the CPU"),
        "speedup": Metric(
            "A @ B over the Python loops", "x", "how many times faster torch.mm on the CPU was, the same core count"
        ),
        "speedup_low": Metric("A @ B's speedup, low", "x", "the low end of the speedup's interval"),
        "speedup_high": Metric("A @ B's speedup, high", "x", "the high end of the speedup's interval"),
        "accelerator_seconds": Metric(
            "A @ B on the accelerator", "s", "the same product on the run's GPU", none="no GPU here"
        ),
        "accelerator_speedup": Metric(
            "the GPU over the CPU's A @ B", "x", "CPU torch.mm time over the GPU's", none="no GPU here"
        ),
    },
    quick={},  # half a second at the lesson's own size
)
