"""lr-scaling: a k times bigger batch over the same samples takes k times fewer steps.

The course's lab tips "batch size affects convergence: larger batch = adjust learning rate" and
stops there. This trains the course's MNISTClassifier with plain SGD for one pass over the same
images, the same starting weights and the same sample order per seed, at the base batch and lr,
at k x the batch with the same lr, and at k x the batch with k x the lr: the linear scaling rule
of Goyal et al. (2017, "Accurate, Large Minibatch SGD"). A last row applies the rule at a much
larger k, where the learning rate is past what the loss surface allows and training falls apart.
Each setting runs with a few seeds; the spread of the seeds' accuracy drops is the interval a
prediction is judged by.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from tutor.experiments import data as mnist
from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Step, Table
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.specs.lr_scaling import LrScalingParams
from tutor.experiments.training import seed_everything, train_epoch
from tutor.measurement.intervals import bounds, median_interval
from tutor.measurement.timing import Stopwatch, median
from tutor.present import metric

FAILED_ACCURACY = 0.2  # at most twice chance (10 classes): the run learned nothing usable


@dataclass(frozen=True)
class Setting:
    key: str  # "base", "same_lr", "scaled", "limit"
    batch_size: int
    lr: float
    what: str  # its row's name


@dataclass(frozen=True)
class Result:
    accuracy: float  # 0..1 on the test images
    loss: float  # test cross-entropy, NaN or inf when training diverged
    steps: int

    @property
    def failed(self) -> bool:
        return not math.isfinite(self.loss) or self.accuracy < FAILED_ACCURACY


def settings(p: LrScalingParams) -> list[Setting]:
    k, big = p.scale, p.batch_size * p.scale
    rows = [
        Setting("base", p.batch_size, p.lr, "base"),
        Setting("same_lr", big, p.lr, "same lr"),
        Setting("scaled", big, p.lr * k, f"lr x {k}"),
    ]
    if p.limit_scale:
        rows.append(Setting("limit", p.batch_size * p.limit_scale, p.lr * p.limit_scale, f"lr x {p.limit_scale}"))
    return rows


@torch.no_grad()
def test_scores(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy 0..1, mean cross-entropy) on the test images, in one pass."""
    model.eval()
    logits = model(x)
    accuracy = (logits.argmax(dim=1) == y).float().mean().item()
    loss = nn.functional.cross_entropy(logits, y).item()
    model.train()
    return accuracy, loss


def train_once(setting: Setting, seed: int, data: mnist.MnistData, device: str, label: str) -> Iterator[Step | Result]:
    """One pass of plain SGD over the training images; yields Steps, then the Result."""
    seed_everything(seed)  # the same starting weights for every setting of a seed
    model = MNISTClassifier().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=setting.lr)
    order = torch.Generator().manual_seed(seed)  # and the same sample order: only the grouping differs
    total = math.ceil(data.train_x.shape[0] / setting.batch_size)
    steps = 0
    clock = Stopwatch(device)
    for report in train_epoch(
        model,
        optimizer,
        mnist.batches(data.train_x, data.train_y, setting.batch_size, generator=order),
        device,
        report_every=max(total // 20, 1),
    ):
        steps = report.steps
        with clock.paused():
            elapsed = clock.elapsed()
            yield Step(
                report.steps, total, report.loss, elapsed, report.samples / elapsed if elapsed else 0.0, label=label
            )
    accuracy, loss = test_scores(model, data.test_x, data.test_y)
    yield Result(accuracy, loss, steps)


def finite_or_inf(value: float) -> float:
    """A diverged loss (NaN or inf) as inf, so a median of losses sorts and says "diverged"."""
    return value if math.isfinite(value) else math.inf


def drops(base: list[Result], other: list[Result]) -> list[float]:
    """Accuracy lost against the base, seed by seed (the same seed: the same start and order)."""
    return [b.accuracy - o.accuracy for b, o in zip(base, other, strict=True)]


def measure(p: LrScalingParams, dev: Device) -> Iterator[Event]:
    device = dev.torch_device
    data = mnist.load(device, train_samples=p.train_samples, test_samples=p.test_samples)
    n_train, n_test = data.train_x.shape[0], data.test_x.shape[0]
    rows = settings(p)
    yield Started(
        "lr-scaling",
        device,
        dev.name,
        data.description,
        f"plain SGD, one pass over {n_train:,} images per run, batch {p.batch_size} at lr {p.lr:g} "
        f"against {p.scale}x both, {p.seeds} seed(s) each",
    )

    seeds = [p.seed + i for i in range(p.seeds)]
    results: dict[str, list[Result]] = {}
    for s in rows:
        results[s.key] = []
        for seed in seeds:
            label = f"batch {s.batch_size}, lr {s.lr:g}" + (f", seed {seed}" if p.seeds > 1 else "")
            for event in train_once(s, seed, data, device, label):
                if isinstance(event, Result):
                    results[s.key].append(event)
                else:
                    yield event

    def med(key: str, field: str) -> float | None:
        """The median over seeds; None where it is a diverged loss (or the row was left out)."""
        if key not in results:
            return None
        value = median([finite_or_inf(getattr(r, field)) for r in results[key]])
        return value if math.isfinite(value) else None

    table = []
    for s in rows:
        accs = [r.accuracy for r in results[s.key]]
        losses = [r.loss for r in results[s.key]]
        spread = f"{min(accs) * 100:.1f}-{metric(max(accs), '%')}" if len(accs) > 1 else "-"
        loss = median([finite_or_inf(v) for v in losses])
        table.append(
            [
                s.what,
                f"{s.batch_size:,}",
                f"{s.lr:g}",
                f"{results[s.key][0].steps:,}",
                metric(median(accs), "%"),
                spread,
                f"{loss:.3f}" if math.isfinite(loss) else "diverged",
            ]
        )
    yield Table(
        f"One pass over {n_train:,} images; test accuracy on {n_test:,}",
        ["setting", "batch", "lr", "steps", "accuracy", "seeds", "test loss"],
        table,
    )

    same = median_interval(drops(results["base"], results["same_lr"]))
    scaled = median_interval(drops(results["base"], results["scaled"]))
    assert same is not None and scaled is not None  # accuracies are always finite numbers
    same_low, same_high = bounds(same)
    scaled_low, scaled_high = bounds(scaled)
    base_acc, same_acc, scaled_acc = (med(k, "accuracy") for k in ("base", "same_lr", "scaled"))
    assert base_acc is not None and same_acc is not None and scaled_acc is not None
    gap = base_acc - same_acc
    recovered = (scaled_acc - same_acc) / gap if gap > 0 else None
    base_steps, big_steps = results["base"][0].steps, results["same_lr"][0].steps

    def points(v: float) -> str:
        return f"{v * 100:.1f}"

    spread = f" (seeds: {points(same.low)} to {points(same.high)})" if same_low is not None else ""
    yield Note(
        f"The same {n_train:,} images, one pass each. Batch {p.batch_size * p.scale} at lr {p.lr:g} took "
        f"{big_steps:,} steps to batch {p.batch_size}'s {base_steps:,} and ended {points(same.median)} points "
        f"behind{spread}. Each step's gradient is a mean over its batch, no larger for a bigger batch, "
        f"so {p.scale}x fewer steps of the same lr move the weights about {p.scale}x less far.",
        "result",
    )
    won = f": it won back {metric(recovered, '%')} of the gap" if recovered is not None else ""
    yield Note(
        f"With the lr scaled by {p.scale} too ({p.lr * p.scale:g}), the big batch ended "
        f"{points(abs(scaled.median))} points {'behind' if scaled.median >= 0 else 'ahead'}{won}. "
        "That is the linear scaling rule (Goyal et al., 2017): k x the batch, k x the lr.",
        "result",
    )
    limit_failed = None
    if "limit" in results:
        limit_failed = sum(r.failed for r in results["limit"])
        big = p.batch_size * p.limit_scale
        yield Note(
            f"The rule has a ceiling. At {p.limit_scale}x (batch {big:,}, lr {p.lr * p.limit_scale:g}) "
            f"{limit_failed} of {p.seeds} seed(s) failed: test loss NaN, or accuracy under "
            f"{FAILED_ACCURACY:.0%} (chance is 10%). A step that large overshoots, whatever the batch; "
            "Goyal et al. needed a 5-epoch lr warm-up to reach batch 8,192 on ImageNet.",
            "result" if limit_failed else "info",
        )
    if dev.kind == "cpu":
        yield Note(
            "On a GPU the same steps reach about the same accuracies, only sooner; and a big batch's "
            "steps fill a GPU better than a small one's, which is why people want the big batch."
        )

    yield Finished(
        {
            "base_accuracy": base_acc,
            "same_lr_accuracy": same_acc,
            "scaled_accuracy": scaled_acc,
            "limit_accuracy": med("limit", "accuracy"),
            "base_loss": med("base", "loss"),
            "same_lr_loss": med("same_lr", "loss"),
            "scaled_loss": med("scaled", "loss"),
            "limit_loss": med("limit", "loss"),
            "same_lr_drop": same.median,
            "same_lr_drop_low": same_low,
            "same_lr_drop_high": same_high,
            "scaled_drop": scaled.median,
            "scaled_drop_low": scaled_low,
            "scaled_drop_high": scaled_high,
            "recovered": recovered,
            "limit_failed": limit_failed,
            "base_steps": base_steps,
            "big_steps": big_steps,
            "seeds": p.seeds,
            "device": device,
        }
    )
