"""shape-mismatch: three real shape errors on an MNIST batch, and their fixes on the same batch."""

from __future__ import annotations

from experiment_runs import run_experiment

from tutor.experiments.events import Note, Table


def test_each_mistake_raises_the_error_pytorch_really_raises():
    events, m = run_experiment("shape-mismatch")
    # Linear reads the last dimension: 64 x 1 x 28 rows of 28 features against a 784-wide weight.
    assert m["flatten_error_type"] == "RuntimeError"
    assert "1792x28 and 784x128" in m["flatten_error"]
    # Without its channel dimension a [64, 28, 28] batch is one image with 64 channels.
    assert m["channel_error_type"] == "RuntimeError"
    assert "64" in m["channel_error"] and "channels" in m["channel_error"]
    # cross_entropy wants class indices of shape [B].
    assert m["target_error_type"] == "RuntimeError"
    assert m["all_fixed"] is True
    assert all(m[f"{k}_fixed"] for k in ("flatten", "channel", "target"))
    table = next(e for e in events if isinstance(e, Table))
    assert len(table.rows) == 3 and all(row[2].startswith("ok") for row in table.rows)
    assert "ok, shape 64x10" in table.rows[0][2]
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert m["flatten_error"] in notes and "flatten(1)" in notes
