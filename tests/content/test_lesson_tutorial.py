"""docs/LESSON_TUTORIAL.md, "your first lesson in ten minutes", and the links of the author docs.

The tutorial is followed to the letter by instructors: these tests do what it says (scaffold with
`gpututor new`, append its steps, lint) and hold every output it shows to what the tools print.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from lesson_text import AUTHOR_DOCS, DOC, ROOT, TUTORIAL, anchor, fenced, headings

from tutor.checks import grade
from tutor.cli import main
from tutor.course.lesson import CheckStep
from tutor.course.loader import lint_file, load_text


@pytest.fixture(scope="module")
def tutorial() -> str:
    return TUTORIAL.read_text(encoding="utf-8")


def _text_blocks(markdown: str, first_line: str) -> list[list[str]]:
    return [
        lines for lang, lines in fenced(markdown) if lang == "text" and lines[:1] and lines[0].startswith(first_line)
    ]


def _scaffold(tmp_path: Path, monkeypatch, capsys) -> Path:
    """Step 1 of the tutorial, as written: `mkdir my-lessons`, then its `gpututor new` line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-lessons").mkdir()
    command = next(
        line
        for lines in _text_blocks(TUTORIAL.read_text(encoding="utf-8"), "mkdir my-lessons")
        for line in lines
        if line.startswith("gpututor new ")
    )
    assert main(command.split()[1:]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return Path("my-lessons/first-steps.yaml")


def _added_steps(tutorial: str) -> list[str]:
    """The step blocks the tutorial adds at the end of `steps:`, in order."""
    return [
        "\n".join(lines)
        for lang, lines in fenced(tutorial)
        if lang == "yaml" and lines[:1] and lines[0].startswith("  - id:")
    ]


def test_the_tutorials_lesson_lints_clean(tutorial, tmp_path, monkeypatch, capsys):
    """The scaffold with every step the tutorial adds: no error, no warning, its check examples graded."""
    path = _scaffold(tmp_path, monkeypatch, capsys)
    added = _added_steps(tutorial)
    path.write_text(
        path.read_text(encoding="utf-8").rstrip("\n") + "\n\n" + "\n\n".join(added) + "\n", encoding="utf-8"
    )
    lesson, warnings = lint_file(path)  # raises LessonError with every problem
    assert warnings == []
    kinds = [s.kind for s in lesson.steps]
    assert kinds[-4:] == ["predict", "run", "check", "exercise"], kinds
    assert main(["lint", str(path)]) == 0


def test_the_tutorials_lint_error_is_what_lint_prints(tutorial, tmp_path, monkeypatch, capsys):
    """Step 4 renames `prompt:` to `promt:` in the `guess` step and shows lint's answer: keep it real."""
    path = _scaffold(tmp_path, monkeypatch, capsys)
    text = path.read_text(encoding="utf-8")
    guess = text.index("  - id: guess")
    typo = text[:guess] + text[guess:].replace("    prompt:", "    promt:", 1)
    path.write_text(typo, encoding="utf-8")
    shown = [lines for lines in _text_blocks(tutorial, "$ gpututor lint my-lessons") if len(lines) > 2]
    assert len(shown) == 1, "the tutorial shows one lint run with an error"
    assert main(["lint", "my-lessons"]) == 2
    out, err = capsys.readouterr()
    assert shown[0][1:] == (out + err).splitlines()


def test_the_tutorials_clean_lint_is_what_lint_prints(tutorial, tmp_path, monkeypatch, capsys):
    path = _scaffold(tmp_path, monkeypatch, capsys)
    assert path.exists()
    clean = [lines for lines in _text_blocks(tutorial, "$ gpututor lint my-lessons") if len(lines) == 2]
    assert len(clean) == 1
    assert main(["lint", "my-lessons"]) == 0
    out, err = capsys.readouterr()
    assert clean[0][1:] == (out + err).splitlines()


def test_the_tutorials_answer_is_graded_as_it_says(tutorial):
    """Step 7 tries the grader on an answer with the first concept and not the second, `waits`."""
    steps = "id: t\ntitle: T\nsteps:\n" + "\n\n".join(_added_steps(tutorial)) + "\n"
    check = next(s for s in load_text(steps, "tutorial.yaml").steps if isinstance(s, CheckStep))
    command = re.sub(r"\s+", " ", " ".join(_text_blocks(tutorial, "gpututor --lessons-dir my-lessons check")[0]))
    assert f" check first-steps {check.id} " in command
    answer = re.search(r'--answer "([^"]+)"', command).group(1)
    result = grade(answer, check.answer)
    assert (result.correct, result.missing) == (False, ["waits"])
    assert check.answer.rubric.require[1].name == "waits"
    assert check.answer.rubric.require[1].missing in result.feedback


# ------------------------------------------------------------------ links and contents


LINKING_DOCS = (*AUTHOR_DOCS, ROOT / "README.md")


@pytest.mark.parametrize("path", LINKING_DOCS, ids=lambda p: p.name)
def test_every_link_to_a_doc_or_a_section_finds_it(path):
    """Relative links name a file that exists; `#anchor` links into these docs name one of its headings."""
    text = path.read_text(encoding="utf-8")
    anchors = {p.resolve(): {anchor(h) for _, h in headings(p.read_text(encoding="utf-8"))} for p in LINKING_DOCS}
    broken = []
    for target, section in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", text):
        if target.startswith(("http://", "https://")):
            continue
        file = (path.parent / target).resolve() if target else path.resolve()
        if not file.exists():
            broken.append(target)
        elif section and file in anchors and section not in anchors[file]:
            broken.append(f"{target}#{section}")
    assert broken == []


def test_the_reference_opens_with_contents_that_reach_every_section():
    """An instructor finds a section from the top: every heading of the reference below the contents
    is linked from them (a new experiment's heading needs its link there)."""
    text = DOC.read_text(encoding="utf-8")
    contents = text.split("## Contents\n", 1)[1].split("\n## ", 1)[0]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = [h for level, h in headings(text) if 2 <= level <= 4 and h != "Contents"]
    assert len(sections) > 40
    assert [h for h in sections if anchor(h) not in linked] == []


def test_readers_are_sent_to_the_tutorial():
    """The README, the reference's opening and the scaffold `gpututor new` writes name the tutorial."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/LESSON_TUTORIAL.md)" in readme
    assert "(LESSON_TUTORIAL.md)" in DOC.read_text(encoding="utf-8").split("## Contents", 1)[0]
    template = (ROOT / "tutor" / "authoring" / "templates" / "new-lesson.yaml").read_text(encoding="utf-8")
    assert "docs/LESSON_TUTORIAL.md" in template.split("\nid:", 1)[0]
