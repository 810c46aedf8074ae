"""pipeline-breakdown: one training step split into phases, model FLOPs and MFU.
Behaviour only: no test compares timings with fixed numbers."""

from __future__ import annotations

import dataclasses
import datetime
import json

import pytest
import torch
from experiment_runs import run_experiment
from planted_peaks import plant_peak

from tutor import experiments
from tutor.experiments import devices
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.pipeline_breakdown import PHASES, stretch_ends, vendor_peak_tflops
from tutor.experiments.spec import COMMON_METRICS
from tutor.measurement import peak as matmul_peak

STEPS = 10
MNIST_MLP_MACS = 784 * 256 + 256 * 128 + 128 * 10  # 234,752


@pytest.fixture(scope="module", autouse=True)
def peak_cache(tmp_path_factory):
    """This module's runs keep their measured peaks in a file of their own, never the user's."""
    path = tmp_path_factory.mktemp("peak") / "peaks.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matmul_peak, "cache_file", lambda: path)
        yield path


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """A test that plants a peak gets a cache of its own: the module's runs never see it."""
    path = tmp_path / "peaks.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: path)
    return path


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


def _plant(tflops: float, device: str = "cpu", **changes) -> matmul_peak.Peak:
    return plant_peak(tflops, device, **changes)


@pytest.fixture(scope="module")
def mlp_run(peak_cache):
    return run_experiment("pipeline-breakdown", {"steps": STEPS, "batch_size": 32})


@pytest.fixture(scope="module")
def wide_run(peak_cache):
    return run_experiment("pipeline-breakdown", {"steps": STEPS, "batch_size": 32, "model": "wide", "width": 1024})


def test_every_declared_metric_is_reported(mlp_run):
    _, m = mlp_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("pipeline-breakdown").metrics)
    assert m["device"] == "cpu" and m["model"] == "mlp" and m["data_path"] == "resident"
    assert m["parameters"] == 235_146 and m["dtype"] == "float32"


def test_phase_shares_add_up_and_name_the_bottleneck(mlp_run):
    _, m = mlp_run
    assert sum(m[f"{k}_share"] for k in PHASES) == pytest.approx(1.0, abs=1e-6)
    for k in ("data_wait", "forward", "backward", "optimizer"):
        assert m[f"{k}_seconds"] > 0
    assert m["bottleneck"] == max(PHASES, key=lambda k: m[f"{k}_seconds"])
    assert m["samples_per_s"] > 0 and m["samples_per_s_unsynced"] > 0


def test_flops_follow_the_formula_and_mfu_is_achieved_over_peak(mlp_run):
    events, m = mlp_run
    assert m["flops_per_step"] == 6 * MNIST_MLP_MACS * 32
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / m["peak_tflops"])
    assert m["peak_source"] == "measured matmul" and m["peak_tflops"] > 0
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert f"6 x {MNIST_MLP_MACS:,}" in notes and "MFU = achieved / peak" in notes
    assert "No GPU here" in notes


def test_mfu_on_the_cpu_is_against_a_measured_peak_it_cannot_exceed(mlp_run):
    events, m = mlp_run
    assert m["mfu"] <= 1 and m["mfu_vs_measured"] <= 1
    assert m["peak_measured_tflops"] >= m["achieved_tflops"]  # else it was raised to it
    assert m["peak_tflops"] == m["peak_measured_tflops"] and m["mfu"] == m["mfu_vs_measured"]
    assert m["peak_spec_tflops"] is None and m["mfu_vs_spec"] is None  # a CPU has no vendor spec here
    assert m["peak_threads"] == torch.get_num_threads()  # measured with the threads that trained
    assert m["peak_measured_on"] == datetime.date.today().isoformat()
    notes = _notes(events)
    assert "Measuring this device's float32 peak" in notes  # this module's cache started empty
    assert f"{torch.get_num_threads()} thread" in notes and "square matmuls" in notes


def test_a_cached_peak_is_reused_with_its_date(own_cache):
    """A run finds the peak measured before it (here planted): no new sweep, its value and date."""
    planted = _plant(1000.0)
    events, m = run_experiment("pipeline-breakdown", {"steps": 3, "batch_size": 32})
    assert "Measuring this device's" not in _notes(events)
    assert m["peak_measured_tflops"] == 1000.0 and m["peak_measured_on"] == planted.measured_on
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / 1000.0) and not m["peak_raised"]
    assert "2000-01-02, torch " + torch.__version__ in _notes(events)


def test_a_peak_from_another_torch_version_is_measured_again(own_cache):
    _plant(1000.0, torch="1.0.0")
    events, m = run_experiment("pipeline-breakdown", {"steps": 3, "batch_size": 32})
    assert "Measuring this device's float32 peak" in _notes(events)
    assert m["peak_measured_on"] == datetime.date.today().isoformat() and m["peak_measured_tflops"] != 1000.0
    stored = json.loads(own_cache.read_text())["peaks"]
    # the entry for the threads this run used now holds this torch (one for another count may stay)
    assert [p["torch"] for p in stored if p["dtype"] == "float32" and p["tflops"] != 1000.0] == [torch.__version__]


def test_a_run_that_beats_a_cached_peak_measures_again_and_never_passes_100_percent(own_cache):
    """The issue: a peak measured low (a busy moment) gave MFUs over 100%. Now the run sweeps again."""
    _plant(1e-9)  # far below anything a run achieves
    events, m = run_experiment("pipeline-breakdown", {"steps": 3, "batch_size": 32})
    assert "beat the cached peak" in _notes(events) and "measuring it again" in _notes(events)
    assert m["mfu"] <= 1 and m["mfu_vs_measured"] <= 1 and m["peak_measured_tflops"] >= m["achieved_tflops"]
    assert m["peak_measured_tflops"] > 1e-9
    assert matmul_peak.cached(devices.resolve("cpu"), "float32").tflops == m["peak_measured_tflops"]


def test_a_run_faster_than_every_sweep_raises_the_peak_and_says_so(own_cache, monkeypatch):
    low = _plant(1e-9)
    monkeypatch.setattr(matmul_peak, "sweep", lambda dev, dtype, **kw: dataclasses.replace(low, tflops=2e-9))
    events, m = run_experiment("pipeline-breakdown", {"steps": 3, "batch_size": 32})
    assert m["peak_raised"] is True
    # raised to the fastest stretch of steps: the median stretch (achieved) and every stretch stay at or below it
    assert m["peak_measured_tflops"] >= m["achieved_tflops"] and m["mfu_vs_measured"] <= 1
    assert m["mfu_high"] == pytest.approx(1.0)  # 3 stretches of 1 step: the highest is the one the peak was raised to
    assert "raised to this run's fastest figure" in _notes(events)
    kept = matmul_peak.cached(devices.resolve("cpu"), "float32")
    assert kept.tflops == m["peak_measured_tflops"] and kept.how == matmul_peak.RAISED


def test_mfu_reports_the_spread_of_its_stretches_and_lies_within_it(mlp_run, wide_run):
    """The unsynced pass is timed in stretches of steps: MFU is the median stretch's, and its noise
    (mfu_low, mfu_high) the median's interval over the stretches (10 here), which holds it."""
    for _, m in (mlp_run, wide_run):
        assert m["mfu_low"] is not None and m["mfu_high"] is not None
        assert 0 < m["mfu_low"] <= m["mfu"] <= m["mfu_high"] <= 1
    events, _ = mlp_run
    assert "the median of 10 stretches of steps" in _notes(events)


def test_a_single_step_is_one_stretch_with_no_spread(own_cache):
    _plant(1000.0)
    events, m = run_experiment("pipeline-breakdown", {"steps": 1, "batch_size": 32})
    assert m["mfu"] > 0 and m["mfu_low"] is None and m["mfu_high"] is None
    assert "stretches of steps;" not in _notes(events)


def test_stretches_split_the_steps_evenly():
    assert sorted(stretch_ends(30)) == [3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert sorted(stretch_ends(5)) == [1, 2, 3, 4, 5]  # fewer steps than stretches: one step each
    ends = sorted(stretch_ends(35))
    assert len(ends) == 10 and ends[-1] == 35 and all(3 <= b - a <= 4 for a, b in zip([0, *ends], ends))
    assert stretch_ends(1) == {1}


def test_steps_stream_for_both_passes_and_the_table_fits(mlp_run):
    events, _ = mlp_run
    steps = [e for e in events if isinstance(e, Step)]
    assert {s.label for s in steps} == {"phases synced", "no inner syncs"}
    for label in {s.label for s in steps}:
        assert [s for s in steps if s.label == label][-1].step == STEPS
    table = next(e for e in events if isinstance(e, Table))
    assert len(table.rows) == len(PHASES) + 1
    width = sum(max(len(c), *(len(r[i]) for r in table.rows)) + 3 for i, c in enumerate(table.columns))
    assert width <= 80


def test_the_wide_model_does_far_more_math_per_step(mlp_run, wide_run):
    # On this CPU per-operation overhead is small, so the MFU ordering that a GPU shows
    # (the MNIST MLP far below the wide model) is not asserted here; the FLOPs are.
    _, small = mlp_run
    _, wide = wide_run
    assert wide["model"] == "wide"
    assert wide["flops_per_step"] == 6 * (784 * 1024 + 2 * 1024 * 1024 + 1024 * 10) * 32
    assert wide["flops_per_step"] > 10 * small["flops_per_step"]
    assert wide["mfu"] > 0 and wide["mfu"] == pytest.approx(wide["achieved_tflops"] / wide["peak_tflops"])


def test_the_loader_path_times_its_data_wait_and_ignores_pin_memory_off_cuda(mlp_run):
    # Which path waits longer is a timing, and a timing under a loaded CI machine can go either
    # way over a few steps (it did: 2% against 5%): asserted here is what the run does, not speed.
    _, resident = mlp_run
    events, loader = run_experiment(
        "pipeline-breakdown", {"steps": STEPS, "batch_size": 32, "data_path": "loader", "pin_memory": True}
    )
    assert loader["data_path"] == "loader" and resident["data_path"] == "resident"
    assert loader["data_wait_seconds"] > 0 and 0 < loader["data_wait_share"] < 1
    shares = [loader[f"{phase}_share"] for phase in PHASES]
    assert sum(shares) == pytest.approx(1.0, abs=0.05)  # the phases make up the step
    assert any("pin_memory ignored" in e.text for e in events if isinstance(e, Note))


def test_vendor_peaks_by_gpu_name_and_dtype():
    assert vendor_peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16") == (989.4, "NVIDIA H100 SXM")
    assert vendor_peak_tflops("NVIDIA H100 PCIe", "float32")[1] == "NVIDIA H100 PCIe"
    assert vendor_peak_tflops("NVIDIA A100-SXM4-80GB", "float16")[0] == 312.0
    assert vendor_peak_tflops("NVIDIA L4", "float32")[1] == "NVIDIA L4"
    assert vendor_peak_tflops("NVIDIA L40S", "float32") is None  # not an L4
    assert vendor_peak_tflops("Tesla T4", "bfloat16") is None  # no bfloat16 tensor cores
    assert vendor_peak_tflops("Some Future GPU", "float32") is None


def test_a_mig_slice_is_held_to_its_share_of_the_chip():
    """An H100 MIG 1g.10gb slice keeps the chip's name but 16 of its 132 SMs: its peak is that share."""
    peak, label = vendor_peak_tflops("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "bfloat16", sms=16)
    assert peak == pytest.approx(989.4 * 16 / 132) and "16 of its 132 SMs" in label
    assert vendor_peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16", sms=132) == (989.4, "NVIDIA H100 SXM")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_phases_and_peak():
    events, m = run_experiment("pipeline-breakdown", {"steps": 20, "data_path": "loader", "pin_memory": True}, "cuda")
    assert m["device"].startswith("cuda")
    for k in PHASES:
        assert m[f"{k}_seconds"] > 0
    assert 0 < m["mfu"] < 1
    name = torch.cuda.get_device_name()
    if vendor_peak_tflops(name, m["dtype"]):
        assert m["peak_source"] == "vendor spec"
    else:
        assert m["peak_source"] == "measured matmul"
    assert not any("pin_memory ignored" in e.text for e in events if isinstance(e, Note))


@pytest.mark.gpu
def test_accelerator_mfu_against_both_peaks(accelerator):
    """On a GPU with a vendor spec, MFU is reported against it (`mfu`) and against the measured peak;
    neither passes 100%, and the measured peak is the lower of the two."""
    events, m = run_experiment("pipeline-breakdown", {"steps": 20, "amp": "auto"}, accelerator)
    assert 0 < m["mfu_vs_measured"] <= 1 and m["peak_measured_tflops"] >= m["achieved_tflops"]
    assert m["peak_threads"] is None  # the host's threads do not set a GPU's peak
    if m["peak_spec_tflops"] is not None:
        assert m["peak_source"] == "vendor spec" and m["peak_tflops"] == m["peak_spec_tflops"]
        assert 0 < m["mfu"] == m["mfu_vs_spec"] <= m["mfu_vs_measured"]
        assert "against the vendor's spec" in _notes(events) and "measured peak" in _notes(events)
    else:
        assert m["peak_source"] == "measured matmul" and m["mfu"] == m["mfu_vs_measured"]


@pytest.mark.parametrize(
    "capability, precision, dtype",
    [
        ((7, 5), "high", "float32"),  # a T4 (or a V100, 7.0) has no TF32, whatever the setting
        ((7, 0), "medium", "float32"),
        ((8, 0), "high", "tfloat32"),
        ((9, 0), "highest", "float32"),
    ],
)
def test_the_float32_peak_is_tf32_only_where_the_gpu_has_tf32(capability, precision, dtype):
    from tutor.experiments.training import float32_matmul_dtype

    gpu = devices.Device(kind="cuda", index=0, name="Test GPU", capability=capability, fp16=True)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        assert float32_matmul_dtype(gpu) == dtype
        assert float32_matmul_dtype(devices.Device(kind="cpu", index=None, name="Test CPU")) == "float32"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_float32_dtype_follows_the_gpus_capability():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        _, m = run_experiment("pipeline-breakdown", {"steps": STEPS, "amp": "off"}, "cuda")
    finally:
        torch.set_float32_matmul_precision(before)
    assert m["dtype"] == ("tfloat32" if torch.cuda.get_device_capability() >= (8, 0) else "float32")


def test_a_synced_pass_faster_than_the_unsynced_one_is_said_to_be_noise():
    """Issue 35: throughput with syncs (11,568/s) beat without (9,038/s), side by side, unsaid."""
    from tutor.experiments.pipeline_breakdown import synced_faster

    said = synced_faster(11_568, 9_038)
    assert (
        said.startswith("The synced pass came out faster (11,568/s against 9,038/s), which the syncs cannot cause")
        and "run it again" in said
    )
    assert synced_faster(9_038, 11_568) is None and synced_faster(5.0, 5.0) is None


def test_the_passes_run_in_turns_and_what_the_run_shows_is_said(mlp_run, wide_run):
    """The synced and unsynced passes take turns stretch by stretch, so drift on the machine falls
    on both; a synced pass that still wins is said to be noise; the same MLP's other MFU (the
    profiler step's) is said to differ, and why."""
    from tutor.experiments.pipeline_breakdown import SAME_MLP_ELSEWHERE

    for events, m in (mlp_run, wide_run):
        notes = _notes(events)
        assert "the two passes ran in turns" in notes
        assert ("The synced pass came out faster" in notes) is (m["samples_per_s"] > m["samples_per_s_unsynced"])
    assert SAME_MLP_ELSEWHERE in _notes(mlp_run[0]) and SAME_MLP_ELSEWHERE not in _notes(wide_run[0])
    assert "profile-step" in SAME_MLP_ELSEWHERE and "copies it" in SAME_MLP_ELSEWHERE


def test_the_synced_and_unsynced_stretches_alternate(monkeypatch):
    from tutor.experiments import pipeline_breakdown

    monkeypatch.setattr(pipeline_breakdown, "REPORT_S", 0.0)  # every step and stretch reports
    events, _ = run_experiment("pipeline-breakdown", {"steps": 4, "batch_size": 16})
    order = [(e.label, e.step) for e in events if isinstance(e, Step)]
    assert order == [(label, step) for step in (1, 2, 3, 4) for label in ("phases synced", "no inner syncs")]


def test_mfu_against_the_measured_peak_carries_the_peaks_own_spread(own_cache):
    """Issue 37: a figure divided by a cached measurement carries its uncertainty. A peak whose
    typical block ran at half its best lets the MFU's interval reach twice as high."""
    _plant(1000.0, typical_tflops=500.0)
    events, m = run_experiment("pipeline-breakdown", {"steps": 10, "batch_size": 32})
    assert m["mfu_low"] <= m["mfu"] <= m["mfu_high"] and m["mfu_high"] >= 2 * m["mfu"]
    assert "its typical block 500 TFLOP/s" in _notes(events)
