"""bandwidth: memory bandwidth against matmul FLOP/s, and the roofline built from them.
Behaviour only: no test compares timings with fixed numbers."""

from __future__ import annotations

import statistics

import pytest
import torch
from experiment_runs import run_experiment
from planted_peaks import plant_peak

from tutor import experiments
from tutor.experiments import devices
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.measurement import peak as matmul_peak
from tutor.measurement.timing import Blocks

QUICK = experiments.get("bandwidth").quick


@pytest.fixture(scope="module", autouse=True)
def peak_cache(tmp_path_factory):
    """This module's runs keep their measured peaks in a file of their own, never the user's; the
    sweep is kept tiny."""
    path = tmp_path_factory.mktemp("peak") / "peaks.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matmul_peak, "cache_file", lambda: path)
        mp.setitem(matmul_peak.SIZES, "cpu", (64, 128))
        yield path


def _plant(tflops: float, path) -> None:
    plant_peak(tflops)


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


@pytest.fixture(scope="module")
def cpu_run(peak_cache):
    return run_experiment("bandwidth", QUICK, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("bandwidth").metrics)
    assert m["device"] == "cpu" and m["threads"] == torch.get_num_threads()


def test_a_cpu_has_no_host_to_device_copy_and_says_so(cpu_run):
    events, m = cpu_run
    assert m["copy_gbps"] is None and m["pinned_copy_gbps"] is None and m["pinned_speedup"] is None
    notes = _notes(events)
    assert "No GPU here" in notes and "no host-to-device copy" in notes and "pinned" in notes
    traffic = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in traffic.rows] == ["device to device copy", "c = a * b"]


def test_the_roofline_is_built_from_the_measured_numbers(cpu_run):
    _, m = cpu_run
    assert m["device_copy_gbps"] > 0 and m["elementwise_gbps"] > 0 and m["matmul_tflops"] > 0
    # c = a * b moves 12 bytes per FLOP: its GB/s and its FLOP/s are one measurement
    assert m["elementwise_gbps"] == pytest.approx(12 * m["elementwise_tflops"] * 1e3)
    assert m["bandwidth_gbps"] == max(m["device_copy_gbps"], m["elementwise_gbps"])
    assert m["peak_tflops"] >= m["matmul_tflops"]
    assert m["ridge_point"] == pytest.approx(m["peak_tflops"] * 1e3 / m["bandwidth_gbps"])
    assert m["elementwise_intensity"] == pytest.approx(1 / 12)
    assert m["matmul_intensity"] == pytest.approx(QUICK["matmul_size"] / 6)
    # graded: the typical repeat's share, never above the best repeat's (elementwise_tflops)
    assert m["elementwise_peak_share"] <= m["elementwise_tflops"] / m["peak_tflops"] * (1 + 1e-9)
    assert m["matmul_peak_share"] == pytest.approx(m["matmul_tflops"] / m["peak_tflops"])
    assert m["elementwise_bound"] == "memory"  # 1/12 FLOP/B is left of any device's ridge
    assert m["matmul_bound"] == ("compute" if m["matmul_intensity"] >= m["ridge_point"] else "memory")


def test_the_labs_a100_is_set_beside_the_measured_roofs(cpu_run):
    events, m = cpu_run
    [note] = [e.text for e in events if isinstance(e, Note) and "lab's A100" in e.text]
    assert "1,555 GB/s" in note and "6,912 FP32 cores" in note
    assert f"{1555 / m['bandwidth_gbps']:.3g}x" in note.replace("\n", " ")  # a ratio of this run's roof
    assert "not measured here" in note


def test_the_elementwise_share_is_the_typical_repeats_inside_its_interval(cpu_run):
    """Quick settings: the share graded is the median of the blocks PyTorch's timer measured,
    inside its interval."""
    events, m = cpu_run
    low, share, high = (m[f"elementwise_peak_share{end}"] for end in ("_low", "", "_high"))
    assert low is not None and 0 < low <= share <= high
    assert "a typical repeat reached" in _notes(events) and "the median of" in _notes(events)


def test_one_timing_gives_no_spread(tmp_path, monkeypatch):
    from tutor.experiments import bandwidth

    monkeypatch.setattr(matmul_peak, "cache_file", lambda: tmp_path / "peaks.json")
    _plant(1000.0, tmp_path / "peaks.json")
    monkeypatch.setattr(bandwidth, "timed_blocks", lambda fn, device, repeats, budget_s: Blocks((0.002,), 1))
    events, m = run_experiment("bandwidth", {**QUICK, "repeats": 1}, "cpu")
    assert m["elementwise_peak_share"] > 0
    assert m["elementwise_peak_share_low"] is None and m["elementwise_peak_share_high"] is None
    assert "the median of" not in _notes(events)


def test_from_10_timings_the_share_is_their_median_with_the_order_statistics_interval(tmp_path, monkeypatch):
    """Timed as 1 ms, 2 ms, ..., 10 ms: the share graded is the median block's, its interval the
    2nd to the 9th of the ten shares, each against the one roof."""
    from tutor.experiments import bandwidth

    monkeypatch.setattr(matmul_peak, "cache_file", lambda: tmp_path / "peaks.json")
    _plant(1000.0, tmp_path / "peaks.json")
    timings = [k / 1000 for k in range(1, 11)]
    monkeypatch.setattr(bandwidth, "timed_blocks", lambda fn, device, repeats, budget_s: Blocks(tuple(timings), 1))
    _, m = run_experiment("bandwidth", {**QUICK, "repeats": 10}, "cpu")
    rates = sorted(1 / t for t in timings)
    share = m["elementwise_peak_share"]
    assert share / m["elementwise_peak_share_low"] == pytest.approx(statistics.median(rates) / rates[1])
    assert m["elementwise_peak_share_high"] / share == pytest.approx(rates[8] / statistics.median(rates))


def test_best_seconds_is_the_best_block_pytorchs_timer_measured(monkeypatch):
    """MemoryTraffic and `gpututor calibrate` keep the best block; the experiment reads each one."""
    from tutor.experiments import bandwidth

    monkeypatch.setattr(bandwidth, "timed_blocks", lambda fn, device, repeats, budget_s: Blocks((0.3, 0.2, 0.4), 5))
    assert bandwidth.best_seconds(print, "cpu", 3) == 0.2


def test_the_roofline_table_has_the_roof_at_each_intensity(cpu_run):
    events, m = cpu_run
    roofline = [e for e in events if isinstance(e, Table)][1]
    assert roofline.columns == ["operation", "FLOP/B", "achieved", "roof there", "of roof", "bound by"]
    assert [row[0] for row in roofline.rows] == ["c = a * b", f"matmul {QUICK['matmul_size']}"]
    assert [row[-1] for row in roofline.rows] == [m["elementwise_bound"], m["matmul_bound"]]
    assert "ridge at" in roofline.title and "GB/s" in roofline.title
    notes = _notes(events)
    assert "ridge point" in notes and "memory-bound" in notes


def test_progress_after_each_operation(cpu_run):
    events, _ = cpu_run
    steps = [e for e in events if isinstance(e, Step)]
    assert [s.label for s in steps] == ["device copy", "elementwise", "matmul"]
    assert [s.step for s in steps] == [1, 2, 3] and all(s.total == 3 for s in steps)


def test_small_arrays_are_said_to_measure_the_caches_too(cpu_run):
    events, _ = cpu_run
    assert QUICK["megabytes"] < 64 and "caches" in _notes(events)


def test_an_empty_cache_measures_the_peak_first_and_a_cached_one_is_the_roof(tmp_path, monkeypatch):
    path = tmp_path / "peaks.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: path)
    events, _ = run_experiment("bandwidth", QUICK, "cpu")
    assert "Measuring this device's float32 matmul peak first" in _notes(events)
    assert matmul_peak.cached(devices.resolve("cpu"), "float32") is not None  # kept for later runs

    path.unlink()
    _plant(1000.0, path)  # far above any CPU: the compute roof is the cached peak
    events, m = run_experiment("bandwidth", QUICK, "cpu")
    assert "Measuring" not in _notes(events)
    assert m["peak_tflops"] == 1000.0 and m["matmul_bound"] == "memory"  # a ridge that far right
    assert m["ridge_point"] == pytest.approx(1000.0 * 1e3 / m["bandwidth_gbps"])


def test_a_run_faster_than_the_cached_peak_is_the_roof(tmp_path, monkeypatch):
    path = tmp_path / "peaks.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: path)
    _plant(1e-9, path)
    events, m = run_experiment("bandwidth", QUICK, "cpu")
    assert m["peak_tflops"] == m["matmul_tflops"] and m["matmul_peak_share"] == 1.0
    assert "faster than the cached sweep" in _notes(events)
    # Issue 35: "100.0% of roof" for an operation that set the roof it was placed against, unsaid.
    roofline = [e for e in events if isinstance(e, Table)][1]
    matmul_row = roofline.rows[1]
    assert matmul_row[0].startswith("matmul") and matmul_row[4] == "100% (its own)"
    assert "set the roof it is placed against" in _notes(events) and "gpututor roofline" in _notes(events)
    elementwise_set_it = m["elementwise_gbps"] >= m["device_copy_gbps"]
    assert (roofline.rows[0][4] == "100% (its own)") is elementwise_set_it


def test_arrays_too_big_for_the_memory_are_refused_before_any_work(monkeypatch):
    from tutor.experiments import bandwidth

    monkeypatch.setattr(bandwidth, "_free_bytes", lambda dev: 100 * 2**20)
    with pytest.raises(ValueError, match=r"megabytes=128 needs .* choose a smaller megabytes"):
        run_experiment("bandwidth", {"megabytes": 128, "repeats": 1}, "cpu")


def test_on_a_shared_gpu_the_arrays_must_fit_the_runs_cap_not_the_cards_free_memory(monkeypatch):
    from tutor.experiments import bandwidth, gpu_share

    gib = 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index=0: (60 * gib, 80 * gib))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda index=0: 0)
    gpu = devices.Device(kind="cuda", index=0, name="NVIDIA H100 80GB HBM3", capability=(9, 0))
    monkeypatch.delenv(gpu_share.HOST_MEMORY_ENV, raising=False)
    monkeypatch.delenv(gpu_share.GPU_MEMORY_ENV, raising=False)
    bandwidth.MemoryTraffic(gpu, 1024, 1).check_fits()  # 3 GiB of the 60 free: fits
    monkeypatch.setenv(gpu_share.GPU_MEMORY_ENV, "4096")  # each learner's run: 4 GiB
    with pytest.raises(ValueError, match=r"megabytes=1024 needs 3.00 GiB .* half of the 4.00 GiB .* free for this run"):
        bandwidth.MemoryTraffic(gpu, 1024, 1).check_fits()


@pytest.mark.gpu
def test_an_accelerator_times_the_copy_from_the_host(accelerator):
    _events, m = run_experiment("bandwidth", {"megabytes": 256, "matmul_size": 4096, "repeats": 5}, accelerator)
    assert m["device"].startswith(accelerator) and m["threads"] is None
    assert m["copy_gbps"] > 0 and m["elementwise_bound"] == "memory" and m["matmul_bound"] == "compute"
    # the bus is the slowest roof: a copy from the host is slower than the device's own memory
    assert m["copy_gbps"] < m["bandwidth_gbps"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_copies_from_pinned_memory_faster():
    events, m = run_experiment("bandwidth", {"megabytes": 256, "repeats": 5}, "cuda")
    assert m["pinned_copy_gbps"] > 0 and m["pinned_speedup"] == pytest.approx(m["pinned_copy_gbps"] / m["copy_gbps"])
    assert m["pinned_speedup"] > 1
    traffic = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in traffic.rows][:2] == ["host to device, pageable", "host to device, pinned"]
    assert "pin_memory=True" in _notes(events)


def test_the_roofline_is_drawn_from_this_runs_numbers(cpu_run):
    """The chart places both operations under the roof its own bandwidth and peak make, and fits
    80 columns."""
    events, m = cpu_run
    figure = next(e.text for e in events if isinstance(e, Note) and e.level == "figure")
    lines = figure.splitlines()
    assert all(len(line) <= 64 for line in lines)
    plot = "\n".join(line.split("|", 1)[1] for line in lines if "|" in line)
    assert "e" in plot and "m" in plot and "/" in plot
    from tutor.present import number

    assert f"ridge {number(m['ridge_point'])}" in figure
    assert "e c = a * b" in figure and "m matmul" in figure
