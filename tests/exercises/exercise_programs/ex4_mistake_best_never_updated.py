# A real mistake: best_acc is never updated, so every epoch beats it and the file ends up
# holding the last epoch, not the best; the report says 0.
import os
import time

import torch
import torch.optim as optim
from torch import nn

from tutor.lab import MNISTClassifier, evaluate, report, test_loader, train_loader


def get_device():
    return torch.device('cuda' if torch.cuda.is_available() else 'cpu')


def main():
    os.makedirs('saved_models', exist_ok=True)
    device = get_device()
    use_amp = device.type == 'cuda'
    print(f'Training on: {device} | Mixed precision: {use_amp}')

    torch.manual_seed(0)
    model = MNISTClassifier().to(device)
    optimizer = optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler() if use_amp else None

    num_epochs = 10
    best_acc = 0.0
    start_time = time.time()
    for epoch in range(num_epochs):
        model.train()
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            if use_amp:
                with torch.amp.autocast(device_type='cuda'):
                    outputs = model(images)
                    loss = criterion(outputs, labels)
                optimizer.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                outputs = model(images)
                loss = criterion(outputs, labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        val_acc = evaluate(model, test_loader, device)
        if val_acc > best_acc:
            torch.save({
                'epoch': epoch,
                'model_state_dict': model.state_dict(),
                'optimizer_state_dict': optimizer.state_dict(),
                'accuracy': val_acc,
            }, 'saved_models/portable_best.pth')
        print(f'Epoch {epoch + 1:2d}/{num_epochs} | Acc: {val_acc:.2%}')

    if device.type == 'cuda':
        torch.cuda.synchronize()
    elapsed = time.time() - start_time
    print(f'Time: {elapsed:.1f}s, best accuracy: {best_acc:.2%}')
    report(best_accuracy=best_acc, total_seconds=elapsed)


if __name__ == '__main__':
    main()
