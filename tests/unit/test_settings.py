"""GPUTUTOR_HOME/settings.toml: lesson directories an instructor sets once; a broken file never stops the tutor."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tutor import settings
from tutor.cli import main

SCAFFOLD_ID = "from-settings"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("GPUTUTOR_HOME", str(path))
    return path


def lesson_dir(capsys, where: Path, lesson_id: str = SCAFFOLD_ID) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    assert main(["new", lesson_id, "-o", str(where / f"{lesson_id}.yaml")]) == 0
    capsys.readouterr()
    return where


def listed(capsys, *argv: str) -> tuple[list[str], str]:
    assert main([*argv, "list", "--json"]) == 0
    out, err = capsys.readouterr()
    return [item["id"] for item in json.loads(out)["lessons"]], err


def test_no_file_is_no_settings(home):
    loaded = settings.load()
    assert loaded.lessons_dirs == [] and loaded.problem is None


def test_lessons_dirs_relative_to_the_file_and_home(capsys, home):
    lesson_dir(capsys, home / "mine")
    (home / "settings.toml").write_text('lessons_dirs = ["mine"]\n', encoding="utf-8")
    assert settings.load().lessons_dirs == [(home / "mine").resolve()]
    ids, err = listed(capsys)
    assert SCAFFOLD_ID in ids and err == ""


def test_a_missing_directory_is_a_warning_not_an_error(capsys, home):
    lesson_dir(capsys, home / "mine")
    (home / "settings.toml").write_text(f'lessons_dirs = ["mine", "{home / "gone"}"]\n', encoding="utf-8")
    ids, err = listed(capsys)
    assert SCAFFOLD_ID in ids
    assert f"warning: {home / 'settings.toml'}: lessons_dirs: {home / 'gone'}: no such directory (skipped)" in err


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'lesson_dirs = ["x"]\n',
            "unknown setting 'lesson_dirs' (known: lessons_dirs, gpu_memory_mb, learner, class_dir)",
        ),
        ("lessons_dirs = [x\n", "not valid TOML"),
        ('lessons_dirs = "x"\n', "lessons_dirs: input should be a valid list"),
        ("\x00\x01", "not valid TOML"),
    ],
)
def test_a_broken_file_is_said_and_ignored(capsys, home, text, expected):
    (home / "settings.toml").write_text(text, encoding="utf-8")
    loaded = settings.load()
    assert loaded.lessons_dirs == [] and expected in loaded.problem and "settings ignored" in loaded.problem
    ids, err = listed(capsys)
    assert "gpu-training" in ids and expected in err  # the tutor goes on with its own lessons


def test_command_line_dirs_come_after_settings_and_win(capsys, home, tmp_path):
    first = lesson_dir(capsys, home / "mine")
    second = lesson_dir(capsys, tmp_path / "cli")
    text = (second / f"{SCAFFOLD_ID}.yaml").read_text(encoding="utf-8")
    (second / f"{SCAFFOLD_ID}.yaml").write_text(
        text.replace('title: "From settings"', 'title: "From the CLI"'), encoding="utf-8"
    )
    (home / "settings.toml").write_text('lessons_dirs = ["mine"]\n', encoding="utf-8")
    assert main(["--lessons-dir", str(second), "list", "--json"]) == 0
    lessons = {x["id"]: x for x in json.loads(capsys.readouterr()[0])["lessons"]}
    assert lessons[SCAFFOLD_ID]["title"] == "From the CLI"
    shutil.rmtree(first)


def test_gpu_memory_mb_is_read_and_a_silly_value_is_said(tmp_path):
    from tutor import settings

    path = tmp_path / "settings.toml"
    path.write_text("gpu_memory_mb = 4096\n", encoding="utf-8")
    assert settings.load(path).gpu_memory_mb == 4096
    path.write_text("gpu_memory_mb = 3\n", encoding="utf-8")
    loaded = settings.load(path)
    assert loaded.gpu_memory_mb is None and "gpu_memory_mb" in loaded.problem
