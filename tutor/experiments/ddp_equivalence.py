"""ddp-equivalence: N processes with batch/N each, under DDP, take the steps one process takes
with the whole batch.

torchrun starts `world_size` processes (tutor/experiments/distributed.py); in each, `rank_main`:
1. seeds its model with seed + rank, so the ranks start different, then wraps it in
   DistributedDataParallel, whose constructor broadcasts rank 0's weights: now all equal;
2. rank 0 keeps a plain copy (no process group: a world of one) that trains on the whole
   global batch, the reference;
3. each step every rank takes its own slice of the global batch (rank r: samples
   r*b .. (r+1)*b - 1 of the step's batch, b = batch/N), forward and backward; DDP all-reduces
   the gradients during backward and divides by N: each rank's loss is the mean over its b
   samples, so the average of the N means is the mean over the whole batch;
4. after the first backward, rank 0 compares DDP's gradient with the reference's, and a rank's
   own gradient (its slice alone, before any all-reduce) with it too: what the all-reduce fixes;
5. after `steps` SGD steps, the weights: DDP's against the reference's, and every rank's
   against rank 0's (broadcast and compared).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from tutor import present
from tutor.experiments import data as mnist
from tutor.experiments import distributed
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.rank import RankContext
from tutor.experiments.specs.ddp_equivalence import DdpEquivalenceParams


def _flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def _wrap(model: torch.nn.Module, ctx: RankContext) -> DDP:
    return DDP(model, device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)


def rank_main(ctx: RankContext) -> None:
    p = DdpEquivalenceParams(**ctx.args)
    _n, b = ctx.world_size, p.batch_size // ctx.world_size
    data = mnist.load_first(p.steps * p.batch_size)
    x, y = data.train_x.to(ctx.device), data.train_y.to(ctx.device)

    torch.manual_seed(p.seed + ctx.rank)  # different on every rank, on purpose
    model = MNISTClassifier().to(ctx.device)
    mine = _flat(model.parameters())
    rank0 = mine.clone()
    dist.broadcast(rank0, src=0)
    differed = torch.tensor([float(not torch.equal(mine, rank0))], device=ctx.device)
    dist.all_reduce(differed, op=dist.ReduceOp.MAX)
    reference = copy.deepcopy(model) if ctx.rank == 0 else None  # rank 0's weights: what DDP will copy
    local = copy.deepcopy(model)
    ddp = _wrap(model, ctx)  # broadcasts rank 0's parameters and buffers to every rank
    after = _flat(ddp.module.parameters())
    rank0 = after.clone()
    dist.broadcast(rank0, src=0)
    same_after_wrap = torch.tensor([float(torch.equal(after, rank0))], device=ctx.device)
    dist.all_reduce(same_after_wrap, op=dist.ReduceOp.MIN)

    optimizer = torch.optim.SGD(ddp.parameters(), lr=p.lr)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=p.lr) if reference is not None else None
    result: dict = {}
    start = time.perf_counter()
    for step in range(p.steps):
        xs, ys = x[step * p.batch_size : (step + 1) * p.batch_size], y[step * p.batch_size : (step + 1) * p.batch_size]
        mine_x, mine_y = xs[ctx.rank * b : (ctx.rank + 1) * b], ys[ctx.rank * b : (ctx.rank + 1) * b]
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(mine_x), mine_y)
        loss.backward()  # DDP all-reduces (averages) the gradients here, bucket by bucket
        if reference is not None and ref_optimizer is not None:  # (made together, on rank 0)
            ref_optimizer.zero_grad()
            F.cross_entropy(reference(xs), ys).backward()
            if step == 0:
                g_ref = _flat(q.grad for q in reference.parameters())
                g_ddp = _flat(q.grad for q in ddp.module.parameters())
                if ctx.rank == 0:  # rank 0's own slice, no all-reduce, from the same start
                    local.load_state_dict(reference.state_dict())
                    F.cross_entropy(local(mine_x), mine_y).backward()
                    g_local = _flat(q.grad for q in local.parameters())
                result.update(
                    grad_max_diff=(g_ddp - g_ref).abs().max().item(),
                    grads_allclose=bool(torch.allclose(g_ddp, g_ref, rtol=1e-4, atol=1e-6)),
                    local_grad_max_diff=(g_local - g_ref).abs().max().item(),
                    allreduce_bytes=g_ddp.numel() * g_ddp.element_size(),
                    parameters=g_ddp.numel(),
                )
            ref_optimizer.step()
        optimizer.step()
        value = loss.item()  # waits for the GPU: the clock after it counts the step's kernels
        elapsed = time.perf_counter() - start
        ctx.step(step + 1, p.steps, value, elapsed, (step + 1) * b / elapsed)

    weights = _flat(ddp.module.parameters())
    rank0 = weights.clone()
    dist.broadcast(rank0, src=0)
    ranks_diff = torch.tensor([(weights - rank0).abs().max().item()], device=ctx.device)
    dist.all_reduce(ranks_diff, op=dist.ReduceOp.MAX)
    if reference is not None:
        result["weights_max_diff"] = (weights - _flat(reference.parameters())).abs().max().item()
    result.update(
        ranks_max_diff=ranks_diff.item(),
        weights_differed_before_wrap=bool(differed.item()),
        ranks_identical_after_wrap=bool(same_after_wrap.item()),
        dataset=data.description,
    )
    ctx.result(**result)


def measure(p: DdpEquivalenceParams, dev: Device) -> Iterator[Event]:
    plan = distributed.choose(dev, p.world_size)
    b = p.batch_size // p.world_size
    yield Started(
        "ddp-equivalence",
        plan.device,
        f"{p.world_size} x {plan.backend}",
        mnist.describe_source(),
        f"world size {p.world_size}, {b} samples per rank against 1 process with {p.batch_size}",
    )
    yield Note(plan.why)
    yield Note(
        f"torchrun --standalone --nproc_per_node={p.world_size}: each rank seeds its model "
        "differently, then DistributedDataParallel wraps it. Rank 0 also trains a plain copy on the whole "
        f"batch of {p.batch_size}: a world of one process, the reference."
    )
    job = yield from distributed.launch("ddp_equivalence", plan, p.model_dump())
    r0 = job["results"][0]
    yield Table(
        f"Gradients after the first backward ({r0['parameters']:,} parameters)",
        ["compared with 1 process, batch " + str(p.batch_size), "largest difference"],
        [
            [f"rank 0 alone, its {b} samples (no all-reduce)", f"{r0['local_grad_max_diff']:.2e}"],
            [f"DDP on rank 0, after all-reduce of {p.world_size} ranks", f"{r0['grad_max_diff']:.2e}"],
        ],
    )
    yield Note(
        f"The gradient of rank 0's own {b} samples is off by up to {r0['local_grad_max_diff']:.1e}; after "
        f"DDP's all-reduce it matches the whole batch's to {r0['grad_max_diff']:.1e} (float32 sums in "
        "another order). Each rank's loss is the mean over its slice, DDP sums the N gradients and "
        "divides by N: the mean of equal-sized means is the mean of the whole batch.",
        "result",
    )
    yield Note(
        f"Before wrapping, the ranks' weights "
        f"{'differed' if r0['weights_differed_before_wrap'] else 'were already equal'} (seeded per rank); "
        f"after DistributedDataParallel(model) they were "
        f"{'identical' if r0['ranks_identical_after_wrap'] else 'NOT identical'}: the constructor copies "
        "rank 0's weights to every rank, so the replicas start as one."
    )
    yield Note(
        f"After {p.steps} SGD steps: DDP's weights against the single process's differ by at most "
        f"{r0['weights_max_diff']:.1e}, and the ranks against each other by {r0['ranks_max_diff']:.1e}. "
        f"Every step all-reduced {present.size(r0['allreduce_bytes'])} of gradients "
        f"(4 bytes x {r0['parameters']:,} parameters).",
        "result",
    )
    yield Finished(
        {
            "world_size": p.world_size,
            "backend": plan.backend,
            "global_batch": p.batch_size,
            "per_rank_batch": b,
            "weights_differed_before_wrap": r0["weights_differed_before_wrap"],
            "ranks_identical_after_wrap": r0["ranks_identical_after_wrap"],
            "local_grad_max_diff": r0["local_grad_max_diff"],
            "grad_max_diff": r0["grad_max_diff"],
            "grads_allclose": r0["grads_allclose"],
            "weights_max_diff": r0["weights_max_diff"],
            "ranks_max_diff": max(r["ranks_max_diff"] for r in job["results"].values()),
            "allreduce_bytes": r0["allreduce_bytes"],
            "launch_seconds": job.get("ready_s"),
            "job_seconds": job.get("seconds"),
            "attempts": job["attempts"],
        }
    )
