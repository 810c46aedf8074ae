"""What `gpututor inspect` watches inside the learner's own training script (its own process).

A step is one optimizer step: it ends where `optimizer.step()` returns (PyTorch's global step
post-hook). Where a loop steps two optimizers (a GAN's generator and discriminator), the step is
one turn of the loop: it ends at the step of the optimizer that stepped first (the anchor; a new
one is taken if it is garbage collected), and the others' steps are optimizer time inside it. The run is cut into windows of steps, each with one job:

- warm-up (`warmup` steps): nothing timed; from the second on, whether the gradients are still
  the last step's when backward starts (zero_grad missing);
- the probe step: FLOPs (`torch.utils.flop_counter.FlopCounterMode`), the activations autograd
  saves (saved-tensor hooks: unique storage bytes) or the CUDA allocator's peak, the weights,
  gradients and optimizer state; slow instruments, so on a step of its own, never a timed one;
- the timed window (`steps` steps): a clock read at each phase boundary and nothing else. On a
  CPU the work is done when the call returns, so the split is the real split; on a GPU the
  phases only queue work, so the window times the steps as a whole (synchronised at its two
  ends) and
- the split window (a GPU only, `split_steps`): the same steps again with a synchronize at each
  phase boundary, which stalls the queue, so it says where the time goes, not how long a step
  takes unwatched;
- the overhead window (only when asked, `overhead_pairs`): blocks of steps (about BLOCK_S each,
  from the timed window's median step) in turns, one plain (every patch and module hook taken off, only the optimizer's step hook left:
  the step clock), one watched as in the timed window, each block timed end to end (synchronised
  at its ends on a GPU); each pair's ratio is watching's cost, measured in this run, beside the
  plain steps it is compared with. The order inside a pair alternates, so a slow drift cancels.

Then the script is stopped on purpose (`Stopped`, raised from the optimizer step).

Phases: data (inside a DataLoader iterator's `__next__`; in a step that takes no batch from a
DataLoader, the script's own code from the step's start to its first training forward, which is
where a hand-rolled `get_batch()` runs: see PRELUDE), copy (a `Tensor.to`/`.cuda()` that
moved a tensor to another device), forward (from the first top-level module call of a training
step with gradients on until backward: the model and the loss), backward (`Tensor.backward`),
optimizer (`step` and `zero_grad`), other (the rest of the step: logging, the script's own code).
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref
from typing import Any

PHASES = ("data", "copy", "forward", "backward", "optimizer", "other")
# The time from a step's start (the last optimizer step's end) to its first training forward, less
# loader, copies and zero_grad: a hand-rolled get_batch() when no DataLoader gave the step its
# batch and no evaluation (a forward without gradients) ran in it; otherwise the loop's own code.
PRELUDE = "prelude"
# The overhead window's blocks last about BLOCK_S (so a short step's block is still timed well
# above the clock's and the scheduler's jitter), between these many steps:
BLOCK_S, BLOCK_STEPS_MIN, BLOCK_STEPS_MAX = 0.1, 2, 100
OVERHEAD_ROOM = 0.5  # the share of the time left before the deadline the overhead window may take (a roof
# measured after the script stops needs the rest)
LOSSES_KEPT = 64  # weak references to the latest losses backward was called on
OLD_AFTER = 3  # a loss this many steps old that is still alive is held by the script


class Stopped(BaseException):
    """Raised from the optimizer step after the last watched step: the script is stopped on
    purpose (a BaseException, so the script's own `except Exception` lets it through)."""


class Watch:
    def __init__(
        self, script: str, warmup: int = 3, steps: int = 20, split_steps: int = 5, overhead_pairs: int = 0
    ) -> None:
        self.script_dir = os.path.dirname(os.path.abspath(script))
        self.warmup = max(1, warmup)
        self.steps = max(1, steps)
        self.split_steps = split_steps
        self.overhead_pairs = self.overhead_wanted = max(0, overhead_pairs)
        self.deadline: float | None = None  # time.time() by which the run must be done (watched_main's)
        self.blocks: list[dict[str, Any]] = []  # the overhead window's blocks: plain or watched, seconds
        self._block_start = 0.0
        self.block_steps = BLOCK_STEPS_MIN
        self._stripped: list[tuple[Any, str, Any]] = []  # (owner, name, wrapper) taken off for a plain block
        self.clock = time.perf_counter  # the real one, before any script patches time
        self.step = 0  # optimizer steps finished
        self.phase = PRELUDE
        self.mark = self.clock()
        self.step_start = self.mark
        self.acc = dict.fromkeys((*PHASES, PRELUDE), 0.0)
        self.loader_this_step = False  # a DataLoader's __next__ ran in this step
        self.eval_this_step = False  # a forward without gradients ran before the training forward
        self.reads = 0  # .item()/.tolist()/.cpu() of a device tensor, from the script's files, this step
        self.syncs = 0  # of those, reads of a tensor on an accelerator (each waits for the queue)
        self.clock_reads = 0  # the script's own clock reads this step (a GPU only)
        self.script_syncs = 0  # synchronize calls the script made (a GPU only), all steps
        self.timed: list[dict[str, Any]] = []  # a step's phases in seconds, its reads, where its data came from
        self.split: list[dict[str, Any]] = []
        self.window_s: float | None = None  # the timed window, end to end
        self.window_start = 0.0
        self.real_sync: Any = None
        self.sync: Any = None  # torch.cuda.synchronize while the split window runs
        self.cuda = False
        self.accelerator: str | None = None
        self.depth = 0
        self.in_loader = False  # inside a DataLoader's __next__: its transforms' modules are data, not the model
        # The thread that trains (the script's main thread): a prefetching thread's loader, copies and
        # transforms run beside the step, not in it, and are left out of its clock.
        self.training_thread = threading.get_ident()
        self.forward_this_step = False
        self.backward_this_step = False
        self.forward_info: dict[str, Any] | None = None
        self.backward_autocast = False
        self.zero_grads = 0
        self.grad_checks: list[dict[str, Any]] = []
        self.losses: list[tuple[int, Any]] = []
        self.losses_alive_old = 0
        self.losses_checked = 0
        self.loader: dict[str, Any] | None = None
        self.loaders_seen = 0
        self.scaler_calls = 0
        self.saves: list[dict[str, Any]] = []
        self.probe: dict[str, Any] = {}
        self._flop_mode: Any = None
        self._saved_hooks: Any = None
        self._saved: dict[int, int] = {}
        self._param_ptrs: set[int] = set()
        self._optimizers: list[Any] = []  # weak references to every optimizer that stepped
        self._anchor: Any = None  # the one whose step ends a step
        self._others_run = 0  # other optimizers' steps since the anchor's last
        self._others_longest = 0  # the most of them seen between two of the anchor's steps
        self.stepping = 0  # id() of the optimizer whose step is under way (a wrapper steps another inside)
        self._mine: dict[str, bool] = {}
        self._patches: list[tuple[Any, str, Any]] = []
        self._handles: list[Any] = []
        self._module_handles: list[Any] = []
        self._tops_seen: dict[int, Any] = {}  # weak references to modules called at the top level
        self._tops: dict[int, Any] | None = None  # those, once hooked alone (after the probe step)
        self._model_id = 0  # id() of the module whose call began this step's training forward
        self.samples = 0  # this step's: the model's inputs' first dimension, summed over its calls
        self.finished = False

    # ------------------------------------------------------------ windows

    @property
    def probe_step(self) -> int:
        return self.warmup + 1

    @property
    def last_timed(self) -> int:
        return self.probe_step + self.steps

    @property
    def last_step(self) -> int:
        return self.last_timed + (self.split_steps if self.cuda else 0)

    @property
    def end_step(self) -> int:
        return self.last_step + 2 * self.overhead_pairs * self.block_steps

    def _in_probe(self) -> bool:
        return self.step + 1 == self.probe_step  # the step under way

    def _checked(self) -> bool:
        """Steps where a slower look is allowed: warm-up from the second on, and the probe step."""
        return 2 <= self.step + 1 <= self.probe_step

    # ------------------------------------------------------------ the phase clock

    def _enter(self, phase: str) -> None:
        if self.sync is not None:
            self.sync()
        now = self.clock()
        self.acc[self.phase] += now - self.mark
        self.mark = now
        self.phase = phase

    def _mine_file(self, depth: int = 2) -> bool:
        name = sys._getframe(depth).f_code.co_filename
        mine = self._mine.get(name)
        if mine is None:
            mine = os.path.dirname(os.path.abspath(name)) == self.script_dir
            self._mine[name] = mine
        return mine

    # ------------------------------------------------------------ install

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._patches.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    def _strip(self) -> None:
        """Take every patch and module hook off for a plain block (the optimizer's hooks stay)."""
        self._stripped = [(owner, name, getattr(owner, name)) for owner, name, _ in self._patches]
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        for handle in self._module_handles:
            handle.remove()

    def _unstrip(self, torch: Any) -> None:
        for owner, name, wrapper in self._stripped:
            setattr(owner, name, wrapper)
        self._stripped = []
        self._install_modules(torch)

    def uninstall(self) -> None:
        if self._stripped:  # stopped in a plain block: its originals are in place already
            self._stripped = []
            self._patches.clear()
        for owner, name, original in reversed(self._patches):
            setattr(owner, name, original)
        for handle in self._handles:
            handle.remove()
        self._patches.clear()
        self._handles.clear()

    def install(self) -> None:
        import torch

        self.cuda = torch.cuda.is_available()
        mps = getattr(torch.backends, "mps", None)
        self.accelerator = "cuda" if self.cuda else "mps" if mps is not None and mps.is_available() else None
        self._install_modules(torch)
        self._install_moves(torch)
        self._install_data(torch)
        self._install_backward(torch)
        self._install_optim(torch)
        self._install_reads(torch)
        self._install_saves(torch)
        if self.cuda:
            self._install_clocks(torch)

    def _install_modules(self, torch: Any) -> None:
        from torch.nn.modules import module as nn_module

        watch = self

        def pre(module: Any, args: tuple) -> None:
            if watch.in_loader or threading.get_ident() != watch.training_thread:
                return  # a transform (torchvision's are modules) decoding a batch: the loader's time
            if watch.depth == 0 and watch._tops is None:
                seen = watch._tops_seen.get(id(module))
                if seen is None or seen() is not module:  # an id reused by a new module
                    watch._tops_seen[id(module)] = weakref.ref(module)
            if watch.depth == 0 and not torch.is_grad_enabled() and watch.phase == PRELUDE:
                watch.eval_this_step = True
            elif watch.depth == 0 and torch.is_grad_enabled():
                if watch.phase in ("other", PRELUDE):
                    watch._enter("forward")
                if not watch.forward_this_step:
                    watch.forward_this_step = True
                    watch._model_id = id(module)  # each step's: a model swapped mid-run counts too
                    if watch.forward_info is None or watch._in_probe():
                        watch.forward_info = _forward_info(torch, module, args)
                # the model's inputs, not the loss module's, nor a checkpointed forward recomputed in backward
                if id(module) == watch._model_id and watch.phase != "backward":
                    batch = next((a for a in args if isinstance(a, torch.Tensor)), None)
                    watch.samples += int(batch.shape[0]) if batch is not None and batch.dim() else 0
            watch.depth += 1

        def pre_with_kwargs(module: Any, args: tuple, kwargs: dict) -> None:
            # a model given its batch by keyword (Hugging Face's model(**batch)): its tensors count too
            pre(module, (*args, *kwargs.values()) if kwargs else args)

        def post(module: Any, args: tuple, output: Any) -> None:
            if watch.in_loader or threading.get_ident() != watch.training_thread:
                return
            watch.depth = max(0, watch.depth - 1)

        tops = [m for m in (ref() for ref in (self._tops or {}).values()) if m is not None]
        if tops:  # after the warm-up: only the modules the loop calls itself, so the rest run hook-free
            self._module_handles = [
                handle
                for m in tops
                for handle in (
                    m.register_forward_pre_hook(pre_with_kwargs, with_kwargs=True),
                    m.register_forward_hook(post, always_call=True),
                )
            ]
        else:
            self._module_handles = [
                nn_module.register_module_forward_pre_hook(pre),
                nn_module.register_module_forward_hook(post, always_call=True),
            ]
        self._handles.extend(self._module_handles)

    def _hook_tops_only(self, torch: Any) -> None:
        """Global module hooks make every module call take PyTorch's slow path (about 8 us each, 4% of
        a 2 ms step measured); the last warm-up, probe and timed steps need only the calls the loop
        makes itself, seen in the warm-up steps before. Where a step reaches backward with no forward seen (a model first called
        later, a fresh copy each step), the hooks go back on every module (`_hook_everywhere`)."""
        if not self._tops_seen:
            return
        self._tops = dict(self._tops_seen)
        for handle in self._module_handles:
            handle.remove()
        self._install_modules(torch)

    def _hook_everywhere(self, torch: Any) -> None:
        self._tops = None
        for handle in self._module_handles:
            handle.remove()
        self._install_modules(torch)

    def _install_moves(self, torch: Any) -> None:
        watch = self

        def timed_move(real: Any) -> Any:
            def move(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                if threading.get_ident() != watch.training_thread:
                    return real(tensor, *args, **kwargs)
                if watch.sync is not None:
                    watch.sync()
                start = watch.clock()
                out = real(tensor, *args, **kwargs)
                if out is tensor or not isinstance(out, torch.Tensor) or out.device == tensor.device:
                    return out
                if watch.sync is not None:
                    watch.sync()
                now = watch.clock()
                watch.acc[watch.phase] += start - watch.mark
                watch.acc["copy"] += now - start
                watch.mark = now
                return out

            return move

        self._patch(torch.Tensor, "to", timed_move(torch.Tensor.to))
        self._patch(torch.Tensor, "cuda", timed_move(torch.Tensor.cuda))

    def _install_data(self, torch: Any) -> None:
        from torch.utils.data import dataloader

        watch = self
        real_next = dataloader._BaseDataLoaderIter.__next__

        def next_batch(iterator: Any) -> Any:
            if threading.get_ident() != watch.training_thread:
                return real_next(iterator)
            if watch.sync is not None:
                watch.sync()
            start = watch.clock()
            watch.in_loader = True
            try:
                return real_next(iterator)
            finally:
                watch.in_loader = False
                now = watch.clock()
                watch.acc[watch.phase] += start - watch.mark
                watch.acc["data"] += now - start
                watch.mark = now
                watch.loader_this_step = True
                if watch.loader is None or watch._in_probe():
                    watch.loader = {
                        "num_workers": getattr(iterator, "_num_workers", None),
                        "pin_memory": bool(getattr(iterator, "_pin_memory", False)),
                        "batch_size": getattr(getattr(iterator, "_index_sampler", None), "batch_size", None),
                    }

        self._patch(dataloader._BaseDataLoaderIter, "__next__", next_batch)

    def _install_backward(self, torch: Any) -> None:
        watch = self
        real = torch.Tensor.backward

        def backward(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            first = not watch.backward_this_step
            watch.backward_this_step = True
            if first and not watch.forward_this_step and watch._tops is not None:
                watch._hook_everywhere(torch)  # the forward came through a module not hooked alone
            # With two optimizers one's gradients are legitimately full at the other's backward (a
            # GAN's generator loss flows into the discriminator): the check is for one optimizer only.
            if first and watch._checked() and watch.step >= 1 and len(watch._live_optimizers()) == 1:
                watch._check_stale_gradients(torch)
            if watch._in_probe():
                watch._stop_saved_hooks()
                kind = watch.forward_info.get("device_type", "cpu") if watch.forward_info else "cpu"
                watch.backward_autocast = watch.backward_autocast or _autocast_on(torch, kind)
            if tensor.grad_fn is not None:
                watch.losses.append((watch.step, weakref.ref(tensor)))
                del watch.losses[:-LOSSES_KEPT]
            watch._enter("backward")
            try:
                return real(tensor, *args, **kwargs)
            finally:
                watch._enter("other")

        self._patch(torch.Tensor, "backward", backward)

    def _install_optim(self, torch: Any) -> None:
        from torch.optim import optimizer as optim

        watch = self

        def pre(opt: Any, args: tuple, kwargs: dict) -> None:
            # An optimizer stepped by another (a wrapper such as Lookahead): the outer one counts. A step
            # that raised (and was caught) leaves its own id, which its next step replaces.
            if watch.stepping and watch.stepping != id(opt):
                return
            watch.stepping = id(opt)
            watch._enter("optimizer")
            if not any(ref() is opt for ref in watch._optimizers):
                watch._optimizers.append(weakref.ref(opt))

        def post(opt: Any, args: tuple, kwargs: dict) -> None:
            if watch.stepping != id(opt):
                return  # the inner step of a wrapper
            watch.stepping = 0
            anchor = watch._anchor() if watch._anchor is not None else None
            if anchor is not None and opt is not anchor:
                watch._others_run += 1
            if anchor is None or watch._others_run > max(3, 2 * watch._others_longest):
                # none yet, or collected, or other steps ran far longer than any turn of the loop had
                # (a warm-up optimizer kept, then the main one): the loop moved on
                watch._anchor, anchor = weakref.ref(opt), opt
                watch._others_longest = watch._others_run = 0
            if opt is anchor:
                watch._others_longest = max(watch._others_longest, watch._others_run)
                watch._others_run = 0
                watch._end_step(torch)
            else:
                watch._enter("other")  # another optimizer of the same turn of the loop

        self._handles.append(optim.register_optimizer_step_pre_hook(pre))
        self._handles.append(optim.register_optimizer_step_post_hook(post))

        def zeroing(real: Any) -> Any:
            def zero_grad(owner: Any, *args: Any, **kwargs: Any) -> Any:
                watch.zero_grads += 1
                was = watch.phase
                watch._enter("optimizer")
                try:
                    return real(owner, *args, **kwargs)
                finally:
                    watch._enter(was)

            return zero_grad

        self._patch(torch.optim.Optimizer, "zero_grad", zeroing(torch.optim.Optimizer.zero_grad))
        self._patch(torch.nn.Module, "zero_grad", zeroing(torch.nn.Module.zero_grad))
        scaler = getattr(getattr(torch, "amp", None), "GradScaler", None)
        if scaler is not None:
            real_scale = scaler.scale

            def scale(owner: Any, outputs: Any) -> Any:
                # GradScaler(enabled=False) passes outputs through: nanoGPT builds one so under bfloat16
                watch.scaler_calls += bool(getattr(owner, "is_enabled", lambda: True)())
                return real_scale(owner, outputs)

            self._patch(scaler, "scale", scale)

    def _install_reads(self, torch: Any) -> None:
        watch = self

        def counted(real: Any, always: bool) -> Any:
            def read(tensor: Any, *args: Any, **kwargs: Any) -> Any:
                if watch._mine_file():
                    on_device = tensor.device.type != "cpu"
                    if always or on_device:
                        watch.reads += 1
                        watch.syncs += on_device
                return real(tensor, *args, **kwargs)

            return read

        self._patch(torch.Tensor, "item", counted(torch.Tensor.item, True))
        self._patch(torch.Tensor, "tolist", counted(torch.Tensor.tolist, True))
        self._patch(torch.Tensor, "cpu", counted(torch.Tensor.cpu, False))

    def _install_saves(self, torch: Any) -> None:
        watch = self
        real = torch.save

        def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
            devices: dict[str, int] = {}
            _tensor_devices(torch, obj, devices, 0)
            watch.saves.append({"step": watch.step, "file": str(f)[:200], "devices": devices})
            del watch.saves[:-20]
            return real(obj, f, *args, **kwargs)

        self._patch(torch, "save", save)

    def _install_clocks(self, torch: Any) -> None:
        """The script's own clock reads and synchronize calls (a GPU's work is queued: a clock
        read without a synchronize before it times the queueing, not the work)."""
        watch = self
        for name in ("time", "perf_counter", "monotonic"):
            real = getattr(time, name)

            def clock(_real: Any = real) -> Any:
                if watch._mine_file():
                    watch.clock_reads += 1
                return _real()

            self._patch(time, name, clock)
        real_sync = torch.cuda.synchronize

        def synchronize(*args: Any, **kwargs: Any) -> Any:
            if watch._mine_file():
                watch.script_syncs += 1
            return real_sync(*args, **kwargs)

        self._patch(torch.cuda, "synchronize", synchronize)
        self.real_sync = real_sync

    # ------------------------------------------------------------ checks on untimed steps

    def _live_optimizers(self) -> list[Any]:
        return [opt for opt in (ref() for ref in self._optimizers) if opt is not None]

    def _params(self) -> list[Any]:
        """Every parameter the optimizers step, once (two optimizers may share param_groups)."""
        seen: dict[int, Any] = {}
        for opt in self._live_optimizers():
            for group in opt.param_groups:
                for p in group["params"]:
                    seen.setdefault(id(p), p)
        return list(seen.values())

    def _check_stale_gradients(self, torch: Any) -> None:
        grads = [p.grad for p in self._params() if p.grad is not None]
        stale = bool(grads) and any(bool(g.detach().any()) for g in grads)
        norm = (
            float(torch.linalg.vector_norm(torch.stack([g.detach().float().norm() for g in grads]))) if grads else 0.0
        )
        self.grad_checks.append({"step": self.step + 1, "stale": stale, "norm": norm, "zero_grads": self.zero_grads})

    def _start_probes(self, torch: Any) -> None:
        from torch.utils.flop_counter import FlopCounterMode

        self._param_ptrs = {p.data_ptr() for p in self._params()}
        self._saved = {}
        if self.cuda:
            self.real_sync()
            torch.cuda.reset_peak_memory_stats()
            self.probe["allocated_before"] = torch.cuda.memory_allocated()
        else:
            saved = self._saved
            ptrs = self._param_ptrs

            def pack(t: Any) -> Any:
                try:
                    storage = t.untyped_storage()
                    if storage.data_ptr() not in ptrs:
                        saved[storage.data_ptr()] = storage.nbytes()
                except (RuntimeError, NotImplementedError):
                    pass
                return t

            self._saved_hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
            self._saved_hooks.__enter__()
        self._flop_mode = FlopCounterMode(display=False)
        self._flop_mode.__enter__()

    def _stop_saved_hooks(self) -> None:
        if self._saved_hooks is not None:
            self._saved_hooks.__exit__(None, None, None)
            self._saved_hooks = None
            self.probe["activation_bytes"] = sum(self._saved.values())

    def _finish_probes(self, torch: Any) -> None:
        self._stop_saved_hooks()
        if len(self._live_optimizers()) > 1:  # a second optimizer first stepped after some checks ran
            self.grad_checks = []
        if self._flop_mode is not None:
            mode, self._flop_mode = self._flop_mode, None
            mode.__exit__(None, None, None)
            self.probe["flops"] = int(mode.get_total_flops())
        params = self._params()
        seen: set[int] = set()
        weights = grads = 0
        for p in params:
            if p.data_ptr() in seen:
                continue
            seen.add(p.data_ptr())
            weights += p.numel() * p.element_size()
            if p.grad is not None:
                grads += p.grad.numel() * p.grad.element_size()
        optimizers = self._live_optimizers()
        state = 0
        for opt in {id(opt.state): opt for opt in optimizers}.values():  # a wrapper may share its state
            for entry in opt.state.values():
                for value in entry.values() if isinstance(entry, dict) else ():
                    if isinstance(value, torch.Tensor):
                        state += value.numel() * value.element_size()
        if optimizers:
            self.probe["optimizer"] = " + ".join(type(opt).__name__ for opt in optimizers)
            self.probe["optimizer_keys"] = sorted(
                {k for opt in optimizers for e in opt.state.values() if isinstance(e, dict) for k in e if k != "step"}
            )
        self.probe.update(
            params=sum(p.numel() for p in params),
            weight_bytes=weights,
            gradient_bytes=grads,
            optimizer_bytes=state,
            param_dtype=str(params[0].dtype).replace("torch.", "") if params else None,
        )
        if self.cuda:
            self.real_sync()
            self.probe["peak_allocated"] = torch.cuda.max_memory_allocated()
            self.probe["allocated_after"] = torch.cuda.memory_allocated()

    # ------------------------------------------------------------ the end of a step

    def _end_step(self, torch: Any) -> None:
        step = self.step + 1
        if step > self.last_step:
            self._end_overhead_step(torch, step)
            return
        if self.cuda and step == self.last_timed:
            self.real_sync()  # the window's queued work belongs to the window
        elif self.sync is not None:
            self.sync()  # the split window: the optimizer's queued work is the optimizer's
        now = self.clock()
        self.acc[self.phase] += now - self.mark
        total = now - self.step_start
        self.step = step
        prelude = self.acc.pop(PRELUDE)
        made_batch = self.forward_this_step and not self.loader_this_step and not self.eval_this_step
        self.acc["data" if made_batch else "other"] += prelude
        data_from = "loader" if self.loader_this_step else "script" if made_batch else ""
        record = {"step": step, "total": total, **self.acc, "data_from": data_from}
        record.update(reads=self.reads, syncs=self.syncs, samples=self.samples)
        if self.cuda:
            record["clock_reads"] = self.clock_reads
        if self.probe_step < step <= self.last_timed:
            self.timed.append(record)
        elif self.last_timed < step <= self.last_step:
            self.split.append(record)
        if step == self.last_timed:
            self.window_s = now - self.window_start
        if not self.probe_step < step < self.last_timed:  # not on the timed steps: it walks 64 weakrefs
            self._check_losses()
        if step == max(1, self.warmup - 1):
            # a warm-up step before the probe: a model compiled in place (model.compile()) recompiles
            # when its hooks change, and under the probe's FLOP counter it runs uncompiled
            self._hook_tops_only(torch)
        if step == self.warmup:
            self._start_probes(torch)
        elif step == self.probe_step:
            self._finish_probes(torch)
        if self.cuda and step == self.last_timed:
            self.sync = self.real_sync  # the split window: a synchronize at each boundary
        self.acc = dict.fromkeys((*PHASES, PRELUDE), 0.0)
        self.reads = self.syncs = self.clock_reads = self.samples = 0
        self.forward_this_step = self.backward_this_step = False
        self.loader_this_step = self.eval_this_step = False
        self.phase = PRELUDE
        if self.cuda and step == self.probe_step:
            self.real_sync()
        self.step_start = self.mark = self.clock()
        if step == self.probe_step:
            self.window_start = self.step_start
        if step >= self.last_step and self.overhead_pairs:
            self.finished = True  # the report's windows are done; the script may end in this one
            self.sync = None
            step_s = self.window_s / self.steps if self.window_s else None
            self.block_steps = _block_steps(step_s)
            if self.deadline is not None and step_s:  # only the pairs that fit: the report is done already
                room = (self.deadline - time.time()) * OVERHEAD_ROOM
                self.overhead_pairs = max(0, min(self.overhead_pairs, int(room / (2 * self.block_steps * step_s))))
            if not self.overhead_pairs:
                raise Stopped
            self._start_block(torch, 0)
        elif step >= self.last_step:
            self.finished = True
            raise Stopped

    # ------------------------------------------------------------ the overhead window

    def _plain_block(self, block: int) -> bool:
        """Pair i is (plain, watched) when i is even, (watched, plain) when odd."""
        pair, second = divmod(block, 2)
        return (pair % 2 == 0) != bool(second)

    def _start_block(self, torch: Any, block: int) -> None:
        plain = self._plain_block(block)
        if plain and not self._stripped:  # two plain blocks in a row: already off (a second strip would
            self._strip()  # save the originals over the wrappers)
        elif not plain and self._stripped:
            self._unstrip(torch)
        self.acc = dict.fromkeys((*PHASES, PRELUDE), 0.0)
        self.reads = self.syncs = self.clock_reads = self.samples = 0
        self.forward_this_step = self.backward_this_step = False
        self.loader_this_step = self.eval_this_step = False
        self.phase = PRELUDE
        if self.cuda:
            self.real_sync()
        self._block_start = self.step_start = self.mark = self.clock()

    def _end_overhead_step(self, torch: Any, step: int) -> None:
        block, at = divmod(step - self.last_step - 1, self.block_steps)
        plain = self._plain_block(block)
        if not plain:  # a watched step's own bookkeeping, as in the timed window, kept nowhere
            now = self.clock()
            self.acc[self.phase] += now - self.mark
            self.acc["data"] += self.acc.pop(PRELUDE)
            _ = {"step": step, "total": now - self.step_start, **self.acc, "reads": self.reads, "syncs": self.syncs}
            self.acc = dict.fromkeys((*PHASES, PRELUDE), 0.0)
            self.reads = self.syncs = self.clock_reads = self.samples = 0
            self.forward_this_step = self.backward_this_step = False
            self.loader_this_step = self.eval_this_step = False
            self.phase = PRELUDE
            self.step_start = self.mark = self.clock()
        self.step = step
        if at < self.block_steps - 1:
            return
        if self.cuda:
            self.real_sync()
        self.blocks.append({"plain": plain, "seconds": self.clock() - self._block_start})
        if step >= self.end_step:
            if self._stripped:
                self._unstrip(torch)  # uninstall() then puts back the originals, as after any run
            self.finished = True
            raise Stopped
        self._start_block(torch, block + 1)

    def _check_losses(self) -> None:
        old = [ref for made, ref in self.losses if made <= self.step - OLD_AFTER]
        if len(old) >= 2:
            self.losses_checked = len(old)
            self.losses_alive_old = sum(1 for ref in old if ref() is not None)

    # ------------------------------------------------------------ what was seen

    def close(self) -> None:
        """Undo what an interrupted step left entered (a crash inside the probe step)."""
        try:
            self._stop_saved_hooks()
            if self._flop_mode is not None:
                self._flop_mode.__exit__(None, None, None)
                self._flop_mode = None
        except Exception:  # noqa: BLE001 - the report is written anyway
            pass

    def result(self) -> dict[str, Any]:
        return {
            "steps_done": self.step,
            "warmup": self.warmup,
            "steps_wanted": self.steps,
            "split_steps": self.split_steps if self.cuda else 0,
            "overhead_blocks": self.blocks,
            "overhead_block_steps": self.block_steps,
            "overhead_pairs_wanted": self.overhead_wanted,
            "finished_window": self.finished,
            "phase_now": "other" if self.phase == PRELUDE else self.phase,
            "timed": self.timed,
            "split": self.split,
            "window_s": self.window_s,
            "cuda": self.cuda,
            "accelerator": self.accelerator,
            "forward": self.forward_info,
            "backward_autocast": self.backward_autocast,
            "zero_grads": self.zero_grads,
            "grad_checks": self.grad_checks,
            "losses_checked": self.losses_checked,
            "losses_alive_old": self.losses_alive_old,
            "loader": self.loader,
            "scaler_calls": self.scaler_calls,
            "script_syncs": self.script_syncs,
            "saves": self.saves,
            "probe": self.probe,
        }


def _block_steps(step_s: float | None) -> int:
    """Steps in an overhead block: about BLOCK_S of them."""
    if not step_s or step_s <= 0:
        return BLOCK_STEPS_MIN
    return max(BLOCK_STEPS_MIN, min(BLOCK_STEPS_MAX, math.ceil(BLOCK_S / step_s)))


def _autocast_on(torch: Any, kind: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(kind))
    except TypeError:  # an older PyTorch: no device argument
        return bool(torch.is_autocast_enabled())


def _forward_info(torch: Any, module: Any, args: tuple) -> dict[str, Any]:
    """Where the model's weights and the batch were at a training forward, and autocast's state."""
    param = next(module.parameters(), None)
    batch = next((a for a in args if isinstance(a, torch.Tensor)), None)
    kind = param.device.type if param is not None else batch.device.type if batch is not None else "cpu"
    on = _autocast_on(torch, kind)
    dtype = None
    if on:
        try:
            dtype = str(torch.get_autocast_dtype(kind)).replace("torch.", "")
        except (AttributeError, RuntimeError):
            dtype = None
    return {
        "module": type(module).__name__,
        "device_type": kind,
        "weights_device": str(param.device) if param is not None else None,
        "weights_dtype": str(param.dtype).replace("torch.", "") if param is not None else None,
        "batch_device": str(batch.device) if batch is not None else None,
        "batch_shape": list(batch.shape) if batch is not None else None,
        "autocast": on,
        "autocast_dtype": dtype,
        "tf32": bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest",
    }


def _tensor_devices(torch: Any, obj: Any, out: dict[str, int], depth: int) -> None:
    """Count the tensors a saved object holds, by device (dicts, lists, modules; bounded)."""
    if depth > 5 or sum(out.values()) > 10_000:
        return
    if isinstance(obj, torch.Tensor):
        out[obj.device.type] = out.get(obj.device.type, 0) + 1
    elif isinstance(obj, torch.nn.Module):
        _tensor_devices(torch, obj.state_dict(), out, depth + 1)
    elif isinstance(obj, dict):
        for value in list(obj.values())[:10_000]:
            _tensor_devices(torch, value, out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj[:10_000]:
            _tensor_devices(torch, value, out, depth + 1)
    elif hasattr(obj, "state_dict") and callable(obj.state_dict):  # an optimizer
        try:
            _tensor_devices(torch, obj.state_dict(), out, depth + 1)
        except Exception:  # noqa: BLE001 - an object whose state_dict wants arguments
            pass
