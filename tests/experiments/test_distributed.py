"""The torchrun launcher (tutor/experiments/distributed.py) and a rank's side (rank.py): events
relayed with their rank, a rank's error said, a failed start tried once more, a cancelled job
leaves no process behind, a rank ends when its parent is gone."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import time

import pytest

from tutor.experiments import distributed
from tutor.experiments.devices import Device
from tutor.experiments.events import Note, Step, Table

CPU = Device("cpu", None, "test CPU")


def _drain(gen):
    events = []
    try:
        while True:
            events.append(next(gen))
    except StopIteration as done:
        return events, done.value


def _module(tmp_path, body: str) -> str:
    pkg = tmp_path / "fake_ranks"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        "import os, sys, time, pathlib\n\ndef rank_main(ctx):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    )
    return "fake_ranks.job"


@pytest.fixture()
def importable(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in [str(tmp_path), os.environ.get("PYTHONPATH")] if p))
    return tmp_path


def test_the_plan_is_gloo_on_cpu_processes_without_gpus():
    plan = distributed.choose(CPU, 2)
    assert (plan.backend, plan.device, plan.world_size) == ("gloo", "cpu", 2)
    assert "no CUDA GPU" in plan.why and "1 thread each" in plan.why
    mac = distributed.choose(Device("mps", None, "Apple M2"), 2)
    assert mac.backend == "gloo" and "MPS" in mac.why


def test_nccl_only_with_a_gpu_for_every_rank(monkeypatch):
    import torch

    gpu = Device("cuda", 0, "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    one = distributed.choose(gpu, 2)
    assert (one.backend, one.device) == ("gloo", "cpu")  # two ranks on one GPU: NCCL says "Duplicate GPU"
    assert "need 2 GPUs for NCCL" in one.why and "has 1" in one.why
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert (distributed.choose(gpu, 2).backend, distributed.choose(gpu, 2).device) == ("nccl", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert "asked for the CPU" in distributed.choose(CPU, 2).why  # a GPU box, the CPU chosen


def test_an_nccl_rank_binds_its_gpu_to_the_group(monkeypatch):
    """barrier() under NCCL uses the bound device (else it guesses, with a warning each call)."""
    import torch
    import torch.distributed as dist

    from tutor.experiments import rank

    calls = []
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv(rank.BACKEND_ENV, "nccl")
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))
    monkeypatch.setattr(dist, "init_process_group", lambda backend, **kw: calls.append((backend, kw)))
    ctx = rank._context()
    assert ctx.device == torch.device("cuda", 1)
    assert calls == [("set_device", torch.device("cuda", 1)), ("nccl", {"device_id": torch.device("cuda", 1)})]


def test_the_command_is_torchrun_standalone():
    cmd = distributed.command("ddp_equivalence", 4)
    assert cmd[1:4] == ["-m", "torch.distributed.run", "--standalone"]
    assert "--nproc_per_node=4" in cmd and cmd[-2:] == ["tutor.experiments.rank", "ddp_equivalence"]


def test_events_come_back_tagged_with_their_rank(importable):
    module = _module(
        importable,
        """
        ctx.note(f"world {ctx.world_size}, backend {ctx.backend}, {os.environ['OMP_NUM_THREADS']} thread")
        ctx.step(1, 1, loss=float(ctx.rank), seconds=0.1, samples_per_s=10.0)
        for i in range(20):  # lines far over the pipe's atomic 4 KiB, from both ranks at once
            ctx.table(f"ids {ctx.rank}.{i}", ["id"], [[str(ctx.rank)] for _ in range(6000)])
        ctx.result(rank=ctx.rank, local=int(os.environ["LOCAL_RANK"]))
    """,
    )
    events, job = _drain(distributed.launch(module, distributed.choose(CPU, 2)))
    assert job["results"] == {0: {"rank": 0, "local": 0}, 1: {"rank": 1, "local": 1}}
    assert job["attempts"] == 1 and 0 < job["ready_s"] <= job["seconds"]
    notes = sorted(e.text for e in events if isinstance(e, Note))
    assert notes == ["rank 0: world 2, backend gloo, 1 thread", "rank 1: world 2, backend gloo, 1 thread"]
    assert sorted((e.label, e.loss) for e in events if isinstance(e, Step)) == [("rank 0", 0.0), ("rank 1", 1.0)]
    tables = [e for e in events if isinstance(e, Table)]
    assert len(tables) == 40 and all(t.rows == [[t.title[4]]] * 6000 for t in tables)


def test_an_error_in_a_rank_is_said_with_the_rank_and_not_retried(importable):
    module = _module(
        importable,
        """
        (pathlib.Path(os.environ["MARK_DIR"]) / f"try-{ctx.rank}-{time.time_ns()}").touch()
        if ctx.rank == 1:
            raise ValueError("shapes do not match")
        ctx.result(ok=True)
    """,
    )
    os.environ["MARK_DIR"] = str(importable)
    try:
        with pytest.raises(distributed.LaunchFailed, match=r"rank 1 of 2 failed.*ValueError: shapes do not match"):
            _drain(distributed.launch(module, distributed.choose(CPU, 2)))
    finally:
        del os.environ["MARK_DIR"]
    assert len(list(importable.glob("try-1-*"))) == 1  # one launch: the same code would fail again


def test_the_rank_that_failed_is_named_not_the_one_left_waiting_on_it(importable):
    """Rank 1 raises while rank 0 waits for it in an all-reduce: gloo then fails rank 0 too
    ("Connection closed by peer"). The launch names rank 1's error, the cause."""
    module = _module(
        importable,
        """
        import torch
        import torch.distributed as dist
        waiting = pathlib.Path(os.environ["MARK_DIR"]) / "rank-0-reduces"
        if ctx.rank == 1:
            while not waiting.exists():  # rank 0 is at its all-reduce: now fail under it
                time.sleep(0.01)
            raise ValueError("shapes do not match")
        waiting.touch()
        dist.all_reduce(torch.ones(1))
        ctx.result(ok=True)
    """,
    )
    os.environ["MARK_DIR"] = str(importable)
    try:
        with pytest.raises(distributed.LaunchFailed, match=r"rank 1 of 2 failed.*ValueError: shapes do not match"):
            _drain(distributed.launch(module, distributed.choose(CPU, 2)))
    finally:
        del os.environ["MARK_DIR"]
    assert (importable / "rank-0-reduces").exists()


@pytest.mark.long
def test_a_start_that_aborts_is_said_and_tried_once_more(importable):
    module = _module(
        importable,
        """
        mark = pathlib.Path(os.environ["MARK_DIR"]) / "aborted-once"
        if ctx.rank == 1 and not mark.exists():
            mark.touch()
            os.abort()  # SIGABRT, as torchrun's workers sometimes die at start on a busy machine
        ctx.result(ok=True)
    """,
    )
    os.environ["MARK_DIR"] = str(importable)
    try:
        events, job = _drain(distributed.launch(module, distributed.choose(CPU, 2)))
    finally:
        del os.environ["MARK_DIR"]
    assert job["attempts"] == 2 and len(job["results"]) == 2
    retry = [e for e in events if isinstance(e, Note) and e.level == "warning"]
    assert len(retry) == 1 and "SIGABRT" in retry[0].text and "trying once more" in retry[0].text


def _rank_pids() -> set[int]:
    """The ranks of fake_ranks jobs alive now (torchrun's own process is not one)."""
    out = subprocess.run(["pgrep", "-f", "tutor.experiments.rank fake_ranks"], capture_output=True, text=True)
    pids = set()
    for pid in out.stdout.split():
        try:
            cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"--torchrun" not in cmdline:
            pids.add(int(pid))
    return pids


@pytest.mark.skipif(sys.platform != "linux", reason="pgrep and /proc")
def test_a_cancelled_job_leaves_no_process_behind(importable):
    module = _module(
        importable,
        """
        step = 0
        while True:  # runs until stopped
            step += 1
            ctx.step(step, 0, loss=1.0, seconds=0.1 * step, samples_per_s=1.0)
            time.sleep(0.1)
    """,
    )
    gen = distributed.launch(module, distributed.choose(CPU, 2))
    while not isinstance(next(gen), Step):
        pass
    assert len(_rank_pids()) == 2
    gen.close()  # what a cancel does: the engine stops the generator
    deadline = time.monotonic() + 10
    while _rank_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _rank_pids()


def test_a_rank_ends_when_its_parent_is_gone(tmp_path):
    # The middle process (standing in for torchrun's agent, killed outright) starts a child that
    # watches it, then dies; the child must not live on.
    pid_file = tmp_path / "child.pid"
    middle = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "import os, time, pathlib; from tutor.experiments.rank import watch_parent; "
            "watch_parent(os.getppid()); pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); "
            "time.sleep(60)"], start_new_session=True)
        while True:
            time.sleep(0.05)
    """)
    proc = subprocess.Popen([sys.executable, "-c", middle])
    deadline = time.monotonic() + 20
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        pytest.fail("the watched process outlived its parent")


def test_the_root_cause_signal_is_named_not_torchruns_sigterm_to_the_others():
    """torchrun prints the other failures first, often its own SIGTERM to the ranks still running."""
    tail = textwrap.dedent(
        """
        Failures:
        [1]:
          rank      : 0 (local_rank: 0)
          exitcode  : -15 (pid: 101)
          error_file: <N/A>
          traceback : Signal 15 (SIGTERM) received by PID 101
        ------------------------------------------------------------
        Root Cause (first observed failure):
        [0]:
          rank      : 1 (local_rank: 1)
          exitcode  : -6 (pid: 102)
          traceback : Signal 6 (SIGABRT) received by PID 102
        """
    )
    assert distributed._failure(tail, 1) == "a process was killed by SIGABRT"
    assert distributed._failure("traceback : Signal 15 (SIGTERM) received by PID 7", 1).endswith("SIGTERM")
