# Exercise 2 (activation checkpointing) as the lesson's solution writes it: each block under
# checkpoint(..., use_reentrant=False), measured against the plain forward at the peak during backward.
import weakref
from itertools import islice

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.checkpoint import checkpoint

from tutor.lab import device, report, train_loader, train_x, train_y

WIDTH = 512
MEASURED = 512  # images in the measured batch
STEPS = 60


def block(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, n_out), nn.ReLU(),
                         nn.Linear(n_out, n_out), nn.ReLU(),
                         nn.Linear(n_out, n_out), nn.ReLU())


def forward_plain(blocks, x):
    for b in blocks:
        x = b(x)
    return x


def forward_checkpointed(blocks, x):
    for b in blocks:
        # Keeps only b's input; backward runs b again for the rest
        x = checkpoint(b, x, use_reentrant=False)
    return x


class LiveBytes(TorchDispatchMode):
    """Counts the bytes of each tensor an operation makes, for as
    long as it lives: a CPU has no allocator statistics. Tensors made
    before it started (the weights and gradients) are left out."""

    def __init__(self, model):
        super().__init__()
        self.before = {t.data_ptr() for p in model.parameters()
                       for t in (p, p.grad)}
        self.counted, self.now, self.peak = set(), 0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and not t._is_view():
                s = t.untyped_storage()
                ptr = s.data_ptr()
                new = ptr not in self.before | self.counted
                if new:
                    self.counted.add(ptr)
                    self.now += s.nbytes()
                    weakref.finalize(s, self.free, ptr, s.nbytes())
        self.peak = max(self.peak, self.now)
        return out

    def free(self, ptr, nbytes):
        self.counted.discard(ptr)
        self.now -= nbytes


def held_in_backward(model, run, loss_of):
    """run()'s output, after the backward of loss_of(output), and the
    most bytes held at once during that backward, recomputation
    included: the allocator's peak on a GPU, LiveBytes elsewhere."""
    for p in model.parameters():  # made first: they are not counted
        p.grad = torch.zeros_like(p)
    if device.type == "cuda":
        loss_of(run()).backward()  # cuBLAS takes its workspace once
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        out = run()
        torch.cuda.reset_peak_memory_stats()
        loss_of(out).backward()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - start
        return out.detach(), peak
    with LiveBytes(model) as live:
        out = run()
        live.peak = live.now  # from here on: during backward
        loss_of(out).backward()
    return out.detach(), live.peak


if __name__ == "__main__":
    torch.manual_seed(0)
    blocks = nn.Sequential(block(784, WIDTH), block(WIDTH, WIDTH),
                           block(WIDTH, WIDTH), block(WIDTH, WIDTH))
    model = nn.Sequential(nn.Flatten(), blocks, nn.Linear(WIDTH, 10))
    model = model.to(device)
    head = model[2]
    criterion = nn.CrossEntropyLoss()
    x = train_x[:MEASURED].flatten(1).to(device)
    labels = train_y[:MEASURED].to(device)

    runs = {}
    for name, forward in (("plain", forward_plain),
                          ("checkpointed", forward_checkpointed)):
        out, held = held_in_backward(
            model, lambda: head(forward(blocks, x)),
            lambda out: criterion(out, labels))
        grads = [p.grad for p in model.parameters()]
        runs[name] = (out, held, grads)
        print(f"{name}: at most {held / 2**20:.2f} MiB in backward")
    out_plain, held_plain, grads_plain = runs["plain"]
    out_ckpt, held_ckpt, grads_ckpt = runs["checkpointed"]
    same = torch.allclose(out_plain, out_ckpt) and all(
        torch.allclose(a, b)
        for a, b in zip(grads_plain, grads_ckpt))
    saved = 1 - held_ckpt / held_plain
    print(f"checkpointed: {saved:.0%} less at the peak; "
          f"same: {same}")

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for step, (images, labels) in enumerate(islice(train_loader,
                                                    STEPS)):
        images = images.flatten(1).to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        out = head(forward_checkpointed(blocks, images))
        loss = criterion(out, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if len(losses) % 10 == 0:
            mean = sum(losses[-10:]) / 10
            print(f"steps {len(losses) - 9}-{len(losses)}: "
                  f"mean loss {mean:.3f}")
    report(activations_saved=saved, same_results=same)
