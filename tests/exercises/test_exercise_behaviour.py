"""Exercise grading judges what a program does, not how it is spelt.

The programs in tests/exercises/exercise_programs/ are written the way the course notebook writes its own
solutions (other names, time.time(), string devices, a guarded torch.cuda.synchronize(),
`if use_amp:` branches): the correct ones must pass the practice lesson's grader, and each real
mistake must fail with feedback that names its cause first. They run in the sandbox on a slice
of the data, as a learner's program does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.course.lesson import Lesson
from tutor.course.loader import load_file
from tutor.exercises.behaviour import Context, judge, sync_precedes
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "exercise_programs"


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(ROOT / "lessons" / "gpu-training-practice.yaml")


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "2000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")


def _grade(lesson: Lesson, step_id: str, program: str, workdir: Path):
    return grade_exercise(
        lesson.step(step_id), (PROGRAMS / program).read_text(encoding="utf-8"), workdir, accuracy_bars=False
    )


def _failed(result) -> dict[str, str]:
    return {r.id: r.feedback for r in result.requirements if not r.passed}


# ---------------------------------------------------------------- correct code passes


@pytest.mark.parametrize(
    "step_id,program",
    [
        ("ex1-move-and-time", "ex1_notebook_style.py"),
        ("ex1-move-and-time", "ex1_string_device.py"),
        ("ex2-checkpoint", "ex2_notebook_style.py"),
        ("ex3-mixed-precision", "ex3_notebook_style.py"),
        ("ex3-mixed-precision", "ex3_if_use_amp.py"),
        ("ex4-portable-script", "ex4_notebook_style.py"),
    ],
)
def test_correct_code_in_the_notebooks_style_passes(lesson, small_lab, tmp_path, step_id, program) -> None:
    result = _grade(lesson, step_id, program, tmp_path)
    # ex3's accuracy bar wants 150 batches; these programs train 60, so only the bars may miss.
    failed = {k: v for k, v in _failed(result).items() if k not in ("amp-accuracy", "fp32-accuracy")}
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    assert not failed, failed


# ---------------------------------------------------------------- each real mistake fails, cause first


@pytest.mark.parametrize(
    "step_id,program,req_id,cause",
    [
        (
            "ex1-move-and-time",
            "ex1_mistake_unsynced_time.py",
            "synchronized-timing",
            "The clock read on line 25 stops a timing while device work may still be queued",
        ),
        (
            "ex2-checkpoint",
            "ex2_mistake_model_object.py",
            "checkpoint-file",
            "checkpoint.pth holds the model object (MNISTClassifier)",
        ),
        (
            "ex3-mixed-precision",
            "ex3_mistake_autocast_always_on.py",
            "fp32-baseline",
            "Every run trained under autocast (bfloat16): the float32 baseline was mixed precision too",
        ),
        (
            "ex4-portable-script",
            "ex4_mistake_best_never_updated.py",
            "best-accuracy-kept",
            "You reported best_accuracy=0",
        ),
    ],
)
def test_each_real_mistake_fails_naming_its_cause(lesson, small_lab, tmp_path, step_id, program, req_id, cause) -> None:
    result = _grade(lesson, step_id, program, tmp_path)
    failed = _failed(result)
    assert not result.passed
    assert req_id in failed, failed
    assert failed[req_id].startswith(cause), failed[req_id]
    assert "\x1b" not in failed[req_id] and "weights_only=False" not in failed[req_id]


def test_hard_coded_cuda_is_caught_even_when_is_available_is_printed(lesson, small_lab, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a machine without CUDA, on a GPU box too
    result = _grade(lesson, "ex1-move-and-time", "ex1_mistake_is_available_printed.py", tmp_path)
    failed = _failed(result)
    assert not result.sandbox.ok and "device-fallback" in failed
    assert result.hint == failed["device-fallback"]  # the reason the program stopped, said first
    assert result.hint.startswith("Your program asked for CUDA on this machine, which has none")


def test_autocast_for_cuda_on_a_cpu_is_named(lesson, small_lab, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the model runs on the CPU, on a GPU box too
    result = _grade(lesson, "ex3-mixed-precision", "ex3_mistake_autocast_cuda_on_cpu.py", tmp_path)
    failed = _failed(result)
    assert failed["autocast-used"].startswith(
        "Your autocast is for 'cuda', but the model ran on cpu: autocast switched itself off"
    )


def test_ex1_timing_needs_the_wait_before_the_clock_starts_too(lesson, small_lab, tmp_path) -> None:
    step = lesson.step("ex1-move-and-time")
    only_stop = step.solution.replace("    synchronize(device)  # the warm-up must not spill into the timing\n", "")
    assert only_stop != step.solution
    result = grade_exercise(step, only_stop, tmp_path)
    assert list(_failed(result)) == ["synchronized-timing"]
    assert "starts a timing while device work may still be queued" in result.hint


def test_a_missing_function_is_found_without_running_the_program_twice(lesson, small_lab, tmp_path) -> None:
    # The probe calls train_batches in the program's own process after it ends: the program's
    # output appears once, and a missing function is said as such.
    step = lesson.step("ex1-move-and-time")
    code = step.solution.replace("def train_batches(", "def run_batches(").replace(
        "train_batches(model", "run_batches(model"
    )
    result = grade_exercise(step, code, tmp_path)
    assert result.sandbox.output.count("speedup:") == 1
    assert _failed(result)["batches-moved"].startswith("Your program defines no function train_batches")


def test_ex3_starter_seeds_the_same_batches_for_both_runs(monkeypatch, tmp_path) -> None:
    # The starter's comment says both runs see the same batches: reseeding the loader makes it so.
    from tutor.exercises.sandbox import run_code

    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "640")
    code = (
        "import torch\nfrom tutor.lab import train_loader, report\n"
        "def first_labels():\n"
        "    torch.manual_seed(0)\n"
        "    train_loader.generator.manual_seed(0)\n"
        "    warm = [y for _, (x, y) in zip(range(2), train_loader)]\n"
        "    return torch.cat([y for _, (x, y) in zip(range(3), train_loader)])\n"
        "a, b = first_labels(), first_labels()\n"
        "report(same=bool(torch.equal(a, b)))\n"
    )
    result = run_code(code, tmp_path, timeout=120, memory_mb=4096)
    assert result.ok, result.output
    assert result.reports["same"] is True


# ---------------------------------------------------------------- the judges, on what a run showed


def _ctx(observed: dict, source: str = "", **kw) -> Context:
    return Context(observed, source, **kw)


def test_model_never_moved_is_told_from_a_cpu_run() -> None:
    model = {"index": 0, "train_calls": 5, "devices": {"cpu/cpu": 5}, "moved_to": None}
    verdict = judge("model_on_device", _ctx({"models": [model]}))
    assert not verdict.passed and "never moved with .to(device)" in verdict.cause
    model["moved_to"] = "cpu"  # .to("cpu") on the CPU: moved, as the code would on a GPU
    assert judge("model_on_device", _ctx({"models": [model]})).passed


def test_weights_and_batches_on_different_devices_explain_the_crash() -> None:
    model = {"index": 0, "train_calls": 1, "devices": {"cpu/cuda": 1}, "moved_to": None}
    verdict = judge(
        "model_on_device",
        _ctx(
            {"models": [model]},
            error_type="RuntimeError",
            error_message="Expected all tensors to be on the same device",
            stopped=True,
        ),
    )
    assert (
        not verdict.passed
        and verdict.explains_stop
        and "weights on cpu while its batches were on cuda" in verdict.cause
    )


def test_a_run_that_stopped_early_is_not_blamed() -> None:
    verdict = judge("autocast_forward", _ctx({"models": []}, stopped=True))
    assert not verdict.judged


@pytest.mark.parametrize(
    "source,line,expected",
    [
        ("synchronize(d)\nt = time.time()\n", 2, True),
        ("if d.type == 'cuda':\n    torch.cuda.synchronize()\nt = time.time() - s\n", 3, True),
        ("work()\nt = time.time() - s\n", 2, False),
        ("def f():\n    synchronize(d)\n    return time.perf_counter() - s\n", 3, True),
        ("torch.cuda.synchronize()\nfor e in range(3):\n    s = time.time()\n", 3, True),
        ("print(torch.cuda.synchronize)\nt = time.time()\n", 2, False),
        ("not python (", 1, False),
        # a helper of the learner's, whatever its name, whose body synchronises
        (
            "def wait_for(d):\n    if d.type == 'cuda':\n        torch.cuda.synchronize()\n"
            "wait_for(dev)\nt0 = time.time()\n",
            5,
            True,
        ),
        ("def log(d):\n    print(d)\nlog(dev)\nt0 = time.time()\n", 4, False),
        ("def again(d):\n    again(d)\nagain(dev)\nt0 = time.time()\n", 4, False),  # recursion ends
    ],
)
def test_sync_before_a_clock_read_is_found_in_any_spelling(source, line, expected) -> None:
    assert sync_precedes(source, line) is expected


def test_guarded_sync_counts_on_a_cpu_only() -> None:
    observed = {
        "models": [{"train_calls": 3, "devices": {"cpu/cpu": 3}}],
        "timings": [
            {"start_line": 1, "stop_line": 3, "count": 1, "with_work": 1, "unsynced_starts": 0, "unsynced_stops": 1}
        ],
    }
    source = "if dev.type == 'cuda':\n    torch.cuda.synchronize()\nelapsed = time.time() - start\n"
    assert judge("timing_synchronized", _ctx(observed, source)).passed
    observed["models"][0]["devices"] = {"cuda/cuda": 3}  # on a GPU the run itself shows no wait happened
    assert not judge("timing_synchronized", _ctx(observed, source)).passed


def test_every_behaviour_lint_knows_has_a_judge() -> None:
    from tutor.exercises.behaviour import BEHAVIOUR_JUDGES
    from tutor.exercises.names import BEHAVIOURS

    assert set(BEHAVIOUR_JUDGES) == BEHAVIOURS


def test_a_timestamp_saved_in_a_checkpoint_still_loads_with_weights_only(tmp_path) -> None:
    # Clock reads are watched (a subtraction tells a timing); one stored in a checkpoint must be
    # saved as the plain number it is.
    from tutor.exercises.sandbox import run_code

    code = (
        "import time, torch\nfrom tutor.lab import report\nstart = time.time()\n"
        "torch.save({'started': start, 'laps': [time.perf_counter()]}, 'c.pt')\n"
        "back = torch.load('c.pt', weights_only=True)\n"
        "report(same=back['started'] == start, plain=type(back['started']) is float)\n"
    )
    result = run_code(
        code, tmp_path, timeout=120, memory_mb=4096, env={"GPUTUTOR_OBSERVE": str(tmp_path / ".observed.json")}
    )
    assert result.ok, result.output
    assert result.reports == {"same": True, "plain": True}
    assert (tmp_path / ".observed.json").is_file()


def test_watching_leaves_a_parameter_moved_in_place_a_leaf(tmp_path) -> None:
    # A no-op .to() hands back an alias so a dropped result stays unmoved, but never for a tensor
    # that requires grad: a Parameter moved "to the CPU" on the CPU must still be optimisable.
    from tutor.exercises.sandbox import run_code

    code = (
        "import torch\nfrom tutor.lab import report\n"
        "w = torch.nn.Parameter(torch.ones(3)).to('cpu')\n"
        "opt = torch.optim.SGD([w], lr=0.1)\n(w * 2).sum().backward()\nopt.step()\n"
        "report(leaf=w.is_leaf, value=float(w[0]))\n"
    )
    result = run_code(
        code, tmp_path, timeout=120, memory_mb=4096, env={"GPUTUTOR_OBSERVE": str(tmp_path / ".observed.json")}
    )
    assert result.ok, result.output
    assert result.reports["leaf"] is True and abs(result.reports["value"] - 0.8) < 1e-6
