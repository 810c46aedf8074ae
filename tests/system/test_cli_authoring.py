"""`gpututor schema` (the lesson format as JSON Schema) and `gpututor new` (a scaffold that lints clean)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from tutor.cli import main
from tutor.course.lesson import ExerciseStep
from tutor.course.lesson_yaml import parse_yaml
from tutor.course.loader import load_file
from tutor.exercises.grader import grade_exercise

ROOT = Path(__file__).resolve().parents[2]
LESSON_FILES = sorted((ROOT / "lessons").glob("*.yaml")) + sorted((ROOT / "tests").glob("*lessons/*.yaml"))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def validator():
    from tutor.cli.instructor import lesson_schema

    schema = lesson_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_schema_prints_json_schema(capsys):
    code, out, _ = run_cli(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    assert schema["$schema"].endswith("2020-12/schema") and schema["title"] == "gpututor lesson"
    assert {"id", "title", "steps"} <= set(schema["required"])
    kinds = {d["properties"]["kind"]["const"] for name, d in schema["$defs"].items() if name.endswith("Step")}
    assert kinds == {"read", "predict", "run", "check", "exercise", "instrument"}


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.stem)
def test_every_lesson_we_ship_validates_against_the_schema(validator, path):
    data, _ = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(data)]
    assert not errors


@pytest.mark.parametrize(
    "text, lint_says",
    [
        ("id: x\ntitle: X\nsteps:\n  - id: a\n    kind: read\n    bdy: typo\n", "bdy"),
        ("id: x\ntitle: X\nsteps:\n  - id: a\n    kind: chek\n", "chek"),
        (
            "id: x\ntitle: X\nsteps:\n  - id: a\n    kind: exercise\n    starter: s\n    solution: s\n"
            "    requirements:\n      - {type: behavior, id: b, check: model_on_device, feedback: f}\n",
            "behavior",
        ),
    ],
)
def test_the_schema_rejects_what_lint_rejects(validator, text, lint_says):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_text

    with pytest.raises(LessonError) as info:  # lint rejects it, naming the mistake...
        load_text(text, "x.yaml")
    assert any(lint_says in issue.message for issue in info.value.issues)
    data, _ = parse_yaml(text, "x.yaml")
    assert list(validator.iter_errors(data))  # ...and so does the schema an editor uses


def test_the_schema_knows_where_a_mistake_is_one(validator):
    """`only_on` (the device kinds where a mistake is one) is in the schema an editor uses."""
    text = (
        "id: x\ntitle: X\nsteps:\n  - id: a\n    kind: exercise\n    starter: s\n    solution: s\n"
        "    requirements:\n      - {type: output, id: o, pattern: a, feedback: f}\n"
        "    mistakes:\n      - {name: m, code: x, fails: o, only_on: %s}\n"
    )
    assert not list(validator.iter_errors(parse_yaml(text % "[cpu, mps]", "x.yaml")[0]))
    assert list(validator.iter_errors(parse_yaml(text % "[gpu]", "x.yaml")[0]))


def test_schema_to_a_file(capsys, tmp_path):
    code, _, err = run_cli(capsys, "schema", "-o", str(tmp_path / "lesson.schema.json"))
    assert code == 0 and "wrote" in err
    assert json.loads((tmp_path / "lesson.schema.json").read_text())["title"] == "gpututor lesson"
    code, _, err = run_cli(capsys, "schema", "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_plain_1e12_is_a_number_as_in_yaml_1_2():
    data, _ = parse_yaml("a: 1e12\nb: '1e3'\nc: -2e-3\nd: 1e\n", "x.yaml")
    assert data == {"a": 1e12, "b": "1e3", "c": -0.002, "d": "1e"}


# ---------------------------------------------------------------- new


def test_new_writes_a_lesson_with_one_step_of_each_kind_that_lints_clean(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "new", "my-first-lesson")
    assert code == 0, err
    path = tmp_path / "my-first-lesson.yaml"
    assert f"gpututor lint {path}" in err
    lesson = load_file(path, grade_examples=True)  # what lint checks, examples included
    assert lesson.id == "my-first-lesson" and lesson.title == "My first lesson"
    assert [s.kind for s in lesson.steps] == ["read", "predict", "run", "check", "exercise", "instrument"]
    assert run_cli(capsys, "lint", str(path))[0] == 0
    code, out, _ = run_cli(capsys, "--lessons-dir", str(tmp_path), "list", "--json")
    assert code == 0 and "my-first-lesson" in out


def test_new_refuses_to_overwrite_and_bad_ids(capsys, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("mine", encoding="utf-8")
    code, _, err = run_cli(capsys, "new", "x", "-o", str(path))
    assert code == 2 and "already exists" in err and path.read_text() == "mine"
    code, _, _ = run_cli(capsys, "new", "x", "-o", str(path), "--force", "--title", 'Say "hi"')
    assert code == 0 and load_file(path).title == "Say 'hi'"
    for bad in ("Bad Id", "x_y", "ünï"):
        code, _, err = run_cli(capsys, "new", bad, "-o", str(tmp_path / "y.yaml"))
        assert code == 2 and "lowercase letters" in err
    assert not (tmp_path / "y.yaml").exists()


@pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")
def test_the_scaffolds_exercise_solution_passes_and_its_mistake_fails(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    assert run_cli(capsys, "new", "scaffold", "-o", str(tmp_path / "s.yaml"))[0] == 0
    step = next(s for s in load_file(tmp_path / "s.yaml").steps if isinstance(s, ExerciseStep))
    assert grade_exercise(step, step.solution, tmp_path / "ok").passed
    mistake = step.mistakes[0]
    result = grade_exercise(step, mistake.code, tmp_path / "bad")
    assert not result.passed and not {r.id: r for r in result.requirements}[mistake.fails].passed
