"""The finding names an exercise's `inspect` requirement may use (tutor/exercises/names.py, read by
lint without importing the inspector) are exactly the ones tutor/inspect/findings.py can report."""

import ast
from pathlib import Path

from tutor.exercises.names import INSPECT_FINDINGS
from tutor.inspect import findings


def test_lint_knows_every_finding_the_inspector_reports_and_no_other():
    tree = ast.parse(Path(findings.__file__).read_text(encoding="utf-8"))
    reported = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "Finding"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert reported == INSPECT_FINDINGS
