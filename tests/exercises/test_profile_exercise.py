"""Exercise 4, profiled (`gpu-training-practice` ex4-profile): a torch.profiler window and the
peak memory, graded by what the program did.

The profiler's own events say whether its window held whole training steps; the memory figures
the program read (CUDA's counters, ru_maxrss, tracemalloc) say whether the peak it reported is
one of them, of the right kind, read after those steps. Correct programs in other styles pass;
each mistake fails with its cause first. That the lesson's solution passes and each of its
mistakes fails what it names is `lesson test`'s job (tests/system); the CUDA judgements without
a GPU are in tests/unit/test_profile_judges.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tutor.course.lesson import ExerciseStep
from tutor.course.loader import load_file
from tutor.exercises import grader
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "exercise_programs"

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


@pytest.fixture(scope="module")
def step() -> ExerciseStep:
    step = load_file(ROOT / "lessons" / "gpu-training-practice.yaml").step("ex4-profile")
    assert isinstance(step, ExerciseStep)
    return step


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "2500")  # 30 steps of 64 in the solution
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "100")


def _failed(result) -> dict[str, str]:
    return {r.id: r.feedback for r in result.requirements if not r.passed}


def _program(name: str) -> str:
    return (PROGRAMS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("program", ["ex4p_notebook_style.py", "ex4p_second_style.py"])
def test_correct_code_in_other_styles_passes(step, small_lab, tmp_path, program) -> None:
    # A schedule moved on by prof.step() with profile_memory and the profiler's table; or a plain
    # block named in full, the peak read inside it in MB from memory_stats / ru_maxrss * 1024.
    result = grade_exercise(step, _program(program), tmp_path)
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    assert result.passed, _failed(result)


@pytest.mark.parametrize(
    "program, req_id, cause",
    [
        (
            "ex4p_mistake_raw_ru_maxrss.py",
            "peak-memory",
            r"You reported peak_memory_mb=[\d,]+: that is ru_maxrss on line 22 \([\d,.]+ MiB\) as it comes, "
            r"in kilobytes on Linux\. Divide it by 1024 for MiB\.",
        ),
        (
            "ex4p_mistake_read_first.py",
            "peak-memory",
            r"Your peak_memory_mb is ru_maxrss on line 13 \([\d,.]+ MiB\), read before the profiled steps had "
            r"finished \(4 training steps came after it\): it cannot count them\.",
        ),
        (
            "ex4p_mistake_forward_only.py",
            "profiled-steps",
            r"The profiler window on line 20 recorded forward passes \(\d+ matmul ops\) but not a backward pass "
            r"or an optimizer step: no whole training step \(an evaluation under no_grad records forward passes "
            r"only\)\. All 4 training steps ran before it started\.",
        ),
    ],
)
def test_each_mistake_fails_naming_its_cause(step, small_lab, tmp_path, program, req_id, cause) -> None:
    import re

    if "ru_maxrss" in cause and os.uname().sysname == "Darwin":
        pytest.skip("ru_maxrss is in bytes on macOS: the feedback says so instead")
    result = grade_exercise(step, _program(program), tmp_path)
    failed = _failed(result)
    assert not result.passed and req_id in failed, failed
    assert re.match(cause, failed[req_id]), failed[req_id]
    assert failed[req_id].endswith(next(r.feedback for r in step.requirements if r.id == req_id))


def test_a_schedule_never_stepped_is_why_the_program_stopped(step, as_lesson_test, tmp_path) -> None:
    # key_averages() of a profiler that recorded nothing raises: that stop is the mistake, named
    # first; what the program never got to (its table, its peak) is not checked, not blamed.
    mistake = next(m for m in step.mistakes if m.fails == "profiled-steps" and "prof.step()" in m.name)
    result = grader.grade_exercise(step, mistake.code, tmp_path, accuracy_bars=False)  # as lesson test grades it
    assert result.sandbox.error_type == "AssertionError"
    assert result.hint is not None and result.hint.startswith(
        "The profiler on line 41 recorded nothing: it was given a schedule, whose phases (wait, warmup, "
        "active) move on only at prof.step(), and prof.step() never ran. Reading its results then stopped "
        "the program (Profiler must be initialized before getting key averages)."
    )
    judged = {r.id: r.judged for r in result.requirements if not r.passed}
    assert judged == {"profiled-steps": True, "profile-printed": False, "peak-memory": False}


def test_the_solution_reports_the_process_peak_above_its_weights(step, as_lesson_test, tmp_path) -> None:
    # On a CPU the peak is the process's: torch's code and the data dwarf the model's 0.90 MiB.
    result = grader.grade_exercise(step, step.solution, tmp_path, accuracy_bars=False)  # as lesson test grades it
    assert result.passed, _failed(result)
    peak = result.sandbox.reports["peak_memory_mb"]
    assert 100 < peak < step.memory_mb + 2048, peak
    assert "the weights 0.90 MiB" in result.sandbox.output
    assert result.sandbox.reports["step_ms"] > 0


@pytest.mark.gpu
def test_on_cuda_the_peak_is_the_gpus_and_must_be_reset(step, tmp_path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: max_memory_allocated and its reset are CUDA's")
    result = grade_exercise(step, step.solution, tmp_path / "solution")
    assert result.passed, _failed(result)
    peak = result.sandbox.reports["peak_memory_mb"]
    # Weights, gradients and Adam's two moments of 235,146 float32s are 3.6 MiB; a batch of 64 adds little.
    assert 3 < peak < 512, peak
    assert "GPU busy" in result.sandbox.output
    (never_reset,) = [m for m in step.mistakes if m.only_on == ["cuda"]]
    result = grade_exercise(step, never_reset.code, tmp_path / "never-reset")
    failed = _failed(result)
    assert list(failed) == ["peak-memory"], failed
    assert failed["peak-memory"].startswith("No torch.cuda.reset_peak_memory_stats() ran before")
