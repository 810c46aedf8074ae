"""Two small Triton kernels, written the way Triton's tutorials write them, and `build`, which
makes each one either a compiled GPU kernel or one that Triton's interpreter runs on the CPU.

Importing this module imports triton: the experiment imports it inside a try, so a machine
without triton is told so rather than shown a traceback.

The kernels are plain functions here, decorated by `build` at run time rather than with
`@triton.jit` at import: triton 3.x decides at decoration which kind of function it makes
(`triton.jit` asks `triton.knobs.runtime.interpret`, read from TRITON_INTERPRET each time it is
asked), so the same source becomes an interpreted kernel when TRITON_INTERPRET=1 is set around
the decoration, and a compiled one otherwise, in the same process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import triton
import triton.language as tl


def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Each program handles one block of BLOCK_SIZE elements: which block, from its id in the grid.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    # The last block runs past the end when n is not a multiple of BLOCK_SIZE: the mask turns
    # those lanes' loads and stores off.
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    # x + y stays in registers: one read of each input, one write of the output, one kernel.
    tl.store(out_ptr + offsets, tl.maximum(x + y, 0.0), mask=mask)


def program_ids_kernel(out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    # Writes, for each element, the id of the program that handled it.
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, pid, mask=offsets < n_elements)


@contextmanager
def _interpret(on: bool) -> Iterator[None]:
    """TRITON_INTERPRET set to 1 (or removed) for the block, and put back as it was after."""
    before = os.environ.get("TRITON_INTERPRET")
    if on:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before


def build(kernel: Callable[..., Any], interpret: bool) -> Any:
    """`triton.jit(kernel)`: compiled for the GPU on its first launch, or, with `interpret`, run by
    Triton's interpreter (NumPy, on the CPU, each program in turn)."""
    with _interpret(interpret):
        return triton.jit(kernel)


def add_relu(kernel: Any, x: Any, y: Any, block_size: int) -> Any:
    """relu(x + y) by `kernel` (an add_relu_kernel from `build`), as the tutorials' wrappers do:
    allocate the output, size the grid, launch."""
    import torch

    out = torch.empty_like(x)
    n = out.numel()
    kernel[(triton.cdiv(n, block_size),)](x, y, out, n, BLOCK_SIZE=block_size)
    return out


def version() -> str:
    return str(triton.__version__)
