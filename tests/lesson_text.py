"""Reading lessons and docs as text, for the tests that hold their words and code to the rules."""

from __future__ import annotations

import re
from pathlib import Path

from tutor.course.lesson import CheckStep, Lesson, PredictStep

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "LESSON_FORMAT.md"
MAX_CODE = 76  # an 80-column terminal, less the panel's border and padding


def all_text(lesson: Lesson) -> str:
    parts = []
    for s in lesson.steps:
        parts += [s.title, s.body]
        if isinstance(s, (PredictStep, CheckStep)):
            parts.append(s.prompt)
        if isinstance(s, CheckStep):
            parts += [s.hint, s.explanation]
    return "\n".join(parts)


def fenced(markdown: str) -> list[tuple[str, list[str]]]:
    """(language, lines) of each fenced block; a fence closes only with one as long."""
    blocks: list[tuple[str, list[str]]] = []
    fence, lang, current = "", "", []
    for line in markdown.splitlines():
        m = re.match(r"^\s*(`{3,})(\S*)\s*$", line)
        if not fence and m:
            fence, lang, current = m.group(1), m.group(2), []
        elif fence and m and m.group(1) == fence and not m.group(2):
            blocks.append((lang, current))
            fence = ""
        elif fence:
            current.append(line)
    assert not fence, "unclosed code block"
    return blocks


def code_blocks(markdown: str) -> list[list[str]]:
    return [lines for _, lines in fenced(markdown)]
