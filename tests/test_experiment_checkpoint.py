"""checkpoint-roundtrip: the saved dict loads on the CPU with weights_only=True, predictions unchanged."""

from __future__ import annotations

import tempfile

import pytest
import torch

from tutor import experiments
from tutor.events import Finished, Started
from tutor.model import MNISTClassifier, count_parameters

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One run on the CPU that keeps its checkpoint file."""
    path = tmp_path_factory.mktemp("ckpt") / "mnist.pt"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUTOR_DATA_DIR", "/work/shared/data")
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


def test_temp_file_is_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", "/work/shared/data")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    events = list(experiments.start("checkpoint-roundtrip", {"steps": 5}, device="cpu"))
    m = events[-1].metrics
    assert m["allclose"] is True and m["file_bytes"] > 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@gpu
def test_cuda_checkpoint_loads_on_cpu(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", "/work/shared/data")
    m = list(experiments.start("checkpoint-roundtrip", {"steps": 20}, device="cuda"))[-1].metrics
    assert m["saved_on"].startswith("cuda") and m["loaded_on"] == "cpu"
    assert m["weights_equal"] is True
    assert m["allclose"] is True and m["max_abs_diff"] < 1e-4
    # Loading the cuda-saved file without map_location where CUDA is hidden fails, for real.
    assert m["cpu_only_load_error"] and "map_location" in m["cpu_only_load_error"]
