"""fp16-underflow: float16 really loses a small gradient; loss scaling really keeps it."""

from __future__ import annotations

import math

import pytest
import torch

from tutor import experiments
from tutor.events import Finished, Started, Table

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def run(values=None, device="cpu"):
    events = list(experiments.start("fp16-underflow", values or {}, device=device))
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_default_gradient_flushes_in_fp16_and_survives_scaling():
    events, m = run()
    assert set(experiments.get("fp16-underflow").metrics) <= set(m)
    assert m["gradient_fp32"] == pytest.approx(1e-8, rel=1e-6)
    assert m["gradient_fp16"] == 0.0
    assert m["flushed_to_zero"] is True
    # float16 keeps 11 significant bits: a few roundings stay well within 0.5%.
    assert m["gradient_scaled_fp16"] == pytest.approx(1e-8, rel=5e-3)
    assert m["gradient_scaled_fp16"] != m["gradient_fp32"]  # it went through float16, it is not a copy
    assert m["scale"] == 65536.0
    assert m["computed_on"] == "cpu"


def test_reported_limits_are_float16s():
    _, m = run()
    assert m["fp16_max"] == 65504.0
    assert m["fp16_smallest_normal"] == 2.0**-14
    assert m["fp16_smallest_subnormal"] == 2.0**-24
    assert m["bf16_smallest_normal"] == pytest.approx(1.1754943508222875e-38)


def test_bfloat16_keeps_the_gradient_without_scaling():
    _, m = run()
    assert m["gradient_bf16"] == pytest.approx(1e-8, rel=2**-7)


def test_large_gradient_does_not_flush():
    _, m = run({"gradient": 1e-3})
    assert m["flushed_to_zero"] is False
    assert m["gradient_fp16"] == pytest.approx(1e-3, rel=2e-3)


def test_subnormal_gradient_survives_but_loses_precision():
    # 1e-6 is above float16's smallest subnormal but below its smallest normal.
    _, m = run({"gradient": 1e-6})
    assert m["flushed_to_zero"] is False
    assert m["gradient_fp16"] != 0.0
    assert abs(m["gradient_fp16"] - 1e-6) <= m["fp16_smallest_subnormal"]
    # Scaling lifts it into float16's normal range, where it keeps all 11 significant bits.
    assert abs(m["gradient_scaled_fp16"] - 1e-6) < abs(m["gradient_fp16"] - 1e-6)


def test_grad_scaler_skips_overflowing_step_and_halves_scale():
    _, m = run()
    assert m["scaler_skipped_overflow_step"] is True
    assert m["scaler_scale_after_overflow"] == m["scaler_scale_before"] / 2
    assert m["scaler_unscaled_gradient"] == pytest.approx(1e-8, rel=5e-3)


def test_small_scale_still_overflows_in_the_scaler_demo():
    _, m = run({"scale": 1024.0})
    assert m["scaler_scale_before"] == 1024.0
    assert m["scaler_skipped_overflow_step"] is True
    assert m["scaler_scale_after_overflow"] == 512.0


def test_table_shows_the_values():
    events, m = run()
    tables = [e for e in events if isinstance(e, Table)]
    first = tables[0]
    values = {row[0]: row[1] for row in first.rows}
    assert float(values["float16"]) == 0.0
    assert float(values["float32"]) == pytest.approx(m["gradient_fp32"], rel=1e-4)
    assert all(math.isfinite(float(r[1])) for r in first.rows)


@pytest.mark.gpu
@gpu
def test_runs_on_cuda():
    _, m = run(device="cuda")
    assert m["computed_on"].startswith("cuda")
    assert m["gradient_fp16"] == 0.0
    assert m["gradient_scaled_fp16"] == pytest.approx(1e-8, rel=5e-3)
