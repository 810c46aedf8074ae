"""charts.stacked_bars: each bar its parts in order, the parts adding up to what the total draws."""

from __future__ import annotations

import pytest

from tutor.charts import stacked_bars

PARTS = [("█", "params"), ("░", "saved")]


def test_parts_stack_in_order_and_the_largest_total_fills_the_room():
    text = stacked_bars([("a", [2.0, 2.0], "4"), ("b", [1.0, 0.0], "1")], PARTS, unit="MiB", width=20)
    lines = text.splitlines()
    room = 20 - 1 - 1 - 4  # width less the label, the text and the gaps
    assert lines[0] == "a |" + "█" * (room // 2) + "░" * (room // 2) + " 4"
    assert lines[1] == "b |" + f"{'█' * round(room / 4):<{room}}" + " 1"
    assert lines[-2].strip() == "█ params  ░ saved" and lines[-1].strip() == "MiB, from 0"


def test_rounding_never_lets_the_parts_outgrow_the_total():
    rows = [(str(i), [0.34, 0.33, 0.33], "") for i in range(3)]
    text = stacked_bars(rows, [("a", "x"), ("b", "y"), ("c", "z")], unit="u", width=30)
    bars = [line.split("|")[1] for line in text.splitlines()[:3]]
    assert all(len(bar.rstrip()) == 30 - 1 - 0 - 4 for bar in bars)


def test_stacked_bars_refuse_what_they_cannot_draw():
    with pytest.raises(ValueError):
        stacked_bars([], PARTS, unit="u")
    with pytest.raises(ValueError):
        stacked_bars([("a", [1.0], "")], PARTS, unit="u")  # one value short
    with pytest.raises(ValueError):
        stacked_bars([("a", [1.0, -1.0], "")], PARTS, unit="u")
