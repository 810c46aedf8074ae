"""Where gpututor keeps things: progress/settings (GPUTUTOR_HOME) and the data cache."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "gpututor"


def home_dir() -> Path:
    """Progress database and settings: $GPUTUTOR_HOME, else the user data dir."""
    env = os.environ.get("GPUTUTOR_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    """Downloaded MNIST and other caches."""
    return Path(platformdirs.user_cache_dir(APP))


def data_dir(override: str | os.PathLike[str] | None = None) -> tuple[Path, bool]:
    """(MNIST root, may_download): --data-dir, else $GPUTUTOR_DATA_DIR, else the cache dir.

    Only the cache dir is downloaded into; a directory the user named is read as it is.
    """
    if override:
        return Path(override).expanduser(), False
    env = os.environ.get("GPUTUTOR_DATA_DIR")
    if env:
        return Path(env).expanduser(), False
    return cache_dir() / "data", True
