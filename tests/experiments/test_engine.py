"""The engine process: runs experiments for the TUI, survives what they do, never outlives it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from tutor.experiments.engine import Engine, EngineDied
from tutor.experiments.events import Finished, Started


@pytest.fixture
def engine(tmp_path):
    eng = Engine(log_path=str(tmp_path / "engine.log"))
    yield eng
    eng.close()


def test_detects_this_machine(engine):
    found, chosen, problem = engine.detect("cpu")
    assert chosen.kind == "cpu" and problem is None
    assert found[-1].kind == "cpu"
    _, chosen, problem = engine.detect("cuda:7")
    assert problem is not None and "cuda" in problem


def test_runs_the_loader_path_with_worker_processes(engine):
    # The engine must be able to start DataLoader workers (a daemon process could not).
    params = {"epochs": 1, "data_path": "loader", "num_workers": 1, "train_samples": 256, "test_samples": 128}
    messages = list(engine.run("train", params, "cpu", cancelled=lambda: False))
    assert messages[-1] == ("ended", "finished", None), messages[-1]
    events = [m[1] for m in messages if m[0] == "event"]
    assert isinstance(events[0], Started)
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.metrics["data_path"] == "loader"


def test_a_failure_becomes_a_sentence(engine):
    messages = list(engine.run("train", {"epochs": "many"}, "cpu", cancelled=lambda: False))
    status, error = messages[-1][1:]
    assert status == "failed" and "epochs" in error


def test_cancel_stops_at_the_next_event(engine):
    seen = []
    stop = threading.Event()
    for message in engine.run("train", {"epochs": 20, "batch_size": 16}, "cpu", cancelled=stop.is_set):
        seen.append(message)
        if message[0] == "event" and type(message[1]).__name__ == "Step":
            stop.set()
    assert seen[-1][:2] == ("ended", "cancelled")
    # The engine is still there for the next run.
    assert list(engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: False))[-1][1] == "finished"


def test_a_killed_engine_is_reported_and_replaced(engine):
    engine.detect("cpu")
    runs = engine.run("train", {"epochs": 20, "batch_size": 16}, "cpu", cancelled=lambda: False)
    with pytest.raises(EngineDied, match="killed"):
        for message in runs:
            if message[0] == "event" and type(message[1]).__name__ == "Step":
                os.kill(engine.pid, signal.SIGKILL)
    # The next request starts a fresh engine.
    assert engine.detect("cpu")[1].kind == "cpu"


def test_close_leaves_no_process(engine):
    engine.detect("cpu")
    pid = engine.pid
    engine.close()
    assert engine.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_closing_mid_run_stops_the_dataloader_workers_too(engine):
    # Quitting the app while DataLoader workers run: the engine is killed after a short wait,
    # and its workers, in the engine's process group, must not be left running on their own.
    import time

    runs = engine.run("data-bottleneck", {"batches": 200, "workers": 2}, "cpu", cancelled=lambda: False)
    for message in runs:
        if message[0] == "event" and getattr(message[1], "label", "") == "2 workers":
            break
    group = engine.pid
    assert os.getpgid(group) == group  # the engine leads a group of its own
    engine.close(timeout=0.01)  # too short to shut the workers down politely: they are killed
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("processes of the engine's group are still running")


def test_resource_tracker_warning_is_filtered_without_dropping_the_users_filters(monkeypatch):
    from tutor.experiments.engine import _quiet_resource_tracker

    monkeypatch.setenv("PYTHONWARNINGS", "error::DeprecationWarning")
    _quiet_resource_tracker()
    _quiet_resource_tracker()  # idempotent
    assert os.environ["PYTHONWARNINGS"] == "error::DeprecationWarning,ignore:resource_tracker:UserWarning"


SLOW_PACK = """
import time
from tutor.experiments.events import Finished, Started
from tutor.experiments import Experiment, Params


def run(p, dev):
    yield Started("slow", dev.torch_device, dev.name, "none")
    time.sleep(60)  # one long step with no event: a cancel cannot be seen in here
    yield Finished({"done": 1.0})


EXPERIMENTS = [Experiment(name="slow", title="Slow", module="", params=Params,
                          metrics={"done": "1"}, run=run)]
"""


def test_a_run_busy_between_events_is_stopped_soon_after_a_cancel(tmp_path, monkeypatch):
    import time

    from tutor.experiments import packs

    pack = tmp_path / "experiments.py"
    pack.write_text(SLOW_PACK, encoding="utf-8")
    monkeypatch.setenv(packs.ENV, str(pack))  # the engine loads it, as for a lesson pack
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        asked: list[float] = []
        for message in engine.run("slow", {}, "cpu", cancelled=lambda: bool(asked)):
            if message[0] == "event" and isinstance(message[1], Started):
                asked.append(time.monotonic())
            if message[0] == "ended":
                break  # as the TUI's reader does: it stops reading at the end
        assert message == ("ended", "cancelled", None)
        assert time.monotonic() - asked[0] < 5  # not the 60 s the step would have taken
        # A fresh engine was started at once (not at the next run), and runs the next one.
        assert engine.pid is not None
        assert list(engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: False))[-1][1] == "finished"
    finally:
        engine.close()


SETUP_PACK = """
import multiprocessing
from tutor.experiments.events import Finished, Started
from tutor.experiments import Experiment, Params


def run(p, dev):
    import torch

    yield Started("setup", dev.torch_device, dev.name, "none")
    yield Finished({"start_method": multiprocessing.get_start_method(), "threads": torch.get_num_threads()})


EXPERIMENTS = [Experiment(name="setup", title="Setup", module="", params=Params,
                          metrics={"start_method": "how children start", "threads": "intra-op threads"}, run=run)]
"""


def test_the_engine_trains_as_an_in_process_run_does(tmp_path, monkeypatch):
    # Same thread policy, and DataLoader workers started as `gpututor run` starts them: a process
    # started by spawn spawns its children by default, and every worker then imported torch afresh
    # (data-bottleneck: 14 s in the TUI against 3 s headless, issue 24).
    import multiprocessing

    from tutor import threads
    from tutor.experiments import packs

    pack = tmp_path / "experiments.py"
    pack.write_text(SETUP_PACK, encoding="utf-8")
    monkeypatch.setenv(packs.ENV, str(pack))
    monkeypatch.setenv("GPUTUTOR_THREADS", "1")
    for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # the policy decides, as for a learner
        monkeypatch.delenv(key, raising=False)
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        messages = list(engine.run("setup", {}, "cpu", cancelled=lambda: False))
    finally:
        engine.close()
    assert messages[-1] == ("ended", "finished", None), messages[-1]
    metrics = messages[-2][1].metrics
    assert metrics["threads"] == threads.training_threads() == 1
    in_process = multiprocessing.get_start_method()  # never set by the tutor: the platform's default
    assert metrics["start_method"] == in_process == multiprocessing.get_all_start_methods()[0]


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="the memory budget is Linux's RLIMIT_DATA")
def test_a_run_over_the_memory_budget_fails_with_a_sentence_and_the_next_run_works(tmp_path, monkeypatch):
    from tutor.experiments.engine import MEMORY_ENV

    monkeypatch.setenv(MEMORY_ENV, "100")
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        # 4 layers of 8192 x 8192 float32 weights: 1 GiB, ten times the budget.
        big = {"width": 8192, "layers": 4, "batch_size": 64}
        *_, ended = engine.run("memory-ledger", big, "cpu", cancelled=lambda: False)
        assert ended[:2] == ("ended", "failed")
        assert ended[2].startswith("Out of memory: an allocation of ")
        assert "Try a smaller batch_size" in ended[2] and f"{MEMORY_ENV} limits each run to 100 MiB" in ended[2]
        # The lesson goes on: the same engine runs the next experiment, and the limit was per run.
        small = {"width": 256, "layers": 2, "batch_size": 64}
        assert list(engine.run("memory-ledger", small, "cpu", cancelled=lambda: False))[-1][:2] == ("ended", "finished")
    finally:
        engine.close()


def test_a_long_engine_log_is_rotated_when_an_engine_starts(tmp_path, monkeypatch):
    from tutor.experiments import engine as engine_module

    monkeypatch.setattr(engine_module, "LOG_KEEP_BYTES", 100)
    log = tmp_path / "engine.log"
    log.write_text("old line\n" * 50)
    engine = Engine(log_path=str(log))
    try:
        assert list(engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: False))[-1][1] == "finished"
    finally:
        engine.close()
    assert (tmp_path / "engine.log.1").read_text() == "old line\n" * 50  # one old copy kept
    assert not log.exists() or "old line" not in log.read_text()


GPU_OOM_PACK = """
from tutor.experiments.events import Started
from tutor.experiments import Experiment, Params


class OutOfMemoryError(RuntimeError):
    pass


def run(p, dev):
    yield Started("gpu-oom", dev.torch_device, dev.name, "none")
    raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                           "79.11 GiB of which 1.20 GiB is free.")


EXPERIMENTS = [Experiment(name="gpu-oom", title="GPU OOM", module="", params=Params, metrics={}, run=run)]
"""


def test_a_gpu_out_of_memory_is_not_blamed_on_the_host_memory_budget(tmp_path, monkeypatch):
    """GPUTUTOR_MEMORY_MB caps the host memory of a run: it is named for a host out-of-memory
    only (the card's own memory is another matter, and the sentence says what it had free)."""
    from tutor.experiments import packs
    from tutor.experiments.engine import MEMORY_ENV

    pack = tmp_path / "experiments.py"
    pack.write_text(GPU_OOM_PACK, encoding="utf-8")
    monkeypatch.setenv(packs.ENV, str(pack))
    monkeypatch.setenv(MEMORY_ENV, "2000")
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        *_, ended = engine.run("gpu-oom", {}, "cpu", cancelled=lambda: False)
        assert ended[:2] == ("ended", "failed")
        assert ended[2].startswith("Out of GPU memory: an allocation of 2,048 MiB failed with 1.20 GiB free")
        assert MEMORY_ENV not in ended[2]
    finally:
        engine.close()


def test_the_engine_empties_the_gpu_cache_when_a_run_ends(monkeypatch):
    import torch

    from tutor.experiments import engine as engine_module

    emptied = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append("cuda"))
    monkeypatch.setattr(
        torch._C, "_cuda_clearCublasWorkspaces", lambda: emptied.append("cublas workspaces"), raising=False
    )
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.mps, "empty_cache", lambda: emptied.append("mps"))
    engine_module.release_device_memory()
    assert emptied == ["cublas workspaces", "cuda", "mps"]  # the workspaces first: held, the cache keeps them


@pytest.mark.gpu
def test_a_finished_run_leaves_nothing_in_the_gpu_cache(accelerator):
    import torch

    from tutor import experiments
    from tutor.experiments import engine as engine_module

    if accelerator == "cuda":
        engine_module.release_device_memory()
        before = torch.cuda.memory_reserved()  # other tests' live tensors in this process, if any
    for _ in experiments.start("memory-ledger", {"width": 512, "layers": 2, "batch_size": 64}, accelerator):
        pass
    engine_module.release_device_memory()
    if accelerator == "cuda":  # cuBLAS's workspaces included: they live in the caching allocator
        assert torch.cuda.memory_reserved() <= before, f"{torch.cuda.memory_reserved() / 2**20:.1f} MiB still reserved"
    else:
        assert torch.mps.driver_allocated_memory() < 64 << 20  # the MPS driver keeps a small pool
