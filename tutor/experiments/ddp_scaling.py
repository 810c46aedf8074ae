"""ddp-scaling: samples/s with 1 process and with N under DistributedDataParallel, and what the
gradient all-reduce costs per step against the compute it is meant to multiply.

torchrun starts `world_size` processes (tutor/experiments/distributed.py); in each, `rank_main`:
1. buckets: a copy of MNISTClassifier wrapped in DDP with a communication hook that records
   each bucket it is handed (DDP's public `register_comm_hook`), for 3 steps: DDP puts every
   gradient in one bucket for the first step, then rebuilds its buckets in the order the
   gradients arrived; the last step's calls are the buckets and their sizes;
2. throughput, `rounds` times in turn: world size 1 is a plain MNISTClassifier (no DDP, no
   process group) in rank 0 while the other ranks wait at a barrier, `steps` SGD steps of
   `batch_size` after `warmup` untimed ones; world size N is every rank's DDP model, `steps`
   steps of `batch_size` each, timed on each rank, the slowest rank's time kept. Same model,
   same per-rank batch, same one thread per process;
3. compute against all-reduce, for each per-rank batch of the sweep (and `batch_size`), `steps`
   repetitions of three things, each after a barrier and timed on every rank (the slowest kept):
   a DDP step; the same step inside `no_sync()` (forward, backward, SGD step, no all-reduce:
   the compute); a blocking `dist.all_reduce` of buffers of DDP's bucket sizes (the
   communication alone). Medians of the repetitions.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from tutor import present
from tutor.experiments import data as mnist
from tutor.experiments import distributed
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier, count_parameters
from tutor.experiments.rank import RankContext
from tutor.experiments.specs.ddp_scaling import DdpScalingParams, sweep_sizes

BUCKET_PROBE_STEPS = 3  # DDP rebuilds its buckets after the first step


def crossover(rows: list[dict]) -> int | None:
    """The smallest per-rank batch from which compute per step exceeded the all-reduce at every
    larger batch of the sweep too; None if the all-reduce outweighed compute at the largest."""
    found = None
    for row in sorted(rows, key=lambda r: r["batch"], reverse=True):
        if row["compute_s"] > row["allreduce_s"]:
            found = row["batch"]
        else:
            break
    return found


def who_won(rows: list[dict], allreduce: str) -> str:
    """The sweep's headline, read off its own rows (the comm/compute column): where the all-reduce
    took longer than the compute and where the compute outweighed it. A clean switch is said as
    one; rows that flip back and forth are named as they are, not as a crossover."""
    rows = sorted(rows, key=lambda r: r["batch"])
    comm = [r["batch"] for r in rows if r["allreduce_s"] >= r["compute_s"]]
    compute = [r["batch"] for r in rows if r["allreduce_s"] < r["compute_s"]]
    smallest, largest = rows[0]["batch"], rows[-1]["batch"]
    if not compute:
        return (
            f"The all-reduce of {allreduce} took longer than the compute at every per-rank batch from {smallest} "
            f"to {largest}: on this machine DDP spends more of each step exchanging gradients than computing."
        )
    if not comm:
        return (
            f"Compute outweighed the all-reduce at every per-rank batch from {smallest} to {largest}: try "
            "smaller batches to find where communication wins."
        )
    if max(comm) < min(compute):
        return (
            f"Up to a per-rank batch of {max(comm)} the all-reduce of {allreduce} took longer than the compute; "
            f"from {min(compute)} up the compute outweighed it."
        )

    def listed(batches: list[int]) -> str:
        return ", ".join(str(b) for b in batches[:-1]) + (" and " if len(batches) > 1 else "") + str(batches[-1])

    return (
        f"No clean switch in this sweep: the all-reduce of {allreduce} took longer than the compute at per-rank "
        f"batch{'es' if len(comm) > 1 else ''} {listed(comm)}, the compute outweighed it at {listed(compute)}. "
        "Timings this close flip with what else the machine is doing; run it again to see which holds."
    )


def efficiency(single_per_s: float, ddp_per_s: float, world_size: int) -> float:
    """Scaling efficiency: samples/s at N / (N x samples/s at 1); 1.0 is perfect."""
    return ddp_per_s / (world_size * single_per_s)


def _logged_bucket_sizes(ddp: DDP) -> list[int] | None:
    """DDP's own record of its bucket sizes in bytes, from `_get_ddp_logging_data()`: a private
    API that may change or go in another PyTorch; None then (the comm hook's count stands)."""
    try:
        data = ddp._get_ddp_logging_data()
        text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes")
        return [int(s) for s in str(text).split(",") if s.strip()]
    except Exception:  # noqa: BLE001 - private API: absent or changed is not an error of the run
        return None


def rank_main(ctx: RankContext) -> None:
    p = DdpScalingParams(**ctx.args)
    n, rank, dev = ctx.world_size, ctx.rank, ctx.device
    sizes = sorted(set(sweep_sizes(p.sweep)) | {p.batch_size})
    data = mnist.load_first(min(60_000, max(2048, 2 * n * sizes[-1])))
    x, y = data.train_x.to(dev), data.train_y.to(dev)
    span = len(x)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def batch(i: int, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = ((i * n + rank) * b) % max(1, span - b)  # each rank its own samples
        return x[start : start + b], y[start : start + b]

    def stepper(model: torch.nn.Module, opt: torch.optim.Optimizer, b: int) -> Callable[[int], torch.Tensor]:
        def step(i: int) -> torch.Tensor:
            xb, yb = batch(i, b)
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

        return step

    def timed(step: Callable[[int], torch.Tensor], count: int) -> tuple[float, torch.Tensor]:
        sync()
        start = time.perf_counter()
        for i in range(count):
            loss = step(i)
        sync()
        return time.perf_counter() - start, loss

    def slowest(values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64 if dev.type == "cpu" else torch.float32, device=dev)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return [float(v) for v in t.tolist()]

    ids = [ctx.local_rank] if dev.type == "cuda" else None

    # 1. DDP's buckets, as its communication hook is handed them
    torch.manual_seed(p.seed)
    probe = DDP(MNISTClassifier().to(dev), device_ids=ids, bucket_cap_mb=p.bucket_cap_mb)
    calls: list[int] = []

    def counting_hook(state, bucket):
        buffer = bucket.buffer()
        calls.append(buffer.numel() * buffer.element_size())
        return default_hooks.allreduce_hook(state, bucket)  # all-reduce and divide by N, as DDP does

    probe.register_comm_hook(None, counting_hook)
    probe_opt = torch.optim.SGD(probe.parameters(), lr=p.lr)
    per_step: list[list[int]] = []
    for i in range(BUCKET_PROBE_STEPS):
        calls.clear()
        stepper(probe, probe_opt, p.batch_size)(i)
        per_step.append(list(calls))
    bucket_bytes = per_step[-1]
    logged = _logged_bucket_sizes(probe)
    del probe, probe_opt

    # 2. samples/s: one plain process, then N under DDP, in turns
    torch.manual_seed(p.seed)
    ddp = DDP(MNISTClassifier().to(dev), device_ids=ids, bucket_cap_mb=p.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=p.lr)
    plain = plain_opt = None
    if rank == 0:
        torch.manual_seed(p.seed)
        plain = MNISTClassifier().to(dev)
        plain_opt = torch.optim.SGD(plain.parameters(), lr=p.lr)
    single_s: list[float] = []
    ddp_s: list[float] = []
    started = time.perf_counter()
    for r in range(p.rounds):
        dist.barrier()
        if rank == 0:  # the others wait at the next barrier (a blocking wait: no CPU taken)
            assert plain is not None and plain_opt is not None  # made on rank 0
            one = stepper(plain, plain_opt, p.batch_size)
            timed(one, p.warmup)
            single_s.append(timed(one, p.steps)[0])
        dist.barrier()
        many = stepper(ddp, opt, p.batch_size)
        timed(many, p.warmup)
        dist.barrier()
        mine, loss = timed(many, p.steps)
        ddp_s.append(slowest([mine])[0])
        ctx.step(r + 1, p.rounds, loss.item(), time.perf_counter() - started, p.steps * p.batch_size / mine)

    # 3. compute against all-reduce, per-rank batch by batch
    buffers = [torch.zeros(nbytes // 4, device=dev) for nbytes in bucket_bytes]
    rows = []
    for b in sizes:
        step = stepper(ddp, opt, b)
        timed(step, p.warmup)
        with ddp.no_sync():
            timed(step, 1)
        full, local, comm = [], [], []
        for _ in range(p.steps):
            dist.barrier()
            full.append(timed(step, 1)[0])
            dist.barrier()
            with ddp.no_sync():
                local.append(timed(step, 1)[0])
            dist.barrier()
            sync()
            start = time.perf_counter()
            for buffer in buffers:
                dist.all_reduce(buffer)
            sync()
            comm.append(time.perf_counter() - start)
        every = slowest(full + local + comm)  # per repetition, the slowest rank
        k = p.steps
        row = {
            "batch": b,
            "ddp_s": statistics.median(every[:k]),
            "compute_s": statistics.median(every[k : 2 * k]),
            "allreduce_s": statistics.median(every[2 * k :]),
        }
        row["exposed_s"] = row["ddp_s"] - row["compute_s"]
        rows.append(row)

    if rank != 0:
        ctx.result(rank=rank)
        return
    mid = next(row for row in rows if row["batch"] == p.batch_size)
    single = statistics.median(p.steps * p.batch_size / s for s in single_s)
    many_per_s = statistics.median(n * p.steps * p.batch_size / s for s in ddp_s)
    parameters = count_parameters(ddp.module)
    ctx.result(
        parameters=parameters,
        bucket_bytes=bucket_bytes,
        first_step_buckets=per_step[0],
        logged_buckets=logged,
        single_samples_per_s=single,
        ddp_samples_per_s=many_per_s,
        single_step_s=statistics.median(single_s) / p.steps,
        ddp_round_step_s=statistics.median(ddp_s) / p.steps,
        compute_seconds=mid["compute_s"],
        allreduce_seconds=mid["allreduce_s"],
        ddp_step_seconds=mid["ddp_s"],
        exposed_comm_seconds=mid["exposed_s"],
        rows=rows,
        dataset=data.description,
    )


def measure(p: DdpScalingParams, dev: Device) -> Iterator[Event]:
    plan = distributed.choose(dev, p.world_size)
    n, b = p.world_size, p.batch_size
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this platform
        load = None
    yield Started(
        "ddp-scaling",
        plan.device,
        f"{n} x {plan.backend}",
        mnist.describe_source(),
        f"world size 1 and {n}, {b} samples per rank per step; sweep {p.sweep}",
    )
    yield Note(plan.why)
    yield Note(
        f"World size 1: a plain MNISTClassifier (no DDP) in rank 0 of the job while the other ranks wait. "
        f"World size {n}: every rank's model under DistributedDataParallel. Same model, {b} samples per "
        f"rank per step, {p.warmup} warm-up steps, then {p.steps} timed steps, in turns {p.rounds} times; "
        "time.perf_counter around the steps"
        + (" after torch.cuda.synchronize" if plan.on_gpus else "")
        + "; a DDP run's time is its slowest rank's."
    )
    job = yield from distributed.launch("ddp_scaling", plan, p.model_dump())
    r0 = job["results"][0]
    single, many = r0["single_samples_per_s"], r0["ddp_samples_per_s"]
    eff = efficiency(single, many, n)
    rows = r0["rows"]
    cross = crossover(rows)

    yield Table(
        f"Throughput: {b} samples per rank per step",
        ["world size", "how", "step", "samples/s"],
        [
            [
                "1",
                "plain model, no DDP (rank 0 alone)",
                present.seconds(r0["single_step_s"]),
                present.metric_value("single_samples_per_s", single),
            ],
            [
                str(n),
                f"DDP, {n} {'GPUs' if plan.on_gpus else 'CPU processes'}",
                present.seconds(r0["ddp_round_step_s"]),
                present.metric_value("ddp_samples_per_s", many),
            ],
        ],
    )
    bound = ""
    if not plan.on_gpus:
        busy = f"; load average {load:.1f} when it started" if load is not None else ""
        bound = (
            f" Here {n} processes of one thread each share {cores} CPU cores with torchrun, the engine and the "
            f"screen{busy}: efficiency on this machine is bounded by its cores, not by DDP alone."
            + (
                f" With more processes ({n}) than cores ({cores}) some ranks always wait for a core: this "
                "measures oversubscription, not scaling."
                if cores and n > cores
                else ""
            )
            + " A GPU box "
            "(NCCL over NVLink, one GPU per rank) follows the same formula with its own compute and all-reduce "
            "times; this run measured none of them."
        )
    yield Note(
        f"Samples/s: {present.metric_value('single_samples_per_s', single)} with 1 process, "
        f"{present.metric_value('ddp_samples_per_s', many)} with {n} under DDP: "
        f"{present.metric(many / single, 'x')} the throughput. Scaling efficiency = samples/s at N / "
        f"(N x samples/s at 1) = {present.metric(many)} / ({n} x {present.metric(single)}) = "
        f"{present.metric(eff, '%')}; 100% would mean the all-reduce cost nothing." + bound,
        "result",
    )

    buckets = r0["bucket_bytes"]
    total = sum(buckets)
    sizes_text = ", ".join(f"{s:,} B" for s in buckets)
    logged = r0.get("logged_buckets")
    logged_text = (
        "DDP's own record (`_get_ddp_logging_data()`, a private API) agrees."
        if logged == buckets
        else f"DDP's own record (`_get_ddp_logging_data()`, a private API) says {logged}."
        if logged
        else "DDP's own record (`_get_ddp_logging_data()`, a private API) was not available."
    )
    one = (
        " The model's gradients fit in one bucket (a bucket closes once it reaches bucket_cap_mb): its "
        "all-reduce can start only when the last gradient (fc1's, the first layer, computed last) is ready, "
        "so none of it overlaps with the backward pass."
        if len(buckets) == 1
        else " The first bucket's all-reduce starts while backward still computes the earlier layers' gradients."
    )
    first = r0["first_step_buckets"]
    rebuilt = (
        f" In the first step DDP reduced {len(first)} bucket{'s' if len(first) != 1 else ''} "
        f"({', '.join(f'{s:,} B' for s in first)}), then rebuilt its buckets in the order the gradients "
        "arrived."
        if first != buckets
        else ""
    )
    yield Note(
        f"DDP all-reduced {len(buckets)} bucket{'s' if len(buckets) != 1 else ''} per step ({sizes_text}), "
        f"as its communication hook saw them: {present.size(total)} = 4 B x {r0['parameters']:,} "
        f"parameters. {logged_text}" + one + rebuilt
    )

    table_rows = [
        [
            str(row["batch"]),
            present.seconds(row["compute_s"]),
            present.seconds(row["allreduce_s"]),
            present.seconds(row["ddp_s"]),
            present.seconds(row["exposed_s"]),
            present.metric(row["allreduce_s"] / row["compute_s"], "x"),
        ]
        for row in rows
    ]
    yield Table(
        f"Per step on {n} ranks (slowest rank, median of {p.steps}): compute against all-reduce",
        ["batch/rank", "compute", "all-reduce", "DDP step", "added", "comm/compute"],
        table_rows,
    )
    where = who_won(rows, present.size(total))
    yield Note(
        f"{where} The all-reduce moves the same bytes whatever the batch (4 B per parameter), while the "
        "compute grows with the samples each rank takes; a smaller model shrinks both. What decides whether "
        "DDP pays is the work per parameter per step, the per-rank batch: too small, and N processes spend "
        "their time waiting on each other's gradients.",
        "result",
    )
    yield Note(
        "The columns: compute is a DDP step inside no_sync() (forward, backward, SGD step, no all-reduce); "
        "all-reduce is a blocking dist.all_reduce of DDP's bucket sizes after a barrier, the communication "
        "alone; DDP step is the real thing; added is DDP step - compute: the all-reduce that backward did "
        "not hide and every wait inside it, for the slowest rank to arrive and, on shared cores, for a "
        "waiting process to be given a core again."
    )
    yield Note(
        "Formula: a DDP step takes about compute + all-reduce - overlap, plus the wait for the slowest rank; "
        "a ring all-reduce of S bytes over N ranks sends 2 x (N-1)/N x S bytes per rank, so its time is about "
        "that over the link's bandwidth plus a latency per bucket. With the same batch per rank, efficiency = "
        "step time at 1 / step time at N."
    )
    yield Finished(
        {
            "world_size": n,
            "backend": plan.backend,
            "cpu_cores": cores,
            "per_rank_batch": b,
            "parameters": r0["parameters"],
            "allreduce_bytes": total,
            "bucket_count": len(buckets),
            "single_samples_per_s": single,
            "ddp_samples_per_s": many,
            "speedup": many / single,
            "scaling_efficiency": eff,
            "compute_seconds": r0["compute_seconds"],
            "allreduce_seconds": r0["allreduce_seconds"],
            "ddp_step_seconds": r0["ddp_step_seconds"],
            "exposed_comm_seconds": r0["exposed_comm_seconds"],
            "comm_compute_ratio": r0["allreduce_seconds"] / r0["compute_seconds"],
            "crossover_batch": cross,
            "load_average": load,
            "launch_seconds": job.get("ready_s"),
            "job_seconds": job.get("seconds"),
            "attempts": job["attempts"],
        }
    )
