"""The `amp-compare` experiment and the autocast settings behind it."""

from __future__ import annotations

import pytest
import torch

from tutor import experiments
from tutor.experiments import devices, training
from tutor.experiments.devices import Device
from tutor.experiments.events import Finished, Note, Started, Table
from tutor.experiments.training import OFF, autocast_settings

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
SMALL = {"train_samples": 2048, "test_samples": 512, "batch_size": 128}


def run(values: dict, device: str = "cpu") -> list:
    events = list(experiments.start("amp-compare", values, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    declared = experiments.get("amp-compare").metrics
    assert set(declared) <= set(events[-1].metrics)
    return events


CPU_NO_BF16 = Device("cpu", None, "Test CPU", bf16=False, threads=2)
CPU_BF16 = Device("cpu", None, "Test CPU", bf16=True, threads=2)
OLD_GPU = Device("cuda", 0, "Old GPU", capability=(6, 1), bf16=False, fp16=True, tensor_cores=False)
NEW_GPU = Device("cuda", 0, "New GPU", capability=(9, 0), bf16=True, fp16=True, tensor_cores=True)


def test_autocast_settings_choose_per_device():
    assert autocast_settings("off", NEW_GPU) == OFF and not OFF.enabled and OFF.dtype_name == "off"
    amp = autocast_settings("auto", NEW_GPU)
    assert amp.enabled and amp.dtype == torch.float16 and amp.use_scaler and "GradScaler" in amp.note
    amp = autocast_settings("auto", CPU_BF16)
    assert amp.enabled and amp.dtype == torch.bfloat16 and not amp.use_scaler and "emulated" not in amp.note
    assert autocast_settings("bf16", NEW_GPU).dtype == torch.bfloat16
    assert not autocast_settings("bf16", NEW_GPU).use_scaler


def test_cpu_without_native_bf16_is_warned():
    amp = autocast_settings("auto", CPU_NO_BF16)
    assert amp.dtype == torch.bfloat16 and "emulated" in amp.note and "slower" in amp.note


@pytest.mark.parametrize(
    "amp, dev, emulated",
    [
        ("bf16", CPU_NO_BF16, True),
        ("bf16", CPU_BF16, False),
        ("fp16", CPU_BF16, True),  # no CPU has a fast float16 matmul path
        ("fp16", NEW_GPU, False),
        ("fp16", OLD_GPU, False),
        ("off", CPU_NO_BF16, False),
    ],
)
def test_emulated_is_the_cpu_without_a_fast_path(amp, dev, emulated):
    assert autocast_settings(amp, dev).emulated is emulated


MAC = Device("mps", None, "Apple M-test (MPS)")


def test_scaler_probe_passes_where_grad_scaler_works():
    training._scaler_step_error.cache_clear()
    assert training._scaler_step_error("cpu") is None


@pytest.fixture
def mps_without_scaler(monkeypatch):
    """An MPS whose autocast works but whose GradScaler step fails as in torch 2.5-2.7."""
    monkeypatch.setattr(training, "_mps_autocast_ok", lambda dtype: True)
    monkeypatch.setattr(
        training,
        "_scaler_step_error",
        lambda device: "TypeError: Cannot convert a MPS Tensor to float64 dtype",
    )


def test_mps_auto_falls_back_to_bf16_when_grad_scaler_fails(mps_without_scaler):
    amp = autocast_settings("auto", MAC)
    assert amp.enabled and amp.dtype == torch.bfloat16 and not amp.use_scaler
    assert "GradScaler does not work on MPS" in amp.note and "float64" in amp.note and "bfloat16" in amp.note


def test_mps_fp16_runs_unscaled_when_grad_scaler_fails(mps_without_scaler):
    amp = autocast_settings("fp16", MAC)
    assert amp.enabled and amp.dtype == torch.float16 and not amp.use_scaler
    assert "without loss scaling" in amp.note and "float64" in amp.note
    assert not training.make_scaler(amp, "cpu").is_enabled()


def test_mps_auto_without_bf16_keeps_fp16_unscaled(monkeypatch, mps_without_scaler):
    monkeypatch.setattr(training, "_mps_autocast_ok", lambda dtype: dtype == torch.float16)
    amp = autocast_settings("auto", MAC)
    assert amp.dtype == torch.float16 and not amp.use_scaler and "without loss scaling" in amp.note


def test_mps_with_a_working_scaler_uses_it(monkeypatch):
    monkeypatch.setattr(training, "_mps_autocast_ok", lambda dtype: True)
    monkeypatch.setattr(training, "_scaler_step_error", lambda device: None)
    amp = autocast_settings("auto", MAC)
    assert amp.dtype == torch.float16 and amp.use_scaler and "GradScaler" in amp.note


def test_bf16_on_pre_ampere_gpu_is_refused_clearly():
    with pytest.raises(ValueError, match="fp16"):
        autocast_settings("bf16", OLD_GPU)
    assert "tensor cores" in autocast_settings("fp16", OLD_GPU).note


def test_amp_compare_on_cpu_uses_bf16():
    events = run(SMALL)
    m = events[-1].metrics
    assert m["device"] == "cpu" and m["amp_dtype"] == "bfloat16" and m["grad_scaler"] is False
    assert m["fp32_peak_mb"] is None and m["amp_peak_mb"] is None
    assert m["fp32_accuracy"] > 0.5 and m["amp_accuracy"] > 0.5
    assert abs(m["fp32_accuracy"] - m["amp_accuracy"]) < 0.1  # same data, seed, start weights
    assert m["speedup_low"] <= m["speedup"] <= m["speedup_high"]  # steps in turns, not the epochs' ratio
    table = next(e for e in events if isinstance(e, Table))
    assert len(table.rows) == 2 and "bfloat16" in table.rows[1][0]
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "Peak memory" in notes and "bfloat16" in notes
    if not devices.resolve("cpu").bf16:
        assert "emulated" in notes
    # The result is explained whichever way it went.
    assert any(
        e.level in ("result", "warning") and ("faster" in e.text or "slower" in e.text)
        for e in events
        if isinstance(e, Note)
    )


def test_fp16_on_cpu_uses_grad_scaler():
    m = run({**SMALL, "amp": "fp16", "train_samples": 1024})[-1].metrics
    assert m["amp_dtype"] == "float16" and m["grad_scaler"] is True
    assert m["amp_accuracy"] > 0.3


def test_the_speedup_is_the_median_of_rounds_in_turns_with_its_interval(monkeypatch):
    """Issue 37: paired repeats, enough of them. Whatever the epochs, the speedup graded comes from
    10 rounds of steps, the two precisions taking turns: the median of the rounds' ratios, its
    interval from their order statistics (the 2nd to the 9th of 10)."""
    from tutor.experiments import amp_compare

    fp32 = [0.2] * 10
    amp = [0.2 / r for r in (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 3.0)]
    monkeypatch.setattr(amp_compare, "seconds_in_turns", lambda ways, device, **_: {"fp32": fp32, "amp": amp})
    events = run({**SMALL, "train_samples": 512})  # one epoch each: the speedup does not need more
    m = events[-1].metrics
    assert m["speedup"] == pytest.approx(1.45) and (m["speedup_low"], m["speedup_high"]) == pytest.approx((1.1, 1.8))
    assert any(
        "the speedup is the median of 10 rounds, its 98% interval" in e.text for e in events if isinstance(e, Note)
    )


def test_the_spread_is_declared_with_what_none_means():
    spec = experiments.get("amp-compare")
    for name in ("speedup_low", "speedup_high"):
        assert spec.metrics[name].unit == "x" and "None" in spec.metrics[name].description
        assert spec.metrics[name].none != "n/a"


@cuda
@pytest.mark.gpu
def test_amp_compare_on_cuda_measures_memory():
    events = run(SMALL, device="cuda")
    m = events[-1].metrics
    assert m["device"].startswith("cuda") and m["amp_dtype"] == "float16" and m["grad_scaler"] is True
    assert m["fp32_peak_mb"] > 0 and m["amp_peak_mb"] > 0
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    # The baseline is named for what it holds: data, weights and the initial-weights copy.
    assert "train and test tensors" in notes and "copy of the initial weights" in notes
    assert "above the baseline" in notes
    assert m["fp32_accuracy"] > 0.5 and m["amp_accuracy"] > 0.5


def test_the_float32_baseline_runs_at_full_precision_and_restores_the_learners(monkeypatch):
    """With TF32 allowed (precision 'high', as NVIDIA's containers set), the fp32 mode would be TF32 on
    Ampere+: it runs at 'highest', and the learner's setting is back for the autocast mode and after."""
    from tutor.experiments import amp_compare

    seen = {}
    real = amp_compare._train_mode

    def spy(label, *args, **kwargs):
        seen[label] = torch.get_float32_matmul_precision()
        yield from real(label, *args, **kwargs)

    monkeypatch.setattr(amp_compare, "_train_mode", spy)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        events = run({**SMALL, "train_samples": 512})
        after = torch.get_float32_matmul_precision()
    finally:
        torch.set_float32_matmul_precision(before)
    assert seen == {"fp32": "highest", "amp": "high"} and after == "high"
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "precision 'high'" in notes and "true float32" in notes


def test_no_precision_note_when_float32_was_already_full():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        events = run({**SMALL, "train_samples": 512})
    finally:
        torch.set_float32_matmul_precision(before)
    assert not any("true float32" in e.text for e in events if isinstance(e, Note))


@cuda
@pytest.mark.gpu
def test_amp_compare_on_cuda_with_tf32_allowed_times_true_float32(monkeypatch):
    from tutor.experiments import amp_compare

    seen = {}
    real = amp_compare._train_mode

    def spy(label, *args, **kwargs):
        for item in real(label, *args, **kwargs):
            seen.setdefault(label, set()).add(
                (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
            )
            yield item

    monkeypatch.setattr(amp_compare, "_train_mode", spy)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        m = run(SMALL, device="cuda")[-1].metrics
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)
    assert seen["fp32"] == {("highest", False)} and seen["amp"] == {("high", True)}
    assert m["fp32_accuracy"] > 0.5
