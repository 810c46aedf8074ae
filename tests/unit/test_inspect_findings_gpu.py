"""The judges of the findings only a GPU run can show (tutor/inspect/findings.py), fed what the
hooks record on a GPU: each fires on the mistake, with its evidence, and stays quiet on the fix.
The same scripts run for real under @pytest.mark.gpu in tests/inspect/test_inspect.py; the two
CPU-watchable mistakes of mixed precision (autocast around backward, a scaler with bfloat16) are
run for real there on any machine."""

from __future__ import annotations

import copy

import pytest

from tutor.inspect.findings import Report, judge

GPU_FORWARD = {
    "module": "Net",
    "device_type": "cuda",
    "weights_device": "cuda:0",
    "weights_dtype": "float32",
    "batch_device": "cuda:0",
    "batch_shape": [64, 784],
    "autocast": True,
    "autocast_dtype": "bfloat16",
    "tf32": False,
}


def gpu_run(forward=None, **watched):
    """What the hooks record of a clean GPU script: bfloat16 autocast, nothing read back, no clock."""
    w = {
        "cuda": True,
        "accelerator": "cuda",
        "forward": {**GPU_FORWARD, **(forward or {})},
        "timed": [{"reads": 0, "syncs": 0, "clock_reads": 0} for _ in range(5)],
        "saves": [],
        "script_syncs": 0,
        "scaler_calls": 0,
    }
    w.update(copy.deepcopy(watched))
    return w


def found(w) -> dict[str, str]:
    return {f.key: f.evidence for f in judge(w, Report("train.py", [], "stopped", None))}


def test_a_clean_gpu_run_has_no_finding():
    assert found(gpu_run()) == {}


def test_float32_without_autocast_on_a_gpu_is_found_but_not_on_a_cpu():
    plain = {"autocast": False, "autocast_dtype": None}
    assert found(gpu_run(plain)) == {"no-autocast": "the forward ran in float32 (TF32 off) with autocast off"}
    assert "no-autocast" not in found(gpu_run({**plain, "device_type": "cpu", "weights_device": "cpu"}, cuda=False))


def test_clock_reads_without_synchronize_are_found_and_a_synchronize_clears_it():
    timed = [{"reads": 0, "syncs": 0, "clock_reads": 2} for _ in range(5)]
    assert "2.0 clock reads per step" in found(gpu_run(timed=timed))["timing-no-sync"]
    assert "timing-no-sync" not in found(gpu_run(timed=timed, script_syncs=40))


def test_a_checkpoint_holding_gpu_tensors_is_found_and_a_cpu_copy_is_not():
    on_gpu = [{"step": 30, "file": "ckpt.pt", "devices": {"cuda": 8}}]
    assert "torch.save(ckpt.pt) held {'cuda': 8} tensors" in found(gpu_run(saves=on_gpu))["checkpoint-on-device"]
    assert found(gpu_run(saves=[{"step": 30, "file": "ckpt.pt", "devices": {"cpu": 8}}])) == {}


@pytest.mark.parametrize(
    "forward,key",
    [
        ({"weights_device": "cpu", "batch_device": "cpu", "device_type": "cpu"}, "model-on-cpu"),
        ({"batch_device": "cpu"}, "batch-device"),
    ],
)
def test_the_model_or_the_batch_left_off_the_gpu_is_found(forward, key):
    assert set(found(gpu_run(forward))) == {key}


def test_a_read_back_each_step_on_a_gpu_says_it_waited_for_the_queue():
    timed = [{"reads": 1, "syncs": 1, "clock_reads": 0} for _ in range(5)]
    assert "1.0 of them waited for the GPU's queue" in found(gpu_run(timed=timed))["sync-per-step"]


def test_a_scaler_with_float16_is_right_and_with_bfloat16_is_found():
    assert "scaler-bf16" in found(gpu_run(scaler_calls=24))
    assert found(gpu_run({"autocast_dtype": "float16"}, scaler_calls=24)) == {}
