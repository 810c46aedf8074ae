"""The learner's progress: one SQLite file (WAL) under tutor.paths.home_dir().

Stores the position in each lesson, completed steps, locked predictions, graded answers
and run metrics with the device they ran on. Every write is its own committed
transaction, so quitting (or a crash) never loses more than the write in flight.

One `Progress` may be shared between the Textual main thread and run workers: the
connection is opened with check_same_thread=False and every statement runs under a lock.
A database file that SQLite cannot read is moved aside (progress.db.corrupt-<time>) and a
fresh one started; `.warning` then says so, for the UI to show. If the home directory
cannot be written at all, progress lives in memory for this session and `.warning` says
that instead of the app failing to start.

A database another program holds locked is waited for only briefly (start-up stays
fast): the tutor then works on an in-memory copy of what it could read, leaves the file
as it is, and says so. A write that fails later (locked too long, disk full, file made
read-only) does the same from that moment: the session's progress is kept in memory,
nothing already shown is lost, and `on_warning` tells the UI.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

SCHEMA_VERSION = 6  # 2: drafts (exercise code as the learner types); 3: instrument moves; 4: reviews; 5: aids;
# 6: gradings (each graded run of an exercise, per requirement) and the misconception an answer matched

# How long to wait for another program's lock: briefly at start-up (the first screen is
# due within a second), a little longer for a write (another gpututor's writes take ms).
OPEN_BUSY_MS = 500
WRITE_BUSY_MS = 2000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS positions (
    lesson_id TEXT PRIMARY KEY,
    step_id   TEXT NOT NULL,
    seq       INTEGER NOT NULL,  -- increases with every set_position: orders last_lesson()
    at        REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS completed (
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (lesson_id, step_id)
);
CREATE TABLE IF NOT EXISTS predictions (
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    answer    TEXT NOT NULL,
    value     REAL,
    locked_at REAL NOT NULL,
    PRIMARY KEY (lesson_id, step_id)
);
CREATE TABLE IF NOT EXISTS answers (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    answer    TEXT NOT NULL,
    correct   INTEGER NOT NULL,
    feedback  TEXT NOT NULL,
    at        REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_step ON answers (lesson_id, step_id);
CREATE TABLE IF NOT EXISTS runs (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id  TEXT,
    step_id    TEXT,
    experiment TEXT NOT NULL,
    params     TEXT NOT NULL,  -- JSON
    device     TEXT NOT NULL,  -- JSON
    metrics    TEXT NOT NULL,  -- JSON
    status     TEXT NOT NULL,  -- finished | failed
    error      TEXT,
    at         REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_experiment ON runs (experiment, status);
CREATE INDEX IF NOT EXISTS runs_step ON runs (lesson_id, step_id);
CREATE TABLE IF NOT EXISTS drafts (
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    code      TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (lesson_id, step_id)
);
CREATE TABLE IF NOT EXISTS instrument_moves (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id  TEXT NOT NULL,
    step_id    TEXT NOT NULL,
    instrument TEXT NOT NULL,
    settings   TEXT NOT NULL,  -- JSON: every control's value after this move
    outputs    TEXT NOT NULL,  -- JSON: what the instrument computed for them
    at         REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS moves_step ON instrument_moves (lesson_id, step_id);
CREATE TABLE IF NOT EXISTS reviews (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    answer    TEXT NOT NULL,
    correct   INTEGER NOT NULL,
    feedback  TEXT NOT NULL,
    at        REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS reviews_step ON reviews (lesson_id, step_id);
CREATE TABLE IF NOT EXISTS aids (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id TEXT NOT NULL,
    step_id   TEXT NOT NULL,
    kind      TEXT NOT NULL,  -- hint | solution
    at        REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS aids_step ON aids (lesson_id, step_id);
CREATE TABLE IF NOT EXISTS gradings (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    lesson_id    TEXT NOT NULL,
    step_id      TEXT NOT NULL,
    code         TEXT NOT NULL,
    requirements TEXT NOT NULL,  -- JSON: [{id, title, passed, judged, feedback}]
    passed       INTEGER NOT NULL,
    summary      TEXT NOT NULL,
    at           REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS gradings_step ON gradings (lesson_id, step_id);
"""

# Columns added to a table after it first shipped: (table, column, its declaration). CREATE TABLE
# IF NOT EXISTS leaves an older file's table as it was, so `_migrate` adds these where missing.
_ADDED_COLUMNS = (
    ("answers", "misconception", "TEXT"),  # the rubric misconception a wrong answer matched (6)
    ("reviews", "misconception", "TEXT"),
)


@dataclass(frozen=True)
class Prediction:
    lesson_id: str
    step_id: str
    answer: str
    value: float | None
    locked_at: float


@dataclass(frozen=True)
class Aids:
    """What help a learner took on one step: hints shown (tiers) and whether the solution was."""

    hints: int = 0
    solution: bool = False


@dataclass(frozen=True)
class AnswerRecord:
    lesson_id: str
    step_id: str
    answer: str
    correct: bool
    feedback: str
    at: float
    misconception: str | None = None  # the rubric misconception it matched, where the grader named one


@dataclass(frozen=True)
class Grading:
    """One graded run of a learner's exercise program: the code, and each requirement's verdict."""

    lesson_id: str
    step_id: str
    code: str
    requirements: list[dict[str, Any]]  # {id, title, passed, judged, feedback}
    passed: bool
    summary: str
    at: float


@dataclass(frozen=True)
class Move:
    """One setting of an instrument's controls by the learner, with what it computed."""

    lesson_id: str
    step_id: str
    instrument: str
    settings: dict[str, Any]
    outputs: dict[str, Any]
    at: float


@dataclass(frozen=True)
class RunRecord:
    id: int
    lesson_id: str | None
    step_id: str | None
    experiment: str
    params: dict[str, Any]
    device: dict[str, Any]
    metrics: dict[str, Any]
    status: str
    error: str | None
    at: float


def default_path() -> Path:
    from tutor.paths import home_dir

    return home_dir() / "progress.db"


# ---------------------------------------------------------------- JSON that survives NaN/inf

# Non-finite floats (a loss that went NaN in fp16 is a lesson in itself) are tagged so the
# stored text is strict JSON that any tool can read, and come back as the same float.
_NONFINITE = "__float__"


def _encode(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {_NONFINITE: repr(value)}  # 'nan', 'inf', '-inf'
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # a Path, a torch.device...: keep something readable


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1 and _NONFINITE in value:
            return float(value[_NONFINITE])
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


def dumps(value: Any) -> str:
    return json.dumps(_encode(value), allow_nan=False, sort_keys=True)


def loads(text: str | None) -> Any:
    if not text:
        return {}
    try:
        return _decode(json.loads(text))
    except ValueError:
        return {}


# ---------------------------------------------------------------- the store


class Progress:
    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else default_path()
        self.warning: str | None = None
        # Called with the warning when saving fails mid-session (from whichever thread wrote).
        self.on_warning: Callable[[str], object] | None = None
        self._in_memory_only = False
        self._lock = threading.RLock()
        self._conn = self._open()

    # -- opening, recovery

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            return self._in_memory(f"cannot create {self.path.parent} ({e.strerror or e})")
        try:
            return self._connect(self.path)
        except sqlite3.DatabaseError as e:
            if self._is_locked(e):
                return self._locked_copy()
            if not self._is_corruption(e):
                return self._in_memory(f"cannot open {self.path} ({e})")
        backup = self._move_aside()
        try:
            conn = self._connect(self.path)
        except sqlite3.DatabaseError as e:
            return self._in_memory(f"cannot open {self.path} ({e})")
        self.warning = (
            f"Your progress database was damaged and could not be read; it was moved to "
            f"{backup} and a fresh one started."
        )
        return conn

    @staticmethod
    def _is_corruption(e: sqlite3.DatabaseError) -> bool:
        # OperationalError covers "database is locked", "unable to open": not corruption.
        if isinstance(e, sqlite3.OperationalError):
            text = str(e).lower()
            return "malformed" in text or "not a database" in text
        return True

    @staticmethod
    def _is_locked(e: sqlite3.DatabaseError) -> bool:
        return isinstance(e, sqlite3.OperationalError) and "locked" in str(e).lower()

    def _connect(self, path: Path | str) -> sqlite3.Connection:
        conn = sqlite3.connect(str(path), timeout=OPEN_BUSY_MS / 1000, check_same_thread=False, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {OPEN_BUSY_MS}")
            if str(path) != ":memory:":
                # WAL lets the TUI read while a worker records a run; a filesystem without
                # shared memory refuses it, and the default journal still works there.
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                ok = conn.execute("PRAGMA quick_check").fetchone()
                if not ok or ok[0] != "ok":
                    raise sqlite3.DatabaseError(f"database disk image is malformed ({ok and ok[0]})")
            self._migrate(conn)
            conn.execute(f"PRAGMA busy_timeout = {WRITE_BUSY_MS}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            # Written by a newer gpututor: use it as it is (tables are only ever added to).
            self.warning = (
                f"{self.path} was written by a newer gpututor (schema {version}, this one "
                f"knows {SCHEMA_VERSION}); some progress may not show."
            )
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            for table, column, declared in _ADDED_COLUMNS:
                if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declared}")
            if version < SCHEMA_VERSION:
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _move_aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        n = 1
        while backup.exists():
            n += 1
            backup = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}")
        self.path.replace(backup)
        # The WAL and shared-memory files belong to the damaged database, not the new one.
        for suffix in ("-wal", "-shm", "-journal"):
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                try:
                    side.replace(backup.with_name(backup.name + suffix))
                except OSError:
                    pass
        return backup

    def _in_memory(self, why: str, copy_file: bool = False) -> sqlite3.Connection:
        """A database in memory for this session: empty, or a copy of what the file lets us read."""
        self._in_memory_only = True
        memory = sqlite3.connect("file::memory:", uri=True, check_same_thread=False, isolation_level=None)
        memory.execute(f"PRAGMA busy_timeout = {OPEN_BUSY_MS}")
        self._migrate(memory)
        warning = f"Progress will not be saved this session: {why}."
        if copy_file and not self._copy_file_into(memory):
            warning = f"Progress will not be saved this session, and earlier progress could not be read: {why}."
        self.warning = warning
        return memory

    def _copy_file_into(self, memory: sqlite3.Connection) -> bool:
        """Copy every table the file shares with this schema, column by column (an older file
        may lack some). Not Connection.backup: that retries a locked file forever."""
        try:
            memory.execute("ATTACH DATABASE ? AS disk", (f"{self.path.as_uri()}?mode=ro",))
        except sqlite3.Error:
            return False
        try:
            memory.execute("BEGIN")
            tables = [r[0] for r in memory.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")]
            for table in tables:
                ours = [r[1] for r in memory.execute(f"PRAGMA main.table_info({table})")]
                theirs = {r[1] for r in memory.execute(f"PRAGMA disk.table_info({table})")}
                columns = ", ".join(c for c in ours if c in theirs)
                if columns:
                    memory.execute(f"INSERT OR IGNORE INTO main.{table} ({columns}) SELECT {columns} FROM disk.{table}")
            memory.execute("COMMIT")
            return True
        except sqlite3.Error:
            if memory.in_transaction:
                memory.execute("ROLLBACK")
            return False
        finally:
            try:
                memory.execute("DETACH DATABASE disk")
            except sqlite3.Error:
                pass

    def _locked_copy(self) -> sqlite3.Connection:
        """Another program holds the file: read what it allows, leave the file alone."""
        return self._in_memory(
            f"{self.path} is locked by another program (another gpututor, or a database tool "
            f"with a transaction open); it was left as it is",
            copy_file=True,
        )

    # -- plumbing

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run `body` in one committed transaction. If the file cannot take it (locked past
        WRITE_BUSY_MS, disk full, read-only), switch to an in-memory copy, say so, and
        write there: the session goes on and nothing it has shown is lost."""
        with self._lock:
            try:
                return self._transaction(body)
            except sqlite3.OperationalError as e:
                if self._in_memory_only:
                    raise
                try:
                    self._conn.close()
                except sqlite3.Error:
                    pass
                self._conn = self._in_memory(f"saving to {self.path} failed ({e})", copy_file=True)
                if self.on_warning is not None:
                    self.on_warning(self.warning or "")
                return self._transaction(body)

    def _transaction(self, body: Callable[[sqlite3.Connection], T]) -> T:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            result = body(self._conn)
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            raise
        return result

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    # -- position

    def position(self, lesson_id: str) -> str | None:
        rows = self._query("SELECT step_id FROM positions WHERE lesson_id = ?", (lesson_id,))
        return rows[0][0] if rows else None

    def set_position(self, lesson_id: str, step_id: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            seq = c.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM positions").fetchone()[0]
            c.execute(
                "INSERT INTO positions (lesson_id, step_id, seq, at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (lesson_id) DO UPDATE SET step_id = excluded.step_id, "
                "seq = excluded.seq, at = excluded.at",
                (lesson_id, step_id, seq, time.time()),
            )

        self._write(write)

    def last_lesson(self) -> str | None:
        rows = self._query("SELECT lesson_id FROM positions ORDER BY seq DESC LIMIT 1")
        return rows[0][0] if rows else None

    # -- completion

    def complete_step(self, lesson_id: str, step_id: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR IGNORE INTO completed (lesson_id, step_id, at) VALUES (?, ?, ?)",
                (lesson_id, step_id, time.time()),
            )

        self._write(write)

    def completed_steps(self, lesson_id: str) -> set[str]:
        return {r[0] for r in self._query("SELECT step_id FROM completed WHERE lesson_id = ?", (lesson_id,))}

    # -- predictions

    def lock_prediction(self, lesson_id: str, step_id: str, answer: str, value: float | None) -> Prediction:
        """Lock a prediction. The first lock wins: locking again returns the existing one."""
        if value is not None:
            value = float(value)
            if not math.isfinite(value):
                value = None  # SQLite stores NaN as NULL anyway; say so explicitly

        def write(c: sqlite3.Connection) -> tuple[Any, ...]:
            c.execute(
                "INSERT OR IGNORE INTO predictions (lesson_id, step_id, answer, value, locked_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (lesson_id, step_id, str(answer), value, time.time()),
            )
            row: tuple[Any, ...] = c.execute(
                "SELECT answer, value, locked_at FROM predictions WHERE lesson_id = ? AND step_id = ?",
                (lesson_id, step_id),
            ).fetchone()
            return row

        row = self._write(write)
        return Prediction(lesson_id, step_id, row[0], row[1], row[2])

    def prediction(self, lesson_id: str, step_id: str) -> Prediction | None:
        rows = self._query(
            "SELECT answer, value, locked_at FROM predictions WHERE lesson_id = ? AND step_id = ?",
            (lesson_id, step_id),
        )
        return Prediction(lesson_id, step_id, *rows[0]) if rows else None

    # -- answers

    def record_answer(
        self,
        lesson_id: str,
        step_id: str,
        answer: str,
        correct: bool,
        feedback: str,
        misconception: str | None = None,
    ) -> None:
        self._add_answer("answers", lesson_id, step_id, answer, correct, feedback, misconception)

    def answers(self, lesson_id: str, step_id: str) -> list[AnswerRecord]:
        """Every answer to one step in its lesson, oldest first."""
        return self._answers_in("answers", lesson_id, step_id)

    # -- review (a finished lesson's checks asked again; kept apart from the lesson's own answers)

    def record_review(
        self,
        lesson_id: str,
        step_id: str,
        answer: str,
        correct: bool,
        feedback: str,
        misconception: str | None = None,
    ) -> None:
        self._add_answer("reviews", lesson_id, step_id, answer, correct, feedback, misconception)

    def reviews(self, lesson_id: str, step_id: str) -> list[AnswerRecord]:
        """Every review answer to one check, oldest first."""
        return self._answers_in("reviews", lesson_id, step_id)

    # The two tables have the same columns; `table` is one of these two names, never input.
    _ANSWER_TABLES = ("answers", "reviews")

    def _add_answer(
        self,
        table: str,
        lesson_id: str,
        step_id: str,
        answer: str,
        correct: bool,
        feedback: str,
        misconception: str | None = None,
    ) -> None:
        assert table in self._ANSWER_TABLES

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                f"INSERT INTO {table} (lesson_id, step_id, answer, correct, feedback, at, misconception) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (lesson_id, step_id, str(answer), int(bool(correct)), str(feedback or ""), time.time(), misconception),
            )

        self._write(write)

    def _answers_in(self, table: str, lesson_id: str, step_id: str) -> list[AnswerRecord]:
        assert table in self._ANSWER_TABLES
        rows = self._query(
            f"SELECT answer, correct, feedback, at, misconception FROM {table} "
            "WHERE lesson_id = ? AND step_id = ? ORDER BY id",
            (lesson_id, step_id),
        )
        return [AnswerRecord(lesson_id, step_id, a, bool(c), f, at, m) for a, c, f, at, m in rows]

    # -- gradings: each graded run of an exercise, with the code and every requirement's verdict

    def record_grading(
        self,
        lesson_id: str,
        step_id: str,
        code: str,
        requirements: list[dict[str, Any]],
        passed: bool,
        summary: str,
    ) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO gradings (lesson_id, step_id, code, requirements, passed, summary, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (lesson_id, step_id, code, dumps(requirements), int(bool(passed)), str(summary or ""), time.time()),
            )

        self._write(write)

    def gradings(self, lesson_id: str, step_id: str) -> list[Grading]:
        """Every graded run of one exercise, oldest first."""
        rows = self._query(
            "SELECT code, requirements, passed, summary, at FROM gradings WHERE lesson_id = ? AND step_id = ? "
            "ORDER BY id",
            (lesson_id, step_id),
        )
        found = []
        for code, requirements, passed, summary, at in rows:
            decoded = loads(requirements)
            found.append(
                Grading(
                    lesson_id, step_id, code, decoded if isinstance(decoded, list) else [], bool(passed), summary, at
                )
            )
        return found

    # -- aids: the hints and solutions a learner asked for

    def record_aid(self, lesson_id: str, step_id: str, kind: str) -> None:
        """One hint shown (the next tier) or the solution shown."""
        assert kind in ("hint", "solution")

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO aids (lesson_id, step_id, kind, at) VALUES (?, ?, ?, ?)",
                (lesson_id, step_id, kind, time.time()),
            )

        self._write(write)

    def aids(self, lesson_id: str, step_id: str) -> Aids:
        rows = self._query(
            "SELECT kind, COUNT(*) FROM aids WHERE lesson_id = ? AND step_id = ? GROUP BY kind", (lesson_id, step_id)
        )
        counts = dict(rows)
        return Aids(hints=counts.get("hint", 0), solution=bool(counts.get("solution", 0)))

    # -- runs

    def record_run(
        self,
        *,
        experiment: str,
        params: dict[str, Any],
        device: dict[str, Any],
        metrics: dict[str, Any],
        status: str,
        error: str | None = None,
        lesson_id: str | None = None,
        step_id: str | None = None,
    ) -> int:
        def write(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "INSERT INTO runs (lesson_id, step_id, experiment, params, device, metrics, status, error, at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    lesson_id,
                    step_id,
                    experiment,
                    dumps(params or {}),
                    dumps(device or {}),
                    dumps(metrics or {}),
                    status,
                    error,
                    time.time(),
                ),
            )
            assert cur.lastrowid is not None  # an INSERT always sets it
            return cur.lastrowid

        return self._write(write)

    def latest_run(
        self,
        *,
        lesson_id: str | None = None,
        step_id: str | None = None,
        experiment: str | None = None,
        status: str | None = "finished",
        params_match: Callable[[dict[str, Any]], bool] | None = None,
    ) -> RunRecord | None:
        """The most recent run matching every filter given (None = any); status None = any status;
        `params_match`: true of the run's params (a prediction judged at named settings)."""
        where, args = [], []
        for column, value in (
            ("lesson_id", lesson_id),
            ("step_id", step_id),
            ("experiment", experiment),
            ("status", status),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT id, lesson_id, step_id, experiment, params, device, metrics, status, error, at FROM runs"
        if where:
            sql += " WHERE " + " AND ".join(where)
        rows = self._query(sql + " ORDER BY id DESC" + ("" if params_match else " LIMIT 1"), tuple(args))
        for rid, lid, sid, exp, params, device, metrics, st, err, at in rows:
            decoded = loads(params)
            if params_match is None or params_match(decoded if isinstance(decoded, dict) else {}):
                return RunRecord(rid, lid, sid, exp, decoded, loads(device), loads(metrics), st, err, at)
        return None

    # -- instruments

    def record_move(
        self, lesson_id: str, step_id: str, instrument: str, settings: dict[str, Any], outputs: dict[str, Any]
    ) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO instrument_moves (lesson_id, step_id, instrument, settings, outputs, at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (lesson_id, step_id, instrument, dumps(settings), dumps(outputs), time.time()),
            )

        self._write(write)

    _MOVE_COLUMNS = "lesson_id, step_id, instrument, settings, outputs, at"

    @staticmethod
    def _move(row: tuple[Any, ...]) -> Move:
        lid, sid, inst, settings, outputs, at = row
        return Move(lid, sid, inst, loads(settings), loads(outputs), at)

    def moves(self, lesson_id: str, step_id: str) -> list[Move]:
        """Every move on one instrument step, oldest first."""
        rows = self._query(
            f"SELECT {self._MOVE_COLUMNS} FROM instrument_moves WHERE lesson_id = ? AND step_id = ? ORDER BY id",
            (lesson_id, step_id),
        )
        return [self._move(r) for r in rows]

    def last_move(self, lesson_id: str, step_id: str) -> Move | None:
        rows = self._query(
            f"SELECT {self._MOVE_COLUMNS} FROM instrument_moves WHERE lesson_id = ? AND step_id = ? "
            "ORDER BY id DESC LIMIT 1",
            (lesson_id, step_id),
        )
        return self._move(rows[0]) if rows else None

    def count_moves(self, lesson_id: str, step_id: str) -> int:
        rows = self._query(
            "SELECT COUNT(*) FROM instrument_moves WHERE lesson_id = ? AND step_id = ?", (lesson_id, step_id)
        )
        return int(rows[0][0])

    def predictions(self, lesson_id: str) -> list[Prediction]:
        rows = self._query(
            "SELECT lesson_id, step_id, answer, value, locked_at FROM predictions WHERE lesson_id = ?", (lesson_id,)
        )
        return [Prediction(*r) for r in rows]

    # -- housekeeping

    def save_draft(self, lesson_id: str, step_id: str, code: str) -> None:
        """The learner's exercise code, saved as they type (one row per step, last write wins)."""

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO drafts (lesson_id, step_id, code, at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (lesson_id, step_id) DO UPDATE SET code = excluded.code, at = excluded.at",
                (lesson_id, step_id, code, time.time()),
            )

        self._write(write)

    def draft(self, lesson_id: str, step_id: str) -> str | None:
        rows = self._query("SELECT code FROM drafts WHERE lesson_id = ? AND step_id = ?", (lesson_id, step_id))
        return rows[0][0] if rows else None

    def reset_lesson(self, lesson_id: str) -> None:
        """Forget everything about one lesson: position, completion, predictions, answers, runs, drafts, moves,
        reviews."""

        def write(c: sqlite3.Connection) -> None:
            for table in (
                "positions",
                "completed",
                "predictions",
                "answers",
                "runs",
                "drafts",
                "instrument_moves",
                "reviews",
                "gradings",
            ):
                c.execute(f"DELETE FROM {table} WHERE lesson_id = ?", (lesson_id,))

        self._write(write)

    def close(self) -> None:
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
