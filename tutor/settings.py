"""The learner's or instructor's settings: GPUTUTOR_HOME/settings.toml.

    # settings.toml
    lessons_dirs = ["~/course/lessons", "/srv/shared-lessons"]
    gpu_memory_mb = 4096   # on a GPU shared by a class: each run's cap on GPU memory
    learner = "Ada Lovelace"   # your name on the bundles `gpututor submit` writes
    class_dir = "/srv/class"   # the class folder shared on one machine ($GPUTUTOR_CLASS_DIR wins)

`lessons_dirs` are loaded after the built-in lessons and before any `--lessons-dir` given on
the command line (a later lesson with the same id overrides an earlier one). A missing file
is no settings; a broken one is reported (path:line:col where TOML says) and ignored, so
the tutor still starts. `gpu_memory_mb` caps each run's GPU memory (see
tutor/experiments/gpu_share.py); $GPUTUTOR_GPU_MEMORY_MB, where set, wins. `learner` names the
learner once (asked at the first `gpututor submit` in a terminal and saved here). `class_dir` is
the class folder: submitted bundles go to its submissions/; relative to this file, like
lessons_dirs; $GPUTUTOR_CLASS_DIR, where set, wins (`class_dir()`).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tutor.paths import home_dir

FILE_NAME = "settings.toml"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lessons_dirs: list[str] = []
    gpu_memory_mb: int | None = Field(None, ge=64, le=1 << 24)
    learner: str | None = Field(None, min_length=1, max_length=200)
    class_dir: str | None = Field(None, min_length=1)


@dataclass
class Settings:
    path: Path
    lessons_dirs: list[Path] = field(default_factory=list)
    gpu_memory_mb: int | None = None
    learner: str | None = None
    class_dir: str | None = None  # as written in the file, ~ expanded; relative to the file's folder
    problem: str | None = None  # why the file was ignored, for a warning on screen


def load(path: Path | None = None) -> Settings:
    path = path or home_dir() / FILE_NAME
    settings = Settings(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return settings
    except (OSError, UnicodeDecodeError) as e:
        settings.problem = f"{path}: cannot read it ({getattr(e, 'strerror', None) or e}); settings ignored"
        return settings
    try:
        model = _Model.model_validate(tomllib.loads(text))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        known = ", ".join(_Model.model_fields)
        what = (
            f"unknown setting {where!r} (known: {known})"
            if first["type"] == "extra_forbidden"
            else f"{where}: {first['msg'].lower()}"
        )
        settings.problem = f"{path}: {what}; settings ignored"
        return settings
    except (ValueError, RecursionError) as e:  # TOMLDecodeError; a 5000-digit number; [[[[...
        reason = str(e) if isinstance(e, ValueError) else "nested too deeply"
        settings.problem = f"{path}: not valid TOML ({reason}); settings ignored"
        return settings
    settings.gpu_memory_mb = model.gpu_memory_mb
    settings.learner = (model.learner or "").strip() or None
    if model.class_dir:
        settings.class_dir = str(path.parent / Path(model.class_dir).expanduser())
    # Relative directories are relative to the settings file, not to wherever gpututor started.
    for d in model.lessons_dirs:
        try:
            settings.lessons_dirs.append((path.parent / Path(d).expanduser()).resolve())
        except (ValueError, RuntimeError, OSError) as e:  # "a\0b", "~nosuchuser/x"
            settings.problem = f"{path}: lessons_dirs: {d!r} is not a usable path ({e}); skipped"
    return settings


CLASS_DIR_ENV = "GPUTUTOR_CLASS_DIR"


def class_dir(settings: Settings | None = None) -> Path | None:
    """The class folder: $GPUTUTOR_CLASS_DIR, else settings.toml's `class_dir`, else None."""
    env = os.environ.get(CLASS_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    settings = settings if settings is not None else load()
    return Path(settings.class_dir) if settings.class_dir else None


def save_learner(name: str, path: Path | None = None) -> Path:
    """Write `learner = "name"` into settings.toml, keeping the rest of the file as it is: a line
    that sets it is replaced; otherwise the line goes first (top-level keys precede any table)."""
    path = path or home_dir() / FILE_NAME
    line = f"learner = {json.dumps(name, ensure_ascii=False)}"  # a JSON string is a TOML basic string
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        lines = []
    for i, old in enumerate(lines):
        if old.split("=", 1)[0].strip() == "learner":
            lines[i] = line
            break
    else:
        lines.insert(0, line)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
