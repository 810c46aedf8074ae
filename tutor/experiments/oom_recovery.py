"""oom-recovery: a real out-of-memory error under a limit the run sets itself, the clean-up, and the fix.

The model is memory-ledger's, `layers` x (Linear(width, width) + ReLU), trained with Adam on
random inputs (loss: the mean square of the output). The steps:

1. The formula. Training keeps P x 16 bytes whatever the batch (float32 weights, gradients and
   Adam's two moments) plus the activations autograd saves for backward, the input included,
   measured per sample at batch 8 with saved_for_backward. predicted(batch) = P x 16 + batch x
   per-sample bytes; fits_batch is the largest batch with predicted(batch) <= the limit. The
   default batch is twice that.
2. The limit, real: on CUDA torch.cuda.set_per_process_memory_fraction (the caching allocator
   then raises torch.OutOfMemoryError before reserving past it); on Linux the soft RLIMIT_DATA
   (the process's data segment, which malloc's memory counts in; allocations past it fail and
   PyTorch's CPU allocator raises RuntimeError "DefaultCPUAllocator: can't allocate memory");
   on MPS torch.mps.set_per_process_memory_fraction. All count from what the process held just
   before the model was built. Elsewhere no limit is set and nothing is tried ("none").
   The limit is lowered only around the too-big step and the recovery, and always restored.
   On the CPU, glibc keeps freed blocks under its mmap threshold (which grows up to 32 MiB) in
   heaps that stay counted in VmData, and after a failed allocation retries in a new heap, so
   while the limit is on, mallopt(M_MMAP_THRESHOLD, 1 MiB) gives each block of 1 MiB or more its
   own mapping, unmapped when freed; afterwards the threshold is set to 32 MiB (mallopt cannot
   turn glibc's dynamic threshold back on; 32 MiB is the most it would grow to).
3. One training step with the too-big batch: the error is caught, its type and first line kept,
   and the memory the step held is measured inside the except block and after the clean-up
   (outside it: drop the references, gc.collect(), then hand the allocator's free memory back:
   torch.cuda.empty_cache() / torch.mps.empty_cache(), or glibc's malloc_trim(0) on the CPU).
   released: CUDA/MPS: allocated bytes equal to those before the attempt; CPU: VmData (from
   /proc/self/status) back within RELEASE_MARGIN (4 MiB) of its value before the attempt.
4. The recovery: the same batch as k = ceil(batch / fits_batch) micro-batches with gradient
   accumulation (each micro-batch's loss times its share of the batch: 1/k for equal parts),
   one Adam step, under the same limit. The formula leaves out the working memory of a step
   (gradients flowing back, Adam's temporaries, the allocator's own overhead), so if that k
   still runs out of memory, k doubles, the way a training script retries.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import sys
from collections.abc import Iterator
from typing import Any, TypedDict

import torch

from tutor.experiments import gpu_share
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.specs.oom_recovery import OomRecoveryParams
from tutor.experiments.training import saved_for_backward, seed_everything
from tutor.measurement.timing import Stopwatch, synchronize

MIB = 2**20
PROBE_BATCH = 8  # the small batch the per-sample activations are measured at
MAX_TRIES = 6  # recovery attempts (k doubles each time) before giving up
M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
LIMIT_MMAP_THRESHOLD = 2**20  # while the CPU limit is on: tensors of 1 MiB or more get their own mapping
AFTER_MMAP_THRESHOLD = 32 * 2**20  # afterwards: glibc's own ceiling for its (then disabled) dynamic threshold

# Memory above the start of the too-big step, at each stage of the clean-up: "except" inside the
# except block (None: reading it ran out of memory; absent: no error), then "collected" and "cache".
_Stages = TypedDict("_Stages", {"except": int | None, "collected": int, "cache": int}, total=False)
RELEASE_MARGIN = 4 * 2**20  # CPU: VmData may stay this many bytes above where the failed step started


def _proc_status(key: str) -> int | None:
    """A `kB` field of /proc/self/status in bytes (Linux), else None."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@functools.cache
def _glibc() -> Any:
    """The C library if it is glibc (it has malloc_trim and mallopt), else None."""
    try:
        libc = ctypes.CDLL(None)  # the process's own symbols, the C library's among them
        libc.malloc_trim, libc.mallopt  # noqa: B018  (AttributeError if not glibc)
    except (OSError, AttributeError, TypeError):
        return None
    return libc


def _malloc_trim() -> bool:
    """glibc's malloc_trim(0): give free heap memory back to the system (CPU's empty_cache)."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def _mmap_threshold(nbytes: int) -> bool:
    """glibc's mallopt(M_MMAP_THRESHOLD, nbytes): blocks of nbytes or more are mapped from the
    system on their own and unmapped when freed, instead of being carved from malloc's heaps."""
    libc = _glibc()
    return bool(libc is not None and libc.mallopt(M_MMAP_THRESHOLD, nbytes))


def limit_method(device: torch.device) -> str:
    """How a memory limit can be set for `device` here."""
    if device.type == "cuda":
        return "set_per_process_memory_fraction"
    if device.type == "mps":
        has = hasattr(torch.mps, "set_per_process_memory_fraction")
        return "mps.set_per_process_memory_fraction" if has else "none"
    if device.type == "cpu" and sys.platform.startswith("linux") and _proc_status("VmData") is not None:
        try:
            import resource  # noqa: F401  (Unix only)
        except ImportError:
            return "none"
        return "RLIMIT_DATA"
    return "none"


class MemoryLimit:
    """Sets and restores one real memory limit, and reads the memory it counts."""

    def __init__(self, device: torch.device, method: str) -> None:
        self.device = device
        self.method = method
        self._restore: Any = None
        self._mallopt = False

    def used(self) -> int:
        """Memory the limit counts now: reserved by the caching allocator (CUDA), allocated
        by the driver (MPS), or the data segment (CPU: VmData)."""
        synchronize(str(self.device))
        if self.method == "set_per_process_memory_fraction":
            return torch.cuda.memory_reserved(self.device)
        if self.method.startswith("mps"):
            return torch.mps.driver_allocated_memory()
        return _proc_status("VmData") or 0

    def allocated(self) -> int:
        """Memory held by live tensors (CUDA/MPS), or VmData on the CPU, which has no such counter."""
        synchronize(str(self.device))
        if self.method == "set_per_process_memory_fraction":
            return torch.cuda.memory_allocated(self.device)
        if self.method.startswith("mps"):
            return torch.mps.current_allocated_memory()
        return _proc_status("VmData") or 0

    def free_cached(self) -> None:
        """After the last reference is gone (and gc.collect()): hand the allocator's free memory back."""
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        elif self.device.type == "mps":
            torch.mps.empty_cache()
        else:
            _malloc_trim()

    def capacity(self) -> int | None:
        """The most memory a limit may allow here (None: unknown)."""
        # On a GPU: what this process holds plus what it may still take (free now, within the
        # class's cap); other processes' memory is never counted as ours.
        if self.method == "set_per_process_memory_fraction":
            held = torch.cuda.memory_reserved(self.device)
            free = gpu_share.available(self.device.type, self.device.index)
            assert free is not None  # a CUDA device: available() is None only off CUDA and MPS
            return held + free
        if self.method.startswith("mps"):
            held = torch.mps.driver_allocated_memory()
            free = gpu_share.available(self.device.type, self.device.index)
            assert free is not None  # an MPS device: available() is None only off CUDA and MPS
            return held + free
        return _mem_available()

    def set(self, allowed: int) -> str:
        """Cap the memory counted by `used()` at `allowed` bytes; returns what was done, in words."""
        if self.method == "set_per_process_memory_fraction":
            total = torch.cuda.get_device_properties(self.device).total_memory
            get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
            self._restore = get(self.device) if get else 1.0
            fraction = min(1.0, allowed / total)
            torch.cuda.set_per_process_memory_fraction(fraction, self.device)
            return (
                f"torch.cuda.set_per_process_memory_fraction({fraction:.5f}), {_mib(allowed)} of "
                f"{_mib(total)}; the caching allocator counts what it reserves, cached blocks included, "
                f"and raises OutOfMemoryError rather than reserve past it. Afterwards the fraction went back "
                f"to {self._restore:g}"
            )
        if self.method.startswith("mps"):
            self._restore = gpu_share.current_mps_fraction()  # the class's cap, in a capped run
            fraction = min(2.0, allowed / torch.mps.recommended_max_memory())
            gpu_share.set_mps_fraction(fraction)
            return (
                f"torch.mps.set_per_process_memory_fraction({fraction:.5f}); afterwards it went back to "
                f"{self._restore:g}, the fraction in force before"
            )
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        self._restore = (soft, hard)
        new = allowed if hard == resource.RLIM_INFINITY else min(allowed, hard)
        if soft != resource.RLIM_INFINITY:
            new = min(new, soft)
        resource.setrlimit(resource.RLIMIT_DATA, (new, hard))
        text = (
            f"the soft RLIMIT_DATA, set to {_mib(new)}: VmData, the memory malloc has taken from the system, "
            "may not grow past it, so an allocation over the limit fails at once instead of using up the "
            "machine's memory"
        )
        if self._mallopt:
            text += (
                ". glibc's mallopt(M_MMAP_THRESHOLD, 1 MiB) gave every block of 1 MiB or more its own "
                "mapping, given back when freed, so that VmData follows the tensors rather than malloc's "
                "pools of freed memory"
            )
        return text + ". The old limit was restored afterwards"

    def prepare(self) -> None:
        """CPU (glibc): from now until restore(), blocks of 1 MiB or more get their own mapping.

        glibc serves blocks under its mmap threshold (which grows up to 32 MiB as big blocks are
        freed) from heaps that it keeps, reuses free heap memory it already holds (not counted
        as growth), and after a failed allocation retries in a new heap: VmData would count free
        memory no tensor uses, and miss tensors put in memory it held before. Called before the
        baseline, so the model's weights count too."""
        if self.method == "RLIMIT_DATA" and not self._mallopt:
            self._mallopt = _mmap_threshold(LIMIT_MMAP_THRESHOLD)

    def restore(self) -> None:
        """Put back what `prepare` and `set` changed (safe to call twice, or without them)."""
        if self._mallopt:
            _mmap_threshold(AFTER_MMAP_THRESHOLD)
            self._mallopt = False
        if self._restore is None:
            return
        if self.method == "set_per_process_memory_fraction":
            torch.cuda.set_per_process_memory_fraction(self._restore, self.device)
        elif self.method.startswith("mps"):
            gpu_share.set_mps_fraction(self._restore)
        else:
            import resource

            resource.setrlimit(resource.RLIMIT_DATA, self._restore)
        self._restore = None


def is_oom(exc: BaseException) -> bool:
    """An out-of-memory error from any allocator: CUDA's, MPS's, the CPU's or Python's."""
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc).lower()
    return "out of memory" in text or "can't allocate memory" in text


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _mib(n: float) -> str:
    return f"{n / MIB:,.0f} MiB"


_EVENTS = {"started": Started, "step": Step, "note": Note, "table": Table, "finished": Finished}


def measure(p: OomRecoveryParams, dev: Device) -> Iterator[Event]:
    device = torch.device(dev.torch_device)
    if limit_method(device) == "RLIMIT_DATA":  # the CPU: in a process of its own (see run_here)
        yield from child_events([sys.executable, "-m", __spec__.name if __spec__ else __name__, p.model_dump_json()])
    else:
        yield from run_here(p, dev)


def run_here(p: OomRecoveryParams, dev: Device, *, separate: bool = False) -> Iterator[Event]:
    """The experiment in this process; the limits it lowers are restored whatever happens.

    On the CPU, `run` starts a fresh Python process for this (`separate`): RLIMIT_DATA binds a
    whole process, the tutor included, and memory that glibc already holds free in a process
    that has been working is reused without counting against the limit, so the same run could
    fail in one process and not in another."""
    limit = MemoryLimit(torch.device(dev.torch_device), limit_method(torch.device(dev.torch_device)))
    try:
        yield from _run(p, dev, limit, separate)
    finally:  # whatever happens (an error, a cancelled run), the process gets its limits back
        limit.restore()


def child_events(command: list[str]) -> Iterator[Event]:
    """Run `command`, which prints one JSON event per line (tutor.experiments.events.to_json), and yield the
    events; an {"event": "error"} line or a failed exit raises RuntimeError. Stopping the
    iteration (a cancelled run) kills the process."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue  # not ours: something a library printed
                data = json.loads(line)
                kind = data.pop("event")
                if kind == "error":
                    raise RuntimeError(data["message"])
                yield _EVENTS[kind](**data)
            if proc.wait() != 0:
                errors.seek(0)
                last = errors.read().decode(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(
                    f"the measuring process exited with code {proc.returncode}" + (f": {last[0]}" if last else "")
                )
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _child(argv: list[str]) -> int:
    """`python -m tutor.experiments.oom_recovery PARAMS_JSON`: the CPU run, events as JSON lines."""
    import json

    from tutor.experiments import devices
    from tutor.experiments.events import to_json

    try:
        p = OomRecoveryParams.model_validate_json(argv[0])
        for event in run_here(p, devices.resolve("cpu"), separate=True):
            print(json.dumps(to_json(event)), flush=True)
    except BaseException as exc:  # noqa: BLE001 - the parent shows it; no traceback on its screen
        print(json.dumps({"event": "error", "message": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    return 0


def _run(p: OomRecoveryParams, dev: Device, limit: MemoryLimit, separate: bool) -> Iterator[Event]:
    from tutor.experiments.model import linear_stack

    seed_everything(p.seed)
    device, method = limit.device, limit.method
    yield Started(
        "oom-recovery",
        str(device),
        dev.name,
        "random inputs",
        f"{p.layers} x Linear({p.width}, {p.width}) + ReLU, Adam; limit {p.limit_mb:,} MiB ({method})",
    )

    # Start the one-time costs (CPU worker threads, CUDA context and cuBLAS workspace) before
    # the baseline, so that the limit is left for the model and its training.
    warm = linear_stack(16, 1).to(device)
    warm(torch.randn(8, 16, device=device)).sum().backward()
    torch.optim.Adam(warm.parameters()).step()
    del warm
    limit.prepare()
    gc.collect()
    limit.free_cached()
    base = limit.used()
    base_allocated = limit.allocated()

    limit_bytes = p.limit_mb * MIB
    capacity = limit.capacity() if method != "none" else None
    if capacity is not None:  # never let the run take memory this machine does not have to spare
        cap = capacity // 2 if device.type == "cpu" else capacity - base
        if limit_bytes > cap:
            yield Note(
                f"limit_mb={p.limit_mb:,} is more than this machine can safely give: using {_mib(cap)}"
                + (
                    " (half the memory available)."
                    if device.type == "cpu"
                    else " (the device's memory not yet reserved)."
                ),
                "warning",
            )
            limit_bytes = max(cap, 0) // MIB * MIB

    model = linear_stack(p.width, p.layers).to(device)
    count = sum(t.numel() for t in model.parameters())
    fixed = 16 * count  # float32 weights + gradients + Adam's two moments
    with saved_for_backward(model) as saved:
        probe = model(torch.randn(PROBE_BATCH, p.width, device=device)).pow(2).mean()
    per_sample = sum(saved.values()) // PROBE_BATCH
    del probe, saved
    fits = max(0, (limit_bytes - fixed) // per_sample)
    batch = p.batch_size or max(2 * fits, 1)
    predicted = fixed + batch * per_sample
    yield Note(
        f"The formula: {count:,} parameters x 16 bytes (weights, gradients, Adam's two moments) = "
        f"{_mib(fixed)}, plus the activations autograd saves, measured at batch {PROBE_BATCH}: "
        f"{per_sample:,} bytes per sample"
        + (
            f" ({p.layers + 1} tensors of {p.width} floats, the input included)"
            if per_sample == (p.layers + 1) * p.width * 4
            else ""
        )
        + f". Batch {batch:,} needs {_mib(fixed)} + {batch:,} x {per_sample:,} B = "
        f"{_mib(predicted)}; the limit is {_mib(limit_bytes)}, so by the formula the largest batch that "
        f"fits is {fits:,}: ({_mib(limit_bytes)} - {_mib(fixed)}) / {per_sample:,} B. That is the edge, "
        "with no room left for what a step also needs (the gradients flowing back, the optimizer's "
        "temporaries, the allocator's own overhead): a batch right at it fails too, so a fix aims "
        "below it."
    )
    if fits == 0:
        yield Note(
            f"Not even batch 1 fits: the weights, gradients and Adam state alone need {_mib(fixed)}. "
            "Splitting the batch cannot help; a smaller model, an optimizer with less state (SGD) or "
            "a larger limit can.",
            "warning",
        )

    metrics: dict[str, Any] = {
        "limit_bytes": limit_bytes,
        "batch_size": batch,
        "predicted_bytes": predicted,
        "fits_batch": fits,
        "oom": False,
        "error_type": None,
        "error_message": None,
        "released": None,
        "recovered": None,
        "micro_batches": None,
        "method": method,
        "device": str(device),
    }
    if method == "none":
        why = (
            "this is not Linux, where the run lowers RLIMIT_DATA"
            if device.type == "cpu"
            else f"this PyTorch has no per-process memory limit for {device.type}"
        )
        yield Note(
            f"No memory limit can be set here ({why}), so nothing was tried: running out of memory for "
            "real could make the operating system kill the process instead of raising an error.",
            "warning",
        )
        yield Finished(metrics)
        return

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    kept: list[int] = []  # memory above the baseline at the end of each forward (weights, grads, activations)

    def micro_step(n: int, share: float) -> float:
        """Forward and backward of `n` samples; gradients add up in .grad. Returns the mean loss."""
        x = torch.randn(n, p.width, device=device)
        loss = model(x).pow(2).mean()
        kept.append(limit.allocated() - base_allocated)
        (loss * share).backward()
        return loss.item()

    rows: list[list[str]] = []
    stages: _Stages = {}  # memory above the start of the too-big step, at each stage of the clean-up
    tries: list[int] = []  # k of each recovery attempt
    leftovers: list[int] = []  # memory above the baseline after each failed attempt's clean-up

    def clean_up() -> None:
        """What to do after an out-of-memory error, outside the except block."""
        optimizer.zero_grad(set_to_none=True)  # drop the gradients
        optimizer.state.clear()  # and any Adam state a half-done step left behind
        gc.collect()

    how = limit.set(base + limit_bytes)
    try:
        # 3. The too-big step.
        before = limit.allocated()
        optimizer.zero_grad(set_to_none=True)
        try:
            micro_step(batch, 1.0)
            optimizer.step()
            synchronize(str(device))
        except (RuntimeError, MemoryError) as exc:
            if not is_oom(exc):
                raise
            metrics.update(oom=True, error_type=type(exc).__name__, error_message=_first_line(exc))
            try:
                stages["except"] = limit.allocated() - before  # the traceback still holds the step's frames
            except MemoryError:
                stages["except"] = None
        # Outside the except block the exception, its traceback and their frames are gone.
        clean_up()
        stages["collected"] = limit.allocated() - before
        limit.free_cached()
        stages["cache"] = limit.allocated() - before
        if metrics["oom"]:
            if device.type == "cpu":
                metrics["released"] = stages["cache"] <= RELEASE_MARGIN
            else:
                metrics["released"] = stages["cache"] == 0
        rows.append(["one step", f"{batch:,}", _mib(predicted), "out of memory" if metrics["oom"] else "trained"])

        # 4. The recovery: the same batch in micro-batches, gradients accumulated.
        if metrics["oom"] and fits > 0:
            k = max(2, math.ceil(batch / fits))
            for _ in range(MAX_TRIES):
                k = min(k, batch)
                tries.append(k)
                sizes = [batch // k + (1 if i < batch % k else 0) for i in range(k)]
                ok = True
                kept.clear()
                optimizer.zero_grad(set_to_none=True)
                clock = Stopwatch(str(device))
                try:
                    for i, n in enumerate(sizes):
                        value = micro_step(n, n / batch)  # each loss times its share: 1/k for equal parts
                        seconds = clock.elapsed()
                        event = Step(
                            i + 1,
                            k,
                            value,
                            seconds,
                            sum(sizes[: i + 1]) / seconds if seconds > 0 else 0.0,
                            label=f"{k} micro-batches",
                        )
                        with clock.paused():
                            yield event
                    optimizer.step()
                    synchronize(str(device))
                except (RuntimeError, MemoryError) as exc:
                    if not is_oom(exc):
                        raise
                    ok = False
                rows.append(
                    [
                        f"{k} x {sizes[0]:,} accumulated",
                        f"{batch:,}",
                        _mib(fixed + sizes[0] * per_sample),
                        "trained" if ok else "out of memory",
                    ]
                )
                if ok:
                    metrics.update(recovered=True, micro_batches=k)
                    break
                clean_up()
                limit.free_cached()
                leftovers.append(limit.used() - base)
                if k >= batch:
                    break
                k *= 2
            if metrics["recovered"] is None:
                metrics["recovered"] = False
    finally:
        limit.restore()

    cpu = device.type == "cpu"
    limit_counter = {"cpu": "VmData", "cuda": "memory reserved"}.get(device.type, "driver memory")
    yield Table(
        f"Limit {_mib(limit_bytes)} ({method}); memory by the formula, P x 16 + batch x {per_sample:,} B",
        ["what", "batch", "memory (predicted)", "result"],
        rows,
    )
    yield Note(
        f"The limit: {_mib(limit_bytes)} above what the process held before the model was built "
        f"({_mib(base)}). How: {how}."
        + (
            " This ran in a fresh Python process started for it: a limit on the tutor's own process would "
            "bind the tutor too, and memory its allocator already holds free would be reused without "
            "counting against the limit."
            if separate
            else ""
        )
    )
    if metrics["oom"]:
        yield Note(f"Batch {batch:,}: {metrics['error_type']}: {metrics['error_message']}", "result")
        counter = (
            "VmData (the process's data segment, what RLIMIT_DATA counts)"
            if cpu
            else (f"torch.{device.type} allocated memory")
        )
        flush = (
            "glibc's malloc_trim(0), the CPU's counterpart of empty_cache()"
            if cpu
            else (f"torch.{device.type}.empty_cache()")
        )
        held = stages.get("except")
        pinned = held is not None and held - stages["collected"] > RELEASE_MARGIN
        yield Note(
            f"{counter}, above where the failed step started: "
            + ("unknown" if held is None else _mib(max(held, 0)))
            + " inside the except block"
            + (
                ", where the exception's traceback still keeps the step's frames and their tensors alive; "
                if pinned
                else "; "
            )
            + f"{_mib(max(stages['collected'], 0))} after leaving the block, dropping the gradients "
            f"(zero_grad(set_to_none=True)) and gc.collect(); {_mib(max(stages['cache'], 0))} after {flush}. "
            + (
                "Released" + (f" (within {_mib(RELEASE_MARGIN)})" if cpu else "") + "."
                if metrics["released"]
                else "Not all of it came back."
            )
            + (
                ""
                if cpu
                else " empty_cache() only returns cached blocks that no tensor uses: memory held "
                "by a live tensor stays until the last reference to it is gone."
            ),
            "result" if metrics["released"] else "warning",
        )
    else:
        yield Note(
            f"Batch {batch:,} did not run out of memory under the {_mib(limit_bytes)} limit "
            f"(predicted {_mib(predicted)}): nothing to recover from.",
            "warning",
        )
    if metrics["recovered"]:
        k = metrics["micro_batches"]
        micro = -(-batch // k)
        counter = "VmData" if cpu else "allocated memory"
        text = (
            f"Recovered: the same batch of {batch:,} as {k} micro-batches of about {batch // k:,}, each loss "
            "scaled by its share of the batch and the gradients accumulated, then one Adam step, under the "
            f"same limit. At the end of a micro-batch's forward, {counter} was at most {_mib(max(kept))} above "
            f"the baseline, where the formula puts weights, gradients and activations at P x 8 + {micro:,} x "
            f"{per_sample:,} B = {_mib(8 * count + micro * per_sample)} (Adam's state comes with the step)."
        )
        if k != tries[0]:
            first = fixed + -(-batch // tries[0]) * per_sample
            text += (
                f" The formula's k = ceil({batch:,} / {fits:,}) = {tries[0]} gives micro-batches predicted at "
                f"{_mib(first)} of the {_mib(limit_bytes)} limit, leaving no room for the step's working "
                "memory (the gradients flowing back, Adam's temporaries) or the allocator's overhead, so k "
                "doubled until it trained: leave headroom."
            )
        if leftovers and max(leftovers) > RELEASE_MARGIN:
            text += (
                f" After the failed attempts' clean-ups, {limit_counter} stayed "
                + ", ".join(_mib(v) for v in leftovers)
                + " above the baseline with none of their tensors "
                "alive: memory the allocator kept after the failed allocations, which still counts against "
                "the limit."
            )
        yield Note(text, "result")
    elif metrics["recovered"] is False:
        yield Note(f"Not recovered: even {tries[-1]} micro-batches ran out of memory under the limit.", "warning")
    yield Note(
        "Fixes for out of memory: a smaller batch with gradient accumulation (this run), mixed precision "
        "(autocast halves the activations' bytes), activation checkpointing (recompute activations in "
        "backward instead of keeping them), or an optimizer with less state."
    )
    yield Finished(metrics)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
