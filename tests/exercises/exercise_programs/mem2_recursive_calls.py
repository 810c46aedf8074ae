# Activation checkpointing written another way: the module imported whole, explicit calls (the first
# block, then the rest, recursively) instead of a loop, and each pair of gradients compared in turn.
import torch
import torch.utils.checkpoint as ckpt
from torch import nn

from tutor.lab import device, report, train_x, train_y


def forward_checkpointed(layers, h):
    if len(layers) == 0:
        return h
    h = ckpt.checkpoint(layers[0], h, use_reentrant=False)
    return forward_checkpointed(layers[1:], h)


def stage(n_in, n_out):
    return nn.Sequential(nn.Linear(n_in, n_out), nn.ReLU(), nn.Linear(n_out, n_out), nn.ReLU())


def kept(run):
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel() * t.element_size()) or t,
                                                  lambda t: t):
        out = run()
    return out, sum(sizes)


torch.manual_seed(1)
layers = nn.Sequential(stage(784, 200), stage(200, 200), stage(200, 200), stage(200, 200), stage(200, 200))
classifier = nn.Linear(200, 10)
layers.to(device)
classifier.to(device)
params = list(layers.parameters()) + list(classifier.parameters())
batch, answer = train_x[:200].flatten(1).to(device), train_y[:200].to(device)

answers = []
for fwd in (lambda h: layers(h), lambda h: forward_checkpointed(layers, h)):
    for p in params:
        p.grad = None
    logits, n = kept(lambda: classifier(fwd(batch)))
    nn.functional.cross_entropy(logits, answer).backward()
    answers.append((logits.detach(), n, [p.grad.detach().clone() for p in params]))

checks = [torch.allclose(answers[0][0], answers[1][0])]
for g_plain, g_ckpt in zip(answers[0][2], answers[1][2]):
    checks.append(torch.allclose(g_plain, g_ckpt))
all_same = all(checks)
saving = 1 - answers[1][1] / answers[0][1]
print(f"same: {all_same}; saved {saving:.0%} of what autograd kept")
report(activations_saved=saving, same_results=all_same)
