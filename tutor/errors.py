"""Turn exceptions from a run into sentences a learner can act on (never a traceback)."""

from __future__ import annotations

import traceback


def is_out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    return name in ("OutOfMemoryError", "MemoryError") or "out of memory" in text


def describe(exc: BaseException) -> str:
    """One or two sentences: what went wrong and what to do about it."""
    from tutor.devices import DeviceError

    if isinstance(exc, DeviceError):
        return str(exc)
    if is_out_of_memory(exc):
        return (
            "The run ran out of memory. Try a smaller batch_size or fewer samples "
            f"(--set batch_size=32). Details: {_first_line(exc)}"
        )
    if isinstance(exc, FileNotFoundError):
        return f"A file was not found: {exc.filename or _first_line(exc)}."
    if isinstance(exc, PermissionError):
        return f"Permission denied: {exc.filename or _first_line(exc)}."
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: {_first_line(exc)}"
    return f"The experiment failed with {type(exc).__name__}: {_first_line(exc)}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def where(exc: BaseException) -> str:
    """'file.py:123 in fn' of the innermost frame, for the details line."""
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return ""
    f = tb[-1]
    return f"{f.filename}:{f.lineno} in {f.name}"
