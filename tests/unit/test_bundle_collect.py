"""A learner's bundle, collected from the progress store (tutor/classroom/collect.py): each locked
prediction carries its reveal's verdict and the profile's signed error; checks their attempts and
the misconception matched; exercises each graded run per requirement; a hand edit shows. Runs are
stored by hand (no torch): the verdicts come from the same code the reveal uses."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from tutor import settings as user_settings
from tutor.classroom import bundle as bundles
from tutor.classroom.collect import build
from tutor.course.catalog import discover
from tutor.course.progress import Progress
from tutor.course.session import LessonSession, Reveal, RunOutcome
from tutor.exercises.grader import ExerciseResult, RequirementResult
from tutor.exercises.sandbox import SandboxResult

LESSON = "cpu-vs-gpu"


@pytest.fixture(scope="module")
def lesson_and_path():
    item = discover().get(LESSON)
    return item.lesson, item.path


def _crossover(session: LessonSession, speedup: float, low: float, high: float) -> None:
    """A finished crossover run of the lesson's step, as the TUI stores one (stamped with this machine)."""
    step = session.lesson.step("crossover-run")
    metrics = {"speedup_tiny": speedup, "speedup_tiny_low": low, "speedup_tiny_high": high}
    session.record_run(step, RunOutcome("crossover", {}, "finished", metrics, {"kind": "cuda", "name": "Test GPU"}))


@pytest.mark.parametrize(
    ("answer", "interval", "verdict", "log_error"),
    [
        ("10x", (1.9, 2.1), "miss", math.log(10 / 2)),  # far off: log(predicted / measured)
        ("2x", (1.99, 2.01), "hit", math.log(2 / 2)),
        ("2x", (1.5, 2.6), "undecided", 0.0),  # the interval straddles the tolerance's edges
        ("1x", None, "unmeasured", None),  # no run of its step yet
    ],
)
def test_a_prediction_carries_its_reveals_verdict(tmp_path, lesson_and_path, answer, interval, verdict, log_error):
    lesson, path = lesson_and_path
    with Progress(tmp_path / "p.db") as progress:
        session = LessonSession(lesson, progress)
        predict = lesson.step("crossover-predict")
        session.lock(predict, answer)
        if interval is not None:
            _crossover(session, 2.0, *interval)
        revealed = session.reveal(predict)
        sealed = build([(lesson, path)], progress, "Ada")
    (record,) = sealed.lessons[0].predictions
    assert record.verdict == verdict
    assert record.answer == answer and record.concept == "gpu-speedup"
    if log_error is None:
        assert record.measured is None and record.log_error is None
        assert "measure it" in record.feedback
        return
    assert isinstance(revealed, Reveal)  # the same verdict as the reveal on screen
    judged = revealed.judge()
    assert judged.score.undecided == (verdict == "undecided") and judged.hit == (verdict == "hit")
    assert record.measured is not None
    assert (record.measured.value, record.measured.low, record.measured.high) == (2.0, *interval)
    assert record.measured.device == "cuda: Test GPU" and record.measured.method is not None
    assert record.log_error == pytest.approx(log_error)
    assert record.value == pytest.approx(float(answer.rstrip("x")))


def test_checks_exercises_aids_and_the_digest(tmp_path, lesson_and_path):
    lesson, path = lesson_and_path
    with Progress(tmp_path / "p.db") as progress:
        session = LessonSession(lesson, progress)
        check, text = lesson.step("intermediate-check"), lesson.step("interview-cpu-gpu")
        assert not session.answer(check, "about the same").correct
        assert session.answer(check, "about three times as big").correct
        assert session.answer(text, "GPUs are always faster for everything").verdict.matched_misconception
        exercise = lesson.step("practice-basic")
        results = [
            RequirementResult("checks-cuda", "behaviour", True, ""),
            RequirementResult("checks-mps", "behaviour", False, "Ask about MPS", title="Asks about MPS"),
            RequirementResult("moves", "behaviour", False, "", judged=False),
        ]
        session.record_exercise(
            exercise, ExerciseResult(False, results, SandboxResult(exit_code=0), "2 of 3"), "print(1)"
        )
        passing = [RequirementResult(r.id, r.type, True, "") for r in results]
        session.record_exercise(exercise, ExerciseResult(True, passing, SandboxResult(exit_code=0), "all"), "print(2)")
        session.next_hint(text)
        sealed = build([(lesson, path)], progress, "Ada")
    record = sealed.lessons[0]
    assert record.content_hash == bundles.content_hash(path)
    assert set(record.completed) == {"intermediate-check", "practice-basic"}
    first, second = record.checks
    assert (first.step, first.correct, first.first_try, len(first.attempts)) == ("intermediate-check", True, False, 2)
    assert second.attempts[0].misconception == "always-faster" and not second.correct
    (done,) = record.exercises
    assert done.passed and done.code == "print(2)" and [g.passed for g in done.gradings] == [False, True]
    failed = {r.id: r for r in done.gradings[0].requirements}
    assert failed["checks-mps"].title == "Asks about MPS" and not failed["checks-mps"].passed
    assert failed["checks-mps"].feedback == "Ask about MPS" and not failed["moves"].judged
    assert [(a.step, a.hints) for a in record.aids] == [("interview-cpu-gpu", 1)]

    out = tmp_path / "ada.gpututor.json"
    out.write_text(bundles.dumps(sealed), encoding="utf-8")
    assert not bundles.read(out).edited
    data = json.loads(out.read_text(encoding="utf-8"))
    data["lessons"][0]["checks"][0]["first_try"] = True  # a casual edit
    out.write_text(json.dumps(data), encoding="utf-8")
    assert bundles.read(out).edited


def test_an_older_progress_file_gains_the_new_columns(tmp_path):
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.execute(
        "CREATE TABLE answers (id INTEGER PRIMARY KEY AUTOINCREMENT, lesson_id TEXT NOT NULL, step_id TEXT "
        "NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL, feedback TEXT NOT NULL, at REAL NOT NULL)"
    )
    conn.execute(
        "INSERT INTO answers (lesson_id, step_id, answer, correct, feedback, at) VALUES ('l', 's', 'a', 0, '', 1)"
    )
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()
    with Progress(db) as progress:
        assert progress.warning is None
        progress.record_answer("l", "s", "b", False, "no", "a-myth")
        assert [(a.answer, a.misconception) for a in progress.answers("l", "s")] == [("a", None), ("b", "a-myth")]
        progress.record_grading("l", "e", "code", [{"id": "r", "passed": True}], True, "ok")
        assert progress.gradings("l", "e")[0].requirements == [{"id": "r", "passed": True}]


def test_the_learner_is_saved_into_settings_keeping_the_rest(tmp_path, monkeypatch):
    path = tmp_path / "settings.toml"
    path.write_text('# mine\ngpu_memory_mb = 4096\nclass_dir = "class"\n', encoding="utf-8")
    user_settings.save_learner('Ada "the first"', path)
    saved = user_settings.load(path)
    assert saved.problem is None and saved.learner == 'Ada "the first"' and saved.gpu_memory_mb == 4096
    assert path.read_text(encoding="utf-8").count("# mine") == 1
    monkeypatch.delenv(user_settings.CLASS_DIR_ENV, raising=False)
    assert user_settings.class_dir(saved) == tmp_path / "class"
    monkeypatch.setenv(user_settings.CLASS_DIR_ENV, str(tmp_path / "elsewhere"))
    assert user_settings.class_dir(saved) == tmp_path / "elsewhere"
    user_settings.save_learner("Grace", path)  # replaced, not added
    assert user_settings.load(path).learner == "Grace"
    assert Path(path).read_text(encoding="utf-8").count("learner =") == 1
