"""One rank of a distributed experiment: `torchrun ... -m tutor.experiments.rank MODULE`.

torchrun (tutor/experiments/distributed.py starts it) sets the environment contract in each of
its worker processes: RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT. This module reads
it, joins the process group (the backend the launcher chose: gloo on CPU processes, NCCL with
one GPU per rank), and calls `rank_main(ctx)` of tutor/experiments/MODULE.py, which measures
and tells the launcher what it saw through `ctx.step`, `ctx.note`, `ctx.table` and `ctx.result`:
one JSON line each on stdout, tagged with the rank.

A rank must not outlive the job: torchrun starts each worker in a session of its own, so
killing the launcher's process group does not reach it. A watchdog thread ends the rank when
its parent (torchrun's agent) is gone; `python -m tutor.experiments.rank --torchrun ARGS` runs
torchrun with the same watchdog, so it ends when the process that launched it does.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

MARK = "@@gpututor-rank "  # the prefix of an event line; anything else on stdout is passed over
ARGS_ENV = "GPUTUTOR_RANK_ARGS"  # the experiment's parameters, JSON
BACKEND_ENV = "GPUTUTOR_DIST_BACKEND"  # "gloo" | "nccl"
LOCK_ENV = "GPUTUTOR_RANK_LOCK"  # a file the ranks lock around a long line
WATCH_S = 0.5


def watch_parent(parent: int) -> None:
    """End this process (no cleanup: there is nobody left to report to) once `parent` is gone."""

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, name="gpututor-parent-watch", daemon=True).start()


@dataclass
class RankContext:
    rank: int
    local_rank: int
    world_size: int
    backend: str
    device: Any  # torch.device
    args: dict[str, Any] = field(default_factory=dict)

    def _emit(self, kind: str, **fields: Any) -> None:
        _line(kind, **fields)

    def step(self, step: int, total: int, loss: float, seconds: float, samples_per_s: float, epoch: int = 1) -> None:
        self._emit(
            "step",
            step=step,
            total=total,
            loss=float(loss),
            seconds=float(seconds),
            samples_per_s=float(samples_per_s),
            epoch=epoch,
        )

    def note(self, text: str, level: str = "info") -> None:
        self._emit("note", text=text, level=level)

    def table(self, title: str, columns: list[str], rows: list[list[str]]) -> None:
        self._emit("table", title=title, columns=columns, rows=rows)

    def result(self, **values: Any) -> None:
        """What this rank measured (plain JSON values), handed to the launcher's measure()."""
        self._emit("result", values=values)


def _line(kind: str, **fields: Any) -> None:
    """One line per event on the pipe the ranks share. A write of up to PIPE_BUF (4 KiB) bytes is
    atomic; a longer line (a table, a list of sample ids) is written under the job's lock file,
    so two ranks' lines never interleave."""
    line = (MARK + json.dumps({"kind": kind, "rank": int(os.environ.get("RANK", -1)), **fields}) + "\n").encode()
    sys.stdout.flush()
    with _exclusive():
        _write_all(line)


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


@contextmanager
def _exclusive() -> Iterator[None]:
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _context() -> RankContext:
    import torch
    import torch.distributed as dist

    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    backend = os.environ.get(BACKEND_ENV, "gloo")
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)  # N processes share the cores: one thread each
    # NCCL: bind the rank's GPU to its group, so barrier() knows the device rather than guess it
    if backend == "nccl":
        dist.init_process_group(backend, device_id=device)
    else:
        dist.init_process_group(backend)
    args = json.loads(os.environ.get(ARGS_ENV) or "{}")
    return RankContext(rank, local_rank, world_size, backend, device, args)


def main(module: str) -> int:
    watch_parent(os.getppid())
    _line("hello", pid=os.getpid())  # the launcher kills ranks by pid if torchrun cannot
    try:
        ctx = _context()
        ctx._emit("ready")
        # A built-in experiment's module by its short name; a dotted name as it is (tests).
        importlib.import_module(module if "." in module else f"tutor.experiments.{module}").rank_main(ctx)
        return 0
    except Exception as exc:  # noqa: BLE001 - said to the launcher as one line, with where it happened
        frames = traceback.extract_tb(exc.__traceback__)
        where = next(
            (f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames) if "tutor" in f.filename), ""
        )
        text = str(exc).strip()
        _line("error", type=type(exc).__name__, text=text.splitlines()[0] if text else "", where=where)
        traceback.print_exc()  # to stderr, which the launcher keeps the tail of
        return 1
    finally:
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:  # noqa: BLE001 - ending anyway
            pass


def torchrun(argv: list[str]) -> None:
    """torchrun itself (torch.distributed.run's main), ending when the process that started it is
    gone: killed with the engine's process group it dies anyway, but not if it is mid-start."""
    watch_parent(os.getppid())
    from torch.distributed.run import main as torchrun_main

    torchrun_main(argv)


if __name__ == "__main__":
    if sys.argv[1] == "--torchrun":
        torchrun(sys.argv[2:])
        sys.exit(0)
    code = main(sys.argv[1])
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the interpreter's teardown of torch (about 2 s of a 2-process job here): the results
    # are out, the process group is destroyed, and nothing else is left to close.
    os._exit(code)
