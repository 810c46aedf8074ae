"""triton-kernel: the course lab's custom-kernel bonus, written in Triton.

The lab's bonus asks for a CUDA kernel, called from PyTorch and timed against PyTorch's ops. The
tutor writes it in Triton (tutor/experiments/triton_kernels.py), Python that compiles to GPU
code, as its tutorials do: relu(x + y) in one kernel, where PyTorch runs two (an add that writes
x + y to memory, a ReLU that reads it back). Each program instance handles one block of
BLOCK_SIZE elements, found from its program id; a mask turns off the lanes past the end.

On a CUDA GPU the kernel is compiled, checked against torch.relu(x + y) and timed against it, the
two ways in turns after a warm-up, the device synchronised. Elsewhere Triton's interpreter runs
the same source on the CPU with NumPy, program by program: the result is checked the same way,
and nothing is timed, since the interpreter's time is Python's, not the kernel's. Without triton
the run says so and ends.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import torch

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.triton_kernel import TritonKernelParams
from tutor.measurement.intervals import bounds, median_interval
from tutor.measurement.timing import median, paired_ratios, seconds_in_turns, synchronize
from tutor.measurement.warmup import WarmUp
from tutor.present import metric, seconds

# Bytes per float32 element: the fused kernel reads x and y and writes the output (3 x 4); PyTorch's
# add reads x and y and writes x + y, then its ReLU reads x + y and writes the output (5 x 4).
FUSED_BYTES, UNFUSED_BYTES = 12, 20
ROUND_S = 0.005  # each timing round at least this long: a launch's clock reads vanish beside it
OWNERS_SIZE, OWNERS_BLOCK = 10, 4  # the "who wrote each element" demonstration


def not_run(p: TritonKernelParams, path: str, version: str | None = None) -> dict[str, Any]:
    return {
        "path": path,
        "matches": None,
        "elements": None,
        "programs": None,
        "masked_lanes": None,
        "byte_bound": UNFUSED_BYTES / FUSED_BYTES,
        "triton_seconds": None,
        "torch_seconds": None,
        "speedup": None,
        "speedup_low": None,
        "speedup_high": None,
        "compile_seconds": None,
        "triton_version": version,
    }


def first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def measure(p: TritonKernelParams, dev: Device) -> Iterator[Event]:
    compiled = dev.kind == "cuda"
    n = p.size if compiled else p.cpu_size
    yield Started(
        "triton-kernel",
        dev.torch_device,
        dev.name,
        "none (random tensors)",
        f"relu(x + y) in one Triton kernel, {n:,} float32 elements, BLOCK_SIZE {p.block_size}",
    )
    try:
        from tutor.experiments import triton_kernels as tk
    except ImportError as exc:
        yield Note(
            f"Triton is not installed here ({first_line(exc)}), so there is no kernel to run. It comes "
            "with PyTorch's CUDA builds for Linux (pip install triton adds it to others); with it, this "
            "run compiles the kernel on an NVIDIA or AMD GPU, or interprets it on the CPU.",
            "warning",
        )
        yield Finished(not_run(p, "not run: triton is not installed"))
        return

    compile_s: float | None = None
    kernel: Any = None
    owners_kernel: Any = None
    device = dev.torch_device if compiled else "cpu"
    if compiled:
        try:
            kernel = tk.build(tk.add_relu_kernel, interpret=False)
            owners_kernel = tk.build(tk.program_ids_kernel, interpret=False)
            x = torch.randn(n, device=device, generator=torch.Generator(device).manual_seed(p.seed))
            y = torch.randn(n, device=device, generator=torch.Generator(device).manual_seed(p.seed + 1))
            synchronize(device)
            started = time.perf_counter()
            out = tk.add_relu(kernel, x, y, p.block_size)  # the first launch compiles
            synchronize(device)
            compile_s = time.perf_counter() - started
        except Exception as exc:  # noqa: BLE001 - a toolchain missing or refusing: said, then the CPU's interpreter
            yield Note(
                f"Compiling the kernel for {dev.name} failed ({first_line(exc)}); Triton's interpreter runs "
                "it on the CPU instead. Triton needs a C compiler (gcc or clang) for the small launcher it "
                "builds once.",
                "warning",
            )
            compiled, n, device, compile_s = False, p.cpu_size, "cpu", None
    if not compiled:
        kernel = tk.build(tk.add_relu_kernel, interpret=True)
        owners_kernel = tk.build(tk.program_ids_kernel, interpret=True)
        x = torch.randn(n, generator=torch.Generator().manual_seed(p.seed))
        y = torch.randn(n, generator=torch.Generator().manual_seed(p.seed + 1))
        out = tk.add_relu(kernel, x, y, p.block_size)

    expected = torch.relu(x + y)
    matches = bool(torch.equal(out, expected))
    programs = -(-n // p.block_size)
    masked = programs * p.block_size - n

    # The program model made visible: each element of a short vector gets the id of its program.
    owners = torch.full((OWNERS_SIZE,), -1, dtype=torch.int32, device=device)
    owners_kernel[(-(-OWNERS_SIZE // OWNERS_BLOCK),)](owners, OWNERS_SIZE, BLOCK_SIZE=OWNERS_BLOCK)
    owner_ids = owners.tolist()
    how = f"compiled for {dev.name}" if compiled else "Triton's interpreter, on the CPU"
    rows = [
        ["ran as", how],
        ["elements (n)", f"{n:,}"],
        ["BLOCK_SIZE", f"{p.block_size:,}"],
        ["programs: ceil(n / BLOCK)", f"{programs:,}"],
        ["lanes masked, last program", f"{masked:,} of {p.block_size:,}"],
        ["equals torch.relu(x + y)", "yes" if matches else "NO"],
    ]
    if compile_s is not None:
        rows.insert(1, ["first launch (compiles, or cache)", seconds(compile_s)])
    yield Table(f"add_relu_kernel, triton {tk.version()}", ["what", "value"], rows)
    last = owner_ids.count(max(owner_ids))
    yield Note(
        f"Who wrote each of {OWNERS_SIZE} elements, BLOCK_SIZE {OWNERS_BLOCK}: "
        f"{' '.join(str(i) for i in owner_ids)}. Program i takes elements i x BLOCK to i x BLOCK + BLOCK - 1; "
        f"the last program has {OWNERS_BLOCK - last} of its {OWNERS_BLOCK} lanes masked off, "
        "so it writes nothing past the end.",
        "result",
    )
    if not matches:
        worst = (out - expected).abs().max().item()
        yield Note(f"The kernel's output differs from torch.relu(x + y): largest difference {worst:g}.", "warning")

    bound = UNFUSED_BYTES / FUSED_BYTES
    metrics = {
        **not_run(p, "compiled" if compiled else "interpreter", tk.version()),
        "matches": matches,
        "elements": n,
        "programs": programs,
        "masked_lanes": masked,
        "compile_seconds": compile_s,
    }
    if not compiled:
        yield Note(
            f"Triton's interpreter ran the {programs:,} programs one after another in NumPy: the same "
            "program ids, blocks and masks as on a GPU, so the result above is real. Its time means "
            "nothing about the kernel's speed (it is Python's), so none is shown.",
            "result",
        )
        yield Note(
            "On a CUDA GPU this run compiles the same source to GPU code (Triton brings its own LLVM "
            "and ptxas), launches every program at once across the GPU's multiprocessors, and times "
            f"the kernel against torch.relu(x + y) on {p.size:,} elements. Fusing saves the trip of "
            f"x + y through memory: {FUSED_BYTES} bytes per element against {UNFUSED_BYTES}, so at "
            f"most {metric(bound, 'x')} on an add this memory-bound."
        )
        yield Finished(metrics)
        return

    ways = {
        "triton": lambda: tk.add_relu(kernel, x, y, p.block_size),
        "torch": lambda: torch.relu(x + y),
    }
    warmed: dict[str, WarmUp] = {}
    seconds_in_turns(ways, device, repeats=1, calls=1, warmed=warmed)
    slowest = max(w.last for w in warmed.values())
    calls = max(1, min(10_000, int(ROUND_S / max(slowest, 1e-7))))
    times = seconds_in_turns(ways, device, repeats=p.repeats, calls=calls)
    fused_s, torch_s = median(times["triton"]), median(times["torch"])
    speedup = median_interval(paired_ratios(times["torch"], times["triton"]))
    low, high = bounds(speedup)
    yield Table(
        f"relu(x + y), {n:,} float32, {p.repeats} rounds of {calls:,} calls in turns",
        ["way", "kernels", "bytes moved", "time", "GB/s"],
        [
            [
                "Triton, fused",
                "1",
                f"{FUSED_BYTES * n / 1e6:,.0f} MB",
                seconds(fused_s),
                f"{FUSED_BYTES * n / fused_s / 1e9:,.0f}",
            ],
            [
                "torch.relu(x + y)",
                "2",
                f"{UNFUSED_BYTES * n / 1e6:,.0f} MB",
                seconds(torch_s),
                f"{UNFUSED_BYTES * n / torch_s / 1e9:,.0f}",
            ],
        ],
    )
    ratio = speedup.median if speedup else torch_s / fused_s
    yield Note(
        f"The fused kernel ran {metric(ratio, 'x')} as fast as PyTorch's two"
        + (f" (its interval {metric(low, 'x')} to {metric(high, 'x')})" if low is not None and high is not None else "")
        + f". It moves {FUSED_BYTES} bytes per element to PyTorch's {UNFUSED_BYTES}, so a memory-bound add "
        f"gains at most {metric(bound, 'x')}; at small sizes a launch saved counts for more.",
        "result",
    )
    metrics.update(
        {
            "triton_seconds": fused_s,
            "torch_seconds": torch_s,
            "speedup": ratio,
            "speedup_low": low,
            "speedup_high": high,
        }
    )
    yield Finished(metrics)
