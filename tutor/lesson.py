"""Lessons: pydantic models and a YAML loader that keeps line numbers.

Every error a lesson file can have is reported as `LessonIssue(path, line, col, message)`
so `gpututor lint` can print `path:line:col: message` and the home screen can list a
broken lesson instead of crashing. YAML is read with PyYAML's safe loader only.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from checks.spec import AnswerSpec, ChoiceAnswer, Examples, NumberAnswer, TextAnswer
from tutor import experiments

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 50_000  # guards against alias bombs and absurdly large documents
ID_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CodeCompare(Strict):
    """Two versions of a snippet shown side by side; changed lines are marked by a diff."""

    language: str = "python"
    left_title: str = "Before"
    left: str
    right_title: str = "After"
    right: str

    def changed_lines(self) -> tuple[set[int], set[int]]:
        """0-based indexes of lines that differ (left, right), from difflib."""
        a, b = self.left.rstrip("\n").splitlines(), self.right.rstrip("\n").splitlines()
        left: set[int] = set()
        right: set[int] = set()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
            if tag != "equal":
                left.update(range(i1, i2))
                right.update(range(j1, j2))
        return left, right


class StepBase(Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str = ""
    body: str = ""  # markdown shown above the step's interaction


class ReadStep(StepBase):
    kind: Literal["read"]
    compare: CodeCompare | None = None


class PredictStep(StepBase):
    kind: Literal["predict"]
    prompt: str
    answer: AnswerSpec
    compare: str | None = None  # metric of the next run step, revealed beside the guess
    unit: str = ""  # unit the compared metric is shown in ("x", "s", "%")


class RunStep(StepBase):
    kind: Literal["run"]
    experiment: str
    params: dict[str, Any] = {}


class Verify(Strict):
    experiment: str
    params: dict[str, Any] = {}
    body: str = ""  # what the run shows, displayed with it


class CheckStep(StepBase):
    kind: Literal["check"]
    prompt: str
    answer: AnswerSpec
    hint: str = ""
    explanation: str = ""  # shown after success or after giving up
    verify: Verify | None = None
    examples: Examples = Examples()


Step = Annotated[Union[ReadStep, PredictStep, RunStep, CheckStep], Field(discriminator="kind")]


class Lesson(Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str
    summary: str = ""
    order: int = 100  # position on the home screen
    next: str | None = None  # id of the lesson that follows
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_step_ids(self):
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"duplicate step id {step.id!r}")
            seen.add(step.id)
        return self

    def step(self, step_id: str) -> Step:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)

    def index(self, step_id: str) -> int:
        return next(i for i, s in enumerate(self.steps) if s.id == step_id)

    def run_after(self, index: int) -> RunStep | None:
        """The run step a predict step at `index` is revealed by (the next run step)."""
        return next((s for s in self.steps[index + 1 :] if isinstance(s, RunStep)), None)


@dataclass(frozen=True)
class LessonIssue:
    path: str
    line: int  # 1-based
    col: int  # 1-based
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.message}"


class LessonError(Exception):
    def __init__(self, issues: list[LessonIssue]):
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


@dataclass(frozen=True)
class LoadedLesson:
    lesson: Lesson
    path: Path


# ---------------------------------------------------------------- YAML with positions

Pos = tuple[int, int]
Path_ = tuple[Union[str, int], ...]


class _Budget(Exception):
    pass


def _to_python(node: yaml.Node, where: Path_, marks: dict[Path_, Pos], budget: list[int]) -> Any:
    """Construct plain Python from a composed YAML node, recording each value's position."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _Budget
    marks[where] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            key = str(key) if not isinstance(key, str) else key
            marks[(*where, key, "__key__")] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = _to_python(value_node, (*where, key), marks, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, (*where, i), marks, budget) for i, v in enumerate(node.value)]
    return _scalar(node)


_constructor = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.Node) -> Any:
    try:
        return _constructor.construct_object(node, deep=True)
    except yaml.YAMLError:
        return node.value


def parse_yaml(text: str, path: str) -> tuple[Any, dict[Path_, Pos]]:
    """Parse one YAML document safely; raise LessonError with positions on failure."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        msg = " ".join(x for x in (e.context, e.problem) if x) or "invalid YAML"
        raise LessonError([LessonIssue(path, line, col, f"YAML syntax: {msg}")]) from None
    except yaml.YAMLError as e:
        raise LessonError([LessonIssue(path, 1, 1, f"YAML: {e}")]) from None
    except RecursionError:
        raise LessonError([LessonIssue(path, 1, 1, "YAML nested too deeply")]) from None
    if node is None:
        raise LessonError([LessonIssue(path, 1, 1, "empty file: a lesson needs id, title and steps")])
    marks: dict[Path_, Pos] = {}
    try:
        data = _to_python(node, (), marks, [MAX_NODES])
    except _Budget:
        raise LessonError(
            [LessonIssue(path, 1, 1, f"document too large (more than {MAX_NODES} values, or an alias bomb)")]
        ) from None
    except RecursionError:
        raise LessonError([LessonIssue(path, 1, 1, "YAML nested too deeply")]) from None
    return data, marks


def _position(marks: dict[Path_, Pos], loc: Iterable[Any]) -> Pos:
    """Best position for a pydantic error location: the deepest recorded prefix."""
    loc = tuple(loc)
    for n in range(len(loc), -1, -1):
        prefix = loc[:n]
        # an unknown or missing key: point at the key itself where we have it
        if (*prefix, "__key__") in marks and n == len(loc):
            return marks[(*prefix, "__key__")]
        if prefix in marks:
            return marks[prefix]
    return (1, 1)


def _clean_loc(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """Drop pydantic's union tags (e.g. 'read', 'choice') so a location matches the YAML path."""
    out: list[Any] = []
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and isinstance(part, str) and part not in cur and part.islower():
            # could be a discriminator tag or a missing/unknown key; keep only if it's a plain key name
            if part in ("read", "predict", "run", "check", "choice", "number", "text"):
                continue
            out.append(part)
            cur = None
        else:
            out.append(part)
            cur = None
    return tuple(out)


def _friendly(err: dict[str, Any], loc: tuple[Any, ...]) -> str:
    where = ".".join(str(p) for p in loc) or "lesson"
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return f"unknown key {loc[-1]!r}" + _suggest_key(err, loc)
    if kind == "missing":
        return f"missing required key {loc[-1]!r}"
    if kind == "union_tag_invalid":
        ctx = err.get("ctx", {})
        return f"{where}: unknown kind {ctx.get('tag')!r}; expected one of {ctx.get('expected_tags')}"
    if kind == "union_tag_not_found":
        return f"{where}: missing the discriminator key ({err.get('ctx', {}).get('discriminator')})"
    msg = err.get("msg", "invalid value")
    return f"{where}: {msg}"


def _suggest_key(err: dict[str, Any], loc: tuple[Any, ...]) -> str:
    key = str(loc[-1])
    known = {
        *Lesson.model_fields,
        *ReadStep.model_fields,
        *PredictStep.model_fields,
        *RunStep.model_fields,
        *CheckStep.model_fields,
        *CodeCompare.model_fields,
        *Verify.model_fields,
        *ChoiceAnswer.model_fields,
        *NumberAnswer.model_fields,
        *TextAnswer.model_fields,
    }
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _semantic_issues(lesson: Lesson, marks: dict[Path_, Pos], path: str) -> list[LessonIssue]:
    """Checks beyond the schema: experiments exist, params fit, compared metrics exist."""
    issues: list[LessonIssue] = []

    def add(loc: tuple[Any, ...], message: str) -> None:
        line, col = _position(marks, loc)
        issues.append(LessonIssue(path, line, col, message))

    def check_experiment(loc: tuple[Any, ...], name: str, params: dict[str, Any]) -> None:
        try:
            exp = experiments.get(name)
        except experiments.UnknownExperiment as e:
            close = difflib.get_close_matches(name, sorted(experiments.REGISTRY), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            add((*loc, "experiment"), f"{e.args[0]}{hint}")
            return
        try:
            exp.make_params(params)
        except ValidationError as e:
            for err in e.errors():
                key = err["loc"][0] if err["loc"] else None
                ploc = (*loc, "params", key) if key is not None else (*loc, "params")
                if err["type"] == "extra_forbidden":
                    close = difflib.get_close_matches(str(key), sorted(exp.params.model_fields), n=1)
                    hint = f" (did you mean {close[0]!r}?)" if close else ""
                    add(ploc, f"experiment {name!r} has no parameter {key!r}{hint}; "
                        f"it takes: {', '.join(exp.params.model_fields)}")
                else:
                    add(ploc, f"params.{key}: {err['msg']}")

    for i, step in enumerate(lesson.steps):
        loc = ("steps", i)
        if isinstance(step, RunStep):
            check_experiment(loc, step.experiment, step.params)
        elif isinstance(step, CheckStep) and step.verify is not None:
            check_experiment((*loc, "verify"), step.verify.experiment, step.verify.params)
        elif isinstance(step, PredictStep) and step.compare:
            run = lesson.run_after(i)
            if run is None:
                add((*loc, "compare"), f"compares {step.compare!r} but no run step follows it")
            elif run.experiment in experiments.REGISTRY:
                metrics = experiments.REGISTRY[run.experiment].metrics
                if step.compare not in metrics:
                    add((*loc, "compare"), f"experiment {run.experiment!r} (step {run.id!r}) has no metric "
                        f"{step.compare!r}; it reports: {', '.join(metrics)}")
    return issues


def load_text(text: str, path: str = "<lesson>") -> Lesson:
    data, marks = parse_yaml(text, path)
    if not isinstance(data, dict):
        raise LessonError([LessonIssue(path, 1, 1, "a lesson file must be a mapping with id, title and steps")])
    try:
        lesson = Lesson.model_validate(data)
    except ValidationError as e:
        issues = []
        for err in e.errors():
            loc = _clean_loc(tuple(err["loc"]), data)
            line, col = _position(marks, loc)
            issues.append(LessonIssue(path, line, col, _friendly(err, loc)))
        dup = re.search(r"duplicate step id '([^']+)'", str(e))
        if dup:
            for i, s in enumerate(data.get("steps") or []):
                if isinstance(s, dict) and s.get("id") == dup.group(1):
                    line, col = _position(marks, ("steps", i, "id"))
            issues = [x for x in issues if "duplicate step id" not in x.message] + [
                LessonIssue(path, line, col, f"duplicate step id {dup.group(1)!r}")
            ]
        raise LessonError(_dedupe(issues)) from None
    issues = _semantic_issues(lesson, marks, path)
    if issues:
        raise LessonError(issues)
    return lesson


def _dedupe(issues: list[LessonIssue]) -> list[LessonIssue]:
    seen: set[tuple[int, int, str]] = set()
    out = []
    for i in issues:
        key = (i.line, i.col, i.message)
        if key not in seen:
            seen.add(key)
            out.append(i)
    return out


def load_file(path: str | Path) -> Lesson:
    p = Path(path)
    shown = str(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise LessonError([LessonIssue(shown, 1, 1, f"cannot read file: {e.strerror or e}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise LessonError([LessonIssue(shown, 1, 1, f"file too large ({len(raw)} bytes; limit {MAX_FILE_BYTES})")])
    if b"\x00" in raw:
        raise LessonError([LessonIssue(shown, 1, 1, "binary file: a lesson must be UTF-8 YAML text")])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise LessonError(
            [LessonIssue(shown, line, 1, "not UTF-8 text: save the lesson file as UTF-8")]
        ) from None
    return load_text(text, shown)


# ---------------------------------------------------------------- discovery


def builtin_lessons_dir() -> Path:
    """lessons/ shipped in the wheel (tutor/_lessons) or, in a source checkout, ./lessons."""
    here = Path(__file__).resolve().parent
    packaged = here / "_lessons"
    if packaged.is_dir():
        return packaged
    return here.parent / "lessons"


@dataclass(frozen=True)
class Catalog:
    """Every lesson found, in home-screen order, plus the files that failed to load."""

    lessons: list[LoadedLesson]
    broken: list[tuple[Path, LessonError]]
    overridden: dict[str, Path]  # built-in lesson id -> file that replaced it

    def get(self, lesson_id: str) -> LoadedLesson:
        for item in self.lessons:
            if item.lesson.id == lesson_id:
                return item
        known = ", ".join(x.lesson.id for x in self.lessons) or "none"
        raise KeyError(f"unknown lesson {lesson_id!r}; available: {known}")


def discover(extra_dirs: Iterable[str | Path] = ()) -> Catalog:
    """Load built-in lessons, then each extra directory's (a later id overrides an earlier one)."""
    by_id: dict[str, LoadedLesson] = {}
    broken: list[tuple[Path, LessonError]] = []
    overridden: dict[str, Path] = {}
    builtin = builtin_lessons_dir()
    for directory in [builtin, *map(Path, extra_dirs)]:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.y*ml")):
            try:
                lesson = load_file(path)
            except LessonError as e:
                broken.append((path, e))
                continue
            if lesson.id in by_id and directory != builtin:
                overridden[lesson.id] = path
            by_id[lesson.id] = LoadedLesson(lesson, path)
    ordered = sorted(by_id.values(), key=lambda x: (x.lesson.order, x.lesson.id))
    return Catalog(ordered, broken, overridden)
