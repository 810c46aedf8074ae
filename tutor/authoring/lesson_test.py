"""`gpututor lesson test`: play a lesson headlessly, the way an instructor's CI would.

Every run step runs its experiment (with the experiment's small `quick` parameters unless
asked for the full ones) and must finish with every metric it declares; every check's
reference answer must pass its own grader, its listed right answers too and its wrong
answers not, with the metrics of its verify run when it has one; every exercise's starter
must not pass yet (the learner has something to do), its solution must pass in the sandbox,
and each listed mistake must fail the requirement it names (where
its `only_on` lists this machine's device kind, when it has one); every instrument must
compute at its starting and scenario settings. Each of these is one
`Outcome`; a lesson that does not load is one failed outcome per lint issue.

Runs happen in this process (torch is imported); identical runs are made once. Quick mode
also gives exercise programs a slice of MNIST (the lab's sample limits, unless already set),
on which a checkpoint's accuracy is measured and shown but not held to its bar (--full does).
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor import checks
from tutor.course.lesson import (
    CheckStep,
    ExerciseStep,
    Goal,
    InstrumentStep,
    Lesson,
    LessonError,
    LessonIssue,
    PredictStep,
    PythonRequirement,
    RunStep,
    SourceRequirement,
)
from tutor.course.loader import load_file, without_pack_knock_ons
from tutor.course.session import Evidence, computed_evidence, decide_params, ratio_evidence
from tutor.experiments.spec import NOISE_WHY
from tutor.threads import usable_cores

if TYPE_CHECKING:
    from tutor.checks.answers import NumberAnswer

# Enough for every solution to pass and every mistake to fail what it names, and for the report
# bars the built-in exercises set (ex3's 80%: its loops of 150 batches of 64 end after the 75 a
# 4,800-image slice holds, near 90%); a checkpoint's accuracy bar (97% after 10 epochs on all of
# MNIST) needs --full. 9,600 images cost CI half a minute more on the practice lesson alone.
QUICK_LAB = {"GPUTUTOR_LAB_TRAIN_SAMPLES": "4800", "GPUTUTOR_LAB_TEST_SAMPLES": "1000"}


PROGRAMS_AT_ONCE = "GPUTUTOR_PROGRAMS_AT_ONCE"  # a test runner's share of the cores (tests/conftest.py)


def exercise_workers() -> int:
    """How many exercise programs run at once: one per CPU core this process may use, or the
    share GPUTUTOR_PROGRAMS_AT_ONCE gives it (pytest-xdist's workers each play lessons: one
    program per core in all, not one per core in each)."""
    given = os.environ.get(PROGRAMS_AT_ONCE, "").strip()
    if given.isdigit() and int(given) > 0:
        return int(given)
    return usable_cores()


def program_device() -> str:
    """The kind of device ("cuda", "mps", "cpu") exercise programs train on here: the machine's
    best, since a learner's program picks its own (torch.cuda.is_available()), whatever --device
    says. A mistake's `only_on` is read against it."""
    from tutor.experiments import devices

    return devices.available()[0].kind


@dataclass(frozen=True)
class Outcome:
    lesson: str  # lesson id (or the file, when it does not load)
    step: str
    kind: str  # lint, run, check, exercise, instrument, predict
    what: str  # what was tried, in a few words
    ok: bool
    detail: str = ""  # why it failed (or a figure when it passed)
    seconds: float = 0.0
    skipped: bool = False  # not tried on this machine (ok stays True): `detail` says why
    where: str = ""  # path:line of the step (path:line:col of a lint issue), for an editor to open
    # --repeats: each option's verdicts over the repeats ({"below 2x": {"hit": 5}}), and each
    # repeat's measurement as [median, interval low, interval high] (None where it had none).
    verdicts: dict[str, dict[str, int]] = field(default_factory=dict)
    measured: list[list[float | None]] = field(default_factory=list)


class Player:
    """Plays lessons headlessly. `repeats` > 1: each run step that a prediction compares with is
    made that many times with the lesson's own parameters, and the predictions' verdicts over
    those runs are one outcome (`_noise_outcome`): an instructor sees where a boundary sits in
    this machine's noise."""

    def __init__(self, device: str | None = None, full: bool = False, repeats: int = 1) -> None:
        self.device = device
        self.full = full
        self.repeats = max(1, repeats)
        self._runs: dict[tuple[str, str, int], tuple[dict[str, Any] | None, str]] = {}

    # ------------------------------------------------------------------ files

    def play_file(self, path: Path, pack_problems: Sequence[LessonIssue] = ()) -> Iterator[Outcome]:
        """Its outcomes, each with the path:line of its step. `pack_problems`: the folder packs that
        did not load, whose import error stands for its lessons' unknown experiments."""
        try:
            lesson = load_file(path, grade_examples=True)
        except LessonError as e:
            for issue in without_pack_knock_ons(e.issues, list(pack_problems)):
                yield Outcome(
                    str(path),
                    f"line {issue.line}",
                    "lint",
                    "loads and lints clean",
                    False,
                    issue.message,
                    where=f"{issue.path}:{issue.line}:{issue.col}",
                )
            return
        yield Outcome(
            lesson.id,
            "-",
            "lint",
            "loads and lints clean",
            True,
            f"{len(lesson.steps)} step{'s' if len(lesson.steps) != 1 else ''}",
            where=f"{path}:1",
        )
        lines = _step_lines(path)
        for outcome in self.play(lesson):
            yield replace(outcome, where=f"{path}:{lines.get(outcome.step, 1)}")

    def play(self, lesson: Lesson) -> Iterator[Outcome]:
        waiting: list[PredictStep] = []  # predictions waiting for the run or instrument that reveals them
        for step in lesson.steps:
            if isinstance(step, PredictStep) and step.compare:
                waiting.append(step)
            elif isinstance(step, RunStep):
                yield from self._run_step_outcomes(lesson, step, waiting)
                waiting = []
            elif isinstance(step, InstrumentStep):
                yield from self._instrument_step(lesson, step)
                yield from self._computed_predictions(lesson, step, waiting)
                waiting = []
            elif isinstance(step, CheckStep):
                yield from self._check_step(lesson, step)
            elif isinstance(step, ExerciseStep):
                yield from self._exercise_step(lesson, step)

    def _run_step_outcomes(self, lesson: Lesson, step: RunStep, predicts: list[PredictStep]) -> Iterator[Outcome]:
        """The run step with its own params, then with each value a learner may switch one setting
        to, then at any settings a prediction names (`at`, `against`); each prediction judged by the
        runs the learner's would be: one that names its settings by the runs at those only."""
        plain = [p for p in predicts if not p.names_settings]
        named = [p for p in predicts if p.names_settings]
        changes: list[dict[str, Any]] = [{}, *_tweak_choices(step)]
        for p in named:
            for change in _named_changes(step, p):
                if change not in changes:
                    changes.append(change)
        made: dict[str, list[dict[str, Any]]] = {}  # each change's metrics, one per run (per repeat)
        if predicts and self.repeats > 1:
            needed: list[dict[str, Any]] = [{}] if plain else []
            for p in named:
                needed += [c for c in _named_changes(step, p) if c not in needed]
            for change in needed:
                outcome, runs = self._repeated_run_step(lesson, step, predicts[0], change)
                yield outcome
                if runs:
                    made[_key(change)] = runs
            changes = [c for c in changes if c not in needed]
        for changed in changes:
            outcome, metrics = self._run_step(lesson, step, predicts, changed)
            yield outcome
            if metrics is None:
                continue
            made.setdefault(_key(changed), [metrics])
            for p in plain:
                yield self._predict_outcome(lesson, p, metrics, changed)

        def judged(p: PredictStep, top: dict[str, Any], bottom: dict[str, Any] | None) -> Evidence:
            at = Evidence(top, "measured", experiment=step.experiment)
            if bottom is None or not p.compare:
                return at
            return ratio_evidence(p.compare, at, Evidence(bottom, "measured", experiment=step.experiment))

        for p in predicts:
            at_change, *against_change = _named_changes(step, p)
            tops = made.get(_key(at_change), [])
            bottoms = made.get(_key(against_change[0]), []) if against_change else []
            if not tops or (against_change and not bottoms):
                continue  # a run failed (said above)
            pairs = [judged(p, t, b if against_change else None) for t, b in zip(tops, bottoms or tops, strict=False)]
            if self.repeats > 1 and (p.names_settings or len(tops) > 1):
                yield self._noise_outcome(lesson, p, pairs)
            elif p.names_settings:
                yield self._predict_outcome(lesson, p, pairs[0].metrics, p.at, evidence=pairs[0])

    # ------------------------------------------------------------------ runs

    def run(
        self, experiment: str, params: dict[str, Any], keep: dict[str, Any] | None = None, repeat: int = 0
    ) -> tuple[dict[str, Any] | None, str]:
        """(metrics, "") or (None, why it failed); the same run is made once (`repeat` numbers the
        runs of --repeats apart). Quick mode takes the experiment's small settings over `params`,
        but never over `keep` (a tweak under test); a repeat is always made with `params`."""
        import json

        from tutor import experiments
        from tutor.experiments.events import Finished

        own = self.full or repeat > 0
        values = dict(params) if own else {**params, **experiments.get(experiment).quick, **(keep or {})}
        key = (experiment, json.dumps(values, sort_keys=True, default=str), repeat)
        if key not in self._runs:
            try:
                metrics = None
                for event in experiments.start(experiment, values, device=self.device):
                    if isinstance(event, Finished):
                        metrics = dict(event.metrics)
                self._runs[key] = (metrics, "" if metrics is not None else "the run ended without finishing")
            except Exception as e:  # noqa: BLE001 - any failure of a run is the outcome to report
                self._runs[key] = (None, f"{type(e).__name__}: {e}")
        return self._runs[key]

    def _run_step(
        self, lesson: Lesson, step: RunStep, predicts: list[PredictStep], changed: dict[str, Any]
    ) -> tuple[Outcome, dict[str, Any] | None]:
        """The run's outcome, and its metrics when it reported them all. `changed`: the tweak
        values a learner switched to (over the step's params)."""
        from tutor import experiments

        t0 = time.perf_counter()
        what = f"runs {step.experiment}" + _with(changed) + ("" if self.full else " (quick)")
        # as the learner's screen starts it, tweaks at their first values, repeating until its options are decided
        start = {**step.start_params(), **decide_params(lesson, step, lambda _: None)}
        metrics, problem = self.run(
            step.experiment, {**start, **changed}, keep={**{k: start[k] for k in step.tweak}, **changed}
        )
        seconds = time.perf_counter() - t0
        if metrics is None:
            return Outcome(lesson.id, step.id, "run", what, False, problem, seconds), None
        missing = [m for m in experiments.get(step.experiment).metrics if m not in metrics]
        if missing:
            return Outcome(
                lesson.id, step.id, "run", what, False, f"metrics not reported: {', '.join(missing)}", seconds
            ), None
        compared = dict.fromkeys(p.compare for p in predicts if p.compare)
        detail = ", ".join(f"{name} = {_short(_metric(metrics, name))}" for name in compared)
        return Outcome(lesson.id, step.id, "run", what, True, detail, seconds), metrics

    def _repeated_run_step(
        self, lesson: Lesson, step: RunStep, predict: PredictStep, changed: dict[str, Any] | None = None
    ) -> tuple[Outcome, list[dict[str, Any]]]:
        """The run step made `repeats` times with the lesson's own parameters (and `changed` over
        them: settings a prediction names); the metrics of each."""
        t0 = time.perf_counter()
        what = f"runs {step.experiment} {self.repeats} times (the lesson's own parameters{_with(changed or {})})"
        runs: list[dict[str, Any]] = []
        for repeat in range(1, self.repeats + 1):
            metrics, problem = self.run(
                step.experiment,
                {**step.start_params(), **decide_params(lesson, step, lambda _: None), **(changed or {})},
                repeat=repeat,
            )
            if metrics is None:
                return Outcome(
                    lesson.id, step.id, "run", what, False, f"repeat {repeat}: {problem}", time.perf_counter() - t0
                ), []
            runs.append(metrics)
        shown = ", ".join(_short(_metric(m, predict.compare)) for m in runs)
        return Outcome(
            lesson.id, step.id, "run", what, True, f"{predict.compare} = {shown}", time.perf_counter() - t0
        ), runs

    def _noise_outcome(self, lesson: Lesson, step: PredictStep, judged: list[Evidence]) -> Outcome:
        """Each option's verdicts over the repeated runs. Fails where an option is a hit in one run
        and a miss in another, or undecided in most: its boundary sits in this machine's noise. A
        number prediction fails where the interval is, in most runs, too wide for any number to
        be a hit within its tolerance."""
        from tutor.checks.answers import ChoiceAnswer, NumberAnswer
        from tutor.course.session import grade
        from tutor.measurement.intervals import GUARD

        runs = [e.metrics for e in judged]  # each run's (or each pair's ratio, for `against`)
        what = f"{step.compare}{' ratio' if step.against else ''}: verdicts over {len(runs)} runs"
        measured = [
            [_number_or_none(_metric(m, step.compare)), *(checks.interval_of(m, step.compare) or (None, None))]
            for m in runs
        ]
        shown = "; ".join(_measurement(row) for row in measured)
        if all(row[0] is None for row in measured) and all(_metric(m, step.compare) is None for m in runs):
            return Outcome(
                lesson.id,
                step.id,
                "predict",
                what,
                True,
                f"{step.compare} is not measured on this machine (None); not judged here",
                measured=measured,
            )
        if isinstance(step.answer, ChoiceAnswer) and any(
            o.min is not None or o.max is not None for o in step.answer.options
        ):
            verdicts: dict[str, Counter[str]] = {o.text: Counter() for o in step.answer.options}
            for evidence in judged:
                for o in step.answer.options:
                    verdicts[o.text][_call(grade(step, o.text, evidence))] += 1
            counts = {text: dict(c) for text, c in verdicts.items()}
            said = "; ".join(f"'{t}' " + ", ".join(f"{n} {k}" for k, n in c.items()) for t, c in counts.items())
            flips = [t for t, c in verdicts.items() if c["hit"] and c["miss"]]
            torn = [t for t, c in verdicts.items() if c["undecided"] * 2 > len(runs)]
            if not flips and not torn:
                return Outcome(
                    lesson.id,
                    step.id,
                    "predict",
                    what,
                    True,
                    f"{said} (measured {shown})",
                    verdicts=counts,
                    measured=measured,
                )
            guard = evidence.guard(step.compare)
            edges = _edges_within(
                step.answer,
                [o.text for o in step.answer.options if o.text in flips + torn],
                measured,
                step.unit,
                GUARD if guard is None else guard,
            )
            where = " and ".join(edges) or "an edge of " + ", ".join(f"'{t}'" for t in flips + torn)
            how = "graded a hit in one run and a miss in another" if flips else "undecided in most runs"
            return Outcome(
                lesson.id,
                step.id,
                "predict",
                what,
                False,
                f"the measurement falls either side of {where} on this machine ({how}): move the "
                f"boundary or widen the option. {said} (measured {shown})",
                verdicts=counts,
                measured=measured,
            )
        if isinstance(step.answer, NumberAnswer) and step.answer.abs_tolerance is None and runs:
            guard = judged[0].guard(step.compare)
            guard = GUARD if guard is None else guard
            tol = step.answer.tolerance
            widest = (1 + tol) / (1 - tol) if 0 < tol < 1 else math.inf
            too_wide = [row for row in measured if row[1] and row[2] and row[2] * (1 + guard) ** 2 / row[1] > widest]
            if len(too_wide) * 2 > len(runs):
                return Outcome(
                    lesson.id,
                    step.id,
                    "predict",
                    what,
                    False,
                    f"no number can be a hit in {len(too_wide)} of {len(runs)} runs: the interval is wider "
                    f"than a {tol:.0%} tolerance reaches; widen the tolerance or measure longer "
                    f"(measured {shown})",
                    measured=measured,
                )
        return Outcome(lesson.id, step.id, "predict", what, True, f"measured {shown}", measured=measured)

    def _predict_outcome(
        self,
        lesson: Lesson,
        step: PredictStep,
        metrics: dict[str, Any],
        changed: dict[str, Any] | None = None,
        *,
        evidence: Evidence | None = None,
    ) -> Outcome:
        """Some answer must be judged right against the measurement, or the learner never can be.
        `evidence`: what the prediction is judged against, where it is not the run's own metrics
        (a ratio of two runs, an instrument's outputs)."""
        from tutor.checks.answers import ChoiceAnswer, NumberAnswer
        from tutor.course.session import grade

        what = f"{step.compare} can be judged against the prediction" + _with(changed or {})
        if step.against:
            what = f"{step.compare} ratio{_with(changed or {}) or ' at its own settings'} over{_with(step.against)}"
            what += " can be judged against the prediction"
        measured = _metric(metrics, step.compare)
        if measured is None:
            return Outcome(
                lesson.id,
                step.id,
                "predict",
                what,
                True,
                f"{step.compare} is not measured on this machine (None); not judged here",
            )
        if isinstance(step.answer, NumberAnswer):
            ok = isinstance(measured, (int, float)) and not isinstance(measured, bool) and math.isfinite(measured)
            if not ok:
                return Outcome(
                    lesson.id,
                    step.id,
                    "predict",
                    what,
                    False,
                    f"measured {measured!r}: not a number, "
                    "so a number prediction cannot be judged (use a choice answer)",
                )
            return Outcome(
                lesson.id, step.id, "predict", what, *_number_prediction_allowed(step, step.answer, measured)
            )
        if isinstance(step.answer, ChoiceAnswer):
            made_by = lesson.run_after(lesson.index(step.id))  # judged as the learner's locked choice will be
            if evidence is None:
                evidence = Evidence(metrics, "measured", experiment=getattr(made_by, "experiment", ""))
            # Each option as the list submits it, by its words (a bare number may be asked about).
            calls = {o.text: _call(grade(step, o.text, evidence)) for o in step.answer.options}
            interval = checks.interval_of(metrics, step.compare)
            shown = f"measured {_short(measured)}" + (
                f", interval {_short(interval[0])} to {_short(interval[1])}" if interval is not None else ""
            )
            right = [text for text, call in calls.items() if call == "hit"]
            if right:
                return Outcome(lesson.id, step.id, "predict", what, True, f"{shown}: '{right[0]}' is right here")
            torn = [text for text, call in calls.items() if call == "undecided"]
            if torn:
                why = " ".join(str(metrics.get(NOISE_WHY) or "").split())
                return Outcome(
                    lesson.id,
                    step.id,
                    "predict",
                    what,
                    True,
                    f"{shown}: this machine can't tell yet between "
                    + " and ".join(f"'{t}'" for t in torn)
                    + " (the interval straddles their edge; a learner is told so and offered a re-run; "
                    "--repeats N shows how often)" + (f". {why}" if why else ""),
                )
            return Outcome(
                lesson.id,
                step.id,
                "predict",
                what,
                False,
                f"{shown}, which no option matches: every learner would be "
                "told they were wrong (ranges with gaps? options whose text is not the measured "
                "value?)",
            )
        return Outcome(lesson.id, step.id, "predict", what, True, "a text prediction: shown beside the run")

    # ------------------------------------------------------------------ checks

    def _check_step(self, lesson: Lesson, step: CheckStep) -> Iterator[Outcome]:
        from tutor.checks.answers import ChoiceAnswer, NumberAnswer
        from tutor.course.session import Evidence, grade

        t0 = time.perf_counter()
        metrics: dict[str, Any] = {}
        if step.verify is not None:
            found, problem = self.run(step.verify.experiment, step.verify.params)
            yield Outcome(
                lesson.id,
                step.id,
                "check",
                f"verify run {step.verify.experiment}",
                found is not None,
                problem,
                time.perf_counter() - t0,
            )
            metrics = found or {}
        spec = step.answer
        answers: list[tuple[str, bool, str]] = []  # (answer, should pass, label)
        if isinstance(spec, ChoiceAnswer):
            answers += [(str(i), o.correct, f"option {i}") for i, o in enumerate(spec.options, 1)]
        elif isinstance(spec, NumberAnswer):
            if spec.value is not None:
                answers.append((f"{spec.value:g} {spec.unit}".strip(), True, "its value"))
            elif spec.from_metric and metrics.get(spec.from_metric) is not None:
                answers.append((f"{metrics[spec.from_metric]:g} {spec.unit}".strip(), True, "the measured value"))
        elif getattr(spec, "reference", "") and getattr(spec, "rubric", None) is not None:
            answers.append((spec.reference, True, "reference answer"))
        answers += [(a, True, f"right[{j}]") for j, a in enumerate(step.examples.right)]
        answers += [(a, False, f"wrong[{j}]") for j, a in enumerate(step.examples.wrong)]
        failures = []
        evidence = Evidence(metrics, "measured" if metrics else "")
        for answer, want, label in answers:
            verdict = grade(step, answer, evidence).verdict  # as the learner's answer is graded
            if verdict.correct != want:
                failures.append(
                    f"{label} {answer[:60]!r} graded {'wrong' if want else 'right'}"
                    + (f": {verdict.feedback}" if want and verdict.feedback else "")
                    + _negations(answer, spec, verdict, want)
                )
        yield Outcome(
            lesson.id,
            step.id,
            "check",
            f"grades {len(answers)} answer{'s' if len(answers) != 1 else ''} as listed",
            not failures,
            "; ".join(failures),
            time.perf_counter() - t0,
        )
        if isinstance(spec, NumberAnswer) and spec.ranges:
            yield self._bands_outcome(lesson, step, spec, metrics)

    def _bands_outcome(self, lesson: Lesson, step: CheckStep, spec: NumberAnswer, metrics: dict[str, Any]) -> Outcome:
        """Each band of a number check is reached by some answer and gives its own verdict and
        feedback to it; a band the accepted interval or earlier bands swallow fails."""
        from tutor.checks.number import band_reach
        from tutor.course.session import Evidence, grade

        t0 = time.perf_counter()
        target = spec.value
        if spec.from_metric and isinstance(metrics.get(spec.from_metric), (int, float)):
            target = float(metrics[spec.from_metric])
        failures = []
        for reach in band_reach(spec, target):
            band = spec.ranges[reach.index]
            label = f"range {reach.index + 1} ({_bounds(band.min, band.max)})"
            if reach.example is None:
                failures.append(f"{label} can never be reached: {reach.why}")
                continue
            answer = _typed(reach.example, spec.unit)
            verdict = grade(step, answer, Evidence(metrics, "measured" if metrics else "")).verdict
            if verdict.correct != band.correct or (band.feedback and verdict.feedback != band.feedback):
                failures.append(
                    f"{label}: {answer!r} was graded {'right' if verdict.correct else 'wrong'} "
                    f"with {verdict.feedback!r}"
                )
        return Outcome(
            lesson.id,
            step.id,
            "check",
            f"each of {len(spec.ranges)} ranges is reached",
            not failures,
            "; ".join(failures),
            time.perf_counter() - t0,
        )

    # ------------------------------------------------------------------ exercises

    def _exercise_step(self, lesson: Lesson, step: ExerciseStep) -> Iterator[Outcome]:
        added = {} if self.full else {k: v for k, v in QUICK_LAB.items() if k not in os.environ}
        if "GPUTUTOR_THREADS" not in os.environ and exercise_workers() > 1:
            # Programs side by side share the cores: each deciding it may use all of them (the
            # machine is idle as they start) oversubscribes it, and OpenMP's waiting threads then
            # make a 7 s program take 45 s (measured, 2 programs of 2 threads on 2 cores).
            added["GPUTUTOR_THREADS"] = str(max(1, usable_cores() // exercise_workers()))
        os.environ.update(added)  # the sandboxed program inherits them
        try:
            yield from self._exercise_outcomes(lesson, step)
        finally:
            for key in added:
                os.environ.pop(key, None)

    def _exercise_outcomes(self, lesson: Lesson, step: ExerciseStep) -> Iterator[Outcome]:
        """The solution, then the starter (a learner must have something to do: it may not pass
        already), then each mistake, in the lesson's order. The programs that must run run side by
        side (each in its own sandbox process, one per CPU core): on a 2-core machine the practice
        lesson's 21 programs took 130 s one after another."""
        from tutor.exercises import inspected
        from tutor.exercises.grader import grade_exercise, source_requirement_met

        def graded(code: str, where: Path) -> tuple[Any, float]:
            t0 = time.perf_counter()
            result = grade_exercise(step, code, where, accuracy_bars=self.full)
            return result, time.perf_counter() - t0

        with (
            tempfile.TemporaryDirectory(prefix="gpututor-lesson-test-") as tmp,
            ThreadPoolExecutor(max_workers=exercise_workers(), thread_name_prefix="lesson-test") as pool,
        ):
            solution = pool.submit(graded, step.solution, Path(tmp) / "solution")
            starter = pool.submit(graded, step.starter, Path(tmp) / "starter")
            runs: dict[int, Future[tuple[Any, float]]] = {}
            kind = program_device()
            for j, mistake in enumerate(step.mistakes):
                if mistake.skipped_on(kind):
                    continue
                named = next((r for r in step.requirements if r.id == mistake.fails), None)
                # What the grader would decide about a source requirement needs no run: quick mode
                # reads the code (the full run is --full, or the learner's own).
                if self.full or not isinstance(named, SourceRequirement):
                    runs[j] = pool.submit(graded, mistake.code, Path(tmp) / f"mistake-{j}")

            result, seconds = solution.result()
            again = ""
            if could_not_tell(result):
                # A timing judged beside the programs graded side by side with it: once more, alone.
                for other in [starter, *runs.values()]:
                    other.result()
                inspected.forget_starter_runs()  # its starter's run was timed beside them too
                result, more = graded(step.solution, Path(tmp) / "solution-alone")
                seconds += more
                again = "graded again alone (beside the other programs this machine could not tell)"
            failed = [
                f"{r.id}: {r.feedback}"
                + (f" ({_last_line(r.checker_error)})" if getattr(r, "checker_error", "") else "")
                for r in result.requirements
                if not r.passed
            ]
            unapplied = [n for n in result.checker_notes if "not applied" in n]
            yield Outcome(
                lesson.id,
                step.id,
                "exercise",
                "solution passes",
                result.passed,
                "; ".join(failed) or result.summary
                if not result.passed
                else "; ".join(filter(None, [result.summary, *unapplied, again])),
                seconds,
            )
            result, seconds = starter.result()
            if step.complete:  # a cell to run and read: it must pass as given
                yield Outcome(
                    lesson.id,
                    step.id,
                    "exercise",
                    "starter passes as given (complete: true)",
                    result.passed,
                    result.summary,
                    seconds,
                )
            else:
                yield Outcome(
                    lesson.id,
                    step.id,
                    "exercise",
                    "starter does not pass yet",
                    not result.passed,
                    "the starter already passes every requirement: the learner would be done before "
                    "writing a line; leave the step it teaches out of it, or mark a cell meant to be "
                    "run as it is `complete: true`"
                    if result.passed
                    else f"{sum(not r.passed for r in result.requirements)} of "
                    f"{len(result.requirements)} requirements left for the learner",
                    seconds,
                )
            for j, mistake in enumerate(step.mistakes):
                what = f"mistake {mistake.name!r} fails {mistake.fails}"
                skipped = mistake.skipped_on(kind)
                if skipped:  # e.g. float16 autocast, a mistake on a CPU, is what a CUDA GPU should do
                    yield Outcome(lesson.id, step.id, "exercise", what, True, skipped, skipped=True)
                    continue
                if j not in runs:
                    t0 = time.perf_counter()
                    named = next(r for r in step.requirements if r.id == mistake.fails)
                    assert isinstance(named, SourceRequirement)  # only such a mistake is left unrun (above)
                    met = source_requirement_met(named, mistake.code)
                    yield Outcome(
                        lesson.id,
                        step.id,
                        "exercise",
                        what,
                        met is False,
                        "source checked without running"
                        if met is False
                        else "its code meets the source requirement it should fail",
                        time.perf_counter() - t0,
                    )
                    continue
                result, seconds = runs[j].result()
                named = next((r for r in result.requirements if r.id == mistake.fails), None)
                broken = _last_line(getattr(named, "checker_error", ""))  # a pack grader that crashed judged nothing
                fails_it = not result.passed and named is not None and not named.passed and not broken
                unsaid = _unsaid(step, mistake, named.feedback) if fails_it and named is not None else ""
                detail = (
                    unsaid
                    if fails_it
                    else (
                        f"its checker failed instead of judging it: {broken}"
                        if broken
                        else f"it {'passed' if result.passed else 'failed other requirements'}: {result.summary}"
                    )
                )
                yield Outcome(lesson.id, step.id, "exercise", what, fails_it and not unsaid, detail, seconds)

    # ------------------------------------------------------------------ instruments

    def _instrument_step(self, lesson: Lesson, step: InstrumentStep) -> Iterator[Outcome]:
        from tutor.instruments import REGISTRY

        t0 = time.perf_counter()
        instrument = REGISTRY[step.instrument]
        try:
            for values in (step.set, step.scenario_settings()):
                instrument.compute(instrument.settings(values))
        except Exception as e:  # noqa: BLE001 - a formula that fails is the outcome to report
            yield Outcome(
                lesson.id,
                step.id,
                "instrument",
                "computes at set and scenario",
                False,
                f"{type(e).__name__}: {e}",
                time.perf_counter() - t0,
            )
            return
        yield Outcome(
            lesson.id, step.id, "instrument", "computes at set and scenario", True, "", time.perf_counter() - t0
        )
        if step.goal is not None:
            yield self._goal_outcome(lesson, step, step.goal)

    def _computed_predictions(
        self, lesson: Lesson, step: InstrumentStep, predicts: list[PredictStep]
    ) -> Iterator[Outcome]:
        """Each prediction the instrument step reveals, judged where it is judged (its `at`, else the
        step's scenario): some answer must be right there too."""
        for p in predicts:
            try:
                evidence = computed_evidence(step, p)
            except Exception as e:  # noqa: BLE001 - a formula that fails is the outcome to report
                yield Outcome(
                    lesson.id,
                    p.id,
                    "predict",
                    f"{p.compare} computed where it is judged",
                    False,
                    f"{type(e).__name__}: {e}",
                )
                continue
            yield self._predict_outcome(lesson, p, evidence.metrics, p.at, evidence=evidence)

    def _goal_outcome(self, lesson: Lesson, step: InstrumentStep, goal: Goal) -> Outcome:
        """The challenge can be met by some setting the learner may choose, and is not met before
        they move anything."""
        from tutor.instruments import REGISTRY

        t0 = time.perf_counter()
        instrument = REGISTRY[step.instrument]
        what = f"goal {goal.output} {_goal_said(goal)} can be met"
        start = instrument.settings(step.set)
        if goal.reached(instrument.compute(start).outputs):
            return Outcome(
                lesson.id,
                step.id,
                "instrument",
                what,
                False,
                "it is met at the step's starting settings: the challenge completes itself",
                time.perf_counter() - t0,
            )
        best, tried = goal_settings(step)
        if best is not None:
            moved = [f"{k}={v}" for k, v in best.items() if start.get(k) != v]
            return Outcome(
                lesson.id, step.id, "instrument", what, True, f"e.g. {', '.join(moved)}", time.perf_counter() - t0
            )
        free = [c for c in instrument.controls if c.name not in step.fixed]
        movable = ", ".join(c.name for c in free) or "none"
        return Outcome(
            lesson.id,
            step.id,
            "instrument",
            what,
            False,
            f"no setting reaches it ({tried:,} combinations of the controls a learner may move: "
            f"{movable}); every learner would be stuck",
            time.perf_counter() - t0,
        )


def _step_lines(path: Path) -> dict[str, int]:
    """Each step id's line in the lesson file (it loaded a moment ago; {} if it cannot be read now)."""
    from tutor.course.lesson_yaml import parse_yaml

    try:
        data, marks = parse_yaml(path.read_text(encoding="utf-8-sig"), str(path))
    except (OSError, LessonError, UnicodeDecodeError):
        return {}
    steps = data.get("steps") if isinstance(data, dict) else None
    return {
        step["id"]: marks[("steps", i)][0]
        for i, step in enumerate(steps if isinstance(steps, list) else [])
        if isinstance(step, dict) and isinstance(step.get("id"), str) and ("steps", i) in marks
    }


def goal_settings(step: InstrumentStep) -> tuple[dict[str, Any] | None, int]:
    """The settings that meet an instrument step's goal with the fewest controls moved from its
    start (only those a learner may move), or None; and how many combinations were computed."""
    import itertools

    from tutor.instruments import REGISTRY

    instrument = REGISTRY[step.instrument]
    start = instrument.settings(step.set)
    output = step.goal.output if step.goal is not None else None
    free = [c for c in instrument.controls if c.name not in step.fixed and (not c.affects or output in c.affects)]
    # Level by level, one moved control, then two...: the first level with a setting that meets
    # the goal ends the search, so its cost grows with the moves needed, not with the product of
    # every control's options. Within a level, settings go in the order of that product (the
    # first control slowest), so the answer is the first of the fewest-move settings in it.
    # A control whose starting value is not one of its options is always moved (to an option).
    must = {i for i, c in enumerate(free) if start[c.name] not in c.options}
    tried = 0
    for k in range(len(must), len(free) + 1):
        level: list[tuple[tuple[int, ...], dict[str, Any]]] = []
        for moved in itertools.combinations(range(len(free)), k):
            if not must <= set(moved):
                continue
            choices = [[o for o in free[i].options if o != start[free[i].name]] for i in moved]
            for values in itertools.product(*choices):
                settings = {**start, **{free[i].name: v for i, v in zip(moved, values)}}
                order = tuple(c.options.index(settings[c.name]) for c in free)
                level.append((order, settings))
        level.sort(key=lambda item: item[0])
        for _, settings in level:
            tried += 1
            try:
                outputs = instrument.compute_outputs(settings)
            except Exception:  # noqa: BLE001 - a setting that needs a learner's own run: not reachable here
                continue
            if step.goal is not None and step.goal.reached(outputs):
                return settings, tried
    return None, tried


def play_paths(
    paths: list[Path],
    device: str | None,
    full: bool,
    on_outcome: Callable[[Outcome], None],
    pack_problems: Sequence[LessonIssue] = (),
    repeats: int = 1,
) -> list[Outcome]:
    player = Player(device, full, repeats)
    outcomes = []
    for path in paths:
        for outcome in player.play_file(path, pack_problems):
            on_outcome(outcome)
            outcomes.append(outcome)
    return outcomes


def _negations(answer: str, spec: Any, verdict: Any, want: bool) -> str:
    """For a right answer a rubric rejects: the phrases a negation removed, and the words that did."""
    from tutor.checks.text import explain_negations

    if not want or getattr(spec, "rubric", None) is None:
        return ""
    return "".join(f"; {said}" for said in explain_negations(answer, spec.rubric, verdict.missing))


def _unsaid(step: ExerciseStep, mistake: Any, feedback: str) -> str:
    """What the learner's feedback for a mistake lacks: the requirement's own advice, and the
    words the mistake `says` (the cause its run shows); "" when it holds both."""
    requirement = next(r for r in step.requirements if r.id == mistake.fails)
    advice = "" if isinstance(requirement, PythonRequirement) else requirement.feedback  # a grader says its own
    if advice.strip() not in feedback:
        return f"the learner reads {_clip(feedback)!r}, without the requirement's feedback {_clip(advice)!r}"
    if mistake.says and mistake.says not in feedback:
        return f"the learner reads {_clip(feedback)!r}, which does not say {mistake.says!r}"
    return ""


def _clip(text: str, width: int = 160) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _last_line(text: str) -> str:
    """A traceback's last line (the exception), for a one-line result; the whole is in `exercise --json`."""
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _named_changes(step: RunStep, predict: PredictStep) -> list[dict[str, Any]]:
    """The settings `predict` is judged at (`at`, then `against` when it has one), each as the
    values that differ from the step's start ({}: the step's own)."""
    start = step.start_params()
    named = [predict.at, *([predict.against] if predict.against else [])]
    return [{k: v for k, v in settings.items() if start.get(k) != v} for settings in named]


def _key(changed: dict[str, Any]) -> str:
    import json

    return json.dumps(changed, sort_keys=True, default=str)


def _tweak_choices(step: RunStep) -> list[dict[str, Any]]:
    """Each value a learner may switch a run step's settings to, one setting at a time."""
    return [
        {name: value} for name, values in step.tweak.items() for value in values if value != step.tweak_default(name)
    ]


def _with(changed: dict[str, Any]) -> str:
    return "".join(f" with {k}={v}" for k, v in changed.items())


def _bounds(low: float | None, high: float | None) -> str:
    return f"{'' if low is None else f'{low:g}'}..{'' if high is None else f'{high:g}'}"


def _typed(value: float, unit: str) -> str:
    """A number as a learner would type it in this unit (the % sign written, so never ambiguous)."""
    text = f"{value:.10g}"
    return f"{text}{unit}" if unit in ("%", "x") else f"{text} {unit}".strip()


def _number_prediction_allowed(step: PredictStep, spec: NumberAnswer, measured: float) -> tuple[bool, str]:
    """(ok, detail): the measurement, typed as a learner would in the step's unit, is an answer
    the prediction accepts (`spec`, its answer); outside its min..max, the learner who types it is refused."""
    from tutor.checks.number import convert, unit_info

    value = measured * 100 if (step.unit or spec.unit).strip() == "%" else measured  # a share, in percent
    if step.unit and spec.unit and unit_info(step.unit) and unit_info(spec.unit):
        converted = convert(value, step.unit, spec.unit)
        value = value if converted is None else converted
    typed = _typed(value, spec.unit)
    said = checks.parse_number(typed, spec.unit)
    shown = checks.format_number(value, spec.unit)
    if said is None:
        return False, f"measured {shown}, which the prediction cannot read typed as {typed!r}"
    if (spec.min is not None and said < spec.min) or (spec.max is not None and said > spec.max):
        low, high = (None if b is None else checks.format_number(b, spec.unit) for b in (spec.min, spec.max))
        allowed = f"{low} to {high}" if low and high else f"at least {low}" if low else f"at most {high}"
        return False, (
            f"measured {shown}, outside the answers this prediction allows ({allowed}): a learner "
            "who types what was measured is refused; widen its min/max"
        )
    return True, f"measured {shown}, within its min..max"


def _goal_said(goal: Any) -> str:
    parts = []
    if goal.equals is not None:
        parts.append(f"= {goal.equals}")
    if goal.min is not None:
        parts.append(f">= {goal.min:g}")
    if goal.max is not None:
        parts.append(f"<= {goal.max:g}")
    return " and ".join(parts)


def _metric(metrics: Mapping[str, Any], name: str | None) -> Any:
    """The metric a prediction compares with, None when the run did not report it (or it names none)."""
    return None if name is None else metrics.get(name)


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _measurement(row: list[float | None]) -> str:
    median, low, high = row
    return _short(median) + (f" ({_short(low)} to {_short(high)})" if low is not None else "")


def _edges_within(
    spec: Any, texts: list[str], measured: list[list[float | None]], unit: str, guard: float
) -> list[str]:
    """The chosen options' edges that the runs' intervals, widened by the guard, reach across:
    where the noise decides."""
    from tutor.measurement.intervals import widened

    values = [v for row in measured for v in row if v is not None]
    if not values:
        return []
    scale = 100 if unit.strip() == "%" else 1  # shares are measured as fractions, options in percent
    low, high = widened(min(values) * scale, max(values) * scale, guard)
    edges = sorted(
        {e for o in spec.options if o.text in texts for e in (o.min, o.max) if e is not None and low <= e <= high}
    )
    return [checks.format_number(e, unit or getattr(spec, "unit", "")) for e in edges]


def _call(graded: Any) -> str:
    """hit, miss or undecided: what the learner who chose it would be told."""
    return "hit" if graded.correct else "miss" if graded.judged else "undecided"


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def could_not_tell(result: Any) -> bool:
    """A grading that failed only where it could not tell (a speed-up whose interval straddles its
    bar: `judged` False) of a program that ran to its end."""
    missed = [r for r in result.requirements if not r.passed]
    return bool(missed) and result.sandbox.ok and all(not r.judged for r in missed)
