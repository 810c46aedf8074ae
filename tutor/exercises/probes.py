"""Probes: the checker calls one of the learner's functions with inputs of its own.

They run in the learner's process, after the program has finished (tutor/exercises/child.py), on
the functions the program defined: the program never runs twice. Each returns a dict of plain
values that tutor/exercises/grader.py judges. The names lint accepts are in tutor/exercises/names.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def _grad(weight: torch.Tensor) -> torch.Tensor:
    """The gradient a backward pass left on `weight`: one the probe's own loss reaches."""
    assert weight.grad is not None, "a reference weight without a gradient"
    return weight.grad


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
    batches = [
        (
            torch.randn(8, 1, 28, 28, generator=g).as_subclass(Tracked),
            torch.randint(0, 10, (8,), generator=g).as_subclass(Tracked),
        )
        for _ in range(3)
    ]
    model = Spy().to(device)
    try:
        fn(model, batches, torch.optim.SGD(model.parameters(), lr=0.01), SpyLoss(), device)
    except Exception as e:  # noqa: BLE001 - the learner's function may raise anything
        return {
            "error": f"calling {name}(model, loader, optimizer, criterion, device) raised {type(e).__name__}: {e}"[:600]
        }
    return {
        "batches_seen": len(seen["inputs"]),
        "inputs_moved": bool(seen["inputs"]) and all(seen["inputs"]),
        "targets_moved": bool(seen["targets"]) and all(seen["targets"]),
    }


def picks_device(fn: Callable[[], Any], name: str) -> dict[str, Any]:
    """Call fn() as if on a machine with CUDA, with only MPS, and with neither; what it returns
    (a torch.device or a string) is read as a device type each time."""
    from unittest import mock

    import torch

    answers: dict[str, str] = {}
    for machine, cuda, mps in (("cuda", True, False), ("mps", False, True), ("cpu", False, False)):
        with (
            mock.patch.object(torch.cuda, "is_available", lambda c=cuda: c),
            mock.patch.object(torch.backends.mps, "is_available", lambda m=mps: m),
        ):
            try:
                got = fn()
            except Exception as e:  # noqa: BLE001
                return {"error": f"calling {name}() as if on a {machine} machine raised {type(e).__name__}: {e}"[:600]}
        try:
            answers[machine] = torch.device(got).type
        except (TypeError, RuntimeError, ValueError):
            return {"error": f"{name}() returned {got!r}, not a device"[:600]}
    return {"answers": answers}


# ---------------------------------------------------------------- memory techniques
# Gradient accumulation, activation checkpointing and a batch-size search (lessons/gpu-lab-practice.yaml).
# Each measurement calls the learner's function once per program (cached by function), and several
# probes read one aspect each of what it did: tutor/exercises/behaviour.py PROBE_JUDGES judges them,
# so each mistake fails the requirement that names its cause.

_RUNS: dict[tuple[str, Any], dict[str, Any]] = {}


def _once(kind: str, fn: Callable[..., Any], name: str, measure: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    key = (kind, fn)
    if key not in _RUNS:
        _RUNS[key] = measure(fn, name)
    return _RUNS[key]


def _raised(call: str, e: BaseException) -> dict[str, Any]:
    return {"error": f"calling {call} raised {type(e).__name__}: {e}"[:600]}


ACCUM_K = 4  # accumulation_steps the checker passes
ACCUM_MICRO_BATCHES = 8  # two optimizer steps' worth
ACCUM_MICRO_SIZE = 6


def _accumulation(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Call fn(model, loader, optimizer, criterion, device, accumulation_steps) with 8 micro-batches
    and k = 4, and record what reached the model, when the gradients were cleared (seen from the
    gradient already in .grad as each backward arrives), and each optimizer step: when it ran and
    how its gradient compares with the full batch's (the micro-batches since the previous step as
    one batch, at the same weights), computed here."""
    from tutor.experiments.training import full_float32_matmuls

    with full_float32_matmuls():  # TF32 (on in NVIDIA's containers) would blur the comparison
        return _accumulation_measured(fn, name)


def _accumulation_measured(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    import copy

    import torch
    from torch import nn

    from tutor.lab import device

    g = torch.Generator().manual_seed(0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    batches = [
        (torch.randn(ACCUM_MICRO_SIZE, 12, generator=g), torch.randint(0, 3, (ACCUM_MICRO_SIZE,), generator=g))
        for _ in range(ACCUM_MICRO_BATCHES)
    ]
    inputs: list[Any] = []
    targets: list[Any] = []
    clears: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    first = model[0]
    assert isinstance(first, nn.Linear)  # built just above
    watched = first.weight

    def forward_pre(module: Any, args: tuple) -> None:
        if torch.is_grad_enabled() and args and isinstance(args[0], torch.Tensor):
            inputs.append(args[0].detach().clone())

    def before_accumulating(grad: Any) -> None:
        # A leaf's hook runs before the new gradient is added to .grad: what is there now is what
        # the earlier backward passes left, or nothing if the gradients were cleared since.
        held = watched.grad
        clears.append({"micro_batches": len(inputs), "cleared": held is None or not bool(held.abs().max() > 0)})

    class Loss(nn.Module):
        def forward(self, out: Any, y: Any) -> Any:
            targets.append(y.detach().clone())
            return nn.functional.cross_entropy(out, y)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def step_pre(opt: Any, args: tuple, kwargs: dict) -> None:
        grads = [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
        steps.append(
            {
                "micro_batches": len(inputs),
                "backwards": len(clears),
                "grads": grads,
                "weights": copy.deepcopy(model.state_dict()),
            }
        )

    handles = [
        model.register_forward_pre_hook(forward_pre),
        watched.register_hook(before_accumulating),
        optimizer.register_step_pre_hook(step_pre),
    ]
    try:
        fn(model, batches, optimizer, Loss(), device, ACCUM_K)  # a list: it has a len(), as a DataLoader does
    except Exception as e:  # noqa: BLE001 - the learner's function may raise anything
        return _raised(f"{name}(model, loader, optimizer, criterion, device, accumulation_steps={ACCUM_K})", e)
    finally:
        for handle in handles:
            handle.remove()

    reference = copy.deepcopy(model)
    checked: list[dict[str, Any]] = []
    start = 0
    for entry in steps:
        end = min(entry["micro_batches"], len(targets))
        if end <= start:  # no new micro-batch since the previous step: nothing to compare with
            checked.append({"micro_batches": entry["micro_batches"], "group": 0})
            continue
        reference.load_state_dict(entry["weights"])
        reference.zero_grad(set_to_none=True)
        x = torch.cat(inputs[start:end])
        y = torch.cat(targets[start:end])
        nn.functional.cross_entropy(reference(x), y).backward()
        want = torch.cat([_grad(p).reshape(-1) for p in reference.parameters()]).double()
        got = torch.cat([t.reshape(-1) for t in entry["grads"]]).double()
        norm = float(want.dot(want))
        checked.append(
            {
                "micro_batches": entry["micro_batches"],
                "backwards": entry["backwards"],
                "group": end - start,
                "close": bool(torch.allclose(got, want, rtol=1e-3, atol=1e-6)),
                "max_diff": float((got - want).abs().max()),
                "ratio": float(got.dot(want)) / norm if norm else 0.0,
                "cosine": float(nn.functional.cosine_similarity(got, want, dim=0)) if norm and got.norm() > 0 else 0.0,
            }
        )
        start = end
    return {
        "k": ACCUM_K,
        "micro_batches": len(inputs),
        "backwards": len(clears),
        "clears": clears[:64],
        "steps": checked[:64],
    }


def steps_once_per_k(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """fn's optimizer steps, counted against the micro-batches it ran (judged: one step per k)."""
    return _once("accumulation", fn, name, _accumulation)


def zero_grad_once_per_k(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Whether .grad was empty as each of fn's backward passes arrived (judged: once per k, at a group's start)."""
    return _once("accumulation", fn, name, _accumulation)


def accumulates_full_batch_gradient(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """The gradient at each of fn's optimizer steps against the full batch's (judged: allclose)."""
    return _once("accumulation", fn, name, _accumulation)


CKPT_BLOCKS = 6
CKPT_WIDTH = 48
CKPT_BATCH = 256  # activations of 48 KiB a layer: they, not the weights' 9 KiB gradients, make the peak


class _HeldCounter:
    """The bytes of the tensors that ops create, counted while they are alive (a storage counts
    once, from the op that makes it until it is freed), and the most held at once since
    `from_here()`. A CPU has no allocator statistics: this counts what CUDA's
    max_memory_allocated would, and it sees what checkpoint recomputes in backward, which
    saved-tensor hooks do not (checkpoint's own hooks take those tensors). Storages that existed
    before (the weights, the input, the gradients' buffers) are not counted."""

    def __init__(self, existing: set[int]) -> None:
        self.existing = existing
        self.live: set[int] = set()
        self.now = 0
        self.peak = 0

    def from_here(self) -> int:
        self.peak = self.now
        return self.now

    def mode(self) -> Any:
        import weakref

        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        counter = self

        def freed(key: int, nbytes: int) -> None:
            counter.live.discard(key)
            counter.now -= nbytes

        class Count(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and not t._is_view():
                        storage = t.untyped_storage()
                        key = id(storage)
                        if key not in counter.live and storage.data_ptr() not in counter.existing:
                            counter.live.add(key)
                            counter.now += storage.nbytes()
                            weakref.finalize(storage, freed, key, storage.nbytes())
                counter.peak = max(counter.peak, counter.now)
                return out

        return Count()


def _checkpointing(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Call fn(blocks, x) -- blocks an nn.Sequential of 6 blocks of 3 x (Linear + ReLU) -- and the
    plain forward (each block in turn) on a copy; then backward through both, and compare outputs
    and gradients. Measured for each: the bytes autograd keeps between forward and backward
    (saved-tensor hooks, the memory ledger's measure), and the most held at once during backward,
    recomputation included (_HeldCounter). Watched in fn's backward: each time a layer of a block
    runs again (checkpoint recomputing it) and each time a block's weights get their gradient, in
    order, so the blocks each checkpoint wrapped can be told apart. Warnings are kept: checkpoint
    says when it ran reentrant with no input requiring grad."""
    import copy
    import warnings

    import torch
    from torch import nn

    from tutor.experiments.training import saved_for_backward

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        blocks = nn.Sequential(
            *[
                nn.Sequential(*[m for _ in range(3) for m in (nn.Linear(CKPT_WIDTH, CKPT_WIDTH), nn.ReLU())])
                for _ in range(CKPT_BLOCKS)
            ]
        )
    g = torch.Generator().manual_seed(1)
    x = torch.randn(CKPT_BATCH, CKPT_WIDTH, generator=g)
    direction = torch.randn(CKPT_BATCH, CKPT_WIDTH, generator=g)  # the loss: a fixed projection of the output
    mine = copy.deepcopy(blocks)
    given = x.clone()
    existing = {t.data_ptr() for t in (*blocks.parameters(), *mine.parameters(), x, given, direction)}

    plain_held = _HeldCounter(existing)
    with plain_held.mode():
        with saved_for_backward(blocks) as saved:
            h = x
            for block in blocks:
                h = block(h)
            want = h
        plain_held.from_here()
        (want * direction).sum().backward()
        del h
    plain_bytes = sum(saved.values())

    events: list[list[int]] = []  # [1, block] a layer ran, [2, block] its weights got a gradient
    backward = False
    handles = []
    for number, block in enumerate(mine, 1):
        assert isinstance(block, nn.Sequential)  # built above: CKPT_BLOCKS Sequentials of layers
        for layer in block:
            if isinstance(layer, nn.Linear):
                handles.append(
                    layer.register_forward_pre_hook(
                        lambda module, args, b=number: events.append([1, b]) if backward else None
                    )
                )
                handles.append(layer.weight.register_hook(lambda grad, b=number: events.append([2, b])))
    held = _HeldCounter(existing)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with held.mode(), saved_for_backward(mine) as saved:
                got = fn(mine, given)
        except Exception as e:  # noqa: BLE001
            return _raised(f"{name}(blocks, x)", e)
        kept = sum(saved.values())
        said = " ".join(str(w.message) for w in caught)
        result: dict[str, Any] = {
            "blocks": CKPT_BLOCKS,
            "layers_per_block": 3,
            "plain_bytes": plain_bytes,
            "checkpointed_bytes": kept,
            "reentrant_without_grad": "None of the inputs have requires_grad=True" in said,
            "reentrant_by_default": "use_reentrant parameter should be passed explicitly" in said,
        }
        if not isinstance(got, torch.Tensor):
            result["returned"] = type(got).__name__
            return result
        result["shape_ok"] = tuple(got.shape) == tuple(want.shape)
        if not result["shape_ok"]:
            result["shape"] = list(got.shape)
            result["want_shape"] = list(want.shape)
            return result
        result["output_diff"] = float((got.detach().double() - want.detach().double()).abs().max())
        result["has_graph"] = bool(got.requires_grad)
        if got.requires_grad:
            backward = True
            try:
                with held.mode():
                    held.from_here()
                    (got * direction).sum().backward()
            except Exception as e:  # noqa: BLE001
                result["backward_error"] = f"{type(e).__name__}: {e}"[:400]
                return result
            finally:
                for handle in handles:
                    handle.remove()
            result["plain_peak_bytes"] = plain_held.peak
            result["checkpointed_peak_bytes"] = held.peak
            result["backward_events"] = events[:2000]
    missing = sorted({i + 1 for i, block in enumerate(mine) for p in block.parameters() if p.grad is None})
    diffs = [
        float((a.grad - b.grad).abs().max())
        for a, b in zip(blocks.parameters(), mine.parameters())
        if a.grad is not None and b.grad is not None
    ]
    result["blocks_without_gradient"] = missing
    result["gradient_diff"] = max(diffs, default=0.0)
    result["gradient_scale"] = max(float(_grad(p).abs().max()) for p in blocks.parameters())
    return result


def checkpoint_saves_activations(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """The activations fn's forward keeps for backward, against the plain forward's."""
    return _once("checkpointing", fn, name, _checkpointing)


def checkpoints_each_block(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Which blocks fn's backward ran again, and in which groups, and the most it held at once."""
    return _once("checkpointing", fn, name, _checkpointing)


def checkpoint_same_results(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """fn's output and the gradients through it, against the plain forward's."""
    return _once("checkpointing", fn, name, _checkpointing)


SEARCH_FITS = 700  # the largest batch that fits under the checker's cap
SEARCH_MAX_CALLS = 2000  # a linear scan from 1 still ends; a loop that never does is stopped
SEARCH_WIDTH = 32


class _SearchStopped(BaseException):
    """Raised by the checker's train_step when a search keeps trying (a BaseException, so that an
    `except Exception` in the learner's loop cannot swallow it)."""


def _search_model() -> Any:
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(SEARCH_WIDTH, 64), nn.ReLU(), nn.Linear(64, 10))


def _search_under_cap(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Call fn(train_step), where train_step(batch_size) is one training step of a small model on
    random data under a memory cap this checker sets: every tensor autograd keeps for backward
    counts against the cap while it is alive (a failed step's tensors too, for as long as anything
    -- the error's traceback -- keeps them), and the one that would pass it raises
    torch.OutOfMemoryError, as CUDA's allocator does at its limit. Batch 700 fits with nothing else
    held; 701 does not. Each call records its batch size, whether it ran inside an except block
    handling an out-of-memory error, and the bytes earlier steps still held as it began."""
    import gc
    import operator
    import sys
    import weakref

    import torch
    from torch import nn

    model = _search_model()
    params = {p.data_ptr() for p in model.parameters()}
    live: dict[int, int] = {}  # id of a kept tensor -> its bytes, while it is alive
    calls: list[dict[str, Any]] = []

    def kept_bytes(batch: int, cap: int | None, entry: dict[str, Any] | None) -> int:
        used = sum(live.values())
        seen: set[int] = set()

        def pack(t: Any) -> Any:
            nonlocal used
            if t.data_ptr() in params or t.data_ptr() in seen:
                return t.detach()
            seen.add(t.data_ptr())
            nbytes = t.numel() * t.element_size()
            if cap is not None and used + nbytes > cap:
                if entry is not None:
                    entry["oom"] = True
                raise torch.OutOfMemoryError(
                    f"out of memory: tried to allocate {nbytes:,} bytes with {used:,} of the checker's "
                    f"{cap:,}-byte cap in use"
                )
            used += nbytes
            kept = t.detach()
            if entry is not None:
                key = id(kept)
                live[key] = nbytes
                weakref.finalize(kept, live.pop, key, None)
            return kept

        x = torch.randn(batch, SEARCH_WIDTH)
        y = torch.randint(0, 10, (batch,))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return used

    cap = kept_bytes(SEARCH_FITS, None, None)
    if kept_bytes(SEARCH_FITS + 1, None, None) <= cap:  # pragma: no cover - autograd saves nothing per sample
        return {"error": "the checker's cap could not be set (a lesson error)"}

    def train_step(batch_size: Any) -> None:
        if len(calls) >= SEARCH_MAX_CALLS:
            raise _SearchStopped
        handling = sys.exc_info()[1]
        held = sum(live.values())
        if held and handling is None:
            gc.collect()  # a reference cycle is freed sooner or later: count only what the program keeps
            held = sum(live.values())
        batch = int(batch_size)
        entry = {"batch": batch, "oom": False, "held": held, "in_except": isinstance(handling, torch.OutOfMemoryError)}
        calls.append(entry)
        if held + batch * SEARCH_WIDTH * 4 > cap:  # the input alone would not fit: never allocate it
            entry["oom"] = True
            raise torch.OutOfMemoryError(
                f"out of memory: tried to allocate {batch * SEARCH_WIDTH * 4:,} bytes with {held:,} of the "
                f"checker's {cap:,}-byte cap in use"
            )
        kept_bytes(batch, cap, entry)

    try:
        answer = fn(train_step)
    except _SearchStopped:
        return {"error": f"{name}(train_step) called train_step {SEARCH_MAX_CALLS} times without returning"}
    except Exception as e:  # noqa: BLE001
        return _raised(f"{name}(train_step)", e)
    if isinstance(answer, torch.Tensor) and answer.numel() == 1:
        answer = answer.item()
    try:
        plain = None if isinstance(answer, bool) else operator.index(answer)  # int, NumPy int
    except TypeError:
        plain = int(answer) if isinstance(answer, float) and answer.is_integer() else None
    return {
        "answer": plain,
        "answer_text": repr(answer)[:80],
        "fits": SEARCH_FITS,
        "cap_bytes": cap,
        "calls": calls[:SEARCH_MAX_CALLS],
    }


def _search_with_a_bug(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Call fn(train_step) with a train_step that has a bug: every call raises PyTorch's real
    shape error (a RuntimeError that is not out of memory). A search that catches only
    out-of-memory errors lets it through."""
    import torch

    model = _search_model()
    calls = 0

    def train_step(batch_size: Any) -> None:
        nonlocal calls
        calls += 1
        if calls > SEARCH_MAX_CALLS:
            raise _SearchStopped
        model(torch.randn(int(batch_size), SEARCH_WIDTH - 1))  # the shapes cannot be multiplied

    try:
        answer = fn(train_step)
    except _SearchStopped:
        return {"propagated": False, "calls": calls, "returned": "nothing (it kept trying)", "bug": _bug_text()}
    except RuntimeError as e:
        if isinstance(e, torch.OutOfMemoryError):
            return _raised(f"{name}(train_step)", e)
        return {"propagated": True, "calls": calls}
    except Exception as e:  # noqa: BLE001 - another error from the learner's own code
        return _raised(f"{name}(train_step)", e)
    return {"propagated": False, "calls": calls, "returned": repr(answer)[:80], "bug": _bug_text()}


def _bug_text() -> str:
    import torch

    try:
        _search_model()(torch.randn(1, SEARCH_WIDTH - 1))
    except RuntimeError as e:
        return f"RuntimeError: {str(e).splitlines()[0]}"[:200]
    return "RuntimeError"  # pragma: no cover


def finds_largest_batch(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """fn(train_step)'s answer under the checker's cap, and each batch it tried."""
    return _once("search", fn, name, _search_under_cap)


def retries_outside_except(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Whether fn called train_step again while an out-of-memory error was being handled."""
    return _once("search", fn, name, _search_under_cap)


def frees_memory_after_oom(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """The bytes a failed step still held when fn's next try began."""
    return _once("search", fn, name, _search_under_cap)


def catches_only_oom(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    """Whether a non-memory error from train_step gets out of fn."""
    return _once("search-bug", fn, name, _search_with_a_bug)


PROBE_FUNCTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "moves_batch_to_device": moves_batch_to_device,
    "picks_device": picks_device,
    "steps_once_per_k": steps_once_per_k,
    "zero_grad_once_per_k": zero_grad_once_per_k,
    "accumulates_full_batch_gradient": accumulates_full_batch_gradient,
    "checkpoint_saves_activations": checkpoint_saves_activations,
    "checkpoints_each_block": checkpoints_each_block,
    "checkpoint_same_results": checkpoint_same_results,
    "finds_largest_batch": finds_largest_batch,
    "retries_outside_except": retries_outside_except,
    "frees_memory_after_oom": frees_memory_after_oom,
    "catches_only_oom": catches_only_oom,
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
