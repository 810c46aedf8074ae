"""One learner in one lesson: every rule about a step's answer, in one place.

A `LessonSession` decides what an answer is judged against (`evidence`), grades it, locks
predictions, says what a run or an instrument reveals, and records each of these in the
progress store, completing steps as it goes. The TUI's step widgets render what it returns;
`gpututor check`, `gpututor lesson test` and review call the same methods, so the screen, the
command line and an instructor's CI cannot disagree about a verdict.

Pure Python over the lesson model, `tutor/checks/` and the progress store: no Textual, no torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

from tutor import checks, instruments, present
from tutor.checks.answers import ChoiceAnswer, NumberAnswer, PredictionScore, Verdict
from tutor.checks.choice import TypedChoice, read_typed
from tutor.checks.number import range_unit_question
from tutor.course import machine, workspace
from tutor.course.lesson import (
    CheckStep,
    ExerciseStep,
    Hinted,
    InstrumentStep,
    Lesson,
    PredictStep,
    RunStep,
    Step,
)
from tutor.course.progress import AnswerRecord, Move, Prediction, Progress, RunRecord
from tutor.experiments.spec import DECIDE, NOISE_GATE, NOISE_WHY, Metric
from tutor.measurement import method
from tutor.measurement.intervals import GUARD
from tutor.measurement.slots import TIMING_SHARED

if TYPE_CHECKING:
    from tutor.exercises.grader import ExerciseResult

GIVE_UP_AFTER = 1  # graded attempts before the answer may be shown without asking twice
EMPTY_PREDICTION = "Type your prediction first: any honest guess is fine."


def empty_answer(step: PredictStep | CheckStep) -> str:
    """What to say to an answer left empty, in the words of the answer this step takes."""
    spec = step.answer
    if isinstance(spec, NumberAnswer):  # a prediction is shown no value: it could be the answer
        return f"Type a number first ({checks.describe_spec(spec, example=isinstance(step, CheckStep))})."
    if isinstance(spec, ChoiceAnswer):
        return f"Pick one of the {len(spec.options)} options first."
    return "Write your answer first: a sentence or two in your own words."


class Unreadable(ValueError):
    """An answer that cannot be taken as it is (empty, no number, out of range): said, not counted."""


def decide_params(lesson: Lesson, step: RunStep, answer_of: Callable[[PredictStep], str | None]) -> dict[str, Any]:
    """The edges where the verdicts on `step`'s predictions turn (`decide`), for an experiment that
    repeats until they are decided (its spec's `decides`); {} for any other. A choice's edges are
    every option's ends; a number's those of its answer's tolerance (`answer_of`: the locked one;
    lesson test, which has no learner, gives None and so passes only the choices')."""
    from tutor import experiments

    spec = experiments.REGISTRY.get(step.experiment)
    if spec is None or spec.decides is None:
        return {}
    edges: set[float] = set()
    for predict in lesson.predictions_before(lesson.index(step.id)):
        if predict.compare == spec.decides and not predict.against:  # a ratio's edges are not one run's
            edges.update(checks.judged_edges(predict.answer, predict.unit, answer_of(predict)))
    return {DECIDE: tuple(sorted(edges))} if edges else {}


@dataclass(frozen=True)
class Graded:
    answer: str  # as the learner sees it: a choice's number becomes the option's text
    verdict: Verdict
    evidence: Evidence

    @property
    def correct(self) -> bool:
        return self.verdict.correct

    @property
    def judged(self) -> bool:
        return self.verdict.judged


@dataclass(frozen=True)
class Evidence:
    """What a step's answer is judged against: a run's metrics or an instrument's outputs."""

    metrics: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # "measured" (a run) | "computed" (an instrument) | "" (nothing yet)
    run: RunRecord | None = None
    setting: str = ""  # the settings it was taken at, when they are not the lesson's own
    experiment: str = ""  # the experiment that measured it, where no stored run says so (lesson test)
    ratio: bool = False  # the metric at one setting over the same at another (`ratio_evidence`)

    def guard(self, metric: str | None) -> float | None:
        """The guard band of `metric` as its experiment declares it (None: the default one). A
        ratio of two runs moves as far as both do: each run's band, one on top of the other."""
        declared = self._declared(metric)
        own = declared.guard if declared is not None else None
        if not self.ratio:
            return own
        return (1 + (GUARD if own is None else own)) ** 2 - 1

    def unit(self, metric: str | None) -> str:
        """The unit `metric` is measured in, as its experiment declares it ("" where none says); a
        ratio of two runs' is a factor, "x"."""
        if self.ratio:
            return "x"
        declared = self._declared(metric)
        return declared.unit if declared is not None else ""

    def interval_words(self, metric: str | None) -> str:
        """What `metric`'s interval is, where its experiment says it is not a typical value's."""
        declared = self._declared(metric)
        return declared.interval_words if declared is not None and not self.ratio else ""

    def _declared(self, metric: str | None) -> Metric | None:
        from tutor import experiments

        spec = experiments.REGISTRY.get(self.run.experiment if self.run is not None else self.experiment)
        return spec.metric(metric) if spec is not None and metric else None


@dataclass(frozen=True)
class Reveal:
    """A locked prediction beside what it predicted."""

    step: PredictStep
    answer: str
    evidence: Evidence

    @property
    def device(self) -> dict[str, Any] | None:
        return self.evidence.run.device if self.evidence.run else None

    @property
    def at(self) -> float | None:
        return self.evidence.run.at if self.evidence.run else None

    def judge(self) -> Judged:
        """The one verdict on this prediction: the reveal, the predict step and the profile all say
        this one, so a prediction is never a hit on one screen and unscored on another."""
        step, evidence = self.step, self.evidence
        metric = step.compare or ""
        score = checks.score_prediction(
            self.answer,
            step.answer,
            evidence.metrics.get(metric),
            step.unit,
            interval=checks.interval_of(evidence.metrics, metric),
            why=evidence.metrics.get(NOISE_WHY),
            gate=evidence.metrics.get(NOISE_GATE),
            guard=evidence.guard(metric),
            interval_words=evidence.interval_words(metric),
            shared=bool(evidence.metrics.get(TIMING_SHARED)),
        )
        if evidence.run is not None and evidence.setting and not step.names_settings:
            # The prediction was for the lesson's settings; a tweaked run measured something else.
            return Judged(
                score,
                f"the run was {evidence.setting}, and your prediction was for the lesson's own "
                "settings: run it at those to score it",
            )
        if score.undecided and evidence.metrics.get(TIMING_SHARED):
            return Judged(
                score,
                "the run was timed beside another learner's run (you chose not to wait your turn): "
                "run it again in your turn to score it",
            )
        if score.undecided:
            return Judged(
                score,
                "this machine can't tell yet: the run's interval straddles an edge of your "
                "prediction; run it again to measure more",
            )
        return Judged(score)


@dataclass(frozen=True)
class Judged:
    """A revealed prediction's verdict: its score, or why it is not scored (then neither a hit nor a
    miss, wherever it is shown)."""

    score: PredictionScore
    not_scored: str = ""

    @property
    def hit(self) -> bool:
        return self.score.hit and not self.not_scored


@dataclass(frozen=True)
class Pending:
    """A locked prediction whose measurement does not exist yet, and where to get it."""

    text: str
    step: PredictStep | None = None  # the prediction it is about, where one is said beside others


@dataclass(frozen=True)
class RunOutcome:
    """How one run ended, as values (never the widget that showed it)."""

    experiment: str
    params: dict[str, Any]
    status: str  # finished | cancelled | failed
    metrics: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class LessonSession:
    def __init__(self, lesson: Lesson, progress: Progress, instrument_context: Any = None) -> None:
        self.lesson = lesson
        self.progress = progress
        self.instrument_context = instrument_context  # device memory etc. for instruments (None: defaults)

    @property
    def id(self) -> str:
        return self.lesson.id

    # ------------------------------------------------------------------ place and completion

    def start_index(self) -> int:
        """Where the learner left off (the first step for a new lesson, or one whose step was removed)."""
        position = self.progress.position(self.id)
        if position is None:
            return 0
        try:
            return self.lesson.index(position)
        except StopIteration:
            return 0

    def visit(self, step: Step) -> None:
        self.progress.set_position(self.id, step.id)

    def completed(self) -> set[str]:
        return self.progress.completed_steps(self.id)

    def complete(self, step: Step) -> None:
        self.progress.complete_step(self.id, step.id)

    def unfinished(self) -> list[Step]:
        done = self.completed()
        return [s for s in self.lesson.steps if s.id not in done]

    # ------------------------------------------------------------------ evidence

    def evidence(self, step: PredictStep | CheckStep) -> Evidence:
        """What `step`'s answer is judged against.

        A check with a verify run: the run this step made, else the latest run of that experiment
        (from another lesson or `gpututor run`). A prediction: the run its run step made, else the
        latest run of that experiment; one that names its settings (`at`, `against`), only its run
        step's runs at those; or, revealed by an instrument, what the instrument computes where the
        prediction is judged. Nothing measured yet: empty evidence."""
        if isinstance(step, CheckStep):
            if step.verify is None:
                return Evidence()
            return self._run_evidence(step.id, step.verify.experiment)
        after = self.lesson.run_after(self.lesson.index(step.id))
        if isinstance(after, InstrumentStep):
            return self._computed(after, step)
        if isinstance(after, RunStep):
            if step.names_settings:
                found = self._named_runs(step, after)
                return found if isinstance(found, Evidence) else Evidence()
            return self._run_evidence(after.id, after.experiment)
        return Evidence()

    def _run_evidence(self, step_id: str, experiment: str) -> Evidence:
        """The latest run of the step, else of its experiment, measured on this machine: a run
        from another machine or torch version is not evidence here (it is run again)."""
        for record in (
            self.progress.latest_run(lesson_id=self.id, step_id=step_id),
            self.progress.latest_run(experiment=experiment),
        ):
            if record is not None and machine.measured_here(record.device):
                return Evidence(dict(record.metrics), "measured", record)
        return Evidence()

    def _computed(self, step: InstrumentStep, predict: PredictStep | None = None, context: Any = None) -> Evidence:
        return computed_evidence(step, predict, self.instrument_context if context is None else context)

    def _run_at(self, step: RunStep, named: dict[str, Any]) -> RunRecord | None:
        """The latest finished run of `step` at the settings `named`."""
        return self.progress.latest_run(
            lesson_id=self.id, step_id=step.id, params_match=lambda params: step.made_at(params, named)
        )

    def _named_runs(self, predict: PredictStep, step: RunStep, on_step: bool = False) -> Evidence | Pending:
        """The evidence of a prediction that names its settings: `step`'s latest run at `at` (with
        `against`, over its latest run at those), each measured here the current way; else what to
        run to get it (`on_step`: said on the run step itself, whose settings are right there)."""
        name = step.title or step.id
        wanted = [predict.at, *([predict.against] if predict.against else [])]
        records = [self._run_at(step, named) for named in wanted]
        missing = [_said_settings(named) for named, record in zip(wanted, records, strict=True) if record is None]
        if missing and on_step:
            runs = "a run" if len(missing) == 1 else "runs"
            return Pending(f"It is judged by {runs} {' and '.join(missing)}: set that above and press r.", predict)
        if missing:
            return Pending(
                f"Now go on (n) to the run step “{name}” and run it {' and '.join(missing)}: your prediction "
                "is judged at those settings.",
                predict,
            )
        found = []
        for named, record in zip(wanted, records, strict=True):
            assert record is not None  # none is missing
            stale = _stale(record, name, predict.compare)
            if stale is not None:
                return Pending(stale.text, predict)
            found.append(Evidence(dict(record.metrics), "measured", record, _said_settings(named)))
        if len(found) == 1 or not predict.compare:
            return found[0]
        return ratio_evidence(predict.compare, found[0], found[1])

    # ------------------------------------------------------------------ grading

    def grade(self, step: PredictStep | CheckStep, answer: str) -> Graded:
        """The verdict on `answer` against this learner's evidence, recording nothing. A prediction
        with nothing measured to score it against is not judged (its options are not right or wrong
        by themselves): the verdict says which run would measure it."""
        evidence = self.evidence(step)
        if isinstance(step, PredictStep) and step.compare and evidence.metrics.get(step.compare) is None:
            after = self.lesson.run_after(self.lesson.index(step.id))
            if step.compare in evidence.metrics:
                why = (
                    f"The run here did not measure `{step.compare}` (it is not measured on this device), so "
                    "this prediction cannot be scored on this machine."
                )
            else:
                run = f" (`gpututor run {after.experiment}`)" if isinstance(after, RunStep) else ""
                why = (
                    f"This prediction is scored against the `{step.compare}` its run measures, and there is no "
                    f"run of it on this machine yet: run step {after.id!r} first{run}."
                    if after is not None
                    else f"This prediction is scored against a measured `{step.compare}`, and nothing measures it yet."
                )
            return Graded(shown_answer(step, answer), Verdict(False, why, judged=False), evidence)
        return grade(step, answer, evidence)

    def answer(self, step: CheckStep, answer: str) -> Graded:
        """Grade a check's answer and record it; a right one completes the step. An answer that
        cannot be judged (blank, no number, no such option) raises `Unreadable` and counts nothing."""
        if not answer.strip():
            raise Unreadable(empty_answer(step))
        graded = self.grade(step, answer)
        if not graded.judged:
            raise Unreadable(graded.verdict.feedback)
        self.progress.record_answer(
            self.id,
            step.id,
            graded.answer,
            graded.correct,
            graded.verdict.feedback,
            graded.verdict.matched_misconception,
        )
        if graded.correct:
            self.complete(step)
        return graded

    def history(self, step: Step) -> list[AnswerRecord]:
        return self.progress.answers(self.id, step.id)

    def wrong_attempts(self, step: Step) -> int:
        return sum(1 for a in self.history(step) if not a.correct)

    def solved_by(self, step: CheckStep) -> AnswerRecord | None:
        """The learner's last right answer, or None."""
        return next((a for a in reversed(self.history(step)) if a.correct), None)

    def can_give_up(self, step: CheckStep) -> bool:
        """The answer opens after one graded attempt; before it, only to a give-up asked twice."""
        return self.wrong_attempts(step) >= GIVE_UP_AFTER

    def give_up(self, step: CheckStep, *, without_trying: bool = False) -> bool:
        """Show the answer, after a graded attempt (or `without_trying`: the learner confirmed
        twice): recorded as a wrong answer and a solution used (review brings it back sooner),
        step done. False: not yet."""
        if not (self.can_give_up(step) or without_trying):
            return False
        self.progress.record_answer(self.id, step.id, "(gave up)", False, "shown the answer")
        self.progress.record_aid(self.id, step.id, "solution")
        self.complete(step)
        return True

    # ------------------------------------------------------------------ hints and solutions

    def hints_shown(self, step: Hinted) -> list[str]:
        """The hint tiers shown so far (kept across visits), in order."""
        return step.tiered_hints[: self.progress.aids(self.id, step.id).hints]

    def next_hint(self, step: Hinted) -> list[str]:
        """One more tier shown (recorded), and every tier shown so far; the same list again once
        all are out."""
        shown = self.hints_shown(step)
        if len(shown) < len(step.tiered_hints):
            self.progress.record_aid(self.id, step.id, "hint")
            shown = step.tiered_hints[: len(shown) + 1]
        return shown

    def attempted(self, step: ExerciseStep) -> bool:
        """At least one graded run of the learner's code: the reference solution may open."""
        return bool(self.history(step))

    def show_solution(self, step: ExerciseStep) -> None:
        """The reference solution was shown: recorded (review and export say so)."""
        if not self.progress.aids(self.id, step.id).solution:
            self.progress.record_aid(self.id, step.id, "solution")

    def review(self, step: CheckStep, answer: str) -> Graded:
        """A finished lesson's check asked again: graded like the lesson's, recorded as a review."""
        if not answer.strip():
            raise Unreadable(empty_answer(step))
        graded = self.grade(step, answer)
        if not graded.judged:
            raise Unreadable(graded.verdict.feedback)
        self.progress.record_review(
            self.id,
            step.id,
            graded.answer,
            graded.correct,
            graded.verdict.feedback,
            graded.verdict.matched_misconception,
        )
        return graded

    # ------------------------------------------------------------------ predictions

    def prediction(self, step: PredictStep) -> Prediction | None:
        return self.progress.prediction(self.id, step.id)

    def lock(self, step: PredictStep, answer: str) -> Prediction:
        """Lock a prediction (once; completes the step). Raises `Unreadable` for one that cannot be
        a prediction of this kind: empty, no number in it, outside the question's range."""
        text = answer.strip()
        if not text:
            raise Unreadable(EMPTY_PREDICTION)
        spec = step.answer
        value = None
        if isinstance(spec, ChoiceAnswer):
            # The list submits an option's text; `gpututor check` passes what was typed. Either is
            # read the one way the screen reads it, and two readings are asked about, never guessed.
            reading = read_typed(text, spec, step.unit)
            if reading.index is None:
                raise Unreadable(not_one_option(reading))
            text = spec.options[reading.index].text
        elif isinstance(spec, NumberAnswer):
            question = checks.ambiguity(text, spec.unit) or range_unit_question(text, spec)
            if question is not None:  # never lock a guess at what the learner meant
                raise Unreadable(question)
            value = checks.parse_number(text, spec.unit)
            if value is None:
                raise Unreadable(
                    f"I couldn't read a number in that. Write {checks.describe_spec(spec, example=False)}."
                )
            if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
                raise Unreadable(f"That's outside the range this question allows ({_allowed_range(spec)}).")
        locked = self.progress.lock_prediction(self.id, step.id, text, value)
        self.complete(step)
        return locked

    def reveal(self, step: PredictStep) -> Reveal | Pending:
        """A locked prediction beside its measurement, or what to do to get one. Only this lesson's
        own run (or a finished instrument) reveals: the learner measures what they predicted."""
        locked = self.prediction(step)
        after = self.lesson.run_after(self.lesson.index(step.id))
        if locked is None or not step.compare or after is None:
            return Pending("Now go on (n) and see what really happens.")
        name = after.title or after.id
        if isinstance(after, InstrumentStep):
            if after.id not in self.completed():
                return Pending(f"Now go on (n) to the instrument “{name}” and work it out.")
            return Reveal(step, locked.answer, self._computed(after, step))
        if step.names_settings:
            found = self._named_runs(step, after)
            return found if isinstance(found, Pending) else Reveal(step, locked.answer, found)
        record = self.progress.latest_run(lesson_id=self.id, step_id=after.id)
        if record is None:
            return Pending(f"Now go on (n) to the run step “{name}” and measure it.")
        stale = _stale(record, name, step.compare)
        if stale is not None:
            return stale
        return Reveal(
            step,
            locked.answer,
            Evidence(dict(record.metrics), "measured", record, self.changed_settings(after, record.params)),
        )

    def revealed_by(self, step: RunStep | InstrumentStep, evidence: Evidence) -> list[Reveal | Pending]:
        """The locked predictions that `step` reveals, each beside `evidence` (the run just made),
        or, for one that names its settings, beside the runs at those (or what to run to get them)."""
        found: list[Reveal | Pending] = []
        for p in self.lesson.predictions_before(self.lesson.index(step.id)):
            locked = self.prediction(p)
            if not p.compare or locked is None:
                continue
            if p.names_settings and isinstance(step, RunStep):
                named = self._named_runs(p, step, on_step=True)
                found.append(named if isinstance(named, Pending) else Reveal(p, locked.answer, named))
            elif p.names_settings and isinstance(step, InstrumentStep):
                found.append(Reveal(p, locked.answer, self._computed(step, p)))
            else:
                found.append(Reveal(p, locked.answer, evidence))
        return found

    def computed_reveals(self, step: InstrumentStep, context: Any = None) -> list[Reveal]:
        """The locked predictions instrument `step` reveals, each beside what it computes where that
        prediction is judged (`context`: the device and runs the instrument reads; None: the session's)."""
        found = []
        for p in self.lesson.predictions_before(self.lesson.index(step.id)):
            locked = self.prediction(p)
            if p.compare and locked is not None:
                found.append(Reveal(p, locked.answer, self._computed(step, p, context)))
        return found

    def unlocked_before(self, step: Step) -> list[PredictStep]:
        """Predictions `step` reveals that are not locked yet (it stays shut until they are)."""
        return [p for p in self.lesson.predictions_before(self.lesson.index(step.id)) if self.prediction(p) is None]

    # ------------------------------------------------------------------ runs

    def latest_run(self, step: Step, *, any_status: bool = False) -> RunRecord | None:
        return self.progress.latest_run(lesson_id=self.id, step_id=step.id, status=None if any_status else "finished")

    def record_run(self, step: RunStep | CheckStep, outcome: RunOutcome) -> list[Reveal | Pending]:
        """Store how a run ended (a cancelled run leaves no record). A run step that finished is
        complete, and reveals its predictions: returned, at the settings the run used."""
        if outcome.status == "cancelled":
            return []
        device = {**outcome.device, **machine.stamp()}  # where it was measured, for a later reveal
        run_id = self.progress.record_run(
            experiment=outcome.experiment,
            params=outcome.params,
            device=device,
            metrics=outcome.metrics,
            status=outcome.status,
            error=outcome.error,
            lesson_id=self.id,
            step_id=step.id,
        )
        if outcome.status != "finished" or not isinstance(step, RunStep):
            return []
        self.complete(step)
        record = RunRecord(
            run_id,
            self.id,
            step.id,
            outcome.experiment,
            dict(outcome.params),
            dict(outcome.device),
            dict(outcome.metrics),
            outcome.status,
            outcome.error,
            0.0,
        )
        return self.revealed_by(
            step, Evidence(dict(outcome.metrics), "measured", record, self.changed_settings(step, outcome.params))
        )

    def run_reveals(self, step: RunStep) -> list[Reveal | Pending]:
        """What the learner's last finished run of `step` revealed (shown again on return)."""
        record = self.latest_run(step)
        if record is None:
            return []
        return self.revealed_by(
            step, Evidence(dict(record.metrics), "measured", record, self.changed_settings(step, record.params))
        )

    def decide_params(self, step: RunStep) -> dict[str, Any]:
        """What `step`'s run needs to repeat until this learner's predictions of it are decided."""
        return decide_params(self.lesson, step, lambda p: locked.answer if (locked := self.prediction(p)) else None)

    @staticmethod
    def changed_settings(step: RunStep, params: dict[str, Any]) -> str:
        """'with batch_size=512' when the learner tweaked the run away from the lesson's settings:
        the prediction was made for the lesson's own."""
        changed = {k: v for k, v in params.items() if k in step.tweak and v != step.tweak_default(k)}
        return "with " + ", ".join(f"{k}={v}" for k, v in changed.items()) if changed else ""

    # ------------------------------------------------------------------ exercises

    def code_file(self, step: ExerciseStep) -> Path:
        """The exercise's file, which the learner's own editor may open and save too."""
        return workspace.exercise_file(self.progress.path.parent, self.id, step.id)

    def draft(self, step: ExerciseStep) -> str | None:
        """The learner's latest code: the file (their editor may have changed it while the tutor
        was closed), else the copy in the progress store, else None (not started)."""
        code = workspace.read_code(self.code_file(step))
        return code if code is not None else self.progress.draft(self.id, step.id)

    def save_draft(self, step: ExerciseStep, code: str) -> None:
        """Into the progress store and the file, so both editors see the same code."""
        self.progress.save_draft(self.id, step.id, code)
        workspace.write_code(self.code_file(step), code)

    def record_exercise(self, step: ExerciseStep, result: ExerciseResult, code: str) -> None:
        """A graded run of the learner's program (`code`): each requirement's verdict and the code
        (for the bundle a learner submits), and an answer row (review and export count those); a
        pass completes the step."""
        requirements = [
            {"id": r.id, "title": r.name, "passed": r.passed, "judged": r.judged, "feedback": r.feedback}
            for r in result.requirements
        ]
        self.progress.record_grading(self.id, step.id, code, requirements, result.passed, result.summary)
        self.progress.record_answer(self.id, step.id, "(code)", result.passed, result.summary)
        if result.passed:
            self.complete(step)

    # ------------------------------------------------------------------ instruments

    def last_move(self, step: InstrumentStep) -> Move | None:
        return self.progress.last_move(self.id, step.id)

    def count_moves(self, step: InstrumentStep) -> int:
        return self.progress.count_moves(self.id, step.id)

    def record_move(self, step: InstrumentStep, settings: dict[str, Any], outputs: dict[str, Any]) -> None:
        self.progress.record_move(self.id, step.id, step.instrument, settings, outputs)


def grade(step: PredictStep | CheckStep, answer: str, evidence: Evidence) -> Graded:
    """The verdict on `answer`, given what it is judged against. A prediction is scored against the
    metric it predicts, as its reveal is; a check by its grader (`tutor/checks/`)."""
    metrics = evidence.metrics
    if isinstance(step, PredictStep) and isinstance(step.answer, ChoiceAnswer):
        reading = read_typed(answer, step.answer, step.unit)  # as the lock reads it
        if reading.index is None:
            return Graded(answer, Verdict(False, not_one_option(reading), judged=False), evidence)
        answer = step.answer.options[reading.index].text
    if isinstance(step, PredictStep) and step.compare and metrics.get(step.compare) is not None:
        score = checks.score_prediction(
            answer,
            step.answer,
            metrics[step.compare],
            step.unit,
            interval=checks.interval_of(metrics, step.compare),
            why=metrics.get(NOISE_WHY),
            gate=metrics.get(NOISE_GATE),
            guard=evidence.guard(step.compare),
            interval_words=evidence.interval_words(step.compare),
            shared=bool(metrics.get(TIMING_SHARED)),
        )
        summary = score.summary.replace("measured ", f"{evidence.source} ") if evidence.source else score.summary
        # Undecided is neither right nor wrong: a review does not count it against the learner.
        verdict = Verdict(score.hit, summary, score=1.0 if score.hit else 0.0, judged=not score.undecided)
    else:
        verdict = checks.grade(answer, step.answer, metrics)
    return Graded(shown_answer(step, answer), verdict, evidence)


def computed_evidence(step: InstrumentStep, predict: PredictStep | None = None, context: Any = None) -> Evidence:
    """What instrument `step` computes where `predict` is judged: its `at` over the step's `set`
    (without one, the step's scenario); with `against`, that over the same output there.
    `context`: the device and runs the instrument reads (None: its defaults)."""
    inst = instruments.REGISTRY[step.instrument]

    def at(named: dict[str, Any]) -> Evidence:
        outputs = inst.compute(inst.settings(step.scenario_settings(named)), context).outputs
        shown = named or step.scenario
        return Evidence(dict(outputs), "computed", None, f"with {inst.describe(shown)}" if shown else "")

    top = at(predict.at if predict is not None else {})
    if predict is None or not predict.against or not predict.compare:
        return top
    return ratio_evidence(predict.compare, top, at(predict.against))


def ratio_evidence(metric: str, top: Evidence, bottom: Evidence) -> Evidence:
    """`metric` in `top` over the same in `bottom` (two runs, or an instrument at two settings) as
    the evidence of one number, the ratio, under the same name. Where both report an interval, the
    ratio's is each end of the top one's over the opposite end of the bottom one's: whatever holds
    both typical values holds their ratio. Its guard band is both runs' (`Evidence.ratio`); what
    else the machine did is said for both."""
    above, below = top.metrics.get(metric), bottom.metrics.get(metric)
    value = above / below if _positive(above) and _positive(below) else None
    metrics: dict[str, Any] = {metric: value}
    upper, lower = checks.interval_of(top.metrics, metric), checks.interval_of(bottom.metrics, metric)
    if value is not None and upper is not None and lower is not None and lower[0] > 0:
        metrics[f"{metric}_low"], metrics[f"{metric}_high"] = upper[0] / lower[1], upper[1] / lower[0]
    said = [w for w in (top.metrics.get(NOISE_WHY), bottom.metrics.get(NOISE_WHY)) if isinstance(w, str) and w]
    if said:
        metrics[NOISE_WHY] = " ".join(dict.fromkeys(said))
    gate = top.metrics.get(NOISE_GATE) or bottom.metrics.get(NOISE_GATE)
    if gate:
        metrics[NOISE_GATE] = gate
    if top.metrics.get(TIMING_SHARED) or bottom.metrics.get(TIMING_SHARED):  # either run timed beside another
        metrics[TIMING_SHARED] = True
    run = top.run or bottom.run
    experiment = run.experiment if run is not None else top.experiment
    from tutor import experiments

    spec = experiments.REGISTRY.get(experiment)
    declared: Metric | str = spec.metric(metric) if spec is not None else metric
    setting = (
        f"{present.metric_value(declared, above)} {top.setting or 'at its own settings'}, over "
        f"{present.metric_value(declared, below)} {bottom.setting or 'at its own settings'}"
    )
    return Evidence(metrics, top.source, top.run, setting, experiment, ratio=True)


def _positive(value: Any) -> TypeGuard[float]:
    """A number a ratio can be taken of: above 0 and finite (not a bool, None or NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")


def _said_settings(named: dict[str, Any]) -> str:
    """'with batch_size=1024' for a prediction's `at` or `against`; {}: the step's own settings."""
    return "with " + ", ".join(f"{k}={v}" for k, v in named.items()) if named else "at its own settings"


def _stale(record: RunRecord, name: str, compare: str | None) -> Pending | None:
    """Why `record` (of the run step named `name`) cannot reveal a prediction of `compare` here:
    it was measured on another machine, or timed the older way; None when it can."""
    if not machine.measured_here(record.device):
        return Pending(
            f"Your last run of “{name}” was measured on {machine.elsewhere(record.device)}, not "
            "this machine: go on (n) and run it here to see your prediction against it."
        )
    if _has_interval(record.experiment, compare) and not method.is_current(record.device):
        return Pending(
            f"Your last run of “{name}” was measured the older way ({method.CHANGED}): go on (n) "
            "and run it again to see your prediction against it."
        )
    return None


def _has_interval(experiment: str, metric: str | None) -> bool:
    """Is `metric` a timed one, reported with an interval (NAME_low): one a method change regrades?"""
    from tutor import experiments

    spec = experiments.REGISTRY.get(experiment)
    return bool(metric) and spec is not None and f"{metric}_low" in spec.metrics


def not_one_option(reading: TypedChoice) -> str:
    """Why a line typed for a choice prediction names no one option: what could not be read, or
    the two options it could mean and what to type for each."""
    if reading.problem:
        return reading.problem
    return f"{reading.question()} Say which: " + " or ".join(f"“{r.exact}”" for r in reading.readings) + "."


def shown_answer(step: PredictStep | CheckStep, answer: str) -> str:
    """The answer as the learner sees it: a choice's number ("2") becomes the option's text."""
    options = step.answer.options if isinstance(step.answer, ChoiceAnswer) else []
    digits = answer.lstrip("0") if answer.isascii() and answer.isdigit() else ""
    number = int(digits) if 0 < len(digits) <= 6 else 0  # never int() a long string: Python refuses 4300+ digits
    if 1 <= number <= len(options):
        return options[number - 1].text
    return answer


def _allowed_range(spec: NumberAnswer) -> str:
    """ "1 to 100 GB", or the one bound a question sets ("at least 1 GB")."""
    low = None if spec.min is None else checks.format_number(spec.min, spec.unit)
    high = None if spec.max is None else checks.format_number(spec.max, spec.unit)
    if low is not None and high is not None:
        return f"{low} to {high}"
    return f"at least {low}" if low is not None else f"at most {high}"
