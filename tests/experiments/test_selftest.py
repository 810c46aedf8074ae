"""`gpututor doctor --selftest`: every device path, for real, one line each."""

from __future__ import annotations

import json
import re
import sys

import pytest
import torch

from tutor.cli import main
from tutor.experiments import gpu_share, selftest
from tutor.experiments.devices import Device

MIB, GIB = 1 << 20, 1 << 30

CPU_PATHS = {
    "device detection",
    "synchronised timing",
    "autocast + GradScaler step",
    "checkpoint: save on the device, load on the CPU",
    "torchrun: processes that all-reduce",
    "gpututor inspect on a script",
}


def test_on_this_cpu_each_path_that_applies_runs_for_real_and_the_rest_say_why_not(capsys):
    assert main(["doctor", "--selftest", "--json", "--device", "cpu"]) == 0
    report = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in report["checks"]}
    assert [c["name"] for c in report["checks"]] == [name for name, _ in selftest.CHECKS]
    assert report["failed"] == 0
    for name in CPU_PATHS | ({"out of memory, caught under a cap"} if sys.platform.startswith("linux") else set()):
        assert checks[name]["status"] == "ok", checks[name]
    for check in checks.values():
        assert check["status"] in ("ok", "n/a") and check["detail"]  # n/a says why: never a silent pass
    assert checks["pinned non-blocking copy"]["status"] == "n/a"
    assert (
        "2 processes under torchrun, gloo on cpu: all-reduce gave 3 on every rank"
        in checks["torchrun: processes that all-reduce"]["detail"]
    )
    assert checks["gpututor inspect on a script"]["detail"].startswith("char_gpt.py on cpu: 4 steps clocked")


def test_a_failing_check_is_said_with_its_reason_and_the_exit_code_is_1(monkeypatch, capsys):
    def broken(dev):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(selftest, "CHECKS", [("synchronised timing", broken), *selftest.CHECKS[2:4]])
    assert main(["doctor", "--selftest", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "failed synchronised timing: RuntimeError: CUDA error: an illegal memory" in out
    assert "1 failed" in out


def test_an_unavailable_device_is_said_not_tracebacked(capsys):
    assert main(["doctor", "--selftest", "--device", "cuda:7"]) == 2
    assert "gpututor:" in capsys.readouterr().err


class FakeCache:
    """A caching allocator's arithmetic: freed blocks stay cached and count as reserved; past the
    limit it frees the cache and retries (c10's release_cached_blocks, then alloc_block)."""

    def __init__(self, cached: int, split_free: int = 0) -> None:
        self.used, self.cached, self.limit, self.fractions = 0, cached, None, []
        # Free bytes inside a block a live tensor holds: reserved, kept by empty_cache, reusable.
        self.split_free = split_free

    def reserved(self, index=0) -> int:
        return self.used + self.cached + self.split_free

    def empty_cache(self) -> None:
        self.cached = 0

    def take(self, nbytes: int, error: type[Exception]) -> None:
        if nbytes <= self.split_free:  # fits in the free split: no new memory, no limit to meet
            self.split_free -= nbytes
            self.used += nbytes
            return
        if self.limit is not None and self.reserved() + nbytes > self.limit:
            self.empty_cache()
            if self.used + nbytes > self.limit:
                raise error(f"out of memory. Tried to allocate {nbytes / MIB:.2f} MiB")
        self.used += nbytes


@pytest.fixture
def fake_cuda(monkeypatch):
    """An 80 GiB card on which earlier GPU tests in this process left 300 MiB cached."""
    cache = FakeCache(300 * MIB)
    real_empty = torch.empty

    class Props:
        total_memory = 80 * GIB

    def set_fraction(fraction, index=0):
        cache.fractions.append(fraction)
        cache.limit = fraction * Props.total_memory

    def empty(*size, device=None, **kw):
        if str(device).startswith("cuda"):
            cache.take(size[0], lambda text: torch.cuda.OutOfMemoryError("CUDA " + text))
            return real_empty(0)
        return real_empty(*size, device=device, **kw)

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: Props())
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda index=0: 1.0, raising=False)
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", set_fraction)
    monkeypatch.setattr(torch.cuda, "memory_reserved", cache.reserved)
    monkeypatch.setattr(torch.cuda, "empty_cache", cache.empty_cache)
    monkeypatch.setattr(torch, "empty", empty)
    return cache


def test_the_cuda_cap_holds_though_freed_memory_was_cached(fake_cuda):
    said = selftest._caught_oom(Device("cuda", 0, "NVIDIA H100 80GB HBM3"))
    assert said.startswith("512 MiB under a 256 MiB cap: caught: “Out of GPU memory: an allocation of 512 MiB")
    assert fake_cuda.fractions == [pytest.approx(256 * MIB / (80 * GIB)), 1.0]  # restored


def test_the_cuda_cap_holds_though_a_live_tensor_s_block_has_a_large_free_split(fake_cuda):
    fake_cuda.split_free = 600 * MIB  # a small live tensor in a 600 MiB block the allocator split
    said = selftest._caught_oom(Device("cuda", 0, "NVIDIA H100 80GB HBM3"))
    assert said.startswith("1,112 MiB under a 256 MiB cap: caught: “Out of GPU memory: an allocation of 1,112 MiB")
    assert fake_cuda.fractions == [pytest.approx(856 * MIB / (80 * GIB)), 1.0]


@pytest.fixture
def fake_mps(monkeypatch):
    """16 GiB of working set, 300 MiB of it cached by earlier tests; torch.ones on "mps" allocates."""
    cache = FakeCache(300 * MIB)
    real_ones = torch.ones

    def set_fraction(fraction):
        cache.fractions.append(fraction)
        cache.limit = fraction * 16 * GIB

    def ones(*size, device=None, **kw):
        if device == "mps":
            cache.take(size[0], lambda text: RuntimeError("MPS backend " + text))
            return real_ones(0)
        return real_ones(*size, device=device, **kw)

    monkeypatch.setattr(torch.mps, "recommended_max_memory", lambda: 16 * GIB)
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", cache.reserved)
    monkeypatch.setattr(torch.mps, "set_per_process_memory_fraction", set_fraction)
    monkeypatch.setattr(torch.mps, "empty_cache", cache.empty_cache)
    monkeypatch.setattr(torch.mps, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "ones", ones)
    monkeypatch.setattr(gpu_share, "_mps_fraction", None)
    monkeypatch.delenv("PYTORCH_MPS_HIGH_WATERMARK_RATIO", raising=False)
    return cache


MPS = Device("mps", None, "Apple M2 (MPS)")


def test_the_mps_cap_holds_though_freed_memory_was_cached_and_the_class_cap_comes_back(fake_mps, monkeypatch):
    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "4096")
    with gpu_share.capped(MPS):
        said = selftest._caught_mps_oom(MPS)
    assert said.startswith("1 GiB under a 256 MiB cap: caught: “Out of GPU memory: an allocation of 1,024 MiB")
    assert fake_mps.fractions == [0.25, 1 / 64, 0.25, 1.7]  # the class's 4 of 16 GiB, then PyTorch's default


def test_an_mps_error_that_is_not_out_of_memory_is_no_proof_the_cap_held(fake_mps, monkeypatch):
    def ones(*size, **kw):
        raise RuntimeError("MPS does not support this operation")

    monkeypatch.setattr(torch, "ones", ones)
    with pytest.raises(AssertionError, match="raised RuntimeError: MPS does not support"):
        selftest._caught_mps_oom(MPS)


def test_the_nvml_line_says_what_a_noisy_run_would_say_of_the_gpu(monkeypatch):
    from tutor.measurement import noise

    gpu = Device("cuda", 0, "NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    seen = noise.GpuReading(others=2, others_mib=3072.0, utilization=None, throttle=("held to its power limit",))
    monkeypatch.setattr(noise, "read", lambda dev: noise.Reading(0.0, None, None, 0.0, None, seen))
    assert selftest._gpu_reading(gpu) == (
        "2 other process(es) hold 3,072 MiB; no utilisation (a MIG slice has none); clocks held to its power limit"
    )
    monkeypatch.setattr(noise, "read", lambda dev: noise.Reading(0.0, None, None, 0.0, None, None))
    with pytest.raises(selftest.NotHere, match="NVML did not answer"):  # best effort: never a failure
        selftest._gpu_reading(gpu)


@pytest.mark.gpu
def test_every_path_passes_on_this_accelerator(accelerator, capsys):
    assert main(["doctor", "--selftest", "--json", "--device", accelerator]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert all(c["status"] != "failed" for c in checks.values()), checks
    if accelerator == "cuda":  # every check applies to CUDA (NVML may be absent from a container)
        assert all(c["status"] == "ok" for name, c in checks.items() if "NVML" not in name), checks
        assert "over its limit of" in checks["out of memory, caught under a cap"]["detail"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_cuda_cap_holds_with_freed_memory_cached_on_the_card():
    x = torch.empty(300 * MIB, dtype=torch.uint8, device="cuda")
    del x  # cached by the allocator: still reserved
    assert torch.cuda.memory_reserved(0) >= 300 * MIB
    said = selftest._caught_oom(Device("cuda", 0, torch.cuda.get_device_name(0)))
    # 512 MiB, plus what live tensors of earlier tests in this process still hold reserved
    asked = re.match(
        r"([\d,]+) MiB under a 256 MiB cap: caught: “Out of GPU memory: an allocation of ([\d,]+) MiB", said
    )
    assert asked and asked[1] == asked[2] and int(asked[1].replace(",", "")) >= 512, said
    assert "over its limit of" in said
