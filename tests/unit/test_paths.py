"""Where gpututor writes: the scratch dir clears what killed runs left, torch caches go to ours."""

from __future__ import annotations

import os
import time
from pathlib import Path

import platformdirs
import pytest

from tutor import paths


def test_scratch_dir_clears_files_a_killed_run_left_and_keeps_fresh_ones(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path)
    scratch = paths.scratch_dir()
    old, fresh = scratch / "checkpoint-old.pt", scratch / "checkpoint-fresh.pt"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    assert paths.scratch_dir() == scratch
    assert not old.exists() and fresh.exists()  # a run going on now may be using the fresh one


def test_torch_caches_go_to_the_cache_dir_unless_the_user_chose(monkeypatch, tmp_path):
    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path)
    env = {"TRITON_CACHE_DIR": "/mine"}
    paths.route_torch_caches(env)
    assert env == {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torch" / "inductor"), "TRITON_CACHE_DIR": "/mine"}


def test_the_cache_dir_is_the_users_unless_gpututor_cache_dir_names_one(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTUTOR_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert paths.cache_dir() == tmp_path / "elsewhere"
    monkeypatch.delenv("GPUTUTOR_CACHE_DIR")
    assert paths.cache_dir() == Path(platformdirs.user_cache_dir("gpututor"))


@pytest.mark.parametrize("named", ["", "MNIST", "MNIST/raw"])
def test_a_data_dir_named_at_mnist_or_its_raw_folder_finds_the_root(monkeypatch, tmp_path, named):
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    assert paths.data_dir(tmp_path / named) == (tmp_path, False)
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(tmp_path / named))
    assert paths.data_dir() == (tmp_path, False)


def test_a_data_dir_without_mnist_is_kept_as_named(tmp_path):
    assert paths.data_dir(tmp_path / "elsewhere") == (tmp_path / "elsewhere", False)  # says what it lacks later
