"""tutor/present.py: one way to show a figure, wherever it is shown."""

from __future__ import annotations

import math

import pytest

from tutor import present


@pytest.mark.parametrize(
    "value,unit,shown",
    [
        (None, "", "n/a"),  # not measured: never a made-up number
        (True, "", "yes"),
        (False, "", "no"),
        (0.3521, "%", "35.2%"),  # shares are measured as fractions
        (3.214, "x", "3.21x"),
        (2828323, "B", "2,828,323 B"),  # whole numbers exactly, as the reveal shows them
        (2828323.0, "", "2,828,323"),
        (0.000123, "s", "0.000123 s"),
        (123.4, "", "123"),
        (12.345, "ms", "12.3 ms"),
        ("cuda:0", "", "cuda:0"),
    ],
)
def test_a_metric_reads_the_same_everywhere(value, unit, shown):
    assert present.metric(value, unit) == shown


def test_nan_and_inf_are_said_as_they_are():
    assert present.metric(math.nan) == "nan" and present.metric(math.inf) == "inf"


@pytest.mark.parametrize(
    "s,shown",
    [
        (None, "-"),
        (0.0123, "12.3 ms"),
        (1.234, "1.23 s"),
        (1234.0, "1,234 s"),
        (0.000042, "42.0 µs"),
        (0.00000015, "0.1 µs"),
        (0.001, "1.0 ms"),
    ],
)
def test_seconds_carry_their_unit(s, shown):
    assert present.seconds(s) == shown


def test_bytes_show_in_mib_and_missing_ones_as_a_dash():
    assert present.mib(3 * (1 << 20) + (1 << 19)) == "3.5 MiB"
    assert present.mib(None) == "-"


def test_significant_keeps_a_tiny_value_readable():
    assert present.significant(5.960464477539063e-08) == "5.9605e-08"
    assert present.significant(65504.0) == "65504"
