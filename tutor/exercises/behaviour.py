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
from dataclasses import dataclass
from typing import Any

_NO_CUDA = re.compile(
    r"Torch not compiled with CUDA|no NVIDIA driver|No CUDA GPUs are available|CUDA driver initialization failed"
    r"|no CUDA-capable device|CUDA is not available|Cannot access accelerator device when none is available", re.I)
_MISMATCH = re.compile(r"Expected all tensors to be on the same device|same device", re.I)
_DTYPE_CLASH = re.compile(r"same dtype|expected scalar type|dtype", re.I)
_HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class Judgement:
    passed: bool
    cause: str = ""  # empty when passed
    judged: bool = True  # False: this run could not show it (the program stopped first, say)
    explains_stop: bool = False  # the failure is why the program stopped


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
        return Judgement(False, "Your program asked for CUDA on this machine, which has none, and stopped: "
                                f"{_first_line(ctx.error_message)}.", explains_stop=True)
    if ctx.observed.get("cuda_asked", 0) == 0:
        if ctx.stopped:
            return _unknown("the program stopped before it chose a device")
        return Judgement(False, "Your program never asked torch.cuda.is_available(), so its device does not "
                                "depend on the machine it runs on.")
    return PASS


def asks_mps(ctx: Context) -> Judgement:
    """Where CUDA is absent, the device choice asks torch.backends.mps.is_available() next."""
    if ctx.observed.get("mps_asked"):
        return PASS
    if ctx.observed.get("cuda_available"):
        return PASS  # `elif mps` is never reached on a CUDA machine: this run cannot tell
    if ctx.stopped:
        return _unknown("the program stopped before it chose a device")
    return Judgement(False, "CUDA is not here, and your program never asked "
                            "torch.backends.mps.is_available() before settling on a device.")


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
            if weights != batch:
                return Judgement(False, f"{name.capitalize()} had its weights on {weights} while its batches "
                                        f"were on {batch}.", explains_stop=bool(ctx.error_type and _MISMATCH.search(
                                            ctx.error_message or "")))
        if not model.get("moved_to") and all(k.startswith("cpu/") for k in model.get("devices", {})):
            return Judgement(False, f"{name.capitalize()} was never moved with .to(device): its weights stayed "
                                    "on the CPU, where they were made.")
    return PASS


def batches_on_device(ctx: Context) -> Judgement:
    """Every training batch (images and labels) reached the model through .to(device)."""
    if not ctx.trained:
        return _untrained(ctx)
    for model in ctx.trained:
        unmoved, seen = model.get("inputs_unmoved", 0), model.get("inputs_seen", 0)
        if unmoved:
            return Judgement(False, f"{unmoved:,} of {seen:,} batches reached {_model_name(ctx, model)} "
                                    "without being moved: the tensor the model got never came out of .to(device).",
                             explains_stop=bool(ctx.error_type and _MISMATCH.search(ctx.error_message or "")))
    criteria = ctx.observed.get("criteria", {})
    if criteria.get("targets_unmoved"):
        return Judgement(False, f"{criteria['targets_unmoved']:,} of {criteria.get('targets_seen', 0):,} batches of "
                                "labels reached the loss without being moved with .to(device).")
    return PASS


# ---------------------------------------------------------------- timing


def timing_synchronized(ctx: Context) -> Judgement:
    """Every timing the program takes (a clock read subtracted from a later one, with training in
    between) starts and stops with no device work queued."""
    timings = [t for t in ctx.observed.get("timings", []) if t.get("with_work")]
    if not timings:
        if ctx.stopped:
            return _unknown("the program stopped before it timed anything")
        return Judgement(False, "Your program times none of its training: no clock read (time.perf_counter(), "
                                "time.time() ...) is subtracted from a later one with training in between.")
    on_cpu_only = ctx.devices <= {"cpu"}
    for key, line_key, role in (("unsynced_stops", "stop_line", "stops"), ("unsynced_starts", "start_line", "starts")):
        for timing in sorted(timings, key=lambda t: t[line_key]):
            line = timing[line_key]
            # On a CPU a sync guarded by `if device.type == "cuda":` never runs: read the code.
            if not timing.get(key) or (on_cpu_only and sync_precedes(ctx.source, line)):
                continue
            return Judgement(False, f"The clock read on line {line} {role} a timing while device work may still "
                                    "be queued: no synchronize ran between the last training step and it.")
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
                if name in functions and depth < 3 and functions[name] is not node \
                        and calls_sync(functions[name], depth + 1):
                    return True
        return False

    def visit(body: list[ast.stmt], before: ast.stmt | None) -> None:
        nonlocal found
        prev = before
        for stmt in body:
            if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno):
                inner = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if isinstance(getattr(stmt, f, None), list)]
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
        return Judgement(False, f"Your autocast is for '{other[0]}', but the model ran on {here}: autocast "
                                "switched itself off, so the mixed-precision run was float32. Pass device.type.")
    if blocks and not any(b.get("enabled") for b in blocks):
        return Judgement(False, "Every autocast block was entered with enabled=False, so no forward pass ran "
                                "in 16-bit.")
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
    return Judgement(False, f"Every run trained under autocast ({', '.join(dtypes)}): the float32 baseline was "
                            "mixed precision too. Pass enabled=use_amp, so the baseline runs with autocast off.")


def backward_outside_autocast(ctx: Context) -> Judgement:
    """backward() and the optimizer step ran outside the autocast block."""
    inside = ctx.observed.get("backward", {}).get("in_autocast", 0)
    if inside:
        off = not any(b.get("enabled") for b in ctx.observed.get("autocast_blocks", []))
        return Judgement(False, f"backward() ran inside an autocast block ({inside:,} times)"
                                + (", switched off on this machine but on where mixed precision runs." if off else "."))
    if any(s.get("steps_in_autocast") for s in ctx.observed.get("scalers", [])):
        return Judgement(False, "scaler.step() ran inside an autocast block.")
    return PASS


def steps_through_scaler(ctx: Context) -> Judgement:
    """Where a GradScaler scales the loss, the step goes through scaler.step and scaler.update follows;
    float16 autocast on CUDA has an enabled scaler."""
    bypassed = sum(o.get("bypassed_scaler", 0) for o in ctx.observed.get("optimizers", []))
    if bypassed:
        return Judgement(False, f"optimizer.step() was called directly {bypassed:,} times after "
                                "scaler.scale(loss).backward(), not through scaler.step(optimizer).")
    for scaler in ctx.observed.get("scalers", []):
        if scaler.get("steps") and not scaler.get("updates"):
            return Judgement(False, "scaler.step(optimizer) ran, but scaler.update() never did, so the scale "
                                    "never adapts.")
    fp16_cuda = any("float16" in _autocast_kinds(m) and any(k.endswith("/cuda") for k in m.get("devices", {}))
                    for m in ctx.trained)
    if fp16_cuda and not any(s.get("enabled") and s.get("steps") for s in ctx.observed.get("scalers", [])):
        return Judgement(False, "float16 autocast ran on CUDA without an enabled GradScaler stepping the "
                                "optimizer: small float16 gradients can underflow to zero.")
    return PASS


def weights_float32(ctx: Context) -> Judgement:
    """The weights stay float32 while training (autocast casts per operation; no .half())."""
    for model in ctx.trained:
        low = sorted(set(model.get("param_dtypes", {})) & set(_HALF))
        if low:
            return Judgement(False, f"{_model_name(ctx, model).capitalize()} had {low[0]} weights: it was cast "
                                    "by hand (.half() or .to(dtype)).",
                             explains_stop=bool(ctx.error_type and _DTYPE_CLASH.search(ctx.error_message or "")))
    return PASS


def amp_only_on_cuda(ctx: Context) -> Judgement:
    """Mixed precision is on where the batches are on CUDA, and off elsewhere."""
    if not ctx.trained:
        return _untrained(ctx)
    for model in ctx.trained:
        kinds = _autocast_kinds(model)
        on_cuda = any(k.endswith("/cuda") for k in model.get("devices", {}))
        if on_cuda and not kinds & set(_HALF):
            return Judgement(False, "The model trained on CUDA in float32: mixed precision was off where it "
                                    "helps.")
        if not on_cuda and kinds & set(_HALF):
            where = ", ".join(sorted(ctx.devices)) or "this device"
            dtype = sorted(kinds & set(_HALF))[0]
            return Judgement(False, f"Mixed precision ran on {where} ({dtype} autocast), where it is kept off: "
                                    "switch it on only for CUDA.")
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
        return Judgement(False, f"torch.save ran {len(saves)} time{'s' if len(saves) != 1 else ''}, all after "
                                f"training ended ({phases} epochs): a crash mid-run would have lost everything.")
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
        return Judgement(False, f"torch.load on line {bare[0].get('line')} has no map_location: it puts each "
                                "tensor back on the device it was saved from.")
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


def _first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    line = line.rstrip(".")
    return line if len(line) <= limit else line[: limit - 1] + "…"
