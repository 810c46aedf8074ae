"""triton-kernel: the fused add + ReLU equals torch's, run by Triton's interpreter on a CPU and
compiled on a CUDA GPU; without triton the run says so and stops."""

from __future__ import annotations

import os
import sys

import pydantic
import pytest

import tutor.experiments
from tutor import experiments
from tutor.experiments.events import Finished, Note, Started, Table


def run(values=None, device="cpu"):
    events = list(experiments.start("triton-kernel", values or {}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_the_interpreter_runs_the_kernel_on_the_cpu_and_it_equals_torch():
    pytest.importorskip("triton")
    before = os.environ.get("TRITON_INTERPRET")
    events, m = run({"cpu_size": 10_003, "block_size": 1024})
    assert set(experiments.get("triton-kernel").metrics) <= set(m)
    assert m["path"] == "interpreter" and m["matches"] is True
    assert (m["elements"], m["programs"], m["masked_lanes"]) == (10_003, 10, 10 * 1024 - 10_003)
    assert m["triton_seconds"] is None and m["speedup"] is None  # the interpreter is never timed
    assert m["byte_bound"] == pytest.approx(20 / 12)
    assert os.environ.get("TRITON_INTERPRET") == before  # set only while the kernel was decorated
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "0 0 0 0 1 1 1 1 2 2" in said  # each element's program, 10 elements in blocks of 4
    assert "means nothing" in said
    [table] = [e for e in events if isinstance(e, Table)]
    assert ["equals torch.relu(x + y)", "yes"] in table.rows


def test_without_triton_the_run_says_so_and_stops(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton now raises ImportError
    monkeypatch.delitem(sys.modules, "tutor.experiments.triton_kernels", raising=False)
    monkeypatch.delattr(tutor.experiments, "triton_kernels", raising=False)  # or `from ... import` finds it there
    events, m = run({"cpu_size": 100})
    assert m["path"].startswith("not run") and m["matches"] is None and m["triton_version"] is None
    assert any("not installed" in e.text for e in events if isinstance(e, Note))


def test_block_size_must_be_a_power_of_two():
    with pytest.raises(pydantic.ValidationError):
        experiments.get("triton-kernel").make_params({"block_size": 1000})


@pytest.mark.gpu
def test_compiled_on_a_cuda_gpu_it_equals_torch_and_is_timed():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA (Triton compiles for NVIDIA and AMD GPUs, not MPS)")
    pytest.importorskip("triton")
    _, m = run({"size": 1 << 20, "repeats": 3}, device="cuda")
    assert m["path"] == "compiled" and m["matches"] is True
    assert m["compile_seconds"] > 0 and m["triton_seconds"] > 0 and m["torch_seconds"] > 0
    assert m["speedup"] == pytest.approx(m["torch_seconds"] / m["triton_seconds"], rel=0.5)
    assert m["speedup_low"] <= m["speedup"] <= m["speedup_high"]
