"""Lesson packs: lessons that bring their own experiments.

Two kinds:

- **A folder pack**: a lessons directory (`--lessons-dir`, or `lessons_dirs` in settings.toml)
  that also holds an `experiments.py`. That file is ordinary Python, imported when the
  directory is loaded: it is trusted like a notebook you chose to open, so only use packs
  from people you trust. It defines `EXPERIMENTS`, a list of `tutor.experiments.Experiment`
  whose `run` is the generator function (see docs/LESSON_FORMAT.md, "Lesson packs").
- **An installed pack**: a Python package that declares an entry point in the group
  `gpututor.lessons`, pointing at a module (or object) with `LESSONS_DIR` (the directory of
  its YAML files) and optionally `EXPERIMENTS`.

Pack experiments join the registry under their own names (a built-in name cannot be
taken). The experiment files loaded here are listed in $GPUTUTOR_PACKS, so the engine
process that runs experiments for the TUI loads the same ones.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ENTRY_POINT_GROUP = "gpututor.lessons"
EXPERIMENTS_FILE = "experiments.py"
ENV = "GPUTUTOR_PACKS"  # os.pathsep-separated experiments.py files, for child processes

_loaded: dict[Path, list[str]] = {}  # experiments file -> names it registered


@dataclass
class PackProblem:
    """A pack that could not be loaded: where, and why (shown like a broken lesson file)."""

    path: Path
    line: int
    message: str


@dataclass
class Activated:
    lessons_dirs: list[Path] = field(default_factory=list)  # installed packs' directories
    problems: list[PackProblem] = field(default_factory=list)


def load_experiments_file(path: Path) -> PackProblem | None:
    """Import a pack's experiments.py once and register its EXPERIMENTS; a problem, or None."""
    path = path.resolve()
    if path in _loaded:
        return None
    name = "gpututor_pack_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            return PackProblem(path, 1, "cannot be imported as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the pack's own code: report it, never crash the tutor
        sys.modules.pop(name, None)
        return PackProblem(path, _line_in(e, path), f"{type(e).__name__}: {e}")
    problem = _register(getattr(module, "EXPERIMENTS", None), path)
    if problem is None:
        _remember(path)
    return problem


def _register(found: Any, path: Path) -> PackProblem | None:
    from tutor import experiments

    if found is None:
        return PackProblem(path, 1, "defines no EXPERIMENTS (a list of tutor.experiments.Experiment)")
    if not isinstance(found, (list, tuple)) or not all(isinstance(e, experiments.Experiment) for e in found):
        return PackProblem(
            path, _line_of(path, "EXPERIMENTS"), "EXPERIMENTS must be a list of tutor.experiments.Experiment"
        )
    names = [exp.name for exp in found]
    for exp in found:  # all or none: a half-registered pack would clash with itself when reloaded
        taken = experiments.REGISTRY.get(exp.name)
        if (taken is not None and taken is not exp) or names.count(exp.name) > 1:
            return PackProblem(
                path,
                _line_of(path, repr(exp.name)[1:-1], "EXPERIMENTS"),
                f"experiment {exp.name!r} is already defined; choose another name",
            )
        if exp.run is None:
            return PackProblem(
                path,
                _line_of(path, repr(exp.name)[1:-1], "EXPERIMENTS"),
                f"experiment {exp.name!r} has no run= (the generator function that runs it)",
            )
    for exp in found:
        experiments.register(exp)
    _loaded[path] = names
    return None


def _remember(path: Path) -> None:
    files = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    if str(path) not in files:
        os.environ[ENV] = os.pathsep.join([*files, str(path)])


def _line_of(path: Path, needle: str, after: str = "") -> int:
    """The line where `needle` first appears (after the line holding `after`); 1 if it cannot be found."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return 1
    start = next((i for i, line in enumerate(lines) if after and after in line), 0)
    return next((i + 1 for i, line in enumerate(lines) if i >= start and needle in line), start + 1)


def _line_in(exc: BaseException, path: Path) -> int:
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    for frame in traceback.extract_tb(exc.__traceback__):
        if Path(frame.filename).resolve() == path:
            line = frame.lineno
    return line or 1


def activate_dirs(dirs: list[Path]) -> list[PackProblem]:
    """Load the experiments of every folder pack among these lesson directories."""
    problems = []
    for d in dirs:
        candidate = Path(d) / EXPERIMENTS_FILE
        if candidate.is_file():
            problem = load_experiments_file(candidate)
            if problem:
                problems.append(problem)
    return problems


def activate_installed() -> Activated:
    """Installed packs (entry point group gpututor.lessons): their lesson dirs and experiments."""
    from importlib.metadata import entry_points

    result = Activated()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        where = Path(f"<entry point {ep.name} = {ep.value}>")
        try:
            target = ep.load()
            lessons_dir = getattr(target, "LESSONS_DIR", None)
            if lessons_dir is None:
                result.problems.append(PackProblem(where, 1, "has no LESSONS_DIR"))
                continue
            problem = _register(getattr(target, "EXPERIMENTS", []), where) if where not in _loaded else None
        except Exception as e:  # noqa: BLE001 - someone else's package: report, go on
            result.problems.append(PackProblem(where, 1, f"{type(e).__name__}: {e}"))
            continue
        if problem:
            result.problems.append(problem)
            continue
        result.lessons_dirs.append(Path(lessons_dir))
    return result


def load_from_environment() -> None:
    """In a child process (the engine): load the experiment files the parent loaded."""
    for p in os.environ.get(ENV, "").split(os.pathsep):
        if p:
            load_experiments_file(Path(p))
    activate_installed()
