"""The memory layout the memory-ledger instrument draws for mixed precision is the one torch.amp
produces: FP32 weights and gradients, and autocast's 16-bit copies of the weights kept for the
backward pass (2 bytes a parameter more than FP32 while a step runs)."""

from __future__ import annotations

import torch
from torch import nn

from tutor.instruments.memory_ledger import BYTES_PER_PARAM


def _saved_bytes(model: nn.Module, x: torch.Tensor, amp: bool) -> dict[torch.dtype, int]:
    """Bytes autograd keeps for the backward pass that are not the model's own parameters, by dtype."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, tuple[torch.dtype, int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            kept[ptr] = (t.dtype, t.untyped_storage().nbytes())
        return t

    with (
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
        torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp),
    ):
        loss = model(x).float().square().mean()
    loss.backward()
    out: dict[torch.dtype, int] = {}
    for dtype, nbytes in kept.values():
        out[dtype] = out.get(dtype, 0) + nbytes
    return out


def test_autocast_keeps_16_bit_copies_of_the_weights_and_fp32_weights_and_gradients():
    torch.manual_seed(0)
    width, batch = 512, 4
    model = nn.Sequential(nn.Linear(width, width, bias=False), nn.ReLU(), nn.Linear(width, width, bias=False))
    weights = sum(p.numel() for p in model.parameters())
    # The input needs a gradient, as in a real network past its first layer (an embedding's
    # output): then every layer's backward needs its weight, so each 16-bit copy is kept.
    x = torch.randn(batch, width, requires_grad=True)

    plain = _saved_bytes(model, x, amp=False)
    assert torch.bfloat16 not in plain  # float32 autograd keeps the parameters themselves: no copies

    mixed = _saved_bytes(model, x, amp=True)
    activations = 2 * batch * width * 2  # each matmul's 16-bit input
    assert mixed[torch.bfloat16] == weights * 2 + activations  # a 16-bit copy of every weight, 2 B each
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())

    w, g, copies, _ = BYTES_PER_PARAM["mixed"]
    assert (w, g, copies) == (4, 4, 2)
