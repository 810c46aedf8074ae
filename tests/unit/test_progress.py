"""The SQLite progress store: persistence across reopen, first-lock-wins, recovery, run queries."""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from pathlib import Path

import pytest

import tutor.course.progress as progress_module
from tutor.course.progress import SCHEMA_VERSION, Progress


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "sub" / "progress.db"


def test_default_path_is_under_gpututor_home(tmp_path: Path):
    with Progress() as p:  # conftest points GPUTUTOR_HOME at tmp_path
        assert p.path == tmp_path / "progress.db"
        p.set_position("l", "s")
    assert (tmp_path / "progress.db").is_file()


def test_creates_directories_wal_and_schema_version(db: Path):
    p = Progress(db)
    assert db.is_file() and p.warning is None
    p.close()
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_positions_persist_across_instances(db: Path):
    p = Progress(db)
    assert p.position("gpu-training") is None
    assert p.last_lesson() is None
    p.set_position("gpu-training", "hook")
    p.set_position("other", "intro")
    p.set_position("gpu-training", "check-1-error")
    p.close()

    q = Progress(db)
    assert q.position("gpu-training") == "check-1-error"
    assert q.position("other") == "intro"
    assert q.last_lesson() == "gpu-training"
    q.set_position("other", "outro")
    assert q.last_lesson() == "other"
    q.close()


def test_completed_steps(db: Path):
    with Progress(db) as p:
        p.complete_step("l", "a")
        p.complete_step("l", "b")
        p.complete_step("l", "a")  # idempotent
        p.complete_step("m", "a")
    with Progress(db) as p:
        assert p.completed_steps("l") == {"a", "b"}
        assert p.completed_steps("m") == {"a"}
        assert p.completed_steps("none") == set()


def test_lock_prediction_first_wins_and_persists(db: Path):
    with Progress(db) as p:
        assert p.prediction("l", "guess") is None
        first = p.lock_prediction("l", "guess", "about 5x", 5.0)
        again = p.lock_prediction("l", "guess", "10x or more", 10.0)
        assert again == first
        assert (first.answer, first.value) == ("about 5x", 5.0)
    with Progress(db) as p:
        stored = p.prediction("l", "guess")
        assert stored == first
        assert p.lock_prediction("l", "guess", "slower", None) == first


def test_prediction_without_a_number(db: Path):
    with Progress(db) as p:
        pred = p.lock_prediction("l", "why", "a RuntimeError", None)
        assert pred.value is None and pred.answer == "a RuntimeError"
        assert p.lock_prediction("l", "nan", "?", float("nan")).value is None


def test_answers_are_kept_in_order(db: Path):
    with Progress(db) as p:
        assert not any(a.correct for a in p.answers("l", "check-1"))
        p.record_answer("l", "check-1", "it is faster", False, "Not quite.")
        assert not any(a.correct for a in p.answers("l", "check-1"))
        p.record_answer("l", "check-1", "tensors on different devices", True, "Right.")
    with Progress(db) as p:
        records = p.answers("l", "check-1")
        assert [(r.answer, r.correct, r.feedback) for r in records] == [
            ("it is faster", False, "Not quite."),
            ("tensors on different devices", True, "Right."),
        ]
        assert records[0].at <= records[1].at
        assert any(a.correct for a in p.answers("l", "check-1"))
        assert not any(a.correct for a in p.answers("l", "check-2"))


def test_runs_recorded_and_latest_run_filters(db: Path):
    dev = {"kind": "cpu", "name": "test cpu", "capability": (8, 0)}
    with Progress(db) as p:
        a = p.record_run(
            experiment="train",
            params={"epochs": 1},
            device=dev,
            metrics={"accuracy": 0.9, "loss": float("nan"), "peak": float("inf")},
            status="finished",
            lesson_id="l",
            step_id="run-1",
        )
        b = p.record_run(
            experiment="train", params={"epochs": 2}, device=dev, metrics={}, status="failed", error="out of memory"
        )
        c = p.record_run(
            experiment="crossover",
            params={},
            device=dev,
            metrics={"speedup": None},
            status="finished",
            lesson_id="l",
            step_id="check-2",
        )
        assert a < b < c
    with Progress(db) as p:
        latest = p.latest_run()
        assert latest is not None and latest.id == c and latest.experiment == "crossover"
        train = p.latest_run(experiment="train")
        assert train is not None and train.id == a  # the failed one is not "finished"
        assert train.params == {"epochs": 1}
        assert train.device["capability"] == [8, 0]
        assert train.metrics["accuracy"] == 0.9
        assert math.isnan(train.metrics["loss"]) and train.metrics["peak"] == math.inf
        failed = p.latest_run(experiment="train", status="failed")
        assert failed is not None and failed.id == b and failed.error == "out of memory"
        assert p.latest_run(experiment="train", status=None).id == b
        assert p.latest_run(lesson_id="l", step_id="run-1").id == a
        assert p.latest_run(lesson_id="l").id == c
        assert p.latest_run(experiment="amp-compare") is None
        assert p.latest_run(lesson_id="l", experiment="crossover").metrics == {"speedup": None}


def test_metrics_are_stored_as_strict_json(db: Path):
    with Progress(db) as p:
        p.record_run(experiment="x", params={}, device={}, metrics={"loss": float("nan")}, status="finished")
    conn = sqlite3.connect(db)
    text = conn.execute("SELECT metrics FROM runs").fetchone()[0]
    conn.close()
    assert "NaN" not in text  # other tools' JSON parsers reject bare NaN


def test_reset_lesson_forgets_only_that_lesson(db: Path):
    with Progress(db) as p:
        for lesson in ("l", "m"):
            p.set_position(lesson, "s")
            p.complete_step(lesson, "s")
            p.lock_prediction(lesson, "s", "x", 1.0)
            p.record_answer(lesson, "s", "x", True, "")
            p.record_run(experiment="train", params={}, device={}, metrics={}, status="finished", lesson_id=lesson)
        p.reset_lesson("l")
    with Progress(db) as p:
        assert p.position("l") is None and p.completed_steps("l") == set()
        assert p.prediction("l", "s") is None and p.answers("l", "s") == []
        assert p.latest_run(lesson_id="l") is None
        assert p.position("m") == "s" and p.completed_steps("m") == {"s"}
        assert p.prediction("m", "s") is not None and any(a.correct for a in p.answers("m", "s"))
        assert p.latest_run(lesson_id="m") is not None


def test_corrupt_database_is_moved_aside_and_replaced(db: Path):
    db.parent.mkdir(parents=True)
    garbage = b"this is not an SQLite database, just bytes " * 200
    db.write_bytes(garbage)
    p = Progress(db)
    assert p.warning and "damaged" in p.warning
    backups = list(db.parent.glob("progress.db.corrupt-*"))
    assert len(backups) == 1
    assert backups[0].read_bytes() == garbage  # kept as it was, for the learner to inspect
    assert str(backups[0]) in p.warning
    p.set_position("l", "s")  # the fresh database works
    p.close()
    with Progress(db) as q:
        assert q.warning is None and q.position("l") == "s"


def test_truncated_database_is_recovered(db: Path):
    with Progress(db) as p:
        for i in range(200):
            p.record_answer("l", f"s{i}", "an answer " * 20, True, "feedback " * 20)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = db.read_bytes()
    assert len(data) > 8192
    db.write_bytes(data[:100] + b"\xff" * 4000 + data[4100:])  # smash the header and first pages
    with Progress(db) as p:
        assert p.warning is not None
        assert p.answers("l", "s1") == []
        assert list(db.parent.glob("progress.db.corrupt-*"))


def test_unwritable_home_falls_back_to_memory(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with Progress(blocker / "progress.db") as p:
        assert p.warning and "not be saved" in p.warning
        p.set_position("l", "s")
        assert p.position("l") == "s"


def test_shared_between_threads(db: Path):
    p = Progress(db)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(20):
                p.record_run(experiment=f"e{n}", params={"i": i}, device={}, metrics={"i": i}, status="finished")
                p.set_position(f"l{n}", f"s{i}")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n in range(4):
        assert p.latest_run(experiment=f"e{n}").metrics == {"i": 19}
        assert p.position(f"l{n}") == "s19"
    p.close()


def test_a_second_connection_sees_committed_writes(db: Path):
    writer, reader = Progress(db), Progress(db)
    writer.lock_prediction("l", "s", "about 2x", 2.0)
    assert reader.prediction("l", "s").value == 2.0  # committed, not waiting for close()
    writer.close()
    reader.close()


def test_exercise_drafts_survive_a_reopen(tmp_path):
    from tutor.course.progress import Progress

    db = tmp_path / "p.db"
    p = Progress(db)
    assert p.draft("l", "ex1") is None
    p.save_draft("l", "ex1", "print(1)\n")
    p.save_draft("l", "ex1", "print(2)\n")  # last write wins
    p.close()
    p = Progress(db)
    assert p.draft("l", "ex1") == "print(2)\n"
    p.reset_lesson("l")
    assert p.draft("l", "ex1") is None
    p.close()


def _saved(db: Path) -> None:
    with Progress(db) as p:
        p.set_position("l", "s2")
        p.complete_step("l", "s1")
        p.lock_prediction("l", "s2", "10x", 10.0)
        p.record_answer("l", "s1", "b", True, "right")


def _holder(db: Path, exclusive: bool) -> sqlite3.Connection:
    """Another program holding the database: a write transaction left open (readers may still
    read, as with WAL), or SQLite's exclusive locking mode (nobody else may even read)."""
    other = sqlite3.connect(db, isolation_level=None)
    if exclusive:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO completed (lesson_id, step_id, at) VALUES ('other', 'x', 0)")
    return other


def test_locked_database_starts_promptly_from_a_copy_and_leaves_the_file_alone(db: Path, monkeypatch):
    monkeypatch.setattr(progress_module, "OPEN_BUSY_MS", 100)
    _saved(db)
    other = _holder(db, exclusive=False)
    try:
        started = time.monotonic()
        p = Progress(db)
        waited = time.monotonic() - started
        # It gives up after OPEN_BUSY_MS (0.1 s here), not after sqlite3's own 5 s or the 2 s a write may
        # wait: a bound far from both, which a loaded machine meets.
        assert waited < 1.5
        assert p.warning and "locked by another program" in p.warning and str(db) in p.warning
        assert "not be saved" in p.warning
        # What was saved before is all there.
        assert p.position("l") == "s2" and p.completed_steps("l") == {"s1"}
        assert p.prediction("l", "s2").answer == "10x" and any(a.correct for a in p.answers("l", "s1"))
        p.set_position("l", "s3")  # the session goes on, in memory
        assert p.position("l") == "s3"
        p.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert not list(db.parent.glob("progress.db.corrupt-*"))  # locked is not damaged
    with Progress(db) as q:
        assert q.warning is None
        assert q.position("l") == "s2" and q.prediction("l", "s2").answer == "10x"


def test_database_locked_even_for_readers_starts_empty_and_says_so(db: Path, monkeypatch):
    monkeypatch.setattr(progress_module, "OPEN_BUSY_MS", 100)  # each wait on the lock: 0.1 s, not 0.5 s
    _saved(db)
    other = _holder(db, exclusive=True)
    try:
        p = Progress(db)
        assert p.warning and "locked" in p.warning and "not be saved" in p.warning
        p.lock_prediction("l", "s9", "a", None)
        assert p.prediction("l", "s9").answer == "a"
        p.close()
    finally:
        other.execute("ROLLBACK")
        other.close()
    with Progress(db) as q:
        assert q.warning is None and q.position("l") == "s2"


def test_a_write_that_cannot_be_saved_moves_the_session_to_memory_and_says_so(db: Path, monkeypatch):
    monkeypatch.setattr(progress_module, "WRITE_BUSY_MS", 50)
    _saved(db)
    p = Progress(db)
    told: list[str] = []
    p.on_warning = told.append
    other = _holder(db, exclusive=False)
    try:
        p.record_answer("l", "s2", "12", False, "close")  # the file is locked: this goes to memory
        assert len(told) == 1 and "saving to" in told[0] and "locked" in told[0]
        assert p.warning == told[0]
        # Nothing shown before is lost, the new answer is there, later writes work.
        assert p.position("l") == "s2" and p.prediction("l", "s2").answer == "10x"
        assert [a.answer for a in p.answers("l", "s2")] == ["12"]
        p.set_position("l", "s3")
        assert p.position("l") == "s3" and len(told) == 1  # told once
    finally:
        other.execute("ROLLBACK")
        other.close()
        p.close()
