"""Review mode: which checks come back, how often, and how the answers are kept."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from tutor.course import review
from tutor.course.loader import load_text
from tutor.course.progress import Progress

LESSON = """\
id: rev
title: Review fixture
steps:
  - id: intro
    kind: read
    body: Hello.
  - id: c1
    kind: check
    prompt: Which device runs big matrix multiplications fastest?
    answer:
      type: choice
      options:
        - {text: the GPU, correct: true, feedback: Yes.}
        - {text: the CPU, feedback: Not for big ones.}
  - id: c2
    kind: check
    prompt: What must move to the GPU with the model?
    answer:
      type: choice
      options:
        - {text: every batch, correct: true, feedback: Yes.}
        - {text: nothing, feedback: The batch must move too.}
  - id: c3
    kind: check
    prompt: Does PyTorch move tensors between devices for you?
    answer:
      type: choice
      options:
        - {text: "no", correct: true, feedback: Right.}
        - {text: "yes", feedback: It raises an error instead.}
"""


@pytest.fixture
def lesson():
    return load_text(LESSON, "rev.yaml")


@pytest.fixture
def progress(tmp_path):
    with Progress(tmp_path / "progress.db") as p:
        yield p


def finish(progress, lesson):
    for s in lesson.steps:
        progress.complete_step(lesson.id, s.id)


def test_only_finished_lessons_are_reviewed(lesson, progress):
    assert review.pool([lesson], progress) == []
    progress.complete_step("rev", "intro")
    assert review.pool([lesson], progress) == []  # started is not finished
    finish(progress, lesson)
    assert [q.step.id for q in review.pool([lesson], progress)] == ["c1", "c2", "c3"]  # checks only


def test_wrong_answers_raise_the_weight_and_right_reviews_lower_it(lesson, progress):
    finish(progress, lesson)
    progress.record_answer("rev", "c1", "the CPU", False, "Not for big ones.")
    progress.record_answer("rev", "c1", "the GPU", True, "Yes.")
    progress.record_answer("rev", "c2", "every batch", True, "Yes.")
    progress.record_answer("rev", "c3", "(gave up)", False, "shown the answer")
    progress.record_answer("rev", "c3", "(gave up)", False, "shown the answer")
    q = {x.step.id: x for x in review.pool([lesson], progress)}
    assert (q["c1"].wrong, q["c2"].wrong, q["c3"].wrong) == (1, 0, 2)
    assert q["c3"].weight > q["c1"].weight > q["c2"].weight
    assert q["c1"].why() == "you missed this 1 time before"
    assert q["c2"].why() == "you got this right in the lesson"
    progress.record_answer("rev", "c2", "every batch", True, "Yes.")  # (c2 has answers; a check never answered:)
    finish(progress, lesson)

    progress.record_review("rev", "c3", "yes", False, "It raises an error instead.")
    assert {x.step.id: x for x in review.pool([lesson], progress)}["c3"].wrong == 3

    for _ in range(2):
        progress.record_review("rev", "c1", "the GPU", True, "Yes.")
    c1 = {x.step.id: x for x in review.pool([lesson], progress)}["c1"]
    assert c1.streak == 2 and c1.weight == q["c1"].weight / 4
    assert c1.why() == "right the last 2 times in review"
    progress.record_review("rev", "c1", "the CPU", False, "Not for big ones.")
    c1 = {x.step.id: x for x in review.pool([lesson], progress)}["c1"]
    assert c1.streak == 0 and c1.wrong == 2  # one miss ends the streak


def test_a_check_marked_review_false_is_never_asked(progress):
    text = LESSON.replace("  - id: c3\n    kind: check\n", "  - id: c3\n    kind: check\n    review: false\n")
    lesson = load_text(text, "rev.yaml")
    finish(progress, lesson)
    assert [q.step.id for q in review.pool([lesson], progress)] == ["c1", "c2"]


def test_a_check_never_answered_is_new(lesson, progress):
    finish(progress, lesson)
    assert {q.why() for q in review.pool([lesson], progress)} == {"new to you"}


def test_picks_favour_the_missed_checks_without_repeats(lesson, progress):
    finish(progress, lesson)
    for _ in range(3):
        progress.record_answer("rev", "c3", "yes", False, "x")
    questions = review.pool([lesson], progress)
    rng = random.Random(7)
    firsts = Counter(review.pick(questions, n=1, rng=rng)[0].step.id for _ in range(2000))
    # Weights 1, 1, 7: c3 comes first about 7 times in 9.
    assert firsts["c3"] > 1400 and firsts["c1"] > 100 and firsts["c2"] > 100
    for _ in range(50):
        picked = review.pick(questions, n=5, rng=rng)
        assert sorted(q.step.id for q in picked) == ["c1", "c2", "c3"]  # all of them, once each


def test_reviews_are_kept_apart_from_the_lessons_answers_and_reset_with_it(lesson, progress):
    finish(progress, lesson)
    progress.record_review("rev", "c1", "the GPU", True, "Yes.")
    assert progress.answers("rev", "c1") == []
    [r] = progress.reviews("rev", "c1")
    assert (r.answer, r.correct, r.feedback) == ("the GPU", True, "Yes.")
    progress.reset_lesson("rev")
    assert progress.reviews("rev", "c1") == []


def test_a_schema_3_database_gains_the_reviews_table(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE answers (id INTEGER PRIMARY KEY AUTOINCREMENT, lesson_id TEXT NOT NULL, "
        "step_id TEXT NOT NULL, answer TEXT NOT NULL, correct INTEGER NOT NULL, feedback TEXT NOT NULL, "
        "at REAL NOT NULL)"
    )
    conn.execute(
        "INSERT INTO answers (lesson_id, step_id, answer, correct, feedback, at) "
        "VALUES ('rev', 'c1', 'the CPU', 0, 'x', 1.0)"
    )
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with Progress(path) as p:
        assert p.warning is None
        assert len(p.answers("rev", "c1")) == 1  # kept
        p.record_review("rev", "c1", "the GPU", True, "Yes.")
        assert len(p.reviews("rev", "c1")) == 1


def test_a_check_answered_with_hints_comes_back_sooner_than_one_answered_alone(tmp_path):
    from tutor.course.review import Question

    plain = Question(None, None, wrong=0, streak=0, reviewed=0, answered=1)
    hinted = Question(None, None, wrong=0, streak=0, reviewed=0, answered=1, hints=2)
    assert hinted.weight == 3 * plain.weight and hinted.why() == "you took 2 hints on it"
    capped = Question(None, None, wrong=3, streak=0, reviewed=0, answered=1, hints=4)
    assert capped.weight == Question(None, None, wrong=3, streak=0, reviewed=0, answered=1).weight


CONCEPTS = LESSON.replace(
    "  - id: c1\n    kind: check\n", "  - id: c1\n    kind: check\n    concept: gpu-speedup\n"
).replace("  - id: c2\n    kind: check\n", "  - id: c2\n    kind: check\n    concept: memory\n")


def test_checks_of_a_badly_predicted_concept_weigh_more_and_come_first(progress):
    """Issue 26, part 3: review picks the worst-calibrated concepts first."""
    lesson = load_text(CONCEPTS, "rev.yaml")
    finish(progress, lesson)
    q = {x.step.id: x for x in review.pool([lesson], progress, off_by={"gpu-speedup": 4.0, "memory": 2.0})}
    assert q["c1"].weight == 3 * q["c3"].weight and q["c2"].weight == 2 * q["c3"].weight
    assert q["c1"].why() == "your predictions of GPU speed-ups are off x4; new to you"
    assert q["c3"].off_by is None and q["c3"].why() == "new to you"
    rng = random.Random(3)
    for _ in range(50):
        assert [x.step.id for x in review.pick(list(q.values()), n=3, rng=rng)] == ["c1", "c2", "c3"]
    far = review.pool([lesson], progress, off_by={"gpu-speedup": 100.0})
    assert {x.step.id: x for x in far}["c1"].weight == 3 * q["c3"].weight  # x4 and beyond weigh alike


def test_the_profile_decides_which_concepts_are_misjudged(progress):
    """A prediction locked 10x too high, measured by a run: its concept comes back in review."""
    from tutor import experiments
    from tutor.course.session import LessonSession, RunOutcome

    text = CONCEPTS.replace(
        "steps:\n",
        "steps:\n"
        "  - {id: guess, kind: predict, prompt: Speedup?, compare: speedup, unit: x,\n"
        "     concept: gpu-speedup, answer: {type: number, unit: x, min: 0, max: 1000}}\n"
        "  - {id: measure, kind: run, experiment: crossover}\n",
        1,
    )
    lesson = load_text(text, "rev.yaml")
    session = LessonSession(lesson, progress)
    session.lock(lesson.step("guess"), "30")
    metrics = {m: None for m in experiments.get("crossover").metrics} | {"speedup": 3.0}
    session.record_run(lesson.step("measure"), RunOutcome("crossover", {}, "finished", metrics, {}))
    assert review.misjudged([lesson], progress) == pytest.approx({"gpu-speedup": 10.0})
    finish(progress, lesson)
    q = {x.step.id: x for x in review.pool([lesson], progress)}
    assert q["c1"].off_by == pytest.approx(10.0) and q["c2"].off_by is None
    assert q["c1"].why().startswith("your predictions of GPU speed-ups are off x10")


def _options(*texts: str):
    from tutor.checks.answers import ChoiceOption

    return [ChoiceOption(text=t) for t in texts]


@pytest.mark.parametrize(
    "texts",
    [
        ("DDP needs less memory", "DataParallel runs every GPU from one process", "DataParallel sums wrongly"),
        ("the GPU", "the CPU"),
        ("about half of everything", "about 75%", "nothing, because autocast only changes the compute"),
    ],
)
def test_a_review_shows_statements_in_a_new_order(texts):
    """Was: the options in the lesson's order, so the learner answered from where the right one stood."""
    options = _options(*texts)
    orders = {tuple(review.shown_order(options, random.Random(seed))) for seed in range(20)}
    assert len(orders) > 1 and all(sorted(o) == list(range(len(texts))) for o in orders)


@pytest.mark.parametrize(
    "texts",
    [
        ("about the same", "about three times as big", "about nine times as big"),
        ("under 1 ms", "1 to 10 ms", "over 10 ms"),
        ("2x", "4x", "8x", "16x"),
        ("half", "the same", "twice as much"),
    ],
)
def test_a_review_keeps_a_scale_in_its_order(texts):
    options = _options(*texts)
    assert all(review.shown_order(options, random.Random(seed)) == list(range(len(texts))) for seed in range(20))
