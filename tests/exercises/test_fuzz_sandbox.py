"""Hostile learner programs through the real sandbox and grader: whatever a program prints, raises or
writes into its working directory, grading gives a verdict of bounded size and never raises. (The
pure-Python properties of the same code, without starting the sandbox, are in
tests/unit/test_fuzz_graders.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


def _run_learner_program(code: str, tmp_path: Path):
    from tutor.exercises.sandbox import run_code

    return run_code(code, tmp_path, timeout=30, memory_mb=1024)


HOSTILE_PROGRAMS = {
    "control-characters": "import sys\nsys.stdout.write('\\x00\\x1b[2J\\x1b]0;t\\x07\\u202e\\r\\x85' * 1000)\n",
    "invalid-utf8": "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\xc3(' * 1000 + b'\\xe2\\x82')\n",
    "flood": "import sys\nsys.stdout.write(('x' * 999 + '\\n') * 3000)\nsys.stdout.write('y' * 2_000_000)\n",
    "huge-exception": "raise RuntimeError('\\u202e\\x1b[31m' + 'é' * 100_000)\n",
    "exit-with-text": "raise SystemExit('\\x00bye')\n",
    "reports-file": (
        "import json, os\nwith open(os.environ['GPUTUTOR_REPORT'], 'a') as f:\n    f.write("
        "'{\"speedup\": NaN}\\n{\"speedup\": \"' + 'x' * 100000 + '\"}\\n[1]\\nnot json\\n')\n"
    ),
    "error-file": 'open(\'.error.json\', \'w\').write(\'{"type": 5, "message": [1], "line": "x"}\')\n',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PROGRAMS))
def test_grading_hostile_learner_programs(name, tmp_path):
    from tutor.course.lesson import ExerciseStep
    from tutor.exercises.grader import grade_exercise

    step = ExerciseStep.model_validate(
        {
            "id": "t",
            "kind": "exercise",
            "starter": "",
            "solution": "",
            "timeout": 30,
            "memory_mb": 1024,
            "requirements": [
                {"type": "output", "id": "out", "pattern": "x{3}", "feedback": "print it"},
                {"type": "source", "id": "src", "pattern": "cuda", "absent": True, "feedback": "no cuda"},
                {"type": "report", "id": "rep", "name": "speedup", "min": 1, "feedback": "report it"},
                {"type": "error", "id": "err", "error": "RuntimeError", "pattern": "é", "feedback": "break it"},
            ],
        }
    )
    result = grade_exercise(step, HOSTILE_PROGRAMS[name], tmp_path)
    assert isinstance(result.passed, bool) and isinstance(result.summary, str)
    assert len(result.sandbox.output) <= 64 * 1024 + 65_536 + 192 * 1024 + 100
    assert result.sandbox.error_message is None or len(result.sandbox.error_message) <= 2000
    json.dumps(result.as_dict())  # `gpututor exercise --json`
    for r in result.requirements:
        assert isinstance(r.passed, bool) and isinstance(r.feedback, str)


@pytest.mark.parametrize("target", [".reports.jsonl", ".error.json"])
def test_deeply_nested_json_written_by_a_learner_program_is_ignored(target, tmp_path):
    """Was: tutor/exercises/sandbox.py:_read_reports/_read_error caught only ValueError from json.loads, so a program
    writing '[' * 100000 to .reports.jsonl or .error.json made run_code raise RecursionError."""
    run = _run_learner_program(f"open({target!r}, 'w').write('[' * 100000)\n", tmp_path)
    assert run.exit_code == 0 and run.reports == {} and run.error_type is None
