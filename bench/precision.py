"""Precision: the amp-benchmark experiment's epoch times against a plain PyTorch loop.

The same MLP (784 -> width, layers - 1 hidden width x width, -> 10; ReLU; Adam lr 1e-3), the
same images and batch size, in the same process: first `amp-benchmark` as the tutor runs it
(its own warm-up, Stopwatch and event stream), then a plain loop written the way the
PyTorch AMP recipe writes it, for each precision the device has:

    cpu:   float32, bfloat16 autocast
    cuda:  float32 (TF32 off), TF32, float16 autocast + GradScaler

Each plain case runs 5 warm-up steps, then `--repeats` timed epochs (synchronised; the
median is reported). It prints both figures per case and their ratio (experiment / plain:
1.0 means the tutor's timing adds nothing), and the speedup of each precision over float32
from the plain loop, which is the figure the lesson asks learners to predict.

    GPUTUTOR_DATA_DIR=../shared/data python bench/precision.py [--device cpu] [--samples 4096] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import nullcontext


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cpu, cuda, mps (default: the best here)")
    ap.add_argument("--samples", type=int, default=4096, help="training images per epoch (on the CPU)")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs per plain case (median reported)")
    args = ap.parse_args(argv)

    import torch

    from tutor import experiments
    from tutor.experiments import data, devices
    from tutor.experiments.amp_benchmark import benchmark_mlp
    from tutor.experiments.events import Finished, Note

    dev = devices.resolve(args.device)
    device = dev.torch_device
    accel = dev.kind != "cpu"
    # On an accelerator the experiment trains the whole set there (its CPU baseline on
    # cpu_samples); on a CPU everything runs on `samples` images.
    samples = None if accel else args.samples
    d = data.load(device, train_samples=samples, test_samples=1000)
    n = d.train_x.shape[0]
    print(f"device: {dev.describe()}; torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"model:  width {args.width}, {args.layers} hidden layers; {n:,} images per epoch; batch {args.batch_size}")

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elif device == "mps":
            torch.mps.synchronize()

    def plain_epoch_seconds(dtype, scaler_on: bool, tf32: bool) -> float:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.manual_seed(0)
        model = benchmark_mlp(args.width, args.layers).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler(dev.kind, enabled=scaler_on)
        loss_fn = torch.nn.CrossEntropyLoss()

        def autocast():
            return torch.autocast(device_type=dev.kind, dtype=dtype) if dtype is not None else nullcontext()

        def step(i: int) -> None:
            x = d.train_x[i : i + args.batch_size]
            y = d.train_y[i : i + args.batch_size]
            opt.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        for i in range(5):  # warm-up
            step(i * args.batch_size % n)
        times = []
        for _ in range(args.repeats):
            sync()
            start = time.perf_counter()
            for i in range(0, n, args.batch_size):
                step(i)
            sync()
            times.append(time.perf_counter() - start)
        torch.backends.cuda.matmul.allow_tf32 = False
        return statistics.median(times)

    values = {"width": args.width, "layers": args.layers, "batch_size": args.batch_size, "test_samples": 1000}
    if accel:
        values["cpu_samples"] = args.samples
    else:  # train_samples = cpu_samples: the experiment's epoch is these images, nothing projected
        values["cpu_samples"] = values["train_samples"] = args.samples
    metrics, notes = {}, []
    for event in experiments.start("amp-benchmark", values, device=device):
        if isinstance(event, Finished):
            metrics = event.metrics
        elif isinstance(event, Note) and event.level == "warning":
            notes.append(event.text)

    if accel and dev.kind == "cuda":
        cases = [("fp32", None, False, False), ("tf32", None, False, True), ("amp", torch.float16, True, False)]
    elif accel:
        cases = [("fp32", None, False, False), ("amp", torch.float16, False, False)]
    else:
        cases = [("cpu", None, False, False), ("amp", torch.bfloat16, False, False)]
    print(f"\n{'case':6s} {'experiment s/epoch':>19s} {'plain s/epoch':>14s} {'experiment/plain':>17s}")
    plain = {}
    for label, dtype, scaler_on, tf32 in cases:
        exp_s = metrics.get(f"{label}_seconds")
        if exp_s is None:
            continue
        plain[label] = plain_epoch_seconds(dtype, scaler_on, tf32)
        print(f"{label:6s} {exp_s:19.3f} {plain[label]:14.3f} {exp_s / plain[label]:16.2f}x")
    base = plain.get("fp32", plain.get("cpu"))
    for label, secs in plain.items():
        if secs is not base:
            print(f"plain {label} speedup over float32: {base / secs:.2f}x")
    for text in notes:
        print(f"note: {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
