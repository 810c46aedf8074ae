"""The class report: every learner's bundle in a folder, summed up for the instructor.

`load_dir(DIR)` reads every `*.json` under DIR (subfolders too) through `bundle.read`: a file that is
not a bundle this tutor reads (cut short, foreign, of a later format, not UTF-8) is named and
skipped, never a traceback. `build(loaded, lessons)` sums the bundles up into a `ClassReport`:

- one `LearnerResult` per learner (two bundles from one learner: the later `submitted_at` is kept,
  and the report says which file was dropped), with the gradebook's scores and the long CSV's rows;
- completion per lesson; the checks most missed first try, with the misconceptions the wrong
  answers matched; each exercise's requirements failed first and how many gradings they took;
- the class's prediction profile per concept, by tutor/course/profile.py's rules: a prediction's
  signed error is log(predicted / measured), the class bias the geometric mean of predicted /
  measured over every learner's scored predictions (exp of the mean signed error), and the spread
  between learners each learner's own bias (min, quartiles, max);
- the machines seen, and the bundles flagged: edited (the digest no longer matches), from another
  version of a lesson file (its content hash differs from the loaded lesson's, or, without the
  lessons, from most bundles'), or measured by an older measurement method.

Pure Python over the bundle model: no torch, no Textual.
"""

from __future__ import annotations

import datetime
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from tutor.checks.answers import ChoiceAnswer
from tutor.checks.choice import resolve
from tutor.classroom.bundle import Bundle, LessonRecord, Unreadable, content_hash, read
from tutor.course import profile
from tutor.course.lesson import Lesson
from tutor.measurement.method import METHOD

FlagKind = Literal["edited", "lesson-version", "older-method"]
ItemKind = Literal["completion", "check", "exercise"]

# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class Skipped:
    """A file under DIR that is not in the report, and why (one sentence)."""

    path: str
    reason: str


@dataclass(frozen=True)
class Superseded:
    """A learner's earlier bundle, dropped for a later one."""

    path: str
    learner: str
    submitted_at: str
    kept: str  # the path of the bundle kept

    @property
    def reason(self) -> str:
        return f"an earlier bundle of {self.learner} (submitted {self.submitted_at}); {self.kept} is later"


@dataclass(frozen=True)
class Flag:
    """A bundle the instructor should look at before trusting its numbers."""

    learner: str
    path: str
    kind: FlagKind
    reason: str


@dataclass(frozen=True)
class GradedItem:
    """A gradebook column: a lesson's completion (points 100), or a check or exercise (points 1)."""

    key: str  # "lesson" (completion) or "lesson/step"
    lesson: str
    step: str  # "" for completion
    kind: ItemKind
    title: str
    points: float


@dataclass(frozen=True)
class StepResult:
    """One row of the long CSV."""

    lesson: str
    step: str  # "" for the lesson's completion row
    kind: str  # lesson | read | predict | run | check | exercise | instrument | step (kind unknown)
    verdict: str
    score: float | None  # None: not scored (a prediction undecided, a read step)


@dataclass(frozen=True)
class LearnerResult:
    learner: str
    path: str
    submitted_at: str
    device: str
    flags: tuple[FlagKind, ...]
    completion: Mapping[str, float]  # lesson id -> share of its steps done, 0..1 (lessons in the bundle)
    scores: Mapping[str, float | None]  # GradedItem.key -> score; None: that lesson is not in the bundle
    results: tuple[StepResult, ...]


@dataclass(frozen=True)
class LessonCompletion:
    lesson: str
    title: str
    steps: int
    learners: int  # bundles that hold this lesson
    finished: int  # learners who completed every step
    mean_share: float  # mean share of steps completed, over `learners`
    class_size: int  # every learner in the report (a lesson some never submitted: learners < class_size)


@dataclass(frozen=True)
class CheckSummary:
    lesson: str
    step: str
    title: str
    answered: int  # learners with at least one attempt
    wrong_first: int  # learners whose first attempt was wrong
    right_eventually: int
    mean_attempts: float
    misconceptions: tuple[tuple[str, int], ...]  # misconception -> wrong answers matching it, most first
    # A choice's wrong options (its text -> learners who chose it, most first): what a wrong choice
    # tells, where no rubric misconception names it
    wrong_options: tuple[tuple[str, int], ...] = ()

    @property
    def missed_share(self) -> float:
        return self.wrong_first / self.answered if self.answered else 0.0

    def wrong_answers_in_words(self, separator: str = ", ") -> str:
        """'grads-reset ×2, "4x" (3 of 5)': misconceptions matched, then the wrong option most learners
        chose (of those who answered), or '–' when nothing wrong was told apart."""
        said = [f"{m} ×{k}" for m, k in self.misconceptions]
        said += [f'"{o}" ({k} of {self.answered})' for o, k in self.wrong_options[:1]]
        return separator.join(said) or "–"


@dataclass(frozen=True)
class RequirementSummary:
    id: str
    title: str
    failed_first: int  # learners whose first grading failed it
    passed_later: int  # of those, learners whose later grading passed it
    mean_tries_to_pass: float | None  # gradings until it passed, over `passed_later` (None: none did)


@dataclass(frozen=True)
class ExerciseSummary:
    lesson: str
    step: str
    title: str
    attempted: int
    passed: int  # the last grading passed
    passed_first: int
    mean_tries_to_pass: float | None  # gradings until the first pass, over learners who passed
    requirements: tuple[RequirementSummary, ...]  # failed first by the most learners first


@dataclass(frozen=True)
class ConceptSummary:
    """The class's prediction profile for one concept (profile.py's signed errors and verdict)."""

    concept: str
    label: str
    learners: int  # learners with at least one scored prediction here
    predictions: int  # every locked prediction with this concept
    scored: int  # hits + misses (an undecided or unmeasured one is not in the factors, as in profile.py)
    with_ratio: int  # scored predictions with a ratio (a zero has none)
    hits: int
    misses: int
    undecided: int
    unmeasured: int  # not measured yet, or measured at other settings
    bias: float | None  # geometric mean of predicted / measured over every learner's predictions
    typical: float | None  # geometric mean of the factor each was off by (1 or more)
    learner_biases: tuple[float, ...]  # each learner's own bias, sorted: the spread between learners
    verdict: str  # within | close | over | under | both | unrated (profile.ConceptProfile.verdict)
    sentence: str  # "The class under-predicts GPU speed-ups x3 (...)"

    @property
    def spread(self) -> tuple[float, float] | None:
        """The lowest and highest learner's bias."""
        return (self.learner_biases[0], self.learner_biases[-1]) if self.learner_biases else None

    @property
    def quartiles(self) -> tuple[float, float] | None:
        """The learners' biases' lower and upper quartile (geometric: interpolated in log)."""
        if not self.learner_biases:
            return None
        logs = [math.log(b) for b in self.learner_biases]
        return math.exp(_quantile(logs, 0.25)), math.exp(_quantile(logs, 0.75))


@dataclass(frozen=True)
class MachineSummary:
    device: str
    device_kind: str
    torch: str
    cuda: str | None
    driver: str | None
    method: int
    mig: bool | None
    learners: int
    hosts: int
    calibrated: int  # learners whose machine has a calibration on file


@dataclass(frozen=True)
class ClassReport:
    directory: str
    files: int  # *.json files found
    learners: tuple[LearnerResult, ...]  # one per learner, by name
    skipped: tuple[Skipped, ...]
    superseded: tuple[Superseded, ...]
    flags: tuple[Flag, ...]
    items: tuple[GradedItem, ...]  # the gradebook's columns, in lesson order
    lessons: tuple[LessonCompletion, ...]
    checks: tuple[CheckSummary, ...]  # most missed first try first
    exercises: tuple[ExerciseSummary, ...]  # fewest passed first try first
    concepts: tuple[ConceptSummary, ...]  # worst calibrated first, as profile.py orders them
    machines: tuple[MachineSummary, ...]  # most learners first
    method: int = METHOD  # the measurement method this gpututor measures with
    lesson_files: Mapping[str, str] = field(default_factory=dict)  # lesson id -> hash compared against

    @property
    def bundles_read(self) -> int:
        return len(self.learners) + len(self.superseded)

    def flagged(self, kind: FlagKind) -> list[Flag]:
        return [f for f in self.flags if f.kind == kind]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["bundles_read"] = self.bundles_read
        for kept, summary in zip(data["superseded"], self.superseded, strict=True):
            kept["reason"] = summary.reason
        for row, concept in zip(data["concepts"], self.concepts, strict=True):
            row["spread"] = concept.spread
            row["quartiles"] = concept.quartiles
        for row, check in zip(data["checks"], self.checks, strict=True):
            row["missed_share"] = check.missed_share
            row["misconceptions"] = [{"misconception": m, "count": n} for m, n in check.misconceptions]
            row["wrong_options"] = [{"option": o, "count": n} for o, n in check.wrong_options]
        return data


# ---------------------------------------------------------------- reading a folder


@dataclass(frozen=True)
class Loaded:
    """What `load_dir` found: every bundle read (duplicates too: `build` keeps the later) and
    every file skipped."""

    directory: Path
    bundles: tuple[tuple[Path, Bundle], ...]
    skipped: tuple[Skipped, ...]
    files: int


def load_dir(directory: Path) -> Loaded:
    """Every `*.json` under `directory`, read as a bundle; a file that is not one is named and skipped."""
    files = sorted(p for p in directory.rglob("*.json") if p.is_file())
    bundles: list[tuple[Path, Bundle]] = []
    skipped: list[Skipped] = []
    for path in files:
        try:
            bundles.append((path, read(path)))
        except Unreadable as e:
            skipped.append(Skipped(str(path), _reason(str(e), path)))
    return Loaded(directory, tuple(bundles), tuple(skipped), len(files))


def _reason(message: str, path: Path) -> str:
    """`bundle.read`'s sentence without the path it starts with (the report names the file)."""
    rest = message.removeprefix(str(path))
    if rest == message:
        return message
    line = re.match(r":(\d+): ", rest)
    return f"line {line[1]}: {rest[line.end() :]}" if line else rest.lstrip(": ")


def _when(bundle: Bundle) -> datetime.datetime:
    """submitted_at as an aware time, so bundles from different time zones order correctly."""
    try:
        at = datetime.datetime.fromisoformat(bundle.submitted_at)
    except ValueError:
        return datetime.datetime.min.replace(tzinfo=datetime.UTC)
    return at if at.tzinfo else at.astimezone()


def latest_per_learner(
    bundles: Iterable[tuple[Path, Bundle]],
) -> tuple[list[tuple[Path, Bundle]], list[Superseded]]:
    """One bundle per learner, the latest submitted (a tie: the one read last), and the ones dropped."""
    kept: dict[str, tuple[Path, Bundle]] = {}
    dropped: list[tuple[Path, Bundle, str]] = []
    for path, bundle in bundles:
        key = learner_key(bundle.learner)
        before = kept.get(key)
        if before is None:
            kept[key] = (path, bundle)
        elif _when(bundle) >= _when(before[1]):
            kept[key] = (path, bundle)
            dropped.append((*before, key))
        else:
            dropped.append((path, bundle, key))
    superseded = [
        Superseded(str(path), bundle.learner.strip(), bundle.submitted_at, str(kept[key][0]))
        for path, bundle, key in dropped
    ]
    return sorted(kept.values(), key=lambda pb: learner_key(pb[1].learner)), superseded


def learner_key(name: str) -> str:
    """Who a bundle's name means: "Ada", "ada " and "ADA" are one learner (Unicode's compatibility
    form, case folded, inner spaces collapsed); the later bundle's spelling is the one shown."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


# ---------------------------------------------------------------- building the report


def build(
    loaded: Loaded | Iterable[tuple[Path, Bundle]],
    lessons: Iterable[tuple[Lesson, Path]] | None = None,
) -> ClassReport:
    """The class report of these bundles; `lessons` (each with its file) gives titles, step kinds,
    every graded step and the lesson files' versions to compare against."""
    if isinstance(loaded, Loaded):
        directory, pairs, skipped, files = str(loaded.directory), loaded.bundles, loaded.skipped, loaded.files
    else:
        pairs = tuple(loaded)
        directory, skipped, files = "", (), len(pairs)
    chosen, superseded = latest_per_learner(pairs)
    known = {lesson.id: (lesson, path) for lesson, path in (lessons or ())}
    lesson_files = {lid: content_hash(path) for lid, (_, path) in known.items() if path.is_file()}
    flags = _flags(chosen, lesson_files)
    order = _lesson_order(chosen, known)
    items = _items(chosen, known, order)
    flagged: dict[str, list[FlagKind]] = {}
    for f in flags:
        flagged.setdefault(f.path, []).append(f.kind)
    learners = tuple(_learner(path, b, items, known, tuple(flagged.get(str(path), ()))) for path, b in chosen)
    return ClassReport(
        directory=directory,
        files=files,
        learners=learners,
        skipped=tuple(skipped),
        superseded=tuple(superseded),
        flags=tuple(flags),
        items=tuple(items),
        lessons=tuple(_completion(chosen, known, order)),
        checks=tuple(_checks(chosen, known, order)),
        exercises=tuple(_exercises(chosen, known, order)),
        concepts=tuple(_concepts(chosen)),
        machines=tuple(_machines(chosen)),
        lesson_files=lesson_files,
    )


def _flags(chosen: list[tuple[Path, Bundle]], lesson_files: dict[str, str]) -> list[Flag]:
    flags: list[Flag] = []
    # Without the lesson file, the version most bundles hold is taken as the lesson's.
    seen: dict[str, Counter[str]] = {}
    for _, b in chosen:
        for rec in b.lessons:
            seen.setdefault(rec.id, Counter())[rec.content_hash] += 1
    majority = {lid: counts.most_common(1)[0][0] for lid, counts in seen.items()}
    for path, b in chosen:
        who = b.learner
        if b.edited:
            flags.append(Flag(who, str(path), "edited", "its digest does not match its content: edited after submit"))
        other = []
        for rec in b.lessons:
            if rec.id in lesson_files:
                if rec.content_hash != lesson_files[rec.id]:
                    other.append(f"{rec.id} (not the loaded lesson file)")
            elif rec.content_hash != majority[rec.id]:
                other.append(f"{rec.id} (not the version most bundles hold)")
        if other:
            flags.append(Flag(who, str(path), "lesson-version", "another version of " + ", ".join(other)))
        older = [
            p.measured.method
            for rec in b.lessons
            for p in rec.predictions
            if p.measured is not None and p.measured.method is not None and p.measured.method < METHOD
        ]
        if b.machine.method < METHOD or older:
            # the machine's method, and each revealed prediction's own run (a run stored before an update)
            said = [f"made by method {b.machine.method}"] if b.machine.method < METHOD else []
            if older:
                judged = f"{len(older)} prediction{'s' if len(older) != 1 else ''} judged on runs"
                said.append(f"{judged} of method {', '.join(str(m) for m in sorted(set(older)))}")
            flags.append(
                Flag(
                    who,
                    str(path),
                    "older-method",
                    f"{'; '.join(said)}, older than this tutor's {METHOD}: its timings are not comparable",
                )
            )
    return flags


def _lesson_order(chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]]) -> list[str]:
    """The lessons any bundle holds: in the catalog's order, then unknown ones as first met."""
    held = list(dict.fromkeys(rec.id for _, b in chosen for rec in b.lessons))
    return [lid for lid in known if lid in held] + [lid for lid in held if lid not in known]


def _records(chosen: list[tuple[Path, Bundle]], lesson_id: str) -> list[tuple[str, LessonRecord]]:
    return [(b.learner, rec) for _, b in chosen for rec in b.lessons if rec.id == lesson_id]


def _title(chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], lesson_id: str) -> str:
    if lesson_id in known:
        return known[lesson_id][0].title
    return next((rec.title for _, rec in _records(chosen, lesson_id)), lesson_id)


def _step_title(known: dict[str, tuple[Lesson, Path]], lesson_id: str, step_id: str) -> str:
    if lesson_id in known:
        try:
            return known[lesson_id][0].step(step_id).title or step_id
        except KeyError:
            pass
    return step_id


def _graded_steps(
    chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], lesson_id: str, kind: str
) -> list[str]:
    """A lesson's check (or exercise) steps: the lesson's own, in order, else every one a bundle holds."""
    if lesson_id in known:
        return [s.id for s in known[lesson_id][0].steps if s.kind == kind]
    records = _records(chosen, lesson_id)
    found = (r.step for _, rec in records for r in (rec.checks if kind == "check" else rec.exercises))
    return list(dict.fromkeys(found))


def _items(
    chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], order: list[str]
) -> list[GradedItem]:
    items: list[GradedItem] = []
    for lid in order:
        title = _title(chosen, known, lid)
        items.append(GradedItem(lid, lid, "", "completion", f"{title}: completion %", 100.0))
        for kind in ("check", "exercise"):
            for step in _graded_steps(chosen, known, lid, kind):
                items.append(GradedItem(f"{lid}/{step}", lid, step, kind, _step_title(known, lid, step), 1.0))
    return items


def _learner(
    path: Path,
    b: Bundle,
    items: list[GradedItem],
    known: dict[str, tuple[Lesson, Path]],
    flags: tuple[FlagKind, ...],
) -> LearnerResult:
    recs = {rec.id: rec for rec in b.lessons}
    completion = {rec.id: _share(rec) for rec in b.lessons}
    scores: dict[str, float | None] = {}
    for item in items:
        rec = recs.get(item.lesson)
        if rec is None:
            scores[item.key] = None
        elif item.kind == "completion":
            scores[item.key] = round(completion[rec.id] * 100, 1)
        elif item.kind == "check":
            scores[item.key] = float(any(c.step == item.step and c.correct for c in rec.checks))
        else:
            scores[item.key] = float(any(e.step == item.step and e.passed for e in rec.exercises))
    return LearnerResult(
        learner=b.learner,
        path=str(path),
        submitted_at=b.submitted_at,
        device=b.machine.device,
        flags=flags,
        completion=completion,
        scores=scores,
        results=tuple(r for rec in b.lessons for r in _results(rec, known.get(rec.id))),
    )


def _share(rec: LessonRecord) -> float:
    return min(1.0, len(set(rec.completed)) / rec.steps) if rec.steps else 0.0


def _results(rec: LessonRecord, known: tuple[Lesson, Path] | None) -> list[StepResult]:
    """The long CSV's rows for one lesson: its completion, then each step in the lesson's order."""
    done = set(rec.completed)
    rows = [StepResult(rec.id, "", "lesson", f"{len(done)}/{rec.steps} steps", round(_share(rec) * 100, 1))]
    predictions = {p.step: p for p in rec.predictions}
    checks = {c.step: c for c in rec.checks}
    exercises = {e.step: e for e in rec.exercises}
    steps: list[tuple[str, str]]
    if known is not None:
        steps = [(s.id, s.kind) for s in known[0].steps]
    else:  # without the lesson file: the steps the bundle names, in the order it names them
        named = [*rec.completed, *predictions, *checks, *exercises]
        kinds = {
            **{s: "predict" for s in predictions},
            **{s: "check" for s in checks},
            **{s: "exercise" for s in exercises},
        }
        steps = [(s, kinds.get(s, "step")) for s in dict.fromkeys(named)]
    for step, kind in steps:
        if step in predictions:
            p = predictions[step]
            score = {"hit": 1.0, "miss": 0.0}.get(p.verdict)
            rows.append(StepResult(rec.id, step, "predict", p.verdict, score))
        elif step in checks:
            c = checks[step]
            verdict = "right first try" if c.first_try else "right" if c.correct else "wrong"
            rows.append(StepResult(rec.id, step, "check", verdict, float(c.correct)))
        elif step in exercises:
            e = exercises[step]
            rows.append(StepResult(rec.id, step, "exercise", "passed" if e.passed else "failed", float(e.passed)))
        elif kind in ("check", "exercise"):
            rows.append(StepResult(rec.id, step, kind, "not tried", 0.0))
        else:
            rows.append(StepResult(rec.id, step, kind, "done" if step in done else "not done", None))
    return rows


def _completion(
    chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], order: list[str]
) -> list[LessonCompletion]:
    rows = []
    for lid in order:
        records = _records(chosen, lid)
        steps = len(known[lid][0].steps) if lid in known else max(rec.steps for _, rec in records)
        shares = [_share(rec) for _, rec in records]
        rows.append(
            LessonCompletion(
                lesson=lid,
                title=_title(chosen, known, lid),
                steps=steps,
                learners=len(records),
                finished=sum(s >= 1.0 for s in shares),
                mean_share=sum(shares) / len(shares) if shares else 0.0,
                class_size=len(chosen),
            )
        )
    return rows


def _checks(
    chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], order: list[str]
) -> list[CheckSummary]:
    rows = []
    for lid in order:
        by_step: dict[str, list[Any]] = {}
        for _, rec in _records(chosen, lid):
            for c in rec.checks:
                if c.attempts:
                    by_step.setdefault(c.step, []).append(c)
        for step, tried in by_step.items():
            wrong = Counter(a.misconception for c in tried for a in c.attempts if not a.correct and a.misconception)
            options = _wrong_options(known, lid, step, tried)
            rows.append(
                CheckSummary(
                    lesson=lid,
                    step=step,
                    title=_step_title(known, lid, step),
                    answered=len(tried),
                    wrong_first=sum(not c.attempts[0].correct for c in tried),
                    right_eventually=sum(c.correct for c in tried),
                    mean_attempts=sum(len(c.attempts) for c in tried) / len(tried),
                    misconceptions=tuple(sorted(wrong.items(), key=lambda mc: (-mc[1], mc[0]))),
                    wrong_options=tuple(sorted(options.items(), key=lambda oc: (-oc[1], oc[0]))),
                )
            )
    rows.sort(key=lambda c: (-c.missed_share, -c.wrong_first, c.lesson, c.step))
    return rows


def _wrong_options(
    known: dict[str, tuple[Lesson, Path]], lesson_id: str, step_id: str, tried: list[Any]
) -> Counter[str]:
    """How many learners chose each wrong option of a choice check, read as the check read them (a
    number, a letter, the text); answers that matched a misconception are counted there instead."""
    if lesson_id not in known:
        return Counter()
    try:
        step = known[lesson_id][0].step(step_id)
    except KeyError:
        return Counter()
    spec = getattr(step, "answer", None)
    if not isinstance(spec, ChoiceAnswer):
        return Counter()
    learners: Counter[str] = Counter()
    for record in tried:  # one record per learner: a learner choosing one option twice counts once
        chosen = {resolve(a.answer, spec) for a in record.attempts if not a.correct and not a.misconception}
        learners.update({_clip(spec.options[i].text) for i in chosen if i is not None})
    return learners


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _exercises(
    chosen: list[tuple[Path, Bundle]], known: dict[str, tuple[Lesson, Path]], order: list[str]
) -> list[ExerciseSummary]:
    rows = []
    for lid in order:
        by_step: dict[str, list[Any]] = {}
        for _, rec in _records(chosen, lid):
            for e in rec.exercises:
                if e.gradings:
                    by_step.setdefault(e.step, []).append(e)
        for step, tried in by_step.items():
            tries = [next(i for i, g in enumerate(e.gradings, 1) if g.passed) for e in tried if _ever(e)]
            rows.append(
                ExerciseSummary(
                    lesson=lid,
                    step=step,
                    title=_step_title(known, lid, step),
                    attempted=len(tried),
                    passed=sum(e.passed for e in tried),
                    passed_first=sum(e.gradings[0].passed for e in tried),
                    mean_tries_to_pass=sum(tries) / len(tries) if tries else None,
                    requirements=tuple(_requirements(tried)),
                )
            )
    rows.sort(key=lambda e: (e.passed_first / e.attempted, e.lesson, e.step))
    return rows


def _ever(exercise: Any) -> bool:
    return any(g.passed for g in exercise.gradings)


def _requirements(tried: list[Any]) -> list[RequirementSummary]:
    titles: dict[str, str] = {}
    failed_first: Counter[str] = Counter()
    tries: dict[str, list[int]] = {}
    for e in tried:
        for r in e.gradings[0].requirements:
            titles.setdefault(r.id, r.title)
            if r.judged and not r.passed:
                failed_first[r.id] += 1
                later = next(
                    (i for i, g in enumerate(e.gradings, 1) if any(x.id == r.id and x.passed for x in g.requirements)),
                    None,
                )
                if later is not None:
                    tries.setdefault(r.id, []).append(later)
    rows = [
        RequirementSummary(
            id=rid,
            title=titles[rid] or rid,
            failed_first=n,
            passed_later=len(tries.get(rid, [])),
            mean_tries_to_pass=sum(tries[rid]) / len(tries[rid]) if tries.get(rid) else None,
        )
        for rid, n in failed_first.items()
    ]
    rows.sort(key=lambda r: (-r.failed_first, r.id))
    return rows


# ---------------------------------------------------------------- the prediction profile


def _concepts(chosen: list[tuple[Path, Bundle]]) -> list[ConceptSummary]:
    by_concept: dict[str, list[tuple[str, Any]]] = {}
    for _, b in chosen:
        for rec in b.lessons:
            for p in rec.predictions:
                if p.concept:
                    by_concept.setdefault(p.concept, []).append((b.learner, p))
    rows = []
    for concept, found in by_concept.items():
        scored = [(who, p) for who, p in found if p.verdict in ("hit", "miss")]
        # profile.py's own ConceptProfile decides the verdict, so a class and a learner read alike.
        same = profile.ConceptProfile(
            concept,
            tuple(
                profile.Scored(
                    profile.Place("", "", p.step, "", concept),
                    p.answer,
                    None,
                    profile.SignedError(
                        _ratio(p.log_error),
                        0 if p.verdict == "hit" or p.log_error is None else (p.log_error > 0) - (p.log_error < 0),
                        p.verdict == "hit",
                        p.feedback,
                    ),
                    0.0,
                    "measured",
                )
                for _, p in scored
            ),
        )
        per_learner: dict[str, list[float]] = {}
        for who, p in scored:
            if (error := _ratio(p.log_error)) is not None:
                per_learner.setdefault(who, []).append(error)
        biases = tuple(sorted(math.exp(sum(es) / len(es)) for es in per_learner.values()))
        verdicts = Counter(p.verdict for _, p in found)
        learners = len({who for who, _ in scored})
        rows.append(
            (
                same.badness() if same.count else (0.0, 0.0),
                ConceptSummary(
                    concept=concept,
                    label=profile.concept_label(concept),
                    learners=learners,
                    predictions=len(found),
                    scored=len(scored),
                    with_ratio=len(same.errors),
                    hits=verdicts["hit"],
                    misses=verdicts["miss"],
                    undecided=verdicts["undecided"],
                    unmeasured=verdicts["unmeasured"],
                    bias=same.bias,
                    typical=same.typical,
                    learner_biases=biases,
                    verdict=same.verdict if same.count else "unrated",
                    sentence=class_sentence(same, learners) if same.count else _nothing_yet(concept),
                ),
            )
        )
    rows.sort(key=lambda r: (-r[0][0], -r[0][1], r[1].concept))
    return [summary for _, summary in rows]


def _ratio(log_error: float | None) -> float | None:
    """A bundle's signed error as profile.py would have it: a NaN, an infinity or a factor past a
    float's range (a hand-edited file) has no ratio, as profile._log_ratio gives none."""
    if log_error is None or not math.isfinite(log_error) or abs(log_error) > profile.MAX_LOG_ERROR:
        return None
    return log_error


def _nothing_yet(concept: str) -> str:
    label = profile.concept_label(concept)
    return f"{label[0].upper()}{label[1:]}: no prediction measured and decided yet"


def class_sentence(concept: profile.ConceptProfile, learners: int) -> str:
    """'The class under-predicts GPU speed-ups x3 (12 predictions by 6 learners, 2 on target)'."""
    n = concept.count
    counted = f"{n} prediction{'s' if n != 1 else ''} by {learners} learner{'s' if learners != 1 else ''}"
    counted += f", {concept.hits} on target"
    verdict, bias, typical, label = concept.verdict, concept.bias, concept.typical, concept.label
    if bias is not None and verdict == "over":
        return f"The class over-predicts {label} {profile.factor_text(bias)} ({counted})"
    if bias is not None and verdict == "under":
        return f"The class under-predicts {label} {profile.factor_text(1 / bias)} ({counted})"
    if verdict == "within":
        return f"The class predicts {label} within {round((profile.WITHIN - 1) * 100)}% ({counted})"
    if typical is not None and verdict == "close":
        return f"The class's predictions of {label} are close, typically off {_percent(typical)} ({counted})"
    if typical is not None and verdict == "both":
        return f"The class's predictions of {label} are off {profile.factor_text(typical)}, either way ({counted})"
    return f"{label[0].upper()}{label[1:]}: {counted} ({profile.ZERO_HAS_NO_FACTOR})"


def _percent(factor: float) -> str:
    return f"{max(1, round((factor - 1) * 100))}%"


def _quantile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    at = (len(sorted_values) - 1) * q
    low = math.floor(at)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (at - low)


# ---------------------------------------------------------------- machines


def _machines(chosen: list[tuple[Path, Bundle]]) -> list[MachineSummary]:
    groups: dict[tuple[Any, ...], list[Bundle]] = {}
    for _, b in chosen:
        m = b.machine
        groups.setdefault((m.device, m.device_kind, m.torch, m.cuda, m.driver, m.method, m.mig), []).append(b)
    rows = [
        MachineSummary(
            device=key[0],
            device_kind=key[1],
            torch=key[2],
            cuda=key[3],
            driver=key[4],
            method=key[5],
            mig=key[6],
            learners=len(bs),
            hosts=len({b.machine.host for b in bs}),
            calibrated=sum(b.machine.calibrated for b in bs),
        )
        for key, bs in groups.items()
    ]
    rows.sort(key=lambda m: (-m.learners, m.device))
    return rows
