# Exercise 2 the way the course notebook writes it: model_2 / optimizer_2, a torch.device for
# map_location, the checkpoint saved at the end of every epoch.
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
    train_one_epoch,
)

model_2 = MNISTClassifier().to(device)
optimizer_2 = optim.Adam(model_2.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()

for epoch in range(2):
    train_loss = train_one_epoch(model_2, train_loader, optimizer_2, criterion, device)
    val_acc = evaluate(model_2, test_loader, device)
    checkpoint = {
        'model_state_dict': model_2.state_dict(),
        'optimizer_state_dict': optimizer_2.state_dict(),
        'epoch': epoch,
        'loss': train_loss,
        'accuracy': val_acc,
    }
    torch.save(checkpoint, 'checkpoint.pth')

cpu_device = torch.device('cpu')
checkpoint = torch.load('checkpoint.pth', map_location=cpu_device, weights_only=True)
loaded_model = MNISTClassifier().to(cpu_device)
loaded_model.load_state_dict(checkpoint['model_state_dict'])

test_images, test_labels = next(iter(test_loader))
model_2.eval()
with torch.no_grad():
    gpu_outputs = model_2(test_images.to(device)).cpu()
loaded_model.eval()
with torch.no_grad():
    cpu_outputs = loaded_model(test_images.to(cpu_device))
match = torch.allclose(gpu_outputs, cpu_outputs, atol=1e-5)
print(f'Predictions match: {match}')
report(allclose=match)
