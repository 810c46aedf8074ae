"""attention-overflow: float16 attention scores really overflow, and a float32 softmax after them
really cannot mend it; bfloat16 and the 1/sqrt(dim) scaling really keep them finite."""

from __future__ import annotations

import pydantic
import pytest
import torch

from tutor import experiments
from tutor.experiments.events import Finished, Note, Started, Table


def run(values=None, device="cpu"):
    events = list(experiments.start("attention-overflow", values or {}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_float16_scores_overflow_and_the_float32_softmax_gives_nan():
    events, m = run()
    assert set(experiments.get("attention-overflow").metrics) <= set(m)
    assert m["largest_score"] == pytest.approx(40.0**2 * 64, rel=1e-5)  # |q|^2 on the diagonal
    assert m["fp16_inf_scores"] >= m["rows"] == 16  # every token's score with itself at least
    assert m["fp16_nan_rows"] == 16
    assert (m["bf16_inf_scores"], m["scaled_fp16_nan_rows"], m["sdpa_fp16_nan_rows"]) == (0, 0, 0)
    assert 0 <= m["bf16_error"] < 0.05
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "102,400" in said and "inf - inf is NaN" in said and "12,800, inside float16" in said
    [table] = [e for e in events if isinstance(e, Table)]
    assert [r[3] for r in table.rows[:4]] == ["0", "16", "0", "0"]


def test_below_float16s_largest_nothing_overflows_and_it_says_so():
    events, m = run({"magnitude": 10.0})  # 10^2 x 64 = 6,400
    assert (m["fp16_inf_scores"], m["fp16_nan_rows"], m["autocast_nan_rows"]) == (0, 0, 0)
    assert any("fits in float16" in e.text for e in events if isinstance(e, Note))


def test_autocast_is_read_off_the_tensors_it_returns():
    """What autocast ran each op in is measured on this device, not assumed from CUDA's lists."""
    _events, m = run()
    with torch.autocast("cpu", dtype=torch.float16):
        x = torch.ones(2, 2)
        expected = (str((x @ x).dtype), str(torch.softmax(x @ x, -1).dtype))
    assert ("torch." + m["autocast_matmul_dtype"], "torch." + m["autocast_softmax_dtype"]) == expected
    assert m["autocast_nan_rows"] == (16 if m["autocast_matmul_dtype"] == "float16" else 0)


def test_settings_outside_their_range_are_refused():
    with pytest.raises(pydantic.ValidationError):
        experiments.get("attention-overflow").make_params({"magnitude": 0})
