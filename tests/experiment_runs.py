"""One run of an experiment, in this process, for the experiment tests."""

from __future__ import annotations

from typing import Any

from tutor import experiments
from tutor.experiments.events import Event, Finished, Started


def run_experiment(name: str, values: dict[str, Any] | None = None,
                   device: str = "cpu") -> tuple[list[Event], dict[str, Any]]:
    """(events, metrics): the run must start with Started, end with Finished, and report every
    metric the registry declares for it; a run whose repeats spread (NAME_low, NAME_high) also
    says what else the machine was doing meanwhile (noise_why), and no other run does."""
    events = list(experiments.start(name, values or {}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    metrics = events[-1].metrics
    assert set(experiments.get(name).metrics) <= set(metrics), set(experiments.get(name).metrics) - set(metrics)
    spread = any(k.endswith("_low") and k[:-4] in metrics and metrics[k] is not None for k in metrics)
    assert spread == isinstance(metrics.get("noise_why"), str), (spread, metrics.get("noise_why"))
    return events, metrics
