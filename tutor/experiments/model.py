"""The course notebook's model, with the notebook's attribute names.

Same names (fc1/fc2/fc3) mean the same state_dict keys, so a checkpoint written by the
tutor loads into the learner's notebook code and vice versa.
"""

from __future__ import annotations

import torch
from torch import nn


class MNISTClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(28 * 28, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, 10)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(x)
        x = self.relu(self.fc1(x))
        x = self.relu(self.fc2(x))
        return self.fc3(x)


class TinyClassifier(nn.Module):
    """A deliberately small model (490 parameters with hidden=8) for "when does the GPU help?"."""

    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        # 28x28 -> 7x7 by average pooling keeps the parameter count tiny: 49*h + h + h*10 + 10.
        self.pool = nn.AvgPool2d(4)
        self.fc1 = nn.Linear(49, hidden)
        self.fc2 = nn.Linear(hidden, 10)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 2:
            x = x.view(-1, 1, 28, 28)
        elif x.dim() == 3:
            x = x.unsqueeze(1)
        x = self.flatten(self.pool(x))
        return self.fc2(self.relu(self.fc1(x)))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def linear_stack(width: int, layers: int) -> nn.Sequential:
    """`layers` x (Linear(width, width) + ReLU): the shape of PyTorch's AMP recipe, sized up or
    down to make memory and compute figures worth measuring (memory-ledger, batch-sweep,
    grad-checkpoint)."""
    modules: list[nn.Module] = []
    for _ in range(layers):
        modules += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*modules)
