"""The only bridge between experiments (plain generators) and the TUI.

An experiment runs in a Textual thread worker. Between events the worker checks
`is_cancelled`, so escape (or quitting) stops it at the next event; the generator is
closed so its `finally` blocks run. Step events are throttled to about 15 per second,
everything else is delivered. Exceptions never escape: they become a `RunEnded` with
status "failed" and a sentence from `tutor.errors.describe`.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from textual.message import Message
from textual.widget import Widget
from textual.worker import Worker, get_current_worker

from tutor.events import Event, Finished, Started, Step

STEP_INTERVAL_S = 1 / 15  # UI updates for Step events: at most ~15 per second

_run_ids = itertools.count(1)


@dataclass
class RunUpdate(Message):
    """One event from a running experiment (posted from the worker thread)."""

    run_id: int
    event: Event

    def can_replace(self, message: Message) -> bool:
        # A newer Step replaces an older queued Step of the same run: the UI only needs the latest.
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


def start(owner: Widget, run_id: int, experiment: str, params: dict[str, Any], device: str | None) -> Worker:
    """Run `experiment` in a thread worker; messages go to `owner`."""
    return owner.run_worker(
        lambda: _pump(owner, run_id, experiment, params, device),
        name=f"run:{experiment}",
        group="experiment",
        thread=True,
        exclusive=True,
        exit_on_error=False,
    )


def _pump(owner: Widget, run_id: int, experiment: str, params: dict[str, Any], device: str | None) -> None:
    from tutor import errors, experiments

    worker = get_current_worker()
    started: dict[str, Any] = {}
    gen = None
    try:
        gen = experiments.start(experiment, params, device)
        last_step_post = 0.0
        pending_step: Step | None = None
        for event in gen:
            if worker.is_cancelled:
                owner.post_message(RunEnded(run_id, "cancelled", device=started))
                return
            if isinstance(event, Step):
                now = time.monotonic()
                if now - last_step_post < STEP_INTERVAL_S:
                    pending_step = event
                    continue
                last_step_post, pending_step = now, None
            elif pending_step is not None:
                owner.post_message(RunUpdate(run_id, pending_step))
                pending_step = None
            if isinstance(event, Started):
                started = {"device": event.device, "name": event.device_name, "dataset": event.dataset}
            owner.post_message(RunUpdate(run_id, event))
            if isinstance(event, Finished):
                owner.post_message(RunEnded(run_id, "finished", dict(event.metrics), device=started))
                return
        owner.post_message(RunEnded(run_id, "failed", error="the experiment ended without results", device=started))
    except Exception as exc:  # noqa: BLE001 - every failure becomes a message, never a traceback
        if worker.is_cancelled:
            owner.post_message(RunEnded(run_id, "cancelled", device=started))
        else:
            owner.post_message(RunEnded(run_id, "failed", error=errors.describe(exc), device=started))
    finally:
        if gen is not None:
            gen.close()
