"""The learner's or instructor's settings: GPUTUTOR_HOME/settings.toml.

    # settings.toml
    lessons_dirs = ["~/course/lessons", "/srv/shared-lessons"]
    gpu_memory_mb = 4096   # on a GPU shared by a class: each run's cap on GPU memory

`lessons_dirs` are loaded after the built-in lessons and before any `--lessons-dir` given on
the command line (a later lesson with the same id overrides an earlier one). A missing file
is no settings; a broken one is reported (path:line:col where TOML says) and ignored, so
the tutor still starts. `gpu_memory_mb` caps each run's GPU memory (see
tutor/experiments/gpu_share.py); $GPUTUTOR_GPU_MEMORY_MB, where set, wins.
"""

from __future__ import annotations

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


@dataclass
class Settings:
    path: Path
    lessons_dirs: list[Path] = field(default_factory=list)
    gpu_memory_mb: int | None = None
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
    # Relative directories are relative to the settings file, not to wherever gpututor started.
    for d in model.lessons_dirs:
        try:
            settings.lessons_dirs.append((path.parent / Path(d).expanduser()).resolve())
        except (ValueError, RuntimeError, OSError) as e:  # "a\0b", "~nosuchuser/x"
            settings.problem = f"{path}: lessons_dirs: {d!r} is not a usable path ({e}); skipped"
    return settings
