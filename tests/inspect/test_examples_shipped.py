"""The example scripts `gpututor inspect` offers ship with the package: found as package data, kept
by the wheel's build (hatchling takes every file under tutor/ that git does not ignore). No wheel is
built here: hatchling is not among the test dependencies, and CI fails a skipped test."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from importlib import resources
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("mnist_cnn.py", "char_gpt.py", "corpus.txt")


def test_the_examples_are_package_data():
    examples = resources.files("tutor.inspect").joinpath("examples")
    for name in SHIPPED:
        assert examples.joinpath(name).is_file(), name
    corpus = examples.joinpath("corpus.txt").read_text(encoding="utf-8")
    assert 50_000 <= len(corpus.encode("utf-8")) <= 200_000
    assert len(set(corpus)) < 200  # a character model's vocabulary: prose, not a binary blob


def test_the_wheel_build_keeps_them():
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["hatch"]["build"]["targets"][
        "wheel"
    ]
    assert "tutor" in wheel["packages"]
    assert not {"only-include", "exclude", "artifacts"} & set(wheel), "a wheel filter: check the examples survive it"
    if shutil.which("git") and (ROOT / ".git").exists():  # CI's checkout; a copy without git has no ignores
        paths = [f"tutor/inspect/examples/{name}" for name in SHIPPED]
        ignored = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
        assert ignored.stdout.strip() == "", f"git ignores {ignored.stdout.split()}: hatchling would leave them out"
