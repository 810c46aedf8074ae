"""Where gpututor keeps things: progress/settings (GPUTUTOR_HOME) and the data cache.

Nothing else is written to: learner code runs in scratch dirs under GPUTUTOR_HOME/exercises,
experiments' scratch files and PyTorch's compiler caches go in the cache dir, and files the
user names (`export -o`, `--set path=...`) go where they say.
"""

from __future__ import annotations

import os
import time
from collections.abc import MutableMapping
from pathlib import Path

import platformdirs

APP = "gpututor"


def home_dir() -> Path:
    """Progress database and settings: $GPUTUTOR_HOME, else the user data dir."""
    env = os.environ.get("GPUTUTOR_HOME")
    return Path(env).expanduser() if env else Path(platformdirs.user_data_dir(APP))


def cache_dir() -> Path:
    """Downloaded MNIST, the machine's measured peaks and calibration, scratch files:
    $GPUTUTOR_CACHE_DIR, else the user cache dir."""
    env = os.environ.get("GPUTUTOR_CACHE_DIR")
    return Path(env).expanduser() if env else Path(platformdirs.user_cache_dir(APP))


def data_dir(override: str | os.PathLike[str] | None = None) -> tuple[Path, bool]:
    """(MNIST root, may_download): --data-dir, else $GPUTUTOR_DATA_DIR, else the cache dir.

    Only the cache dir is downloaded into; a directory the user named is read as it is.
    """
    if override:
        return _mnist_root(Path(override).expanduser()), False
    env = os.environ.get("GPUTUTOR_DATA_DIR")
    if env:
        return _mnist_root(Path(env).expanduser()), False
    return cache_dir() / "data", True


def _mnist_root(named: Path) -> Path:
    """torchvision's root (the folder holding MNIST/raw) for a folder someone named: the root
    itself, or the slip of naming MNIST or MNIST/raw inside it."""
    if (named / "MNIST" / "raw").is_dir():
        return named
    if named.name == "MNIST" and (named / "raw").is_dir():
        return named.parent
    if named.name == "raw" and named.parent.name == "MNIST":
        return named.parent.parent
    return named


SCRATCH_KEEP_S = 24 * 3600  # older scratch files were left by a run that was killed


def scratch_dir() -> Path:
    """Files an experiment writes and removes again (a checkpoint to read back). A run killed
    mid-write leaves its file behind: files older than a day are cleared here."""
    path = cache_dir() / "scratch"
    path.mkdir(parents=True, exist_ok=True)
    cutoff = time.time() - SCRATCH_KEEP_S
    for old in path.iterdir():
        try:
            if old.is_file() and old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            pass  # another process's, or gone already
    return path


def route_torch_caches(env: MutableMapping[str, str]) -> None:
    """Point PyTorch's compiler caches into the cache dir, in the environment of a process
    that may import torch (unless the user chose): left alone, `import torch` makes
    $TMPDIR/torchinductor_<user>, and Triton writes to ~/.triton."""
    base = cache_dir() / "torch"
    env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(base / "inductor"))
    env.setdefault("TRITON_CACHE_DIR", str(base / "triton"))
