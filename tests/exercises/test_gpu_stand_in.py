"""What a CUDA run shows, checked on a CPU: the `meta` device stands in for the GPU (its work is
not the CPU's), a synchronize of meta (tutor.lab's, which waits for the device it is given) for
torch.cuda.synchronize, and hand-built Contexts for the errors only a GPU raises."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.course.loader import load_file
from tutor.exercises.behaviour import Context, judge
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "exercise_programs"


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "4000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")


def _on_meta(code: str, guard: str, sync: str) -> str:
    """`code` with meta as its GPU (picked where CUDA is absent) and a sync that runs on this machine."""
    return (
        code.replace(f'{guard} == "cuda"', f'{guard} == "meta"')
        .replace(f"{guard} == 'cuda'", f"{guard} == 'meta'")
        .replace("torch.cuda.synchronize()", sync)
        .replace(
            'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
            'torch.device("meta" if not torch.cuda.is_available() else "cpu")',
        )
        .replace(
            "torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
            "torch.device('meta' if not torch.cuda.is_available() else 'cpu')",
        )
    )


# What torch.cuda.synchronize() is to a CUDA run: a wait for the stand-in GPU's queued work.
SYNC_META = '__import__("tutor.lab").lab.synchronize("meta")'


def _failed(result) -> dict[str, str]:
    return {r.id: r.feedback for r in result.requirements if not r.passed}


# ---------------------------------------------------------------- one timing helper for the CPU and the GPU


@pytest.mark.parametrize(
    "sync, synchronized",
    [
        (SYNC_META, True),  # the solution: the CPU call's clock reads need no wait
        ("pass", False),  # no synchronize at all: the GPU call's timing measures the queueing
        ("torch.cpu.synchronize()", False),  # waits for the CPU, not for the GPU's queue
    ],
)
def test_cpu_vs_gpu_timing_helper_on_a_gpu(tmp_path, sync, synchronized) -> None:
    step = load_file(ROOT / "lessons" / "cpu-vs-gpu.yaml").step("practice-intermediate")
    code = _on_meta(step.solution, "device.type", sync).replace('print(f"the CPU takes {cpu / best:.1f}x as long")', "")
    assert "meta" in code and sync in code
    result = grade_exercise(step, code, tmp_path)
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    failed = _failed(result)
    if synchronized:
        assert not failed, failed
    else:
        assert list(failed) == ["synchronized"], failed
        assert "stops a timing while device work may still be queued" in failed["synchronized"]


def test_ex1_notebook_style_on_a_gpu(small_lab, tmp_path) -> None:
    step = load_file(ROOT / "lessons" / "gpu-training-practice.yaml").step("ex1-move-and-time")
    code = _on_meta((PROGRAMS / "ex1_notebook_style.py").read_text(encoding="utf-8"), "dev.type", SYNC_META)
    assert "meta" in code
    result = grade_exercise(step, code, tmp_path, accuracy_bars=False)
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    assert not _failed(result), _failed(result)


def _timed(**counts: int) -> dict:
    return {
        "start_line": 1,
        "stop_line": 3,
        "count": 1,
        "with_work": 1,
        "unsynced_starts": 0,
        "unsynced_stops": 0,
        "cpu_unsynced_starts": 0,
        "cpu_unsynced_stops": 0,
        **counts,
    }


def test_cpu_work_before_a_clock_read_fails_only_a_cpu_only_run() -> None:
    source = "work()\nwork()\nelapsed = time.time() - start\n"  # no synchronize anywhere
    cpu_run = {"models": [{"train_calls": 3, "devices": {"cpu/cpu": 3}}], "timings": [_timed(cpu_unsynced_stops=1)]}
    assert not judge("timing_synchronized", Context(cpu_run, source)).passed  # the code shows no wait
    gpu_run = {
        "models": [{"train_calls": 3, "devices": {"cpu/cpu": 3}}, {"train_calls": 3, "devices": {"cuda/cuda": 3}}],
        "timings": [_timed(cpu_unsynced_stops=1)],
    }
    assert judge("timing_synchronized", Context(gpu_run, source)).passed  # the CPU's work was done
    gpu_run["timings"].append(_timed(start_line=5, stop_line=7, unsynced_stops=1))
    assert judge("timing_synchronized", Context(gpu_run, source)).cause.startswith("The clock read on line 7 stops")


# ---------------------------------------------------------------- a batch left on the CPU, on a GPU


def test_unmoved_batch_on_a_gpu_is_blamed_on_the_batch_not_the_model() -> None:
    mismatch = (
        "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
        "(when checking argument for argument mat1 in method wrapper_CUDA_addmm)"
    )
    cpu_model = {
        "index": 0,
        "train_calls": 20,
        "inputs_unmoved": 20,
        "inputs_seen": 20,
        "devices": {"cpu/cpu": 20},
        "moved_to": "cpu",
    }
    gpu_model = {
        "index": 1,
        "train_calls": 1,
        "inputs_unmoved": 1,
        "inputs_seen": 1,
        "devices": {"cuda/cpu": 1},
        "moved_to": "cuda",
    }
    ctx = Context(
        {"models": [cpu_model, gpu_model]}, "", error_type="RuntimeError", error_message=mismatch, stopped=True
    )
    assert judge("model_on_device", ctx).passed  # the model went where it was sent
    batch = judge("batches_on_device", ctx)
    assert not batch.passed and batch.explains_stop
    assert batch.cause.startswith("1 of 1 batches reached the second model you trained without being moved")
    assert "the forward pass on cuda raised the device-mismatch error that stopped the program" in batch.cause
    # A model never moved still is the model's fault.
    gpu_model["moved_to"] = None
    gpu_model["devices"] = {"cpu/cuda": 1}
    assert judge("model_on_device", ctx).explains_stop


# ---------------------------------------------------------------- a model cast to half by hand


def test_grad_scaler_refusing_fp16_gradients_is_named_as_the_half_model(tmp_path) -> None:
    import torch

    model = torch.nn.Linear(4, 2).half()
    scaler = torch.amp.GradScaler("cpu", enabled=True)
    scaler.scale(model(torch.randn(3, 4).half()).float().sum()).backward()
    with pytest.raises(ValueError) as raised:  # what CUDA's enabled scaler raises too
        scaler.step(torch.optim.SGD(model.parameters(), lr=0.1))
    observed = {"models": [{"index": 0, "train_calls": 1, "devices": {"cuda/cuda": 1}, "param_dtypes": {"float16": 1}}]}
    verdict = judge(
        "weights_float32", Context(observed, "", error_type="ValueError", error_message=str(raised.value), stopped=True)
    )
    assert not verdict.passed and verdict.explains_stop
    assert verdict.cause.startswith("The model had float16 weights: it was cast by hand")


@pytest.mark.parametrize("mistake", ["data not moved", "batch moved but the result dropped"])
def test_an_unmoved_batch_that_stops_a_gpu_run_is_named_though_the_probe_never_ran(
    small_lab, tmp_path, mistake
) -> None:
    """On a GPU the unmoved batch raises a device mismatch mid-training: the train_batches probe,
    which runs after the program, never runs, and what the observer saw names the cause instead."""
    step = load_file(ROOT / "lessons" / "gpu-training-practice.yaml").step("ex1-move-and-time")
    code = _on_meta(next(m for m in step.mistakes if m.name == mistake).code, "device.type", SYNC_META)
    code = code.replace(
        '"cuda" if torch.cuda.is_available() else "cpu")', '"meta" if not torch.cuda.is_available() else "cpu")'
    )
    assert "meta" in code
    result = grade_exercise(step, code, tmp_path, accuracy_bars=False)
    assert result.sandbox.error_type == "RuntimeError", result.sandbox.output[-2000:]
    by_id = {r.id: r for r in result.requirements}
    assert by_id["model-moved"].passed  # the model was moved: not the one to blame
    batches = by_id["batches-moved"]
    assert not batches.passed and batches.judged, batches.feedback
    assert (
        "without being moved" in batches.feedback
        and "device-mismatch error that stopped the program" in batches.feedback
        and next(r for r in step.requirements if r.id == "batches-moved").feedback.split()[0] in batches.feedback
    )
