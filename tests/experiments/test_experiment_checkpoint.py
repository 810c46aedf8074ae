"""checkpoint-roundtrip: the saved dict loads on the CPU with weights_only=True, predictions unchanged."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from experiment_runs import run_experiment

from tutor import errors, experiments
from tutor.experiments import training
from tutor.experiments.events import Finished, Started
from tutor.experiments.model import MNISTClassifier, count_parameters

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
# As in conftest.py (module-scoped fixtures run before its function-scoped autouse fixture).
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One run on the CPU that keeps its checkpoint file."""
    path = tmp_path_factory.mktemp("ckpt") / "mnist.pt"
    data_dir = SHARED_DATA if SHARED_DATA.is_dir() else tmp_path_factory.mktemp("no-mnist")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUTOR_DATA_DIR", str(data_dir))
        events = list(experiments.start("checkpoint-roundtrip", {"steps": 20, "path": str(path)}, device="cpu"))
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    return path, events[-1].metrics


def test_roundtrip_predictions_match(saved):
    _, m = saved
    assert set(experiments.get("checkpoint-roundtrip").metrics) <= set(m)
    assert m["saved_on"] == "cpu" and m["loaded_on"] == "cpu"
    assert m["allclose"] is True
    assert m["weights_equal"] is True
    assert m["same_predictions"] is True
    assert m["max_abs_diff"] == 0.0  # same weights, same CPU kernels: bit-identical


def test_the_so_called_robust_cpu_save_moves_the_live_model(saved):
    """`torch.save(model.cpu().state_dict(), ...)`: nn.Module.cpu() returns the module itself."""
    _, m = saved
    assert m["cpu_call_moves_model"] is True and m["params_after_cpu_call"] == "cpu"


def test_file_size_is_weights_plus_adam_state(saved):
    path, m = saved
    params = count_parameters(MNISTClassifier())
    assert params == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
    floats = 4 * params * 3  # float32 weights + Adam's exp_avg and exp_avg_sq
    assert m["file_bytes"] == path.stat().st_size
    assert floats <= m["file_bytes"] < floats + 64 * 1024  # zip/pickle structure and a few numbers


def test_checkpoint_is_the_notebook_dict_and_loads_with_weights_only(saved):
    path, m = saved
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    assert set(ckpt) == {"model_state_dict", "optimizer_state_dict", "epoch", "loss", "accuracy"}
    assert ckpt["epoch"] == m["epoch"] == 1
    assert ckpt["loss"] == pytest.approx(m["loss"])
    assert 0.2 < ckpt["accuracy"] <= 1.0  # 20 Adam steps already beat chance (0.1)
    model = MNISTClassifier()
    model.load_state_dict(ckpt["model_state_dict"])  # the notebook's attribute names
    assert torch.load(path).keys() == ckpt.keys()  # weights_only=True is the default here
    assert m["whole_model_refused"] is True  # what weights_only=True does reject


def test_scratch_file_is_written_in_the_cache_dir_and_removed(monkeypatch, tmp_path):
    from tutor import paths

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path / "cache")
    written = []
    real_save = torch.save
    monkeypatch.setattr(
        torch,
        "save",
        lambda obj, f, *a, **k: (
            written.append(Path(f)) if isinstance(f, (str, Path)) else None,
            real_save(obj, f, *a, **k),
        ),
    )
    events = list(experiments.start("checkpoint-roundtrip", {"steps": 5}, device="cpu"))
    m = events[-1].metrics
    assert m["allclose"] is True and m["file_bytes"] > 0
    assert written and all(p.parent == tmp_path / "cache" / "scratch" for p in written)
    assert list((tmp_path / "cache" / "scratch").iterdir()) == []  # removed after
    assert list((tmp_path / "tmp").iterdir()) == []  # and the temp dir never used


@pytest.mark.gpu
@gpu
def test_cuda_checkpoint_loads_on_cpu():
    m = list(experiments.start("checkpoint-roundtrip", {"steps": 20}, device="cuda"))[-1].metrics
    assert m["saved_on"].startswith("cuda") and m["loaded_on"] == "cpu"
    assert m["weights_equal"] is True
    assert m["allclose"] is True and m["max_abs_diff"] < 1e-4
    # Loading the cuda-saved file without map_location where CUDA is hidden fails, for real.
    assert m["cpu_only_load_error"] and "map_location" in m["cpu_only_load_error"]


def test_a_gpu_saved_file_without_map_location_fails_for_real_on_any_machine(saved):
    """Exercise 2's question, answered by PyTorch itself on a CPU: the file as a GPU writes it,
    loaded with no map_location where no GPU is visible, raises the error that names map_location."""
    _path, m = saved
    assert m["loads_without_map_location"] is False
    assert m["cpu_only_load_error"].startswith("RuntimeError") and "map_location" in m["cpu_only_load_error"]
    assert not list(_path.parent.glob("*.as-if-cuda"))  # the re-tagged copy is gone


def test_folder_as_path_fails_before_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking the path")

    monkeypatch.setattr("tutor.experiments.checkpoint_roundtrip.train_steps", no_training)
    stream = experiments.start("checkpoint-roundtrip", {"steps": 5, "path": str(tmp_path)}, device="cpu")
    with pytest.raises(ValueError) as info:
        next(stream)
    message = errors.describe(info.value)
    assert message.startswith("The experiment failed with ValueError: ")
    assert f"path={tmp_path} is a folder" in message and str(tmp_path / "mnist.pt") in message
    assert list(tmp_path.iterdir()) == []


def test_path_ending_in_a_slash_is_a_folder(tmp_path):
    with pytest.raises(ValueError, match="is a folder, not a file"):
        next(experiments.start("checkpoint-roundtrip", {"steps": 5, "path": f"{tmp_path}/new/"}, device="cpu"))
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_unwritable_path_fails_before_training(tmp_path, where):
    if where == "proc":
        if not Path("/proc/self").is_dir():
            pytest.skip("no /proc here")
        path = "/proc/gpututor-test.pt"  # /proc accepts no new files, not even as root
    else:
        (tmp_path / "afile").write_text("x")
        path = str(tmp_path / "afile" / "ckpt.pt")
    with pytest.raises(ValueError, match="cannot be written"):
        next(experiments.start("checkpoint-roundtrip", {"steps": 5, "path": path}, device="cpu"))


def test_missing_parent_folders_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "ckpt.pt"
    m = list(experiments.start("checkpoint-roundtrip", {"steps": 3, "path": str(path)}, device="cpu"))[-1].metrics
    assert path.is_file() and m["file_bytes"] == path.stat().st_size
    assert [p.name for p in path.parent.iterdir()] == ["ckpt.pt"]  # no .tmp left beside it


def test_failed_save_leaves_no_tmp_file(tmp_path, monkeypatch):
    target = tmp_path / "ckpt.pt"

    def half_write(obj, f):  # writes some bytes, then fails like a full disk
        Path(f).write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(training.torch, "save", half_write)
    with pytest.raises(OSError, match="No space"):
        training.save_atomically({"x": 1}, target)
    assert list(tmp_path.iterdir()) == []


def test_the_comparison_runs_in_full_float32_where_tf32_is_on_and_restores_it():
    """As in NVIDIA's containers (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1): TF32 on before the run. The
    predictions are compared at full float32 precision, the run says so, and the setting comes back."""
    import torch

    from tutor.experiments.events import Note

    torch.set_float32_matmul_precision("high")
    try:
        events, m = run_experiment("checkpoint-roundtrip", {"steps": 5}, device="cpu")
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision("highest")
    assert m["allclose"] is True
    assert any("TF32 off" in e.text for e in events if isinstance(e, Note))


@pytest.mark.gpu
def test_a_checkpoint_saved_on_any_accelerator_loads_on_the_cpu(accelerator):
    m = list(experiments.start("checkpoint-roundtrip", {"steps": 20}, device=accelerator))[-1].metrics
    assert m["saved_on"].startswith(accelerator) and m["loaded_on"] == "cpu"
    assert m["weights_equal"] is True and m["allclose"] is True
    # model.cpu().state_dict() took the live model off the accelerator
    assert m["cpu_call_moves_model"] is True and m["params_after_cpu_call"] == "cpu"


def _printed_under_the_newer_precision_api(program: str) -> list[str]:
    """What `program` prints after torch.backends.cuda.matmul.fp32_precision = "tf32", in a process
    of its own: the newer API, once used, changes what the legacy getters do for the process."""
    import subprocess
    import sys

    program = "import torch\ntorch.backends.cuda.matmul.fp32_precision = 'tf32'\n" + program
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_full_float32_works_where_the_program_set_the_newer_precision_api():
    """A learner's program that sets the newer per-backend precision API makes the legacy getters
    raise; a probe comparing float32 results in that process must still run."""
    assert _printed_under_the_newer_precision_api(
        "from tutor.experiments.training import full_float32_matmuls\n"
        "with full_float32_matmuls() as was_on:\n"
        "    print(was_on, torch.backends.cuda.matmul.fp32_precision)\n"
        "print(torch.backends.cuda.matmul.fp32_precision)\n"
    ) == ["True", "ieee", "tf32"]


def test_the_float32_dtype_is_read_where_the_newer_precision_api_was_used():
    """pipeline-breakdown and profile-step name float32's dtype: under the newer API the legacy
    getter raises, and that must not take the run down."""
    assert _printed_under_the_newer_precision_api(
        "from tutor.experiments.training import float32_matmul_dtype\n"
        "from tutor.experiments.devices import Device\n"
        "print(float32_matmul_dtype(Device('cuda', 0, 'NVIDIA H100 80GB HBM3', capability=(9, 0))),\n"
        "      float32_matmul_dtype(Device('cuda', 0, 'Tesla T4', capability=(7, 5))))\n"
    ) == ["tfloat32", "float32"]
