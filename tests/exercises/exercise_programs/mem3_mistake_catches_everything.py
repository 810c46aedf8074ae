# Mistake: except Exception takes every error for an out-of-memory error.
import gc

import torch
from torch import nn

from tutor.lab import MNISTClassifier, report

PRETEND_MEMORY = 8 * 2**20  # a pretend GPU: 8 MiB for activations

model = MNISTClassifier()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(batch_size):
    """One training step on batch_size random images, on a pretend
    GPU: raises torch.OutOfMemoryError, as a GPU does, once the
    tensors autograd keeps for backward pass PRETEND_MEMORY."""
    kept = {}

    def keep(tensor):
        size = tensor.numel() * tensor.element_size()
        kept[tensor.data_ptr()] = size
        if sum(kept.values()) > PRETEND_MEMORY:
            raise torch.OutOfMemoryError(
                f"out of memory: batch {batch_size:,} needs more "
                f"than {PRETEND_MEMORY / 2**20:.0f} MiB")
        return tensor.detach()

    images = torch.randn(batch_size, 1, 28, 28)
    labels = torch.randint(0, 10, (batch_size,))
    optimizer.zero_grad()
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        loss = criterion(model(images), labels)
    loss.backward()
    optimizer.step()


def fits(train_step, batch_size):
    """True if a step of batch_size runs, False if it runs out of
    memory."""
    try:
        train_step(batch_size)
    except Exception:
        out_of_memory = True
    else:
        out_of_memory = False
    # Out here the error and its traceback are gone, and with them
    # the failed step's tensors: now give the freed memory back
    if out_of_memory:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return not out_of_memory


def largest_batch(train_step, limit=2**20):
    """The largest batch size whose step fits (0 if none)."""
    if not fits(train_step, 1):
        return 0
    fit = 1
    while fit * 2 <= limit and fits(train_step, fit * 2):
        fit *= 2
    too_big = min(fit * 2, limit + 1)  # the first size to fail
    while too_big - fit > 1:
        middle = (fit + too_big) // 2
        if fits(train_step, middle):
            fit = middle
        else:
            too_big = middle
    return fit


if __name__ == "__main__":
    biggest = largest_batch(train_step)
    print(f"the largest batch the pretend GPU fits: {biggest:,}")
    report(largest_batch=biggest)
