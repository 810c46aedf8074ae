"""Which machine a measurement came from, so one made on another box is never graded here.

Every stored run carries the host name and the torch version it ran with, and the measurement
method (tutor/measurement/method.py) (torch's version is
read from its installed metadata: torch itself is not imported). A learner who moves from a
laptop to a GPU server, or upgrades torch, measures again rather than being judged against the
old machine's numbers. Runs stored before the stamp existed carry none and are taken as they are.
"""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from typing import Any

from tutor.measurement import method


@functools.cache
def stamp() -> dict[str, Any]:
    """This machine, the versions a run here measures with, and the measurement method."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = ""
    return {"host": platform.node(), "torch_version": torch_version, method.METHOD_KEY: method.METHOD}


def measured_here(device: dict[str, Any] | None) -> bool:
    """True if a stored run's device record comes from this machine and torch, or says nothing."""
    if not device or "host" not in device:
        return True
    here = stamp()
    return bool(
        device.get("host") == here["host"]
        and device.get("torch_version", here["torch_version"]) == here["torch_version"]
    )


def elsewhere(device: dict[str, Any]) -> str:
    """Where a run from another machine came from, in words."""
    return f"{device.get('host') or 'another machine'} (torch {device.get('torch_version') or '?'})"
