"""ddp-checkpoint: saving and loading a model trained under DDP.

torchrun starts `world_size` processes (tutor/experiments/distributed.py); the run makes a
folder of its own (in the scratch dir, removed at the end) and passes it as `workdir`. In each
rank, `rank_main`:
1. trains an MNISTClassifier under DistributedDataParallel for `steps` SGD steps (rank r: its
   slice of each global batch);
2. every rank saves: each calls torch.save(model.module.state_dict(), "every-rank.pt"), the
   same path, at once; the calls, bytes and seconds are counted on each rank;
3. rank 0 saves: `if rank == 0: torch.save(..., "checkpoint.pt")`; rank 1 meanwhile tries to
   torch.load it without waiting (what it gets varies), then every rank passes dist.barrier()
   and loads it with map_location and weights_only=True, and compares it with its own weights;
4. on rank 0, the `module.` prefix: DDP's own state_dict() saved and loaded into a plain
   MNISTClassifier raises load_state_dict's RuntimeError (caught, its text kept); the two fixes,
   the file of model.module.state_dict() and the prefix stripped by
   consume_prefix_in_state_dict_if_present, load, and score on the test slice as DDP's model does.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.modules.utils import consume_prefix_in_state_dict_if_present
from torch.nn.parallel import DistributedDataParallel as DDP

from tutor import present
from tutor.experiments import data as mnist
from tutor.experiments import distributed
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.rank import RankContext
from tutor.experiments.specs.ddp_checkpoint import DdpCheckpointParams
from tutor.paths import scratch_dir

EVERY_RANK, RANK0, DDP_STATE = "every-rank.pt", "checkpoint.pt", "ddp-state-dict.pt"


def error_text(exc: BaseException, folder: str = "", lines: int = 3) -> str:
    """An exception as the learner would read its first lines, on one line, with the run's
    folder taken out of any path: "RuntimeError: Error(s) in loading state_dict for ...: ..."."""
    text = str(exc).replace(folder.rstrip("/") + "/", "") if folder else str(exc)
    kept = " ".join(line.strip() for line in text.splitlines()[:lines] if line.strip())
    return f"{type(exc).__name__}: {kept}" if kept else type(exc).__name__


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k].cpu(), b[k].cpu()) for k in a)


def _accuracy(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


class _Saves:
    """torch.save, counted: calls and the bytes each wrote."""

    def __init__(self) -> None:
        self.calls, self.bytes, self.seconds = 0, 0, 0.0

    def save(self, obj: Any, path: Path) -> None:
        began = time.perf_counter()
        with open(path, "wb") as f:  # as torch.save(obj, path) opens it: truncate, then write
            torch.save(obj, f)
            self.bytes += f.tell()
        self.seconds += time.perf_counter() - began
        self.calls += 1

    def counts(self) -> dict[str, Any]:
        return {"calls": self.calls, "bytes": self.bytes, "seconds": self.seconds}


def _gather(obj: Any, world_size: int) -> list[Any]:
    everyone: list[Any] = [None] * world_size
    dist.all_gather_object(everyone, obj)
    return everyone


def rank_main(ctx: RankContext) -> None:
    args = dict(ctx.args)
    folder = Path(args.pop("workdir"))
    p = DdpCheckpointParams(**args)
    n, b = ctx.world_size, p.batch_size // ctx.world_size
    data = mnist.load_first(p.steps * p.batch_size, p.test_samples)
    x, y = data.train_x.to(ctx.device), data.train_y.to(ctx.device)

    torch.manual_seed(p.seed)
    ddp = DDP(MNISTClassifier().to(ctx.device), device_ids=[ctx.local_rank] if ctx.device.type == "cuda" else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=p.lr)
    start = time.perf_counter()
    for step in range(p.steps):
        first = step * p.batch_size + ctx.rank * b
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x[first : first + b]), y[first : first + b])
        loss.backward()
        optimizer.step()
        value = loss.item()  # waits for the GPU: the clock after it counts the step's kernels
        elapsed = time.perf_counter() - start
        ctx.step(step + 1, p.steps, value, elapsed, (step + 1) * b / elapsed)
    mine = {k: v.detach().clone() for k, v in ddp.module.state_dict().items()}

    # 1. Every rank saves, to one path, at once.
    every = _Saves()
    dist.barrier()
    every.save(ddp.module.state_dict(), folder / EVERY_RANK)
    every_counts = _gather(every.counts(), n)  # also a barrier: every rank's file is closed
    intact = False
    if ctx.rank == 0:  # what the N writes left: whole, and this model?
        try:
            intact = same_weights(torch.load(folder / EVERY_RANK, map_location=ctx.device, weights_only=True), mine)
        except Exception:  # noqa: BLE001 - a torn file is an answer, not a failure
            intact = False

    # 2. Rank 0 saves; the others wait at a barrier before they read (rank 1 first tries without).
    alone = _Saves()
    path = folder / RANK0
    early = None
    dist.barrier()
    if ctx.rank == 0:
        alone.save(ddp.module.state_dict(), path)
    elif ctx.rank == 1:
        try:  # no barrier: rank 0 may not have written it yet
            torch.load(path, map_location=ctx.device, weights_only=True)
            early = "loaded the whole file"
        except Exception as exc:  # noqa: BLE001 - what a reader gets is the lesson
            early = error_text(exc, str(folder), lines=1)
    dist.barrier()  # rank 0 has written the whole file
    restored = MNISTClassifier().to(ctx.device)
    restored.load_state_dict(torch.load(path, map_location=ctx.device, weights_only=True))
    ok = torch.tensor([float(same_weights(restored.state_dict(), mine))], device=ctx.device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # 0 if any rank's copy differs
    alone_counts = _gather({**alone.counts(), "early": early}, n)

    # 3. The module. prefix, on rank 0.
    if ctx.rank == 0:
        state = ddp.state_dict()
        keys = list(state)
        torch.save(state, folder / DDP_STATE)
        loaded = torch.load(folder / DDP_STATE, map_location=ctx.device, weights_only=True)
        plain = MNISTClassifier().to(ctx.device)
        try:
            plain.load_state_dict(loaded)
            load_error = ""
        except RuntimeError as exc:
            load_error = error_text(exc)
        unwrapped = MNISTClassifier().to(ctx.device)  # fix 1: the file of model.module.state_dict()
        unwrapped.load_state_dict(torch.load(path, map_location=ctx.device, weights_only=True))
        stripped = MNISTClassifier().to(ctx.device)  # fix 2: strip the prefix of DDP's own
        consume_prefix_in_state_dict_if_present(loaded, "module.")
        stripped.load_state_dict(loaded)
        tx, ty = data.test_x.to(ctx.device), data.test_y.to(ctx.device)
        ctx.result(
            every=every_counts,
            every_intact=intact,
            alone=alone_counts,
            loaded_on_every_rank=bool(ok.item()),
            checkpoint_bytes=alone.bytes,
            prefixed_key_share=sum(k.startswith("module.") for k in keys) / len(keys),
            ddp_first_key=keys[0],
            plain_first_key=next(iter(mine)),
            plain_load_error=load_error,
            ddp_accuracy=_accuracy(ddp.module, tx, ty),
            unwrapped_accuracy=_accuracy(unwrapped, tx, ty),
            stripped_accuracy=_accuracy(stripped, tx, ty),
            fixes_identical=same_weights(unwrapped.state_dict(), mine) and same_weights(stripped.state_dict(), mine),
            test_samples=len(ty),
            dataset=data.description,
        )
    else:
        ctx.result()
    dist.barrier()  # the others wait for rank 0 before the job ends


# --------------------------------------------------------------------------- the engine's side


def measure(p: DdpCheckpointParams, dev: Device) -> Iterator[Event]:
    plan = distributed.choose(dev, p.world_size)
    n = p.world_size
    yield Started(
        "ddp-checkpoint",
        plan.device,
        f"{n} x {plan.backend}",
        mnist.describe_source(),
        f"world size {n}, {p.steps} DDP steps of batch {p.batch_size}, then save and load",
    )
    yield Note(plan.why)
    folder = Path(tempfile.mkdtemp(prefix="ddp-checkpoint-", dir=scratch_dir()))
    try:
        yield Note(
            f"torchrun --standalone --nproc_per_node={n}: the ranks train a DDP model {p.steps} steps, then "
            "save it two ways and load it into a plain MNISTClassifier. Their files go in a folder of this "
            "run's own, removed at the end."
        )
        job = yield from distributed.launch("ddp_checkpoint", plan, {**p.model_dump(), "workdir": str(folder)})
        written = sorted((f.name, f.stat().st_size) for f in folder.iterdir())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    removed = not folder.exists()
    r0 = job["results"][0]
    every, alone = r0["every"], r0["alone"]

    rows = [
        [
            f"every rank: torch.save(..., '{EVERY_RANK}')",
            str(r),
            str(c["calls"]),
            present.size(c["bytes"]),
            present.seconds(c["seconds"]),
        ]
        for r, c in enumerate(every)
    ]
    rows += [
        [
            f"if rank == 0: torch.save(..., '{RANK0}')",
            str(r),
            str(c["calls"]),
            present.size(c["bytes"]),
            present.seconds(c["seconds"]) if c["calls"] else "-",
        ]
        for r, c in enumerate(alone)
    ]
    yield Table("Who saves: torch.save calls on each rank", ["policy", "rank", "calls", "bytes written", "time"], rows)
    every_calls, every_bytes = sum(c["calls"] for c in every), sum(c["bytes"] for c in every)
    alone_calls, alone_bytes = sum(c["calls"] for c in alone), sum(c["bytes"] for c in alone)
    outcome = (
        "came out whole (it loads, with the model's weights)" if r0["every_intact"] else "did NOT load whole afterwards"
    )
    # torch.save records each tensor's device: under NCCL rank 0 writes cuda:0, rank 1 cuda:1
    same = "identical bytes" if plan.device == "cpu" else "the same weights, each tagged with its rank's GPU"
    yield Note(
        f"Every rank saving: {every_calls} torch.save calls wrote the same "
        f"{present.size(r0['checkpoint_bytes'])} to one path ({present.size(every_bytes)} in all, the "
        f"slowest call {present.seconds(max(c['seconds'] for c in every))}). Each call truncates the file "
        f"and writes it again while the others write: here, on one local disk with {same}, the "
        f"file {outcome}; on a shared filesystem (NFS, Lustre) N writers of one path can leave a torn "
        f"file, and a reader may meet it half-written. `if rank == 0:` writes it once: {alone_calls} "
        f"call, {present.size(alone_bytes)}, {present.seconds(alone[0]['seconds'])}.",
        "result",
    )
    early = alone[1]["early"] if len(alone) > 1 else None
    yield Note(
        f"Rank 1 called torch.load on the file as rank 0 began saving it, with no barrier between: "
        f"{early}. Whether the file was missing (FileNotFoundError), incomplete (an error reading it: "
        "EOFError, PytorchStreamReader's RuntimeError, OSError) or already whole depends on which process "
        "got there first, and varies from run to run. After "
        f"dist.barrier() every rank loaded it (map_location to its device, weights_only=True): weights "
        f"{'equal to its own on every rank' if r0['loaded_on_every_rank'] else 'NOT equal on some rank'}."
    )
    yield Table(
        "load_state_dict of DDP's own state_dict() into a plain MNISTClassifier",
        ["what was raised, line by line"],
        [[line] for line in _error_lines(r0["plain_load_error"])] or [["nothing: it loaded"]],
    )
    yield Note(
        f"{present.metric(r0['prefixed_key_share'], '%')} of the DDP model's state_dict() keys begin with "
        f"'module.' ('{r0['ddp_first_key']}' where a plain model has '{r0['plain_first_key']}'): "
        "DistributedDataParallel holds the model as its attribute `module`. A plain model's "
        "load_state_dict finds none of its keys and refuses: "
        f"{r0['plain_load_error'] or 'it did not (unexpected)'}",
        "result",
    )
    yield Table(
        f"Test accuracy on {r0['test_samples']:,} MNIST test images after {p.steps} steps",
        ["model", "test accuracy"],
        [
            ["the DDP model (model.module)", present.metric(r0["ddp_accuracy"], "%")],
            ["plain, from model.module.state_dict()", present.metric(r0["unwrapped_accuracy"], "%")],
            [
                "plain, prefix stripped (consume_prefix_in_state_dict_if_present)",
                present.metric(r0["stripped_accuracy"], "%"),
            ],
        ],
    )
    yield Note(
        "Two fixes: save model.module.state_dict() (rank 0's checkpoint.pt above), or strip the prefix "
        "from DDP's own with torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, 'module.'). "
        "Both loaded with torch.load(path, map_location=..., weights_only=True) and scored "
        f"{present.metric(r0['unwrapped_accuracy'], '%')} and {present.metric(r0['stripped_accuracy'], '%')} "
        f"against DDP's {present.metric(r0['ddp_accuracy'], '%')}: the weights are "
        f"{'the same, bit for bit' if r0['fixes_identical'] else 'NOT the same'}.",
        "result",
    )
    yield Note(
        f"The job wrote {', '.join(f'{name} ({present.size(size)})' for name, size in written) or 'nothing'} "
        f"in its folder under the scratch dir; the folder was "
        f"{'removed' if removed else 'NOT removed'} at the end."
    )
    yield Finished(
        {
            "world_size": n,
            "backend": plan.backend,
            "checkpoint_bytes": r0["checkpoint_bytes"],
            "every_rank_writes": every_calls,
            "every_rank_written_bytes": every_bytes,
            "every_rank_save_seconds": max(c["seconds"] for c in every),
            "every_rank_file_intact": r0["every_intact"],
            "rank0_writes": alone_calls,
            "rank0_written_bytes": alone_bytes,
            "rank0_save_seconds": alone[0]["seconds"],
            "early_read": early,
            "loaded_on_every_rank": r0["loaded_on_every_rank"],
            "prefixed_key_share": r0["prefixed_key_share"],
            "ddp_first_key": r0["ddp_first_key"],
            "plain_load_error": r0["plain_load_error"],
            "ddp_accuracy": r0["ddp_accuracy"],
            "unwrapped_accuracy": r0["unwrapped_accuracy"],
            "stripped_accuracy": r0["stripped_accuracy"],
            "fixes_identical": r0["fixes_identical"],
            "folder_removed": removed,
            "launch_seconds": job.get("ready_s"),
            "job_seconds": job.get("seconds"),
            "attempts": job["attempts"],
        }
    )


def _error_lines(text: str) -> list[str]:
    """The one-line error_text split again where load_state_dict's message breaks its lines."""
    for marker in (" Missing key(s)", " Unexpected key(s)"):
        text = text.replace(marker, "\n" + marker.strip())
    return [line for line in text.splitlines() if line.strip()]
