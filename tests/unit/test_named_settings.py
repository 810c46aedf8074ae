"""Predictions judged at settings they name (`at`, `against`): several before one instrument or run
step, each revealed at its own settings; a ratio of two runs judged by both runs' intervals; what
lint says of a bad name or value; how `lesson test` plays them."""

from __future__ import annotations

import pytest

from tutor import experiments
from tutor.authoring.lesson_test import Player
from tutor.course import profile
from tutor.course.lesson import LessonError
from tutor.course.loader import load_text
from tutor.course.progress import Progress
from tutor.course.session import Evidence, LessonSession, Pending, Reveal, RunOutcome, ratio_evidence
from tutor.experiments.spec import NOISE_GATE, NOISE_WHY

LESSON = """
id: named-demo
title: Named settings
steps:
  - id: base
    kind: predict
    prompt: Baseline compute share?
    answer: {type: number, unit: "%", min: 0, max: 100}
    compare: compute_share
    at: {prefetch: false, precision: fp32}
    unit: "%"
  - id: levers
    kind: predict
    prompt: With the levers?
    answer: {type: number, unit: "%", min: 0, max: 100}
    compare: compute_share
    unit: "%"
  - id: pipe
    kind: instrument
    instrument: pipeline
    set: {profile: model, prefetch: false, precision: fp32}
    scenario: {prefetch: true, precision: mixed}
  - id: mfu-guess
    kind: predict
    prompt: MFU?
    answer: {type: number, unit: "%", min: 0, max: 100, tolerance: 0.2}
    compare: mfu
    unit: "%"
  - id: big-guess
    kind: predict
    prompt: MFU at batch 1024?
    answer: {type: number, unit: "%", min: 0, max: 100, tolerance: 0.2}
    compare: mfu
    at: {batch_size: 1024}
    unit: "%"
  - id: ratio-guess
    kind: predict
    prompt: MFU at 1024 over MFU at 64?
    answer:
      type: choice
      options:
        - {text: "below 1.4x", min: 0, max: 1.4}
        - {text: "1.4x to 5x", min: 1.4, max: 5}
        - {text: "5x or more", min: 5}
    compare: mfu
    at: {batch_size: 1024}
    against: {batch_size: 64}
    unit: x
    concept: batch-size
  - id: measure
    kind: run
    experiment: pipeline-breakdown
    params: {steps: 30}
    tweak: {amp: ["off", auto], batch_size: [64, 256, 1024]}
"""


@pytest.fixture
def session(tmp_path):
    with Progress(tmp_path / "progress.db") as progress:
        yield LessonSession(load_text(LESSON), progress)


def _run(session, batch_size, mfu, low, high, amp="off", **more):
    metrics = {"mfu": mfu, "mfu_low": low, "mfu_high": high, **more}
    outcome = RunOutcome(
        "pipeline-breakdown",
        {"steps": 30, "amp": amp, "batch_size": batch_size},
        "finished",
        metrics,
        {"name": "Test CPU"},
    )
    return session.record_run(session.lesson.step("measure"), outcome)


def _revealed(session, step_id) -> Reveal:
    shown = session.reveal(session.lesson.step(step_id))
    assert isinstance(shown, Reveal), shown
    return shown


# ---------------------------------------------------------------- two settings of one instrument


def test_two_predictions_before_one_instrument_are_each_judged_at_their_own_settings(session):
    base, levers, pipe = (session.lesson.step(s) for s in ("base", "levers", "pipe"))
    session.lock(base, "35%")
    session.lock(levers, "35%")
    assert isinstance(session.reveal(base), Pending)  # the instrument is not worked yet
    session.complete(pipe)
    at_base, at_scenario = _revealed(session, "base"), _revealed(session, "levers")
    assert at_base.evidence.metrics["compute_share"] == pytest.approx(0.35)
    assert at_scenario.evidence.metrics["compute_share"] > 0.5  # prefetch + mixed: the data wait is gone
    assert "prefetching off" in at_base.evidence.setting and "prefetching on" in at_scenario.evidence.setting
    assert at_base.judge().hit and not at_scenario.judge().hit  # the same answer, two verdicts
    # the instrument step shows the same two, each at its own settings
    shown = {r.step.id: r.evidence.metrics["compute_share"] for r in session.computed_reveals(pipe)}
    assert shown == {"base": at_base.evidence.metrics["compute_share"], "levers": pytest.approx(0.5833, abs=1e-3)}
    assert session.grade(base, "35%").correct and not session.grade(levers, "35%").correct


# ---------------------------------------------------------------- a run at named settings


def test_a_prediction_at_named_settings_waits_for_a_run_there(session):
    big = session.lesson.step("big-guess")
    session.lock(big, "90%")
    after = _run(session, 64, 0.5, 0.48, 0.52)
    assert [type(r) for r in after] == [Pending] and "a run with batch_size=1024" in after[0].text
    assert "press r" in after[0].text  # said on the run step, whose settings are right there
    assert "Now go on (n)" in session.reveal(big).text  # said on the predict step
    _run(session, 1024, 0.9, 0.88, 0.92, amp="auto")  # 1024, but another setting moved too
    assert isinstance(session.reveal(big), Pending)
    [shown] = _run(session, 1024, 0.92, 0.9, 0.93)
    assert isinstance(shown, Reveal) and shown.evidence.metrics["mfu"] == 0.92
    judged = shown.judge()
    assert judged.hit and not judged.not_scored  # the settings it names are no "other settings"
    _run(session, 64, 0.4, 0.39, 0.41)  # a later run elsewhere leaves it as it was
    assert _revealed(session, "big-guess").evidence.metrics["mfu"] == 0.92


def test_a_plain_prediction_is_still_judged_at_the_steps_own_settings(session):
    guess = session.lesson.step("mfu-guess")
    session.lock(guess, "90%")
    _run(session, 1024, 0.9, 0.88, 0.92)
    judged = _revealed(session, "mfu-guess").judge()
    assert not judged.hit and "batch_size=1024" in judged.not_scored


def test_a_ratio_is_judged_by_the_runs_at_both_settings(session):
    ratio = session.lesson.step("ratio-guess")
    session.lock(ratio, "1.4x to 5x")
    _run(session, 1024, 0.95, 0.94, 0.96, **{NOISE_WHY: "Other programs took 40% of this machine's 2 cores."})
    pending = session.reveal(ratio)
    assert isinstance(pending, Pending) and "batch_size=64" in pending.text and "1024" not in pending.text
    _run(session, 64, 0.5, 0.49, 0.51, **{NOISE_WHY: "Nothing else was seen using the machine."})
    shown = _revealed(session, "ratio-guess")
    metrics = shown.evidence.metrics
    assert metrics["mfu"] == pytest.approx(1.9)
    assert (metrics["mfu_low"], metrics["mfu_high"]) == pytest.approx((0.94 / 0.51, 0.96 / 0.49))
    assert "Other programs" in metrics[NOISE_WHY] and "Nothing else" in metrics[NOISE_WHY]
    assert shown.evidence.ratio and shown.evidence.guard("mfu") == pytest.approx(1.05**2 - 1)
    assert "95.0% with batch_size=1024" in shown.evidence.setting
    assert "50.0% with batch_size=64" in shown.evidence.setting
    assert shown.judge().hit
    # the same runs, another choice: a miss, not undecided
    assert not session.grade(ratio, "5x or more").correct and session.grade(ratio, "5x or more").judged


def test_a_ratio_whose_interval_straddles_an_edge_cannot_be_told_yet(session):
    ratio = session.lesson.step("ratio-guess")
    session.lock(ratio, "1.4x to 5x")
    _run(session, 1024, 0.72, 0.70, 0.74)
    _run(session, 64, 0.5, 0.49, 0.51)  # 1.44x, its interval (with both guard bands) reaching below 1.4
    judged = _revealed(session, "ratio-guess").judge()
    assert judged.score.undecided and not judged.hit
    assert "can't tell yet" in judged.not_scored


def test_a_ratio_with_a_side_not_measured_is_not_scored(session):
    ratio = session.lesson.step("ratio-guess")
    session.lock(ratio, "1.4x to 5x")
    _run(session, 1024, None, None, None)
    _run(session, 64, 0.5, 0.49, 0.51)
    judged = _revealed(session, "ratio-guess").judge()
    assert not judged.hit and not judged.score.undecided and judged.score.ratio is None


def test_the_profile_scores_a_ratio_by_its_reveal(session):
    session.lock(session.lesson.step("ratio-guess"), "5x or more")
    _run(session, 1024, 0.95, 0.94, 0.96)
    _run(session, 64, 0.5, 0.49, 0.51)
    found = profile.profile([session.lesson], session.progress)
    [scored] = found.scored
    assert scored.place.step_id == "ratio-guess" and scored.measured == pytest.approx(1.9)
    assert scored.error.direction == 1  # 5x or more: too high


def test_ratio_evidence_keeps_a_gate_and_leaves_out_an_interval_only_one_side_has():
    top = Evidence({"mfu": 0.9, "mfu_low": 0.8, "mfu_high": 1.0, NOISE_GATE: "The GPU slowed its clocks."})
    bottom = Evidence({"mfu": 0.3})
    combined = ratio_evidence("mfu", top, bottom)
    assert combined.metrics["mfu"] == pytest.approx(3.0) and "mfu_low" not in combined.metrics
    assert combined.metrics[NOISE_GATE] == "The GPU slowed its clocks."
    assert ratio_evidence("mfu", top, Evidence({"mfu": 0.0})).metrics["mfu"] is None


def test_a_run_is_made_at_named_settings_only_with_every_other_setting_at_its_start(session):
    step = session.lesson.step("measure")
    assert step.made_at({"steps": 30, "amp": "off", "batch_size": 1024}, {"batch_size": 1024})
    assert not step.made_at({"steps": 30, "amp": "auto", "batch_size": 1024}, {"batch_size": 1024})
    assert step.made_at({"steps": 30, "amp": "off", "batch_size": 64}, {})


# ---------------------------------------------------------------- lint


def _issues(text: str) -> list[str]:
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    return [str(i) for i in info.value.issues]


def _with(old: str, new: str) -> str:
    assert LESSON.count(old) == 1, old
    return LESSON.replace(old, new)


@pytest.mark.parametrize(
    "old, new, said",
    [
        (
            'at: {batch_size: 1024}\n    unit: "%"',
            'at: {batch_sise: 1024}\n    unit: "%"',
            "t.yaml:34:10: step 'big-guess': at batch_sise: run step 'measure' offers no setting 'batch_sise' "
            "to switch (did you mean 'batch_size'?); a prediction is judged only at settings a learner can "
            "pick (its tweak offers: amp, batch_size)",
        ),
        (
            'at: {batch_size: 1024}\n    unit: "%"',
            'at: {batch_size: 512}\n    unit: "%"',
            "t.yaml:34:22: step 'big-guess': at batch_size=512 is not one of the values run step 'measure' "
            "offers: [64, 256, 1024]",
        ),
        (
            "against: {batch_size: 64}\n    unit: x",
            'against: {batch_size: 64}\n    unit: "%"',
            "t.yaml:48:11: step 'ratio-guess': 'mfu' of experiment 'pipeline-breakdown' is read as a ratio "
            "with `against` (its value at `at` over its value at `against`), a number of times: "
            'write unit: "x" and give the answer in x',
        ),
        (
            "against: {batch_size: 64}\n    unit: x",
            "against: {batch_size: 1024}\n    unit: x",
            "t.yaml:47:5: step 'ratio-guess': `against` names the settings the prediction is judged at too: "
            "a ratio of a setting over itself is 1 whatever is measured; name the other setting to compare with",
        ),
        (
            "at: {prefetch: false, precision: fp32}",
            "at: {prefetch: false, precision: fp16}",
            "t.yaml:10:38: step 'base': at precision: 'fp16' is not one of fp32, mixed",
        ),
        (
            "at: {prefetch: false, precision: fp32}",
            "at: {prefech: false, precision: fp32}",
            "t.yaml:10:10: step 'base': at: instrument 'pipeline' (step 'pipe') has no control 'prefech' "
            "(did you mean 'prefetch'?); it has: profile, prefetch",  # and whatever controls follow
        ),
        (
            "    compare: compute_share\n    at: {prefetch: false, precision: fp32}",
            "    at: {prefetch: false, precision: fp32}",
            "t.yaml:9:5: step 'base': `at` names the settings a prediction is judged at, and this step "
            "compares nothing: give it `compare` (or leave `at` and `against` out)",
        ),
    ],
)
def test_lint_says_where_a_named_setting_is_wrong(old, new, said):
    found = _issues(_with(old, new))
    assert any(issue.startswith(said) for issue in found), found


def test_lint_refuses_a_ratio_of_an_instrument_setting_over_itself():
    text = _with(
        '    at: {prefetch: false, precision: fp32}\n    unit: "%"',
        "    at: {prefetch: false, precision: fp32}\n    against: {prefetch: false}\n    unit: x",
    )
    assert any("`against` names the settings the prediction is judged at too" in i for i in _issues(text))


# ---------------------------------------------------------------- lesson test


def test_lesson_test_makes_the_runs_a_prediction_names_and_judges_it_as_the_reveal_will(monkeypatch):
    """Scripted runs (no torch): MFU 0.5 at batch 64, 0.95 at 1024; every other declared metric 0.5."""
    declared = experiments.REGISTRY["pipeline-breakdown"].metrics
    made: list[dict] = []

    def scripted(self, experiment, params, keep=None, repeat=0):
        made.append(dict(params))
        mfu = 0.95 if params.get("batch_size") == 1024 else 0.5
        return {**dict.fromkeys(declared, 0.5), "mfu": mfu, "mfu_low": mfu * 0.99, "mfu_high": mfu * 1.01}, ""

    monkeypatch.setattr(Player, "run", scripted)
    outcomes = [o for o in Player("cpu").play(load_text(LESSON)) if o.kind == "predict"]
    by_step = {}
    for o in outcomes:
        by_step.setdefault(o.step, []).append(o)
    assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok]
    # each judged once, where the learner's is: the instrument's at its own settings, the run's by its runs
    assert [o.detail for o in by_step["base"]] == ["measured 35%, within its min..max"]
    assert len(by_step["big-guess"]) == 1 and "95%" in by_step["big-guess"][0].detail
    [ratio] = by_step["ratio-guess"]
    assert "ratio with batch_size=1024 over with batch_size=64" in ratio.what
    assert "'1.4x to 5x' is right here" in ratio.detail
    assert len(by_step["mfu-guess"]) == 4  # a plain prediction: at the start and at each switched setting
    assert any(p.get("batch_size") == 1024 and p.get("amp") == "off" for p in made)


def test_lesson_test_repeats_pair_the_two_runs_of_a_ratio(monkeypatch):
    declared = experiments.REGISTRY["pipeline-breakdown"].metrics
    wobble = iter([0.5, 0.95, 0.5, 0.95, 0.5, 0.95] * 4)

    def scripted(self, experiment, params, keep=None, repeat=0):
        mfu = 0.95 if params.get("batch_size") == 1024 else 0.5
        if repeat:
            mfu = next(wobble) if params.get("batch_size") == 1024 else 0.5
        return {**dict.fromkeys(declared, 0.5), "mfu": mfu, "mfu_low": mfu * 0.99, "mfu_high": mfu * 1.01}, ""

    monkeypatch.setattr(Player, "run", scripted)
    outcomes = list(Player("cpu", repeats=3).play(load_text(LESSON)))
    [noise] = [o for o in outcomes if o.step == "ratio-guess"]
    # 1.0x and 1.9x in turn: '1.4x to 5x' is a hit in one run and a miss in another
    assert not noise.ok and "1.4x" in noise.detail
    assert noise.verdicts["1.4x to 5x"]["hit"] and noise.verdicts["1.4x to 5x"]["miss"]


# ---------------------------------------------------------------- what a prediction is shown before it locks


def test_a_prediction_is_shown_no_example_value_that_could_be_its_answer(session):
    """Every % number showed "e.g. 35%": the baseline compute share the iron-law lesson asks for."""
    from tutor import checks
    from tutor.course.session import Unreadable, empty_answer

    base = session.lesson.step("base")
    assert checks.describe_spec(base.answer) == "a number in %, e.g. 35%"  # a check may keep its example
    assert checks.describe_spec(base.answer, example=False) == "a number followed by %"
    assert empty_answer(base) == "Type a number first (a number followed by %)."
    with pytest.raises(Unreadable, match=r"Write a number followed by %\.$"):
        session.lock(base, "most of it")


def test_reveals_shown_together_each_say_which_prediction_they_are(session):
    from tutor.ui.widgets.reveal import reveal_text

    session.lock(session.lesson.step("big-guess"), "90%")
    session.lock(session.lesson.step("ratio-guess"), "1.4x to 5x")
    _run(session, 1024, 0.92, 0.9, 0.93)
    shown, waiting = session.run_reveals(session.lesson.step("measure"))
    assert "Prediction vs measurement · big-guess" in reveal_text(shown, named=True).plain
    assert reveal_text(waiting, named=True).plain.startswith("ratio-guess: It is judged by a run with batch_size=64")
    assert "big-guess" not in reveal_text(shown).plain  # alone on its step, it needs no name
