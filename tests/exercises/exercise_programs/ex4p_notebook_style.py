# Exercise 4's profiling the way the course writes it: a schedule (wait, warmup, active) moved on
# by prof.step(), profile_memory=True, the profiler's own table printed, time.time() with a
# guarded torch.cuda.synchronize(), and the peak read with `from resource import getrusage`.
import sys
import time
from resource import RUSAGE_SELF, getrusage

import torch
import torch.optim as optim
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

from tutor.lab import MNISTClassifier, report, train_loader

dev = "cuda" if torch.cuda.is_available() else "cpu"
net = MNISTClassifier().to(dev)
opt = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
loader = iter(train_loader)


def one_step():
    x, y = next(loader)
    x, y = x.to(dev), y.to(dev)
    opt.zero_grad()
    loss_fn(net(x), y).backward()
    opt.step()


for _ in range(10):
    one_step()
if dev == "cuda":
    torch.cuda.synchronize()
t0 = time.time()
for _ in range(10):
    one_step()
if dev == "cuda":
    torch.cuda.synchronize()
elapsed = time.time() - t0

acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
if dev == "cuda":
    torch.cuda.reset_peak_memory_stats()
with profile(
    activities=acts, schedule=schedule(wait=1, warmup=1, active=3), profile_memory=True, record_shapes=True
) as prof:
    for _ in range(5):
        one_step()
        prof.step()
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))

if dev == "cuda":
    peak = torch.cuda.max_memory_allocated() / 1024**2
else:
    peak = getrusage(RUSAGE_SELF).ru_maxrss / (1024**2 if sys.platform == "darwin" else 1024)
print(f"Peak memory: {peak:.1f} MB")
report(peak_memory_mb=round(peak, 1), step_ms=elapsed / 10 * 1000)
