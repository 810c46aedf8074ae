"""ddp-checkpoint: 2 gloo processes under torchrun save a DDP model from every rank and from rank 0
alone, and a plain model meets DDP's `module.` prefix: the real error, then two fixes."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from experiment_runs import run_experiment

from tutor import experiments, paths
from tutor.experiments import ddp_checkpoint
from tutor.experiments.ddp_checkpoint import _error_lines, error_text
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS


@pytest.fixture(scope="module")
def cpu_run():
    """The run, and the scratch folders it made that are still there. Its own folders only: in CI
    another worker's lesson test runs ddp-checkpoint into the same scratch dir at the same time."""
    made: list[Path] = []
    real = tempfile.mkdtemp

    def recorded(*args, **kwargs):
        made.append(Path(real(*args, **kwargs)))
        return str(made[-1])

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ddp_checkpoint.tempfile, "mkdtemp", recorded)
        events, metrics = run_experiment("ddp-checkpoint", {"steps": 4, "test_samples": 200}, "cpu")
    assert made and all(p.parent == paths.scratch_dir() for p in made)
    return events, metrics, {p for p in made if p.exists()}


def test_every_declared_metric_is_reported(cpu_run):
    _, m, _ = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("ddp-checkpoint").metrics)
    assert (m["world_size"], m["backend"]) == (2, "gloo")
    assert 0 < m["launch_seconds"] <= m["job_seconds"] and m["attempts"] in (1, 2)


def test_every_rank_writes_the_file_rank_0_once(cpu_run):
    _, m, _ = cpu_run
    assert m["every_rank_writes"] == 2 and m["every_rank_written_bytes"] == 2 * m["checkpoint_bytes"]
    assert m["rank0_writes"] == 1 and m["rank0_written_bytes"] == m["checkpoint_bytes"]
    assert 900_000 < m["checkpoint_bytes"] < 1_000_000  # 940,584 B of float32 weights, plus the zip
    assert m["every_rank_file_intact"] is True and m["loaded_on_every_rank"] is True
    assert m["every_rank_save_seconds"] > 0 and m["rank0_save_seconds"] > 0
    # a read without the barrier: whatever the race gave, said as what was got
    assert m["early_read"] == "loaded the whole file" or m["early_read"].split(":")[0].endswith("Error")


def test_the_module_prefix_fails_a_plain_model_and_both_fixes_load(cpu_run):
    _, m, _ = cpu_run
    assert m["prefixed_key_share"] == 1.0 and m["ddp_first_key"] == "module.fc1.weight"
    error = m["plain_load_error"]
    assert error.startswith("RuntimeError: Error(s) in loading state_dict for MNISTClassifier:")
    assert 'Missing key(s) in state_dict: "fc1.weight"' in error
    assert 'Unexpected key(s) in state_dict: "module.fc1.weight"' in error
    assert m["fixes_identical"] is True
    assert m["ddp_accuracy"] == m["unwrapped_accuracy"] == m["stripped_accuracy"] > 0.1


def test_nothing_is_left_behind(cpu_run):
    events, m, new = cpu_run
    assert m["folder_removed"] is True and not [p for p in new if p.name.startswith("ddp-checkpoint-")]
    error = next(e for e in events if isinstance(e, Table) and "load_state_dict" in e.title)
    assert [row[0].split(" in state_dict")[0] for row in error.rows[1:]] == ["Missing key(s)", "Unexpected key(s)"]
    assert sorted({e.label for e in events if isinstance(e, Step)}) == ["rank 0", "rank 1"]
    assert any("checkpoint.pt" in e.text for e in events if isinstance(e, Note))


def test_error_text_is_the_first_lines_without_the_runs_folder():
    exc = FileNotFoundError(2, "No such file or directory")
    exc.filename = "/tmp/run-x/checkpoint.pt"
    assert error_text(exc, "/tmp/run-x") == "FileNotFoundError: [Errno 2] No such file or directory: 'checkpoint.pt'"
    text = error_text(RuntimeError("Error(s) in loading:\n\tMissing key(s) a.\n\tUnexpected key(s) b.\n\tmore"))
    assert text == "RuntimeError: Error(s) in loading: Missing key(s) a. Unexpected key(s) b."
    assert _error_lines(text) == ["RuntimeError: Error(s) in loading:", "Missing key(s) a.", "Unexpected key(s) b."]
