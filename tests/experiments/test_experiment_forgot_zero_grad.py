"""forgot-zero-grad: the same model, the same batches, with and without optimizer.zero_grad()."""

from __future__ import annotations

import math

import pytest
from experiment_runs import run_experiment

from tutor.experiments.events import Note, Step, Table


@pytest.fixture(scope="module")
def quick():
    return run_experiment("forgot-zero-grad", {"steps": 20})


def test_without_zero_grad_the_gradient_norm_grows_step_after_step(quick):
    _, m = quick
    assert m["steps"] == 20
    # Step k uses the sum of k gradients: by step 20 the norm is several times the first one,
    # while the correct loop's norm stays of the same order.
    assert m["growth_without"] > 3 * m["growth_with"]
    assert m["grad_norm_last_without"] > m["grad_norm_last_with"]
    assert math.isclose(m["growth_without"], m["grad_norm_last_without"] / m["grad_norm_first"], rel_tol=1e-9)


def test_both_loops_start_from_the_same_weights_and_batch(quick):
    events, _ = quick
    first = [e for e in events if isinstance(e, Step) and e.step == 1]
    assert {e.label for e in first} == {"with zero_grad", "without"}
    assert first[0].loss == first[1].loss  # same weights, same batch: the same first loss


def test_the_table_and_notes_come_from_the_run(quick):
    events, m = quick
    table = next(e for e in events if isinstance(e, Table))
    assert table.rows[0][0] == "1" and table.rows[-1][0] == "20"
    assert table.rows[-1][2] == f"{m['grad_norm_last_without']:.3f}"
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert f"{m['growth_without']:.1f}x in 20 steps" in notes


def test_at_the_lessons_settings_the_loss_suffers_too():
    """The lesson's run (50 steps, lr 0.1): the summed gradients overshoot and the loss is worse."""
    _, m = run_experiment("forgot-zero-grad", {})
    assert m["steps"] == 50
    assert m["loss_last_without"] > m["loss_last_with"]
    assert m["growth_without"] > 10
