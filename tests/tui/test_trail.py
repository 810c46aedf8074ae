"""The step trail under the header stays on one row, however many steps a lesson has."""

from __future__ import annotations

import pytest

from tutor.ui.screens.lesson import trail_window


@pytest.mark.parametrize("total", [1, 20, 78, 79, 82, 200])
@pytest.mark.parametrize("width", [40, 78, 118])
def test_the_trail_fits_its_row_and_always_shows_this_step(total, width):
    for index in range(total):
        first, last = trail_window(total, index, width)
        cells = (last - first) + (first > 0) + (last < total)  # the steps drawn, and an "…" per cut side
        assert first <= index < last
        assert cells == min(total, width)


def test_a_lesson_that_fits_is_drawn_whole():
    assert trail_window(23, 5, 78) == (0, 23)
