"""A lesson nested too deeply for libyaml's C stack, loaded in a fresh interpreter (a crash there
must not take the test run with it): a positioned issue, never a SIGSEGV."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not getattr(__import__("yaml"), "__with_libyaml__", False), reason="needs libyaml")
@pytest.mark.parametrize("chunk", ["[", "- ", "{a: ", "? "], ids=["flow", "block", "flow-mapping", "complex-key"])
def test_lesson_nested_too_deeply_is_reported_not_a_crash(chunk):
    """Was: tutor/course/lesson.py:_compose with libyaml overflowed the C stack past ~24,700 levels: '[' * 30000
    killed the process (SIGSEGV) instead of the 'YAML nested too deeply' issue. Run in a subprocess."""
    code = (
        "import sys\nfrom tutor.course.lesson import LessonError\nfrom tutor.course.loader import load_text\n"
        f"try:\n    load_text({chunk!r} * 30000, 'deep.yaml')\nexcept LessonError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "nested too deeply" in done.stdout, (done.returncode, done.stderr[-300:])
