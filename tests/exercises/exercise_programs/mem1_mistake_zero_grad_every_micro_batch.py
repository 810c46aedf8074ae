# Mistake: zero_grad at the top of every micro-batch wipes what the earlier ones added.
from itertools import islice

import torch
from torch import nn

from tutor.lab import (
    MNISTClassifier,
    device,
    evaluate,
    report,
    test_loader,
    train_loader,
)

ACCUMULATION_STEPS = 4  # 4 micro-batches of 64: one update of 256
MICRO_BATCHES = 120


def train_accumulated(model, loader, optimizer, criterion, device,
                      accumulation_steps):
    model.train()
    for i, (images, labels) in enumerate(loader):
        optimizer.zero_grad()
        images, labels = images.to(device), labels.to(device)
        loss = criterion(model(images), labels)
        (loss / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MNISTClassifier().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_accumulated(model, islice(train_loader, MICRO_BATCHES),
                      optimizer, criterion, device,
                      ACCUMULATION_STEPS)
    accuracy = evaluate(model, test_loader, device)
    print(f"{MICRO_BATCHES // ACCUMULATION_STEPS} updates of "
          f"{64 * ACCUMULATION_STEPS} images: {accuracy:.2%}")
    report(accuracy=accuracy)
