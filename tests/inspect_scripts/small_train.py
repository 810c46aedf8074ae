"""A small, clean training script for `gpututor inspect`'s tests, with one mistake planted on
request (--mistake): an MLP on random MNIST-shaped data through a DataLoader.

FLOPs per step, by hand (batch B, layers 784 -> 512 -> 512 -> 10; a matmul of (m x k) by
(k x n) is 2*m*k*n): forward 2*B*(784*512 + 512*512 + 512*10); backward, the gradient of every
weight (the same count again) and of every layer's input but the first's (the batch needs none):
2*B*(512*512 + 512*10). tests/inspect/test_inspect.py checks the report against this.
"""

import argparse
import os
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 10)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


class SlowImages(Dataset):
    """Each sample costs a little Python time, as a decoding transform would."""

    def __init__(self, images, labels, delay):
        self.images, self.labels, self.delay = images, labels, delay

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        end = time.perf_counter() + self.delay
        while time.perf_counter() < end:
            pass
        return self.images[i], self.labels[i]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument(
        "--mistake",
        default="none",
        choices=["none", "item", "keep-losses", "no-zero-grad", "cpu-model", "slow-data", "clock", "save-on-gpu"],
    )
    parser.add_argument("--amp", action="store_true", help="the forward and loss in bfloat16 autocast")
    args = parser.parse_args()
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    images, labels = torch.randn(4096, 1, 28, 28), torch.randint(0, 10, (4096,))
    slow = args.mistake == "slow-data"
    data = SlowImages(images, labels, delay=0.0004) if slow else TensorDataset(images, labels)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = Net()
    if args.mistake != "cpu-model":
        model = model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    losses = []
    step = 0
    while step < args.steps:
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            if args.mistake != "no-zero-grad":
                optimizer.zero_grad()
            if args.mistake == "clock":
                began = time.perf_counter()  # a step timed with no synchronize: a GPU's queue, not its work
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.amp):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            if args.mistake == "item":
                losses.append(loss.item())
            elif args.mistake == "keep-losses":
                losses.append(loss)
            elif args.mistake == "clock":
                losses.append(time.perf_counter() - began)
            elif args.mistake == "save-on-gpu" and step == 1:
                torch.save(model.state_dict(), os.path.join(tempfile.mkdtemp(), "ckpt.pt"))  # on a GPU: CUDA tensors
            step += 1
            if step >= args.steps:
                break
    print(f"trained {step} steps")


if __name__ == "__main__":
    main()
