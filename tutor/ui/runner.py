"""The only bridge between experiments and the TUI.

An experiment runs in the engine process (tutor/experiments/engine.py: no GIL shared with the UI, so
the timings on screen are the machine's). A Textual thread worker relays its events as
messages; when the worker is cancelled (escape, quitting) it asks the engine to stop at
the next event. Step events are throttled (5-15 per second, by core count), everything else is
delivered. Exceptions never escape: they become a `RunEnded` with status "failed" and a
sentence a learner can act on.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, get_current_worker

from tutor.experiments.events import Event, Finished, Started, Step, Waiting

if TYPE_CHECKING:
    from tutor.experiments.engine import Engine

# UI updates for Step events. Each frame costs the UI process ~25 ms of CPU, taken from
# PyTorch's threads when the machine has only two cores: there, 15 updates/s slowed training
# by about 20% and 5/s by 8-19% (bench/tui_overhead.py), so such machines get 2/s.
STEP_INTERVAL_S = 1 / 15 if (os.cpu_count() or 1) >= 4 else 1 / 2

_run_ids = itertools.count(1)


@dataclass
class RunUpdate(Message):
    """One event from a running experiment (posted from the worker thread)."""

    run_id: int
    event: Event

    def can_replace(self, message: Message) -> bool:
        # A newer Step replaces an older queued Step of the same run: the UI only needs the latest.
        if isinstance(self.event, Waiting):  # likewise the place in a class's line
            return (
                isinstance(message, RunUpdate) and isinstance(message.event, Waiting) and message.run_id == self.run_id
            )
        return (
            isinstance(message, RunUpdate)
            and isinstance(self.event, Step)
            and isinstance(message.event, Step)
            and message.run_id == self.run_id
            and message.event.label == self.event.label
        )


@dataclass
class RunEnded(Message):
    run_id: int
    status: str  # "finished" | "cancelled" | "failed"
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    device: dict[str, Any] = field(default_factory=dict)


def new_run_id() -> int:
    return next(_run_ids)


def start(
    owner: Widget,
    run_id: int,
    experiment: str,
    params: dict[str, Any],
    device: str | None,
    engine: Engine,
    run_now: Callable[[], bool] | None = None,
) -> Worker:
    """Run `experiment` in the engine process; a thread worker relays its events to `owner`.
    `run_now`: polled while the run waits in a class's line; true, it runs at once, timing shared."""
    return owner.run_worker(
        lambda: _pump(owner, engine, run_id, experiment, params, device, run_now),
        name=f"run:{experiment}",
        group="experiment",
        thread=True,
        exclusive=True,
        exit_on_error=False,
    )


def _pump(
    owner: Widget,
    engine: Engine,
    run_id: int,
    experiment: str,
    params: dict[str, Any],
    device: str | None,
    run_now: Callable[[], bool] | None = None,
) -> None:
    from tutor.experiments.engine import EngineDied

    worker = get_current_worker()
    started: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    last_step_post = 0.0
    # The latest Step not yet shown, per series: the ranks of a distributed run each keep theirs.
    pending: dict[str, Step] = {}
    try:
        for message in engine.run(experiment, params, device, cancelled=lambda: worker.is_cancelled, run_now=run_now):
            if message[0] == "ended":
                _, status, error = message
                for step in pending.values():
                    owner.post_message(RunUpdate(run_id, step))
                if status == "finished" and not metrics:
                    status, error = "failed", "the experiment ended without results"
                owner.post_message(RunEnded(run_id, status, metrics if status == "finished" else {}, error, started))
                return
            event = message[1]
            if isinstance(event, Step):
                now = time.monotonic()
                if now - last_step_post < STEP_INTERVAL_S:
                    pending[event.label] = event
                    continue
                last_step_post = now
                pending.pop(event.label, None)
                for step in pending.values():  # the other series' latest, shown with this one
                    owner.post_message(RunUpdate(run_id, step))
                pending.clear()
            elif pending:
                for step in pending.values():
                    owner.post_message(RunUpdate(run_id, step))
                pending.clear()
            if isinstance(event, Started):
                started = {"device": event.device, "name": event.device_name, "dataset": event.dataset}
            elif isinstance(event, Finished):
                metrics = dict(event.metrics)
            owner.post_message(RunUpdate(run_id, event))
    except EngineDied as exc:
        owner.post_message(RunEnded(run_id, "failed", error=str(exc), device=started))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message, never a traceback
        from tutor import errors

        owner.post_message(RunEnded(run_id, "failed", error=errors.describe(exc), device=started))
