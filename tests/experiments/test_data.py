"""tutor.experiments.data: MNIST as resident tensors, the notebook's DataLoader path, the offline fallback."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tutor.experiments import data

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_mnist = pytest.mark.skipif(
    not (SHARED_DATA / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file(), reason="real MNIST not present"
)


@pytest.fixture
def mnist_env(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(SHARED_DATA))


@pytest.fixture(scope="module")
def empty_dir(tmp_path_factory) -> Path:
    # One directory for the module, so the synthetic set is generated once (cached by root).
    return tmp_path_factory.mktemp("no-mnist")


def test_normalisation_is_the_notebooks():
    assert (data.MEAN, data.STD) == (0.1307, 0.3081)


@needs_mnist
def test_load_mnist_shapes_and_source(mnist_env):
    d = data.load("cpu", train_samples=1000, test_samples=300)
    assert d.source == "MNIST" and d.fallback_reason is None
    assert str(SHARED_DATA) in d.description
    assert d.train_x.shape == (1000, 1, 28, 28) and d.train_x.dtype == torch.float32
    assert d.test_x.shape == (300, 1, 28, 28)
    assert d.train_y.dtype == torch.int64 and set(d.train_y.tolist()) == set(range(10))
    # normalised: background pixels map to -MEAN/STD
    assert d.train_x.min().item() == pytest.approx(-data.MEAN / data.STD, abs=1e-5)
    full = data.load("cpu")
    assert full.train_x.shape[0] == 60000 and full.test_x.shape[0] == 10000


@needs_mnist
def test_resident_and_loader_paths_see_identical_pixels(mnist_env):
    d = data.load("cpu", train_samples=64)
    train_loader, _, info = data.loaders(64, train_samples=64)
    assert info.source == "MNIST"
    ds = train_loader.dataset
    for i in (0, 17, 63):
        x, y = ds[i]
        assert torch.allclose(x, d.train_x[i], atol=1e-6)
        assert y == d.train_y[i].item()


@needs_mnist
def test_loader_batches(mnist_env):
    train_loader, test_loader, _ = data.loaders(128, train_samples=300, test_samples=200)
    xb, yb = next(iter(train_loader))
    assert xb.shape == (128, 1, 28, 28) and xb.dtype == torch.float32 and yb.dtype == torch.int64
    assert len(train_loader) == math.ceil(300 / 128)
    assert sum(y.shape[0] for _, y in test_loader) == 200


def test_batches_cover_every_sample_once():
    x = torch.arange(10).float().view(10, 1)
    y = torch.arange(10)
    got = list(data.batches(x, y, 4, generator=torch.Generator().manual_seed(0)))
    assert [b[0].shape[0] for b in got] == [4, 4, 2]
    seen = torch.cat([b[1] for b in got])
    assert sorted(seen.tolist()) == list(range(10))
    assert seen.tolist() != list(range(10))  # shuffled
    for xb, yb in got:  # x and y stay paired
        assert torch.equal(xb.view(-1).long(), yb)


def test_batches_same_seed_same_order_and_unshuffled():
    x, y = torch.randn(50, 3), torch.arange(50)
    a = [b[1] for b in data.batches(x, y, 8, generator=torch.Generator().manual_seed(3))]
    b = [b[1] for b in data.batches(x, y, 8, generator=torch.Generator().manual_seed(3))]
    assert all(torch.equal(p, q) for p, q in zip(a, b))
    plain = torch.cat([b[1] for b in data.batches(x, y, 8, shuffle=False)])
    assert plain.tolist() == list(range(50))


@needs_mnist
def test_describe_source_present(mnist_env):
    text = data.describe_source()
    assert str(SHARED_DATA) in text and "present" in text


def test_describe_source_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(tmp_path))
    text = data.describe_source()
    assert "not found" in text and str(tmp_path) in text and "synthetic" in text


def test_describe_source_imports_no_torch(tmp_path):
    code = "import sys, tutor.experiments.data as d; d.describe_source(); print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"GPUTUTOR_DATA_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_fallback_is_named_with_reason(monkeypatch, empty_dir):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(empty_dir))
    d = data.load("cpu")
    assert d.source == "synthetic digits"
    assert d.description.startswith("synthetic digits")
    assert d.fallback_reason and "not found" in d.fallback_reason and str(empty_dir) in d.fallback_reason
    assert d.train_x.shape == (60000, 1, 28, 28) and d.test_x.shape == (10000, 1, 28, 28)
    assert torch.bincount(d.train_y, minlength=10).tolist() == [6000] * 10
    assert data.source().source == "synthetic digits"


def test_fallback_loaders_go_through_pil(monkeypatch, empty_dir):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(empty_dir))
    d = data.load("cpu", train_samples=32)
    train_loader, test_loader, info = data.loaders(16, train_samples=32, test_samples=40)
    assert info.source == "synthetic digits" and info.fallback_reason
    x0, y0 = train_loader.dataset[5]
    assert torch.allclose(x0, d.train_x[5], atol=1e-6) and y0 == d.train_y[5].item()
    assert sum(y.shape[0] for _, y in test_loader) == 40


def test_synthetic_digits_deterministic_and_not_noise():
    x1, y1 = data.synthetic_digits(2000, seed=7)
    x2, y2 = data.synthetic_digits(2000, seed=7)
    assert torch.equal(x1, x2) and torch.equal(y1, y2)
    assert x1.dtype == torch.uint8 and x1.shape == (2000, 28, 28)
    ink = x1.float() / 255
    assert 0.05 < ink.mean().item() < 0.35  # mostly background, like MNIST
    assert (ink[:, :2, :] < 0.1).float().mean() > 0.95  # empty border rows, as MNIST's
    # Classes look different: class-mean images are far apart compared with noise.
    means = torch.stack([ink[y1 == c].mean(0) for c in range(10)])
    dists = torch.cdist(means.view(10, -1), means.view(10, -1))
    assert dists[~torch.eye(10, dtype=torch.bool)].min() > 2.0  # uniform noise gives ~0.8
    x3, _ = data.synthetic_digits(2000, seed=8)
    assert not torch.equal(x1, x3)


def test_failed_download_falls_back_with_the_reason(monkeypatch, tmp_path, capsys):
    from torchvision import datasets

    from tutor import paths

    monkeypatch.delenv("GPUTUTOR_DATA_DIR", raising=False)
    monkeypatch.setattr(paths, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(datasets.MNIST, "mirrors", ["http://127.0.0.1:9/"])  # nothing listens there
    info = data.source()
    assert info.source == "synthetic digits"
    assert "download failed" in info.fallback_reason and str(tmp_path / "data") in info.fallback_reason
    assert "Downloading" not in capsys.readouterr().out  # stdout stays clean for `run --json`
