"""oom-recovery: a real out-of-memory error under a limit the run sets itself, caught, cleaned up, recovered.

On the CPU the run lowers RLIMIT_DATA in a process of its own; run_here does it in this (pytest)
process, as the CUDA run does with its memory fraction, so those tests check that it is back."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments import devices, oom_recovery
from tutor.experiments.events import Note, Started, Step, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.specs.oom_recovery import OomRecoveryParams

QUICK = {"limit_mb": 64, "width": 256, "layers": 2}
linux = pytest.mark.skipif(
    not sys.platform.startswith("linux") or oom_recovery.limit_method(torch.device("cpu")) != "RLIMIT_DATA",
    reason="the CPU limit is RLIMIT_DATA, read through /proc (Linux)",
)


def rlimit():
    import resource

    return resource.getrlimit(resource.RLIMIT_DATA)


def run(device="cpu", **params):
    return run_experiment("oom-recovery", {**QUICK, **params}, device)


@pytest.fixture(scope="module")
def cpu_run():
    before = rlimit()
    events, m = run()
    return events, m, before, rlimit()


def test_every_declared_metric_is_reported(cpu_run):
    _, m, _, _ = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("oom-recovery").metrics)
    assert m["device"] == "cpu" and m["limit_bytes"] == 64 * 2**20


@linux
def test_the_limit_is_restored_after_the_run(cpu_run):
    _, _, before, after = cpu_run
    assert after == before


@linux
def test_the_too_big_batch_really_runs_out_of_memory(cpu_run):
    events, m, _, _ = cpu_run
    assert m["method"] == "RLIMIT_DATA"
    assert m["oom"] is True
    assert m["error_type"] == "RuntimeError" and "DefaultCPUAllocator: can't allocate memory" in m["error_message"]
    assert m["predicted_bytes"] > m["limit_bytes"]
    assert any(isinstance(e, Note) and "can't allocate memory" in e.text for e in events)


def test_the_formula(cpu_run):
    _, m, _, _ = cpu_run
    params = 2 * (256 * 256 + 256)
    per_sample = 3 * 256 * 4  # (layers + 1) tensors of width floats: the input and each ReLU's output
    assert m["fits_batch"] == (64 * 2**20 - 16 * params) // per_sample
    assert m["batch_size"] == 2 * m["fits_batch"]
    assert m["predicted_bytes"] == 16 * params + m["batch_size"] * per_sample


@linux
def test_memory_is_released_and_the_batch_recovers_with_accumulation(cpu_run):
    events, m, _, _ = cpu_run
    assert m["released"] is True
    assert m["recovered"] is True and m["micro_batches"] >= 2
    table = next(e for e in events if isinstance(e, Table))
    assert table.rows[0][0] == "one step" and table.rows[0][3] == "out of memory"
    assert table.rows[-1][3] == "trained" and table.rows[-1][0].startswith(f"{m['micro_batches']} x ")
    steps = [e for e in events if isinstance(e, Step)]
    assert steps[-1].step == steps[-1].total == m["micro_batches"]


def test_tables_fit_80_columns(cpu_run):
    events, _, _, _ = cpu_run
    for table in (e for e in events if isinstance(e, Table)):
        widths = [max(len(str(c)) for c in col) for col in zip(table.columns, *table.rows)]
        assert sum(widths) + 3 * len(widths) + 1 <= 80, table.title


def in_process(**params):
    """The experiment in this (pytest) process, as the CUDA run does; on the CPU `run` would
    start a process of its own."""
    return oom_recovery.run_here(OomRecoveryParams(**{**QUICK, **params}), devices.resolve("cpu"))


def fake_oom_for_big_batches(monkeypatch, seen):
    """torch.randn raises the CPU allocator's error for the too-big batch (a real one in this
    process depends on what its malloc already holds), recording the limit at that moment."""
    real_randn = torch.randn

    def randn(*shape, **kw):
        if shape and shape[0] > 10_000:  # warm-up and probe use 8 rows, the micro-batches fewer than 10,000
            seen.append(rlimit())
            raise RuntimeError(
                "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
                "memory: you tried to allocate 43335680 bytes."
            )
        return real_randn(*shape, **kw)

    monkeypatch.setattr(torch, "randn", randn)


@linux
def test_the_cpu_run_leaves_this_process_alone_even_when_cancelled():
    before = rlimit()
    gen = experiments.start("oom-recovery", QUICK, device="cpu")
    assert isinstance(next(gen), Started)
    gen.close()  # kills the measuring process
    assert rlimit() == before


@linux
def test_in_process_the_limit_is_restored_when_cancelled(monkeypatch):
    before = rlimit()
    gen = in_process()
    assert isinstance(next(gen), Started)
    gen.close()  # cancelled before the limit was set
    assert rlimit() == before

    seen: list = []
    fake_oom_for_big_batches(monkeypatch, seen)
    gen = in_process(batch_size=20_000)
    for event in gen:  # the first Step comes from the recovery, while the limit is lowered
        if isinstance(event, Step):
            break
    assert isinstance(event, Step) and seen and seen[0][0] != before[0]
    assert rlimit()[0] != before[0]
    gen.close()  # cancelled inside the window
    assert rlimit() == before


@linux
def test_in_process_the_limit_is_restored_after_an_error(monkeypatch):
    before = rlimit()
    seen = []
    real_randn = torch.randn

    def randn(*shape, **kw):
        if shape and shape[0] > 8:  # the too-big batch, inside the window (warm-up and probe use 8)
            seen.append(rlimit())
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return real_randn(*shape, **kw)

    monkeypatch.setattr(torch, "randn", randn)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        list(in_process())
    assert seen and seen[0][0] != before[0]  # the error came while the limit was lowered
    assert rlimit() == before


@linux
def test_in_process_a_caught_out_of_memory_error_is_recovered_from(monkeypatch):
    before = rlimit()
    fake_oom_for_big_batches(monkeypatch, [])
    events = list(in_process(batch_size=20_000))
    assert rlimit() == before
    m = events[-1].metrics
    assert m["oom"] is True and m["error_type"] == "RuntimeError" and m["released"] is True
    assert m["recovered"] is True and m["micro_batches"] >= 2


def test_errors_in_the_measuring_process_reach_the_caller():
    line = json.dumps({"event": "error", "message": "RuntimeError: boom"})
    with pytest.raises(RuntimeError, match="boom"):
        list(oom_recovery.child_events([sys.executable, "-c", f"print({line!r})"]))
    with pytest.raises(RuntimeError, match="exited with code 3: going"):
        list(
            oom_recovery.child_events(
                [sys.executable, "-c", "import sys; print('going', file=sys.stderr); sys.exit(3)"]
            )
        )
    note = json.dumps({"event": "note", "text": "hello", "level": "info"})
    assert list(oom_recovery.child_events([sys.executable, "-c", f"print('noise'); print({note!r})"])) == [
        Note("hello")
    ]


@linux
def test_a_model_whose_fixed_part_does_not_fit_cannot_be_split():
    before = rlimit()
    events, m = run(width=2048, layers=2)  # 8.4M parameters x 16 B = 128 MiB, twice the limit
    assert rlimit() == before
    assert m["fits_batch"] == 0 and m["batch_size"] == 1 and m["oom"] is True
    assert m["recovered"] is None and m["micro_batches"] is None
    assert any(isinstance(e, Note) and "Not even batch 1 fits" in e.text for e in events)


def test_without_a_way_to_limit_memory_nothing_is_tried(monkeypatch):
    before = rlimit()
    monkeypatch.setattr(oom_recovery, "limit_method", lambda device: "none")
    events, m = run()
    assert rlimit() == before
    assert m["method"] == "none" and m["oom"] is False and m["recovered"] is None and m["released"] is None
    assert m["error_type"] is None and m["predicted_bytes"] > m["limit_bytes"]
    assert any(isinstance(e, Note) and e.level == "warning" and "nothing was tried" in e.text for e in events)


def test_out_of_memory_errors_are_told_apart():
    assert oom_recovery.is_oom(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't "
            "allocate memory: you tried to allocate 8 bytes."
        )
    )
    assert oom_recovery.is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert oom_recovery.is_oom(MemoryError())
    assert not oom_recovery.is_oom(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_runs_out_of_memory_under_the_fraction_and_recovers():
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    before = get(0) if get else None
    _, m = run("cuda")
    assert m["method"] == "set_per_process_memory_fraction"
    assert m["oom"] is True and m["error_type"] == "OutOfMemoryError"
    assert m["released"] is True and m["recovered"] is True and m["micro_batches"] >= 2
    if get:
        assert get(0) == before
