"""profile-step: torch.profiler on the MNIST step: operators, phases, the trace file, MFU.
Behaviour only: no test compares timings with fixed numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from experiment_runs import run_experiment
from planted_peaks import plant_peak

from tutor import experiments, paths
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.profile_step import PHASES, _busy_and_gaps, device_time_by_phase
from tutor.experiments.spec import COMMON_METRICS
from tutor.measurement import peak as matmul_peak

MNIST_MLP_MACS = 784 * 256 + 256 * 128 + 128 * 10  # 234,752
QUICK = experiments.get("profile-step").quick


def _plant(tflops: float) -> None:
    plant_peak(tflops)


@pytest.fixture(scope="module", autouse=True)
def peak_cache(tmp_path_factory):
    """A peak file of this module's own, with a peak far above what the MLP reaches on a CPU."""
    path = tmp_path_factory.mktemp("peak") / "peaks.json"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matmul_peak, "cache_file", lambda: path)
        _plant(1000.0)
        yield path


def _notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


@pytest.fixture(scope="module")
def cpu_run(peak_cache):
    events, m = run_experiment("profile-step", QUICK, "cpu")
    yield events, m
    Path(m["trace_path"]).unlink(missing_ok=True)  # the scratch file this run kept


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("profile-step").metrics)
    assert m["device"] == "cpu"


def test_gpu_figures_are_not_measured_on_a_cpu_and_the_note_says_why(cpu_run):
    events, m = cpu_run
    assert m["kernels_per_step"] is None and m["gpu_busy_share"] is None and m["launch_gap_seconds"] is None
    notes = _notes(events)
    assert "No GPU here" in notes and "GPU-Util" in notes and "GPU-Util is not MFU" in notes


def test_phase_shares_come_from_the_record_function_labels(cpu_run):
    events, m = cpu_run
    assert sum(m[f"{k}_share"] for k in PHASES) == pytest.approx(1.0)
    assert all(m[f"{k}_share"] > 0 for k in PHASES)
    phases = next(e for e in events if isinstance(e, Table) and e.title.startswith("The step by"))
    assert [row[0] for row in phases.rows] == list(PHASES)


def test_the_top_operators_are_listed_by_self_time(cpu_run):
    events, m = cpu_run
    table = next(e for e in events if isinstance(e, Table) and e.title.startswith("Top"))
    assert table.columns == ["operator", "calls/step", "self CPU ms/step", "share"]
    assert table.rows[0][0] == m["top_op"] and 0 < len(table.rows) <= 10
    names = [row[0] for row in table.rows]
    assert not set(names) & set(PHASES) and not any(n.startswith("ProfilerStep") for n in names)
    shares = [float(row[-1].rstrip("%")) for row in table.rows]
    assert shares == sorted(shares, reverse=True) and 0 < m["top_op_share"] <= 1
    assert m["ops_per_step"] > 10  # a step is dozens of operator calls: fc layers, ReLU, loss, Adam


def test_mfu_is_the_mlps_flops_over_the_step_time_and_the_measured_peak(cpu_run):
    events, m = cpu_run
    assert m["flops_per_step"] == 6 * MNIST_MLP_MACS * 64
    assert m["achieved_tflops"] == pytest.approx(m["flops_per_step"] / m["step_seconds"] / 1e12)
    assert m["peak_tflops"] == 1000.0  # the cached peak, reused
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / m["peak_tflops"])
    assert "MFU =" in _notes(events) and "Measuring" not in _notes(events)


def test_mfu_reports_the_interval_of_its_timed_stretches_and_lies_within_it(cpu_run):
    """The unprofiled steps are timed in stretches (3 of one step each here): step_seconds is the
    median stretch's, and mfu_low / mfu_high the median's interval (3 stretches: their whole range)."""
    events, m = cpu_run
    assert m["mfu_low"] is not None and m["mfu_high"] is not None
    assert 0 < m["mfu_low"] <= m["mfu"] <= m["mfu_high"]
    assert "the median of 3 stretches of steps" in _notes(events)


def test_one_timed_step_is_one_stretch_with_no_spread(tmp_path):
    _, m = run_experiment("profile-step", {**QUICK, "steps": 1, "trace": str(tmp_path / "t.json")}, "cpu")
    assert m["mfu"] > 0 and m["mfu_low"] is None and m["mfu_high"] is None


def test_the_profiler_slows_what_it_measures_so_mfu_uses_the_unprofiled_time(cpu_run):
    events, m = cpu_run
    assert m["step_seconds"] > 0 and m["profiled_step_seconds"] > 0
    assert "read shares from it, time without it" in _notes(events)
    steps = [e for e in events if isinstance(e, Step)]
    assert [s.label for s in steps] == ["timed", "profiled"]


def test_the_trace_is_a_chrome_trace_with_the_labels_in_the_scratch_dir(cpu_run):
    events, m = cpu_run
    path = Path(m["trace_path"])
    assert path.parent == paths.scratch_dir() and path.stat().st_size == m["trace_bytes"]
    trace = json.loads(path.read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert set(PHASES) <= names and "aten::mm" in names
    assert str(path) in _notes(events) and "ui.perfetto.dev" in _notes(events)


def test_a_trace_path_the_learner_names_is_written_there(tmp_path):
    target = tmp_path / "traces" / "step.json"
    events, m = run_experiment("profile-step", {**QUICK, "steps": 1, "trace": str(target)}, "cpu")
    assert m["trace_path"] == str(target) and target.is_file()
    assert "removed after a day" not in _notes(events)


def test_a_trace_path_that_is_a_folder_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"trace=.* is a folder"):
        list(experiments.start("profile-step", {"trace": str(tmp_path) + "/"}, device="cpu"))


def test_a_lesson_may_not_set_the_trace_file():
    assert experiments.get("profile-step").file_params() == ["trace"]


def test_a_run_faster_than_the_cached_peak_raises_it(tmp_path, monkeypatch):
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: tmp_path / "peaks.json")
    _plant(1e-9)
    events, m = run_experiment("profile-step", {**QUICK, "trace": str(tmp_path / "t.json")}, "cpu")
    # raised to the fastest stretch of steps: the median stretch's MFU stays at or below 100%
    assert m["peak_tflops"] >= m["achieved_tflops"] and 0 < m["mfu"] <= 1
    assert m["mfu_high"] == pytest.approx(1.0)  # 3 stretches of 1 step: the highest set the raised peak
    assert "raised to this run's fastest figure" in _notes(events)


def test_busy_share_and_gaps_from_kernel_spans():
    spans = [(0, 10), (20, 30), (25, 40), (45, 50)]  # ns; the third overlaps the second
    busy, gaps = _busy_and_gaps(spans, (0, 100))
    assert busy == pytest.approx((10 + 10 + 10 + 5) / 100)
    assert gaps == pytest.approx([10e-9, 5e-9])


def _event(name, thread, start_us, end_us, kernel_us=0.0, annotation=False, device=torch.autograd.DeviceType.CPU):
    """A FunctionEvent as a CUDA profile makes one, with `kernel_us` of kernels it launched itself."""
    from torch.autograd.profiler_util import FunctionEvent

    e = FunctionEvent(
        id=0,
        name=name,
        thread=thread,
        start_us=start_us,
        end_us=end_us,
        use_device="cuda",
        is_user_annotation=annotation,
        device_type=device,
    )
    if kernel_us:
        e.append_kernel("kernel", 0, kernel_us)
    return e


def test_kernels_go_to_the_phase_whose_window_holds_them_whatever_their_thread():
    """On CUDA, backward's operators run on autograd's device thread (2), outside the main thread's
    (1) "backward" label as the profiler nests them: attributed by time, they count for backward."""
    from torch.autograd.profiler_util import EventList

    events = EventList(
        [
            _event("forward", 1, 0, 50, annotation=True),
            _event("aten::addmm", 1, 5, 15, kernel_us=3),
            _event("backward", 1, 60, 160, annotation=True),
            _event("aten::mm", 2, 70, 80, kernel_us=5),
            _event("autograd::engine::evaluate_function", 2, 85, 120),  # a parent: its child's kernels once
            _event("aten::mm", 2, 90, 100, kernel_us=4),
            # the GPU-side copy of a label (30 us of device time): neither a window nor an operator
            _event("backward", 0, 0, 30, annotation=True, device=torch.autograd.DeviceType.CUDA),
            _event("aten::add_", 1, 200, 210, kernel_us=7),  # outside every phase
        ]
    )
    events._populate_cpu_children()  # as prof.events() does: nesting within each thread
    assert sum(e.device_time_total for e in events if e.name == "backward" and e.thread == 1) == 0  # the bug
    us = device_time_by_phase(list(events))
    assert us == {"data": 0.0, "forward": 3.0, "backward": 9.0, "optimizer": 0.0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_measures_kernels_their_gaps_and_a_busy_share_far_above_mfu(tmp_path):
    events, m = run_experiment("profile-step", {"steps": 20, "trace": str(tmp_path / "t.json")}, "cuda")
    assert m["kernels_per_step"] > 10 and 0 < m["gpu_busy_share"] <= 1 and m["launch_gap_seconds"] >= 0
    # the MNIST MLP keeps a kernel resident far more of the time than it uses the GPU's arithmetic
    assert m["mfu"] < m["gpu_busy_share"]
    table = next(e for e in events if isinstance(e, Table) and e.title.startswith("Top"))
    assert "self GPU ms/step" in table.columns
    notes = _notes(events)
    assert "nvidia-smi's GPU-Util" in notes and "No GPU here" not in notes


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_backward_is_credited_with_its_kernels(tmp_path):
    """Backward's kernels are launched from autograd's own thread; they still count for "backward"."""
    events, _ = run_experiment("profile-step", {"steps": 10, "trace": str(tmp_path / "t.json")}, "cuda")
    table = next(e for e in events if isinstance(e, Table) and e.title.startswith("The step by"))
    gpu_ms = {row[0]: float(row[-1].replace(",", "")) for row in table.rows}
    assert gpu_ms["backward"] > 0 and gpu_ms["forward"] > 0


@pytest.mark.gpu
def test_an_accelerator_profiles_the_step(accelerator, tmp_path):
    _, m = run_experiment("profile-step", {"steps": 5, "trace": str(tmp_path / "t.json")}, accelerator)
    assert m["device"].startswith(accelerator) and Path(m["trace_path"]).is_file()
    assert sum(m[f"{k}_share"] for k in PHASES) == pytest.approx(1.0)


def test_the_profilers_native_log_lines_do_not_reach_the_learner(capfd):
    """kineto prints USDT/ERROR lines to the process's own stdout and stderr at start and stop."""
    from tutor import experiments as registry

    events = list(registry.start("profile-step", {"steps": 2}, device="cpu"))
    assert events[-1].metrics["mfu"] is not None
    out, err = capfd.readouterr()
    assert "USDT" not in out + err and "gpuGetDeviceCount" not in out + err
    print("still printing")  # the process's stdout works again afterwards
    assert capfd.readouterr().out == "still printing\n"


def test_the_mfu_note_says_why_the_same_mlps_mfu_differs_in_pipeline_breakdown(cpu_run):
    """Issue 35: the same MLP's MFU was 22.5% here and 13.8% in the Iron Law's run, nothing said."""
    events, _ = cpu_run
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert (
        "pipeline-breakdown (the Iron Law's run) measures this same MLP with its data already on the device, "
        "without this run's copy of each batch"
    ) in notes
