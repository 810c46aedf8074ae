# Activation checkpointing written another way: checkpoint imported under another name, the blocks
# folded with functools.reduce, a model class, other names throughout, the gradients compared as one
# concatenated tensor per run, and the saving measured with saved-tensor hooks.
from functools import reduce

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint as recompute_later

from tutor.lab import device, report, train_x, train_y


def forward_checkpointed(stack, inputs):
    return reduce(lambda hidden, layer: recompute_later(layer, hidden, use_reentrant=False), stack, inputs)


class Tower(nn.Module):
    def __init__(self, width=256, depth=4):
        super().__init__()
        self.stack = nn.Sequential(*[
            nn.Sequential(nn.Linear(784 if i == 0 else width, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
            for i in range(depth)])
        self.classify = nn.Linear(width, 10)

    def forward(self, images, recompute=False):
        flat = images.flatten(1)
        return self.classify(forward_checkpointed(self.stack, flat) if recompute else self.stack(flat))


def saved_bytes(fn):
    seen = {}

    def pack(t):
        if not isinstance(t, nn.Parameter):
            seen[t.data_ptr()] = t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return result, sum(seen.values())


torch.manual_seed(7)
tower = Tower().to(device)
images, targets = train_x[:256].to(device), train_y[:256].to(device)
results = {}
for recompute in (False, True):
    tower.zero_grad()
    logits, kept = saved_bytes(lambda: tower(images, recompute=recompute))
    F.cross_entropy(logits, targets).backward()
    flat_grads = torch.cat([p.grad.flatten() for p in tower.parameters()])
    results[recompute] = (logits.detach(), kept, flat_grads)
outputs_match = torch.allclose(results[True][0], results[False][0])
torch.testing.assert_close(results[True][2], results[False][2])
fraction = 1 - results[True][1] / results[False][1]
print(f"kept {results[False][1]:,} B plainly, {results[True][1]:,} B checkpointed; outputs match: {outputs_match}")
report(activations_saved=fraction, same_results=outputs_match)
