# Mistake: use_reentrant=True; the input needs no grad, so no graph runs through the blocks.
from itertools import islice

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from tutor.lab import device, report, train_loader

WIDTH = 512


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
        x = checkpoint(b, x, use_reentrant=True)
    return x


def kept_for_backward(run, model):
    """run()'s result, and the bytes autograd keeps for backward
    while it runs, weights left out: the memory ledger's count."""
    weights = {p.data_ptr() for p in model.parameters()}
    kept = {}

    def keep(t):
        if t.data_ptr() not in weights:
            kept[t.data_ptr()] = t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        out = run()
    return out, sum(kept.values())


if __name__ == "__main__":
    torch.manual_seed(0)
    blocks = nn.Sequential(block(784, WIDTH), block(WIDTH, WIDTH),
                           block(WIDTH, WIDTH), block(WIDTH, WIDTH))
    model = nn.Sequential(nn.Flatten(), blocks, nn.Linear(WIDTH, 10))
    model = model.to(device)
    head = model[2]
    criterion = nn.CrossEntropyLoss()
    images, labels = next(iter(train_loader))
    x, labels = images.flatten(1).to(device), labels.to(device)

    runs = {}
    for name, forward in (("plain", forward_plain),
                          ("checkpointed", forward_checkpointed)):
        model.zero_grad()
        out, kept = kept_for_backward(
            lambda: head(forward(blocks, x)), model)
        criterion(out, labels).backward()
        grads = [torch.zeros_like(p) if p.grad is None else p.grad
                 for p in model.parameters()]
        runs[name] = (out.detach(), kept, grads)
        print(f"{name}: {kept / 2**20:.2f} MiB kept for backward")
    out_plain, kept_plain, grads_plain = runs["plain"]
    out_ckpt, kept_ckpt, grads_ckpt = runs["checkpointed"]
    same = torch.allclose(out_plain, out_ckpt) and all(
        torch.allclose(a, b)
        for a, b in zip(grads_plain, grads_ckpt))
    saved = 1 - kept_ckpt / kept_plain
    print(f"checkpointed: {saved:.0%} less kept; same: {same}")

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step, (images, labels) in enumerate(islice(train_loader,
                                                    20)):
        images = images.flatten(1).to(device)
        labels = labels.to(device)
        optimizer.zero_grad()
        out = head(forward_checkpointed(blocks, images))
        loss = criterion(out, labels)
        loss.backward()
        optimizer.step()
        if step % 5 == 4:
            print(f"step {step + 1}: loss {loss.item():.3f}")
    report(activations_saved=saved, same_results=same)
