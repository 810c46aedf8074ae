"""An exercise on a GPU the class shares: the program is held to the shared-GPU cap
(tutor/experiments/gpu_share.py) in its own process and in every rank, and running out of GPU
memory is said as that, not as the exercise's (host) memory limit."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tutor.exercises import child
from tutor.exercises.sandbox import run_code
from tutor.experiments import devices

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")
GIB = 1 << 30


@pytest.fixture
def fake_gpu(monkeypatch):
    """Two CUDA cards of 80 GiB and an MPS device of 16 GiB, as far as the child can tell:
    returns the fractions set, as (kind, fraction, index)."""
    import torch

    set_fractions: list[tuple[str, float, int | None]] = []
    monkeypatch.setattr(
        devices,
        "resolve",
        lambda requested=None: devices.Device("cuda", int((requested or "cuda:0").partition(":")[2] or 0), "fake GPU"),
    )
    monkeypatch.setattr(devices, "start_up", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "device", lambda index: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=80 * GIB))
    monkeypatch.setattr(
        torch.cuda,
        "set_per_process_memory_fraction",
        lambda fraction, index=None: set_fractions.append(("cuda", fraction, index)),
    )
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 16 * GIB)
    monkeypatch.setattr(
        torch.mps, "set_per_process_memory_fraction", lambda fraction: set_fractions.append(("mps", fraction, None))
    )
    return set_fractions


def run_child(tmp_path: Path, monkeypatch, **env: str) -> None:
    """child.main on a program that does nothing, in this process (no host limit, no watcher),
    with `env` as a rank's variables."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "solution.py").write_text("x = 1\n", encoding="utf-8")
    monkeypatch.setattr(child, "watch_parent", lambda owner, launched: None)
    monkeypatch.setattr(child, "limit_memory", lambda megabytes: None)
    monkeypatch.setattr(child, "_enter_rank", lambda rank: None)  # it would point this process's stderr at stdout
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("GPUTUTOR_SANDBOX_MEMORY_MB", "1024")
    for name in ("GPUTUTOR_OBSERVE", "GPUTUTOR_PROBES", "GPUTUTOR_LAUNCH", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    child.main(["child", "solution.py"])


def test_an_exercise_is_held_to_the_cap_on_the_cuda_card_it_uses(tmp_path, monkeypatch, fake_gpu):
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    run_child(tmp_path, monkeypatch)
    assert fake_gpu == [("cuda", 4096 / (80 * 1024), 0)]


def test_each_rank_of_a_launch_is_held_to_the_cap_on_its_own_card(tmp_path, monkeypatch, fake_gpu):
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    monkeypatch.setattr(child, "launched_rank", lambda: 1)
    run_child(tmp_path, monkeypatch, LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
    assert fake_gpu == [("cuda", 4096 / (80 * 1024), 1)]


def test_on_mps_the_cap_is_a_fraction_of_the_working_set_and_the_host_cap_stands_in(tmp_path, monkeypatch, fake_gpu):
    monkeypatch.setattr(devices, "resolve", lambda requested=None: devices.Device("mps", None, "fake Apple GPU"))
    monkeypatch.setenv("GPUTUTOR_MEMORY_MB", "4096")  # no GPU cap of its own: gpu_share falls back to this
    run_child(tmp_path, monkeypatch)
    assert fake_gpu == [("mps", 0.25, None)]


def test_without_a_cap_or_on_the_cpu_nothing_is_set(tmp_path, monkeypatch, fake_gpu):
    run_child(tmp_path, monkeypatch)
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    monkeypatch.setattr(devices, "resolve", lambda requested=None: devices.Device("cpu", None, "fake CPU"))
    run_child(tmp_path, monkeypatch)
    assert fake_gpu == []


def test_the_cap_reaches_the_exercises_process(tmp_path, monkeypatch):
    """settings.toml's gpu_memory_mb is put in the environment at start-up (tutor/cli); the child inherits it."""
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    r = run_code("import os\nprint(os.environ['GPUTUTOR_GPU_MEMORY_MB'])\n", tmp_path, timeout=60, memory_mb=1024)
    assert r.ok and r.output.split() == ["4096"], r.output


CUDA_OOM = (
    "import torch\n"
    "raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total '\n"
    "                             'capacity of 79.19 GiB of which 70.00 GiB is free.')\n"
)


def test_running_out_of_gpu_memory_is_not_blamed_on_the_exercises_memory_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "4096")
    r = run_code(CUDA_OOM, tmp_path, timeout=60, memory_mb=1024)
    assert r.problem() == "the program ran out of GPU memory (this tutor caps each run at 4,096 MiB on the GPU)"
    assert r.memory_error and r.gpu_memory_error and r.error_line == 2, r.output
    mps = "raise RuntimeError('MPS backend out of memory (MPS allocated: 9.00 GiB, other allocations: 0 bytes)')\n"
    monkeypatch.delenv("GPUTUTOR_GPU_MEMORY_MB")
    r = run_code(mps, tmp_path, timeout=60, memory_mb=1024)
    assert r.problem() == "the program ran out of GPU memory"
    host = run_code("data = bytearray(3 * 10**9)\n", tmp_path, timeout=60, memory_mb=512)
    assert not host.gpu_memory_error and "exercise's memory limit" in host.problem()


# ---------------------------------------------------------------- on a real GPU


CAPPED = (
    "import torch\n"
    "x = torch.empty(32 * 2**20, dtype=torch.uint8, device='cuda')  # 32 MiB: fits in 256\n"
    "print('fits', flush=True)\n"
    "y = torch.empty(1024 * 2**20, dtype=torch.uint8, device='cuda')  # 1 GiB: does not\n"
)


@pytest.mark.gpu
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="CUDA on Linux")
@pytest.mark.parametrize("nproc", [None, 1], ids=["one process", "a rank of a launch"])
def test_on_a_real_card_the_program_stops_at_the_cap(tmp_path, monkeypatch, nproc):
    """The card may be shared and nearly full: the 1 GiB allocation fails either way, but only
    a per-process limit makes CUDA's message say what it allows."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "256")
    r = run_code(CAPPED, tmp_path, timeout=300, memory_mb=4096, nproc=nproc)
    assert "fits" in r.output and r.gpu_memory_error and r.error_line == 4, r.output
    assert "allowed" in (r.error_message or ""), r.error_message  # "...; 256.00 MiB allowed; ..."
    assert "this tutor caps each run at 256 MiB on the GPU" in r.problem()
