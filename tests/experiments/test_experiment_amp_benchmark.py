"""amp-benchmark: CPU vs GPU float32 vs TF32 vs mixed precision, with honest None where a case cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments import amp_benchmark, devices
from tutor.experiments.devices import Device
from tutor.experiments.events import Epoch, Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.training import Amp

QUICK = experiments.get("amp-benchmark").quick  # width 64, 1 layer, 1024 images, 512 on the CPU


def notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


# As in conftest.py (module-scoped fixtures run before its function-scoped autouse fixture).
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    data_dir = SHARED_DATA if SHARED_DATA.is_dir() else tmp_path_factory.mktemp("no-mnist")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUTOR_DATA_DIR", str(data_dir))
        mp.setenv("GPUTUTOR_HOME", str(tmp_path_factory.mktemp("home")))
        return run_experiment("amp-benchmark", QUICK, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("amp-benchmark").metrics)
    assert m["device"] == "cpu" and m["accelerator"] == "none" and m["amp_dtype"] == "bfloat16"
    assert m["parameters"] == 784 * 64 + 64 + 64 * 10 + 10


def test_without_a_gpu_the_gpu_cases_are_none_and_said_so(cpu_run):
    events, m = cpu_run
    for key in (
        "fp32_seconds",
        "tf32_seconds",
        "gpu_speedup",
        "tf32_speedup",
        "fp32_accuracy",
        "tf32_accuracy",
        "fp32_peak_mb",
        "tf32_peak_mb",
        "amp_peak_mb",
    ):
        assert m[key] is None, key
    text = notes(events)
    if devices.accelerator() is None:
        assert "No GPU here" in text and "No GPU numbers are made up" in text
    assert "projected" in text and "512 of 1024" in text


def test_cpu_figures_are_consistent(cpu_run):
    _, m = cpu_run
    assert m["cpu_seconds"] > 0 and m["amp_seconds"] > 0
    assert m["amp_speedup"] == pytest.approx(m["cpu_seconds"] / m["amp_seconds"])
    assert m["best_case"] in {"cpu", "amp"}
    best = min(m["cpu_seconds"], m["amp_seconds"])
    assert m["best_speedup"] == pytest.approx(m["cpu_seconds"] / best)
    assert 0 <= m["cpu_accuracy"] <= 1 and 0 <= m["amp_accuracy"] <= 1


def test_one_epoch_has_no_speedup_spread(cpu_run):
    _, m = cpu_run  # epochs=1: each case timed once, so nothing says how far its time moves
    assert m["amp_speedup"] is not None and m["amp_speedup_low"] is None and m["amp_speedup_high"] is None


def test_two_epochs_take_turns_and_pair_their_ratios():
    """Issue 37: the cases train in turns, an epoch each, so the k-th epochs ran side by side; the
    speedup is the median of the paired ratios (2 here: their mean) and its interval their range."""
    events, m = run_experiment("amp-benchmark", {**QUICK, "train_samples": 512, "cpu_samples": 256, "epochs": 2}, "cpu")
    epochs = [e for e in events if isinstance(e, Epoch)]
    assert [e.label for e in epochs] == ["cpu", "amp", "cpu", "amp"]  # in turns, not one case then the other
    cpu, amp = ([e.seconds for e in epochs if e.label == k] for k in ("cpu", "amp"))
    cpu_factor, amp_factor = 512 / m["cpu_images_timed"], 512 / m["amp_images_timed"]
    ratios = sorted(c * cpu_factor / (a * amp_factor) for c, a in zip(cpu, amp))
    assert (m["amp_speedup_low"], m["amp_speedup_high"]) == (pytest.approx(ratios[0]), pytest.approx(ratios[1]))
    assert m["amp_speedup"] == pytest.approx(sum(ratios) / 2)
    assert "the speedup is the median of 2 paired epochs" in notes(events)
    assert "train in turns, one epoch each" in notes(events)


def test_the_spread_is_declared_with_what_none_means():
    spec = experiments.get("amp-benchmark")
    for name in ("amp_speedup_low", "amp_speedup_high"):
        assert spec.metrics[name].unit == "x" and "None" in spec.metrics[name].description
        assert spec.metrics[name].none != "n/a"


def test_table_has_a_row_per_case_and_marks_projections(cpu_run):
    events, _ = cpu_run
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0].split()[0] for row in table.rows] == ["cpu", "amp"]
    assert all(row[1].endswith("*") for row in table.rows) and "projected from 512" in table.title
    assert table.rows[0][2] == "1.00x"
    width = sum(max(len(c), *(len(r[i]) for r in table.rows)) + 3 for i, c in enumerate(table.columns)) + 1
    assert width <= 80


def test_the_cases_are_drawn_as_bars_of_the_tables_seconds(cpu_run):
    events, _ = cpu_run
    table = next(e for e in events if isinstance(e, Table))
    [chart] = [e.text for e in events if isinstance(e, Note) and e.level == "figure"]
    lines = chart.splitlines()
    assert all(line.endswith(row[1]) for line, row in zip(lines, table.rows, strict=False))
    assert "cpu float32 |" in lines[0] and "projected" in lines[-1]


def test_training_is_streamed_per_case(cpu_run):
    events, _ = cpu_run
    assert {e.label for e in events if isinstance(e, Step)} == {"cpu", "amp"}
    assert {e.label for e in events if isinstance(e, Epoch)} == {"cpu", "amp"}


def test_same_seed_same_cpu_accuracy(cpu_run):
    _, m = cpu_run
    _, again = run_experiment("amp-benchmark", QUICK, "cpu")
    assert again["cpu_accuracy"] == m["cpu_accuracy"]


def test_tf32_settings_are_left_as_found():
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = False
        run_experiment("amp-benchmark", {**QUICK, "train_samples": 256, "cpu_samples": 256}, "cpu")
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]


class _StandIn(Device):
    """An 'accelerator' that runs on the CPU: exercises the accelerator path's bookkeeping."""

    @property
    def torch_device(self) -> str:
        return "cpu"


def test_accelerator_path_with_a_stand_in_device(monkeypatch):
    dev = _StandIn("mps", None, "Stand-in GPU")
    cpu = devices.resolve("cpu")
    monkeypatch.setattr(
        amp_benchmark,
        "autocast_settings",
        lambda amp, d: Amp(True, torch.bfloat16, False, "autocast to bfloat16 (stand-in).", cpu),
    )
    events = list(amp_benchmark.measure(experiments.get("amp-benchmark").make_params(QUICK), dev))
    m = events[-1].metrics
    assert set(experiments.get("amp-benchmark").metrics) <= set(m)
    assert m["accelerator"] == "Stand-in GPU" and m["tf32_seconds"] is None and m["amp_peak_mb"] is None
    # The accelerator cases train on all 1024 images, the CPU baseline on 512, projected to 1024.
    assert m["gpu_speedup"] == pytest.approx(m["cpu_seconds"] / m["fp32_seconds"])
    assert m["amp_speedup"] == pytest.approx(m["fp32_seconds"] / m["amp_seconds"])
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0].split()[0] for row in table.rows] == ["cpu", "fp32", "amp"]
    assert table.rows[0][1].endswith("*") and not table.rows[1][1].endswith("*")
    text = notes(events)
    assert "No tf32 case" in text and "not comparable" in text and "Accuracy after 1024 images" in text


def test_accelerator_path_pairs_float32_on_the_device_with_autocast(monkeypatch):
    dev = _StandIn("mps", None, "Stand-in GPU")
    cpu = devices.resolve("cpu")
    monkeypatch.setattr(
        amp_benchmark,
        "autocast_settings",
        lambda amp, d: Amp(True, torch.bfloat16, False, "autocast to bfloat16 (stand-in).", cpu),
    )
    params = experiments.get("amp-benchmark").make_params(
        {**QUICK, "train_samples": 512, "cpu_samples": 256, "epochs": 2}
    )
    events = list(amp_benchmark.measure(params, dev))
    m = events[-1].metrics
    fp32, amp = ([e.seconds for e in events if isinstance(e, Epoch) and e.label == k] for k in ("fp32", "amp"))
    ratios = sorted(f / a for f, a in zip(fp32, amp))  # paired: the device's float32 epoch beside autocast's
    assert m["amp_speedup_low"] == pytest.approx(ratios[0]) and m["amp_speedup_high"] == pytest.approx(ratios[1])
    assert m["amp_speedup_low"] <= m["amp_speedup"] <= m["amp_speedup_high"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_runs_every_case_and_restores_tf32():
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = False
        events, m = run_experiment("amp-benchmark", {**QUICK, "width": 512, "layers": 2}, "cuda")
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cudnn.allow_tf32 = before[1]
    has_tf32 = torch.cuda.get_device_capability() >= (8, 0)
    assert m["device"].startswith("cuda") and m["amp_dtype"] == "float16"
    assert m["cpu_seconds"] > 0 and m["fp32_seconds"] > 0 and m["amp_seconds"] > 0
    assert m["gpu_speedup"] > 0 and m["amp_speedup"] > 0
    assert (m["tf32_seconds"] is not None) is has_tf32 and (m["tf32_peak_mb"] is not None) is has_tf32
    assert isinstance(m["fp32_peak_mb"], float) and isinstance(m["amp_peak_mb"], float)
    assert m["fp32_peak_mb"] > 0 and m["amp_peak_mb"] > 0
    assert m["best_case"] in {"cpu", "fp32", "tf32", "amp"}
    table = next(e for e in events if isinstance(e, Table))
    expected = ["cpu", "fp32", "tf32", "amp"] if has_tf32 else ["cpu", "fp32", "amp"]
    assert [row[0].split()[0] for row in table.rows] == expected
    assert "Peak memory" in notes(events)
