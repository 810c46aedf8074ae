"""The walls between the processes (docs/ARCHITECTURE.md), checked by importing each side in
a fresh interpreter and looking at what came with it. (A fresh interpreter each: this is the system
tier, not the fast one; the rules read from the source are tests/unit/test_import_boundaries.py.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(imports: str) -> set[str]:
    code = f"import sys\n{imports}\nprint('\\n'.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_answer_grading_is_pure_python():
    """Of the tutor, grading loads only the pure-Python statistics a prediction is decided by."""
    loaded = _loaded_after(
        "import tutor.checks, tutor.checks.grade, tutor.checks.text, tutor.checks.number, "
        "tutor.checks.choice, tutor.checks.predict, tutor.checks.answers"
    )
    assert not _tops(loaded) & {"textual", "torch"}
    ours = {m for m in loaded if m.split(".")[0] == "tutor" and not m.startswith("tutor.checks")}
    assert ours <= {"tutor", "tutor.measurement", "tutor.measurement.intervals"}


@pytest.mark.parametrize(
    "module",
    [
        "tutor.ui.app",
        "tutor.ui.screens.lesson",
        "tutor.ui.screens.review",
        "tutor.ui.screens.inspect",
        "tutor.inspect.launch",
        "tutor.inspect.findings",
        "tutor.inspect.show",
        "tutor.ui.widgets.exercise_step",
        "tutor.ui.widgets.run_panel",
        "tutor.exercises.grader",
        "tutor.exercises.behaviour",
        "tutor.exercises.sandbox",
        "tutor.cli",
    ],
)
def test_the_ui_side_never_imports_torch(module):
    assert "torch" not in _tops(_loaded_after(f"import {module}"))


def test_the_registry_imports_no_torch():
    """Listing and validating experiments (the TUI, `gpututor lint`) must not load torch."""
    loaded = _tops(_loaded_after("import tutor.experiments as e\nassert e.REGISTRY"))
    assert "tutor" in loaded and "torch" not in loaded


def test_experiments_never_import_textual():
    names = sorted(p.stem for p in (ROOT / "tutor" / "experiments").glob("*.py") if p.stem != "__init__")
    loaded = _loaded_after(
        "import tutor.experiments.engine, tutor.exercises.observe, tutor.exercises.probes\n"
        + "\n".join(f"import tutor.experiments.{n}" for n in names)
    )
    assert "textual" not in _tops(loaded) and "torch" in _tops(loaded)


def test_the_command_line_starts_on_the_standard_library_alone():
    """`gpututor --help` is instant, and a ctrl-c in the command's own imports lands inside main()
    (a clean "cancelled"): the entry point loads no third-party package, nor the handlers' modules."""
    loaded = _loaded_after("import tutor.cli")
    assert not _tops(loaded) & {"pydantic", "rich", "textual", "yaml", "torch", "numpy"}
    assert "tutor.checks" not in loaded
    assert not {"tutor.cli.learner", "tutor.cli.run", "tutor.cli.instructor", "tutor.cli.hardware"} & loaded


def test_every_command_s_handler_exists():
    import importlib

    from tutor.cli import HANDLERS

    for module, name in HANDLERS.values():
        assert callable(getattr(importlib.import_module(f"tutor.cli.{module}"), name)), (module, name)
