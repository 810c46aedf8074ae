"""What an experiment tells the world while it runs.

Experiments are generators that yield these small, frozen dataclasses. They carry
plain floats and strings only (never tensors), so the same stream can feed the TUI,
the headless CLI (`gpututor run --json`) and the tests. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

Metric = float | int | str | bool | None


@dataclass(frozen=True)
class Started:
    """First event of every run: where it runs and on what data."""

    experiment: str
    device: str  # "cuda", "cuda:1", "mps", "cpu", "meta"
    device_name: str  # "NVIDIA H100 80GB HBM3", "AMD EPYC (2 threads)"
    dataset: str  # "MNIST (../shared/data)", "synthetic digits (MNIST not found: ...)"
    detail: str = ""


@dataclass(frozen=True)
class Step:
    """One optimiser step (throttled by the producer: not necessarily every step)."""

    step: int  # 1-based, counted across epochs
    total: int  # steps planned for the whole run (0 if unknown)
    loss: float
    seconds: float  # wall-clock since training started (device-synchronised)
    samples_per_s: float
    epoch: int = 1
    label: str = ""  # which series this belongs to, e.g. "cpu" / "cuda" in a comparison


@dataclass(frozen=True)
class Epoch:
    epoch: int
    epochs: int
    train_loss: float
    test_acc: float  # 0..1
    seconds: float  # this epoch's training time (device-synchronised)
    samples_per_s: float
    label: str = ""


@dataclass(frozen=True)
class Note:
    """A sentence for the learner: what was done and why ("No GPU here: ...")."""

    text: str
    level: str = "info"  # "info" | "warning" | "result" | "figure" (a chart in characters: shown as it is, unwrapped)


@dataclass(frozen=True)
class Table:
    """A small results table (comparisons: cpu vs cuda, fp32 vs amp)."""

    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Waiting:
    """In line for the device a run times, on a machine a class shares (measurement/slots.py):
    sent every fraction of a second while it waits, before the run's own events."""

    device: str  # the slot's device: "cuda:0", "cpu"
    device_words: str  # "the GPU", "the CPU"
    waiting_ahead: int  # live tickets ahead of this run in the line
    running: int  # slots of the device held now
    waited_s: float
    choice: bool = False  # waited past a minute: the learner may run now, the timing marked shared

    def text(self) -> str:
        """ "waiting for the GPU: 2 runs ahead of you (1 running, 1 waiting) · 12 s" """
        ahead = self.running + self.waiting_ahead
        runs = f"{ahead} run{'s' if ahead != 1 else ''} ahead of you"
        return (
            f"waiting for {self.device_words}: {runs} "
            f"({self.running} running, {self.waiting_ahead} waiting) · {self.waited_s:.0f} s"
        )


@dataclass(frozen=True)
class Finished:
    """Last event of a successful run: the metrics a prediction or check compares with."""

    metrics: dict[str, Metric] = field(default_factory=dict)


Event = Started | Step | Epoch | Note | Table | Waiting | Finished

_NAMES = {
    Started: "started",
    Step: "step",
    Epoch: "epoch",
    Note: "note",
    Table: "table",
    Waiting: "waiting",
    Finished: "finished",
}


def event_name(event: Event) -> str:
    return _NAMES[type(event)]


def to_json(event: Event) -> dict[str, Any]:
    """{"event": "step", ...fields}: one line of `gpututor run --json`."""
    return {"event": event_name(event), **asdict(event)}
