# Exercise 3 written another way: the starter's pretend GPU as given, and one loop over lower
# and upper bounds instead of a helper (growing until the first failure, then bisecting), the
# out-of-memory error recognised from a RuntimeError's message (anything else re-raised), a
# flag set in the except block and the clean-up done after it.
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


def largest_batch(run_step, limit=1 << 16):
    lo, hi = 0, limit + 1  # lo fits (0: nothing yet); hi does not, or is past the limit
    n = 1
    while hi - lo > 1:
        failed = False
        try:
            run_step(n)
        except RuntimeError as err:
            if "out of memory" not in str(err):
                raise
            failed = True
        if failed:
            gc.collect()
            hi = n
        else:
            lo = n
        growing = hi == limit + 1
        n = min(2 * lo, hi - 1) if growing else (lo + hi) // 2
    return lo


answer = largest_batch(train_step)
print("largest batch:", answer)
report(largest_batch=answer)
