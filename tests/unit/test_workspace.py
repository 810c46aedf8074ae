"""tutor/course/workspace.py: the exercise's file, whoever edits it, however they save it."""

from __future__ import annotations

import os
from pathlib import Path

from tutor.course import workspace
from tutor.course.workspace import FileWatch


def test_the_file_lives_under_the_learners_home_by_lesson_and_step(tmp_path: Path) -> None:
    path = workspace.exercise_file(tmp_path, "devices", "practice-basic")
    assert path == tmp_path / "code" / "devices" / "practice-basic.py"
    assert workspace.write_code(path, "x = 1\n") and workspace.read_code(path) == "x = 1\n"
    assert not list(path.parent.glob(".*.tmp"))  # written whole, the temporary file renamed over it


def test_a_save_in_place_is_seen_once(tmp_path: Path) -> None:
    path = tmp_path / "ex.py"
    path.write_text("a = 1\n")
    watch = FileWatch(path, known="a = 1\n")
    assert watch.poll() is None
    path.write_text("a = 2  # edited elsewhere\n")
    assert watch.poll() == "a = 2  # edited elsewhere\n"
    assert watch.poll() is None  # once per change


def test_a_save_by_rename_with_a_swap_file_beside_it_is_seen(tmp_path: Path) -> None:
    """vim and many IDEs write a new file and rename it over the old one; a swap file sits beside."""
    path = tmp_path / "ex.py"
    path.write_text("a = 1\n")
    watch = FileWatch(path, known="a = 1\n")
    (tmp_path / ".ex.py.swp").write_text("swap")
    assert watch.poll() is None
    new = tmp_path / "ex.py~new"
    new.write_text("a = 3\n")
    path.unlink()
    assert watch.poll() is None  # caught between the delete and the rename: nothing to read yet
    os.replace(new, path)
    assert watch.poll() == "a = 3\n"


def test_the_tutors_own_writes_and_unchanged_saves_are_not_changes(tmp_path: Path) -> None:
    path = tmp_path / "ex.py"
    watch = FileWatch(path)
    assert watch.poll() is None  # no file yet
    workspace.write_code(path, "mine\n")
    watch.note("mine\n")
    assert watch.poll() is None
    os.utime(path, ns=(1, 1))  # touched, text unchanged
    assert watch.poll() is None


def test_reset_keeps_a_copy_beside_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ex.py"
    assert workspace.keep_copy(path) is None  # nothing to keep
    path.write_text("my work\n")
    first = workspace.keep_copy(path, now=0)
    second = workspace.keep_copy(path, now=0)
    assert first is not None and second is not None and first != second
    assert first.read_text() == second.read_text() == "my work\n"
    assert first.name.startswith("ex.before-reset-") and first.suffix == ".py"


def test_the_editor_comes_from_visual_then_editor_with_its_arguments() -> None:
    assert workspace.editor_command({"VISUAL": "code --wait", "EDITOR": "vi"}) == ["code", "--wait"]
    assert workspace.editor_command({"VISUAL": "  ", "EDITOR": "nano -l"}) == ["nano", "-l"]
    assert workspace.editor_command({"EDITOR": "'my editor' -x"}) == ["my editor", "-x"]
    assert workspace.editor_command({}) is None
