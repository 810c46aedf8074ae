# Mistake: after the first out-of-memory error the search backs off inside the except block.
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
    except torch.OutOfMemoryError:
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
    batch = 1
    while batch <= limit:
        try:
            train_step(batch)
        except torch.OutOfMemoryError:
            # back off right here, inside the except block
            fit, too_big = batch // 2, batch
            while too_big - fit > 1:
                middle = (fit + too_big) // 2
                if fits(train_step, middle):
                    fit = middle
                else:
                    too_big = middle
            return fit
        batch *= 2
    return limit


if __name__ == "__main__":
    biggest = largest_batch(train_step)
    print(f"the largest batch the pretend GPU fits: {biggest:,}")
    report(largest_batch=biggest)
