"""The spec of `triton-kernel`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/triton_kernel.py."""

from __future__ import annotations

from pydantic import Field, field_validator

from tutor.experiments.spec import Experiment, Metric, Params


class TritonKernelParams(Params):
    # 2**24 + 3: 64 MiB per float32 tensor, far past a GPU's L2 cache; the +3 leaves a part block to mask.
    size: int = Field(16_777_219, ge=1, le=1 << 28, description="elements on a GPU, compiled")
    # The interpreter runs each program in Python (NumPy): about a millisecond a program.
    cpu_size: int = Field(100_003, ge=1, le=1_000_000, description="elements the CPU interpreter runs")
    block_size: int = Field(1024, ge=16, le=8192, description="BLOCK_SIZE: elements per program (a power of 2)")
    repeats: int = Field(15, ge=3, le=51, description="timing rounds on a GPU, the two ways in turns")

    @field_validator("block_size")
    @classmethod
    def _power_of_two(cls, value: int) -> int:
        if value & (value - 1):
            raise ValueError(f"block_size must be a power of 2 (tl.arange needs one), not {value}")
        return value


SPEC = Experiment(
    name="triton-kernel",
    title="A custom kernel in Triton: fused add + ReLU",
    module="triton_kernel",
    params=TritonKernelParams,
    metrics={
        "path": Metric("how the kernel ran", "text", "compiled for the GPU, Triton's CPU interpreter, or not at all"),
        "matches": Metric(
            "same result as torch.relu(x + y)", "bool", "torch.equal of the kernel's output and torch's", none="not run"
        ),
        "elements": Metric("elements", "", "n, the length of x and y", none="not run"),
        "programs": Metric("programs launched", "", "the grid: ceil(n / BLOCK_SIZE) program instances", none="not run"),
        "masked_lanes": Metric("lanes masked off in the last program", "", "programs x BLOCK_SIZE - n", none="not run"),
        "byte_bound": Metric(
            "most fusing can gain",
            "x",
            "bytes the two PyTorch kernels move over the fused kernel's: 20 / 12 per element (float32)",
        ),
        "triton_seconds": Metric("the Triton kernel", "s", "one fused add + ReLU on the GPU", none="GPU only"),
        "torch_seconds": Metric(
            "torch.relu(x + y)", "s", "the same by two PyTorch kernels on the GPU", none="GPU only"
        ),
        "speedup": Metric(
            "the kernel over PyTorch's two", "x", "torch_seconds / triton_seconds, rounds in turns", none="GPU only"
        ),
        "speedup_low": Metric("the kernel's speedup, low", "x", "the low end of its interval", none="GPU only"),
        "speedup_high": Metric("the kernel's speedup, high", "x", "the high end of its interval", none="GPU only"),
        "compile_seconds": Metric(
            "first launch, compiling included",
            "s",
            "the kernel's first launch on the GPU: Triton compiles it then (or loads it from its cache)",
            none="GPU only",
        ),
        "triton_version": Metric("triton", "text", "the installed triton's version", none="not installed"),
    },
    quick={"size": 65_539, "cpu_size": 10_003, "repeats": 5},
)
