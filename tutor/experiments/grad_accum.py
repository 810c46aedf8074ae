"""grad-accum: k micro-batches, each loss divided by k, give the gradient of one batch k times larger.

1. One batch of `batch_size` images: loss.backward() -> the reference gradient.
2. The same images as `micro_batches` micro-batches, each (loss / k).backward() with no
   zero_grad in between: gradients add up in .grad. Compared with the reference, parameter
   by parameter (largest absolute difference, torch.allclose, cosine similarity).
3. The usual mistake, the same without dividing by k: a gradient k times too large.
4. One SGD step from each: the weights after the update.
5. What it costs: seconds per update both ways (warmed up, synchronised), and the activations
   each forward keeps for backward, which is what accumulation saves. The `updates` timed
   updates of each way are split into up to TURNS rounds, the two ways taking turns (one
   round of the large batch, one of the micro-batches, ...), so a slow moment of the machine
   falls on both; time_ratio is the median of the rounds' ratios, time_ratio_low/high the
   median's interval (measurement.intervals; None from a single round). Told where a lesson's
   predictions turn (`decide`), it adds rounds on a fixed schedule of looks until the interval
   is clear of them all, or MOST_ROUNDS or TIMING_BUDGET_S are reached (measurement.repeats).

BatchNorm would break the equivalence (statistics per micro-batch); MNISTClassifier has none.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Generator, Iterator

import torch
import torch.nn.functional as F

from tutor.experiments import data as mnist
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.grad_accum import MEASURED_GUARD, GradAccumParams
from tutor.experiments.training import grad_of, saved_for_backward, seed_everything
from tutor.measurement.intervals import MedianInterval, bounds, in_words, median_interval
from tutor.measurement.repeats import look, schedule
from tutor.measurement.timing import median, paired_ratios, seconds_in_turns, take_turns

WARMUP_UPDATES = 3
# Rounds the timed updates are split into, the two ways taking turns. 10 (2 updates each at the
# default 20) rather than 5 (4 each): 10 ratios give the median a 98% interval from the 2nd to the
# 9th, so one round a busy core slowed does not widen it. Measured on a shared 2-core CPU, 12 runs each:
# high/low 1.02-1.69 (one in six past 1.5) with 5 rounds, 1.03-1.14 with 10; the same median.
TURNS = 10
# Told a lesson's edges (`decide`), more rounds while one lies inside the interval: up to this many,
# while the next look fits in this many seconds of timing.
MOST_ROUNDS = 40
TIMING_BUDGET_S = 15.0


def _rounds(updates: int) -> tuple[int, int]:
    """(rounds, updates per round): at most TURNS rounds of at least one update each, never more
    timed updates in all than `updates` (what is left over when they do not divide is not timed)."""
    rounds = max(1, min(TURNS, updates))
    return rounds, updates // rounds


def _until_decided(
    p: GradAccumParams, ways, dev: Device, times: dict[str, list[float]], rounds: int, per_round: int, started: float
) -> Generator[Event, None, tuple[MedianInterval | None, str]]:
    """More rounds, on a fixed schedule of looks, until the ratio's interval is clear of every
    edge in p.decide or the time is spent; returns (the last look's interval, what it did)."""
    looks = schedule(rounds, max(rounds, MOST_ROUNDS))
    while True:
        done = len(times["big"])
        stopped = look(paired_ratios(times["accum"], times["big"]), looks, edges=p.decide, guard=MEASURED_GUARD)
        following = next((n for n in looks if n > done), None)
        spent = time.perf_counter() - started
        if stopped.enough or following is None or spent / done * following > TIMING_BUDGET_S:
            break
        yield Note(
            f"After {done} rounds the interval still reaches an edge a prediction turns at: "
            f"{following - done} rounds more."
        )
        take_turns(ways, dev.torch_device, following - done, per_round, times)
    edges = ", ".join(f"{e:g}x" for e in p.decide)
    why = (
        f"its interval was clear of {edges}, where the predictions' verdicts turn"
        if stopped.decided
        else f"the time for timing was spent, and it still reaches one of {edges}"
        if following is not None
        else f"that is the most it makes, and it still reaches one of {edges}"
    )
    return stopped.interval, (
        f"Rounds: {done} (at least {rounds}, looking at {', '.join(map(str, looks))}): it stopped because {why}."
    )


def _flat_grad(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([grad_of(t).reshape(-1) for t in model.parameters()])


def _big_update(model, opt, x, y) -> None:
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def _accumulated_update(model, opt, x, y, k: int, divide: bool = True) -> None:
    opt.zero_grad()
    for xm, ym in zip(x.chunk(k), y.chunk(k)):
        loss = F.cross_entropy(model(xm), ym)
        (loss / k if divide else loss).backward()  # .grad adds up across the k backward calls
    opt.step()


def measure(p: GradAccumParams, dev: Device) -> Iterator[Event]:
    seed_everything(p.seed)
    device = torch.device(dev.torch_device)
    k = p.micro_batches
    micro = p.batch_size // k
    data = mnist.load(dev.torch_device, train_samples=p.batch_size, test_samples=1)
    x, y = data.train_x, data.train_y
    yield Started(
        "grad-accum",
        str(device),
        dev.name,
        data.description,
        f"one batch of {p.batch_size} vs {k} micro-batches of {micro}",
    )

    model = MNISTClassifier().to(device)
    reference = copy.deepcopy(model)
    reference.zero_grad()
    F.cross_entropy(reference(x), y).backward()
    g_big = _flat_grad(reference)

    accumulated = copy.deepcopy(model)
    accumulated.zero_grad()
    for xm, ym in zip(x.chunk(k), y.chunk(k)):
        (F.cross_entropy(accumulated(xm), ym) / k).backward()
    g_acc = _flat_grad(accumulated)

    undivided = copy.deepcopy(model)
    undivided.zero_grad()
    for xm, ym in zip(x.chunk(k), y.chunk(k)):
        F.cross_entropy(undivided(xm), ym).backward()
    g_raw = _flat_grad(undivided)

    max_diff = (g_big - g_acc).abs().max().item()
    close = torch.allclose(g_acc, g_big, rtol=1e-4, atol=1e-6)
    # In float64 (no 1.0000063), on the CPU: MPS has no float64.
    cosine = F.cosine_similarity(g_acc.cpu().double(), g_big.cpu().double(), dim=0).item()
    raw_ratio = (g_raw.norm() / g_big.norm()).item()
    yield Table(
        f"Gradients of {g_big.numel():,} parameters",
        ["compared with one batch of " + str(p.batch_size), "largest difference", "allclose", "norm ratio"],
        [
            [
                f"{k} x {micro}, each loss / {k}",
                f"{max_diff:.2e}",
                str(close),
                f"{(g_acc.norm() / g_big.norm()).item():.6f}",
            ],
            [
                f"{k} x {micro}, loss not divided",
                f"{(g_big - g_raw).abs().max().item():.2e}",
                str(torch.allclose(g_raw, g_big, rtol=1e-4, atol=1e-6)),
                f"{raw_ratio:.4f}",
            ],
        ],
    )
    yield Note(
        f"Accumulating {k} micro-batches of {micro}, each loss divided by {k}, gave the gradient of one "
        f"batch of {p.batch_size} to within {max_diff:.1e} (float32 rounding: the sums run in another "
        f"order); cosine similarity {cosine:.7f}. Without the division the gradient comes out "
        f"{raw_ratio:.2f} times too large: like a learning rate {k} times higher.",
        "result",
    )

    for m in (reference, accumulated):
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    weights_diff = max((a - b).abs().max().item() for a, b in zip(reference.parameters(), accumulated.parameters()))
    yield Note(f"After one SGD step (lr 0.1) from each, the weights differ by at most {weights_diff:.1e}.")

    # The cost: time per update, and the activations kept for backward.
    with saved_for_backward(model) as saved:
        F.cross_entropy(model(x), y)
    big_bytes = sum(saved.values())
    with saved_for_backward(model) as saved:
        F.cross_entropy(model(x[:micro]), y[:micro])
    micro_bytes = sum(saved.values())
    timed_big, timed_acc = copy.deepcopy(model), copy.deepcopy(model)
    opt_big = torch.optim.SGD(timed_big.parameters(), lr=0.01)
    opt_acc = torch.optim.SGD(timed_acc.parameters(), lr=0.01)
    rounds, per_round = _rounds(p.updates)
    warmed: dict = {}
    ways = {
        "big": lambda: _big_update(timed_big, opt_big, x, y),
        "accum": lambda: _accumulated_update(timed_acc, opt_acc, x, y, k),
    }
    started = time.perf_counter()
    times = seconds_in_turns(
        ways, dev.torch_device, repeats=rounds, calls=per_round, warmup=WARMUP_UPDATES, warmed=warmed
    )
    yield Note(
        "Warm-up, untimed: one batch, "
        + warmed["big"].words(lambda s: f"{s * 1000:.2f} ms")
        + f"; {k} micro-batches, "
        + warmed["accum"].words(lambda s: f"{s * 1000:.2f} ms")
        + "."
    )
    # round by round: the two ran side by side
    interval, looked = median_interval(paired_ratios(times["accum"], times["big"])), ""
    if p.decide and rounds > 1:
        interval, looked = yield from _until_decided(p, ways, dev, times, rounds, per_round, started)
    big_s, acc_s = median(times["big"]), median(times["accum"])
    rounds = len(times["big"])
    time_ratio = interval.median if interval else float("nan")
    ratio_low, ratio_high = bounds(interval)
    noun = "update" if per_round == 1 else "updates"
    how = (
        f"median of {rounds} rounds of {per_round} {noun}, the two ways taking turns"
        if rounds > 1
        else f"{per_round} timed {noun} each"
    )
    yield Table(
        f"One update of {p.batch_size} samples on {device} ({how})",
        ["how", "seconds per update", "activations kept"],
        [
            [f"1 x {p.batch_size}", f"{big_s * 1000:.2f} ms", f"{big_bytes / 1024:,.0f} KiB"],
            [f"{k} x {micro}", f"{acc_s * 1000:.2f} ms", f"{micro_bytes / 1024:,.0f} KiB"],
        ],
    )
    noise = (
        f" ({in_words(interval, lambda v: f'{v:.2f}x', 'rounds')})"
        if interval is not None and ratio_low is not None  # (bounds() is None, None without an interval)
        else ""
    )
    if looked:
        yield Note(looked)
    yield Note(
        f"Accumulation took {time_ratio:.2f}x the time of one big batch here{noise}: {k} smaller forward and "
        f"backward passes use the hardware less well than one large one. In exchange each forward keeps "
        f"{micro_bytes / big_bytes:.0%} of the activations, which is how a batch that does not fit in "
        "memory can still be trained."
    )

    yield Finished(
        {
            "batch_size": p.batch_size,
            "micro_batches": k,
            "micro_batch_size": micro,
            "max_abs_diff": max_diff,
            "allclose": close,
            "cosine": cosine,
            "undivided_norm_ratio": raw_ratio,
            "weights_max_diff": weights_diff,
            "big_seconds_per_update": big_s,
            "accum_seconds_per_update": acc_s,
            "time_ratio": time_ratio,
            "time_ratio_low": ratio_low,
            "time_ratio_high": ratio_high,
            "big_activation_bytes": big_bytes,
            "micro_activation_bytes": micro_bytes,
            "device": str(device),
        }
    )
