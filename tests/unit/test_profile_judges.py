"""The judges of a profiled window and a reported peak (tutor/exercises/behaviour.py), on what the
observer records (tutor/exercises/observe.py): the CUDA cases without a GPU, and every cause said.

The real programs, on this machine's device, are in tests/exercises/test_profile_exercise.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tutor.exercises.behaviour import Context, judge
from tutor.exercises.names import BEHAVIOURS

MIB = 2**20
WEIGHTS = 235_146 * 4  # the course MLP's float32 weights: 0.90 MiB
# 5 profiled steps after 25 others: work counts module calls, backward passes and optimizer steps.
WINDOW: dict[str, Any] = {
    "line": 50,
    "stop_line": 50,
    "start": {"work": 100, "trained": 25, "steps": 25},
    "end": {"work": 120, "trained": 30, "steps": 30},
    "events": 25_000,
    "ops": 17_000,
    "matmuls": 30,
    "backward": 60,
    "optimizer_steps": 5,
    "kernels": 0,
    "device_us": 0.0,
    "top": [["aten::to", 2370], ["aten::copy_", 1735], ["aten::view", 1305]],
}


def _at(work: int, steps: int, line: int, **reading: Any) -> dict[str, Any]:
    return {"line": line, "work": work, "trained": steps, "steps": steps, **reading}


def _peak(mib: float = 5.0, work: int = 120, line: int = 60, kind: str = "cuda_peak") -> dict[str, Any]:
    return _at(work, 30, line, kind=kind, bytes=mib * MIB)


RESET = _at(100, 25, 45)  # right before the profiled steps


def _ctx(
    report: Any = 5.0,
    device: str = "cuda",
    readings: list[dict[str, Any]] | None = None,
    resets: list[dict[str, Any]] | None = None,
    windows: list[dict[str, Any]] | None = None,
    profilers: list[dict[str, Any]] | None = None,
    platform: str = "linux",
    **kw: Any,
) -> Context:
    observed = {
        "models": [
            {
                "train_calls": 30,
                "devices": {f"{device}/{device}": 30},
                "param_bytes": WEIGHTS,
                "last_train_work": 118,
            }
        ],
        "optimizer_steps": 30,
        "memory": {
            "readings": [_peak()] if readings is None else readings,
            "resets": [RESET] if resets is None else resets,
            "platform": platform,
        },
        "profiler": {"profilers": profilers or [], "windows": [WINDOW] if windows is None else windows},
    }
    reports = {} if report is None else {"peak_memory_mb": report}
    return Context(observed, "", reports=reports, **kw)


def _cause(name: str, ctx: Context) -> str:
    verdict = judge(name, ctx)
    assert not verdict.passed and verdict.judged, verdict
    return verdict.cause


def test_lint_knows_both_checks() -> None:
    assert {"profiles_training_steps", "peak_memory_measured"} <= BEHAVIOURS


# ---------------------------------------------------------------- the profiled window


def test_a_window_of_whole_training_steps_passes() -> None:
    assert judge("profiles_training_steps", _ctx()).passed


def test_a_window_of_gpu_kernels_alone_passes_when_steps_ran_in_it() -> None:
    # activities=[ProfilerActivity.CUDA]: no CPU ops, but the kernels of the steps that ran.
    kernels = {**WINDOW, "ops": 0, "matmuls": 0, "backward": 0, "optimizer_steps": 0, "kernels": 450}
    assert judge("profiles_training_steps", _ctx(windows=[kernels])).passed
    idle = {**kernels, "end": WINDOW["start"]}  # kernels, but no training step ran inside
    assert not judge("profiles_training_steps", _ctx(windows=[idle])).passed


def test_no_profiler_at_all() -> None:
    assert _cause("profiles_training_steps", _ctx(windows=[])) == (
        "Your program never recorded a torch.profiler window: no `with profile(...)` block "
        "(or prof.start() and prof.stop()) ran around its training."
    )
    verdict = judge("profiles_training_steps", _ctx(windows=[], stopped=True, error_type="ValueError"))
    assert not verdict.judged  # it stopped for another reason before it got there


def test_a_schedule_never_stepped_records_nothing_and_explains_the_stop() -> None:
    profilers = [{"line": 41, "scheduled": True, "steps": 0}]
    ctx = _ctx(
        windows=[],
        profilers=profilers,
        stopped=True,
        error_type="AssertionError",
        error_message="Profiler must be initialized before getting key averages",
    )
    verdict = judge("profiles_training_steps", ctx)
    assert not verdict.passed and verdict.explains_stop
    assert verdict.cause == (
        "The profiler on line 41 recorded nothing: it was given a schedule, whose phases (wait, warmup, "
        "active) move on only at prof.step(), and prof.step() never ran. Reading its results then stopped "
        "the program (Profiler must be initialized before getting key averages)."
    )


def test_a_schedule_stepped_too_few_times() -> None:
    profilers = [{"line": 41, "scheduled": True, "steps": 2}]
    assert _cause("profiles_training_steps", _ctx(windows=[], profilers=profilers)) == (
        "The profiler on line 41 recorded nothing: prof.step() ran 2 times, too few for its schedule to "
        "pass its wait and warmup steps and record an active one."
    )


def test_the_wrong_region_names_what_it_recorded_and_where_the_steps_went() -> None:
    setup = {
        **WINDOW,
        "start": {"work": 0, "trained": 0, "steps": 0},
        "end": {"work": 0, "trained": 0, "steps": 0},
        "ops": 42,
        "matmuls": 0,
        "backward": 0,
        "optimizer_steps": 0,
        "top": [["aten::empty", 12], ["aten::uniform_", 6], ["aten::detach", 6]],
    }
    assert _cause("profiles_training_steps", _ctx(windows=[setup])) == (
        "The profiler window on line 50 recorded no layer's matrix multiply (aten::addmm, aten::mm): no "
        "forward pass ran in it (it recorded 42 ops, most often aten::empty, aten::uniform_ and aten::detach). "
        "30 training steps ran after it had stopped: profile some of them, inside the `with` block."
    )


@pytest.mark.parametrize(
    "missing, said",
    [
        ({"backward": 0, "optimizer_steps": 0}, "but not a backward pass or an optimizer step"),
        ({"optimizer_steps": 0}, "but not an optimizer step"),
    ],
)
def test_forward_passes_alone_are_not_a_training_step(missing: dict[str, int], said: str) -> None:
    evaluation = {**WINDOW, **missing, "start": WINDOW["end"]}
    cause = _cause("profiles_training_steps", _ctx(windows=[evaluation]))
    assert said in cause and cause.endswith("All 30 training steps ran before it started.")


def test_a_window_it_could_not_read_is_not_blamed() -> None:
    verdict = judge("profiles_training_steps", _ctx(windows=[{**WINDOW, "matmuls": 0, "unreadable": True}]))
    assert not verdict.passed and not verdict.judged


# ---------------------------------------------------------------- the peak on CUDA


@pytest.mark.parametrize("report", [5.0, 5.04, 5 * MIB / 1e6, round(5 * MIB / 1e6, 1)])
def test_cudas_peak_after_a_reset_passes_in_mib_or_mb(report: float) -> None:
    assert judge("peak_memory_measured", _ctx(report)).passed


def test_max_memory_reserved_and_memory_stats_peaks_count_too() -> None:
    reserved = _peak(8.0, kind="cuda_reserved_peak")
    assert judge("peak_memory_measured", _ctx(8.0, readings=[reserved])).passed


def test_a_peak_never_reset_counts_from_the_programs_start() -> None:
    assert _cause("peak_memory_measured", _ctx(resets=[])) == (
        "No torch.cuda.reset_peak_memory_stats() ran before torch.cuda.max_memory_allocated() on line 60 "
        "(5.0 MiB): it is the most held since the program started, the model's creation included, and the "
        "25 training steps before the profiled ones."
    )


def test_a_reset_before_the_warm_up_counts_the_warm_up() -> None:
    early = _at(2, 0, 20)
    assert _cause("peak_memory_measured", _ctx(resets=[early])) == (
        "torch.cuda.reset_peak_memory_stats() on line 20 ran before 25 training steps that came ahead of "
        "the profiled ones: torch.cuda.max_memory_allocated() on line 60 (5.0 MiB) counts those too."
    )


def test_a_reset_inside_or_after_the_window_misses_it() -> None:
    late = _at(119, 30, 55)
    assert _cause("peak_memory_measured", _ctx(resets=[late])).startswith(
        "torch.cuda.reset_peak_memory_stats() on line 55 ran after the profiled steps had begun"
    )


def test_a_peak_read_before_the_profiled_steps() -> None:
    early = _peak(work=99, line=48)
    early["steps"] = 25
    assert _cause("peak_memory_measured", _ctx(readings=[early], resets=[_at(90, 25, 44)])) == (
        "Your peak_memory_mb is torch.cuda.max_memory_allocated() on line 48 (5.0 MiB), read before the "
        "profiled steps had finished (5 training steps came after it): it cannot count them."
    )


@pytest.mark.parametrize(
    "kind, said",
    [
        ("max_rss", "the host process's memory. The model trained on the GPU, whose memory it does not count."),
        ("cuda_now", "what is held now, after the steps freed their activations, not the most held at once."),
        ("tracemalloc_peak", "tracemalloc counts Python's own objects only"),
        ("max_rss_children", "the peak of the processes this one started, not its own."),
    ],
)
def test_the_wrong_counter_on_cuda_is_named(kind: str, said: str) -> None:
    cause = _cause("peak_memory_measured", _ctx(5.0, readings=[_peak(kind=kind)]))
    assert said in cause, cause


# ---------------------------------------------------------------- the peak on a CPU and MPS


def test_ru_maxrss_after_the_steps_passes_on_a_cpu_with_no_reset() -> None:
    rss = _peak(700.0, kind="max_rss")
    assert judge("peak_memory_measured", _ctx(700.0, device="cpu", readings=[rss], resets=[])).passed
    assert judge("peak_memory_measured", _ctx(700.0, device="mps", readings=[rss], resets=[])).passed


def test_cudas_counter_on_a_cpu_reads_nothing() -> None:
    zero = _peak(0.0)
    cause = _cause("peak_memory_measured", _ctx(0.0, device="cpu", readings=[zero]))
    assert cause == (
        "Your peak_memory_mb is torch.cuda.max_memory_allocated() on line 60 (0.0 MiB), but the model "
        "trained on the cpu: torch.cuda's counters count GPU tensors only."
    )


@pytest.mark.parametrize(
    "platform, report, said",
    [
        ("linux", 700 * 1024, "as it comes, in kilobytes on Linux. Divide it by 1024 for MiB."),
        ("darwin", 700 * 1024, "On macOS ru_maxrss comes in bytes: divide it by 2**20 for MiB."),
        ("linux", 700 * MIB, "in bytes. Divide bytes by 2**20 for MiB."),
        ("linux", 700 / 1024, "in gigabytes; peak_memory_mb is in megabytes."),
    ],
)
def test_another_unit_is_named(platform: str, report: float, said: str) -> None:
    rss = _peak(700.0, kind="max_rss")
    cause = _cause("peak_memory_measured", _ctx(report, device="cpu", readings=[rss], platform=platform))
    assert cause.endswith(said), cause


# ---------------------------------------------------------------- made up, missing, not a number


def test_a_figure_typed_in_is_not_a_measurement() -> None:
    assert _cause("peak_memory_measured", _ctx(8.2 * 1024, readings=[])) == (
        "You reported peak_memory_mb=8,397, but your program read no memory figure in this run (no "
        "torch.cuda.max_memory_allocated()): a number typed in, such as the lab's 8.2 GB, is not a "
        "measurement of this run."
    )
    cause = _cause("peak_memory_measured", _ctx(0.5, device="cpu", readings=[]))
    assert "(no resource.getrusage(...).ru_maxrss)" in cause
    assert cause.endswith("It is less than the model's weights alone (0.90 MiB).")


def test_a_figure_no_reading_returned_lists_what_was_read() -> None:
    assert _cause("peak_memory_measured", _ctx(12.0)) == (
        "You reported peak_memory_mb=12, but no memory figure your program read matches it: it read "
        "torch.cuda.max_memory_allocated() on line 60 (5.0 MiB)."
    )


def test_the_difference_of_two_readings_is_not_the_peak() -> None:
    before = _at(100, 25, 46, kind="cuda_now", bytes=1.0 * MIB)
    cause = _cause("peak_memory_measured", _ctx(4.0, readings=[before, _peak()]))
    assert cause.startswith(
        "You reported peak_memory_mb=4: that is the difference of two readings, torch.cuda.max_memory_allocated() "
        "on line 60 (5.0 MiB) less torch.cuda.memory_allocated() on line 46 (1.0 MiB)"
    )


def test_no_report_and_a_report_that_is_not_a_number() -> None:
    assert _cause("peak_memory_measured", _ctx(None)) == (
        "Your program did not report peak_memory_mb: call report(peak_memory_mb=...)."
    )
    assert not judge("peak_memory_measured", _ctx(None, stopped=True)).judged
    for value in ("lots", True, "nan"):
        assert "which is not a number of megabytes" in _cause("peak_memory_measured", _ctx(value))
