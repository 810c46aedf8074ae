"""Probes: the checker calls one of the learner's functions with inputs of its own.

They run in the learner's process, after the program has finished (tutor/exercises/child.py), on
the functions the program defined: the program never runs twice. Each returns a dict of plain
values that tutor/exercises/grader.py judges. The names lint accepts are in tutor/exercises/names.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def moves_batch_to_device(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Call fn(model, loader, optimizer, criterion, device) -- the notebook's train_one_epoch --
    with batches that remember whether .to()/.cuda() moved them, and a model and loss that look."""
    import torch
    from torch import nn

    from tutor.lab import MNISTClassifier, device

    class Tracked(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            out = super().__torch_function__(func, types, args, kwargs or {})
            if func in (torch.Tensor.to, torch.Tensor.cuda) and isinstance(out, Tracked):
                if out is args[0]:
                    # Already there (.to("cpu") on the CPU returns the same tensor): hand back a
                    # new one, as a real move would, so a dropped result still counts as not moved.
                    with torch._C.DisableTorchFunctionSubclass():
                        out = out.view_as(out).as_subclass(Tracked)
                out._moved = True
            return out

    seen: dict[str, list[bool]] = {"inputs": [], "targets": []}

    class Spy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = MNISTClassifier()

        def forward(self, x):
            seen["inputs"].append(bool(getattr(x, "_moved", False)) and x.device.type == device.type)
            return self.inner(x.as_subclass(torch.Tensor))

    class SpyLoss(nn.Module):
        def forward(self, out, y):
            seen["targets"].append(bool(getattr(y, "_moved", False)) and y.device.type == device.type)
            return nn.functional.cross_entropy(out.as_subclass(torch.Tensor), y.as_subclass(torch.Tensor))

    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 1, 28, 28, generator=g).as_subclass(Tracked),
                torch.randint(0, 10, (8,), generator=g).as_subclass(Tracked)) for _ in range(3)]
    model = Spy().to(device)
    try:
        fn(model, batches, torch.optim.SGD(model.parameters(), lr=0.01), SpyLoss(), device)
    except Exception as e:  # noqa: BLE001 - the learner's function may raise anything
        return {"error": f"calling {name}(model, loader, optimizer, criterion, device) raised "
                         f"{type(e).__name__}: {e}"[:600]}
    return {"batches_seen": len(seen["inputs"]),
            "inputs_moved": bool(seen["inputs"]) and all(seen["inputs"]),
            "targets_moved": bool(seen["targets"]) and all(seen["targets"])}


def picks_device(fn: Callable[[], Any], name: str) -> dict[str, Any]:
    """Call fn() as if on a machine with CUDA, with only MPS, and with neither; what it returns
    (a torch.device or a string) is read as a device type each time."""
    from unittest import mock

    import torch

    answers: dict[str, str] = {}
    for machine, cuda, mps in (("cuda", True, False), ("mps", False, True), ("cpu", False, False)):
        with mock.patch.object(torch.cuda, "is_available", lambda c=cuda: c), \
                mock.patch.object(torch.backends.mps, "is_available", lambda m=mps: m):
            try:
                got = fn()
            except Exception as e:  # noqa: BLE001
                return {"error": f"calling {name}() as if on a {machine} machine raised {type(e).__name__}: {e}"[:600]}
        try:
            answers[machine] = torch.device(got).type
        except (TypeError, RuntimeError, ValueError):
            return {"error": f"{name}() returned {got!r}, not a device"[:600]}
    return {"answers": answers}


PROBE_FUNCTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "moves_batch_to_device": moves_batch_to_device,
    "picks_device": picks_device,
}


def run_probes(specs: list[dict[str, str]], namespace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{requirement id: result} for each {"id", "name", "probe"} against the program's globals."""
    results: dict[str, dict[str, Any]] = {}
    for spec in specs:
        fn = namespace.get(spec["name"])
        probe = PROBE_FUNCTIONS.get(spec["probe"])
        if probe is None:
            results[spec["id"]] = {"error": f"the tutor has no probe {spec['probe']!r}"}
        elif not callable(fn):
            results[spec["id"]] = {"missing": True}
        else:
            results[spec["id"]] = probe(fn, spec["name"])
    return results
