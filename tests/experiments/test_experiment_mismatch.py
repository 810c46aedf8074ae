"""device-mismatch: a genuine device error at the forward pass, then the fix runs."""

from __future__ import annotations

import math

import pytest
import torch

from tutor import experiments
from tutor.experiments.events import Finished, Note, Started

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def run(device):
    events = list(experiments.start("device-mismatch", {}, device=device))
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_without_accelerator_meta_model_and_cpu_batch_raise_a_device_error():
    events, m = run("cpu")
    assert set(experiments.get("device-mismatch").metrics) <= set(m)
    assert m["method"] == "meta"
    assert m["model_device"] == "meta"
    assert m["input_device"] == "cpu"
    assert m["error_type"] == "RuntimeError"
    message = m["error_message"].lower()
    assert "device" in message and "meta" in message and "cpu" in message
    assert "model(" in m["error_line"]
    assert "linear" in m["error_frame"]
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "meta" in notes and "cuda:0" in notes  # says plainly what was done instead of a GPU


def test_the_fix_runs_a_real_step():
    _, m = run("cpu")
    assert m["fix_ran"] is True
    assert m["fix_device"] == "cpu"
    # A fresh 10-class classifier starts near ln(10) = 2.30.
    assert math.isfinite(m["fix_loss"]) and 1.5 < m["fix_loss"] < 3.5


def test_the_labs_batch_to_device_fails_on_the_list_a_loader_yields():
    events, m = run("cpu")
    assert m["batch_to_error"] == "AttributeError: 'list' object has no attribute 'to'"
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "batch.to('cuda')" in said and "a list of 2 tensors" in said


def test_the_reverse_batch_moved_model_left_on_the_cpu():
    events, m = run_reverse("cpu")
    assert m["method"] == "meta"
    assert m["model_device"] == "cpu" and m["input_device"] == "meta"
    assert m["error_type"] == "RuntimeError"
    assert "cpu" in m["error_message"] and "meta" in m["error_message"]
    assert m["fix_ran"] is True and m["fix_device"] == "cpu"
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "the batches go to PyTorch's 'meta' device" in notes
    assert "The fix: model = MNISTClassifier().to(device), once" in notes


def run_reverse(device):
    events = list(experiments.start("device-mismatch", {"reverse": True}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


@pytest.mark.gpu
@gpu
def test_cuda_batch_with_cpu_model():
    _, m = run_reverse("cuda")
    assert m["model_device"] == "cpu" and m["input_device"].startswith("cuda")
    assert m["error_type"] == "RuntimeError"
    assert "cuda" in m["error_message"] and "cpu" in m["error_message"]
    assert m["fix_ran"] is True and m["fix_device"].startswith("cuda")


@pytest.mark.gpu
@gpu
def test_cuda_model_with_cpu_batch():
    _, m = run("cuda")
    assert m["method"] == "cuda"
    assert m["model_device"].startswith("cuda")
    assert m["input_device"] == "cpu"
    assert m["error_type"] == "RuntimeError"
    assert "cuda" in m["error_message"] and "cpu" in m["error_message"]
    assert "model(" in m["error_line"]
    assert m["fix_ran"] is True and m["fix_device"].startswith("cuda")


@pytest.mark.gpu
def test_the_mismatch_is_a_real_error_on_any_accelerator(accelerator):
    _, m = run(accelerator)
    assert m["model_device"].startswith(accelerator) and m["input_device"] == "cpu"
    assert m["error_type"] == "RuntimeError" and m["fix_ran"] is True
