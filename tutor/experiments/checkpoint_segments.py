"""checkpoint-segments: how many checkpoint segments? Memory against time, swept.

The course's lab asks to "find the optimal checkpoint frequency". A deep stack of `depth` x
(Linear(width, width) + ReLU) runs one training step with
torch.utils.checkpoint.checkpoint_sequential(use_reentrant=False) at 1, 2, 4, ... segments (1 is no
checkpointing). Each count keeps the input of every checkpointed segment and all of the last
segment, which runs plainly: segments + depth / segments activations, fewest at sqrt(depth).
Measured per count: the bytes autograd saves between forward and backward (saved_tensors_hooks,
parameters excluded), on CUDA the peak allocated memory of a step, the time per step (warmed up,
the counts taking turns, synchronised) and that the gradients equal the plain ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch

from tutor.charts import bars
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.grad_checkpoint import loss_of, peak_above_start
from tutor.experiments.model import linear_stack
from tutor.experiments.specs.checkpoint_segments import CheckpointSegmentsParams, kept_activations, segment_counts
from tutor.experiments.training import grad_of, saved_for_backward, seed_everything
from tutor.measurement.intervals import bounds, in_words, median_interval
from tutor.measurement.timing import median, paired_ratios, synchronize, take_turns, warm_up
from tutor.present import mib, seconds

CALLS = 2  # steps per timed round and count
WARMUP_BUDGET_S = 0.5  # per count: the counts share one model, so its first calls warm them all


def measure(p: CheckpointSegmentsParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    counts = segment_counts(p.most_segments)
    yield Started(
        "checkpoint-segments",
        str(device),
        dev.name,
        "random inputs",
        f"{p.depth} x Linear({p.width}, {p.width}) + ReLU, batch {p.batch_size}, "
        f"{', '.join(map(str, counts))} segments",
    )
    model = linear_stack(p.width, p.depth).to(device)
    x = torch.randn(p.batch_size, p.width, device=device)

    kept: dict[int, int] = {}
    grads: dict[int, list[torch.Tensor]] = {}
    for k in counts:
        model.zero_grad(set_to_none=True)
        with saved_for_backward(model) as saved:
            loss = loss_of(model, x, k)
        kept[k] = sum(saved.values())
        loss.backward()
        grads[k] = [grad_of(w).clone() for w in model.parameters()]
    grads_match = all(
        torch.allclose(a, b, rtol=1e-4, atol=1e-6) for k in counts for a, b in zip(grads[1], grads[k], strict=True)
    )
    del grads

    def step(k: int) -> Callable[[], None]:
        def one() -> None:
            model.zero_grad(set_to_none=False)  # gradients stay allocated: the peak is the step's own
            loss_of(model, x, k).backward()

        return one

    peaks = {k: peak_above_start(step(k), device) for k in counts}
    ways = {str(k): step(k) for k in counts}
    for fn in ways.values():
        warm_up(fn, device, minimum=2, budget_s=WARMUP_BUDGET_S)
    times = {int(k): t for k, t in take_turns(ways, device, p.rounds, CALLS).items()}
    step_s = {k: median(times[k]) for k in counts}
    ratios = {k: median_interval(paired_ratios(times[k], times[1])) for k in counts}
    synchronize(device)

    tensor = p.batch_size * p.width * 4
    formula_matches = all(kept[k] == kept_activations(p.depth, k) * tensor for k in counts)
    best = min(counts, key=lambda k: (kept[k], k))
    most = counts[-1]

    def saving(k: int) -> float:
        return 1 - kept[k] / kept[1] if kept[1] else 0.0

    def ratio(k: int) -> float:
        interval = ratios[k]
        return interval.median if interval else step_s[k] / step_s[1]

    cuda = device.type == "cuda"
    columns = ["segments", "kept", "saved", "per step", "vs 1"] + (["peak"] if cuda else [])
    rows = [
        [str(k), mib(kept[k]), f"{saving(k):.0%}", seconds(step_s[k]), f"{ratio(k):.2f}x"]
        + ([mib(peaks[k])] if cuda else [])
        for k in counts
    ]
    yield Table(
        f"One step, {p.depth} layers, batch {p.batch_size}, on {device}; vs 1: each round's ratio, median",
        columns,
        rows,
    )
    chart = bars(
        [(f"{k} seg", kept[k] / 2**20, f"{mib(kept[k])}, {ratio(k):.2f}x time") for k in counts],
        unit="activations kept for backward, MiB",
        width=64,
    )
    yield Note(chart, "figure")

    best_interval = ratios[best]
    low, high = bounds(best_interval)
    said = in_words(best_interval, lambda v: f"{v:.2f}x", of="rounds") if best_interval else "one round"
    yield Note(
        f"Memory: {best} segments kept the least, {mib(kept[best])} against {mib(kept[1])} plain "
        f"({saving(best):.0%} less). Each count keeps segments + depth / segments activations of "
        f"{tensor / 2**10:,.0f} KiB (the checkpointed inputs, and the last segment whole), least at "
        f"sqrt({p.depth}) = {math.sqrt(p.depth):.1f}. More segments is not always less: {most} kept "
        f"{mib(kept[most])}, its {most - 1} inputs adding up"
        + (", as much as no checkpointing." if kept[most] >= kept[1] else ".")
        + (" The formula matched every count." if formula_matches else " The formula did NOT match."),
        "result",
    )
    yield Note(
        f"Time: {best} segments took {ratio(best):.2f}x the plain step ({said}); {most} segments "
        f"{ratio(most):.2f}x. Backward runs the forward of every checkpointed segment again, "
        "(segments - 1) / segments of one forward: half of one at 2, nearly all of it at 16. A forward "
        "is about a third of a step, so the recompute adds up to about a third; past that is each "
        "segment's own overhead. Memory has an optimum; the recompute only grows with the count. "
        "The gradients " + ("match at every count." if grads_match else "DO NOT match."),
        "result",
    )
    if not cuda:
        yield Note(
            "No GPU here, so no peak column: the peak needs CUDA's allocator counters. What the sweep "
            "measures on any device is what the forward keeps until backward; during backward one "
            "segment at a time is rebuilt, depth / segments more activations, on top of it."
        )

    yield Finished(
        {
            "best_segments": best,
            "sqrt_depth": math.sqrt(p.depth),
            "plain_kept_bytes": kept[1],
            "best_kept_bytes": kept[best],
            "most_kept_bytes": kept[most],
            "best_saving": saving(best),
            "most_saving": saving(most),
            "formula_matches": formula_matches,
            "plain_seconds_per_step": step_s[1],
            "best_seconds_per_step": step_s[best],
            "best_time_ratio": ratio(best),
            "best_time_ratio_low": low,
            "best_time_ratio_high": high,
            "most_time_ratio": ratio(most),
            "plain_peak_bytes": peaks[1],
            "best_peak_bytes": peaks[best],
            "grads_match": grads_match,
            "device": str(device),
        }
    )
