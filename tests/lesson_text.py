"""Reading lessons and docs as text, for the tests that hold their words and code to the rules."""

from __future__ import annotations

import re
from pathlib import Path

from tutor.course.lesson import CheckStep, Lesson, PredictStep

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "LESSON_FORMAT.md"  # the reference
TUTORIAL = ROOT / "docs" / "LESSON_TUTORIAL.md"  # "your first lesson in ten minutes"
AUTHOR_DOCS = (DOC, TUTORIAL)  # every example in either must be valid
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


def headings(markdown: str) -> list[tuple[int, str]]:
    """(level, text) of each Markdown heading outside fenced code (`# my-pack/x.py` in a block is code)."""
    found: list[tuple[int, str]] = []
    fence = ""
    for line in markdown.splitlines():
        m = re.match(r"^\s*(`{3,})(\S*)\s*$", line)
        if m and not fence:
            fence = m.group(1)
        elif m and m.group(1) == fence and not m.group(2):
            fence = ""
        elif not fence and (h := re.match(r"^(#{1,6}) (.+?)\s*$", line)):
            found.append((len(h.group(1)), h.group(2)))
    return found


def anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped (hyphens and underscores
    kept), spaces as hyphens. `ddp-checkpoint`: who saves -> ddp-checkpoint-who-saves."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
