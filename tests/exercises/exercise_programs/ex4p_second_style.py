# Another correct style: torch.profiler named in full around a plain `with` block, the peak read
# inside it once the steps are done, in MB (10**6 bytes), from torch.cuda.memory_stats() on a GPU;
# the clock waits through a helper of the program's own.
import resource
import time

import torch
from torch import nn

from tutor.lab import MNISTClassifier, device, report, synchronize, train_loader


def wait():
    synchronize(device)


model = MNISTClassifier().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
batches = iter(train_loader)


def step():
    images, labels = next(batches)
    images, labels = images.to(device), labels.to(device)
    optimizer.zero_grad()
    criterion(model(images), labels).backward()
    optimizer.step()


for _ in range(3):
    step()
wait()
begin = time.perf_counter()
for _ in range(10):
    step()
wait()
seconds = time.perf_counter() - begin

activities = [torch.profiler.ProfilerActivity.CPU]
if device.type == "cuda":
    activities.append(torch.profiler.ProfilerActivity.CUDA)
    torch.cuda.memory.reset_peak_memory_stats(device)
with torch.profiler.profile(activities=activities) as prof:
    for _ in range(3):
        step()
    if device.type == "cuda":
        peak_bytes = torch.cuda.memory_stats(device)["allocated_bytes.all.peak"]
    else:
        peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
for row in prof.key_averages()[:5]:
    print(row.key, row.count)
report(peak_memory_mb=peak_bytes / 1e6, seconds=seconds)
