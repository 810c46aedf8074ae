"""The lesson model: a lesson and its steps as pydantic models, and the issues a lesson file can have.

Every error a lesson file can have is reported as `LessonIssue(path, line, col, message)` so
`gpututor lint` can print `path:line:col: message` and the home screen can list a broken lesson
instead of crashing. Loading is `tutor.course.loader`; finding lessons, `tutor.course.catalog`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from tutor.checks.answers import AnswerSpec, Examples

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


class Hinted(StepBase):
    """A step that may give hints in tiers: `hints: [...]`, the next one on each h (`hint:` is one).
    Its subclasses declare the two fields (`hint: str`, `hints: list[str]`) where they read best
    in the format (a field declared here would come before `kind`)."""

    if TYPE_CHECKING:  # the subclasses' fields, said here for the type checker only
        hint: str
        hints: list[str]

    @model_validator(mode="after")
    def _one_way(self) -> Hinted:
        if self.hint and self.hints:
            raise ValueError("give `hints` (a list, shown one at a time) or `hint`, not both")
        return self

    @property
    def tiered_hints(self) -> list[str]:
        """The hints in the order h shows them."""
        return list(self.hints) if self.hints else ([self.hint] if self.hint else [])


class ReadStep(StepBase):
    kind: Literal["read"]
    compare: CodeCompare | None = None


class PredictStep(StepBase):
    kind: Literal["predict"]
    prompt: str
    answer: AnswerSpec
    compare: str | None = None  # metric of the next run step, revealed beside the guess
    unit: str = ""  # unit the compared metric is shown in ("x", "s", "%")
    # The settings it is judged at, over the revealing step's own: a run step's tweaks (only a run
    # at these counts) or an instrument's controls (over its `set`, in place of its `scenario`).
    at: dict[str, Any] = {}
    # Judged as a ratio: `compare` at `at` over `compare` at these settings, each measured (unit "x").
    against: dict[str, Any] = {}

    @property
    def names_settings(self) -> bool:
        """Judged only at the settings it names (`at`, `against`), not at whatever the learner last ran."""
        return bool(self.at or self.against)

    # What the prediction is about ("gpu-speedup", "memory"): the prediction profile
    # (tutor/course/profile.py) sums up the learner's errors per concept.
    concept: str | None = Field(default=None, pattern=ID_PATTERN)


class RunStep(StepBase):
    kind: Literal["run"]
    experiment: str
    params: dict[str, Any] = {}
    # Parameters the learner may switch before a run, each with the values offered:
    # `tweak: {amp: ["off", auto], batch_size: [64, 1024]}`. A value in `params` (one of the
    # offered ones) is the starting choice; otherwise the first value is.
    tweak: dict[str, list[Any]] = {}

    def tweak_default(self, name: str) -> Any:
        values = self.tweak[name]
        return self.params[name] if name in self.params and self.params[name] in values else values[0]

    def start_params(self) -> dict[str, Any]:
        """What a run uses before the learner switches anything: params, each tweak at its start."""
        return {**self.params, **{name: self.tweak_default(name) for name in self.tweak}}

    def made_at(self, params: dict[str, Any], named: dict[str, Any]) -> bool:
        """Was a run with `params` made at the settings `named` (a prediction's `at` or `against`),
        every other setting the learner may switch at its start?"""
        wanted = {**self.start_params(), **named}
        return all(params.get(k) == wanted[k] for k in (*self.tweak, *named))


class Verify(Strict):
    experiment: str
    params: dict[str, Any] = {}
    body: str = ""  # what the run shows, displayed with it


class CheckStep(Hinted):
    kind: Literal["check"]
    prompt: str
    answer: AnswerSpec
    hint: str = ""
    hints: list[str] = []  # in tiers: each h shows the next
    explanation: str = ""  # shown after success or after giving up
    verify: Verify | None = None
    examples: Examples = Examples()
    review: bool = True  # asked again in review mode (false: it only makes sense right after its step)
    # The idea it tests, as a predict step's concept: review asks the checks of the concepts the
    # learner predicts worst (tutor/course/profile.py) first.
    concept: str | None = Field(default=None, pattern=ID_PATTERN)


# ---------------------------------------------------------------- exercises
# Requirements a learner's program must meet, checked by tutor/exercises/grader.py after it ran.


class OutputRequirement(Strict):
    """A regex that must (or, with absent: true, must not) match what the program printed."""

    type: Literal["output"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)  # what the learner reads for it; unset, its id in words
    pattern: str
    absent: bool = False
    feedback: str  # shown when the requirement fails: which mistake, and a hint


class SourceRequirement(Strict):
    """A regex that must (or must not) match the learner's code (comments stripped)."""

    type: Literal["source"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    pattern: str
    absent: bool = False
    feedback: str


class ReportRequirement(Strict):
    """A value the program reported with `report(name=value)`, optionally within bounds."""

    type: Literal["report"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    name: str
    min: float | None = None
    max: float | None = None
    equals: bool | float | str | None = None  # a number matches 938 and 938.0 alike
    feedback: str


class FileRequirement(Strict):
    """A file the program wrote in its working directory. With `checkpoint: true` it must load
    with torch.load(map_location="cpu", weights_only=True); `keys` must be in the dict, and
    `min_accuracy` is the test accuracy an MNISTClassifier with its model_state_dict reaches;
    `best: true` compares it with the weights the program had at each evaluation during the run."""

    type: Literal["file"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    path: str
    checkpoint: bool = False
    keys: list[str] = []
    min_accuracy: float | None = None
    min_accuracy_synthetic: float | None = None  # the bar when MNIST is absent (offline digits)
    best: bool = False  # its weights must be the best the program evaluated (not the last)
    feedback: str


class FunctionRequirement(Strict):
    """A function the learner defined, called by the checker with its own inputs (a named probe)."""

    type: Literal["function"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")  # a Python function name
    probe: str  # a probe in tutor/exercises/grader.py, e.g. "moves_batch_to_device"
    feedback: str


class BehaviourRequirement(Strict):
    """What the program did when it ran, judged whatever its names: `check` is one of the
    behaviour checks in tutor/exercises/behaviour.py (where the model and each batch were, autocast, the
    scaler, synchronised clock reads, torch.save/load calls ...)."""

    type: Literal["behaviour"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    check: str  # e.g. "model_on_device"
    feedback: str  # the detail after the cause the run showed: why it matters and the fix


class ErrorRequirement(Strict):
    """The program must stop with this error (a "break it on purpose" exercise): `error` is the
    exception's type, or a list of types any of which will do (CUDA asked for where there is none
    raises AssertionError in a CPU-only PyTorch, RuntimeError in a CUDA build); `pattern` a regex
    its message must match."""

    type: Literal["error"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    error: str | Annotated[list[str], Field(min_length=1)]  # e.g. RuntimeError, [RuntimeError, AssertionError]
    pattern: str = ""
    feedback: str

    @property
    def errors(self) -> tuple[str, ...]:
        """The exception types that count, in the lesson's order."""
        return (self.error,) if isinstance(self.error, str) else tuple(self.error)


class PythonRequirement(Strict):
    """Judged by the lesson's own Python: `grader: "FILE.py:FUNCTION"`, a file in the lesson's
    folder (or below it). FUNCTION receives the learner's run (tutor/exercises/pack_grader.py
    `LearnerRun`) and returns True/False or (passed, feedback); it runs after the program, in a
    process of its own started by the grading process, stopped after `timeout` seconds."""

    type: Literal["python"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    grader: str = Field(
        json_schema_extra={"pattern": r"^[^:\\]+\.py:[A-Za-z_][A-Za-z0-9_]*$"},
        description="FILE.py:FUNCTION, the file relative to the lesson's folder",
    )
    timeout: float = Field(10.0, gt=0, le=600)  # seconds for the grader, Python's start-up included
    feedback: str  # said when the grader fails the program without words of its own
    # The folder of the lesson file it was loaded from (the loader passes it as validation context);
    # None for a lesson validated from text, whose grader then cannot be found.
    _lesson_dir: Path | None = PrivateAttr(None)

    @field_validator("grader")
    @classmethod
    def _grader_spec(cls, value: str) -> str:
        file, sep, function = value.rpartition(":")
        parts = Path(file).parts
        if not sep or not file.endswith(".py") or not function.isidentifier():
            raise PydanticCustomError(
                "grader", "write FILE.py:FUNCTION, like 'grading.py:check_losses' (a file beside the lesson)"
            )
        if Path(file).is_absolute() or ".." in parts or "\\" in file:
            raise PydanticCustomError(
                "grader",
                "the grader file must be in the lesson's folder or below it, written relative to the lesson with /",
            )
        return value

    @model_validator(mode="after")
    def _locate(self, info: ValidationInfo) -> PythonRequirement:
        where = (info.context or {}).get("lesson_dir")
        if where is not None:
            self._lesson_dir = Path(where)
        return self

    @property
    def grader_file(self) -> str:
        return self.grader.rpartition(":")[0]

    @property
    def grader_function(self) -> str:
        return self.grader.rpartition(":")[2]

    def grader_path(self) -> Path | None:
        """Where the grader file is; None when the lesson was not loaded from a file."""
        return None if self._lesson_dir is None else self._lesson_dir / self.grader_file


class InspectRequirement(Strict):
    """The program watched as `gpututor inspect` watches a script (tutor/inspect/): `finding` (a
    finding's name, tutor/exercises/names.py INSPECT_FINDINGS) must be gone from its report, and
    with `min_speedup` its steps must be measured that many times faster than the starter's, by the
    two runs' intervals (tutor/measurement/intervals.py): a difference the runs cannot tell apart
    yet is said so, not graded."""

    type: Literal["inspect"]
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field("", max_length=80)
    finding: str | None = None
    min_speedup: float | None = Field(None, gt=0)
    feedback: str


Requirement = Annotated[
    OutputRequirement
    | SourceRequirement
    | ReportRequirement
    | FileRequirement
    | FunctionRequirement
    | BehaviourRequirement
    | ErrorRequirement
    | PythonRequirement
    | InspectRequirement,
    Field(discriminator="type"),
]


DeviceKind = Literal["cuda", "mps", "cpu"]  # what tutor.experiments.devices calls a device's kind


class Mistake(Strict):
    """A typical wrong solution and the requirement it must fail (for tests and `lesson test`),
    with the requirement's feedback and, when `says` is given, those words in what the learner reads.
    `only_on`: the device kinds where it is a mistake (float16 autocast is one on a CPU, what a
    CUDA GPU should do); on the others it is not run. Unset: a mistake everywhere."""

    name: str
    code: str
    fails: str  # id of the requirement whose feedback the learner should get
    says: str = ""  # words the learner's feedback must hold: the cause the run shows ("divided by 4")
    only_on: list[DeviceKind] | None = Field(None, min_length=1)

    def skipped_on(self, kind: str) -> str | None:
        """Why this mistake is not run on a device of `kind`; None when it is one there."""
        if self.only_on is None or kind in self.only_on:
            return None
        return f"not a mistake on {kind} (only_on: {', '.join(self.only_on)}): not run"


class Launch(Strict):
    """Run the program under torchrun: `torchrun --standalone --nproc_per_node=NPROC solution.py`,
    each process (rank) in the sandbox with its own memory limit, watched on its own."""

    nproc: int = Field(2, ge=2, le=8)  # processes (ranks) on this machine


class ExerciseStep(Hinted):
    kind: Literal["exercise"]
    starter: str  # code with ____ blanks or TODOs
    # The starter is whole on purpose: the learner runs it and reads what it prints (lesson test then
    # holds it to passing as given, where otherwise a starter that passes leaves nothing to do).
    complete: bool = False
    solution: str
    hint: str = ""
    hints: list[str] = []  # in tiers: each h shows the next
    timeout: float = Field(120.0, gt=0, le=3600)  # wall-clock seconds
    memory_mb: int = Field(4096, ge=256, le=262144)  # per process
    launch: Launch | None = None  # several processes under torchrun (distributed data parallel)
    requirements: list[Requirement] = Field(min_length=1)
    mistakes: list[Mistake] = []

    @property
    def nproc(self) -> int | None:
        """The processes torchrun starts, or None for one plain process."""
        return self.launch.nproc if self.launch is not None else None


# ---------------------------------------------------------------- instruments


class Goal(Strict):
    """A challenge on an instrument step: the step is done once an output reaches this."""

    output: str
    equals: bool | float | str | None = None
    min: float | None = None
    max: float | None = None
    message: str = ""  # said when the goal is reached

    def reached(self, outputs: dict[str, Any]) -> bool:
        value = outputs.get(self.output)
        if value is None:
            return False
        if self.equals is not None and value != self.equals:
            return False
        if self.min is not None and not (isinstance(value, (int, float)) and value >= self.min):
            return False
        return not (self.max is not None and not (isinstance(value, (int, float)) and value <= self.max))


LEDGER_AGGREGATES = ("first", "last", "min", "max", "any")


class InstrumentStep(StepBase):
    kind: Literal["instrument"]
    instrument: str
    set: dict[str, Any] = {}  # starting values of the controls
    scenario: dict[str, Any] = {}  # where a prediction before this step is revealed (over `set`)
    fixed: list[str] = []  # controls the learner cannot move on this step
    goal: Goal | None = None
    # Design-ledger entries: name -> "settings.X" or "outputs.X", optionally prefixed by an
    # aggregate over every move the learner made: "min:outputs.total_gb", "any:outputs.fits".
    ledger: dict[str, str] = {}

    def scenario_settings(self, named: dict[str, Any] | None = None) -> dict[str, Any]:
        """The control values a prediction before this step is revealed at: `named` (its `at` or
        `against`) over `set`, else the step's scenario."""
        return {**self.set, **named} if named else {**self.set, **self.scenario}


Step = Annotated[
    ReadStep | PredictStep | RunStep | CheckStep | ExerciseStep | InstrumentStep, Field(discriminator="kind")
]


class Lesson(Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str
    summary: str = ""
    order: int = 100  # position on the home screen
    next: str | None = None  # id of the lesson that follows
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_step_ids(self) -> Lesson:
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

    def run_after(self, index: int) -> RunStep | InstrumentStep | None:
        """The step a predict step at `index` is revealed by: the next run or instrument step."""
        return next((s for s in self.steps[index + 1 :] if isinstance(s, (RunStep, InstrumentStep))), None)

    def predictions_before(self, index: int) -> list[PredictStep]:
        """The predict steps that the run or instrument step at `index` reveals."""
        return [
            s
            for i, s in enumerate(self.steps[:index])
            if isinstance(s, PredictStep) and self.run_after(i) is self.steps[index]
        ]


@dataclass(frozen=True)
class LessonIssue:
    path: str
    line: int  # 1-based
    col: int  # 1-based
    message: str
    # "warning": the lesson loads and works, but likely not as its author meant (a default
    # tolerance that swallows a band); lint prints it and the lesson still loads.
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        label = "warning: " if self.severity == "warning" else ""
        return f"{self.path}:{self.line}:{self.col}: {label}{self.message}"


class LessonError(Exception):
    def __init__(self, issues: list[LessonIssue]):
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


@dataclass(frozen=True)
class LoadedLesson:
    lesson: Lesson
    path: Path
