"""Judge what a learner's program did (tutor/exercises/observe.py's summary), not how its code is spelt.

A `behaviour` requirement names one of BEHAVIOURS. Each judge returns a Judgement: passed, the
cause in one sentence a learner can act on (what the run showed), and whether the run could tell
at all. Some judges also explain a stop: a program that asked for CUDA on a machine without it
stopped because of the very mistake the requirement is about, so that verdict counts even though
the program did not finish. The lesson's own feedback follows the cause as the detail.

Pure Python, no torch: the TUI imports this.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_NO_CUDA = re.compile(
    r"Torch not compiled with CUDA|no NVIDIA driver|No CUDA GPUs are available|CUDA driver initialization failed"
    r"|no CUDA-capable device|CUDA is not available|Cannot access accelerator device when none is available",
    re.I,
)
_MISMATCH = re.compile(
    r"Expected all tensors to be on the same device|same device|not on the expected device"
    r"|Placeholder storage has not been allocated on MPS device",
    re.I,
)
# GradScaler refuses float16 gradients (a model cast by hand) with "Attempting to unscale FP16 gradients".
_DTYPE_CLASH = re.compile(r"same dtype|expected scalar type|dtype|unscale FP16 gradients", re.I)
_HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class Judgement:
    passed: bool
    cause: str = ""  # empty when passed
    judged: bool = True  # False: this run could not show it (the program stopped first, say)
    explains_stop: bool = False  # the failure is why the program stopped
    # False: the cause is a mistake another requirement names, and this requirement's own advice
    # (the lesson's feedback) would tell the learner to fix what they did right: it is left out.
    advice: bool = True


PASS = Judgement(True)


def _unknown(why: str) -> Judgement:
    return Judgement(False, why, judged=False)


@dataclass(frozen=True)
class Context:
    observed: dict[str, Any]
    source: str  # the learner's code
    error_type: str | None = None
    error_message: str | None = None
    stopped: bool = False  # the program did not run to its end
    reports: dict[str, Any] = field(default_factory=dict)  # what it gave tutor.lab.report

    @property
    def trained(self) -> list[dict[str, Any]]:
        """The models the program trained (a forward pass with gradients on)."""
        return [m for m in self.observed.get("models", []) if m.get("train_calls")]

    @property
    def devices(self) -> set[str]:
        """The device types batches went to."""
        return {key.split("/")[1] for m in self.observed.get("models", []) for key in m.get("devices", {})}


def _untrained(ctx: Context) -> Judgement:
    """The verdict of a check about training when the run trained no model."""
    if ctx.stopped:
        return _unknown("the program stopped before it trained a model")
    return Judgement(False, "Your program never trained a model (no forward pass with gradients on).")


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


def _model_name(ctx: Context, model: dict[str, Any]) -> str:
    trained = ctx.trained
    if len(trained) <= 1:
        return "the model"
    return f"the {_ordinal(trained.index(model) + 1)} model you trained"


# ---------------------------------------------------------------- devices


def device_fallback(ctx: Context) -> Judgement:
    """The device is chosen by asking torch.cuda.is_available(), so the script runs without a GPU."""
    if ctx.error_type and _NO_CUDA.search(ctx.error_message or ""):
        return Judgement(
            False,
            "Your program asked for CUDA on this machine, which has none, and stopped: "
            f"{_first_line(ctx.error_message)}.",
            explains_stop=True,
        )
    if ctx.observed.get("cuda_asked", 0) == 0:
        if ctx.stopped:
            return _unknown("the program stopped before it chose a device")
        return Judgement(
            False,
            "Your program never asked torch.cuda.is_available(), so its device does not "
            "depend on the machine it runs on.",
        )
    return PASS


def asks_mps(ctx: Context) -> Judgement:
    """Where CUDA is absent, the device choice asks torch.backends.mps.is_available() next."""
    if ctx.observed.get("mps_asked"):
        return PASS
    if ctx.observed.get("cuda_available"):
        return PASS  # `elif mps` is never reached on a CUDA machine: this run cannot tell
    if ctx.stopped:
        return _unknown("the program stopped before it chose a device")
    return Judgement(
        False,
        "CUDA is not here, and your program never asked torch.backends.mps.is_available() before settling on a device.",
    )


def moves_a_tensor(ctx: Context) -> Judgement:
    """The program moves a tensor with .to(device) (or .cuda())."""
    if ctx.observed.get("tensor_moves"):
        return PASS
    if ctx.stopped:
        return _unknown("the program stopped before it moved a tensor")
    return Judgement(False, "Your program never moves a tensor with .to(...).")


def model_on_device(ctx: Context) -> Judgement:
    """Every trained model had its weights on the device its batches went to, moved with .to()."""
    if not ctx.trained:
        return _untrained(ctx)
    for model in ctx.trained:
        name = _model_name(ctx, model)
        for key in model.get("devices", {}):
            weights, batch = key.split("/")
            if weights != batch and model.get("moved_to") == weights and model.get("inputs_unmoved"):
                continue  # moved as asked; the batch stayed behind: the batch check tells that cause
            if weights != batch:
                return Judgement(
                    False,
                    f"{name.capitalize()} had its weights on {weights} while its batches were on {batch}.",
                    explains_stop=bool(ctx.error_type and _MISMATCH.search(ctx.error_message or "")),
                )
        if not model.get("moved_to") and all(k.startswith("cpu/") for k in model.get("devices", {})):
            return Judgement(
                False,
                f"{name.capitalize()} was never moved with .to(device): its weights stayed "
                "on the CPU, where they were made.",
            )
    return PASS


def batches_on_device(ctx: Context) -> Judgement:
    """Every training batch (images and labels) reached the model through .to(device)."""
    if not ctx.trained:
        return _untrained(ctx)
    mismatch = bool(ctx.error_type and _MISMATCH.search(ctx.error_message or ""))
    unmoved = [m for m in ctx.trained if m.get("inputs_unmoved")]
    if unmoved:
        # After a device-mismatch stop, name the model whose weights were on a GPU: its unmoved batch raised it.
        on_gpu = [(m, w) for m in unmoved for w in sorted({k.split("/")[0] for k in m.get("devices", {})} - {"cpu"})]
        model, stop = unmoved[0], ""
        if mismatch and on_gpu:
            model, gpu = on_gpu[0]
            stop = (
                f", so the forward pass on {gpu} raised the device-mismatch error that stopped the program "
                f"({_first_line(ctx.error_message, 100)})"
            )
        return Judgement(
            False,
            f"{model['inputs_unmoved']:,} of {model.get('inputs_seen', 0):,} batches reached "
            f"{_model_name(ctx, model)} without being moved: the tensor the model got never came "
            f"out of .to(device){stop}.",
            explains_stop=mismatch,
        )
    criteria = ctx.observed.get("criteria", {})
    if criteria.get("targets_unmoved"):
        # On a GPU the loss then raises the device-mismatch error: that is why the program stopped.
        return Judgement(
            False,
            f"{criteria['targets_unmoved']:,} of {criteria.get('targets_seen', 0):,} batches of "
            "labels reached the loss without being moved with .to(device).",
            explains_stop=mismatch,
        )
    return PASS


# ---------------------------------------------------------------- timing


def timing_synchronized(ctx: Context) -> Judgement:
    """Every timing the program takes (a clock read subtracted from a later one, with training in
    between) starts and stops with no device work queued."""
    timings = [t for t in ctx.observed.get("timings", []) if t.get("with_work")]
    if not timings:
        if ctx.stopped:
            return _unknown("the program stopped before it timed anything")
        return Judgement(
            False,
            "Your program times none of its training: no clock read (time.perf_counter(), "
            "time.time() ...) is subtracted from a later one with training in between.",
        )
    on_cpu_only = ctx.devices <= {"cpu"}
    for key, line_key, role in (("unsynced_stops", "stop_line", "stops"), ("unsynced_starts", "start_line", "starts")):
        for timing in sorted(timings, key=lambda t: t[line_key]):
            line = timing[line_key]
            # GPU work queued at the read fails it. CPU work never queues, but on a CPU-only run it
            # is all the run shows, and a sync guarded by `if device.type == "cuda":` never runs
            # there: read the code. On a GPU run a CPU timing (the same helper, called for the CPU) is fine.
            if not timing.get(key) and not (on_cpu_only and timing.get("cpu_" + key)):
                continue
            if on_cpu_only and sync_precedes(ctx.source, line):
                continue
            return Judgement(
                False,
                f"The clock read on line {line} {role} a timing while device work may still "
                "be queued: no synchronize ran between the last training step and it.",
            )
    return PASS


def sync_precedes(source: str, line: int) -> bool:
    """The statement before the one on `line` (in its block, or before the block it opens) calls
    something named synchronize, directly, under an `if`, or inside a function of the learner's
    that it calls (a `sync(device)` helper whose body synchronises): whatever the helper is named."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return False
    found = False
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}

    def calls_sync(node: ast.AST, depth: int = 0) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                f = sub.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if name == "synchronize":
                    return True
                if (
                    name in functions
                    and depth < 3
                    and functions[name] is not node
                    and calls_sync(functions[name], depth + 1)
                ):
                    return True
        return False

    def visit(body: list[ast.stmt], before: ast.stmt | None) -> None:
        nonlocal found
        prev = before
        for stmt in body:
            if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                inner = [
                    getattr(stmt, f)
                    for f in ("body", "orelse", "finalbody")
                    if isinstance(getattr(stmt, f, None), list)
                ]
                nested = [s for block in inner for s in block if s.lineno <= line <= (s.end_lineno or s.lineno)]
                if nested:
                    for block in inner:
                        visit(block, prev)
                elif prev is not None and calls_sync(prev):
                    found = True
                return
            prev = stmt

    visit(tree.body, None)
    return found


# ---------------------------------------------------------------- mixed precision


def _autocast_kinds(model: dict[str, Any]) -> set[str]:
    return {k for k, n in model.get("autocast", {}).items() if n}


def autocast_forward(ctx: Context) -> Judgement:
    """A model trained with its forward pass under autocast in a 16-bit dtype, on its own device."""
    if not ctx.trained:
        return _untrained(ctx)
    if any(_autocast_kinds(m) & set(_HALF) for m in ctx.trained):
        return PASS
    blocks = ctx.observed.get("autocast_blocks", [])
    batch_devices = ctx.devices
    other = sorted({b["device"] for b in blocks if b.get("device") not in batch_devices})
    if other:
        here = ", ".join(sorted(batch_devices)) or "another device"
        return Judgement(
            False,
            f"Your autocast is for '{other[0]}', but the model ran on {here}: autocast "
            "switched itself off, so the mixed-precision run was float32. Pass device.type.",
        )
    if blocks and not any(b.get("enabled") for b in blocks):
        return Judgement(
            False, "Every autocast block was entered with enabled=False, so no forward pass ran in 16-bit."
        )
    if blocks:
        return Judgement(False, "An autocast block ran, but no training forward pass ran inside it.")
    return Judgement(False, "No forward pass ran under torch.autocast: every operation ran in float32.")


def float32_baseline(ctx: Context) -> Judgement:
    """A model trained with autocast off: the float32 run to compare with."""
    if not ctx.trained:
        return _untrained(ctx)
    if any(_autocast_kinds(m) <= {"off"} for m in ctx.trained):
        return PASS
    dtypes = sorted({k for m in ctx.trained for k in _autocast_kinds(m)} - {"off"})
    return Judgement(
        False,
        f"Every run trained under autocast ({', '.join(dtypes)}): the float32 baseline was "
        "mixed precision too. Pass enabled=use_amp, so the baseline runs with autocast off.",
    )


def backward_outside_autocast(ctx: Context) -> Judgement:
    """backward() and the optimizer step ran outside the autocast block."""
    inside = ctx.observed.get("backward", {}).get("in_autocast", 0)
    if inside:
        off = not any(b.get("enabled") for b in ctx.observed.get("autocast_blocks", []))
        return Judgement(
            False,
            f"backward() ran inside an autocast block ({inside:,} times)"
            + (", switched off on this machine but on where mixed precision runs." if off else "."),
        )
    if any(s.get("steps_in_autocast") for s in ctx.observed.get("scalers", [])):
        return Judgement(False, "scaler.step() ran inside an autocast block.")
    return PASS


def steps_through_scaler(ctx: Context) -> Judgement:
    """Where a GradScaler scales the loss, the step goes through scaler.step and scaler.update follows;
    float16 autocast on CUDA has an enabled scaler."""
    bypassed = sum(o.get("bypassed_scaler", 0) for o in ctx.observed.get("optimizers", []))
    if bypassed:
        return Judgement(
            False,
            f"optimizer.step() was called directly {bypassed:,} times after "
            "scaler.scale(loss).backward(), not through scaler.step(optimizer).",
        )
    for scaler in ctx.observed.get("scalers", []):
        if scaler.get("steps") and not scaler.get("updates"):
            return Judgement(
                False, "scaler.step(optimizer) ran, but scaler.update() never did, so the scale never adapts."
            )
    fp16_cuda = any(
        "float16" in _autocast_kinds(m) and any(k.endswith("/cuda") for k in m.get("devices", {})) for m in ctx.trained
    )
    if fp16_cuda and not any(s.get("enabled") and s.get("steps") for s in ctx.observed.get("scalers", [])):
        return Judgement(
            False,
            "float16 autocast ran on CUDA without an enabled GradScaler stepping the "
            "optimizer: small float16 gradients can underflow to zero.",
        )
    return PASS


def weights_float32(ctx: Context) -> Judgement:
    """The weights stay float32 while training (autocast casts per operation; no .half())."""
    for model in ctx.trained:
        low = sorted(set(model.get("param_dtypes", {})) & set(_HALF))
        if low:
            return Judgement(
                False,
                f"{_model_name(ctx, model).capitalize()} had {low[0]} weights: it was cast "
                "by hand (.half() or .to(dtype)).",
                explains_stop=bool(ctx.error_type and _DTYPE_CLASH.search(ctx.error_message or "")),
            )
    return PASS


def amp_only_on_cuda(ctx: Context) -> Judgement:
    """Mixed precision is on where the batches are on CUDA, and off elsewhere."""
    if not ctx.trained:
        return _untrained(ctx)
    for model in ctx.trained:
        kinds = _autocast_kinds(model)
        on_cuda = any(k.endswith("/cuda") for k in model.get("devices", {}))
        if on_cuda and not kinds & set(_HALF):
            return Judgement(False, "The model trained on CUDA in float32: mixed precision was off where it helps.")
        if not on_cuda and kinds & set(_HALF):
            where = ", ".join(sorted(ctx.devices)) or "this device"
            dtype = sorted(kinds & set(_HALF))[0]
            return Judgement(
                False,
                f"Mixed precision ran on {where} ({dtype} autocast), where it is kept off: switch it on only for CUDA.",
            )
    return PASS


# ---------------------------------------------------------------- checkpoints and comparisons


def saves_during_training(ctx: Context) -> Judgement:
    """A checkpoint was saved before training ended (each epoch), not only once after it."""
    saves = ctx.observed.get("saves", [])
    if not saves:
        if ctx.stopped:
            return _unknown("the program stopped before it saved anything")
        return Judgement(False, "Your program never called torch.save.")
    phases = max((m.get("phases", 0) for m in ctx.trained), default=0)
    last_train = max((m.get("last_train_work", 0) for m in ctx.trained), default=0)
    if phases >= 2 and not any(s.get("work", 0) < last_train for s in saves):
        return Judgement(
            False,
            f"torch.save ran {len(saves)} time{'s' if len(saves) != 1 else ''}, all after "
            f"training ended ({phases} epochs): a crash mid-run would have lost everything.",
        )
    return PASS


def loads_to_cpu(ctx: Context) -> Judgement:
    """Every torch.load in the program passes map_location."""
    loads = ctx.observed.get("loads", [])
    if not loads:
        if ctx.stopped:
            return _unknown("the program stopped before it loaded the checkpoint")
        return Judgement(False, "Your program never loads the checkpoint with torch.load.")
    bare = [entry for entry in loads if entry.get("map_location") is None]
    if bare:
        return Judgement(
            False,
            f"torch.load on line {bare[0].get('line')} has no map_location: it puts each "
            "tensor back on the device it was saved from.",
        )
    return PASS


def compares_with_tolerance(ctx: Context) -> Judgement:
    """The predictions are compared with a tolerance (torch.allclose, isclose or testing.assert_close)."""
    comparisons = ctx.observed.get("comparisons", {})
    if comparisons.get("allclose"):
        return PASS
    if ctx.stopped:
        return _unknown("the program stopped before it compared the predictions")
    if comparisons.get("equal"):
        return Judgement(False, "The predictions are compared with torch.equal, which wants every bit equal.")
    return Judgement(False, "The predictions are never compared with torch.allclose.")


def compares_outputs_and_gradients(ctx: Context) -> Judgement:
    """Two runs that should give the same results (checkpointed and plain) are compared on their
    outputs and on every weight's gradient (torch.allclose, isclose, equal or testing.assert_close),
    or until a comparison finds a difference: a program that stops there (and, all(...)) has its
    answer. What each comparison held is told by value (tutor/exercises/observe.py)."""
    seen = ctx.observed.get("compared") or {}
    if not seen.get("calls"):
        if ctx.stopped:
            return _unknown("the program stopped before it compared the two runs")
        return Judgement(
            False,
            "Your program never compares the two runs' results (no torch.allclose, torch.equal or "
            "torch.testing.assert_close on them).",
        )
    if seen.get("differences"):
        return PASS  # it found a difference, and stopped there honestly: the cause is the forward's, named apart
    total = int(seen.get("weights_with_gradients") or 0)
    covered = len(seen.get("gradients") or [])
    if not seen.get("outputs") and not covered:
        return Judgement(
            False,
            "Your program's comparisons held neither the outputs of the two forward passes nor "
            "the weights' gradients after their backward passes.",
        )
    if not covered:
        return Judgement(
            False,
            f"Your program compared the outputs of the two forward passes, but none of the {total} "
            "weights' gradients: equal outputs do not show equal gradients (a checkpoint that "
            "builds no graph gives the same outputs and no gradient at all).",
        )
    if covered < total:
        return Judgement(
            False,
            f"Your program compared the gradients of {covered} of the {total} weights that got one; "
            "every pair should be compared.",
        )
    if not seen.get("outputs"):
        return Judgement(
            False, "Your program compared the weights' gradients but not the outputs of the two forward passes."
        )
    return PASS


# ---------------------------------------------------------------- data parallel (a torchrun launch)
# Each rank wrote its own summary; the grader hands them over as observed["ranks"] (index = rank),
# rank 0's summary being the rest of `observed`.

_NO_GROUP = re.compile(r"Default process group has not been initialized|init_process_group", re.I)
SHARED_MAX = 0.02  # share of a rank's samples another rank may also see in an epoch (a sampler's padding)
COVERED_MIN = 0.98  # share of the dataset the ranks together must train on in an epoch (MNIST repeats a few images)
WEIGHTS_RTOL = 1e-6  # weight fingerprints of two ranks after the same step: equal but for float noise


def _ranks(ctx: Context) -> list[dict[str, Any]] | Judgement:
    """Every rank's summary, or the verdict when the run cannot give them."""
    ranks = ctx.observed.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return _unknown(
            "this check compares the processes of a torchrun launch, and this run was one process "
            "(a lesson error: the step needs launch)"
        )
    for rank, summary in enumerate(ranks):
        if not isinstance(summary, dict):
            return _unknown(f"rank {rank} stopped before the checker could see what it did")
    return ranks


def _trained_devices(summary: dict[str, Any]) -> set[str]:
    return {
        key.split("/")[1] for m in summary.get("models", []) if m.get("train_calls") for key in m.get("devices", {})
    }


def joins_process_group(ctx: Context) -> Judgement:
    """Every rank joined the process group torchrun set up (init_process_group: the world size
    torchrun started, nccl where the batches were on CUDA, gloo on the CPU) and left it with
    destroy_process_group."""
    ranks = _ranks(ctx)
    if isinstance(ranks, Judgement):
        return ranks
    n = len(ranks)
    for rank, summary in enumerate(ranks):
        group = summary.get("process_group", {})
        if not group.get("joined"):
            explains = bool(ctx.error_type and _NO_GROUP.search(ctx.error_message or ""))
            if ctx.stopped and not explains:
                return _unknown(f"rank {rank} stopped before it joined the process group")
            return Judgement(
                False,
                f"Rank {rank} never called dist.init_process_group(), so it was never part of "
                f"the group of {n} processes torchrun started.",
                explains_stop=explains,
            )
        size = group.get("world_size")
        if isinstance(size, int) and size != n:
            return Judgement(
                False,
                f"Rank {rank} joined a group of {size} process{'es' if size != 1 else ''}, but "
                f"torchrun started {n}: let init_process_group read WORLD_SIZE and RANK from the "
                "environment torchrun sets.",
            )
        backend = str(group.get("backend") or "")
        devices = _trained_devices(summary)
        if "cuda" in devices and backend != "nccl":
            return Judgement(
                False,
                f"Rank {rank} trained on CUDA with the {backend or 'default'} backend: GPUs "
                "exchange gradients through nccl.",
            )
        if devices and devices <= {"cpu"} and backend == "nccl":
            return Judgement(
                False,
                f"Rank {rank} trained on the CPU with the nccl backend, which moves only CUDA tensors: use gloo there.",
            )
    left = [rank for rank, summary in enumerate(ranks) if not summary.get("process_group", {}).get("left")]
    if left:
        if ctx.stopped:
            return _unknown("the program stopped before it left the process group")
        return Judgement(
            False,
            f"Rank {left[0]} never called dist.destroy_process_group() at the end, so it left "
            "its connections to the other processes for the interpreter's exit to tear down.",
        )
    return PASS


def _training_passes(ctx: Context, ranks: list[dict[str, Any]]) -> list[list[dict[str, Any]]] | Judgement:
    """Each rank's passes over a DataLoader that training used, or the verdict when a rank has none."""
    passes = [summary.get("passes") or [] for summary in ranks]
    for rank, mine in enumerate(passes):
        if mine:
            continue
        if ctx.stopped:
            return _unknown(f"the program stopped before rank {rank} trained on a batch")
        if not any(m.get("train_calls") for m in ranks[rank].get("models", [])):
            return Judgement(False, f"Rank {rank} never trained the model (no forward pass with gradients on).")
        return Judgement(
            False,
            f"Rank {rank} trained on batches that did not come from a DataLoader, so which "
            "images each process trained on could not be seen: build the training loader "
            "with DataLoader(dataset, batch_size=..., sampler=...).",
        )
    return passes


def ranks_split_data(ctx: Context) -> Judgement:
    """In every epoch each rank trained on its own share of the dataset: (almost) no image in two
    ranks' shares, and the shares together cover the dataset the DataLoader iterated."""
    ranks = _ranks(ctx)
    if isinstance(ranks, Judgement):
        return ranks
    passes = _training_passes(ctx, ranks)
    if isinstance(passes, Judgement):
        return passes
    n = len(ranks)
    for epoch in range(min(len(p) for p in passes)):
        shares = [set(p[epoch].get("samples", [])) for p in passes]
        for a in range(n):
            for b in range(a + 1, n):
                common = len(shares[a] & shares[b])
                smaller = max(1, min(len(shares[a]), len(shares[b])))
                if common / smaller <= SHARED_MAX:
                    continue
                sampler = passes[a][epoch].get("sampler") or "its sampler"
                if common / smaller > 1 - SHARED_MAX:
                    return Judgement(
                        False,
                        f"In epoch {epoch + 1} ranks {a} and {b} trained on the same "
                        f"{common:,} images: every process went through the whole training "
                        f"set (its DataLoader drew them with {sampler}), so {n} processes did "
                        f"the same work {n} times over.",
                    )
                return Judgement(
                    False,
                    f"In epoch {epoch + 1}, {common:,} of the {len(shares[a]):,} images rank {a} "
                    f"trained on were in rank {b}'s share too ({common / smaller:.0%}): the "
                    "ranks' shares overlap.",
                )
        size = max((p[epoch].get("dataset") or 0 for p in passes), default=0)
        covered = len(set().union(*shares))
        if size and covered < COVERED_MIN * size:
            return Judgement(
                False,
                f"In epoch {epoch + 1} the {n} ranks together trained on {covered:,} of the "
                f"{size:,} images in the dataset ({covered / size:.0%}): each rank's share "
                f"should be 1/{n} of it, and the shares all of it.",
            )
    return PASS


def reshuffles_each_epoch(ctx: Context) -> Judgement:
    """Each rank trained on a new order (and share) in each epoch, not the first epoch's again."""
    ranks = _ranks(ctx)
    if isinstance(ranks, Judgement):
        return ranks
    passes = _training_passes(ctx, ranks)
    if isinstance(passes, Judgement):
        return passes
    for rank, mine in enumerate(passes):
        if len(mine) < 2:
            if ctx.stopped:
                return _unknown("the program stopped before a second epoch")
            return Judgement(
                False,
                f"Rank {rank} trained for one epoch (one pass over its DataLoader), so whether "
                "each epoch brings a new order could not be seen: train 2 epochs.",
            )
        for epoch in range(1, len(mine)):
            before, now = mine[epoch - 1], mine[epoch]
            if not now.get("samples") or now.get("samples") != before.get("samples"):
                continue
            why = ""
            if now.get("sampler") == "DistributedSampler" and now.get("sampler_epoch") == before.get("sampler_epoch"):
                why = (
                    f": its DistributedSampler's epoch was {now.get('sampler_epoch')} both times, and it shuffles "
                    "with its seed plus that epoch, so it drew the same shuffle again"
                )
            return Judgement(
                False,
                f"Rank {rank} trained on the same {len(now['samples']):,} images in the same "
                f"order in epoch {epoch + 1} as in epoch {epoch}{why}.",
            )
    return PASS


def gradients_synchronized(ctx: Context) -> Judgement:
    """After every optimizer step every rank held the same weights: the gradients were averaged
    across the processes (DistributedDataParallel), so each took the same step."""
    ranks = _ranks(ctx)
    if isinstance(ranks, Judgement):
        return ranks
    steps = [int(summary.get("steps") or 0) for summary in ranks]
    if not any(steps):
        if ctx.stopped:
            return _unknown("the program stopped before an optimizer step")
        return Judgement(False, "No process ever called optimizer.step().")
    prints = [summary.get("step_prints") or [] for summary in ranks]
    for step in range(min(len(p) for p in prints)):
        reference = float(prints[0][step])
        for rank in range(1, len(ranks)):
            value = float(prints[rank][step])
            if abs(value - reference) <= WEIGHTS_RTOL * max(abs(reference), abs(value)) + 1e-12:
                continue
            return Judgement(
                False,
                f"After optimizer step {step + 1} the weights in rank {rank} differed from "
                f"rank 0's: each process trained its own copy of the model on its own batches, "
                "and nothing averaged their gradients.",
            )
    if len(set(steps)) > 1:
        fewest = steps.index(min(steps))
        return Judgement(
            False,
            f"Rank {fewest} took {steps[fewest]:,} optimizer steps and rank "
            f"{steps.index(max(steps))} {max(steps):,}: every rank should run the same number "
            "of steps, each with its own batch.",
        )
    return PASS


def saves_on_rank_zero(ctx: Context) -> Judgement:
    """The checkpoint was written by rank 0 alone: every rank holds the same weights, one copy is
    enough, and several processes writing one file at once can leave it garbled."""
    ranks = _ranks(ctx)
    if isinstance(ranks, Judgement):
        return ranks
    saves = [summary.get("saves") or [] for summary in ranks]
    if not any(saves):
        if ctx.stopped:
            return _unknown("the program stopped before it saved anything")
        return Judgement(False, "No process called torch.save.")
    zero_paths = {entry.get("path") for entry in saves[0]}
    for rank in range(1, len(ranks)):
        if not saves[rank]:
            continue
        entry = saves[rank][0]
        line = f" (line {entry['line']})" if entry.get("line") else ""
        if not saves[0]:
            return Judgement(
                False,
                f"The checkpoint was written by rank {rank}{line}, not rank 0: by convention "
                "rank 0 saves, logs and evaluates.",
            )
        same = entry.get("path") in zero_paths and entry.get("path") is not None
        return Judgement(
            False,
            f"Rank {rank} called torch.save too{line}"
            + (
                ", on the same file as rank 0: the processes wrote it at the same time"
                if same
                else ": every rank holds the same weights, so each wrote another copy"
            )
            + ".",
        )
    return PASS


# ---------------------------------------------------------------- profiling and peak memory

PEAK_REPORT = "peak_memory_mb"  # the report that peak_memory_measured holds to the run's readings
_NO_PROFILE = re.compile(r"Profiler must be initialized", re.I)  # key_averages() of a profiler that recorded nothing
# A reported figure matches a reading within rounding: 3% or 0.05, in MiB (2**20 bytes) or MB (10**6).
MB_RTOL, MB_ATOL = 0.03, 0.05
READINGS = {
    "cuda_peak": "torch.cuda.max_memory_allocated()",
    "cuda_reserved_peak": "torch.cuda.max_memory_reserved()",
    "cuda_now": "torch.cuda.memory_allocated()",
    "cuda_reserved_now": "torch.cuda.memory_reserved()",
    "max_rss": "ru_maxrss",
    "max_rss_children": "ru_maxrss of RUSAGE_CHILDREN",
    "tracemalloc_peak": "tracemalloc's peak",
    "tracemalloc_now": "tracemalloc's current size",
    "mps_now": "torch.mps.current_allocated_memory()",
    "mps_driver_now": "torch.mps.driver_allocated_memory()",
}
# The readings that are a peak of the memory training used, by the device it trained on. MPS has no
# peak counter: its current figures and the process's peak (unified memory) stand in.
PEAKS = {
    "cuda": {"cuda_peak", "cuda_reserved_peak"},
    "mps": {"max_rss", "mps_now", "mps_driver_now"},
    "cpu": {"max_rss"},
}


def _whole_steps(window: dict[str, Any]) -> bool:
    """The window recorded a whole training step: a layer's forward matmul, a backward function and
    an optimizer step; or, profiling the GPU alone, kernels while training steps ran."""
    if window.get("matmuls") and window.get("backward") and window.get("optimizer_steps"):
        return True
    ran = window.get("end", {}).get("steps", 0) - window.get("start", {}).get("steps", 0)
    return bool(window.get("kernels")) and not window.get("ops") and ran > 0


def profiles_training_steps(ctx: Context) -> Judgement:
    """A torch.profiler window recorded whole training steps (forward matmuls, a backward pass, an
    optimizer step), read from the profiler's own events."""
    profiler = ctx.observed.get("profiler") or {}
    windows = profiler.get("windows") or []
    if any(_whole_steps(w) for w in windows):
        return PASS
    stop = bool(ctx.error_type and _NO_PROFILE.search(ctx.error_message or ""))
    if not windows:
        started = profiler.get("profilers") or []
        scheduled = [p for p in started if p.get("scheduled")]
        if not scheduled:
            if ctx.stopped and not stop:
                return _unknown("the program stopped before it profiled anything")
            return Judgement(
                False,
                "Your program never recorded a torch.profiler window: no `with profile(...)` block "
                "(or prof.start() and prof.stop()) ran around its training.",
                explains_stop=stop,
            )
        prof = scheduled[0]
        where = f" on line {prof['line']}" if prof.get("line") else ""
        steps = int(prof.get("steps", 0))
        if steps:
            cause = (
                f"The profiler{where} recorded nothing: prof.step() ran {_count(steps, 'time')}, too few for "
                "its schedule to pass its wait and warmup steps and record an active one."
            )
        else:
            cause = (
                f"The profiler{where} recorded nothing: it was given a schedule, whose phases (wait, "
                "warmup, active) move on only at prof.step(), and prof.step() never ran."
            )
        if stop:
            cause += f" Reading its results then stopped the program ({_first_line(ctx.error_message, 90)})."
        return Judgement(False, cause, explains_stop=stop)
    window = max(windows, key=lambda w: (w.get("matmuls", 0), w.get("events", 0)))
    if window.get("unreadable"):
        return _unknown("the checker could not read what the profiler recorded")
    where = f"The profiler window on line {window['line']}" if window.get("line") else "The profiler window"
    top = [str(name) for name, _ in window.get("top", [])[:3]]
    held = f" (it recorded {_count(int(window.get('ops', 0)), 'op')}, most often {_list(top)})" if top else ""
    if not window.get("matmuls"):
        cause = f"{where} recorded no layer's matrix multiply (aten::addmm, aten::mm): no forward pass ran in it{held}."
    else:
        parts = (("a backward pass", "backward"), ("an optimizer step", "optimizer_steps"))
        missing = [what for what, key in parts if not window.get(key)]
        cause = (
            f"{where} recorded forward passes ({_count(int(window['matmuls']), 'matmul op')}) but not "
            f"{' or '.join(missing)}: no whole training step (an evaluation under no_grad records forward passes only)."
        )
    total = int(ctx.observed.get("optimizer_steps", 0))
    after = total - max(int(w.get("end", {}).get("steps", 0)) for w in windows)
    if after > 0:
        cause += f" {_count(after, 'training step')} ran after it had stopped: profile some of them, inside the `with` block."
    elif total:
        cause += f" All {_count(total, 'training step')} ran before it started."
    return Judgement(False, cause)


def _as_mb(number: float, nbytes: float) -> bool:
    """`number` is `nbytes` in MiB or MB, as rounded."""
    return any(abs(number - nbytes / unit) <= MB_RTOL * nbytes / unit + MB_ATOL for unit in (2**20, 10**6))


def _reading(r: dict[str, Any]) -> str:
    where = f" on line {r['line']}" if r.get("line") else ""
    return f"{READINGS.get(str(r.get('kind')), 'a memory reading')}{where} ({r['bytes'] / 2**20:,.1f} MiB)"


def _trained_on(ctx: Context) -> str:
    kinds = {key.split("/")[1] for m in ctx.trained for key in m.get("devices", {})}
    return "cuda" if "cuda" in kinds else "mps" if "mps" in kinds else "cpu"


def _unmatched(number: float, readings: list[dict[str, Any]], ctx: Context, device: str) -> str:
    """Why a reported figure matches no reading: another unit, a difference of two, or none read."""
    told = (
        f"You reported {PEAK_REPORT}={number:,.0f}"
        if abs(number) >= 1000
        else f"You reported {PEAK_REPORT}={number:.4g}"
    )
    mac = ctx.observed.get("memory", {}).get("platform") == "darwin"
    for r in readings:
        nbytes = r["bytes"]
        if nbytes <= 0:
            continue
        if _as_mb(number / 2**20, nbytes) or _as_mb(number / 10**6, nbytes):
            return f"{told}: that is {_reading(r)} in bytes. Divide bytes by 2**20 for MiB."
        if _as_mb(number / 1024, nbytes) or _as_mb(number / 1000, nbytes):
            if r.get("kind") == "max_rss" and mac:
                return (
                    f"{told}: that is {_reading(r)} in kilobytes. On macOS ru_maxrss comes in bytes: "
                    "divide it by 2**20 for MiB."
                )
            if r.get("kind") == "max_rss":
                return f"{told}: that is {_reading(r)} as it comes, in kilobytes on Linux. Divide it by 1024 for MiB."
            return f"{told}: that is {_reading(r)} in kilobytes. Divide bytes by 2**20 for MiB."
        if _as_mb(number * 1024, nbytes) or _as_mb(number * 1000, nbytes):
            return f"{told}: that is {_reading(r)} in gigabytes; {PEAK_REPORT} is in megabytes."
    for later in readings:
        for earlier in readings:
            gap = later["bytes"] - earlier["bytes"]
            if later["work"] >= earlier["work"] and later is not earlier and gap > 0 and _as_mb(number, gap):
                return (
                    f"{told}: that is the difference of two readings, {_reading(later)} less "
                    f"{_reading(earlier)}: what those steps added, not the peak. Report the peak itself."
                )
    weights = sum(int(m.get("param_bytes", 0)) for m in ctx.trained)
    below = (
        f" It is less than the model's weights alone ({weights / 2**20:.2f} MiB)."
        if weights and 0 <= number * 2**20 < weights
        else ""
    )
    if readings:
        return f"{told}, but no memory figure your program read matches it: it read {_list([_reading(r) for r in readings[:3]])}.{below}"
    how = "torch.cuda.max_memory_allocated()" if device == "cuda" else "resource.getrusage(...).ru_maxrss"
    return (
        f"{told}, but your program read no memory figure in this run (no {how}): a number typed in, "
        f"such as the lab's 8.2 GB, is not a measurement of this run.{below}"
    )


def _wrong_kind(r: dict[str, Any], device: str) -> str:
    kind, read = str(r.get("kind")), _reading(r)
    if kind.startswith("tracemalloc"):
        return (
            f"Your {PEAK_REPORT} is {read}. tracemalloc counts Python's own objects only: a tensor's "
            "storage is allocated by PyTorch in C++, which tracemalloc never sees."
        )
    if kind == "max_rss_children":
        return f"Your {PEAK_REPORT} is {read}: the peak of the processes this one started, not its own."
    if kind in ("cuda_now", "cuda_reserved_now"):
        return (
            f"Your {PEAK_REPORT} is {read}: what is held now, after the steps freed their activations, "
            "not the most held at once."
        )
    if kind.startswith("cuda"):
        return (
            f"Your {PEAK_REPORT} is {read}, but the model trained on the {device}: torch.cuda's counters "
            "count GPU tensors only."
        )
    if device == "cuda":
        return (
            f"Your {PEAK_REPORT} is {read}: the host process's memory. The model trained on the GPU, "
            "whose memory it does not count."
        )
    return f"Your {PEAK_REPORT} is {read}, which is not a peak of the memory training used on the {device}."


def _check_reading(r: dict[str, Any], ctx: Context, device: str, span: dict[str, Any] | None) -> Judgement:
    """One reading the report matches: of the right kind, taken after the measured steps, and on
    CUDA with the peak reset right before them."""
    if r.get("kind") not in PEAKS[device]:
        return Judgement(False, _wrong_kind(r, device))
    read = _reading(r)
    end = span["end"] if span else {"work": max((int(m.get("last_train_work", 0)) for m in ctx.trained), default=0)}
    if r["work"] < end["work"]:
        steps = ctx.observed.get("optimizer_steps", 0) - int(r.get("steps", 0))
        what = "the profiled steps" if span else "training"
        return Judgement(
            False,
            f"Your {PEAK_REPORT} is {read}, read before {what} had finished ({_count(steps, 'training step')} "
            "came after it): it cannot count them.",
        )
    if device != "cuda":
        return PASS  # ru_maxrss only rises: nothing to reset
    resets = [x for x in ctx.observed.get("memory", {}).get("resets", []) if x["work"] <= r["work"]]
    if not resets:
        before = int(span["start"]["steps"]) if span else 0
        earlier = f", and the {_count(before, 'training step')} before the profiled ones" if before else ""
        return Judgement(
            False,
            f"No torch.cuda.reset_peak_memory_stats() ran before {read}: it is the most held since the "
            f"program started, the model's creation included{earlier}.",
        )
    last = resets[-1]
    if span:
        start = span["start"]
        line = f" on line {last['line']}" if last.get("line") else ""
        if int(last["steps"]) < int(start["steps"]):
            ahead = int(start["steps"]) - int(last["steps"])
            return Judgement(
                False,
                f"torch.cuda.reset_peak_memory_stats(){line} ran before {_count(ahead, 'training step')} that "
                f"came ahead of the profiled ones: {read} counts those too.",
            )
        if int(last["work"]) > int(start["work"]):
            return Judgement(
                False,
                f"torch.cuda.reset_peak_memory_stats(){line} ran after the profiled steps had begun: "
                f"{read} misses what they held before it.",
            )
    return PASS


def peak_memory_measured(ctx: Context) -> Judgement:
    """The reported peak_memory_mb is a figure the run read: the device's peak (CUDA's
    max_memory_allocated after reset_peak_memory_stats; on a CPU the process's ru_maxrss), taken
    after the profiled steps. Judged against what each reading returned, so a made-up number fails."""
    if PEAK_REPORT not in ctx.reports:
        if ctx.stopped:
            return _unknown(f"the program stopped before it reported {PEAK_REPORT}")
        return Judgement(False, f"Your program did not report {PEAK_REPORT}: call report({PEAK_REPORT}=...).")
    value = ctx.reports[PEAK_REPORT]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        return Judgement(False, f"You reported {PEAK_REPORT}={value!r:.40}, which is not a number of megabytes.")
    number = float(value)
    device = _trained_on(ctx)
    readings = [
        r for r in ctx.observed.get("memory", {}).get("readings", []) if isinstance(r.get("bytes"), (int, float))
    ]
    matches = [r for r in readings if _as_mb(number, r["bytes"])]
    if not matches:
        return Judgement(False, _unmatched(number, readings, ctx, device))
    windows = [w for w in (ctx.observed.get("profiler") or {}).get("windows", []) if _whole_steps(w)]
    span = None
    if windows:
        span = {
            "start": min((w["start"] for w in windows), key=lambda p: p["work"]),
            "end": max((w["end"] for w in windows), key=lambda p: p["work"]),
        }
    verdicts = [_check_reading(r, ctx, device, span) for r in matches]
    if any(v.passed for v in verdicts):
        return PASS
    right = [v for r, v in zip(matches, verdicts, strict=True) if r.get("kind") in PEAKS[device]]
    return (right or verdicts)[-1]


BEHAVIOUR_JUDGES: dict[str, Callable[[Context], Judgement]] = {
    "device_fallback": device_fallback,
    "asks_mps": asks_mps,
    "moves_a_tensor": moves_a_tensor,
    "model_on_device": model_on_device,
    "batches_on_device": batches_on_device,
    "timing_synchronized": timing_synchronized,
    "autocast_forward": autocast_forward,
    "float32_baseline": float32_baseline,
    "backward_outside_autocast": backward_outside_autocast,
    "steps_through_scaler": steps_through_scaler,
    "weights_float32": weights_float32,
    "amp_only_on_cuda": amp_only_on_cuda,
    "saves_during_training": saves_during_training,
    "loads_to_cpu": loads_to_cpu,
    "compares_with_tolerance": compares_with_tolerance,
    "compares_outputs_and_gradients": compares_outputs_and_gradients,
    "joins_process_group": joins_process_group,
    "ranks_split_data": ranks_split_data,
    "reshuffles_each_epoch": reshuffles_each_epoch,
    "gradients_synchronized": gradients_synchronized,
    "saves_on_rank_zero": saves_on_rank_zero,
    "profiles_training_steps": profiles_training_steps,
    "peak_memory_measured": peak_memory_measured,
}


def judge(name: str, ctx: Context) -> Judgement:
    fn = BEHAVIOUR_JUDGES.get(name)
    if fn is None:
        return Judgement(False, f"the tutor has no behaviour check {name!r} (a lesson error)")
    try:
        return fn(ctx)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, RecursionError):
        # The summary is a file in the program's own directory: a program can overwrite it.
        return _unknown("the checker could not read what the program did")


# ---------------------------------------------------------------- probes of the memory techniques
# What tutor/exercises/probes.py measured when it called the learner's function with the checker's own
# model and data (gradient accumulation, activation checkpointing, a batch-size search), judged one
# aspect per probe. grader.py passes a probe's result here when the probe is in PROBE_JUDGES.


def _mib(n: float) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:,.1f} KiB"


def _list(items: list[Any]) -> str:
    items = [str(i) for i in items]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _count(n: int, word: str) -> str:
    plural = word + ("es" if word.endswith(("ch", "sh", "s", "x")) else "s")
    return f"{n:,} {word if n == 1 else plural}"


def steps_once_per_k(result: dict[str, Any], name: str) -> Judgement:
    """The optimizer stepped once every k micro-batches, after the k-th."""
    k, seen = int(result["k"]), int(result["micro_batches"])
    if not seen:
        return Judgement(False, f"{name} never ran the model on a micro-batch.")
    at = [int(s["micro_batches"]) for s in result["steps"]]
    want = [k * (i + 1) for i in range(seen // k)]
    if at == want:
        return PASS
    if not at:
        return Judgement(
            False,
            f"{name} never called optimizer.step(): {_count(seen, 'micro-batch')} went by "
            "and the weights never changed.",
        )
    if len(at) == seen:
        return Judgement(
            False,
            f"optimizer.step() ran after every micro-batch: {len(at)} steps for "
            f"{_count(seen, 'micro-batch')}, where accumulation_steps={k} wants {len(want)}, "
            f"one after every {k}th.",
        )
    return Judgement(
        False,
        f"optimizer.step() ran {_count(len(at), 'time')}, after micro-batches {_list(at)}; "
        f"with accumulation_steps={k} it runs after micro-batches {_list(want)}.",
    )


def zero_grad_once_per_k(result: dict[str, Any], name: str) -> Judgement:
    """The gradients were cleared before each group of k micro-batches began, never inside one."""
    k = int(result["k"])
    clears = result["clears"]
    if not clears:
        return Judgement(False, f"{name} never ran backward(), so no gradient was accumulated.")
    previous = None
    for number, entry in enumerate(clears, 1):
        seen, cleared = int(entry["micro_batches"]), bool(entry["cleared"])
        group = (max(seen, 1) - 1) // k
        first = group != previous
        previous = group
        if first and number > 1 and not cleared:
            return Judgement(
                False,
                f"When micro-batch {seen}, the first of a new group of {k}, was backpropagated, "
                ".grad still held the previous group's gradients: they were not cleared after "
                "optimizer.step(), so the next step adds them in again.",
            )
        if not first and cleared:
            wiped = sum(1 for e in clears if e["cleared"])
            return Judgement(
                False,
                f"The gradients were cleared before micro-batch {seen}'s backward, in the middle "
                f"of a group of {k} ({_count(wiped, 'clear')} for "
                f"{_count(int(result['micro_batches']), 'micro-batch')}): zero_grad ran every "
                "micro-batch, wiping what the earlier micro-batches of the group had added.",
            )
    return PASS


def accumulates_full_batch_gradient(result: dict[str, Any], name: str) -> Judgement:
    """One backward per micro-batch, and at each optimizer step the gradient of the full batch
    (its k micro-batches as one batch, at the same weights)."""
    k, seen, backwards = int(result["k"]), int(result["micro_batches"]), int(result["backwards"])
    if not seen:
        return Judgement(False, f"{name} never ran the model on a micro-batch.")
    if 0 < backwards < seen:
        return Judgement(
            False,
            f"backward() ran {_count(backwards, 'time')} for {_count(seen, 'micro-batch')}: the "
            "losses were added up and backpropagated together, so every micro-batch's "
            "activations were held at once, as with the full batch. Accumulation saves memory "
            "only with one backward per micro-batch.",
        )
    compared = [s for s in result["steps"] if s.get("group")]
    if not compared:
        return Judgement(
            False, f"{name} never called optimizer.step() after a backward, so no accumulated gradient was used."
        )
    for number, step in enumerate(compared, 1):
        if step.get("close"):
            continue
        ratio, cosine, group = float(step["ratio"]), float(step["cosine"]), int(step["group"])
        where = f"At optimizer step {number}, the gradient"
        if group != k:  # steps_once_per_k names it; the loss may well be divided right
            return Judgement(
                False,
                f"Optimizer step {number} came after {_count(group, 'micro-batch')}, not {k}: "
                "it stepped before the group was complete, so its gradient was not the full "
                "batch's.",
                advice=False,
            )
        end = int(step["micro_batches"])
        start = end - group + 1
        wiped = [
            int(e["micro_batches"])
            for e in result["clears"]
            if start < int(e["micro_batches"]) <= end and e.get("cleared")
        ]
        if wiped:  # zero_grad inside the group: zero_grad_once_per_k names it, and the loss may be right
            kept = wiped[-1]
            held = f"only micro-batch {kept}'s" if kept == end else f"only those of micro-batches {kept} to {end}"
            return Judgement(
                False,
                f"{where} was not the full batch's ({group} micro-batches as one batch): the "
                f"gradients were cleared before micro-batch {wiped[0]}'s backward, inside the "
                f"group, so it held {held}. Clear them once per group, after the step.",
                advice=False,
            )
        if group > 1 and cosine > 0.9999 and abs(ratio - group) < 0.01 * group:
            return Judgement(
                False,
                f"{where} was {ratio:.2f} times the full batch's ({group} micro-batches as one "
                f"batch): each micro-batch's loss was not divided by {k}, so the {group} mean "
                "gradients added up to their sum, not their mean.",
            )
        full = (
            f"the full batch's ({group} micro-batches as one batch)"
            if group > 1
            else "the gradient of the one micro-batch since the previous step"
        )
        if cosine > 0.9999:
            return Judgement(False, f"{where} was {ratio:.3g} times {full}.")
        return Judgement(
            False,
            f"{where} differed from {full} by up to {float(step['max_diff']):.2g} (cosine similarity {cosine:.3f}).",
        )
    return PASS


def checkpoint_saves_activations(result: dict[str, Any], name: str) -> Judgement:
    """The forward kept at most 3/4 of the activations the plain forward keeps for backward."""
    if "returned" in result:
        return Judgement(False, f"{name} returned {result['returned']}, not the output tensor of the blocks.")
    plain, kept = float(result["plain_bytes"]), float(result["checkpointed_bytes"])
    if plain > 0 and kept <= 0.75 * plain:
        return PASS
    share = kept / plain if plain else 1.0
    if share >= 0.99:
        return Judgement(
            False,
            f"{name} kept {_mib(kept)} of activations for backward, as much as the plain forward "
            f"({_mib(plain)}): no block ran under checkpoint.",
        )
    return Judgement(
        False,
        f"{name} kept {_mib(kept)} of activations for backward, {share:.0%} of the plain "
        f"forward's {_mib(plain)}: only some of the blocks ran under checkpoint.",
    )


def _blocks(numbers: list[int]) -> str:
    """'block 3', 'blocks 2 and 5', 'blocks 1 to 6' (a run of consecutive numbers)."""
    numbers = sorted(numbers)
    if len(numbers) == 1:
        return f"block {numbers[0]}"
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"blocks {numbers[0]} to {numbers[-1]}"
    return f"blocks {_list(numbers)}"


def _recomputed_groups(events: list[list[int]]) -> list[dict[int, int]]:
    """The layers backward ran again, grouped by recomputation: each group is what ran between two
    gradients ({block: layers run}). One checkpoint's recomputation runs all it wrapped at once,
    before any gradient of it arrives."""
    groups: list[dict[int, int]] = []
    current: dict[int, int] = {}
    for kind, block in events:
        if int(kind) == 1:
            current[int(block)] = current.get(int(block), 0) + 1
        elif current:
            groups.append(current)
            current = {}
    if current:
        groups.append(current)
    return groups


def checkpoints_each_block(result: dict[str, Any], name: str) -> Judgement:
    """Each block ran under a checkpoint of its own: backward ran every block again, one block at a
    time, each just before its own gradient (the last block may run plainly: backward needs its
    activations first, so checkpointing it saves nothing)."""
    if "returned" in result:
        return Judgement(False, f"{name} returned {result['returned']}, not the output tensor of the blocks.")
    if not result.get("has_graph") or "backward_events" not in result:
        # No backward through its output (checkpoint_same_results names why): what the forward kept
        # for backward is all there is to see.
        return checkpoint_saves_activations(result, name)
    count, layers = int(result["blocks"]), int(result["layers_per_block"])
    plain, peak = float(result["plain_peak_bytes"]), float(result["checkpointed_peak_bytes"])
    groups = _recomputed_groups(result["backward_events"])
    recomputed = {block for g in groups for block in g}
    than = (
        f"more than the plain forward's {_mib(plain)}"
        if peak > 1.01 * plain
        else f"as much as the plain forward ({_mib(plain)})"
        if peak >= 0.99 * plain
        else f"{peak / plain:.0%} of the plain forward's {_mib(plain)}"
    )
    held = f"{name} held {_mib(peak)} at once during backward{', recomputation included' if recomputed else ''}, {than}"
    together = next((g for g in groups if len(g) > 1), None)
    if together is not None:
        what = (
            "the whole stack ran under one checkpoint, which keeps only its input until backward and then "
            "runs every block again at once"
            if len(together) == count
            else "they were under one checkpoint"
        )
        return Judgement(
            False,
            f"Backward ran {_blocks(list(together))} again together, before any of them got its "
            f"gradient: {what}, so {held}.",
        )
    pieces = sorted(b for b in recomputed if any(g.get(b, layers) < layers for g in groups))
    if pieces:
        return Judgement(
            False,
            f"Backward ran {_blocks(pieces)} again one layer at a time: checkpoint wrapped single "
            f"layers, not whole blocks, and each of those checkpoints keeps its own input, so "
            f"{held}.",
        )
    never = [b for b in range(1, count) if b not in recomputed]
    if len(never) == count - 1 and count not in recomputed:
        return Judgement(False, f"Backward ran none of the blocks again, so none ran under checkpoint: {held}.")
    if never:
        return Judgement(
            False,
            f"Backward never ran {_blocks(never)} again: {'it' if len(never) == 1 else 'they'} did "
            f"not run under checkpoint, and kept {'its' if len(never) == 1 else 'their'} "
            f"activations from the forward, so {held}.",
        )
    return PASS


def checkpoint_same_results(result: dict[str, Any], name: str) -> Judgement:
    """The output and every gradient equal the plain forward's."""
    if "returned" in result:
        return Judgement(False, f"{name} returned {result['returned']}, not the output tensor of the blocks.")
    if not result.get("shape_ok"):
        return Judgement(
            False,
            f"{name} returned a tensor of shape {tuple(result.get('shape', ()))}; the blocks give "
            f"{tuple(result.get('want_shape', ()))}.",
        )
    if float(result["output_diff"]) > 1e-5:
        return Judgement(
            False,
            f"{name}'s output differs from the plain forward's by up to "
            f"{float(result['output_diff']):.2g}: every block should run once, in order.",
        )
    if "backward_error" in result:
        return Judgement(False, f"backward() through {name}'s output raised {result['backward_error']}.")
    missing = [int(b) for b in result.get("blocks_without_gradient", [])]
    if not result.get("has_graph") or missing:
        which = (
            "none of the blocks' weights got a gradient"
            if not result.get("has_graph") or len(missing) >= int(result.get("blocks", len(missing)))
            else f"the weights of block{'s' if len(missing) > 1 else ''} {_list(missing)} got no gradient"
        )
        if result.get("reentrant_without_grad"):
            how = (
                "use_reentrant=True (what checkpoint does when use_reentrant is not passed)"
                if result.get("reentrant_by_default")
                else "use_reentrant=True"
            )
            return Judgement(
                False,
                f"checkpoint ran with {how}, and its input did not require grad, so it built no "
                f"graph through the blocks: {which}.",
            )
        if not result.get("has_graph"):
            return Judgement(
                False,
                f"{name}'s output carries no graph (requires_grad is False), so {which}: was "
                "the forward run under torch.no_grad()?",
            )
        return Judgement(False, f"Through {name}, {which}.")
    diff, scale = float(result["gradient_diff"]), float(result.get("gradient_scale") or 1.0)
    if diff > 1e-5 + 1e-4 * scale:
        return Judgement(False, f"The gradients through {name} differ from the plain forward's by up to {diff:.2g}.")
    return PASS


def _tried(calls: list[dict[str, Any]], limit: int = 12) -> str:
    sizes = [f"{int(c['batch']):,}{' (out of memory)' if c.get('oom') else ''}" for c in calls[:limit]]
    return ", ".join(sizes) + (", ..." if len(calls) > limit else "")


def finds_largest_batch(result: dict[str, Any], name: str) -> Judgement:
    """The search's answer is the largest batch that fits under the checker's cap."""
    fits, answer, calls = int(result["fits"]), result.get("answer"), result["calls"]
    if answer == fits:
        return PASS
    if not isinstance(answer, int) or isinstance(answer, bool):
        return Judgement(False, f"{name}(train_step) returned {result.get('answer_text', answer)}, not a batch size.")
    tried = f" (it tried {_tried(calls)})"
    if not any(c.get("oom") for c in calls):
        return Judgement(
            False,
            f"Under the checker's cap, where batch {fits:,} is the largest that fits, "
            f"{name}(train_step) returned {answer:,} without ever running out of memory"
            f"{tried}: the search stopped before it found the limit.",
        )
    if answer > fits:
        return Judgement(
            False,
            f"Under the checker's cap {name}(train_step) returned {answer:,}, but a step of "
            f"{answer:,} runs out of memory there: the largest that fits is {fits:,}{tried}.",
        )
    if any(c.get("held") for c in calls):
        return Judgement(
            False,
            f"Under the checker's cap {name}(train_step) returned {answer:,}, though {fits:,} "
            f"fits: a failed step's tensors were still held when the search went on, so sizes "
            f"that fit ran out of memory{tried}.",
        )
    if answer > 0 and answer & (answer - 1) == 0 and answer * 2 > fits:
        return Judgement(
            False,
            f"Under the checker's cap {name}(train_step) returned {answer:,}, the largest power "
            f"of two that fits; {fits:,} fits too{tried}. After the first failure, search "
            "between the last size that fitted and the first that did not.",
        )
    return Judgement(
        False, f"Under the checker's cap {name}(train_step) returned {answer:,}, but {fits:,} fits{tried}."
    )


def retries_outside_except(result: dict[str, Any], name: str) -> Judgement:
    """No step was tried while an out-of-memory error was being handled."""
    calls = result["calls"]
    for index, call in enumerate(calls):
        if call.get("in_except"):
            failed = next((c for c in reversed(calls[:index]) if c.get("oom")), call)
            return Judgement(
                False,
                f"train_step({int(call['batch']):,}) was called inside the except block that "
                f"caught train_step({int(failed['batch']):,})'s out-of-memory error: until that "
                "block ends, the error's traceback keeps the failed step's tensors alive, so the "
                "retry runs with that memory still taken.",
            )
    if not any(c.get("oom") for c in calls):
        return Judgement(
            False,
            f"{name}(train_step) never ran out of memory under the checker's cap (it tried "
            f"{_tried(calls)}), so how it recovers could not be seen.",
        )
    return PASS


def frees_memory_after_oom(result: dict[str, Any], name: str) -> Judgement:
    """Each try began with nothing left of the failed steps before it."""
    calls = result["calls"]
    for index, call in enumerate(calls):
        if call.get("held"):
            failed = next((c for c in reversed(calls[:index]) if c.get("oom")), None)
            after = f" after train_step({int(failed['batch']):,}) ran out of memory" if failed else ""
            return Judgement(
                False,
                f"When train_step({int(call['batch']):,}) began{after}, {_mib(call['held'])} of "
                "the failed step's tensors were still alive: something still referenced the "
                "error (a variable, a list, an except block not yet left), and its traceback "
                "keeps the failed step's frames and their tensors.",
            )
    if not any(c.get("oom") for c in calls):
        return Judgement(
            False,
            f"{name}(train_step) never ran out of memory under the checker's cap (it tried "
            f"{_tried(calls)}), so whether it frees the memory could not be seen.",
        )
    return PASS


def catches_only_oom(result: dict[str, Any], name: str) -> Judgement:
    """An error that is not out of memory gets out of the search."""
    if result.get("propagated"):
        return PASS
    return Judgement(
        False,
        f"When train_step raised {result.get('bug') or 'a RuntimeError'} (a bug, not memory), "
        f"{name}(train_step) returned {result.get('returned')}: it caught an error that was not "
        "out of memory, so a bug in the step reads as 'this batch does not fit'.",
    )


PROBE_JUDGES: dict[str, Callable[[dict[str, Any], str], Judgement]] = {
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


def judge_probe(probe: str, result: dict[str, Any], name: str) -> Judgement:
    """A probe's result (its "error" and "missing" cases are the grader's), judged."""
    fn = PROBE_JUDGES.get(probe)
    if fn is None:
        return Judgement(False, f"the tutor has no judge for probe {probe!r} (a lesson error)")
    try:
        return fn(result, name)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, RecursionError, OverflowError):
        return _unknown("the checker could not read what the function did")


def _first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    line = line.rstrip(".")
    return line if len(line) <= limit else line[: limit - 1] + "…"
