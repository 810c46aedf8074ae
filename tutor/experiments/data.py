"""MNIST for the experiments: resident tensors (default), the notebook's DataLoader path,
and a procedurally generated digit set when MNIST is absent and cannot be downloaded.

- `load(device)`        whole set normalised once, as tensors on the training device
                        (no per-sample PIL); `batches(x, y, bs)` slices it per step.
- `loaders(bs)`         the notebook's path: torchvision MNIST + ToTensor + Normalize
                        through a DataLoader, one PIL image per sample.
- `describe_source()`   where MNIST would come from, without reading it (`gpututor doctor`).

The root is `tutor.paths.data_dir()`: --data-dir / $GPUTUTOR_DATA_DIR (read as is), else the
user cache dir (downloaded into). Normalisation is the notebook's (0.1307, 0.3081) so that
checkpoints move between the tutor and the learner's notebook code unchanged.

torch is imported inside functions: the CLI imports this module for `doctor` at start-up.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor import paths

if TYPE_CHECKING:  # pragma: no cover
    import torch

MEAN, STD = 0.1307, 0.3081
MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
SYNTHETIC = "synthetic digits"
DOWNLOAD_TIMEOUT_S = 20.0  # per socket operation; torchvision's urlopen has none of its own


@dataclass(frozen=True)
class DataSource:
    """What the data is and where it came from, for the learner's screen."""

    source: str  # "MNIST" or "synthetic digits"
    description: str  # "MNIST from /work/shared/data" / "synthetic digits — MNIST not found ...: <reason>"
    fallback_reason: str | None = None


@dataclass
class MnistData:
    """The whole data set as tensors on one device (x: float32 (N,1,28,28) normalised; y: int64)."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    source: str
    description: str
    fallback_reason: str | None = None

    @property
    def info(self) -> DataSource:
        return DataSource(self.source, self.description, self.fallback_reason)


# --------------------------------------------------------------------------- source


def _raw_dir(root: Path) -> Path:
    return root / "MNIST" / "raw"


def _files_present(root: Path) -> bool:
    raw = _raw_dir(root)
    return all((raw / f).is_file() for f in MNIST_FILES)


def describe_source() -> str:
    """Where MNIST would be read from and whether it is there (reads no data, imports no torch)."""
    root, may_download = paths.data_dir()
    if _files_present(root):
        return f"MNIST at {root} (files present)"
    if may_download:
        return f"MNIST not yet in {root}: it will be downloaded on first use (synthetic digits if that fails)"
    return (
        f"MNIST not found in {root} (expected {_raw_dir(root)}/train-images-idx3-ubyte etc.); "
        "a directory you named is not downloaded into, so runs will use synthetic digits"
    )


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:200] + "...") if len(text) > 200 else text or type(exc).__name__


def _open_mnist(root: Path, may_download: bool) -> tuple[Any, Any, DataSource]:
    """(train, test) torchvision MNIST datasets and their DataSource; raises _Missing with a reason."""
    from torchvision import datasets

    if may_download and not _files_present(root):
        old = socket.getdefaulttimeout()
        socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)  # an offline machine should fail fast, not hang
        try:
            root.mkdir(parents=True, exist_ok=True)
            # torchvision prints "Downloading ..." to stdout, which must stay clean for `run --json`.
            with contextlib.redirect_stdout(sys.stderr):
                datasets.MNIST(str(root), train=True, download=True)
                datasets.MNIST(str(root), train=False, download=True)
        except Exception as exc:  # network errors come wrapped in several types
            raise _Missing(f"MNIST not found in {root} and download failed: {_short(exc)}") from exc
        finally:
            socket.setdefaulttimeout(old)
    if not _files_present(root):
        raise _Missing(f"MNIST not found in {root} (no {_raw_dir(root)}/train-images-idx3-ubyte etc.)")
    try:
        train = datasets.MNIST(str(root), train=True, download=False)
        test = datasets.MNIST(str(root), train=False, download=False)
    except Exception as exc:  # truncated or corrupt files
        raise _Missing(f"MNIST in {root} could not be read: {_short(exc)}") from exc
    return train, test, DataSource("MNIST", f"MNIST from {root}")


class _Missing(Exception):
    """MNIST is not usable here; the message is the reason shown to the learner."""


def _fallback(reason: str) -> DataSource:
    return DataSource(SYNTHETIC, f"{SYNTHETIC} — {reason}", reason)


@lru_cache(maxsize=2)
def _uint8_sets(root: str, may_download: bool) -> tuple[Any, Any, Any, Any, DataSource]:
    """(train_x, train_y, test_x, test_y) as uint8 (N,28,28) / int64, read once per process."""
    try:
        train, test, info = _open_mnist(Path(root), may_download)
        return train.data, train.targets, test.data, test.targets, info
    except _Missing as exc:
        tx, ty = synthetic_digits(60000, seed=1)
        vx, vy = synthetic_digits(10000, seed=2)  # separate glyph variants: the test set is unseen
        return tx, ty, vx, vy, _fallback(str(exc))


@lru_cache(maxsize=2)
def _normalised(root: str, may_download: bool) -> tuple[Any, Any, Any, Any, DataSource]:
    """The normalised float32 CPU tensors, computed once per process and root."""
    tx, ty, vx, vy, info = _uint8_sets(root, may_download)
    return _normalise(tx), ty.long(), _normalise(vx), vy.long(), info


def _normalise(u8: torch.Tensor) -> torch.Tensor:
    # Same arithmetic as ToTensor() (x / 255) then Normalize((MEAN,), (STD,)).
    return u8.float().div_(255.0).sub_(MEAN).div_(STD).unsqueeze(1)


def source() -> DataSource:
    """The data source a run would use now (reads the files, or generates the fallback, once)."""
    root, may_download = paths.data_dir()
    return _uint8_sets(str(root), may_download)[4]


# --------------------------------------------------------------------------- resident path


def load(device: str = "cpu", *, train_samples: int | None = None, test_samples: int | None = None) -> MnistData:
    """The whole data set normalised once and moved to `device` once (the first N if given)."""
    root, may_download = paths.data_dir()
    tx, ty, vx, vy, info = _normalised(str(root), may_download)
    tx, ty = tx[:train_samples], ty[:train_samples]
    vx, vy = vx[:test_samples], vy[:test_samples]
    return MnistData(
        tx.to(device),
        ty.to(device),
        vx.to(device),
        vy.to(device),
        info.source,
        info.description,
        info.fallback_reason,
    )


def load_first(train_samples: int, test_samples: int = 1) -> MnistData:
    """The first N of each set, normalised on the CPU: for a short-lived process (a rank of a
    distributed job) that needs a few batches. Reads the raw files itself where they are present:
    importing torchvision costs such a process ~2 s, four times what the images take to read."""
    import torch

    root, may_download = paths.data_dir()
    if _files_present(root):
        raw = _raw_dir(root)
        try:
            tx, ty, vx, vy = (_read_idx(raw / name, torch) for name in MNIST_FILES)
            return MnistData(
                _normalise(tx[:train_samples]),
                ty[:train_samples].long(),
                _normalise(vx[:test_samples]),
                vy[:test_samples].long(),
                "MNIST",
                f"MNIST from {root}",
            )
        except (OSError, ValueError, RuntimeError):
            pass  # a damaged file: the usual path says why, and falls back
    tx, ty, vx, vy, info = _uint8_sets(str(root), may_download)
    return MnistData(
        _normalise(tx[:train_samples]),
        ty[:train_samples].long(),
        _normalise(vx[:test_samples]),
        vy[:test_samples].long(),
        info.source,
        info.description,
        info.fallback_reason,
    )


def _read_idx(path: Path, torch: Any) -> Any:
    """An IDX file (MNIST's format: 0, 0, type 0x08 = uint8, number of dimensions, then each
    dimension as a big-endian uint32, then the bytes) as a uint8 tensor."""
    data = path.read_bytes()
    if len(data) < 4 or data[0] or data[1] or data[2] != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim :]), dtype=torch.uint8).view(*dims)


def batches(
    x: torch.Tensor,
    y: torch.Tensor,
    batch_size: int,
    *,
    shuffle: bool = True,
    generator: torch.Generator | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(xb, yb) batches of resident tensors; the last one may be smaller (like drop_last=False).

    The permutation is drawn with `generator` (on its own device) and indexes the data on the
    data's device, so no batch crosses the bus.
    """
    import torch

    n = x.shape[0]
    if shuffle:
        gen_device = generator.device if generator is not None else x.device
        order = torch.randperm(n, generator=generator, device=gen_device).to(x.device)
        for i in range(0, n, batch_size):
            idx = order[i : i + batch_size]
            yield x[idx], y[idx]
    else:
        for i in range(0, n, batch_size):
            yield x[i : i + batch_size], y[i : i + batch_size]


# --------------------------------------------------------------------------- loader path


class _Uint8Digits:
    """A map-style dataset over uint8 images that returns PIL images through `transform`,
    exactly as torchvision's MNIST.__getitem__ does, so the loader path costs the same."""

    def __init__(self, images: Any, targets: Any, transform: Any) -> None:
        self.data, self.targets, self.transform = images, targets, transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        from PIL import Image

        img = Image.fromarray(self.data[index].numpy(), mode="L")
        return self.transform(img), int(self.targets[index])


def loaders(
    batch_size: int,
    *,
    num_workers: int = 0,
    pin_memory: bool = False,
    train_samples: int | None = None,
    test_samples: int | None = None,
    seed: int = 0,
) -> tuple[Any, Any, DataSource]:
    """The notebook's path: (train_loader, test_loader, source) with ToTensor + Normalize per sample."""
    import torch
    from torch.utils.data import DataLoader, Subset
    from torchvision import datasets, transforms

    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((MEAN,), (STD,))])
    root, may_download = paths.data_dir()
    tx, ty, vx, vy, info = _uint8_sets(str(root), may_download)  # decides MNIST vs fallback once
    if info.source == "MNIST":
        train = datasets.MNIST(str(root), train=True, download=False, transform=transform)
        test = datasets.MNIST(str(root), train=False, download=False, transform=transform)
    else:
        train, test = _Uint8Digits(tx, ty, transform), _Uint8Digits(vx, vy, transform)
    if train_samples is not None and train_samples < len(train):
        train = Subset(train, range(train_samples))
    if test_samples is not None and test_samples < len(test):
        test = Subset(test, range(test_samples))
    g = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(
        train, batch_size=batch_size, shuffle=True, generator=g, num_workers=num_workers, pin_memory=pin_memory
    )
    test_loader = DataLoader(
        test, batch_size=max(batch_size, 1000), shuffle=False, num_workers=num_workers, pin_memory=pin_memory
    )
    return train_loader, test_loader, info


# --------------------------------------------------------------------------- synthetic digits

# Each digit is a few polylines in a unit box (x right, y down), drawn like handwriting.


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float, a1: float, n: int = 10) -> list[tuple[float, float]]:
    """Points on an ellipse from angle a0 to a1 (degrees, 0 = right, 90 = down)."""
    return [
        (
            cx + rx * math.cos(math.radians(a0 + (a1 - a0) * i / n)),
            cy + ry * math.sin(math.radians(a0 + (a1 - a0) * i / n)),
        )
        for i in range(n + 1)
    ]


def _glyphs() -> list[list[list[tuple[float, float]]]]:
    return [
        [_arc(0.5, 0.5, 0.3, 0.42, 0, 360, 16)],  # 0
        [[(0.32, 0.25), (0.52, 0.08), (0.52, 0.92)]],  # 1
        [[*_arc(0.5, 0.32, 0.28, 0.24, 200, 380, 8), (0.2, 0.9), (0.82, 0.9)]],  # 2
        [_arc(0.48, 0.29, 0.27, 0.21, 210, 450, 8) + _arc(0.48, 0.7, 0.3, 0.22, 270, 510, 8)],  # 3
        [[(0.62, 0.92), (0.62, 0.08), (0.18, 0.64), (0.84, 0.64)]],  # 4
        [[(0.78, 0.1), (0.3, 0.1), (0.26, 0.46), *_arc(0.48, 0.64, 0.3, 0.26, 235, 495, 10)]],  # 5
        [_arc(0.62, 0.48, 0.42, 0.42, 270, 180, 6) + _arc(0.5, 0.68, 0.3, 0.24, 180, 540, 12)],  # 6
        [[(0.18, 0.1), (0.82, 0.1), (0.42, 0.92)]],  # 7
        [_arc(0.5, 0.29, 0.24, 0.2, 0, 360, 12), _arc(0.5, 0.7, 0.3, 0.22, 0, 360, 12)],  # 8
        [[*_arc(0.48, 0.32, 0.28, 0.24, 0, 360, 12), (0.76, 0.32), (0.7, 0.92)]],  # 9
    ]


def _segments(glyph: list[list[tuple[float, float]]]) -> list[tuple[float, float, float, float]]:
    return [(*a, *b) for line in glyph for a, b in itertools.pairwise(line)]


def synthetic_digits(n: int, *, seed: int = 0, variants_per_class: int = 300) -> tuple[Any, Any]:
    """(images uint8 (n,28,28), labels int64 (n,)): deterministic handwritten-like digits.

    Two stages, both vectorised: draw `variants_per_class` glyph variants per class (each
    control point jittered, random stroke thickness) as distance-to-stroke fields, then give
    every image its own random affine warp (rotation, scale, shear, shift) with grid_sample
    and a little pixel noise. Digits fill a ~20x20 box centred in 28x28, as MNIST's do.
    """
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(seed)
    size = 28
    # Pixel centres in glyph units: the unit box maps onto the central 20x20 pixels.
    coords = (torch.arange(size, dtype=torch.float32) + 0.5 - 4.0) / 20.0
    py, px = torch.meshgrid(coords, coords, indexing="ij")
    pix = torch.stack([px.reshape(-1), py.reshape(-1)], dim=1)  # (784, 2)

    variants = []
    for glyph in _glyphs():
        segs = torch.tensor(_segments(glyph), dtype=torch.float32)  # (S, 4)
        v = variants_per_class
        a = segs[:, :2].expand(v, -1, -1).clone()
        b = segs[:, 2:].expand(v, -1, -1).clone()
        # Jitter the control points: a point's offset is shared by the segment ending there
        # and the one starting there, so strokes bend but stay connected.
        jit = (torch.rand(v, segs.shape[0] + 1, 2, generator=g) - 0.5) * 0.12
        a += jit[:, :-1]
        b += jit[:, 1:]
        thick = 0.05 + 0.06 * torch.rand(v, 1, 1, generator=g)
        ab = b - a  # (v, S, 2)
        ap = pix[None, :, None, :] - a[:, None, :, :]  # (v, 784, S, 2)
        t = ((ap * ab[:, None]).sum(-1) / (ab * ab).sum(-1).clamp_min(1e-8)[:, None]).clamp(0, 1)
        d = (ap - t[..., None] * ab[:, None]).norm(dim=-1).amin(-1)  # (v, 784)
        ink = ((thick[:, :, 0] - d) / 0.035 + 0.5).clamp(0, 1)  # soft anti-aliased edge
        variants.append(ink.view(v, 1, size, size))
    bank = torch.cat(variants)  # (10*v, 1, 28, 28), class c at [c*v, (c+1)*v)

    labels = torch.arange(n) % 10
    labels = labels[torch.randperm(n, generator=g)]
    pick = labels * variants_per_class + torch.randint(variants_per_class, (n,), generator=g)
    ang = (torch.rand(n, generator=g) - 0.5) * math.radians(30)
    sx = 0.85 + 0.3 * torch.rand(n, generator=g)
    sy = sx * (0.9 + 0.2 * torch.rand(n, generator=g))
    shear = (torch.rand(n, generator=g) - 0.5) * 0.4
    shift = (torch.rand(n, 2, generator=g) - 0.5) * 0.2
    cos, sin = torch.cos(ang), torch.sin(ang)
    # theta maps output coords to input coords (inverse warp).
    theta = torch.stack(
        [
            torch.stack([cos / sx, (-sin + shear) / sx, shift[:, 0]], 1),
            torch.stack([sin / sy, cos / sy, shift[:, 1]], 1),
        ],
        1,
    )
    out = torch.empty(n, size, size, dtype=torch.uint8)
    for i in range(0, n, 8192):
        sl = slice(i, i + 8192)
        grid = F.affine_grid(theta[sl], [theta[sl].shape[0], 1, size, size], align_corners=False)
        img = F.grid_sample(bank[pick[sl]], grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        img = img[:, 0] * (0.75 + 0.25 * torch.rand(img.shape[0], 1, 1, generator=g))  # pen pressure
        img = img + 0.03 * torch.rand(img.shape, generator=g)
        out[sl] = (img.clamp(0, 1) * 255).round().to(torch.uint8)
    return out, labels.long()


def clear_cache() -> None:
    """Forget the in-process data (tests that switch GPUTUTOR_DATA_DIR call this)."""
    _uint8_sets.cache_clear()
    _normalised.cache_clear()


__all__ = [
    "MEAN",
    "STD",
    "DataSource",
    "MnistData",
    "batches",
    "clear_cache",
    "describe_source",
    "load",
    "loaders",
    "source",
    "synthetic_digits",
]
