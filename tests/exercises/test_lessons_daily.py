"""The daily lessons `cpu-vs-gpu` and `devices`: structure, checks, and the exercises' mistakes.

The solutions and the typical mistakes run once, in `lesson test` (tests/system/test_cli_lesson_test.py):
each mistake must fail the requirement it names, and the learner must read that requirement's
feedback. Here the unbroken starters of the "break it" exercises, and a wrong break, run in the sandbox.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tutor import experiments
from tutor.checks import grade
from tutor.checks.answers import ChoiceAnswer, TextAnswer
from tutor.course.lesson import (
    CheckStep,
    ErrorRequirement,
    ExerciseStep,
    Lesson,
    PredictStep,
    RunStep,
)
from tutor.course.loader import load_file
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
LESSONS = {name: ROOT / "lessons" / f"{name}.yaml" for name in ("cpu-vs-gpu", "devices")}
EDITOR_COLUMNS = 69  # what the exercise editor shows at 80 wide (tests/tui/test_tui_exercise.py)
posix = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


@pytest.fixture(scope="module", params=sorted(LESSONS))
def lesson(request) -> Lesson:
    return load_file(LESSONS[request.param])


def _checks(lesson: Lesson) -> list[CheckStep]:
    return [s for s in lesson.steps if isinstance(s, CheckStep)]


def _exercises(lesson: Lesson) -> list[ExerciseStep]:
    return [s for s in lesson.steps if isinstance(s, ExerciseStep)]


# ------------------------------------------------------------------ structure


def test_the_two_lessons_come_first_and_lead_into_each_other():
    cpu, dev = (load_file(p) for p in LESSONS.values())
    assert cpu.next == "devices" and dev.next == "gpu-training"
    assert cpu.order < dev.order < load_file(ROOT / "lessons" / "gpu-training.yaml").order


def test_daily_module_shape(lesson):
    """Why, run, mistakes, interview checks, three practice levels, recap, in that order."""
    ids = [s.id for s in lesson.steps]
    assert ids[0] == "why" and ids[-1] == "recap"
    assert [s.id for s in _exercises(lesson)] == ["practice-basic", "practice-intermediate", "practice-advanced"]
    interviews = [s for s in _checks(lesson) if s.id.startswith("interview-")]
    assert len(interviews) == 2 and all(isinstance(s.answer, TextAnswer) for s in interviews)
    assert all(s.answer.reference for s in interviews), "interview questions show a model answer"
    # The advanced exercise wants an error, and a check right after asks to explain it.
    advanced = lesson.step("practice-advanced")
    assert any(isinstance(r, ErrorRequirement) for r in advanced.requirements)
    assert ids[ids.index("practice-advanced") + 1] == "advanced-explain"
    assert all(ids.index(s.id) < ids.index("practice-basic") for s in interviews)


def test_every_prediction_is_settled_by_the_run_after_it(lesson):
    steps = lesson.steps
    for i, step in enumerate(steps):
        if isinstance(step, PredictStep):
            run = steps[i + 1]
            assert isinstance(run, RunStep), step.id
            if step.compare:
                assert step.compare in experiments.get(run.experiment).metrics, step.id


def test_every_mistake_the_lessons_show_is_a_real_run():
    """The issue's three mistakes, each shown by an experiment, not by prose alone."""
    runs = {s.experiment for p in LESSONS.values() for s in load_file(p).steps if isinstance(s, RunStep)}
    assert {"forgot-zero-grad", "shape-mismatch", "device-mismatch"} <= runs
    assert {"device-basics", "crossover", "sync-timing", "train"} <= runs
    reverse = [
        s
        for s in load_file(LESSONS["devices"]).steps
        if isinstance(s, RunStep) and s.experiment == "device-mismatch" and s.params.get("reverse")
    ]
    assert reverse, "the reverse mistake (batch moved, model not) is run too"


def test_code_fits_an_80_column_terminal(lesson):
    for s in _exercises(lesson):
        for label, code in (("starter", s.starter), ("solution", s.solution)):
            too_wide = [line for line in code.splitlines() if len(line) > EDITOR_COLUMNS]
            assert not too_wide, (s.id, label, too_wide)


MAX_MARKDOWN_CODE = 74  # a code block in a step's text, at 80 columns with the scrollbar showing


@pytest.mark.parametrize("path", sorted((ROOT / "lessons").glob("*.yaml")), ids=lambda p: p.stem)
def test_code_in_step_text_fits_an_80_column_terminal(path):
    too_wide = []
    for s in load_file(path).steps:
        for text in (s.body, getattr(s, "explanation", "") or ""):
            in_code = False
            for line in text.splitlines():
                if re.match(r"^\s*```", line):
                    in_code = not in_code
                elif in_code and len(line) > MAX_MARKDOWN_CODE:
                    too_wide.append((s.id, line))
    assert not too_wide


def test_mps_is_taught_with_what_it_lacks():
    text = LESSONS["devices"].read_text(encoding="utf-8")
    for needed in (
        "torch.backends.mps.is_available()",
        "torch.mps.synchronize()",
        "float64",
        "PYTORCH_ENABLE_MPS_FALLBACK",
    ):
        assert needed in text, needed


# ------------------------------------------------------------------ checks


def test_examples_grade_as_declared(lesson):
    for step in _checks(lesson):
        if isinstance(step.answer, ChoiceAnswer):
            right = [str(i) for i, o in enumerate(step.answer.options, 1) if o.correct]
            wrong = [str(i) for i, o in enumerate(step.answer.options, 1) if not o.correct]
            assert len(right) == 1 and len(wrong) >= 2, step.id
            assert all(o.feedback for o in step.answer.options), step.id
        else:
            right, wrong = step.examples.right, step.examples.wrong
            assert len(right) >= 3 and len(wrong) >= 3, step.id
            assert grade(step.answer.reference, step.answer).correct, step.id
        for answer in right:
            verdict = grade(answer, step.answer)
            assert verdict.correct, (step.id, answer, verdict.feedback)
        for answer in wrong:
            verdict = grade(answer, step.answer)
            assert not verdict.correct and verdict.feedback, (step.id, answer)


@pytest.mark.parametrize(
    "lesson_id, check_id, answer",
    [
        ("cpu-vs-gpu", "interview-cpu-gpu", ""),
        ("cpu-vs-gpu", "interview-bug", "?!"),
        ("devices", "interview-mismatch", "x" * 5000),
    ],
)
def test_empty_or_silly_answers_get_feedback_not_credit(lesson_id, check_id, answer):
    step = load_file(LESSONS[lesson_id]).step(check_id)
    verdict = grade(answer, step.answer)
    assert not verdict.correct and verdict.feedback


# ------------------------------------------------------------------ exercises in the sandbox


@pytest.fixture
def small_lab(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "1000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "200")
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")


@posix
@pytest.mark.parametrize("lesson_id", sorted(LESSONS))
def test_the_unbroken_starter_of_a_break_it_exercise_does_not_pass(small_lab, tmp_path, lesson_id):
    step = load_file(LESSONS[lesson_id]).step("practice-advanced")
    result = grade_exercise(step, step.starter, tmp_path)
    assert result.sandbox.error_type is None, result.traceback  # it really works as given
    assert not result.passed
    assert "ran to the end without an error" in result.requirements[0].feedback


# Where CUDA is absent, what asking for it raises, by PyTorch build; with a GPU, what the
# forward pass raises when the batch was left on the CPU; and the meta stand-in's version of that.
REAL_DEVICE_ERRORS = [
    ("RuntimeError", "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU ..."),
    ("RuntimeError", "No CUDA GPUs are available"),
    ("AssertionError", "Torch not compiled with CUDA enabled"),
    ("RuntimeError", "CUDA error: no CUDA-capable device is detected"),
    ("RuntimeError", "The NVIDIA driver on your system is too old (found version 11040)."),
    ("RuntimeError", "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"),
    (
        "RuntimeError",
        "Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors "
        "on cuda:0 (when checking argument in method wrapper_CUDA_addmm)",
    ),
    ("RuntimeError", "Tensor on device meta is not on the expected device cpu!"),
]
NOT_THE_DEVICE_BREAK = [
    ("RuntimeError", "Expected one of cpu, cuda, ipu, xpu, mkldnn, meta device type at start of device string: gpu"),
    ("RuntimeError", "mat1 and mat2 shapes cannot be multiplied (1792x28 and 784x128)"),
    ("TypeError", "Torch not compiled with CUDA enabled"),  # the message, but not an error PyTorch raises
]


@pytest.mark.parametrize("error_type, message", REAL_DEVICE_ERRORS + NOT_THE_DEVICE_BREAK)
def test_the_device_break_accepts_each_real_device_error_and_nothing_else(error_type, message):
    (req,) = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced").requirements
    assert isinstance(req, ErrorRequirement)
    accepted = error_type in req.errors and re.search(req.pattern, message) is not None
    assert accepted is ((error_type, message) in REAL_DEVICE_ERRORS), (error_type, message)


def _with_device(code: str, device: str) -> str:
    changed = code.replace('torch.device("cuda")', f'torch.device("{device}")')
    assert changed != code
    return changed


@posix
@pytest.mark.parametrize(
    "break_, happened",
    [
        ('torch.device("gpu")', "raised RuntimeError, but with another message: Expected one of cpu, cuda"),
        ('"cuda" + 0', "raised TypeError, not RuntimeError or AssertionError: can only concatenate str"),
    ],
    ids=["no such device", "not a device error"],
)
def test_the_wrong_break_says_what_happened_instead(small_lab, tmp_path, break_, happened):
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    wrong = step.starter.replace('torch.device("cpu")', break_)
    assert wrong != step.starter
    result = grade_exercise(step, wrong, tmp_path)
    assert not result.passed
    feedback = result.requirements[0].feedback
    assert feedback.startswith(step.requirements[0].feedback)
    assert happened in feedback, feedback


@posix
def test_the_cuda_break_stops_at_the_move_here_and_keeps_the_traceback_to_read(small_lab, tmp_path):
    """Without CUDA the break stops where the model is sent to it, with this build's own error."""
    import torch

    from tutor.exercises.behaviour import _NO_CUDA

    if torch.cuda.is_available():
        pytest.skip("with CUDA the break stops at the forward pass (the GPU test below)")
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    result = grade_exercise(step, step.solution, tmp_path)
    assert result.passed, [r.feedback for r in result.requirements]
    assert result.sandbox.error_type in ("RuntimeError", "AssertionError")
    assert _NO_CUDA.search(result.sandbox.error_message or ""), result.sandbox.error_message
    line = step.solution.splitlines()[result.sandbox.error_line - 1]
    assert line.strip() == "model = model.to(device)"
    assert "model = model.to(device)" in result.traceback


@posix
def test_a_cpu_only_pytorch_raises_an_assertion_error_and_that_passes_too(small_lab, tmp_path):
    """A CPU-only build (the CPU wheel, macOS) has no CUDA bindings: torch.cuda's lazy init raises
    AssertionError. This CUDA build without its `_cuda_getDeviceCount` binding is such a build."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the child may hold CUDA already; the stand-in is for a machine without it")
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    code = step.solution.replace(
        "import torch\n", "import torch\ndelattr(torch._C, '_cuda_getDeviceCount')  # a CPU-only build\n", 1
    )
    result = grade_exercise(step, code, tmp_path)
    assert result.sandbox.error_type == "AssertionError", result.sandbox.output[-2000:]
    assert result.sandbox.error_message == "Torch not compiled with CUDA enabled"
    assert result.passed, [r.feedback for r in result.requirements]


@posix
def test_on_a_gpu_the_same_break_stops_at_the_forward_pass(small_lab, tmp_path):
    """The meta device stands in for the GPU (tests/exercises/test_gpu_stand_in.py): the model gets
    there, the batch stays on the CPU, and the forward pass raises the device error."""
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    result = grade_exercise(step, _with_device(step.solution, "meta"), tmp_path)
    assert result.passed, [r.feedback for r in result.requirements]
    assert "not on the expected device" in (result.sandbox.error_message or "")
    line = step.solution.splitlines()[result.sandbox.error_line - 1]
    assert line.strip().startswith("outputs = model(images)")
    # Moving the batch as well is the port done right: it runs, so it does not pass.
    (done_right,) = [m for m in step.mistakes if m.only_on == ["cuda"]]
    result = grade_exercise(step, _with_device(done_right.code, "meta"), tmp_path / "done-right")
    assert not result.passed and done_right.says in result.requirements[0].feedback


@pytest.mark.gpu
@posix
def test_on_a_real_gpu_the_break_raises_the_device_mismatch(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: hard-coded cuda on MPS stops at the move, as without a GPU")
    step = load_file(LESSONS["cpu-vs-gpu"]).step("practice-advanced")
    result = grade_exercise(step, step.solution, tmp_path)
    assert result.passed, [r.feedback for r in result.requirements]
    assert "same device" in (result.sandbox.error_message or ""), result.sandbox.error_message
    (done_right,) = [m for m in step.mistakes if m.only_on == ["cuda"]]
    result = grade_exercise(step, done_right.code, tmp_path / "done-right")
    assert result.sandbox.ok and not result.passed


# ------------------------------------------------------------------ the devices cell


@pytest.mark.parametrize(
    "printed, met",
    [
        (
            "tensor after x.to(device): cpu\ntensor after x = x.to(device): cuda:0\n"
            "module after layer.to(device): cuda:0",
            {"dropped", "kept", "module"},
        ),
        (
            "tensor after x.to(device): cpu\ntensor after x = x.to(device): mps:0\n"
            "module after layer.to(device): mps:0",
            {"dropped", "kept", "module"},
        ),
        (
            "tensor after x.to(device): meta\ntensor after x = x.to(device): meta\nmodule after layer.to(device): cpu",
            {"kept"},
        ),
        (
            "tensor after x.to(device): cpu\ntensor after x = x.to(device): cpu\nmodule after layer.to(device): cpu",
            {"dropped"},
        ),
    ],
    ids=["cuda", "mps", "dropped result kept, module not moved", "all on the CPU"],
)
def test_the_devices_cell_reads_what_each_device_prints(printed, met):
    step = load_file(LESSONS["devices"]).step("practice-intermediate")
    assert {r.id for r in step.requirements if re.search(r.pattern, printed)} == met


@posix
def test_the_devices_cell_says_when_meta_stands_in(small_lab, tmp_path):
    import torch

    step = load_file(LESSONS["devices"]).step("practice-intermediate")
    result = grade_exercise(step, step.starter, tmp_path)
    assert result.passed, [r.feedback for r in result.requirements]
    gpu = torch.cuda.is_available() or torch.backends.mps.is_available()
    assert ("the meta device stands in" in result.sandbox.output) is not gpu
    assert re.search(r"target device: (cuda|mps|meta)", result.sandbox.output), result.sandbox.output
