"""Turn exceptions from a run into sentences a learner can act on (never a traceback)."""

from __future__ import annotations

import re

# What a rank of a multi-process job says when another rank died while it waited on it in a
# collective (gloo: the socket closed; NCCL: "remote process exited"): an echo, never the cause.
PEER_GONE = re.compile(r"Connection (?:closed|reset) by peer|remote process exited|Broken pipe", re.I)


def is_out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    # The CPU allocator says "DefaultCPUAllocator: can't allocate memory" (an address-space or
    # data limit, or an overcommit refusal); CUDA says "CUDA out of memory".
    return (
        name in ("OutOfMemoryError", "MemoryError")
        or "out of memory" in text
        or "can't allocate memory" in text
        or "cannot allocate memory" in text
    )


# What CUDA's and MPS's allocators say when the GPU is full (torch.OutOfMemoryError, or a RuntimeError
# from an older torch or another path), as opposed to the host's allocator.
_DEVICE_OUT_OF_MEMORY = re.compile(r"CUDA out of memory|MPS backend out of memory")


def is_device_out_of_memory(exc: BaseException) -> bool:
    """Out of GPU memory (CUDA's or MPS's allocator), as opposed to the host's."""
    return reports_device_out_of_memory(type(exc).__name__, str(exc))


def reports_device_out_of_memory(type_name: str | None, message: str | None) -> bool:
    """The same test for an error known only by its type's name and message (another process's)."""
    return type_name == "OutOfMemoryError" or bool(type_name and _DEVICE_OUT_OF_MEMORY.search(message or ""))


# torch's allocators count in powers of two whatever they print (MPS writes "MB" for MiB).
_UNITS = {
    "b": 1,
    "bytes": 1,
    "kb": 2**10,
    "mb": 2**20,
    "gb": 2**30,
    "tb": 2**40,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
# CPU: "you tried to allocate 123 bytes"; CUDA: "Tried to allocate 2.00 GiB"; MPS: "Tried to allocate 256.00 MB".
_ASKED = re.compile(r"tried to allocate ([\d.]+) ?(bytes|[kmgt]i?b|b)\b", re.I)
_FREE = re.compile(r"of which ([\d.]+ ?[KMGT]i?B) is free", re.I)
# CUDA, once a per-process fraction was set: "...; 256.00 MiB allowed; Of the allocated memory 0 bytes is
# allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated."
_SIZE = r"([\d.]+) ?(bytes|[KMGT]i?B)"
_ALLOWED = re.compile(_SIZE + r" allowed;", re.I)
_HELD = re.compile(_SIZE + r" is (?:allocated|reserved) by PyTorch", re.I)


def _bytes(found: re.Match[str] | None) -> float | None:
    if not found:
        return None
    try:
        return float(found.group(1)) * _UNITS[found.group(2).lower()]
    except (ValueError, KeyError):
        return None


def _asked_bytes(text: str) -> float | None:
    return _bytes(_ASKED.search(text))


def _process_limit(text: str, asked: float | None) -> str | None:
    """CUDA's per-process limit ("256.00 MiB") when it, not a full card, refused the allocation.
    The "allowed" clause stays in every message once a fraction was ever set (1.0 included), so
    compare as the allocator does: what this process reserves, plus the allocation, against it."""
    allowed = _ALLOWED.search(text)
    if not allowed:
        return None
    held = [_bytes(m) for m in _HELD.finditer(text)]  # allocated, and reserved but unallocated
    known = [h for h in held if h is not None]
    limit = _bytes(allowed)  # None when its figure does not parse ("1.2.3 MiB")
    if asked is not None and limit is not None and len(held) == len(known) == 2 and sum(known) + asked <= limit:
        return None  # within the limit: cudaMalloc itself failed, the card is full
    return f"{allowed.group(1)} {allowed.group(2)}"


def describe(exc: BaseException) -> str:
    """One or two sentences: what went wrong and what to do about it."""
    from tutor.experiments.devices import DeviceError

    if isinstance(exc, DeviceError):
        return str(exc)
    if type(exc).__name__ == "ValidationError" and hasattr(exc, "errors"):  # pydantic: bad parameters
        parts = [
            f"{'.'.join(str(x) for x in e.get('loc', ())) or 'value'}: {e.get('msg', 'invalid')}"
            f" (got {e.get('input')!r})"
            for e in exc.errors()[:3]
        ]
        return "Invalid parameter " + "; ".join(parts) + "."
    if isinstance(exc, KeyError) and exc.args:  # e.g. an unknown experiment: the message is the argument
        return str(exc.args[0])
    if is_out_of_memory(exc):
        text = str(exc)
        asked = _asked_bytes(text)
        details = f"an allocation of {asked / 2**20:,.0f} MiB failed" if asked is not None else _first_line(exc)
        where = "GPU " if is_device_out_of_memory(exc) else ""
        free, limit = _FREE.search(text), _process_limit(text, asked)
        if limit:  # the card may have room: this process's limit (the class's cap, say) said no
            details += f": it would take this process over its limit of {limit}"
        elif free:  # CUDA says what the card had left: on a shared GPU, others hold the rest
            details += f" with {free.group(1)} free on the GPU (other processes may hold the rest)"
        return f"Out of {where}memory: {details}. Try a smaller batch_size or fewer samples."
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
