"""LessonSession: the one place a step's answer is judged, locked, revealed and recorded."""

from __future__ import annotations

from re import escape as re_escape

import pytest

from tutor.course.loader import load_text
from tutor.course.progress import Progress
from tutor.course.session import LessonSession, Pending, Reveal, RunOutcome, Unreadable

LESSON = """
id: session-demo
title: Session demo
steps:
  - id: intro
    kind: read
    body: Hello.
  - id: guess-time
    kind: predict
    prompt: How many seconds per epoch?
    answer: {type: number, unit: s, min: 0.01, max: 1000}
    compare: seconds_per_epoch
    unit: s
  - id: guess-acc
    kind: predict
    prompt: Which accuracy?
    answer:
      type: choice
      options:
        - {text: "about chance", min: 0, max: 80}
        - {text: "above 80%", min: 80}
    compare: accuracy
    unit: "%"
  - id: measure
    kind: run
    experiment: train
    params: {batch_size: 64}
    tweak: {batch_size: [64, 512]}
  - id: which-device
    kind: check
    prompt: Which moves first?
    hint: the model
    answer:
      type: choice
      options:
        - {text: "the model", correct: true}
        - {text: "the loss", feedback: "The loss is computed on the device the tensors are on."}
    verify: {experiment: device-basics}
"""


@pytest.fixture
def session(tmp_path):
    with Progress(tmp_path / "progress.db") as progress:
        yield LessonSession(load_text(LESSON), progress)


def _step(session, step_id):
    return session.lesson.step(step_id)


def _finished(metrics, params=None, experiment="train"):
    return RunOutcome(experiment, params or {"batch_size": 64}, "finished", metrics, {"name": "Test CPU"})


# ---------------------------------------------------------------- predictions


@pytest.mark.parametrize(
    "typed, says",
    [
        ("", "Type your prediction first"),
        ("   ", "Type your prediction first"),
        ("fast", "couldn't read a number"),
        ("1e9", "outside the range"),
    ],
)
def test_a_prediction_that_cannot_be_one_is_said_and_not_locked(session, typed, says):
    step = _step(session, "guess-time")
    with pytest.raises(Unreadable, match=says):
        session.lock(step, typed)
    assert session.prediction(step) is None and step.id not in session.completed()


def test_a_range_with_one_bound_is_said_with_that_bound_alone(tmp_path):
    """A question that sets only a floor says "at least 1 GB", never "1 GB to None"."""
    text = LESSON.replace(
        "answer: {type: number, unit: s, min: 0.01, max: 1000}", "answer: {type: number, unit: s, min: 1}"
    )
    with Progress(tmp_path / "progress.db") as progress:
        session = LessonSession(load_text(text), progress)
        with pytest.raises(Unreadable, match=r"allows \(at least 1 s\)\.$"):
            session.lock(_step(session, "guess-time"), "0.5 s")


def test_locking_keeps_the_number_and_completes_the_step(session):
    step = _step(session, "guess-time")
    locked = session.lock(step, "3 s")
    assert (locked.answer, locked.value) == ("3 s", 3.0)
    assert session.prediction(step).answer == "3 s" and step.id in session.completed()


def test_a_choice_is_locked_as_the_option_the_list_submitted(session):
    step = _step(session, "guess-acc")
    assert session.lock(step, "above 80%").answer == "above 80%"


@pytest.mark.parametrize(
    "typed, locked",
    [
        ("option 2", "above 80%"),  # said as an option's number
        ("b", "above 80%"),  # its letter
        ("95%", "above 80%"),  # a value: never its digits as an option's number
        ("about 30%", "about chance"),
        ("2.", "above 80%"),
        ("7", "about chance"),  # no option 7, so the one reading is 7%
    ],
)
def test_a_typed_choice_is_locked_as_the_option_it_means(session, typed, locked):
    assert session.lock(_step(session, "guess-acc"), typed).answer == locked


@pytest.mark.parametrize(
    "typed, said",
    [
        # "2" is option 2 or 2%, which lies in the other option: asked, never guessed (issue 35)
        ("2", "Did you mean option 2, 'above 80%', or 2%, which is in 'about chance'? Say which: “option 2” or “2%”."),
        ("zzz", "I could not tell which option you mean"),
        ("3 ms", "'3 ms' is not a value these options can hold"),
        ("option 7", "There is no option 7"),
    ],
)
def test_a_typed_choice_that_could_mean_two_options_or_none_is_said_not_locked(session, typed, said):
    step = _step(session, "guess-acc")
    with pytest.raises(Unreadable) as problem:
        session.lock(step, typed)
    assert said in str(problem.value)
    assert session.prediction(step) is None


def test_a_prediction_is_revealed_by_this_lessons_run_only(session):
    guess, run = _step(session, "guess-time"), _step(session, "measure")
    session.lock(guess, "3 s")
    # A run of the same experiment elsewhere (`gpututor run`) does not reveal: the learner measures it here.
    session.progress.record_run(
        experiment="train", params={}, device={}, metrics={"seconds_per_epoch": 9.0}, status="finished"
    )
    pending = session.reveal(guess)
    assert isinstance(pending, Pending) and "measure" in pending.text
    reveals = session.record_run(run, _finished({"seconds_per_epoch": 2.5, "accuracy": 91.0}))
    assert [r.step.id for r in reveals] == ["guess-time"]  # guess-acc is not locked
    shown = session.reveal(guess)
    assert (
        isinstance(shown, Reveal)
        and shown.evidence.metrics["seconds_per_epoch"] == 2.5
        and shown.device["name"] == "Test CPU"
    )


def test_a_reveal_says_when_the_learner_changed_the_runs_settings(session):
    session.lock(_step(session, "guess-time"), "3 s")
    reveals = session.record_run(_step(session, "measure"), _finished({"seconds_per_epoch": 2.5}, {"batch_size": 512}))
    assert reveals[0].evidence.setting == "with batch_size=512"
    assert session.run_reveals(_step(session, "measure"))[0].evidence.setting == "with batch_size=512"


def test_a_run_at_other_settings_is_one_verdict_everywhere_not_scored(session):
    """Issue 35: the run panel said "✓ within 17%" of a tweaked run the profile called unscored, and
    the predict step showed it without the setting at all."""
    guess, run = _step(session, "guess-time"), _step(session, "measure")
    session.lock(guess, "3 s")
    after_run = session.record_run(run, _finished({"seconds_per_epoch": 2.9}, {"batch_size": 512}))[0]
    on_the_step = session.reveal(guess)
    for reveal in (after_run, session.run_reveals(run)[0], on_the_step):
        judged = reveal.judge()
        assert judged.score.hit and not judged.hit  # close, but measured at other settings
        assert "batch_size=512" in judged.not_scored and "lesson's own settings" in judged.not_scored
    session.record_run(run, _finished({"seconds_per_epoch": 2.9}))
    assert session.reveal(guess).judge().hit and not session.reveal(guess).judge().not_scored


# ---------------------------------------------------------------- runs


@pytest.mark.parametrize(
    "status, recorded, complete",
    [
        ("finished", True, True),
        ("failed", True, False),
        ("cancelled", False, False),
    ],
)
def test_how_a_run_ended_decides_what_is_kept(session, status, recorded, complete):
    run = _step(session, "measure")
    session.record_run(
        run,
        RunOutcome(
            "train",
            {"batch_size": 64},
            status,
            {"seconds_per_epoch": 2.0} if status == "finished" else {},
            error="boom" if status == "failed" else None,
        ),
    )
    assert (session.latest_run(run, any_status=True) is not None) is recorded
    assert (run.id in session.completed()) is complete


# ---------------------------------------------------------------- checks


def test_a_blank_or_unreadable_answer_is_said_and_counts_nothing(session):
    check = _step(session, "which-device")
    for answer in ("", "9"):
        with pytest.raises(Unreadable):
            session.answer(check, answer)
    assert session.history(check) == [] and session.wrong_attempts(check) == 0


def test_a_wrong_answer_gets_its_own_feedback_and_a_right_one_completes(session):
    check = _step(session, "which-device")
    wrong = session.answer(check, "2")
    assert not wrong.correct and "device the tensors are on" in wrong.verdict.feedback
    assert wrong.answer == "the loss" and session.wrong_attempts(check) == 1
    assert check.id not in session.completed() and session.can_give_up(check)  # one graded try opens the answer
    right = session.answer(check, "1")
    assert right.correct and check.id in session.completed()
    assert session.solved_by(check).answer == "the model"


def test_giving_up_records_a_miss_and_a_solution_used_and_completes(session):
    check = _step(session, "which-device")
    assert not session.give_up(check) and check.id not in session.completed()  # not before one graded try
    session.answer(check, "2")
    assert session.can_give_up(check)
    assert session.give_up(check)
    assert check.id in session.completed() and session.wrong_attempts(check) == 2 and session.solved_by(check) is None
    assert session.progress.aids(session.id, check.id).solution


def test_giving_up_without_trying_takes_the_learners_word_for_it(session):
    """The widget asks twice before it passes without_trying."""
    check = _step(session, "which-device")
    assert session.give_up(check, without_trying=True) and check.id in session.completed()


def test_hints_come_one_tier_at_a_time_and_are_remembered(session, tmp_path):
    from tutor.course.lesson import CheckStep

    check = CheckStep.model_validate(
        {
            "id": "tiered",
            "kind": "check",
            "prompt": "?",
            "hints": ["look at the run", "the dtype", "float16's smallest step"],
            "answer": {"type": "choice", "options": [{"text": "a", "correct": True}, "b"]},
        }
    )
    assert session.hints_shown(check) == []
    assert session.next_hint(check) == ["look at the run"]
    assert session.next_hint(check) == ["look at the run", "the dtype"]
    assert session.next_hint(check) == check.tiered_hints
    assert session.next_hint(check) == check.tiered_hints  # all out: nothing more recorded
    assert session.progress.aids(session.id, "tiered").hints == 3
    assert session.hints_shown(check) == check.tiered_hints  # coming back shows what was seen
    single = CheckStep.model_validate(
        {
            "id": "single",
            "kind": "check",
            "prompt": "?",
            "hint": "one",
            "answer": {"type": "choice", "options": [{"text": "a", "correct": True}, "b"]},
        }
    )
    assert single.tiered_hints == ["one"] and session.next_hint(single) == ["one"]


def test_a_checks_evidence_is_its_own_verify_run_first_then_any_run_of_the_experiment(session):
    check = _step(session, "which-device")
    assert session.evidence(check).source == ""
    session.progress.record_run(experiment="device-basics", params={}, device={}, metrics={"n": 1}, status="finished")
    assert session.evidence(check).metrics == {"n": 1}
    session.record_run(check, RunOutcome("device-basics", {}, "finished", {"n": 2}))
    session.progress.record_run(experiment="device-basics", params={}, device={}, metrics={"n": 3}, status="finished")
    assert session.evidence(check).metrics == {"n": 2}
    assert check.id not in session.completed()  # a verify run completes nothing


def test_a_prediction_is_graded_against_the_metric_it_predicts(session):
    guess = _step(session, "guess-time")
    assert not session.grade(guess, "3 s").judged  # nothing measured yet
    session.record_run(_step(session, "measure"), _finished({"seconds_per_epoch": 3.1}))
    graded = session.grade(guess, "3 s")
    assert graded.correct and graded.evidence.source == "measured"
    assert not session.grade(guess, "30 s").correct


def test_a_review_is_recorded_as_a_review(session):
    check = _step(session, "which-device")
    graded = session.review(check, "1")
    assert graded.correct
    assert session.history(check) == [] and len(session.progress.reviews(session.id, check.id)) == 1
    with pytest.raises(Unreadable):
        session.review(check, " ")


# ---------------------------------------------------------------- place


def test_the_lesson_opens_where_the_learner_left_it(session):
    assert session.start_index() == 0
    session.visit(_step(session, "measure"))
    assert session.start_index() == 3
    session.progress.set_position(session.id, "a-step-removed-since")
    assert session.start_index() == 0


def test_unfinished_lists_the_steps_not_done_in_order(session):
    session.complete(_step(session, "intro"))
    assert [s.id for s in session.unfinished()] == ["guess-time", "guess-acc", "measure", "which-device"]


def test_a_long_run_of_digits_is_read_without_int_refusing_it(session):
    """Was: `gpututor check ... --answer 000…01` (100,001 digits) crashed: Python's int() refuses
    strings of 4300+ digits, leading zeros included."""
    from tutor.course.session import shown_answer

    check = _step(session, "which-device")
    assert shown_answer(check, "0" * 100_000 + "1") == "the model"
    assert shown_answer(check, "1" * 100_001) == "1" * 100_001
    assert not session.grade(check, "0" * 100_000 + "3").judged


PERCENT = """
id: percent-demo
title: Percent demo
steps:
  - id: guess-mfu
    kind: predict
    prompt: What share of the peak will the training reach?
    answer: {type: number, unit: "%", min: 0, max: 100}
  - id: guess-memory
    kind: predict
    prompt: How much memory will Adam's state take?
    answer: {type: number, unit: GB, min: 0, max: 200}
"""


@pytest.fixture
def percent(tmp_path):
    with Progress(tmp_path / "progress.db") as progress:
        yield LessonSession(load_text(PERCENT), progress)


@pytest.mark.parametrize("typed", ["0.5", ".5", "1", "-0.2"])
def test_a_bare_number_that_could_be_a_fraction_or_a_percentage_is_asked_about_not_locked(percent, typed):
    session = percent
    step = _step(session, "guess-mfu")
    with pytest.raises(Unreadable, match=r"Did you mean .*% or .*%\? Write the % sign"):
        session.lock(step, typed)
    assert session.prediction(step) is None


@pytest.mark.parametrize("typed,value", [("0.5%", 0.5), ("50%", 50), ("50", 50), ("0", 0)])
def test_a_percentage_that_says_which_it_is_locks(percent, typed, value):
    assert percent.lock(_step(percent, "guess-mfu"), typed).value == pytest.approx(value)


@pytest.mark.parametrize("typed,asked", [("20800", "20,800 GB or 20,800 MB"), ("250", "250 GB or 250 MB")])
def test_a_bare_number_right_only_in_another_unit_is_asked_about_not_locked(percent, typed, asked):
    """A prediction has no measurement yet: its own range is the evidence. 20800 for a question in
    GB (0 to 200) is 20.8 GB written in MB; the tutor asks instead of refusing or guessing."""
    step = _step(percent, "guess-memory")
    with pytest.raises(Unreadable, match=f"In which unit: {asked}\\?"):
        percent.lock(step, typed)
    assert percent.prediction(step) is None


@pytest.mark.parametrize("typed,value", [("20800 MB", 20.8), ("12", 12), ("12 GiB", 12.884901888)])
def test_a_memory_prediction_with_its_unit_or_in_range_locks(percent, typed, value):
    assert percent.lock(_step(percent, "guess-memory"), typed).value == pytest.approx(value)


def test_a_run_from_another_machine_or_torch_is_measured_again_not_graded(session, monkeypatch):
    """Issue 26: a measured answer carries the machine it came from; on another box the learner
    runs it again instead of being judged against the old one's numbers."""
    from tutor.course import machine

    step = _step(session, "guess-time")
    session.lock(step, "2 s")
    run = next(s for s in session.lesson.steps if s.id == "measure")
    session.record_run(run, _finished({"seconds_per_epoch": 2.0}))
    stored = session.latest_run(run)
    assert stored.device["host"] == machine.stamp()["host"] and "torch_version" in stored.device
    assert not isinstance(session.reveal(step), Pending)
    monkeypatch.setattr(machine, "stamp", lambda: {"host": "a-new-gpu-box", "torch_version": "9.9"})
    pending = session.reveal(step)
    assert isinstance(pending, Pending) and "not this machine" in pending.text and "run it here" in pending.text
    assert session.evidence(step).metrics == {}


def test_a_typed_choice_prediction_is_graded_as_it_would_lock(session):
    """`gpututor check` on a choice prediction reads what was typed the way the lock does: a value
    lands in its option, and a number that could be an option's or a value is asked, not judged."""
    run = next(s for s in session.lesson.steps if s.id == "measure")
    session.record_run(run, _finished({"seconds_per_epoch": 2.0, "accuracy": 0.91}))
    step = _step(session, "guess-acc")
    graded = session.grade(step, "95%")
    assert graded.judged and graded.correct and graded.answer == "above 80%"
    asked = session.grade(step, "2")
    assert not asked.judged and "option 2" in asked.verdict.feedback and "“2%”" in asked.verdict.feedback


@pytest.mark.parametrize(
    "spec, says",
    [
        ("{type: number, unit: MB, value: 1}", "Type a number first (a number in MB"),
        ("{type: choice, options: [{text: a, correct: true}, b]}", "Pick one of the 2 options first"),
        ("{type: text, rubric: {require: [{name: x, any: [x]}]}}", "a sentence or two"),
    ],
)
def test_an_empty_answer_is_asked_for_in_the_words_of_its_kind(tmp_path, spec, says):
    """Issue 35: an empty number answer was told to 'write a sentence'."""
    lesson = load_text(f"id: e\ntitle: E\nsteps:\n  - id: c\n    kind: check\n    prompt: P?\n    answer: {spec}\n")
    with Progress(tmp_path / "progress.db") as progress:
        session = LessonSession(lesson, progress)
        for ask in (session.answer, session.review):
            with pytest.raises(Unreadable, match=re_escape(says)):
                ask(lesson.step("c"), "  ")


def test_a_timed_run_from_an_older_measurement_method_is_measured_again_not_graded(tmp_path, monkeypatch):
    """Issue 37: a run stored before verdicts used the interval of the typical value carries no
    method (or an older one): its prediction waits for a new run instead of being graded by it."""
    from tutor.course import machine
    from tutor.measurement import method

    lesson = load_text(
        "id: m\ntitle: M\nsteps:\n"
        "  - {id: guess, kind: predict, prompt: How long?, compare: ratio, unit: x,\n"
        "     answer: {type: number, unit: x, min: 0, max: 1000}}\n"
        "  - {id: measure, kind: run, experiment: sync-timing}\n"
    )
    with Progress(tmp_path / "progress.db") as progress:
        session = LessonSession(lesson, progress)
        step, run = lesson.steps
        session.lock(step, "1")
        old = {k: v for k, v in machine.stamp().items() if k != method.METHOD_KEY}
        monkeypatch.setattr(machine, "stamp", lambda: old)
        session.record_run(run, _finished({"ratio": 1.0, "ratio_low": 0.98, "ratio_high": 1.02}, {}, "sync-timing"))
        pending = session.reveal(step)
        assert isinstance(pending, Pending) and "measured the older way" in pending.text
        monkeypatch.undo()
        session.record_run(run, _finished({"ratio": 1.0, "ratio_low": 0.98, "ratio_high": 1.02}, {}, "sync-timing"))
        assert session.latest_run(run).device[method.METHOD_KEY] == method.METHOD
        assert session.reveal(step).judge().hit


def test_a_run_is_told_where_this_lessons_predictions_of_it_turn(tmp_path):
    """Issue 37 item 2: a run that repeats until its verdicts are decided hears the edges: every
    option's ends for a choice, the learner's own tolerance for a number; other runs hear nothing."""
    from tutor.course.catalog import discover
    from tutor.course.session import decide_params

    lessons = {item.lesson.id: item.lesson for item in discover().lessons}
    lab = lessons["gpu-lab"]
    assert decide_params(lab, lab.step("sync-run"), lambda _: None) == {"decide": (0.0, 2.0, 10.0, 100.0)}
    assert decide_params(lab, lab.step("memory-run"), lambda _: None) == {}  # memory-ledger repeats nothing

    devices = LessonSession(lessons["devices"], Progress(tmp_path / "p.json"))
    assert devices.decide_params(devices.lesson.step("sync-run")) == {}  # nothing locked yet: no edges
    devices.lock(devices.lesson.step("sync-predict"), "3")
    tolerance = devices.lesson.step("sync-predict").answer.tolerance
    assert devices.decide_params(devices.lesson.step("sync-run")) == {
        "decide": pytest.approx((3 / (1 + tolerance), 3 / (1 - tolerance)))
    }
