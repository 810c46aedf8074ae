# ru_maxrss reported as it comes: kilobytes on Linux, so the "megabytes" are 1024 times too many.
import resource

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from tutor.lab import MNISTClassifier, device, report, train_loader

model = MNISTClassifier().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for step, (inputs, labels) in enumerate(train_loader):
        inputs, labels = inputs.to(device), labels.to(device)
        optimizer.zero_grad()
        criterion(model(inputs), labels).backward()
        optimizer.step()
        if step == 3:
            break
print(prof.key_averages().table(row_limit=5))
report(peak_memory_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
