"""Turn exceptions from a run into sentences a learner can act on (never a traceback)."""

from __future__ import annotations


def is_out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    return name in ("OutOfMemoryError", "MemoryError") or "out of memory" in text


def describe(exc: BaseException) -> str:
    """One or two sentences: what went wrong and what to do about it."""
    from tutor.devices import DeviceError

    if isinstance(exc, DeviceError):
        return str(exc)
    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):  # pydantic: bad parameters
        parts = [f"{'.'.join(str(x) for x in e.get('loc', ())) or 'value'}: {e.get('msg', 'invalid')}"
                 f" (got {e.get('input')!r})" for e in exc.errors()[:3]]
        return "Invalid parameter " + "; ".join(parts) + "."
    if isinstance(exc, KeyError) and exc.args:  # e.g. an unknown experiment: the message is the argument
        return str(exc.args[0])
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
