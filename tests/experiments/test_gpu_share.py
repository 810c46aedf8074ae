"""The shared-GPU mode (tutor/experiments/gpu_share.py): each run's cap on GPU memory, what is
free, and what the learner is told. CPU tests stand torch.cuda in; the gpu tests use the card."""

from __future__ import annotations

import pytest
import torch

from tutor.experiments import gpu_share
from tutor.experiments.devices import Device

GIB = 1 << 30
H100 = Device("cuda", 0, "NVIDIA H100 80GB HBM3", total_memory=80 * GIB, free_memory=60 * GIB, capability=(9, 0))


@pytest.fixture
def fake_cuda(monkeypatch):
    """A card of 80 GiB with 60 GiB free, 1 GiB of it reserved by this process."""
    fractions: list[float] = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: (60 * GIB, 80 * GIB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda index=0: 1 * GIB)

    class Props:
        total_memory = 80 * GIB

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: Props())
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda index=0: 1.0, raising=False)
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda fraction, index=0: fractions.append(fraction)
    )
    return fractions


@pytest.fixture
def fake_mps(monkeypatch):
    """Apple silicon with a 16 GiB working set; the fractions set, in order."""
    fractions: list[float] = []
    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 16 * GIB)
    monkeypatch.setattr(torch.mps, "set_per_process_memory_fraction", fractions.append)
    monkeypatch.setattr(gpu_share, "_mps_fraction", None)
    monkeypatch.delenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", raising=False)
    return fractions


@pytest.mark.parametrize(
    "gpu,host,cap,source",
    [
        (None, None, None, "GPUTUTOR_MEMORY_MB"),
        ("4096", None, 4096, "GPUTUTOR_GPU_MEMORY_MB"),
        (None, "2048", 2048, "GPUTUTOR_MEMORY_MB"),  # the host cap caps the GPU too, unless told otherwise
        ("4096", "2048", 4096, "GPUTUTOR_GPU_MEMORY_MB"),
        ("lots", None, None, "GPUTUTOR_MEMORY_MB"),
        ("²", None, None, "GPUTUTOR_MEMORY_MB"),
        ("0", None, None, "GPUTUTOR_MEMORY_MB"),
    ],
)
def test_the_cap_comes_from_the_gpu_setting_else_the_host_one(monkeypatch, gpu, host, cap, source):
    for name, value in ((gpu_share.GPU_MEMORY_ENV, gpu), (gpu_share.HOST_MEMORY_ENV, host)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert gpu_share.cap_mib() == cap
    assert gpu_share.cap_source() == source


def test_available_is_the_free_memory_not_the_cards_total(fake_cuda, monkeypatch):
    monkeypatch.delenv(gpu_share.GPU_MEMORY_ENV, raising=False)
    assert gpu_share.available("cuda", 0) == 60 * GIB  # other processes hold the other 20
    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "4096")
    assert gpu_share.available("cuda", 0) == 3 * GIB  # the cap, less the 1 GiB this process holds
    assert gpu_share.available("cpu") is None


def test_a_capped_run_sets_the_fraction_of_the_card_and_restores_it(fake_cuda, monkeypatch):
    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "8192")
    with gpu_share.capped(H100) as cap:
        assert cap == 8 * GIB
        assert fake_cuda == [pytest.approx(0.1)]  # 8 of 80 GiB
    assert fake_cuda == [pytest.approx(0.1), 1.0]


def test_a_limit_set_inside_a_capped_mps_run_goes_back_to_the_cap_not_the_default(fake_mps, monkeypatch):
    from tutor.experiments.oom_recovery import MemoryLimit

    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "4096")
    with gpu_share.capped(Device("mps", None, "Apple M2 (MPS)")):
        assert fake_mps == [0.25] and gpu_share.current_mps_fraction() == 0.25  # 4 of 16 GiB
        limit = MemoryLimit(torch.device("mps"), "mps.set_per_process_memory_fraction")
        limit.set(1 * GIB)
        limit.restore()
        assert fake_mps == [0.25, 1 / 16, 0.25]  # torch.mps has no getter: the cap is remembered
    assert fake_mps[-1] == 1.7 and gpu_share.current_mps_fraction() == 1.7  # PyTorch's default again


def test_without_a_cap_or_a_gpu_nothing_is_set(fake_cuda, monkeypatch):
    monkeypatch.delenv(gpu_share.GPU_MEMORY_ENV, raising=False)
    with gpu_share.capped(H100) as cap:
        assert cap is None
    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "8192")
    with gpu_share.capped(Device("cpu", None, "CPU")) as cap:
        assert cap is None
    assert fake_cuda == []


def test_the_device_line_says_what_is_free_what_others_hold_and_the_cap():
    assert H100.sharing() == "60.0 of 80.0 GiB free (20.0 GiB held by other processes or the driver)"
    assert H100.sharing(4096, "GPUTUTOR_GPU_MEMORY_MB").endswith(
        "; each run capped at 4,096 MiB (GPUTUTOR_GPU_MEMORY_MB)"
    )
    assert Device("cpu", None, "CPU").sharing(4096, "x") is None


def test_gpu_memory_mb_in_settings_reaches_the_engine_through_the_environment(tmp_path, monkeypatch, capsys):
    import os

    from tutor.cli import main

    monkeypatch.delenv(gpu_share.GPU_MEMORY_ENV, raising=False)
    (tmp_path / "settings.toml").write_text("gpu_memory_mb = 3000\n", encoding="utf-8")
    assert main(["list"]) == 0
    assert os.environ[gpu_share.GPU_MEMORY_ENV] == "3000"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_run_past_the_cap_fails_in_one_sentence_and_the_next_run_works(tmp_path, monkeypatch):
    from tutor.experiments.engine import Engine

    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "256")
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        big = {"width": 8192, "layers": 4, "batch_size": 64}  # 1 GiB of weights
        *_, ended = engine.run("memory-ledger", big, "cuda", cancelled=lambda: False)
        assert ended[:2] == ("ended", "failed")
        assert (
            ended[2].startswith("Out of GPU memory") and "GPUTUTOR_GPU_MEMORY_MB caps each run at 256 MiB" in ended[2]
        )
        assert "over its limit of" in ended[2] and "other processes" not in ended[2]  # the cap, not the card
        small = {"width": 256, "layers": 2, "batch_size": 64}
        assert list(engine.run("memory-ledger", small, "cuda", cancelled=lambda: False))[-1][:2] == (
            "ended",
            "finished",
        )
    finally:
        engine.close()
