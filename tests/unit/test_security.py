"""Guards that hold by construction, checked over the source: every torch.load refuses
pickled code, YAML is only read safely, and learner code reaches Python only via the sandbox."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *ROOT.glob("tutor/**/*.py"),
    *ROOT.glob("bench/*.py"),
    *ROOT.glob("lessons/*.yaml"),
    *ROOT.glob("docs/*.md"),
    ROOT / "README.md",
    *ROOT.glob("tutor/authoring/templates/**/*"),
]


def _calls(text: str, name: str) -> list[str]:
    """The argument text of every call of `name(...)` (parentheses balanced)."""
    out = []
    for m in re.finditer(re.escape(name) + r"\(", text):
        depth, i = 1, m.end()
        while depth and i < len(text):
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end() : i - 1])
    return out


def test_every_torch_load_passes_weights_only_true():
    found = 0
    for path in SOURCES:
        if not path.is_file():
            continue
        for args in _calls(path.read_text(encoding="utf-8", errors="replace"), "torch.load"):
            found += 1
            assert re.search(r"weights_only\s*=\s*True", args), f"{path.relative_to(ROOT)}: torch.load({args})"
    assert found >= 5  # the checkpoint experiment, its lesson and the exercises do load checkpoints


def test_yaml_is_only_read_with_the_safe_loader():
    for path in ROOT.glob("tutor/**/*.py"):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"yaml\.(load|unsafe_load|full_load|load_all)\(", text), path
        for args in _calls(text, "yaml.compose"):
            assert "SafeLoader" in args or "_FAST_LOADER" in args, f"{path}: yaml.compose({args})"
    lesson = (ROOT / "tutor" / "course" / "lesson_yaml.py").read_text(encoding="utf-8")
    assert re.search(r'_FAST_LOADER = getattr\(yaml, "CSafeLoader", yaml\.SafeLoader\)', lesson)


def test_learner_code_runs_only_in_the_sandbox_process():
    """No exec/eval/compile of text anywhere in the tutor; runpy only in the sandbox child and
    in the probes it runs."""
    for path in ROOT.glob("tutor/**/*.py"):
        text = path.read_text(encoding="utf-8")
        code = re.sub(r'(?s)""".*?"""', "", text)  # docstrings may mention them
        assert not re.search(r"(?<![\w.])(exec|eval)\(", code), path
        if "runpy.run_path(" in code:
            # the sandbox's children: an exercise's, and `gpututor inspect`'s (the learner's own script)
            allowed = ("tutor/exercises/child.py", "tutor/exercises/grader.py", "tutor/inspect/watched_main.py")
            assert path.relative_to(ROOT).as_posix() in allowed, path
