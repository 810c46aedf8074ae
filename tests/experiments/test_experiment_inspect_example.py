"""`inspect-example`: `gpututor inspect` on the shipped scripts, its report as metrics. The FLOPs
against a hand count, the intervals around their medians, the memory parts under the peak, no
finding on the clean scripts, and a cancel that stops the script."""

from __future__ import annotations

import threading
import time

import pytest
from experiment_runs import run_experiment

from tests.inspect.test_inspect import mnist_cnn_flops
from tutor import experiments
from tutor.experiments.events import Note, Table

QUICK = {"steps": 6, "warmup": 1}


@pytest.fixture(scope="module")
def mnist_cnn():
    return run_experiment("inspect-example", {**QUICK, "example": "mnist-cnn"})


def test_mnist_cnn_is_reported_in_the_course_s_words(mnist_cnn):
    events, m = mnist_cnn
    assert m["flops_per_step"] == pytest.approx(mnist_cnn_flops(64), rel=0.05)
    assert m["step_seconds_low"] <= m["step_seconds"] <= m["step_seconds_high"]
    assert m["data_share_low"] <= m["data_share"] <= m["data_share_high"]
    shares = [m["data_share"], m["forward_share"], m["backward_share"], m["optimizer_share"]]
    assert all(0 <= s <= 1 for s in shares) and m["forward_share"] + m["backward_share"] + m["optimizer_share"] <= 1
    if m["mfu"] is not None:  # a measured peak here: MFU from the same step times
        assert m["mfu_low"] <= m["mfu"] <= m["mfu_high"]
    # weights, gradients and Adadelta's two buffers a parameter, at the least: 1,199,882 x 16 B
    assert m["peak_mb"] >= 1_199_882 * 16 / 1e6
    assert m["findings"] == 0 and m["first_finding"] is None
    tables = [e for e in events if isinstance(e, Table)]
    assert tables[0].columns == ["phase", "ms a step", "share"] and len(tables[0].rows) == 6
    assert any(isinstance(e, Note) and e.text.startswith("mnist_cnn.py: ") for e in events)  # its own output


def test_the_char_model_trains_clean():
    _, m = run_experiment("inspect-example", {**QUICK, "example": "char-gpt", "batch_size": 4})
    assert m["flops_per_step"] > 0 and m["findings"] == 0, m


def test_a_cancel_stops_the_script():
    run = experiments.start("inspect-example", {"steps": 400, "warmup": 1}, device="cpu")
    next(run), next(run)  # started, and the script with it
    time.sleep(1.0)
    started = time.monotonic()
    run.close()  # what a cancel does to the generator: its watcher returns once the script's group is killed
    assert time.monotonic() - started < 10
    assert not [t for t in threading.enumerate() if t.name == "inspect-example"]


@pytest.mark.gpu
def test_on_a_cuda_gpu_the_split_is_synchronised_and_the_peak_is_the_allocator_s():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    events, m = run_experiment("inspect-example", {**QUICK, "example": "mnist-cnn"}, device="cuda")
    assert m["device"].startswith("cuda")
    assert m["flops_per_step"] == pytest.approx(mnist_cnn_flops(64), rel=0.05)
    assert m["mfu"] is not None and 0 < m["mfu_low"] <= m["mfu"] <= m["mfu_high"] < 1
    # the allocator's peak: at least the weights, gradients and Adadelta's two buffers
    assert m["peak_mb"] >= 1_199_882 * 16 / 1e6
    how = next(e.text for e in events if isinstance(e, Note) and e.text.startswith("How: "))
    assert "synchronize" in how
