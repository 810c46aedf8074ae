"""forgot-zero-grad: what the gradients do when `optimizer.zero_grad()` is left out.

Two copies of the course's MNISTClassifier, with the same weights, see the same batches.
One loop calls `optimizer.zero_grad()` before `loss.backward()`; the other does not, so
each backward adds this step's gradient to all the earlier ones (`.grad` accumulates, by
design: that is how gradient accumulation works). Each step records the total L2 norm of
the gradients the optimizer is about to use, and the loss.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn, optim

from tutor.experiments.data import load
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.forgot_zero_grad import ForgotZeroGradParams
from tutor.experiments.training import seed_everything


def grad_norm(model: nn.Module) -> float:
    """The L2 norm of all parameter gradients together (what clip_grad_norm_ would measure)."""
    norms = [p.grad.detach().norm() for p in model.parameters() if p.grad is not None]
    return torch.stack(norms).norm().item() if norms else 0.0


def measure(p: ForgotZeroGradParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    seed_everything(p.seed)
    data = load(device, train_samples=p.steps * p.batch_size, test_samples=1)
    yield Started(
        "forgot-zero-grad",
        device,
        dev.name,
        data.description,
        f"{p.steps} SGD steps (lr {p.lr}) of batch {p.batch_size}, with and without zero_grad()",
    )

    base = MNISTClassifier()
    models = {"with zero_grad": MNISTClassifier(), "without": MNISTClassifier()}
    for m in models.values():
        m.load_state_dict(base.state_dict())  # the same starting weights
        m.to(device)
    optimizers = {k: optim.SGD(m.parameters(), lr=p.lr) for k, m in models.items()}
    norms: dict[str, list[float]] = {k: [] for k in models}
    losses: dict[str, list[float]] = {k: [] for k in models}

    for i in range(p.steps):
        x = data.train_x[i * p.batch_size : (i + 1) * p.batch_size]
        y = data.train_y[i * p.batch_size : (i + 1) * p.batch_size]
        for name, model in models.items():
            opt = optimizers[name]
            if name == "with zero_grad":
                opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            norms[name].append(grad_norm(model))
            losses[name].append(loss.item())
            opt.step()
            yield Step(i + 1, p.steps, losses[name][-1], 0.0, 0.0, label=name)

    shown = sorted({0, p.steps - 1, *range(4, p.steps, max(1, p.steps // 10))})
    rows = [
        [
            str(i + 1),
            f"{norms['with zero_grad'][i]:.3f}",
            f"{norms['without'][i]:.3f}",
            f"{losses['with zero_grad'][i]:.3f}",
            f"{losses['without'][i]:.3f}",
        ]
        for i in shown
    ]
    yield Table(
        "Gradient norm and loss, step by step",
        ["step", "grad norm (zero_grad)", "grad norm (forgot)", "loss (zero_grad)", "loss (forgot)"],
        rows,
    )
    growth_without = norms["without"][-1] / norms["without"][0] if norms["without"][0] else float("nan")
    growth_with = (
        norms["with zero_grad"][-1] / norms["with zero_grad"][0] if norms["with zero_grad"][0] else float("nan")
    )
    yield Note(
        f"Without zero_grad() the gradient the optimizer used grew {growth_without:.1f}x in {p.steps} steps: "
        "each backward() adds to .grad, so step k uses the sum of k gradients. With zero_grad() it changed "
        f"only {growth_with:.1f}x, as the model learned.",
        "result",
    )
    with_loss, without_loss = losses["with zero_grad"][-1], losses["without"][-1]
    if without_loss > with_loss:
        yield Note(
            f"The loss shows it: {without_loss:.3f} after {p.steps} steps without zero_grad(), against "
            f"{with_loss:.3f} with it. The summed gradients make ever larger steps that overshoot."
        )
    else:
        yield Note(
            f"Here the loss even fell faster without zero_grad() ({without_loss:.3f} against "
            f"{with_loss:.3f}): at this small learning rate the summed gradients act like a bigger one, "
            "which is why the bug can hide. The gradient norm still gives it away.",
            "warning",
        )
    yield Finished(
        {
            "grad_norm_first": norms["without"][0],
            "grad_norm_last_with": norms["with zero_grad"][-1],
            "grad_norm_last_without": norms["without"][-1],
            "growth_with": growth_with,
            "growth_without": growth_without,
            "loss_last_with": losses["with zero_grad"][-1],
            "loss_last_without": losses["without"][-1],
            "steps": p.steps,
        }
    )
