"""Launch a distributed experiment with PyTorch's own launcher, torchrun, and relay its ranks.

    plan = choose(dev, world_size)          NCCL with one GPU per rank, or gloo on CPU processes
    results = yield from launch("ddp_equivalence", plan, args)
                                            events from every rank as they come (Step labelled
                                            "rank 1", Note "rank 1: ..."), then each rank's result

The job is `python -m torch.distributed.run --standalone --nproc_per_node=N -m
tutor.experiments.rank MODULE` (tutor/experiments/rank.py runs `rank_main` of MODULE in each
worker), a child of this process in its process group. Its ranks write one JSON line per
event on stdout; stderr goes to a file whose tail explains a failure.

A launch that fails before any rank reports an error of its own (torchrun aborting at start,
SIGABRT in about one launch in five on a busy 2-core VM, or a rendezvous that never forms) is
said in a Note and tried once more; a second failure, or an error raised in a rank, ends the
run with a sentence (LaunchFailed). Stopping the generator (a cancelled run) stops the job:
torchrun is asked to stop its workers, then killed, then any rank still alive is killed by pid.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tutor.errors import PEER_GONE
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Note, Step, Table
from tutor.experiments.rank import ARGS_ENV, BACKEND_ENV, LOCK_ENV, MARK

TIMEOUT_S = 120.0  # a whole job, launch included; experiments are sized to finish in well under 60 s
STOP_GRACE_S = 5.0  # torchrun forwards SIGTERM to its workers and waits for them
_SIGNAL = re.compile(r"Signal (\d+) \((SIG\w+)\)")
_EXITCODE = re.compile(r"exitcode\s*:\s*(-?\d+)")


class LaunchFailed(RuntimeError):
    """The job did not finish; the message is a sentence for the learner."""


@dataclass(frozen=True)
class Plan:
    backend: str  # "gloo" | "nccl"
    world_size: int
    device: str  # what each rank trains on: "cpu" or "cuda" (cuda:LOCAL_RANK)
    why: str  # one sentence for the screen

    @property
    def on_gpus(self) -> bool:
        return self.backend == "nccl"


def choose(dev: Device, world_size: int) -> Plan:
    """NCCL where there is one CUDA GPU per rank; gloo on CPU processes otherwise (said why)."""
    gpus = 0
    if dev.kind == "cuda":
        import torch

        gpus = torch.cuda.device_count()
    if dev.kind == "cuda" and gpus >= world_size:
        return Plan(
            "nccl", world_size, "cuda", f"NCCL: {world_size} processes, one GPU each (cuda:0 to cuda:{world_size - 1})."
        )
    if dev.kind == "cuda":
        why = (
            f"gloo on the CPU: {world_size} processes need {world_size} GPUs for NCCL (one GPU per process) "
            f"and this machine has {gpus}."
        )
    elif dev.kind == "mps":
        why = "gloo on the CPU: PyTorch has no collective backend for Apple's MPS."
    else:
        import torch

        why = (
            "gloo on the CPU: this run was asked for the CPU."
            if torch.cuda.is_available()
            else "gloo on the CPU: no CUDA GPU here."
        )
    return Plan(
        "gloo",
        world_size,
        "cpu",
        f"{why} {world_size} CPU processes of 1 thread each, all on this machine's cores: "
        "the same torchrun, DDP and all-reduce as on a GPU box, slower.",
    )


def command(module: str, world_size: int) -> list[str]:
    """The torchrun command line (as a learner would type it, but with this Python)."""
    return [sys.executable, "-m", "torch.distributed.run", *_torchrun_args(module, world_size)]


def _torchrun_args(module: str, world_size: int) -> list[str]:
    return [
        "--standalone",
        f"--nproc_per_node={world_size}",
        "--max-restarts=0",
        "--monitor-interval=0.1",
        "-m",
        "tutor.experiments.rank",
        module,
    ]


def _argv(module: str, world_size: int) -> list[str]:
    """What is started: torchrun's own main, watched (rank.torchrun): it ends with this process."""
    return [sys.executable, "-m", "tutor.experiments.rank", "--torchrun", *_torchrun_args(module, world_size)]


def _environment(plan: Plan, args: dict[str, Any], lock: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TORCHELASTIC_", "RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_"))
    }
    env[ARGS_ENV] = json.dumps(args)
    env[BACKEND_ENV] = plan.backend
    env[LOCK_ENV] = lock
    env["PYTHONUNBUFFERED"] = "1"
    if plan.backend == "gloo":  # N processes share the cores: one thread each (torchrun's default too)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = "1"
    env.setdefault("LOGLEVEL", "ERROR")
    return env


def _failure(stderr_tail: str, code: int | None) -> str:
    """Why torchrun says the job ended, in a few words."""
    # torchrun lists the other failures before the root cause, and the others are often its own
    # SIGTERM to the ranks still running: the root cause's signal is the one to name
    root = stderr_tail.rfind("Root Cause")
    signals = _SIGNAL.findall(stderr_tail[root:] if root >= 0 else stderr_tail) or _SIGNAL.findall(stderr_tail)
    if signals:
        named = next((name for _, name in signals if name != "SIGTERM"), signals[0][1])
        return f"a process was killed by {named}"
    if code is not None and code < 0:
        try:
            return f"torchrun was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"torchrun was killed by signal {-code}"
    found = _EXITCODE.search(stderr_tail)
    if found:
        return f"a process exited with code {found.group(1)}"
    last = [line.strip() for line in stderr_tail.splitlines() if line.strip()]
    return f"torchrun exited with code {code}" + (f" ({last[-1][:160]})" if last else "")


def _alive_rank(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # the pid may have been reused: only a rank of ours is killed
        return b"tutor.experiments.rank" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc (macOS): a pid seen seconds ago is still ours


def _stop(proc: subprocess.Popen, rank_pids: set[int]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)  # torchrun stops its workers and exits
        try:
            proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for pid in rank_pids:  # workers run in sessions of their own: reach each one
        if _alive_rank(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _attempt(
    module: str, plan: Plan, args: dict[str, Any], timeout_s: float, out: dict[str, Any]
) -> Generator[Event, None, None]:
    """One launch; fills out["results"], out["errors"], out["failure"], out["ready_s"]."""
    results: dict[int, dict[str, Any]] = out.setdefault("results", {})
    errors: dict[int, dict[str, Any]] = out.setdefault("errors", {})
    ready: set[int] = set()
    pids: set[int] = set()
    with tempfile.TemporaryFile("w+") as err, tempfile.NamedTemporaryFile(prefix="gpututor-ranks-") as lock:
        started = time.perf_counter()
        proc = subprocess.Popen(
            _argv(module, plan.world_size),
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=_environment(plan, args, lock.name),
            cwd=args.get("workdir") or None,
        )
        try:
            buffer = b""
            assert proc.stdout is not None  # stdout=PIPE
            fd = proc.stdout.fileno()
            while True:
                if time.perf_counter() - started > timeout_s:
                    out["failure"] = f"the job did not finish within {timeout_s:.0f} s"
                    out["timed_out"] = True
                    return
                readable, _, _ = select.select([fd], [], [], 0.25)
                if not readable:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", "replace")
                    if not line.startswith(MARK):
                        continue
                    try:
                        event = json.loads(line[len(MARK) :])
                    except ValueError:
                        continue
                    kind, rank = event.get("kind"), int(event.get("rank", -1))
                    if kind == "hello":
                        pids.add(int(event["pid"]))
                    elif kind == "ready":
                        ready.add(rank)
                        if len(ready) == plan.world_size:
                            out["ready_s"] = time.perf_counter() - started
                    elif kind == "step":
                        yield Step(
                            event["step"],
                            event["total"],
                            event["loss"],
                            event["seconds"],
                            event["samples_per_s"],
                            event.get("epoch", 1),
                            label=f"rank {rank}",
                        )
                    elif kind == "note":
                        yield Note(f"rank {rank}: {event['text']}", event.get("level", "info"))
                    elif kind == "table":
                        yield Table(event["title"], event["columns"], event["rows"])
                    elif kind == "result":
                        results[rank] = event["values"]
                    elif kind == "error":
                        errors[rank] = event
            code = proc.wait()
            out["seconds"] = time.perf_counter() - started
            if code != 0 or len(results) < plan.world_size:
                err.seek(0, os.SEEK_END)
                size = err.tell()
                err.seek(max(0, size - 8192))
                out["failure"] = _failure(err.read(), code)
        finally:
            _stop(proc, pids)


def drain(job: Generator[Event, None, dict[str, Any]]) -> dict[str, Any]:
    """Run a launch to its end without showing its events (a check that wants the result only)."""
    while True:
        try:
            next(job)
        except StopIteration as done:
            return done.value


def launch(
    module: str, plan: Plan, args: dict[str, Any] | None = None, *, timeout_s: float = TIMEOUT_S, retries: int = 1
) -> Generator[Event, None, dict[str, Any]]:
    """Run `rank_main` of tutor/experiments/MODULE.py in plan.world_size processes under torchrun.

    Yields the ranks' events; returns {"results": {rank: values}, "seconds": wall time of the job,
    "ready_s": seconds until every rank had joined the process group, "attempts": launches}.
    """
    args = dict(args or {})
    for attempt in range(retries + 1):
        out: dict[str, Any] = {}
        yield from _attempt(module, plan, args, timeout_s, out)
        failure = out.get("failure")
        errors = out.get("errors") or {}
        if errors:  # a rank raised: trying again would raise again
            # The cause, not its echo: a rank waiting on the one that failed raises too (gloo:
            # "Connection closed by peer"), often under a lower number. Else the first to arrive.
            causes = [(r, e) for r, e in errors.items() if not PEER_GONE.search(str(e.get("text", "")))]
            rank, error = (causes or list(errors.items()))[0]
            where = f" at {error['where']}" if error.get("where") else ""
            raise LaunchFailed(
                f"rank {rank} of {plan.world_size} failed{where}: {error.get('type')}: {error.get('text')}"
            )
        if not failure:
            out["attempts"] = attempt + 1
            return out
        if out.get("timed_out") or attempt == retries:
            raise LaunchFailed(
                f"torchrun's {plan.world_size} processes failed ({failure})"
                + (f", {attempt + 1} launches" if attempt else "")
                + "."
            )
        yield Note(f"The launch failed ({failure}); trying once more from the start.", "warning")
    raise AssertionError("unreachable")
