"""Finding lessons: the built-in ones, settings' and --lessons-dir folders, and lesson packs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tutor.course.lesson import LessonError, LessonIssue, LoadedLesson
from tutor.course.loader import load_file

if TYPE_CHECKING:
    from tutor.experiments.packs import PackProblem


def builtin_lessons_dir() -> Path:
    """lessons/ shipped in the wheel (tutor/_lessons) or, in a source checkout, ./lessons."""
    package = Path(__file__).resolve().parents[1]  # tutor/
    packaged = package / "_lessons"
    if packaged.is_dir():
        return packaged
    return package.parent / "lessons"


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


def activate_packs(dirs: list[Path]) -> tuple[list[Path], list[PackProblem]]:
    """Register the experiments of folder packs among `dirs` and of installed packs.

    Returns the installed packs' lesson directories and every pack that failed to load.
    """
    from tutor.experiments import packs

    problems = packs.activate_dirs(dirs)
    installed = packs.activate_installed()
    return installed.lessons_dirs, [*problems, *installed.problems]


def discover(extra_dirs: Iterable[str | Path] = ()) -> Catalog:
    """Load built-in lessons, then each extra directory's (a later id overrides an earlier one)."""
    by_id: dict[str, LoadedLesson] = {}
    broken: list[tuple[Path, LessonError]] = []
    overridden: dict[str, Path] = {}
    builtin = builtin_lessons_dir()
    extra = [Path(d) for d in extra_dirs]
    pack_dirs, pack_problems = activate_packs(extra)
    for problem in pack_problems:
        broken.append((problem.path, LessonError([LessonIssue(str(problem.path), problem.line, 1, problem.message)])))
    for directory in [builtin, *pack_dirs, *extra]:
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.y*ml")):
            try:
                lesson = load_file(path)
            except LessonError as e:
                broken.append((path, e))
                continue
            first = by_id.get(lesson.id)
            if first is not None and first.path.parent == path.parent:
                # Two files of one folder claim one id: which one a learner gets would depend on
                # their names. Keep the first, and say so where list and the home screen look. (A
                # later folder overriding an earlier one is meant: settings' dirs, then --lessons-dir.)
                broken.append(
                    (
                        path,
                        LessonError(
                            [
                                LessonIssue(
                                    str(path),
                                    1,
                                    1,
                                    f"duplicate lesson id {lesson.id!r} (also in {first.path}): this file is "
                                    "not loaded; give one of them another id",
                                )
                            ]
                        ),
                    )
                )
                continue
            if first is not None and directory != builtin:
                overridden[lesson.id] = path
            by_id[lesson.id] = LoadedLesson(lesson, path)
    ordered = sorted(by_id.values(), key=lambda x: (x.lesson.order, x.lesson.id))
    return Catalog(ordered, broken, overridden)
