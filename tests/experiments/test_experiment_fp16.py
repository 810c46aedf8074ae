"""fp16-underflow: float16 really loses a small gradient; loss scaling really keeps it."""

from __future__ import annotations

import math

import pydantic
import pytest
import torch

from tutor import experiments
from tutor.experiments import devices
from tutor.experiments.events import Finished, Note, Started, Table
from tutor.experiments.specs.fp16_underflow import Fp16UnderflowParams

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def run(values=None, device="cpu"):
    events = list(experiments.start("fp16-underflow", values or {}, device=device))
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_default_gradient_flushes_in_fp16_and_survives_scaling():
    _events, m = run()
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


def result_note(events) -> str:
    """The Note that says what happened to the gradient in float16."""
    return next(e.text for e in events if isinstance(e, Note) and e.level == "result")


def notes(events) -> str:
    return " ".join(e.text for e in events if isinstance(e, Note))


@pytest.mark.parametrize(
    "gradient, scale",
    [
        (1e-30, 65536.0),  # the lower bound: the activation itself underflows float16
        (1e-14, 65536.0),  # flushed, and this scale is too small to rescue it
        (1e-14, 2.0**24),  # flushed, and the largest scale rescues it
        (1e-8, 1.0),  # no scaling at all
        (1e-8, 2.0**24),  # the upper scale bound
        (1e-6, 65536.0),  # a float16 subnormal
        (1.0, 65536.0),  # kept unscaled, overflows once scaled
        (7e4, 65536.0),  # above float16's max
        (1e6, 1.0),  # the upper gradient bound
    ],
)
def test_every_statement_matches_the_values(gradient, scale):
    events, m = run({"gradient": gradient, "scale": scale})
    g16, g32, scaled, gbf16 = m["gradient_fp16"], m["gradient_fp32"], m["gradient_scaled_fp16"], m["gradient_bf16"]
    assert g32 != 0.0 and math.isfinite(g32)  # within the bounds float32 always has the value
    assert g32 == pytest.approx(gradient, rel=1e-6)
    text = result_note(events)
    if text.startswith("float16 lost"):
        assert g16 == 0.0 and m["flushed_to_zero"] is True
    elif text.startswith("float16 kept"):
        assert g16 != 0.0 and math.isfinite(g16) and m["flushed_to_zero"] is False
        assert f"({g16:.4g})" in text
    else:
        assert text.startswith("float16 overflowed") and math.isinf(g16) and m["flushed_to_zero"] is False
    # What the text says about the scaled computation is what the scaled value shows.
    if "gives back" in text:
        assert scaled != 0.0 and math.isfinite(scaled) and f"gives back {scaled:.4g}" in text
    if "still 0.0" in text or "rounds to 0.0: this gradient needs a larger scale" in text:
        assert scaled == 0.0
    if "became inf" in text:
        assert math.isinf(scaled) or math.isinf(g16)
    assert ("lifts it back into the normal range" in text) == (
        g16 != 0.0
        and abs(g16) < m["fp16_smallest_normal"]
        and scaled != 0.0
        and math.isfinite(scaled)
        and abs(scaled) * scale >= m["fp16_smallest_normal"]
    )
    # bfloat16 is said to keep the gradient only when it did.
    assert ("it keeps this gradient" in notes(events)) == (gbf16 != 0.0 and math.isfinite(gbf16))
    # The GradScaler demo: the overflow row is really skipped and the scale really lowered.
    assert m["scaler_skipped_overflow_step"] is True
    assert m["scaler_scale_after_overflow"] == m["scaler_scale_before"] / 2
    assert "update() then lowered the scale" in notes(events)
    for table in (e for e in events if isinstance(e, Table)):
        assert all(isinstance(cell, str) for row in table.rows for cell in row)


def test_activation_underflow_is_explained_as_such():
    events, m = run({"gradient": 1e-30})
    text = result_note(events)
    assert "the activation x = 1e-15 is itself too small for float16" in text
    assert "cannot bring this one back" in text and m["gradient_scaled_fp16"] == 0.0
    assert m["gradient_bf16"] == pytest.approx(1e-30, rel=2**-7)


def test_rescue_needs_a_large_enough_scale():
    small = run({"gradient": 1e-14})[1]
    large = run({"gradient": 1e-14, "scale": 2.0**24})[1]
    assert small["gradient_scaled_fp16"] == 0.0
    assert large["gradient_scaled_fp16"] == pytest.approx(1e-14, rel=0.1)


@pytest.mark.parametrize(
    "values",
    [{"gradient": 1e-50}, {"gradient": 0.0}, {"gradient": 1e7}, {"scale": 1e40}, {"scale": 0.5}, {"scale": 2.0**25}],
)
def test_values_outside_the_bounds_are_refused(values):
    with pytest.raises(pydantic.ValidationError):
        experiments.start("fp16-underflow", values, device="cpu")


def test_float32_zero_is_said_plainly_even_past_the_bounds():
    # Bypass validation to show the code stays honest if the bounds are ever widened.
    p = Fp16UnderflowParams.model_construct(gradient=1e-50, scale=65536.0, device=None, seed=0)
    events = list(experiments.get("fp16-underflow").load()(p, devices.resolve("cpu")))
    m = events[-1].metrics
    assert m["gradient_fp32"] == 0.0 and m["flushed_to_zero"] is False
    text = notes(events)
    assert "Even float32 computed 0.0" in text
    assert "kept this gradient" not in text and "keeps this gradient" not in text


@pytest.mark.gpu
@gpu
def test_runs_on_cuda():
    _, m = run(device="cuda")
    assert m["computed_on"].startswith("cuda")
    assert m["gradient_fp16"] == 0.0
    assert m["gradient_scaled_fp16"] == pytest.approx(1e-8, rel=5e-3)
