"""What a learner's program did, seen from inside its own process (the exercise sandbox).

The grader judges behaviour, not spelling: before the learner's file runs, `Observer.install()`
hooks the few places every training program passes through, whatever its names are:

- every top-level module call (`model(x)`, `criterion(out, y)`): where the weights and the batch
  were, whether the batch came out of `.to()`, the weights' dtype and the autocast state;
- `Module.to/.cuda/.cpu`, `Tensor.to/.cuda` (a moved tensor is marked; a move that changes
  nothing hands back an alias, as a real move would, so a dropped result stays unmarked);
- optimizer steps, `backward()`, GradScaler scale/step/update, autocast blocks;
- the clocks (`time.time`, `perf_counter`, `monotonic`, read from the learner's own files) and
  every synchronize (torch.cuda/mps/cpu/accelerator, tutor.lab/timing), so a clock read can be
  classed as taken with device work still queued or not;
- `torch.save` / `torch.load` / `torch.allclose` calls from the learner's code, and what each
  comparison held: a model's output, a weight's gradient (told by value: a fingerprint of the
  outputs of the first module calls and of every gradient after the first backward passes, read
  only when a comparison needs it), and whether it found them equal;
- the weights at each evaluation after training (snapshots, on request), so the grader can tell
  which epoch a saved checkpoint holds;
- the memory figures the learner's code reads (torch.cuda's peak and current counters and their
  reset, `resource.getrusage`'s ru_maxrss, tracemalloc, torch.mps), each with what it returned
  and how far the program had got, so a reported peak can be told from a made-up one;
- each window a profiler recorded (`torch.profiler.profile`, `torch.autograd.profiler.profile`):
  how many layer matmuls, backward functions and optimizer steps it holds, its kernels, and the
  work before and after it; and each `torch.profiler.profile` started, with its `step()` calls;
- in one rank of a torchrun launch (`ranks=True`): each pass over a DataLoader (the sampler, the
  dataset's length, a fingerprint of every sample it yielded, in order, and whether a training
  forward pass used its batches), a fingerprint of the weights after every optimizer step (a fixed
  random projection, the same in every rank, so ranks that trained in step compare equal), and
  the process group the program joined and left. Each rank writes its own summary; the grader
  compares them.

`dump(path)` writes a small JSON summary (bounded, whatever the program does) that
tutor/exercises/behaviour.py judges. Runs in the sandbox child only; imports torch when installed.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any, TypedDict

MAX_EVENTS = 200  # saves, loads, autocast blocks... kept per kind
MAX_SNAPSHOTS = 64
MAX_PASSES = 40  # DataLoader passes a rank records (training and evaluation)
MAX_PASS_SAMPLES = 70_000  # sample fingerprints kept per pass (all of MNIST's training set)
MAX_STEP_PRINTS = 5_000  # weight fingerprints kept, one per optimizer step
MAX_RESULT_PRINTS = 64  # outputs of top-level module calls fingerprinted, for telling what a comparison held
MAX_GRADIENT_PASSES = 8  # backward passes whose gradients are fingerprinted
MAX_WINDOWS = 32  # profiler windows recorded
MAX_PROFILED_EVENTS = 2_000_000  # events of one window read (5 steps of MNIST through the DataLoader: ~25,000)
# The ops a layer's forward pass records: a Linear's matmul (addmm with a bias, mm without), a convolution.
MATMUL_OPS = frozenset(
    {
        "aten::addmm",
        "aten::mm",
        "aten::matmul",
        "aten::linear",
        "aten::bmm",
        "aten::baddbmm",
        "aten::_addmm_activation",
        "aten::convolution",
    }
)
CLOCKS = ("time", "perf_counter", "monotonic", "time_ns", "perf_counter_ns", "monotonic_ns")


def _device_of(value: Any) -> str | None:
    """The device a .to()/.cuda() call asks for, as 'cuda'/'cpu'/'mps', or None (a dtype only)."""
    import torch

    if isinstance(value, torch.device):
        return value.type
    if isinstance(value, str):
        try:
            return torch.device(value).type
        except (RuntimeError, ValueError):
            return None
    if isinstance(value, int) and not isinstance(value, bool):
        return "cuda"
    return None


class _Compared(TypedDict):
    """What the comparisons in the learner's code held (`Observer._compared`)."""

    calls: int
    outputs: int
    gradients: list[int]  # the numbers of the weights whose gradients were compared
    differences: int
    other: int


class Observer:
    def __init__(self, solution: str, snapshots: bool = False, ranks: bool = False) -> None:
        self.learner_dir = os.path.dirname(os.path.abspath(solution))
        self.snapshots_wanted = snapshots
        self.ranks_wanted = ranks  # one rank of a launch: data passes, weights per step, the process group
        self.passes: list[dict[str, Any]] = []
        self._current_pass: dict[str, Any] | None = None
        self.steps = 0
        self.step_prints: list[float] = []
        self._projections: dict[tuple[int, str], Any] = {}
        self.process_group: dict[str, Any] = {"joined": 0, "left": 0, "backend": None, "world_size": None, "rank": None}
        self.active = True
        self.work = 0  # device work so far: module calls, backward passes, optimizer steps
        # Work since the last synchronize, per device type: only a GPU's (cuda, mps...) can still be
        # queued when a clock is read; the CPU's is counted apart (on a CPU-only run the judge reads the code).
        self.queued: dict[str, int] = {}
        self.syncs = 0
        self.timings: dict[tuple[int, int], dict[str, int]] = {}  # (start line, stop line) -> counts
        # Keyed by the objects themselves, weakly: a program that makes and drops many models (a
        # batch-size search) frees them as it would unwatched. The lists keep what was seen.
        self.models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.model_list: list[dict[str, Any]] = []
        self.criteria = {"calls": 0, "targets_unmoved": 0, "targets_seen": 0}
        self.optimizers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.optimizer_list: list[dict[str, Any]] = []
        self.scalers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self.scaler_list: list[dict[str, Any]] = []
        self.backward = {"calls": 0, "in_autocast": 0}
        self.autocast_blocks: list[dict[str, Any]] = []
        self._autocast_stack: list[tuple[str, bool, str]] = []
        self.saves: list[dict[str, Any]] = []
        self.loads: list[dict[str, Any]] = []
        self.comparisons = {"allclose": 0, "equal": 0}
        # What the comparisons held, told by value: (numel, sum, sum of magnitudes) of what they compared.
        self._output_prints: list[list[Any]] = []
        self._gradient_prints: list[tuple[list[Any], int | None]] = []  # None: all of them, concatenated
        # id of a weight that got a gradient -> (a weak reference to it, its number): weakly, so
        # that a program that drops its models frees them as it would unwatched.
        self._param_numbers: dict[int, tuple[Any, int]] = {}
        self._weights_with_gradients = 0
        self.compared: _Compared = {"calls": 0, "outputs": 0, "gradients": [], "differences": 0, "other": 0}
        self.cuda_asked = 0
        self.mps_asked = 0
        self.cuda_available = False
        self.tensor_moves = 0  # .to(device)/.cuda() calls from the learner's code
        self.train_forwards = 0  # forward passes of a model with gradients on
        self.optimizer_steps = 0
        self.memory_readings: list[dict[str, Any]] = []
        self.memory_resets: list[dict[str, Any]] = []
        self.profilers: list[dict[str, Any]] = []  # each torch.profiler.profile started
        self.windows: list[dict[str, Any]] = []  # what each profiler recorded
        self.snapshots: list[dict[str, Any]] = []
        self._depth = 0
        self._in_scaler_step = False
        self._scaled_since_step = False
        self._patches: list[tuple[Any, str, Any]] = []  # (owner, name, original), for uninstall
        self._handles: list[Any] = []

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def uninstall(self) -> None:
        """Everything back as it was (the grader's probes then call the learner's functions)."""
        self.active = False
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        for handle in self._handles:
            handle.remove()
        self._patches.clear()
        self._handles.clear()

    # ------------------------------------------------------------ who is calling

    def _learner_line(self, depth: int = 2) -> int | None:
        """The line in the learner's own files that made this call, or None."""
        frame = sys._getframe(depth)
        name = frame.f_code.co_filename
        if name.startswith(self.learner_dir) and os.path.dirname(name) == self.learner_dir:
            return frame.f_lineno
        return None

    # ------------------------------------------------------------ install

    def install(self) -> None:
        import torch

        self._install_clocks()
        self._install_syncs(torch)
        self._install_modules(torch)
        self._install_tensor_moves(torch)
        self._install_optim(torch)
        self._install_amp(torch)
        self._install_io(torch)
        self._install_memory(torch)
        self._install_profiler(torch)
        if self.ranks_wanted:
            self._install_data(torch)
            self._install_steps(torch)
            self._install_process_group(torch)

    def _install_clocks(self) -> None:
        observer = self

        class FloatReading(float):
            """A clock value read by the learner's code: subtracting one from another tells the
            observer which reads start and stop a timing, whatever the variables are called."""

            def __sub__(self, other: Any) -> Any:
                observer._interval(other, self)
                return float(self) - other if not isinstance(other, float) else float(self) - float(other)

            def __reduce__(self) -> Any:  # pickled (a checkpoint with a timestamp) as a plain float
                return (float, (float(self),))

        class IntReading(int):
            def __sub__(self, other: Any) -> Any:
                observer._interval(other, self)
                return int(self) - (int(other) if isinstance(other, int) else other)

            def __reduce__(self) -> Any:
                return (int, (int(self),))

        self._readings = (FloatReading, IntReading)
        for name in CLOCKS:
            real = getattr(time, name)
            kind = IntReading if name.endswith("_ns") else FloatReading

            def clock(_real=real, _kind=kind):
                value = _real()
                if self.active:
                    line = self._learner_line()
                    if line is not None:
                        value = _kind(value)
                        value._gt = (line, self.work, self._queued(gpu=True), self._queued(gpu=False))
                return value

            clock.__name__ = name
            self._patch(time, name, clock)

    def _interval(self, start: Any, stop: Any) -> None:
        """`stop - start`: a timing. Each end is fine when no device work was queued as it was read."""
        begin, end = getattr(start, "_gt", None), getattr(stop, "_gt", None)
        if not self.active or begin is None or end is None:
            return
        (start_line, start_work, *start_queued), (stop_line, stop_work, *stop_queued) = begin, end
        if len(self.timings) >= MAX_EVENTS and (start_line, stop_line) not in self.timings:
            return
        entry = self.timings.setdefault(
            (start_line, stop_line),
            {
                "count": 0,
                "with_work": 0,
                "unsynced_starts": 0,
                "unsynced_stops": 0,  # GPU work queued
                "cpu_unsynced_starts": 0,
                "cpu_unsynced_stops": 0,
            },
        )  # only CPU work since the last synchronize
        entry["count"] += 1
        if stop_work > start_work:  # device work inside the timing
            entry["with_work"] += 1
            for prefix, (gpu, cpu) in (("unsynced_starts", start_queued), ("unsynced_stops", stop_queued)):
                entry[prefix] += gpu
                entry["cpu_" + prefix] += cpu and not gpu

    def _did(self, device: Any) -> None:
        """One piece of work (a module call, a backward, an optimizer step) on `device`."""
        self.work += 1
        kind = getattr(device, "type", None) or "cpu"
        self.queued[kind] = self.queued.get(kind, 0) + 1

    def _queued(self, gpu: bool) -> bool:
        return any(n for kind, n in self.queued.items() if (kind != "cpu") == gpu)

    def _sync(self, kinds: set[str] | None) -> None:
        """A synchronize returned: the work queued on `kinds` (device types; None: any accelerator's)
        is done, and the CPU's own with it. torch.cpu.synchronize() does not wait for a GPU."""
        if self.active:
            self.syncs += 1
            if kinds is None:
                self.queued.clear()
            else:
                for kind in kinds | {"cpu"}:
                    self.queued.pop(kind, None)

    def _install_syncs(self, torch: Any) -> None:
        def wrap(owner: Any, name: str, kinds: Callable[..., set[str] | None]) -> None:
            real = getattr(owner, name, None)
            if real is None:
                return

            def synchronize(*args: Any, **kwargs: Any) -> Any:
                result = real(*args, **kwargs)  # one that raised waited for nothing
                self._sync(kinds(*args, **kwargs))
                return result

            synchronize.__name__ = name
            self._patch(owner, name, synchronize)

        for kind in ("cuda", "mps", "cpu", "xpu"):
            module = getattr(torch, kind, None)
            if module is not None:
                wrap(module, "synchronize", lambda *_, kind=kind, **__: {kind})
        if getattr(torch, "accelerator", None) is not None:
            wrap(torch.accelerator, "synchronize", lambda *_, **__: None)  # the current accelerator
        for cls in (getattr(torch.cuda, "Event", None), getattr(torch.cuda, "Stream", None)):
            if cls is not None:
                wrap(cls, "synchronize", lambda *_, **__: {"cuda"})
        from tutor.measurement import timing

        # tutor.lab.synchronize(device) calls it; it waits for that device's type.
        wrap(timing, "synchronize", lambda device=None, *_, **__: {str(device).split(":", 1)[0]})

        real_available = torch.cuda.is_available
        self.cuda_available = bool(real_available())

        def is_available() -> bool:
            if self.active and self._learner_line() is not None:
                self.cuda_asked += 1
            return real_available()

        # (the ignore: mypy does not model attributes set on a function)
        is_available.__wrapped__ = getattr(real_available, "__wrapped__", real_available)  # type: ignore[attr-defined]
        self._patch(torch.cuda, "is_available", is_available)
        real_mps = torch.backends.mps.is_available

        def mps_is_available() -> bool:
            if self.active and self._learner_line() is not None:
                self.mps_asked += 1
            return real_mps()

        # torch._dynamo reads is_available.__wrapped__ (it is an lru_cache): keep the same shape
        # (the ignore: mypy does not model attributes set on a function).
        mps_is_available.__wrapped__ = getattr(real_mps, "__wrapped__", real_mps)  # type: ignore[attr-defined]
        self._patch(torch.backends.mps, "is_available", mps_is_available)

    # ------------------------------------------------------------ modules

    def _model(self, module: Any) -> dict[str, Any]:
        info = self.models.get(module)
        if info is None:
            info = {
                "index": len(self.model_list),
                "class": type(module).__name__,
                "train_calls": 0,
                "inputs_unmoved": 0,
                "inputs_seen": 0,
                "devices": {},
                "param_dtypes": {},
                "autocast": {},
                "moved_to": None,
                "snapshots": 0,
                "phases": 0,
                "last_train_work": 0,
                "param_bytes": sum(p.numel() * p.element_size() for p in module.parameters()),
                "_trained_since_snapshot": False,
            }
            self.models[module] = info
            self.model_list.append(info)
        return info

    @staticmethod
    def _moved(t: Any) -> bool:
        return getattr(t, "_gt_moved", False) or getattr(getattr(t, "_base", None), "_gt_moved", False)

    def _install_modules(self, torch: Any) -> None:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        def pre(module: Any, args: tuple) -> None:
            self._depth += 1
            if self._depth != 1 or not self.active:
                return
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            param = next(module.parameters(), None)
            self._did(param.device if param is not None else tensors[0].device if tensors else None)
            if param is None:  # a loss module: the labels are its second tensor
                self.criteria["calls"] += 1
                if len(tensors) >= 2 and not tensors[1].is_floating_point():
                    self.criteria["targets_seen"] += 1
                    if tensors[1].device.type == "cpu" and not self._moved(tensors[1]):
                        self.criteria["targets_unmoved"] += 1
                return
            info = self._model(module)
            info["moved_to"] = getattr(module, "_gt_moved_to", None)
            training = torch.is_grad_enabled()  # evaluation runs under no_grad, whatever the mode
            if training:
                info["train_calls"] += 1
                self.train_forwards += 1
                info["last_train_work"] = self.work
                info["_trained_since_snapshot"] = True
                if self._current_pass is not None:
                    self._current_pass["trained"] = True
            elif info["_trained_since_snapshot"]:  # training, then an evaluation: an epoch ended
                info["_trained_since_snapshot"] = False
                info["phases"] += 1
                self._snapshot(module, info)
            if not tensors:
                return
            x = tensors[0]
            kind = x.device.type
            where = f"{param.device.type}/{kind}"
            info["devices"][where] = info["devices"].get(where, 0) + 1
            dtype = str(param.dtype).replace("torch.", "")
            info["param_dtypes"][dtype] = info["param_dtypes"].get(dtype, 0) + 1
            if training:
                info["inputs_seen"] += 1
                if kind == "cpu" and not self._moved(x):
                    info["inputs_unmoved"] += 1
                try:
                    on = torch.is_autocast_enabled(kind)
                    cast = str(torch.get_autocast_dtype(kind)).replace("torch.", "") if on else "off"
                except (RuntimeError, TypeError):
                    cast = "unknown"
                info["autocast"][cast] = info["autocast"].get(cast, 0) + 1

        def post(module: Any, args: tuple, output: Any) -> None:
            if (
                self._depth == 1
                and self.active
                and len(self._output_prints) < MAX_RESULT_PRINTS
                and isinstance(output, torch.Tensor)
                and torch._C._current_graph_task_id() == -1
            ):
                fingerprint = self._print(torch, output)
                if fingerprint is not None:
                    self._output_prints.append(fingerprint)
            self._depth = max(0, self._depth - 1)  # always_call: an exception unwinds it too

        self._handles.append(register_module_forward_pre_hook(pre))
        self._handles.append(register_module_forward_hook(post, always_call=True))

        real_to, real_cuda, real_cpu = torch.nn.Module.to, torch.nn.Module.cuda, torch.nn.Module.cpu

        def mark(module: Any, device: str | None) -> None:
            if device is not None and self.active:
                for sub in module.modules():
                    sub._gt_moved_to = device

        def module_to(module: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_to(module, *args, **kwargs)
            target = kwargs.get("device", args[0] if args else None)
            mark(module, _device_of(target))
            return out

        def module_cuda(module: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_cuda(module, *args, **kwargs)
            mark(module, "cuda")
            return out

        def module_cpu(module: Any) -> Any:
            out = real_cpu(module)
            mark(module, "cpu")
            return out

        self._patch(torch.nn.Module, "to", module_to)
        self._patch(torch.nn.Module, "cuda", module_cuda)
        self._patch(torch.nn.Module, "cpu", module_cpu)

    def _snapshot(self, module: Any, info: dict[str, Any]) -> None:
        """The weights as the program evaluates them (after training): which epoch a saved
        checkpoint holds is told by comparing it with these."""
        if not self.snapshots_wanted or len(self.snapshots) >= MAX_SNAPSHOTS:
            return
        state = {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}
        info["snapshots"] += 1
        self.snapshots.append({"model": info["index"], "phase": info["phases"], "work": self.work, "state": state})

    def _install_tensor_moves(self, torch: Any) -> None:
        real_to, real_cuda = torch.Tensor.to, torch.Tensor.cuda

        def moved(tensor: Any, out: Any) -> Any:
            learner = self._learner_line(3) is not None
            self.tensor_moves += learner
            if out is tensor and learner and not tensor.requires_grad:
                # Already there (.to("cpu") on the CPU returns the tensor itself): hand back an
                # alias, as a real move hands back a new tensor, so a dropped result stays unmoved.
                # Never for a tensor that requires grad: a leaf (a Parameter) must stay a leaf.
                out = tensor.view_as(tensor)
            try:
                out._gt_moved = True
            except (AttributeError, RuntimeError):
                pass
            return out

        def tensor_to(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_to(tensor, *args, **kwargs)
            if not self.active:
                return out
            target = kwargs.get("device", args[0] if args else None)
            if isinstance(target, torch.Tensor):
                target = target.device
            return moved(tensor, out) if _device_of(target) is not None else out

        def tensor_cuda(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_cuda(tensor, *args, **kwargs)
            return moved(tensor, out) if self.active else out

        self._patch(torch.Tensor, "to", tensor_to)
        self._patch(torch.Tensor, "cuda", tensor_cuda)

    # ------------------------------------------------------------ optimizer, backward, amp

    def _install_optim(self, torch: Any) -> None:
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        def step(optimizer: Any, args: tuple, kwargs: dict) -> None:
            if not self.active:
                return
            first = next((p for g in optimizer.param_groups for p in g["params"]), None)
            self._did(getattr(first, "device", None))
            info = self.optimizers.get(optimizer)
            if info is None:
                info = {
                    "index": len(self.optimizer_list),
                    "class": type(optimizer).__name__,
                    "steps": 0,
                    "bypassed_scaler": 0,
                }
                self.optimizers[optimizer] = info
                self.optimizer_list.append(info)
            info["steps"] += 1
            self.optimizer_steps += 1
            if not self._in_scaler_step and self._scaled_since_step:
                info["bypassed_scaler"] += 1  # the loss went through scaler.scale, the step did not
            self._scaled_since_step = False

        self._handles.append(register_optimizer_step_pre_hook(step))

        real_backward = torch.Tensor.backward

        def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if self.active:
                self._did(tensor.device)
                self.backward["calls"] += 1
                # Inside any autocast block, even one switched off here: on a GPU it would be on.
                self.backward["in_autocast"] += bool(self._autocast_stack)
            out = real_backward(tensor, *args, **kwargs)
            if self.active and self.backward["calls"] <= MAX_GRADIENT_PASSES:
                self._gradients(torch)
            return out

        self._patch(torch.Tensor, "backward", backward)

    def _scaler(self, scaler: Any) -> dict[str, Any]:
        info = self.scalers.get(scaler)
        if info is None:
            try:
                enabled = bool(scaler.is_enabled())
            except Exception:  # noqa: BLE001 - a half-built scaler
                enabled = False
            info = {
                "index": len(self.scaler_list),
                "enabled": enabled,
                "device": str(getattr(scaler, "_device", "")),
                "scales": 0,
                "steps": 0,
                "updates": 0,
                "steps_in_autocast": 0,
            }
            self.scalers[scaler] = info
            self.scaler_list.append(info)
        return info

    def _install_amp(self, torch: Any) -> None:
        scaler_cls = torch.amp.GradScaler
        real_scale, real_step, real_update = scaler_cls.scale, scaler_cls.step, scaler_cls.update

        def scale(scaler: Any, outputs: Any) -> Any:
            out = real_scale(scaler, outputs)
            if self.active:
                self._scaler(scaler)["scales"] += 1
                self._scaled_since_step = True
            return out

        def step(scaler: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            if self.active:
                info = self._scaler(scaler)
                info["steps"] += 1
                info["steps_in_autocast"] += bool(self._autocast_stack)
            self._in_scaler_step = True
            try:
                return real_step(scaler, optimizer, *args, **kwargs)
            finally:
                self._in_scaler_step = False

        def update(scaler: Any, *args: Any, **kwargs: Any) -> Any:
            if self.active:
                self._scaler(scaler)["updates"] += 1
            return real_update(scaler, *args, **kwargs)

        self._patch(scaler_cls, "scale", scale)
        self._patch(scaler_cls, "step", step)
        self._patch(scaler_cls, "update", update)

        autocast_cls = torch.amp.autocast_mode.autocast
        real_enter, real_exit = autocast_cls.__enter__, autocast_cls.__exit__

        def enter(block: Any) -> Any:
            out = real_enter(block)
            device = str(getattr(block, "device", "?"))
            enabled = bool(getattr(block, "_enabled", False))
            dtype = str(getattr(block, "fast_dtype", "")).replace("torch.", "")
            self._autocast_stack.append((device, enabled, dtype))
            if self.active and len(self.autocast_blocks) < MAX_EVENTS:
                self.autocast_blocks.append(
                    {"device": device, "enabled": enabled, "dtype": dtype, "line": self._learner_line()}
                )
            return out

        def exit_(block: Any, *args: Any) -> Any:
            if self._autocast_stack:
                self._autocast_stack.pop()
            return real_exit(block, *args)

        self._patch(autocast_cls, "__enter__", enter)
        self._patch(autocast_cls, "__exit__", exit_)

    # ------------------------------------------------------------ files and comparisons

    def _install_io(self, torch: Any) -> None:
        real_save, real_load = torch.save, torch.load

        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_save(self._plain(obj), f, *args, **kwargs)
            line = self._learner_line()
            if self.active and line is not None and len(self.saves) < MAX_EVENTS:
                entry: dict[str, Any] = {
                    "line": line,
                    "work": self.work,
                    "path": os.path.realpath(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else None,
                    "kind": type(obj).__name__,
                }
                if isinstance(obj, dict):
                    entry["keys"] = [str(k) for k in list(obj)[:30]]
                    entry["modules"] = [str(k) for k, v in list(obj.items())[:30] if isinstance(v, torch.nn.Module)]
                elif isinstance(obj, torch.nn.Module):
                    entry["modules"] = ["<the object itself>"]
                self.saves.append(entry)
            return out

        def load(f: Any, *args: Any, **kwargs: Any) -> Any:
            line = self._learner_line()
            if self.active and line is not None and len(self.loads) < MAX_EVENTS:
                location = kwargs.get("map_location", args[0] if args else None)
                self.loads.append(
                    {
                        "line": line,
                        "map_location": None if location is None else str(location),
                        "weights_only": kwargs.get("weights_only"),
                    }
                )
            return real_load(f, *args, **kwargs)

        self._patch(torch, "save", save)
        self._patch(torch, "load", load)

        for name, kind in (("allclose", "allclose"), ("isclose", "allclose"), ("equal", "equal")):
            real = getattr(torch, name)

            def compare(*args: Any, _real=real, _kind=kind, **kwargs: Any) -> Any:
                learner = self.active and self._learner_line() is not None
                if learner:
                    self.comparisons[_kind] += 1
                out = _real(*args, **kwargs)
                if learner:
                    try:
                        same = bool(out.all()) if isinstance(out, torch.Tensor) else bool(out)
                    except (RuntimeError, TypeError):
                        same = True
                    self._compared(torch, args, kwargs, same)
                return out

            self._patch(torch, name, compare)
        real_assert = torch.testing.assert_close

        def assert_close(*args: Any, **kwargs: Any) -> Any:
            learner = self.active and self._learner_line() is not None
            if learner:
                self.comparisons["allclose"] += 1
            try:
                out = real_assert(*args, **kwargs)
            except AssertionError:
                if learner:
                    self._compared(torch, args, kwargs, False)
                raise
            if learner:
                self._compared(torch, args, kwargs, True)
            return out

        self._patch(torch.testing, "assert_close", assert_close)

    @staticmethod
    def _print(torch: Any, t: Any) -> list[Any] | None:
        """A tensor's values in three numbers, [numel, sum, sum of every third value]: the same
        values give the same numbers, however they were copied (a .clone(), a .detach(), a list of
        them). Reduced where the tensor is, in float64 (float32 on MPS), without a copy of it: a
        program that measures its own peak memory sees nothing of this. The sums stay on the
        device until a comparison reads them (_read), so watching adds no synchronisation either.
        None for a tensor without values to read (the meta device, a subclass that refuses) or
        not of floating point."""
        if not t.is_floating_point() or t.is_meta:
            return None
        try:
            with torch.no_grad():
                wide = torch.float32 if t.device.type == "mps" else torch.float64  # MPS has no float64
                values = t.detach()
                flat = values.view(-1) if values.is_contiguous() else values.reshape(-1)
                return [values.numel(), values.sum(dtype=wide), flat[1::3].sum(dtype=wide)]
        except Exception:  # noqa: BLE001 - watching must never break the learner's program
            return None

    @staticmethod
    def _read(fingerprint: list[Any]) -> list[Any]:
        """The fingerprint's sums as numbers (read once, then kept)."""
        for i in (1, 2):
            if fingerprint[i] is not None and not isinstance(fingerprint[i], float):
                try:
                    fingerprint[i] = float(fingerprint[i])
                except Exception:  # noqa: BLE001
                    fingerprint[i] = float("nan")
        return fingerprint

    def _same_print(self, a: list[Any], b: list[Any]) -> bool:
        """Equal values, told from fingerprints (b's None: a concatenation's, which has only its sum)."""
        if a[0] != b[0]:
            return False
        a, b = self._read(a), self._read(b)
        return all(abs(x - y) <= 1e-5 * abs(y) + 1e-12 for x, y in zip(a[1:], b[1:]) if y is not None)

    def _gradients(self, torch: Any) -> None:
        """Fingerprint every gradient of the watched models after a backward pass (and all of them
        together, for a comparison of one concatenated tensor)."""
        prints: list[list[Any]] = []
        seen: set[int] = set()
        for module in list(self.models.keys()):
            for param in module.parameters():
                if id(param) in seen:  # a block watched alone and inside its stack
                    continue
                seen.add(id(param))
                fingerprint = None if param.grad is None else self._print(torch, param.grad)
                if fingerprint is None:
                    continue
                known = self._param_numbers.get(id(param))
                if known is not None and known[0]() is param:
                    number = known[1]
                else:
                    number = self._weights_with_gradients
                    self._weights_with_gradients += 1
                    self._param_numbers[id(param)] = (weakref.ref(param), number)
                prints.append(fingerprint)
                self._gradient_prints.append((fingerprint, number))
        if len(prints) > 1:
            try:  # all of them as one concatenated tensor: its sum adds up where they are, unread
                total = [sum(p[0] for p in prints), sum(p[1] for p in prints), None]
                self._gradient_prints.append((total, None))
            except Exception:  # noqa: BLE001 - gradients on several devices
                pass

    def _compared(self, torch: Any, args: tuple, kwargs: dict, same: bool) -> None:
        """What one comparison from the learner's code held, and whether it found them equal."""
        tensors = [a for a in (*args[:2], *kwargs.values()) if isinstance(a, torch.Tensor)][:2]
        prints = [p for p in (self._print(torch, t) for t in tensors) if p is not None]
        seen = self.compared
        seen["calls"] += 1
        known = False
        for fingerprint in prints:
            if any(self._same_print(fingerprint, out) for out in self._output_prints):
                seen["outputs"] += 1
                known = True
            for gradient, number in self._gradient_prints:
                if self._same_print(fingerprint, gradient):
                    known = True
                    numbers = range(self._weights_with_gradients) if number is None else [number]
                    seen["gradients"] = sorted(set(seen["gradients"]) | set(numbers))
        if not known:
            seen["other"] += 1
        elif not same:
            seen["differences"] += 1

    def _plain(self, obj: Any, depth: int = 0) -> Any:
        """`obj` with any clock reading in its dicts, lists and tuples turned back into a plain
        number, so a checkpoint holding a timestamp still loads with weights_only=True."""
        readings = getattr(self, "_readings", ())
        if readings and isinstance(obj, readings):
            return float(obj) if isinstance(obj, float) else int(obj)
        if depth > 32:
            return obj
        if type(obj) is dict:
            return {k: self._plain(v, depth + 1) for k, v in obj.items()}
        if type(obj) in (list, tuple):
            return type(obj)(self._plain(v, depth + 1) for v in obj)
        return obj

    # ------------------------------------------------------------ memory readings and the profiler

    def _progress(self) -> dict[str, int]:
        """How far the program had got: device work, training forward passes, optimizer steps."""
        return {"work": self.work, "trained": self.train_forwards, "steps": self.optimizer_steps}

    def _caller_line(self, limit: int = 16) -> int | None:
        """The line in the learner's files that led to this call, however deep in torch it is."""
        frame: Any = sys._getframe(1)
        for _ in range(limit):
            if frame is None:
                return None
            name = frame.f_code.co_filename
            if name.startswith(self.learner_dir) and os.path.dirname(name) == self.learner_dir:
                return frame.f_lineno
            frame = frame.f_back
        return None

    def _install_memory(self, torch: Any) -> None:
        """Each memory figure the learner's code reads, with what it returned (in bytes) and when;
        and each reset of CUDA's peak counter."""

        def note(kind: str, value: Any, line: int, **extra: Any) -> None:
            if len(self.memory_readings) < MAX_EVENTS and isinstance(value, (int, float)):
                self.memory_readings.append(
                    {"kind": kind, "bytes": float(value), "line": line, **self._progress(), **extra}
                )

        def wrap(owner: Any, name: str, read: Callable[..., None]) -> None:
            real = getattr(owner, name, None)
            if real is None:
                return

            def reader(*args: Any, **kwargs: Any) -> Any:
                out = real(*args, **kwargs)
                if self.active:
                    line = self._learner_line()
                    if line is not None:
                        try:
                            read(out, line, *args, **kwargs)
                        except Exception:  # noqa: BLE001 - watching must never break the learner's program
                            pass
                return out

            reader.__name__ = name
            self._patch(owner, name, reader)

        def reset(out: Any, line: int, *args: Any, **kwargs: Any) -> None:
            if len(self.memory_resets) < MAX_EVENTS:
                self.memory_resets.append({"line": line, **self._progress()})

        def stats(out: Any, line: int, *args: Any, **kwargs: Any) -> None:
            for key, kind in (
                ("allocated_bytes.all.peak", "cuda_peak"),
                ("reserved_bytes.all.peak", "cuda_reserved_peak"),
                ("allocated_bytes.all.current", "cuda_now"),
            ):
                if key in out:
                    note(kind, out[key], line)

        # torch.cuda re-exports torch.cuda.memory's functions: either name may be called. Their own
        # calls to each other come from torch's file, not the learner's, and are not counted twice.
        for owner in {id(m): m for m in (torch.cuda, getattr(torch.cuda, "memory", None)) if m is not None}.values():
            for name, kind in (
                ("max_memory_allocated", "cuda_peak"),
                ("max_memory_reserved", "cuda_reserved_peak"),
                ("memory_allocated", "cuda_now"),
                ("memory_reserved", "cuda_reserved_now"),
            ):
                wrap(owner, name, lambda out, line, *_, _kind=kind, **__: note(_kind, out, line))
            wrap(owner, "memory_stats", stats)
            for name in ("reset_peak_memory_stats", "reset_max_memory_allocated"):
                wrap(owner, name, reset)
        mps = getattr(torch, "mps", None)
        if mps is not None:
            wrap(mps, "current_allocated_memory", lambda out, line, *_, **__: note("mps_now", out, line))
            wrap(mps, "driver_allocated_memory", lambda out, line, *_, **__: note("mps_driver_now", out, line))

        import tracemalloc

        def traced(out: Any, line: int, *args: Any, **kwargs: Any) -> None:
            note("tracemalloc_now", out[0], line)
            note("tracemalloc_peak", out[1], line)

        wrap(tracemalloc, "get_traced_memory", traced)
        try:
            import resource
        except ImportError:  # Windows
            return
        # ru_maxrss is in kilobytes on Linux, in bytes on macOS.
        rss_unit = 1 if sys.platform == "darwin" else 1024

        def usage(out: Any, line: int, who: Any = None, *args: Any, **kwargs: Any) -> None:
            own = who in (None, resource.RUSAGE_SELF)
            note("max_rss" if own else "max_rss_children", out.ru_maxrss * rss_unit, line, raw=out.ru_maxrss)

        wrap(resource, "getrusage", usage)

    def _install_profiler(self, torch: Any) -> None:
        """What each profiler window recorded. Every profiler records through
        torch.autograd.profiler.profile (torch.profiler.profile drives one): it starts recording in
        `_start_trace` and stops in `__exit__`, after which its events can be read."""
        from torch.autograd import profiler as autograd_profiler

        recorder = autograd_profiler.profile
        real_start, real_exit = recorder._start_trace, recorder.__exit__

        def start_trace(prof: Any) -> Any:
            out = real_start(prof)
            if self.active:
                prof._gt_window = {"line": self._caller_line(), **self._progress()}
            return out

        def exit_(prof: Any, *args: Any) -> Any:
            out = real_exit(prof, *args)
            begin = getattr(prof, "_gt_window", None)
            if self.active and begin is not None and len(self.windows) < MAX_WINDOWS:
                prof._gt_window = None
                window = {
                    "line": begin["line"],
                    "stop_line": self._caller_line(),
                    "start": {k: begin[k] for k in ("work", "trained", "steps")},
                    "end": self._progress(),
                }
                try:
                    window.update(self._recorded(getattr(prof, "kineto_results", None)))
                except Exception:  # noqa: BLE001 - watching must never break the learner's program
                    window["unreadable"] = True
                self.windows.append(window)
            return out

        self._patch(recorder, "_start_trace", start_trace)
        self._patch(recorder, "__exit__", exit_)

        scheduler = torch.profiler.profile
        real_pstart, real_step = scheduler.start, scheduler.step

        def start(prof: Any) -> Any:
            if self.active and getattr(prof, "_gt_profiler", None) is None and len(self.profilers) < MAX_EVENTS:
                # record_steps: the profiler was given a schedule, whose phases move on at step()
                prof._gt_profiler = {"line": self._caller_line(), "scheduled": bool(prof.record_steps), "steps": 0}
                self.profilers.append(prof._gt_profiler)
            return real_pstart(prof)

        def step(prof: Any) -> Any:
            info = getattr(prof, "_gt_profiler", None)
            if self.active and info is not None:
                info["steps"] += 1
            return real_step(prof)

        self._patch(scheduler, "start", start)
        self._patch(scheduler, "step", step)

    @staticmethod
    def _recorded(results: Any) -> dict[str, Any]:
        """What one window holds, read from the profiler's own events: the layer matmuls, backward
        functions and optimizer steps (the ops a training step records), the kernels on a GPU and
        their time, and the ops it recorded most often."""
        counts: dict[str, Any] = {"events": 0, "ops": 0, "matmuls": 0, "backward": 0, "optimizer_steps": 0}
        counts.update(kernels=0, device_us=0.0, top=[])
        if results is None:
            return counts
        names: dict[str, int] = {}
        events = results.events()
        counts["events"] = len(events)
        for event in events[:MAX_PROFILED_EVENTS]:
            name = event.name()
            if name == "[memory]":
                continue
            if not str(event.device_type()).endswith("CPU"):  # a kernel or a copy on the GPU
                counts["kernels"] += 1
                counts["device_us"] += event.duration_ns() / 1000
                continue
            counts["ops"] += 1
            names[name] = names.get(name, 0) + 1
            if name in MATMUL_OPS:
                counts["matmuls"] += 1
            elif name.startswith("autograd::engine::evaluate_function"):
                counts["backward"] += 1
            elif name.startswith("Optimizer.step#"):
                counts["optimizer_steps"] += 1
        counts["top"] = [[n, c] for n, c in sorted(names.items(), key=lambda item: -item[1])[:5]]
        return counts

    # ------------------------------------------------------------ ranks of a launch

    def _install_data(self, torch: Any) -> None:
        """Each pass over a DataLoader, and a fingerprint of each sample it hands the program."""
        from torch.utils.data import dataloader

        real_iter = dataloader.DataLoader.__iter__
        real_next = dataloader._BaseDataLoaderIter.__next__

        def loader_iter(loader: Any) -> Any:
            iterator: Any = real_iter(loader)  # a DataLoader subclass's may be any iterator
            if self.active and len(self.passes) < MAX_PASSES:
                try:
                    size = len(loader.dataset)
                except TypeError:  # an iterable dataset
                    size = None
                sampler = getattr(loader, "sampler", None)
                epoch = getattr(sampler, "epoch", None)
                entry: dict[str, Any] = {
                    "dataset": size,
                    "sampler": type(sampler).__name__,
                    "batches": 0,
                    "samples": [],
                    "sampler_epoch": epoch if isinstance(epoch, int) else None,
                    "trained": False,
                    "line": self._learner_line(),
                }
                self.passes.append(entry)
                try:
                    iterator._gt_pass = entry
                except AttributeError:
                    pass
            return iterator

        def loader_next(iterator: Any) -> Any:
            batch = real_next(iterator)
            entry = getattr(iterator, "_gt_pass", None)
            if self.active and entry is not None:
                self._current_pass = entry
                entry["batches"] += 1
                if len(entry["samples"]) < MAX_PASS_SAMPLES:
                    entry["samples"].extend(self._fingerprints(torch, batch))
            return batch

        self._patch(dataloader.DataLoader, "__iter__", loader_iter)
        self._patch(dataloader._BaseDataLoaderIter, "__next__", loader_next)

    @staticmethod
    def _fingerprints(torch: Any, batch: Any) -> list[int]:
        """One number per sample of a batch (its images' bytes, hashed): the same image gives the
        same number in every rank, whatever index or order it came in."""
        items = (
            list(batch.values())
            if isinstance(batch, dict)
            else list(batch)
            if isinstance(batch, (list, tuple))
            else [batch]
        )
        images = next((t for t in items if isinstance(t, torch.Tensor) and t.dim() >= 2), None)
        if images is None or images.shape[0] == 0:
            return []
        try:
            rows = images.detach().reshape(images.shape[0], -1).to("cpu").contiguous().view(torch.uint8).numpy()
        except (RuntimeError, TypeError):
            return []
        return [int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=6).digest(), "big") for row in rows]

    def _install_steps(self, torch: Any) -> None:
        """After each optimizer step, its weights projected on a fixed random vector (the same
        in every rank): ranks whose gradients were averaged hold the same weights, step by step."""
        from torch.optim.optimizer import register_optimizer_step_post_hook

        def after(optimizer: Any, args: tuple, kwargs: dict) -> None:
            if not self.active:
                return
            self.steps += 1
            if len(self.step_prints) < MAX_STEP_PRINTS:
                try:
                    self.step_prints.append(self._weights_print(torch, optimizer))
                except (RuntimeError, TypeError, ValueError):
                    pass

        self._handles.append(register_optimizer_step_post_hook(after))

    def _weights_print(self, torch: Any, optimizer: Any) -> float:
        total = None
        with torch.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    values = param.detach().reshape(-1)
                    key = (values.numel(), str(values.device))
                    weights = self._projections.get(key)
                    if weights is None:
                        generator = torch.Generator().manual_seed(values.numel())
                        weights = torch.randn(values.numel(), generator=generator, dtype=torch.float64)
                        weights = self._projections[key] = weights.to(values.device)
                    part = torch.dot(values.to(torch.float64), weights)
                    total = part if total is None else total + part
        return float(total) if total is not None else 0.0

    def _install_process_group(self, torch: Any) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            return
        real_init, real_destroy = dist.init_process_group, dist.destroy_process_group

        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            out = real_init(*args, **kwargs)
            if self.active:
                self.process_group["joined"] += 1
                try:
                    self.process_group.update(
                        backend=str(dist.get_backend()), world_size=dist.get_world_size(), rank=dist.get_rank()
                    )
                except (RuntimeError, ValueError):
                    pass
            return out

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.process_group["left"] += 1
            return real_destroy(*args, **kwargs)

        self._patch(dist, "init_process_group", init_process_group)
        self._patch(dist, "destroy_process_group", destroy_process_group)

    # ------------------------------------------------------------ out

    def summary(self) -> dict[str, Any]:
        models = [{k: v for k, v in m.items() if not k.startswith("_")} for m in self.model_list]
        return {
            "models": models,
            "criteria": self.criteria,
            "optimizers": self.optimizer_list,
            "scalers": self.scaler_list,
            "backward": self.backward,
            "autocast_blocks": self.autocast_blocks,
            "timings": [{"start_line": a, "stop_line": b, **v} for (a, b), v in self.timings.items()],
            "syncs": self.syncs,
            "saves": self.saves,
            "loads": self.loads,
            "comparisons": self.comparisons,
            "compared": {**self.compared, "weights_with_gradients": self._weights_with_gradients},
            "cuda_asked": self.cuda_asked,
            "mps_asked": self.mps_asked,
            "cuda_available": self.cuda_available,
            "tensor_moves": self.tensor_moves,
            "work": self.work,
            "train_forwards": self.train_forwards,
            "optimizer_steps": self.optimizer_steps,
            "memory": {"readings": self.memory_readings, "resets": self.memory_resets, "platform": sys.platform},
            "profiler": {"profilers": self.profilers, "windows": self.windows},
            **(self._rank_summary() if self.ranks_wanted else {}),
        }

    def _rank_summary(self) -> dict[str, Any]:
        rank = os.environ.get("RANK", "")
        trained = [p for p in self.passes if p["trained"]]
        return {
            "rank": int(rank) if rank.isdigit() else None,
            "passes": trained,  # the passes over a DataLoader that training used, in order
            "other_passes": len(self.passes) - len(trained),
            "steps": self.steps,
            "step_prints": self.step_prints,
            "process_group": self.process_group,
        }
