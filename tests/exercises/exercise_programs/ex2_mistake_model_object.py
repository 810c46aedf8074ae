# A real mistake: the model object is saved, not its state_dict. weights_only=True refuses it.
import torch
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

model = MNISTClassifier().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(2):
    loss = train_one_epoch(model, train_loader, optimizer, nn.CrossEntropyLoss(), device)
    accuracy = evaluate(model, test_loader, device)
    torch.save({"model_state_dict": model, "optimizer_state_dict": optimizer.state_dict(),
                "epoch": epoch, "loss": loss, "accuracy": accuracy}, "checkpoint.pth")

checkpoint = torch.load("checkpoint.pth", map_location="cpu", weights_only=True)
cpu_model = MNISTClassifier()
cpu_model.load_state_dict(checkpoint["model_state_dict"].state_dict())
inputs, _ = next(iter(test_loader))
with torch.no_grad():
    same = torch.allclose(model(inputs.to(device)).cpu(), cpu_model(inputs), atol=1e-5)
report(allclose=same)
