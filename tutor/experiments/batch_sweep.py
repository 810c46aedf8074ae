"""batch-sweep: throughput and memory for growing batch sizes, until memory runs out or a budget is hit.

The model is memory-ledger's, `layers` x (Linear(width, width) + ReLU) with Adam, on random
data. The batch doubles from `start_batch`. Each size gets warm-up steps, then `steps` timed
steps (synchronised); its memory is measured the same way as in memory-ledger: on CUDA the
peak allocated of a step, elsewhere parameters + gradients + Adam state + the activations
autograd saves.

Which batch is fastest is a discrete result, and on a plateau a noisy one: two runs of one CPU
named 2,048 and 256. So each timed step is kept, and the fastest is reported as a set: every
batch whose samples/s cannot be told from the fastest's (their ranges over the timed steps,
widened by the guard band, overlap), as best_batch_low .. best_batch_high around best_batch
(the fastest by median). A prediction is then judged as any interval is: a hit when the whole
set lies in the chosen option, a miss when none of it does, else "this machine can't tell yet".

The sweep stops at the first of: `max_batch`; the next size's memory (predicted from the
measured per-sample activations) going over `budget_mb`; or, on CUDA, an out-of-memory
error, which is caught, its memory released (empty_cache), and reported. Off CUDA there is
no safe way to run out of memory (the operating system may kill the process instead), so
there the budget is what stops it.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator

import torch

from tutor.experiments import gpu_share
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import linear_stack
from tutor.experiments.specs.batch_sweep import BatchSweepParams
from tutor.experiments.training import saved_for_backward, seed_everything
from tutor.measurement.intervals import GUARD, widened
from tutor.measurement.timing import median, take_turns

MIB = 2**20
WARMUP_STEPS = 2
CPU_BUDGET_MIB = 1024  # default off CUDA, where running out of memory is not safe to try


def _is_oom(exc: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", ())
    return (bool(oom) and isinstance(exc, oom)) or "out of memory" in str(exc).lower()


def measure(p: BatchSweepParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    cuda = device.type == "cuda"
    free = gpu_share.available(dev.kind, dev.index) if cuda else None  # free on the card now, within the class's cap
    budget = p.budget_mb or (free // MIB if free is not None else CPU_BUDGET_MIB)
    yield Started(
        "batch-sweep",
        str(device),
        dev.name,
        "random inputs",
        f"{p.layers} x Linear({p.width}, {p.width}) + ReLU, Adam; batch from {p.start_batch} doubling"
        f", budget {budget:,} MiB",
    )
    model = linear_stack(p.width, p.layers).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    count = sum(t.numel() for t in model.parameters())
    fixed = 16 * count  # float32 weights + gradients + Adam's two moments
    yield Note(
        f"Fixed cost whatever the batch: {count:,} parameters x 16 bytes (weights, gradients, Adam) = "
        f"{fixed / MIB:,.0f} MiB. What grows with the batch is the activations."
    )

    def step(x: torch.Tensor) -> int:
        """One training step; the activations it saved for backward, in bytes."""
        optimizer.zero_grad(set_to_none=False)
        with saved_for_backward(model) as saved:
            loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        return sum(saved.values())

    rows: list[list[str]] = []
    results: list[tuple[int, float, float]] = []  # batch, samples/s (the median step's), memory bytes
    rates: dict[int, tuple[float, float]] = {}  # batch -> samples/s of its slowest and its fastest step
    stop_reason, oom_batch = f"reached max_batch {p.max_batch}", None
    batch = p.start_batch
    while batch <= p.max_batch:
        x = None
        try:
            x = torch.randn(batch, p.width, device=device)
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            activations = step(x)  # the first step creates Adam's state: untimed
            for _ in range(WARMUP_STEPS - 1):
                step(x)
            # each step timed on its own (synchronised): the spread says which batches are tied
            timed = take_turns({"step": functools.partial(step, x)}, dev.torch_device, p.steps, 1)["step"]
            seconds = median(timed)
        except (RuntimeError, MemoryError) as exc:
            if not _is_oom(exc):
                raise
            out_of_memory = True
        else:
            out_of_memory = False
        if out_of_memory:  # outside the except block: its traceback no longer pins the step's tensors
            x = None
            optimizer.zero_grad(set_to_none=True)
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            oom_batch, stop_reason = batch, f"out of memory at batch {batch:,} (caught, memory released)"
            how = "torch.cuda.empty_cache()" if cuda else "gc.collect()"
            yield Note(
                f"Batch {batch:,}: out of memory. The error was caught and the memory released with "
                f"{how}; the sweep stops here and the run goes on.",
                "warning",
            )
            break
        memory = torch.cuda.max_memory_allocated(device) if cuda else fixed + activations
        rate = batch / seconds
        results.append((batch, rate, memory))
        rates[batch] = (batch / max(timed), batch / min(timed))
        rows.append([f"{batch:,}", f"{rate:,.0f}", f"{seconds * 1000:,.1f} ms", f"{memory / MIB:,.0f} MiB"])
        yield Step(len(results), 0, 0.0, seconds, rate, label=f"batch {batch}")
        predicted = fixed + activations * 2  # activations grow linearly with the batch
        if batch * 2 > p.max_batch:
            break
        if predicted > budget * MIB:
            stop_reason = (
                f"batch {batch * 2:,} would need about {predicted / MIB:,.0f} MiB, over the {budget:,} MiB budget"
            )
            break
        batch *= 2
        del x
        gc.collect()

    yield Table(
        f"Throughput and memory by batch size on {device}",
        ["batch", "samples/s", "per step", "peak memory" if cuda else "memory"],
        rows,
    )
    best = max(results, key=lambda r: r[1]) if results else None
    tied = _tied(rates, best[0]) if best else []
    if best:
        yield Note(
            f"Fastest: batch {best[0]:,} at {best[1]:,.0f} samples/s, using {best[2] / MIB:,.0f} MiB. "
            f"Stopped: {stop_reason}. Past the point where the device is busy, a larger batch adds "
            "memory, not speed.",
            "result",
        )
        if len(tied) > 1:
            yield Note(
                f"Batches {', '.join(f'{b:,}' for b in tied)} train too nearly as fast to be told apart on "
                f"this machine: their samples/s over {p.steps} timed steps each overlap with the fastest's "
                f"(widened by {GUARD:.0%}). That is the plateau: any of them is 'the fastest', so a "
                "prediction is judged against all of them."
            )
    yield Finished(
        {
            "best_batch": best[0] if best else None,
            "best_batch_low": min(tied) if tied else None,
            "best_batch_high": max(tied) if tied else None,
            "best_samples_per_s": best[1] if best else None,
            "best_memory_bytes": best[2] if best else None,
            "largest_batch": results[-1][0] if results else None,
            "largest_memory_bytes": results[-1][2] if results else None,
            "batches_tried": len(results),
            "oom_batch": oom_batch,
            "stop_reason": stop_reason,
            "fixed_bytes": fixed,
            "memory_method": "torch.cuda.max_memory_allocated" if cuda else "storage accounting",
            "device": str(device),
        }
    )


def _tied(rates: dict[int, tuple[float, float]], best: int) -> list[int]:
    """The batches whose samples/s cannot be told from `best`'s: their ranges over the timed steps,
    each widened by GUARD, overlap best's (the fastest is then any of them)."""
    low, high = widened(*rates[best], GUARD)
    return sorted(
        b
        for b, (slow, fast) in rates.items()
        if widened(slow, fast, GUARD)[1] >= low and widened(slow, fast, GUARD)[0] <= high
    )
