"""A run's turn on a device a class shares: the waiting, as events (the queue is measurement/slots.py).

`experiments.start` runs every experiment through `wait_turn` first: with no class folder it
returns at once; with one, the run stands in its device's line, and every POLL_S it yields a
`Waiting` (its place) so the screen shows it and a cancel, seen between events, stops it at once.
Its place is counted every LOOK_S (first in line: every POLL_S), so a class of a hundred waiting
costs the run that is timing little CPU.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from pathlib import Path

from tutor.experiments.events import Event, Note, Waiting
from tutor.measurement import slots


def wait_turn(key: str, experiment: str, folder: Path | None = None) -> Generator[Event, None, slots.Turn]:
    """Wait for a slot of device `key`; returns the Turn to release when the run ends. Closing the
    generator (a cancel) leaves the line. `slots.choose_run_now()` (at any time; offered after
    CHOICE_S) stops the waiting: the run goes ahead with its timing marked shared."""
    queue = slots.queue_for(key, folder)
    if queue is None:
        return slots.Turn()
    if slots.fcntl is None:
        yield Note(slots.NO_FCNTL, "warning")
        return slots.Turn()
    try:
        ticket = queue.join(experiment)
    except OSError as e:
        yield Note(f"The class queue in {queue.dir} cannot be used ({e.strerror or e}): timed without it.", "warning")
        return slots.Turn()
    words = slots.device_words(key)
    started = time.monotonic()
    waited = False
    ahead, running, looked = 0, 0, -slots.LOOK_S
    try:
        while True:
            if ahead == 0 or time.monotonic() - looked >= slots.LOOK_S:  # a long line is counted less often
                ahead, running = ticket.look()
                looked = time.monotonic()
            if ahead == 0 and ticket.take():
                break
            elapsed = time.monotonic() - started
            if slots.run_now_chosen():
                ticket.leave()
                others = ", ".join(f"{h.user} (pid {h.pid})" for h in queue.holders()) or "another run"
                yield Note(
                    f"Running now beside {others} on {words}: the timing is shared, so no prediction "
                    "is graded on this run.",
                    "warning",
                )
                return slots.Turn(shared=True, waited_s=elapsed)
            waited = True
            yield Waiting(key, words, ahead, running, round(elapsed, 1), elapsed >= slots.CHOICE_S)
            time.sleep(slots.POLL_S)
    except BaseException:  # a cancel (GeneratorExit), ctrl+c: out of the line at once
        ticket.release()
        raise
    elapsed = time.monotonic() - started
    if waited:
        yield Note(f"Your turn on {words} after {elapsed:.0f} s in line: the timing is yours alone.")
    return slots.Turn(ticket, waited_s=elapsed)
