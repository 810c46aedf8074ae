# Exercise 3 with the float32 and mixed-precision loops as two branches of `if use_amp:`.
import time

import torch
from torch import nn

from tutor.lab import (
    MNISTClassifier,
    device,
    evaluate,
    report,
    synchronize,
    test_loader,
    train_loader,
)

half = torch.float16 if device.type == "cuda" else torch.bfloat16


def train(use_amp):
    torch.manual_seed(0)
    train_loader.generator.manual_seed(0)
    net = MNISTClassifier().to(device)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler(device.type) if use_amp and half == torch.float16 else None
    synchronize(device)
    t = time.perf_counter()
    for i, (x, y) in enumerate(train_loader):
        if i == 60:
            break
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        if use_amp:
            with torch.autocast(device.type, dtype=half):
                loss = loss_fn(net(x), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
        else:
            loss = loss_fn(net(x), y)
            loss.backward()
            opt.step()
    synchronize(device)
    return time.perf_counter() - t, evaluate(net, test_loader, device)


fp32_seconds, fp32_accuracy = train(False)
amp_seconds, amp_accuracy = train(True)
report(fp32_seconds=fp32_seconds, amp_seconds=amp_seconds, speedup=fp32_seconds / amp_seconds,
       fp32_accuracy=fp32_accuracy, amp_accuracy=amp_accuracy)
