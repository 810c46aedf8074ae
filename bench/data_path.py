"""Data path: one MNIST epoch through the notebook's DataLoader vs resident tensors.

Same model (MNISTClassifier), optimiser (Adam, lr 1e-3), batch size, seed and device, in
the same process. The DataLoader path is the notebook's: torchvision MNIST, a PIL image per
sample, ToTensor + Normalize, num_workers=0 (the default), each batch copied with .to(device)
in the loop. The resident path normalises the whole set once, keeps it on the device and
slices batches there. Each path gets a few untimed warm-up steps first; epoch times are
device-synchronised. The ratio is loader seconds / resident seconds.

    GPUTUTOR_DATA_DIR=../shared/data python bench/data_path.py [--device cpu] [--batch-size 64] [--repeats 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best here)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=1, help="timed epochs per path (median reported)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import torch

    from tutor.experiments import data, devices
    from tutor.experiments.model import MNISTClassifier
    from tutor.experiments.training import evaluate, seed_everything, train_epoch
    from tutor.measurement.timing import Stopwatch

    dev = devices.resolve(args.device)
    device = dev.torch_device
    resident = data.load(device)
    train_loader, _, info = data.loaders(args.batch_size, seed=args.seed)
    print(f"device: {dev.describe()}")
    print(f"data:   {info.description}; batch {args.batch_size}; torch threads {torch.get_num_threads()}")

    def one_epoch(batches_fn) -> tuple[float, float]:
        seed_everything(args.seed)
        model = MNISTClassifier().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in train_epoch(model, opt, batches_fn(), device, max_steps=5, report_every=5):
            pass  # warm-up steps (allocator, kernels, the loader's first batches)
        seed_everything(args.seed)
        model = MNISTClassifier().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        sw = Stopwatch(device)
        for _ in train_epoch(model, opt, batches_fn(), device, report_every=10**9):
            pass
        seconds = sw.elapsed()
        return seconds, evaluate(model, resident.test_x, resident.test_y)

    gen = torch.Generator().manual_seed(args.seed)
    paths = {
        "DataLoader (num_workers=0)": lambda: train_loader,
        "resident tensors": lambda: data.batches(resident.train_x, resident.train_y, args.batch_size, generator=gen),
    }
    results = {}
    for name, fn in paths.items():
        runs = [one_epoch(fn) for _ in range(args.repeats)]
        secs = statistics.median(r[0] for r in runs)
        results[name] = secs
        print(f"{name:28s} {secs:7.2f} s/epoch  ({60000 / secs:8.0f} samples/s, test accuracy {runs[-1][1]:.2%})")
    loader_s, resident_s = results.values()
    print(f"ratio loader / resident: {loader_s / resident_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
