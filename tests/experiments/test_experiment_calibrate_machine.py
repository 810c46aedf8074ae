"""calibrate as a lesson's run step: the same measurement and record as `gpututor calibrate`,
shown as it lands, with the spec sheet beside the measured peak where one is known."""

from __future__ import annotations

import math

import pytest
import torch
from experiment_runs import run_experiment

from tutor.experiments import bandwidth, devices
from tutor.experiments.events import Note, Step, Table
from tutor.measurement import calibration
from tutor.measurement import peak as matmul_peak


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    """Both caches in this test's folder, never the user's; a small sweep and small arrays."""
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: tmp_path / "cache" / "peaks.json")
    monkeypatch.setattr(calibration, "cache_file", lambda: tmp_path / "cache" / "calibration.json")
    monkeypatch.setitem(matmul_peak.SIZES, "cpu", (64, 128))
    monkeypatch.setitem(matmul_peak.BUDGET_S, "cpu", 600.0)
    monkeypatch.setattr(calibration, "bandwidth_defaults", lambda: (4, 2))


def test_the_run_measures_both_roofs_and_keeps_them_as_the_command_does():
    events, m = run_experiment("calibrate", {}, "cpu")
    dev = devices.resolve("cpu")
    assert m["float32_peak_tflops"] > 0 and m["bandwidth_gbps"] > 0
    assert m["ridge_point"] == pytest.approx(m["float32_peak_tflops"] * 1e12 / (m["bandwidth_gbps"] * 1e9))
    assert m["float32_spec_share"] is None  # no spec sheet for a CPU: none is made up
    assert (m["bfloat16_peak_tflops"] is not None) == ("bfloat16" in calibration.dtypes(dev))
    if m["bfloat16_speedup"] is not None:  # 3 sweeps each: the median ratio, inside its interval
        assert m["bfloat16_speedup_low"] <= m["bfloat16_speedup"] <= m["bfloat16_speedup_high"]
        assert isinstance(m["noise_why"], str)
    record = calibration.find(m["device"])
    assert record is not None and record.peak("float32").tflops == m["float32_peak_tflops"]
    assert record.bandwidth.gbps == m["bandwidth_gbps"]
    steps = [e for e in events if isinstance(e, Step)]
    assert [s.label for s in steps] == calibration.planned(dev) and math.isnan(steps[0].loss)
    table = next(e for e in events if isinstance(e, Table))
    assert [r[0] for r in table.rows] == [p.dtype for p in record.peaks]
    assert all(r[-1] == "none known" for r in table.rows)
    assert any(e.level == "figure" and "compute roof" in e.text for e in events if isinstance(e, Note))
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "gpututor roofline" in said and "gpututor doctor" in said
    assert "the best of 3 sweeps" in said


def test_a_gpu_with_a_spec_sheet_gets_its_measured_share(monkeypatch):
    """The spec sheet's figure beside the measured peak: a known GPU's name is matched (here a
    CPU run under an H100's name, so the arithmetic is checked without one)."""
    from tutor.measurement import vendor_peaks

    monkeypatch.setattr(
        vendor_peaks, "for_device", lambda dev, dtype: (67.0, "NVIDIA H100 SXM") if dtype == "float32" else None
    )
    events, m = run_experiment("calibrate", {}, "cpu")
    assert m["float32_spec_share"] == pytest.approx(m["float32_peak_tflops"] / 67.0)
    table = next(e for e in events if isinstance(e, Table))
    row = next(r for r in table.rows if r[0] == "float32")
    assert row[-1].startswith("67 TFLOP/s (") and "of it)" in row[-1]


def test_the_roof_that_cannot_be_measured_is_a_failed_run_not_a_made_up_one(monkeypatch):
    def refuse(dev, dtype):
        raise RuntimeError("no float32 matmul here")

    monkeypatch.setattr(matmul_peak, "sweep", refuse)
    monkeypatch.setattr(bandwidth.MemoryTraffic, "run", lambda self: pytest.fail("measured without a compute roof"))
    with pytest.raises(RuntimeError, match="no float32 matmul"):
        run_experiment("calibrate", {}, "cpu")
    assert calibration.load() == []  # nothing kept


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_cuda_gpu_the_roofs_are_its_own():
    _, m = run_experiment("calibrate", {}, "cuda")
    assert m["float32_peak_tflops"] > 1 and m["bandwidth_gbps"] > 100
    if m["float32_spec_share"] is not None:  # a GPU the spec table knows
        assert 0.2 < m["float32_spec_share"] < 1.3
