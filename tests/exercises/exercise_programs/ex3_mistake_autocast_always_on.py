# A real mistake: autocast without enabled=use_amp, so the "float32" baseline runs in 16-bit too.
import time

import torch
import torch.optim as optim
from torch import nn

from tutor.lab import (
    MNISTClassifier,
    device,
    evaluate,
    report,
    test_loader,
    train_loader,
)

amp_dtype = torch.float16 if device.type == 'cuda' else torch.bfloat16


def run(use_amp):
    torch.manual_seed(0)
    train_loader.generator.manual_seed(0)
    model_amp = MNISTClassifier().to(device)
    optimizer_amp = optim.Adam(model_amp.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type, enabled=use_amp and amp_dtype == torch.float16)
    if device.type == 'cuda':
        torch.cuda.synchronize()
    amp_start = time.time()
    for step, (images, labels) in enumerate(train_loader):
        if step == 60:
            break
        images, labels = images.to(device), labels.to(device)
        with torch.amp.autocast(device_type=device.type, dtype=amp_dtype):
            outputs = model_amp(images)
            loss = criterion(outputs, labels)
        optimizer_amp.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer_amp)
        scaler.update()
    if device.type == 'cuda':
        torch.cuda.synchronize()
    amp_time = time.time() - amp_start
    return amp_time, evaluate(model_amp, test_loader, device)


fp32_time, fp32_acc = run(False)
amp_time, amp_acc = run(True)
report(fp32_seconds=fp32_time, amp_seconds=amp_time, speedup=fp32_time / amp_time,
       fp32_accuracy=fp32_acc, amp_accuracy=amp_acc)
