"""tutor/charts.py: a roofline drawn in characters, from numbers it is given."""

from __future__ import annotations

import pytest

from tutor.charts import Point, roofline


def _plot(text: str) -> list[str]:
    """The plot's rows, without the axis labels (top row first)."""
    return [line.split("|", 1)[1] for line in text.splitlines() if "|" in line]


def test_points_sit_left_of_the_ridge_on_the_slope_and_right_of_it_under_the_flat_roof():
    chart = roofline(60.0, 2000.0, [Point("e", "elementwise", 1 / 12, 0.15), Point("m", "matmul", 682, 45)])
    rows = _plot(chart)
    e_row = next(i for i, r in enumerate(rows) if "e" in r)
    m_row = next(i for i, r in enumerate(rows) if "m" in r)
    assert m_row < e_row  # the matmul is far higher on the FLOP/s axis
    assert rows[e_row].index("e") < rows[m_row].index("m")  # and further right (more FLOP per byte)
    flat = next(r for r in rows if "_" in r)
    assert flat.index("_") > rows[e_row].index("e")  # the compute roof starts right of the elementwise op
    assert "ridge 30" in chart  # 60 TFLOP/s / 2,000 GB/s = 30 FLOP/B
    assert "/ memory roof: 2,000 GB/s x FLOP/B" in chart and "_ compute roof: 60 TFLOP/s" in chart
    assert all(len(line) <= 64 for line in chart.splitlines())


def test_a_cpu_roofline_reads_in_gflops_and_fits_narrower():
    chart = roofline(0.2, 8.0, [Point("e", "c = a * b", 1 / 12, 0.0006)], width=50, height=8)
    assert "200 GFLOP/s" in chart and "ridge 25" in chart
    assert len(_plot(chart)) == 8 and all(len(line) <= 50 for line in chart.splitlines())


def test_no_roof_without_a_peak_and_a_bandwidth():
    with pytest.raises(ValueError):
        roofline(0.0, 10.0, [])


def test_bars_scale_to_the_largest_and_keep_a_sliver_for_the_smallest():
    from tutor.charts import bars

    chart = bars([("cpu", 10.0, "10 s"), ("gpu", 5.0, "5 s"), ("amp", 0.001, "1 ms")], unit="time per epoch")
    lines = chart.splitlines()
    cpu, gpu, amp = (line.count("█") for line in lines[:3])
    assert cpu > 0 and gpu == round(cpu / 2) and amp == 0 and "▏" in lines[2]
    assert all(len(line) <= 72 for line in lines)
    assert lines[0].endswith("10 s") and "time per epoch" in lines[-1]


def test_bars_refuse_what_they_cannot_draw():
    from tutor.charts import bars

    with pytest.raises(ValueError):
        bars([], unit="s")
    with pytest.raises(ValueError):
        bars([("x", -1.0, "-1")], unit="s")
