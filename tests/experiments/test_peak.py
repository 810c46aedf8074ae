"""The measured matmul peak (tutor/measurement/peak.py): a sweep of sizes, its cache per machine
(device, dtype, threads; reused while torch and the age match), and raising it on evidence.
Behaviour only: no test compares a timing with a fixed number."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time

import pytest
import torch

from tutor import cpu_load
from tutor.experiments import devices
from tutor.measurement import peak as matmul_peak


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Each test its own cache file, never the user's."""
    path = tmp_path / "cache" / "peaks.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: path)
    return path


@pytest.fixture
def cpu():
    return devices.resolve("cpu")


@pytest.fixture
def fake_sweep(monkeypatch, cpu):
    """A sweep that counts its calls and returns a made-up peak, for the cache's rules."""
    calls = []

    def sweep(dev, dtype, **kwargs):
        calls.append(dtype)
        name, threads = matmul_peak.identity(dev)
        now = time.time()
        return matmul_peak.Peak(
            tflops=0.5 + len(calls),
            dtype=dtype,
            device=name,
            threads=threads,
            torch=torch.__version__,
            measured_on=datetime.date.today().isoformat(),
            measured_at=now,
            best_size=512,
            sizes=(256, 512),
        )

    monkeypatch.setattr(matmul_peak, "sweep", sweep)
    return calls


def test_a_sweep_measures_each_size_with_the_threads_training_uses(cpu):
    p = matmul_peak.sweep(cpu, "float32", sizes=(64, 128), budget_s=30, repeats=2)
    assert p.tflops > 0 and p.dtype == "float32" and p.how == matmul_peak.SWEEP
    assert p.sizes == (64, 128) and p.sizes_cut == () and p.best_size in (64, 128)
    assert p.threads == torch.get_num_threads()  # the process's pool: what its training runs with
    assert p.device == f"cpu {cpu.name}" and p.torch == torch.__version__
    assert p.measured_on == datetime.date.today().isoformat()
    assert "64..128" in p.how_text()
    # its best size's typical block, kept beside the best: what an MFU's interval reaches to
    assert 0 < p.typical_tflops <= p.tflops and p.spread == (p.typical_tflops, p.tflops)
    assert matmul_peak.Peak.from_dict(p.as_dict()) == p
    assert matmul_peak.Peak.from_dict({**p.as_dict(), "typical_tflops": p.tflops * 2}).typical_tflops is None


def test_the_time_budget_cuts_sizes_but_always_measures_the_first(cpu):
    p = matmul_peak.sweep(cpu, "float32", sizes=(64, 128, 256), budget_s=0)
    assert p.sizes == (64,) and p.sizes_cut == (128, 256) and p.best_size == 64
    assert "128, 256 left out by the time limit" in p.how_text()


def test_on_a_gpu_a_size_that_would_not_fit_the_runs_memory_is_cut_and_said(monkeypatch):
    """A shared or capped GPU: once a size is measured, one whose three matrices need more than
    half the memory the run may still take is not started (the matrices sit on the CPU here)."""
    import types

    from tutor.experiments import gpu_share

    gpu = types.SimpleNamespace(kind="cuda", index=0, name="Fake GPU", torch_device="cpu")
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda index=0: types.SimpleNamespace(multi_processor_count=132)
    )
    room = 2 * 3 * 128 * 128 * 4 - 1  # three float32 128 x 128 matrices are just over half of it
    monkeypatch.setattr(gpu_share, "available", lambda kind, index=None: room)
    p = matmul_peak.sweep(gpu, "float32", sizes=(64, 128, 256), budget_s=600, repeats=1)
    assert p.sizes == (64,) and p.sizes_cut == (128, 256) and p.best_size == 64
    assert "128, 256 left out by the GPU memory free to this run" in p.how_text()
    assert matmul_peak.Peak.from_dict(p.as_dict()) == p  # kept in the cache with its reason


def test_running_out_of_memory_after_the_first_size_ends_the_sweep_not_the_calibration(cpu, monkeypatch):
    real = torch.randn

    def randn(*shape, **kwargs):
        if shape[0] >= 128:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 MiB")
        return real(*shape, **kwargs)

    monkeypatch.setattr(torch, "randn", randn)
    p = matmul_peak.sweep(cpu, "float32", sizes=(64, 128, 256), budget_s=600, repeats=1)
    assert p.sizes == (64,) and p.sizes_cut == (128, 256)
    assert "left out by the GPU memory free to this run" in p.how_text()
    with pytest.raises(torch.OutOfMemoryError):  # not even the first size: no peak to keep
        matmul_peak.sweep(cpu, "float32", sizes=(128, 256), budget_s=600, repeats=1)


def test_a_peak_is_cached_with_its_date_and_torch_version_and_reused(cpu, cache, fake_sweep):
    assert matmul_peak.cached(cpu, "float32") is None  # nothing yet
    first = matmul_peak.measure(cpu, "float32")
    assert fake_sweep == ["float32"] and cache.exists()
    again = matmul_peak.cached(cpu, "float32")
    assert again == first  # read back whole: value, date, torch version, threads
    stored = json.loads(cache.read_text())["peaks"][0]
    assert stored["measured_on"] == datetime.date.today().isoformat() and stored["torch"] == torch.__version__
    assert stored["threads"] == torch.get_num_threads()
    assert matmul_peak.cached(cpu, "bfloat16") is None  # another dtype is another peak


def test_a_stale_entry_is_not_reused_and_measuring_replaces_it(cpu, cache, fake_sweep):
    first = matmul_peak.measure(cpu, "float32")
    for stale in (
        dataclasses.replace(first, torch="1.0.0"),
        dataclasses.replace(
            first, measured_at=time.time() - (matmul_peak.MAX_AGE_DAYS + 1) * 86400, measured_on="2000-01-01"
        ),
    ):
        matmul_peak.store(stale)
        assert matmul_peak.cached(cpu, "float32") is None
        assert stale.stale_because(torch.__version__)
        fresh = matmul_peak.measure(cpu, "float32")
        assert matmul_peak.cached(cpu, "float32") == fresh
        assert len(matmul_peak.load()) == 1  # replaced, not piled up


@pytest.mark.parametrize("others_busy,kept", [(0.3, True), (None, True), (float(os.cpu_count() or 1), False)])
def test_a_sweep_crowded_by_other_programs_is_used_but_not_kept(cpu, fake_sweep, monkeypatch, others_busy, kept):
    """A CPU sweep that lost cores its threads needed reads low, and every later MFU against it high."""
    monkeypatch.delenv(matmul_peak.IGNORE_LOAD_ENV)  # tests/conftest.py keeps every sweep made under test load
    monkeypatch.setattr(cpu_load, "others_busy_cores", lambda before, after: others_busy)
    swept = matmul_peak.measure(cpu, "float32")
    assert (matmul_peak.cached(cpu, "float32") == swept) is kept
    words = matmul_peak.not_kept_words(swept)
    if kept:
        assert swept.others_busy_cores is None and words is None
    else:
        assert swept.others_busy_cores == others_busy and "not kept" in swept.how_text()
        assert words and words.startswith(f"Other programs kept {others_busy:.1f} cores busy")
        raised = matmul_peak.raise_to(swept, swept.tflops * 2)  # a run beat it under the same load
        assert raised.tflops == swept.tflops * 2 and matmul_peak.cached(cpu, "float32") is None


def test_more_threads_than_cores_on_an_idle_machine_is_no_crowd(monkeypatch):
    monkeypatch.delenv(matmul_peak.IGNORE_LOAD_ENV)
    monkeypatch.setattr(cpu_load, "others_busy_cores", lambda before, after: 0.0)
    assert matmul_peak.crowded(cpu_load.read(), threads=4 * (os.cpu_count() or 1)) is None


def test_another_thread_count_is_another_entry(cpu, fake_sweep):
    mine = matmul_peak.measure(cpu, "float32")
    other = dataclasses.replace(mine, threads=(mine.threads or 1) + 7, tflops=9.0)
    matmul_peak.store(other)
    assert matmul_peak.cached(cpu, "float32") == mine
    assert {p.threads for p in matmul_peak.load()} == {mine.threads, other.threads}


def test_an_unreadable_cache_counts_as_empty(cpu, cache, fake_sweep):
    cache.parent.mkdir(parents=True)
    for text in (
        "{not json",
        json.dumps({"version": 99, "peaks": []}),
        json.dumps([1, 2]),
        json.dumps({"version": matmul_peak.CACHE_VERSION, "peaks": [{"tflops": "nan"}, {"x": 1}]}),
    ):
        cache.write_text(text)
        assert matmul_peak.load() == [] and matmul_peak.cached(cpu, "float32") is None
    assert matmul_peak.measure(cpu, "float32") == matmul_peak.cached(cpu, "float32")


def test_a_run_that_beats_the_peak_raises_it_and_the_raise_is_kept(cpu, fake_sweep):
    swept = matmul_peak.measure(cpu, "float32")
    raised = matmul_peak.raise_to(swept, swept.tflops * 2)
    assert raised.tflops == swept.tflops * 2 and raised.how == matmul_peak.RAISED and raised.best_size is None
    assert raised.typical_tflops is None and raised.spread_text() == ""  # a run's figure: no sweep's spread
    assert matmul_peak.cached(cpu, "float32") == raised
    assert "raised to a run's achieved FLOP/s" in raised.how_text()


def test_doctor_report_reads_the_cache_and_measures_only_when_asked(cpu, fake_sweep):
    wanted = matmul_peak.doctor_dtypes(cpu)
    assert wanted[0] == "float32" and ("bfloat16" in wanted) == cpu.bf16
    r = matmul_peak.report(cpu)
    assert fake_sweep == [] and r["entries"] == [] and r["not_measured"] == wanted
    assert r["threads"] == torch.get_num_threads() and r["measure_command"] == "gpututor doctor --peak"
    r = matmul_peak.report(cpu, remeasure=True)
    assert fake_sweep == wanted and r["measured_now"] == wanted and r["not_measured"] == []
    assert [e["dtype"] for e in r["entries"]] == wanted and all(e["stale"] is None for e in r["entries"])


def test_doctor_shows_tf32_only_on_a_gpu_that_has_it():
    h100 = devices.Device(kind="cuda", index=0, name="NVIDIA H100", capability=(9, 0), bf16=True)
    t4 = devices.Device(kind="cuda", index=0, name="Tesla T4", capability=(7, 5))
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")  # as NVIDIA's containers set it
    try:
        assert matmul_peak.doctor_dtypes(h100) == ["tfloat32", "float16"]
        assert matmul_peak.doctor_dtypes(t4) == ["float32", "float16"]  # "high" runs float32 there
    finally:
        torch.set_float32_matmul_precision(before)


def test_the_float32_sweep_runs_without_tf32_where_a_container_turned_it_on_and_restores_it():
    """NVIDIA's containers set TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1: float32 matmuls default to TF32
    ('high'). The float32 peak is pinned to 'highest' (cuBLAS TF32 off) and the setting comes back.
    The variable is read when torch starts: a fresh interpreter."""
    import os
    import subprocess
    import sys

    code = """
import torch
from tutor.measurement import peak
assert torch.get_float32_matmul_precision() == "high", "the override no longer sets TF32"
with peak._matmul_precision("float32", "cuda"):
    assert torch.get_float32_matmul_precision() == "highest" and not torch.backends.cuda.matmul.allow_tf32
with peak._matmul_precision("tfloat32", "cuda"):
    assert torch.backends.cuda.matmul.allow_tf32
assert torch.get_float32_matmul_precision() == "high" and torch.backends.cuda.matmul.allow_tf32
"""
    from pathlib import Path

    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.gpu
def test_the_accelerator_sweep_is_cached_and_below_the_vendor_spec(accelerator):
    from tutor.experiments.pipeline_breakdown import vendor_peak_tflops

    dev = devices.resolve(accelerator)
    dtype = matmul_peak.doctor_dtypes(dev)[-1]  # float16: the tensor-core path
    p = matmul_peak.measure(dev, dtype)
    assert p.tflops > 0 and p.threads is None and p.sizes and p.best_size in p.sizes
    assert matmul_peak.cached(dev, dtype) == p
    if dev.kind == "cuda":
        sms = torch.cuda.get_device_properties(dev.index or 0).multi_processor_count
        assert f"({sms} SMs)" in p.device
        spec = vendor_peak_tflops(dev.name, dtype, sms)
        if spec:  # a timing above the data sheet would mean a missing sync or a wrong FLOP count
            assert p.tflops < spec[0] * 1.05, (p.tflops, spec)
