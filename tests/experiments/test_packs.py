"""Lesson packs: a folder with lessons and an experiments.py, or an installed package (entry points)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from tutor import experiments
from tutor.cli import main
from tutor.course.catalog import discover
from tutor.experiments import packs

PACK = Path(__file__).parent / "packs" / "demo-pack"


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    """Each test starts with the built-in experiments only, and leaves them so."""
    monkeypatch.setattr(experiments, "REGISTRY", dict(experiments.REGISTRY))
    monkeypatch.setattr(packs, "_loaded", {})
    monkeypatch.setenv(packs.ENV, "")  # recorded, so what a test loads is forgotten after it
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")


def copy_pack(tmp_path: Path) -> Path:
    target = tmp_path / "demo-pack"
    shutil.copytree(PACK, target)
    return target


def test_a_folder_pack_brings_its_experiment_and_lesson(tmp_path):
    pack = copy_pack(tmp_path)
    catalog = discover([pack])
    assert not catalog.broken
    assert "pack-lesson" in [x.lesson.id for x in catalog.lessons]
    assert "pack-matmul" in experiments.REGISTRY
    assert os.environ[packs.ENV] == str((pack / "experiments.py").resolve())  # for the engine process
    events = list(experiments.start("pack-matmul", {"size": 32}))
    assert events[-1].metrics["gflops"] > 0


def test_lint_and_lesson_test_know_the_packs_experiments(capsys, tmp_path):
    pack = copy_pack(tmp_path)
    assert main(["lint", str(pack)]) == 0
    capsys.readouterr()
    code = main(["lesson", "test", str(pack / "pack-lesson.yaml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "✓ pack-lesson · measure · run: runs pack-matmul (quick)" in out and "gflops = " in out


def test_the_engine_process_runs_a_pack_experiment(tmp_path):
    from tutor.experiments.engine import Engine

    pack = copy_pack(tmp_path)
    discover([pack])  # what the app does before its engine starts
    engine = Engine()
    try:
        messages = list(engine.run("pack-matmul", {"size": 32}, "cpu", lambda: False))
    finally:
        engine.close()
    assert messages[-1][:2] == ("ended", "finished"), messages[-1]
    finished = [m[1] for m in messages if m[0] == "event" and hasattr(m[1], "metrics")]
    assert finished and finished[-1].metrics["seconds"] > 0


def test_a_broken_pack_is_listed_with_its_line_and_the_rest_loads(capsys, tmp_path):
    pack = copy_pack(tmp_path)
    (pack / "experiments.py").write_text("import torch\n\nraise RuntimeError('pack bug')\n", encoding="utf-8")
    catalog = discover([pack])
    [(_path, error)] = [(p, e) for p, e in catalog.broken if p.name == "experiments.py"]
    assert error.issues[0].line == 3 and "RuntimeError: pack bug" in error.issues[0].message
    assert "gpu-training" in [x.lesson.id for x in catalog.lessons]  # the tutor goes on
    assert main(["lint", str(pack)]) == 2
    out = capsys.readouterr().out
    # one error, the import's: not also the knock-on "unknown experiment 'pack-matmul'" of its lesson
    assert out == f"{pack / 'experiments.py'}:3:1: RuntimeError: pack bug\n"


def test_a_pack_cannot_take_a_built_in_experiments_name(tmp_path):
    pack = copy_pack(tmp_path)
    text = (
        (pack / "experiments.py").read_text(encoding="utf-8").replace('Experiment("pack-matmul"', 'Experiment("train"')
    )
    (pack / "experiments.py").write_text(text, encoding="utf-8")
    catalog = discover([pack])
    messages = [i.message for _, e in catalog.broken for i in e.issues]
    assert any("experiment 'train' is already defined" in m for m in messages)
    [issue] = [i for p, e in catalog.broken for i in e.issues if p.name == "experiments.py"]
    assert issue.line == 37  # the line that names it
    assert experiments.REGISTRY["train"].module == "train"  # the built-in one stays


def test_an_installed_pack_through_the_entry_point_group(tmp_path, monkeypatch):
    pack = copy_pack(tmp_path)
    module = tmp_path / "mypack_mod.py"
    module.write_text(
        "from pathlib import Path\n"
        f"LESSONS_DIR = Path({str(pack)!r})\n"
        "import importlib.util\n"
        f"_spec = importlib.util.spec_from_file_location('mypack_exps', {str(pack / 'experiments.py')!r})\n"
        "_mod = importlib.util.module_from_spec(_spec)\n_spec.loader.exec_module(_mod)\n"
        "EXPERIMENTS = _mod.EXPERIMENTS\n",
        encoding="utf-8",
    )
    (pack / "experiments.py").rename(pack / "pack_experiments.py")  # not a folder pack: only the entry point
    text = module.read_text(encoding="utf-8").replace("experiments.py", "pack_experiments.py")
    module.write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [EntryPoint("demo", "mypack_mod", packs.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(
        "importlib.metadata.entry_points", lambda group=None: found if group == packs.ENTRY_POINT_GROUP else []
    )
    catalog = discover([])
    assert not catalog.broken
    assert "pack-lesson" in [x.lesson.id for x in catalog.lessons]
    assert "pack-matmul" in experiments.REGISTRY
    sys.modules.pop("mypack_mod", None)


def test_the_documented_pack_works_as_written(capsys, tmp_path):
    """docs/LESSON_FORMAT.md shows a whole pack: built from the doc alone, it lints and passes."""
    from lesson_text import DOC, fenced

    doc = DOC.read_text(encoding="utf-8")
    pack = tmp_path / "my-pack"
    pack.mkdir()
    for marker in ("my-pack/experiments.py", "my-pack/matmul.yaml"):
        [block] = [lines for _, lines in fenced(doc) if lines[:1] == [f"# {marker}"]]
        (tmp_path / marker).write_text("\n".join(block) + "\n", encoding="utf-8")
    assert main(["lint", str(pack)]) == 0, capsys.readouterr()
    assert main(["lesson", "test", str(pack)]) == 0, capsys.readouterr().out
    assert main(["run", "my-matmul", "--lessons-dir", str(pack), "--set", "size=32", "--json"]) == 0
    finished = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"finished"' in line]
    assert finished and finished[-1]["metrics"]["gflops"] > 0
