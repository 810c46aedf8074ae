"""The lock CI installs with (requirements-lock.txt) agrees with pyproject and with what runs."""

from __future__ import annotations

import importlib.metadata as md
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _locked() -> dict[str, str]:
    lines = (ROOT / "requirements-lock.txt").read_text().splitlines()
    pins = [line.split("==") for line in lines if line and not line.startswith("#")]
    return {_name(name): version for name, version in pins}


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    return [Requirement(r) for r in [*project["dependencies"], *extras["test"], *extras["dev"]]]


def test_the_snapshots_meet_the_textual_that_drew_them():
    """The SVG snapshots are Textual 8.2.8's drawing; another Textual draws other pixels, so the
    snapshot tests would fail for a reason that is not ours. The lock pins it, and this is it."""
    assert md.version("textual") == _locked()["textual"], (
        "this Textual is not the one the snapshots were drawn with: pip install -c requirements-lock.txt"
    )


def test_every_requirement_is_locked_at_a_version_it_admits():
    locked = _locked()
    for requirement in _requirements():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = _name(requirement.name)
        assert name in locked, f"{requirement.name} is not in requirements-lock.txt: python .ci/lock.py"
        assert requirement.specifier.contains(locked[name], prereleases=True), (requirement, locked[name])
