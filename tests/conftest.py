"""Shared test set-up: a throwaway GPUTUTOR_HOME, the repository's MNIST, the `gpu` marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# CI clones the repository with ../shared beside it; real MNIST lies in shared/data.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
_ENV = ("GPUTUTOR_HOME", "GPUTUTOR_DATA_DIR", "GPUTUTOR_DEVICE", "GPUTUTOR_DEBUG", "NO_COLOR")


@pytest.fixture(autouse=True)
def gpututor_env(tmp_path: Path):
    """No test touches the real user dir; env changes made by the code under test are undone.

    (`gpututor --device/--data-dir` set os.environ for their process, so a `main([...])`
    call inside a test would otherwise leak into the next test.)
    """
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ["GPUTUTOR_HOME"] = str(tmp_path)
    if SHARED_DATA.is_dir():
        os.environ["GPUTUTOR_DATA_DIR"] = str(SHARED_DATA)
    else:  # no MNIST here: an empty dir makes data.load() use the offline fallback at once
        (tmp_path / "no-mnist").mkdir(exist_ok=True)
        os.environ["GPUTUTOR_DATA_DIR"] = str(tmp_path / "no-mnist")
    for k in ("GPUTUTOR_DEVICE", "GPUTUTOR_DEBUG"):
        os.environ.pop(k, None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip @pytest.mark.gpu tests where neither CUDA nor MPS is available."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return  # no torch import for a run that needs none
    import torch

    mps = getattr(torch.backends, "mps", None)
    if torch.cuda.is_available() or (mps is not None and mps.is_available()):
        return
    skip = pytest.mark.skip(reason="needs a CUDA or MPS device (none visible to PyTorch here)")
    for item in gpu_items:
        item.add_marker(skip)
