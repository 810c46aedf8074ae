"""Run a learner's program in its own Python process, and survive whatever it does.

`run_code(code, workdir, timeout=..., memory_mb=...)` writes `workdir/solution.py`, runs it with
`python -m tutor.exercises.child solution.py` in a new session (process group), streams the merged
stdout/stderr to `on_output`, and kills the whole group (forked children too) when the program
ends, times out or is cancelled. The output kept is bounded (head + tail), so a flood can neither
freeze the caller nor fill its memory.

Memory: the child limits itself at start-up (tutor/exercises/child.py), not through preexec_fn,
which is unsafe in a caller that runs threads (the TUI does). No torch here: the TUI imports this.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.paths import route_torch_caches
from tutor.threads import set_env as set_thread_env

SOLUTION = "solution.py"
REPORTS = ".reports.jsonl"
ERROR_FILE = ".error.json"
HEAD_LINES, HEAD_BYTES = 200, 64 * 1024
TAIL_LINES, TAIL_BYTES = 300, 192 * 1024
FLUSHES_PER_S = 10  # on_output calls per second at most (coalesced)
CHUNK_BYTES = 64 * 1024  # most text one on_output call carries; the rest of a flood is skipped
DRAIN_S = 1.0  # after the program ends, how long to read what is still in the pipe
MAX_REPORTS = 10_000
_MEMORY_TEXT = re.compile(r"MemoryError|can't allocate memory|std::bad_alloc|out of memory", re.I)


@dataclass
class SandboxResult:
    exit_code: int | None  # None when killed by a signal
    signal: str | None = None  # "SIGSEGV", "SIGKILL" (also ours, on timeout/cancel)
    timed_out: bool = False
    cancelled: bool = False
    memory_error: bool = False
    output: str = ""  # merged stdout+stderr, head and tail kept
    dropped_bytes: int = 0
    reports: dict[str, Any] = field(default_factory=dict)
    traceback: str | None = None  # learner-facing, solution.py frames marked '>>'
    error_type: str | None = None
    error_message: str | None = None
    error_line: int | None = None  # line in solution.py
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The program ran to the end and exited 0."""
        return self.exit_code == 0 and not (self.timed_out or self.cancelled or self.signal)

    def problem(self) -> str | None:
        """One sentence on why the run did not finish cleanly, or None."""
        if self.cancelled:
            return "the run was stopped"
        if self.timed_out:
            return "the program ran past its time limit and was stopped"
        if self.memory_error:
            return "the program ran out of memory (it hit the exercise's memory limit)"
        if self.error_type:
            line = f" at line {self.error_line}" if self.error_line else ""
            first = (self.error_message or "").strip().split("\n", 1)[0]
            first = first if len(first) <= 300 else first[:299] + "…"
            return f"the program raised {self.error_type}{line}: {first}"
        if self.signal:
            return f"the program crashed ({self.signal})"
        if self.exit_code not in (0, None):
            return f"the program exited with code {self.exit_code}"
        return None

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class _Capture:
    """The first HEAD lines/bytes and the last TAIL lines/bytes of a stream."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.head_bytes = 0
        self.head_full = False
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text.encode("utf-8", "replace"))
        if not self.head_full:
            for line in text.splitlines(keepends=True):
                if self.head_full:
                    self.tail += line
                    continue
                self.head.append(line)
                self.head_bytes += len(line)
                if len(self.head) >= HEAD_LINES or self.head_bytes >= HEAD_BYTES:
                    self.head_full = True
            return
        self.tail += text
        if len(self.tail) > 2 * TAIL_BYTES:
            self.tail = self.tail[-TAIL_BYTES:]

    def result(self) -> tuple[str, int]:
        head = "".join(self.head)
        tail = self.tail[-TAIL_BYTES:]
        lines = tail.splitlines(keepends=True)
        if len(lines) > TAIL_LINES:
            tail = "".join(lines[-TAIL_LINES:])
        kept = len(head.encode("utf-8", "replace")) + len(tail.encode("utf-8", "replace"))
        dropped = max(0, self.total - kept)
        if dropped:
            sep = "" if head.endswith("\n") or not head else "\n"
            return f"{head}{sep}[... {dropped:,} bytes of output not kept ...]\n{tail}", dropped
        return head + tail, 0


class _Flusher:
    """Coalesces output into at most FLUSHES_PER_S calls, each at most CHUNK_BYTES long."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.on_output = on_output
        self.pending: list[str] = []
        self.size = 0
        self.skipped = 0
        self.last = 0.0

    def add(self, text: str) -> None:
        if self.on_output is None:
            return
        room = CHUNK_BYTES - self.size
        if len(text) > room:
            self.skipped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            self.pending.append(text)
            self.size += len(text)

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.on_output is None or not (self.pending or self.skipped):
            return
        if not force and now - self.last < 1.0 / FLUSHES_PER_S:
            return
        text = "".join(self.pending)
        if self.skipped:
            text += f"\n[... {self.skipped:,} characters skipped in this view ...]\n"
        self.pending, self.size, self.skipped, self.last = [], 0, 0, now
        self.on_output(text)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_reports(path: Path) -> dict[str, Any]:
    reports: dict[str, Any] = {}
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if i >= MAX_REPORTS:
                    break
                try:
                    item = json.loads(line)
                except (ValueError, RecursionError):  # not JSON, or "[[[[..." a program wrote
                    continue
                if isinstance(item, dict):
                    reports.update(item)
    except OSError:
        pass
    return reports


def _read_error(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            data = json.loads(f.read(1_000_000))  # ours is a few KB; a program may write anything
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


TRACEBACK_CHARS = 20_000  # the frames that matter are the last ones


def _tail(text: str) -> str:
    """A traceback as the learner reads it: a 100k-character exception message is cut."""
    if len(text) <= TRACEBACK_CHARS:
        return text
    return f"[… {len(text) - TRACEBACK_CHARS:,} characters cut …]\n" + text[-TRACEBACK_CHARS:]


def _child_env(workdir: Path, memory_mb: int, env: dict | None) -> dict[str, str]:
    out = dict(os.environ)
    if env:
        out.update({str(k): str(v) for k, v in env.items()})
    # The child imports tutor.exercises.child even where gpututor is not installed (a checkout).
    root = str(Path(__file__).resolve().parents[2])
    out["PYTHONPATH"] = os.pathsep.join(p for p in (root, out.get("PYTHONPATH", "")) if p)
    out["GPUTUTOR_REPORT"] = str(workdir / REPORTS)
    out["GPUTUTOR_SANDBOX_MEMORY_MB"] = str(memory_mb)
    route_torch_caches(out)
    set_thread_env(out)  # the learner's own torch.set_num_threads still wins in their code
    out["PYTHONUNBUFFERED"] = "1"
    out["PYTHONIOENCODING"] = "utf-8:backslashreplace"
    return out


def run_code(
    code: str,
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int,
    on_output: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    env: dict | None = None,
) -> SandboxResult:
    """Run `code` as workdir/solution.py in a separate process; never raises for what it does."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / SOLUTION).write_text(code, encoding="utf-8")
    for stale in (REPORTS, ERROR_FILE):
        (workdir / stale).unlink(missing_ok=True)

    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tutor.exercises.child", SOLUTION],
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: killpg reaches forked children
        env=_child_env(workdir, memory_mb, env),
    )
    pgid = proc.pid  # the session leader's pid is the group id
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    capture, flusher = _Capture(), _Flusher(on_output)
    timed_out = was_cancelled = False
    eof = False
    exited_at: float | None = None

    def take(data: bytes) -> None:
        text = decoder.decode(data)
        if text:
            capture.add(text)
            flusher.add(text)

    try:
        while True:
            if not eof:
                ready, _, _ = select.select([fd], [], [], 0.05)
                if ready:
                    # Bounded per pass, so a flood still lets us check the clock and cancel.
                    for _ in range(16):
                        try:
                            data = os.read(fd, 65536)
                        except BlockingIOError:
                            break
                        if not data:
                            eof = True
                            break
                        take(data)
            else:
                time.sleep(0.05)
            flusher.flush()
            if exited_at is None and proc.poll() is not None:
                exited_at = time.monotonic()
                _kill_group(pgid)  # children it left behind would keep the pipe open
            if exited_at is not None and (eof or time.monotonic() - exited_at > DRAIN_S):
                break
            if exited_at is None:
                if cancelled():
                    was_cancelled = True
                elif time.monotonic() - start > timeout:
                    timed_out = True
                if was_cancelled or timed_out:
                    _kill_group(pgid)
                    proc.wait()
                    exited_at = time.monotonic()
    finally:
        _kill_group(pgid)
        if proc.poll() is None:
            proc.wait()
        take(b"")
        tail = decoder.decode(b"", final=True)
        if tail:
            capture.add(tail)
            flusher.add(tail)
        proc.stdout.close()
    flusher.flush(force=True)

    rc = proc.returncode
    sig = None
    if rc is not None and rc < 0:
        try:
            sig = signal.Signals(-rc).name
        except ValueError:
            sig = f"signal {-rc}"
    output, dropped = capture.result()
    err = _read_error(workdir / ERROR_FILE)
    error_type = err.get("type") if isinstance(err.get("type"), str) else None
    message = str(err.get("message", ""))[:2000] if error_type else None
    memory_error = error_type == "MemoryError" or bool(
        error_type and _MEMORY_TEXT.search(message or "")
    ) or bool(sig and not (timed_out or was_cancelled) and _MEMORY_TEXT.search(output[-4000:]))
    line = err.get("line")
    return SandboxResult(
        exit_code=None if sig else rc,
        signal=sig,
        timed_out=timed_out,
        cancelled=was_cancelled,
        memory_error=memory_error,
        output=output,
        dropped_bytes=dropped,
        reports=_read_reports(workdir / REPORTS),
        traceback=_tail(err.get("traceback")) if isinstance(err.get("traceback"), str) else None,
        error_type=error_type,
        error_message=message,
        error_line=line if isinstance(line, int) else None,
        seconds=time.monotonic() - start,
    )
