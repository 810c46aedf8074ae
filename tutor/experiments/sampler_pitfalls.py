"""sampler-pitfalls: three ways of feeding the ranks of a DDP job, and which samples each rank saw.

torchrun starts `world_size` processes (tutor/experiments/distributed.py); in each, `rank_main`
trains an MNISTClassifier under DistributedDataParallel on the first `samples` MNIST images,
`epochs` epochs each way, recording the sample ids of every batch it trained on:

(a) "plain": DataLoader(shuffle=True) with a generator seeded `seed` on every rank, as a
    single-process script run under torchrun unchanged would; no DistributedSampler;
(b) "set_epoch": DataLoader(sampler=DistributedSampler(dataset)), sampler.set_epoch(epoch)
    at the start of every epoch;
(c) "no_set_epoch": the same sampler, set_epoch never called.

The ids are gathered on rank 0 (dist.all_gather_object), which compares them: how much of a
rank's epoch another rank also saw, how many different samples an epoch and a step covered,
and whether epoch 2 repeated epoch 1's order. Two cheap checks without training: (a) with
loaders seeded seed + rank, and DistributedSampler over `uneven_samples` (padding, drop_last).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator, Sequence
from statistics import fmean
from typing import Any, cast

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler, TensorDataset

from tutor import present
from tutor.experiments import data as mnist
from tutor.experiments import distributed
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.rank import RankContext
from tutor.experiments.specs.sampler_pitfalls import SamplerPitfallsParams

WAYS = ("plain", "set_epoch", "no_set_epoch")
WAY_NAMES = {
    "plain": "plain DataLoader(shuffle=True)",
    "rank_seeds": "plain, seeded seed + rank",
    "set_epoch": "DistributedSampler + set_epoch",
    "no_set_epoch": "DistributedSampler, no set_epoch",
}
SHORT = {"plain": "plain", "set_epoch": "set_epoch", "no_set_epoch": "no set_epoch"}

# ids[rank][epoch][step] = the sample ids of that batch on that rank


def feeding_stats(ids: Sequence[Sequence[Sequence[Sequence[int]]]]) -> dict[str, Any]:
    """What the ranks saw, from every rank's batches of every epoch (pure Python)."""
    ranks, epochs = len(ids), len(ids[0])
    overlaps, distinct, trained, per_step, step_overlaps = [], [], [], [], []
    for e in range(epochs):
        seen = [{i for batch in ids[r][e] for i in batch} for r in range(ranks)]
        for r in range(ranks):
            others = set().union(*(seen[q] for q in range(ranks) if q != r))
            overlaps.append(len(seen[r] & others) / len(seen[r]) if seen[r] else 0.0)
        distinct.append(len(set().union(*seen)))
        trained.append(sum(len(batch) for r in range(ranks) for batch in ids[r][e]))
        for s in range(min(len(ids[r][e]) for r in range(ranks))):
            batches = [set(ids[r][e][s]) for r in range(ranks)]
            union = set().union(*batches)
            per_step.append(len(union))
            shared = {i for i in union if sum(i in b for b in batches) > 1}
            step_overlaps.append(fmean(len(b & shared) / len(b) for b in batches if b))
    return {
        "overlap": fmean(overlaps),
        "distinct_per_epoch": min(distinct),
        "trained_per_epoch": max(trained),
        "distinct_per_step": fmean(per_step) if per_step else 0.0,
        "step_overlap": fmean(step_overlaps) if step_overlaps else 0.0,
        "same_order": all(_order(ids[r][e]) == _order(ids[r][0]) for r in range(ranks) for e in range(1, epochs)),
        "steps_per_epoch": len(ids[0][0]),
    }


def _order(batches: Sequence[Sequence[int]]) -> list[int]:
    return [i for batch in batches for i in batch]


def order_hash(batches: Sequence[Sequence[int]]) -> str:
    """A short fingerprint of an epoch's order on one rank: equal orders, equal hashes."""
    return hashlib.sha1(",".join(map(str, _order(batches))).encode()).hexdigest()[:8]


def uneven_split(shards: Sequence[Sequence[int]], dataset: int) -> dict[str, int]:
    """Indices given, repeated and never given, from every rank's DistributedSampler shard."""
    given = sum(len(s) for s in shards)
    distinct = len(set().union(*map(set, shards)))
    return {"given": given, "repeats": given - distinct, "unseen": dataset - distinct}


# --------------------------------------------------------------------------- each rank


def _loader(way: str, ds: Any, p: SamplerPitfallsParams, rank: int) -> tuple[DataLoader, Any]:
    if way in ("plain", "rank_seeds"):
        # Every rank seeds its generator alike, as the same script started N times does.
        gen = torch.Generator().manual_seed(p.seed + (rank if way == "rank_seeds" else 0))
        return DataLoader(ds, batch_size=p.batch_size, shuffle=True, generator=gen), None
    # num_replicas, rank: from the process group
    sampler: DistributedSampler[Any] = DistributedSampler(ds, shuffle=True, seed=p.seed)
    return DataLoader(ds, batch_size=p.batch_size, sampler=sampler), sampler


def _feed(
    ctx: RankContext, p: SamplerPitfallsParams, ds: Any, way: str, train: bool, clock: dict[str, Any]
) -> list[list[list[int]]]:
    """Every epoch's batches (their sample ids) on this rank, trained under DDP if `train`."""
    loader, sampler = _loader(way, ds, p, ctx.rank)
    torch.manual_seed(p.seed)
    ddp = optimizer = None
    if train:
        ddp = DDP(MNISTClassifier().to(ctx.device), device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=p.lr)
    ids: list[list[list[int]]] = []
    for epoch in range(p.epochs):
        if way == "set_epoch":
            sampler.set_epoch(epoch)  # the sampler's shuffle is seeded seed + epoch
        batches = []
        for xb, yb, ib in loader:
            batches.append(ib.tolist())
            if ddp is None or optimizer is None:  # (made together, when training)
                continue
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(xb.to(ctx.device)), yb.to(ctx.device))
            loss.backward()  # DDP all-reduces the gradients
            optimizer.step()
            value = loss.item()  # waits for the device: the step is done
            clock["done"] += 1
            elapsed = time.perf_counter() - clock["start"]
            ctx.step(clock["done"], clock["total"], value, elapsed, clock["done"] * p.batch_size / elapsed, epoch + 1)
        ids.append(batches)
    return ids


def _gather(obj: Any, world_size: int) -> list[Any]:
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, obj)
    return everyone


def rank_main(ctx: RankContext) -> None:
    p = SamplerPitfallsParams(**ctx.args)
    data = mnist.load_first(p.samples)
    ds = TensorDataset(data.train_x, data.train_y, torch.arange(p.samples))
    per_rank = -(-p.samples // ctx.world_size)  # DistributedSampler's shard: padded, rounded up
    steps_plain = -(-p.samples // p.batch_size)
    steps_sampler = -(-per_rank // p.batch_size)
    clock = {"start": time.perf_counter(), "done": 0, "total": p.epochs * (steps_plain + 2 * steps_sampler)}
    ways: dict[str, Any] = {}
    for way in ("plain", "rank_seeds", "set_epoch", "no_set_epoch"):
        ids = _feed(ctx, p, ds, way, way != "rank_seeds", clock)
        everyone = _gather(ids, ctx.world_size)
        if ctx.rank == 0:
            stats = feeding_stats(everyone)
            # epochs 1 and 2 only: the result is one line on a pipe the ranks share, kept short
            stats["orders"] = [
                [[order_hash(everyone[r][e]), everyone[r][e][0][:4]] for r in range(ctx.world_size)] for e in range(2)
            ]
            ways[way] = stats

    # A dataset that does not split evenly: what DistributedSampler gives each rank (no training).
    # A sampler needs only the dataset's length, so a range stands in for the Dataset torch's types ask for.
    uneven = cast("Dataset[int]", range(p.uneven_samples))
    padded: DistributedSampler[int] = DistributedSampler(uneven, shuffle=True, seed=p.seed)
    dropped: DistributedSampler[int] = DistributedSampler(uneven, shuffle=True, seed=p.seed, drop_last=True)
    shard = list(padded)
    cut = len(shard) - len(DataLoader(uneven, batch_size=p.batch_size, sampler=padded, drop_last=True)) * p.batch_size
    shards = _gather({"padded": shard, "dropped": list(dropped), "cut": cut}, ctx.world_size)
    if ctx.rank == 0:
        pad = uneven_split([s["padded"] for s in shards], p.uneven_samples)
        drop = uneven_split([s["dropped"] for s in shards], p.uneven_samples)
        ctx.result(
            ways=ways,
            padded=pad,
            dropped=drop,
            cut=sum(s["cut"] for s in shards),
            shard=len(shard),
            last_batch=len(shard) % p.batch_size,
            dataset=data.description,
        )
    else:
        ctx.result()


# --------------------------------------------------------------------------- the engine's side


def measure(p: SamplerPitfallsParams, dev: Device) -> Iterator[Event]:
    plan = distributed.choose(dev, p.world_size)
    n = p.world_size
    yield Started(
        "sampler-pitfalls",
        plan.device,
        f"{n} x {plan.backend}",
        mnist.describe_source(),
        f"world size {n}, {p.samples} samples, batch {p.batch_size} per rank, {p.epochs} epochs each way",
    )
    yield Note(plan.why)
    yield Note(
        f"torchrun --standalone --nproc_per_node={n}: every rank trains a DDP model {p.epochs} epochs "
        "three ways and records the id of every sample it trained on: (a) a plain shuffled DataLoader, "
        f"its generator seeded {p.seed} on every rank, as the same script started {n} times seeds it; "
        "(b) DistributedSampler with sampler.set_epoch(epoch) each epoch; (c) the same sampler, "
        "set_epoch never called. Rank 0 gathers the ids and compares them."
    )
    job = yield from distributed.launch("sampler_pitfalls", plan, p.model_dump())
    r0 = job["results"][0]
    ways = r0["ways"]
    plain, good, stale, seeds = ways["plain"], ways["set_epoch"], ways["no_set_epoch"], ways["rank_seeds"]

    rows = []
    for way in ("plain", "rank_seeds", "set_epoch", "no_set_epoch"):
        s = ways[way]
        trained = way != "rank_seeds"
        rows.append(
            [
                WAY_NAMES[way],
                present.metric(s["overlap"], "%"),
                present.number(s["distinct_per_epoch"]),
                present.number(s["trained_per_epoch"]) if trained else "(not trained)",
                present.metric(s["distinct_per_step"]),
                str(s["steps_per_epoch"]),
                present.metric(s["same_order"]),
            ]
        )
    yield Table(
        f"Which samples the {n} ranks saw ({p.samples} samples, batch {p.batch_size} per rank)",
        [
            "feeding",
            "overlap between ranks",
            "distinct / epoch",
            "trained / epoch",
            "distinct / step",
            "steps / epoch",
            "epoch 2 = epoch 1",
        ],
        rows,
    )
    order_rows = []
    for way in WAYS:
        for e, ranks in enumerate(ways[way]["orders"]):
            for r, (digest, first) in enumerate(ranks):
                order_rows.append([SHORT[way], str(e + 1), str(r), ", ".join(map(str, first)), digest])
    yield Table(
        "Each rank's order, epochs 1 and 2 (sha1 of the id sequence, 8 hex digits)",
        ["feeding", "epoch", "rank", "first 4 sample ids", "order hash"],
        order_rows,
    )

    yield Note(
        f"(a) Plain DataLoader: the ranks' samples overlap {present.metric(plain['overlap'], '%')}; each "
        f"step's {n} batches held {present.metric(plain['distinct_per_step'])} different samples (one "
        f"rank's batch is {p.batch_size}; {n} disjoint batches would be {n * p.batch_size}). The {n} "
        f"processes ran {present.number(plain['trained_per_epoch'])} forward and backward passes an epoch "
        f"over {present.number(plain['distinct_per_epoch'])} distinct samples, {plain['steps_per_epoch']} "
        f"steps an epoch against {good['steps_per_epoch']} with DistributedSampler: the work of one "
        f"process, done {n} times, each all-reduce averaging {n} equal gradients. They coincide because "
        "every rank seeded its generator alike, as one script started N times does.",
        "result",
    )
    yield Note(
        f"Seeded seed + rank instead, the plain loaders' batches overlap "
        f"{present.metric(seeds['step_overlap'], '%')} within a step (chance), but over an epoch each "
        f"rank still walks the whole dataset: overlap {present.metric(seeds['overlap'], '%')}, "
        f"{present.number(seeds['trained_per_epoch'])} samples given for "
        f"{present.number(seeds['distinct_per_epoch'])} distinct. Not a partition either."
    )
    pad_words = (
        "no padding was needed"
        if p.samples % n == 0
        else f"padded from {p.samples} to {n * -(-p.samples // n)} by repeating samples"
    )
    yield Note(
        f"(b) DistributedSampler + set_epoch: overlap {present.metric(good['overlap'], '%')}, the "
        f"{n} shards together cover {present.number(good['distinct_per_epoch'])} samples an epoch "
        f"({p.samples} in the dataset; {pad_words}), {present.metric(good['distinct_per_step'])} "
        f"different samples a step, and epoch 2's order "
        f"{'repeats' if good['same_order'] else 'differs from'} epoch 1's: the sampler shuffles with "
        "seed + epoch, and set_epoch sets the epoch.",
        "result",
    )
    yield Note(
        f"(c) DistributedSampler, set_epoch forgotten: still disjoint (overlap "
        f"{present.metric(stale['overlap'], '%')}), but epoch 2's order "
        f"{'is epoch 1 again, on every rank' if stale['same_order'] else 'differs from epoch 1'}: "
        "without set_epoch the sampler's epoch stays 0, so every epoch is shuffled with the same seed "
        "and each rank trains on the same shard in the same order every epoch.",
        "result",
    )

    pad, drop = r0["padded"], r0["dropped"]
    yield Table(
        f"A dataset of {p.uneven_samples} samples over {n} ranks, batch {p.batch_size}",
        ["DistributedSampler", "indices given / epoch", "given twice", "never given"],
        [
            [
                "drop_last=False (default): padded",
                present.number(pad["given"]),
                present.number(pad["repeats"]),
                present.number(pad["unseen"]),
            ],
            [
                "drop_last=True: cut",
                present.number(drop["given"]),
                present.number(drop["repeats"]),
                present.number(drop["unseen"]),
            ],
        ],
    )
    yield Note(
        f"{p.uneven_samples} samples over {n} ranks: by default DistributedSampler pads every rank to "
        f"{r0['shard']} by repeating {pad['repeats']} sample(s) from the start of the shuffled list, so "
        "every rank takes the same number of steps (a rank with one step more would wait in DDP's "
        f"all-reduce for the others forever); drop_last=True instead leaves {drop['unseen']} sample(s) "
        f"out of the epoch. Each rank's last batch then holds {r0['last_batch']} sample(s); "
        f"DataLoader(drop_last=True) cuts it: {r0['cut']} samples an epoch over all ranks."
    )
    yield Finished(
        {
            "world_size": n,
            "backend": plan.backend,
            **{
                f"{way}_{key}": ways[way][key]
                for way in WAYS
                for key in ("overlap", "distinct_per_epoch", "trained_per_epoch", "distinct_per_step", "same_order")
                if not (way == "no_set_epoch" and key == "distinct_per_step")
            },
            "plain_steps_per_epoch": plain["steps_per_epoch"],
            "set_epoch_steps_per_epoch": good["steps_per_epoch"],
            "rank_seeds_step_overlap": seeds["step_overlap"],
            "rank_seeds_overlap": seeds["overlap"],
            "padded_total": pad["given"],
            "padded_repeats": pad["repeats"],
            "drop_last_total": drop["given"],
            "drop_last_unseen": drop["unseen"],
            "loader_drop_last_cut": r0["cut"],
            "launch_seconds": job.get("ready_s"),
            "job_seconds": job.get("seconds"),
            "attempts": job["attempts"],
        }
    )
