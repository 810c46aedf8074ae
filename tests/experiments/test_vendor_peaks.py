"""The spec sheet beside the measured peak (issue 26, part 4): a known GPU's dense figure is said
next to every FLOP/s a run shows; a CPU has none and none is made up."""

from __future__ import annotations

import re

import pytest
import torch
from experiment_runs import run_experiment

from tutor.experiments import devices
from tutor.experiments.events import Note
from tutor.measurement import vendor_peaks

H100 = (67.0, "NVIDIA H100 SXM")


def test_no_cpu_has_a_spec_sheet():
    assert vendor_peaks.for_device(devices.resolve("cpu"), "float32") is None


def test_the_words_give_the_share_the_figure_and_whose_it_is():
    assert (
        vendor_peaks.beside(33.5, H100, "float32")
        == "50.0% of the spec sheet's 67 TFLOP/s (NVIDIA H100 SXM, float32 dense)"
    )


def test_a_mig_slice_gets_its_share_of_the_chips_figure():
    tflops, label = vendor_peaks.vendor_peak_tflops("NVIDIA H100 80GB HBM3 MIG 3g.40gb", "bfloat16", sms=66)
    assert tflops == pytest.approx(989.4 / 2) and "66 of its 132 SMs" in label
    assert vendor_peaks.vendor_peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16", sms=132) == (989.4, "NVIDIA H100 SXM")


@pytest.mark.parametrize(
    "name,sms",
    [
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 76),  # another chip under the name: fewer SMs, not a slice
        ("NVIDIA GeForce RTX 4090 D", 114),
        ("NVIDIA GH200 480GB", 132),  # not an H200
    ],
)
def test_a_chip_whose_name_only_looks_known_gets_no_spec_sheet(name, sms):
    assert vendor_peaks.vendor_peak_tflops(name, "float32", sms) is None


@pytest.fixture
def known_gpu(monkeypatch):
    """A CPU run under a known GPU's spec sheet: the words and arithmetic, without a GPU."""
    monkeypatch.setattr(vendor_peaks, "for_device", lambda dev, dtype: H100)


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


def test_sync_timing_says_its_throughput_against_the_spec_sheet(known_gpu):
    events, m = run_experiment("sync-timing", {"size": 64, "calls": 3, "repeats": 2}, "cpu")
    assert vendor_peaks.beside(m["tflops"], H100, "float32") in _notes(events)


def test_bandwidth_puts_its_roof_and_its_matmul_beside_the_spec_sheet(known_gpu):
    events, m = run_experiment("bandwidth", {"megabytes": 4, "matmul_size": 128, "repeats": 2}, "cpu")
    said = _notes(events)
    assert "Beside the spec sheet" in said and vendor_peaks.beside(m["matmul_tflops"], H100, "float32") in said


def test_without_a_spec_sheet_nothing_is_said_of_one():
    events, _ = run_experiment("sync-timing", {"size": 64, "calls": 3, "repeats": 2}, "cpu")
    assert "spec sheet" not in _notes(events)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_known_cuda_gpu_is_found():
    dev = devices.resolve("cuda")
    sheet = vendor_peaks.for_device(dev, "float32")
    sms = torch.cuda.get_device_properties(dev.index or 0).multi_processor_count
    row = next((r for r in vendor_peaks.VENDOR_PEAKS if re.search(r[0], dev.name, re.IGNORECASE)), None)
    if row is not None and (sms == row[2] or "MIG" in dev.name):  # the chip itself, or a slice of it
        assert sheet is not None and sheet[0] > 1
        assert ("MIG slice" in sheet[1]) == (sms < row[2])
