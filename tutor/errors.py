"""Turn exceptions from a run into sentences a learner can act on (never a traceback)."""

from __future__ import annotations

import re


def is_out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    # The CPU allocator says "DefaultCPUAllocator: can't allocate memory" (an address-space or
    # data limit, or an overcommit refusal); CUDA says "CUDA out of memory".
    return (name in ("OutOfMemoryError", "MemoryError") or "out of memory" in text
            or "can't allocate memory" in text or "cannot allocate memory" in text)


def describe(exc: BaseException) -> str:
    """One or two sentences: what went wrong and what to do about it."""
    from tutor.experiments.devices import DeviceError

    if isinstance(exc, DeviceError):
        return str(exc)
    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):  # pydantic: bad parameters
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ())) or 'value'}: {e.get('msg', 'invalid')}"
                 f" (got {e.get('input')!r})" for e in exc.errors()[:3]]
        return "Invalid parameter " + "; ".join(parts) + "."
    if isinstance(exc, KeyError) and exc.args:  # e.g. an unknown experiment: the message is the argument
        return str(exc.args[0])
    if is_out_of_memory(exc):
        asked = re.search(r"tried to allocate (\d+) bytes", str(exc))
        details = (f"an allocation of {int(asked.group(1)) / 2**20:,.0f} MiB failed"
                   if asked else _first_line(exc))
        return f"Out of memory: {details}. Try a smaller batch_size or fewer samples."
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
