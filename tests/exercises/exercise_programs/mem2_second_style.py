# Activation checkpointing written another way: checkpoint_sequential with one segment per
# block (it runs the last segment plainly), a model class, and the comparison done with
# torch.testing.assert_close.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

from tutor.lab import device, report, train_x, train_y


def forward_checkpointed(blocks, x):
    return checkpoint_sequential(blocks, len(blocks), x, use_reentrant=False)


class Deep(nn.Module):
    def __init__(self, width=384, depth=5):
        super().__init__()
        layers = []
        for i in range(depth):
            layers.append(nn.Sequential(nn.Linear(784 if i == 0 else width, width), nn.GELU(),
                                        nn.Linear(width, width), nn.GELU()))
        self.blocks = nn.Sequential(*layers)
        self.out = nn.Linear(width, 10)

    def forward(self, x, checkpointed=False):
        x = x.flatten(1)
        x = forward_checkpointed(self.blocks, x) if checkpointed else self.blocks(x)
        return self.out(x)


def activation_bytes(fn):
    sizes = {}

    def pack(t):
        if not isinstance(t, nn.Parameter):
            sizes[(t.data_ptr(), t.numel())] = t.numel() * t.element_size()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return result, sum(sizes.values())


torch.manual_seed(3)
net = Deep().to(device)
xb, yb = train_x[:128].to(device), train_y[:128].to(device)
measured = {}
for flag in (False, True):
    net.zero_grad()
    logits, nbytes = activation_bytes(lambda: net(xb, checkpointed=flag))
    F.cross_entropy(logits, yb).backward()
    measured[flag] = (logits.detach(), nbytes, [p.grad.clone() for p in net.parameters()])
torch.testing.assert_close(measured[True][0], measured[False][0])
for g1, g2 in zip(measured[True][2], measured[False][2]):
    torch.testing.assert_close(g1, g2)
fraction = 1 - measured[True][1] / measured[False][1]
print(f"plain {measured[False][1]:,} B, checkpointed {measured[True][1]:,} B: {fraction:.0%} saved")
report(activations_saved=fraction, same_results=True)
