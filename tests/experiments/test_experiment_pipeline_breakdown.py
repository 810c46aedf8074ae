"""pipeline-breakdown: one training step split into phases, model FLOPs and MFU.
Behaviour only: no test compares timings with fixed numbers."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.pipeline_breakdown import PHASES, vendor_peak_tflops

STEPS = 10
MNIST_MLP_MACS = 784 * 256 + 256 * 128 + 128 * 10  # 234,752


@pytest.fixture(scope="module")
def mlp_run():
    return run_experiment("pipeline-breakdown", {"steps": STEPS, "batch_size": 32})


@pytest.fixture(scope="module")
def wide_run():
    return run_experiment("pipeline-breakdown", {"steps": STEPS, "batch_size": 32, "model": "wide", "width": 1024})


def test_every_declared_metric_is_reported(mlp_run):
    _, m = mlp_run
    assert set(m) == set(experiments.get("pipeline-breakdown").metrics)
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
    assert 0 < wide["mfu"] and wide["mfu"] == pytest.approx(wide["achieved_tflops"] / wide["peak_tflops"])


def test_the_loader_path_times_its_data_wait_and_ignores_pin_memory_off_cuda(mlp_run):
    # Which path waits longer is a timing, and a timing under a loaded CI machine can go either
    # way over a few steps (it did: 2% against 5%): asserted here is what the run does, not speed.
    _, resident = mlp_run
    events, loader = run_experiment("pipeline-breakdown",
                                    {"steps": STEPS, "batch_size": 32, "data_path": "loader", "pin_memory": True})
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
    events, m = run_experiment("pipeline-breakdown", {"steps": 20, "data_path": "loader", "pin_memory": True},
                               "cuda")
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
