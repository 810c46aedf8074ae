"""A learner's result bundle: one JSON file that `gpututor submit` writes and `gpututor class` reads.

What it holds, per lesson and step: each locked prediction with what was measured and the verdict,
each check's attempts, each exercise's per-requirement verdicts with the code graded, hints and
solutions seen, instrument moves; plus the machine the runs were measured on and each lesson
file's content hash.

The digest is a SHA-256 over the bundle's content (every field but `digest` itself, as canonical
JSON). A bundle edited by hand, or cut short, no longer matches it and the class report flags it.
It is a check against accidents and casual edits, not proof: a learner who recomputes the digest
after editing can forge a bundle, and the docs say so.

Pure Python and pydantic: no torch, no Textual (the class report reads hundreds of these).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

FORMAT: Literal["gpututor-bundle"] = "gpututor-bundle"
VERSION = 1  # a bundle of a later version is named and skipped by an older `gpututor class`

Verdict = Literal["hit", "miss", "undecided", "unmeasured"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Measured(_Strict):
    """What the run (or instrument) measured for a prediction's metric."""

    value: float | str | bool | None  # the metric as stored (a number, or a choice's text)
    low: float | None = None  # the interval, where the metric reports one
    high: float | None = None
    unit: str = ""
    run_at: str | None = None  # ISO time of the run it came from
    method: int | None = None  # the measurement method's version of that run (measurement/method.py)
    device: str | None = None  # the device that run measured on


class PredictionRecord(_Strict):
    step: str
    concept: str | None = None  # the step's concept tag, for the class's prediction profile
    answer: str  # as typed (a choice: the option's text)
    value: float | None = None  # the number read from it, in the answer's unit
    locked_at: str  # ISO time
    measured: Measured | None = None  # None: nothing measured it yet
    verdict: Verdict = "unmeasured"
    log_error: float | None = None  # log(predicted / measured), profile.py's signed error; None: no ratio
    feedback: str = ""  # what the reveal said


class Attempt(_Strict):
    answer: str
    correct: bool
    feedback: str
    at: str
    misconception: str | None = None  # the rubric misconception the answer matched, if any


class CheckRecord(_Strict):
    step: str
    attempts: list[Attempt]
    correct: bool  # any attempt right
    first_try: bool  # the first attempt right


class RequirementVerdict(_Strict):
    id: str
    title: str = ""
    passed: bool
    judged: bool = True
    feedback: str = ""


class Grading(_Strict):
    """One graded run of the learner's program."""

    at: str
    passed: bool
    requirements: list[RequirementVerdict]
    summary: str = ""


class ExerciseRecord(_Strict):
    step: str
    gradings: list[Grading]  # every graded run, oldest first
    passed: bool  # the last grading passed
    code: str | None = None  # the code of the last grading


class AidsRecord(_Strict):
    step: str
    hints: int = 0  # hint tiers shown
    solution: bool = False


class MovesRecord(_Strict):
    step: str
    instrument: str
    moves: int
    settings: dict[str, Any]  # the last move's
    outputs: dict[str, Any]
    goal_reached: bool = False


class LessonRecord(_Strict):
    id: str
    title: str
    content_hash: str  # sha256 of the lesson file's bytes
    steps: int
    completed: list[str]
    predictions: list[PredictionRecord] = []
    checks: list[CheckRecord] = []
    exercises: list[ExerciseRecord] = []
    aids: list[AidsRecord] = []
    instruments: list[MovesRecord] = []


class MachineRecord(_Strict):
    host: str
    device: str  # e.g. "cuda:0: NVIDIA H200 (139.8 GiB, sm_90, bf16)" or the CPU's
    device_kind: str  # cuda | mps | cpu
    torch: str
    cuda: str | None = None
    driver: str | None = None
    calibrated: bool = False  # a calibration of this device is on file
    method: int  # the measurement method (measurement/method.py) this tutor measures with
    mig: bool | None = None  # an NVIDIA MIG slice, where NVML says


class Bundle(_Strict):
    format: Literal["gpututor-bundle"] = FORMAT
    version: int = VERSION
    gpututor: str  # the tutor's version
    learner: str
    submitted_at: str  # ISO time
    machine: MachineRecord
    lessons: list[LessonRecord]
    digest: str = ""

    def content_digest(self) -> str:
        return digest_of(self.model_dump(mode="json"))

    def sealed(self) -> Bundle:
        """This bundle with its digest filled in."""
        return self.model_copy(update={"digest": self.content_digest()})

    @property
    def edited(self) -> bool:
        """The content no longer matches its digest (edited by hand, or never sealed)."""
        return self.digest != self.content_digest()


def digest_of(data: dict[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != "digest"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class Unreadable(ValueError):
    """A file that is not a bundle this tutor can read; the message names the file and why."""


def dumps(bundle: Bundle) -> str:
    return json.dumps(bundle.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n"


def read(path: Path) -> Bundle:
    """The bundle in `path`. Raises `Unreadable` with one sentence for a truncated, foreign or
    future-format file (never a traceback)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise Unreadable(f"{path}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise Unreadable(f"{path}:{e.lineno}: not JSON ({e.msg}); cut short or not a bundle") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise Unreadable(f'{path}: not a gpututor bundle (no "format": "{FORMAT}")')
    version = data.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise Unreadable(
            f"{path}: a bundle of format version {version!r}, newer than this gpututor reads ({VERSION}): "
            "upgrade gpututor to read it"
        )
    try:
        return Bundle.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Unreadable(f"{path}: {where}: {first['msg'].lower()}") from None


def content_hash(path: Path) -> str:
    """The lesson file's version, as a bundle records it."""
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
