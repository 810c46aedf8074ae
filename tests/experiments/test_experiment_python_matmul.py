"""python-matmul: the Python triple loop and torch.mm compute the same product, and the interpreter
alone makes most of the course's "1000x"."""

from __future__ import annotations

import pydantic
import pytest

from tutor import experiments
from tutor.experiments.events import Finished, Note, Started, Table
from tutor.experiments.python_matmul import python_matmul


def run(values=None, device="cpu"):
    events = list(experiments.start("python-matmul", values or {}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_the_loops_compute_the_product():
    assert python_matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]) == [[19.0, 22.0], [43.0, 50.0]]


def test_torch_on_the_same_cpu_is_far_faster_and_the_interval_holds_it():
    events, m = run({"size": 32, "repeats": 3})
    assert set(experiments.get("python-matmul").metrics) <= set(m)
    assert m["python_seconds"] > m["torch_seconds"] > 0
    assert m["speedup"] == pytest.approx(m["python_seconds"] / m["torch_seconds"], rel=0.5)
    assert m["speedup"] > 10  # compiled code against bytecodes, whatever the machine
    assert m["speedup_low"] <= m["speedup"] <= m["speedup_high"]
    assert m["accelerator_seconds"] is None and m["accelerator_speedup"] is None  # on the CPU: not measured
    [table] = [e for e in events if isinstance(e, Table)]
    assert [r[0] for r in table.rows] == ["Python, three loops", "torch.mm on the CPU"]
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "before any GPU" in said and "No GPU here" in said


def test_sizes_outside_the_range_are_refused():
    with pytest.raises(pydantic.ValidationError):
        experiments.get("python-matmul").make_params({"size": 512})
