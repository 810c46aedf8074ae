"""Run a learner's program in its own Python process, and survive whatever it does.

`run_code(code, workdir, timeout=..., memory_mb=...)` writes `workdir/solution.py`, runs it with
`python -m tutor.exercises.child solution.py` in a new session (process group), streams the merged
stdout/stderr to `on_output`, and kills the whole group (forked children too) when the program
ends, times out or is cancelled. The output kept is bounded (head + tail), so a flood can neither
freeze the caller nor fill its memory. On Linux that child is forked from a warm server that has
torch imported (tutor/exercises/forkserver.py) and then becomes the same `python -m` child; the
sandbox streams, times out and kills it the same way.

Memory: the child limits itself at start-up (tutor/exercises/child.py), not through preexec_fn,
which is unsafe in a caller that runs threads (the TUI does): host memory to `memory_mb`, GPU
memory to the shared-GPU cap it inherits in the environment (tutor/experiments/gpu_share.py).
No torch here: the TUI imports this.

`run_code(..., nproc=N)` runs the file under torchrun instead (`python -m torch.distributed.run
--standalone --nproc_per_node=N -m tutor.exercises.child solution.py`), each rank a sandbox child
with its own memory limit and files (`.ranks/`, `.error.json.RANK`, the reports, what it did).
torchrun starts every rank in a session of its own, which killing the sandbox's process group
does not reach; so each rank watches its parent and the owner (tutor/exercises/child.py), and
at the end, a timeout or a cancel the sandbox kills every process carrying this run's token in its
environment (Linux) and every rank that wrote its pid, and waits until they are gone. torchrun's
own log goes to `.launch/torchrun.log`, not the learner's screen: a rank's exception is shown as
that rank's traceback. A launch that fails before the learner's code ran (torchrun or a rank
aborting at start, the ranks failing to connect) is said in one sentence and tried once more.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.errors import PEER_GONE, reports_device_out_of_memory
from tutor.exercises import forkserver
from tutor.exercises.child import RANKS_DIR, per_rank, start_time
from tutor.experiments import gpu_share  # torch-free until a device is asked about
from tutor.paths import route_torch_caches
from tutor.present import number
from tutor.threads import decide as decide_threads
from tutor.threads import set_env as set_thread_env

SOLUTION = "solution.py"
REPORTS = ".reports.jsonl"
ERROR_FILE = ".error.json"
HEAD_LINES, HEAD_BYTES = 200, 64 * 1024
TAIL_LINES, TAIL_BYTES = 300, 192 * 1024
FLUSHES_PER_S = 10  # on_output calls per second at most (coalesced)
CHUNK_BYTES = 64 * 1024  # most text one on_output call carries; the rest of a flood is skipped
PARTIAL_S = 0.5  # how long on_output waits for the end of a line it has the start of
DRAIN_S = 1.0  # after the program ends, how long to read what is still in the pipe
MAX_REPORTS = 10_000
_MEMORY_TEXT = re.compile(r"MemoryError|can't allocate memory|std::bad_alloc|out of memory", re.I)
LAUNCH_DIR = ".launch"  # torchrun's log (LAUNCHER_LOG) and its --log-dir
LAUNCHER_LOG = "torchrun.log"
GONE_WAIT_S = 3.0  # after killing a launch's processes, how long to wait for them to be gone
# A rank's error that is the launch failing, not the learner's code: the ranks did not connect.
_CONNECT_FAILED = re.compile(
    r"connectFullMesh|Connection (?:closed|reset) by peer|Connection refused|"
    r"Socket Timeout|DistNetworkError|Broken pipe",
    re.I,
)


@dataclass
class SandboxResult:
    exit_code: int | None  # None when killed by a signal
    signal: str | None = None  # "SIGSEGV", "SIGKILL" (also ours, on timeout/cancel)
    timed_out: bool = False
    cancelled: bool = False
    memory_error: bool = False
    gpu_memory_error: bool = False  # the GPU's memory ran out, not the host's (memory_error is set too)
    gpu_memory_cap_mb: int | None = None  # the shared-GPU cap the program ran under (gpu_share.py)
    output: str = ""  # merged stdout+stderr, head and tail kept
    dropped_bytes: int = 0
    reports: dict[str, Any] = field(default_factory=dict)
    traceback: str | None = None  # learner-facing, solution.py frames marked '>>'
    error_type: str | None = None
    error_message: str | None = None
    error_line: int | None = None  # line in solution.py
    seconds: float = 0.0
    processes: int = 1  # ranks, when launched under torchrun
    error_rank: int | None = None  # the rank whose exception (or crash) is reported
    error_everywhere: bool = False  # every rank raised that same exception at the same line
    launch_problem: str | None = None  # the processes never got the learner's code running
    relaunched: bool = False  # the first launch failed before the code ran; this is the second

    @property
    def ok(self) -> bool:
        """The program ran to the end and exited 0."""
        return self.exit_code == 0 and not (self.timed_out or self.cancelled or self.signal or self.launch_problem)

    def problem(self) -> str | None:
        """One sentence on why the run did not finish cleanly, or None."""
        if self.cancelled:
            return "the run was stopped"
        if self.launch_problem:
            return self.launch_problem
        if self.timed_out:
            if self.processes > 1:
                return (
                    "the program ran past its time limit and was stopped (with several processes, one "
                    "waiting for the others at a collective step they never reach also ends this way)"
                )
            return "the program ran past its time limit and was stopped"
        where = f" in rank {self.error_rank}" if self.error_rank is not None and self.processes > 1 else ""
        if self.error_everywhere:
            where = " in every rank"
        if self.gpu_memory_error:  # the exercise's memory limit is host memory: not this
            cap = self.gpu_memory_cap_mb
            within = f" (this tutor caps each run at {number(cap)} MiB on the GPU)" if cap else ""
            return f"the program ran out of GPU memory{where}{within}"
        if self.memory_error:
            return f"the program ran out of memory{where} (it hit the exercise's memory limit)"
        if self.error_type:
            line = f" at line {self.error_line}" if self.error_line else ""
            first = (self.error_message or "").strip().split("\n", 1)[0]
            first = first if len(first) <= 300 else first[:299] + "…"
            return f"the program raised {self.error_type}{line}{where}: {first}"
        if self.signal:
            return f"the program crashed ({self.signal}){where}"
        if self.exit_code not in (0, None):
            return f"the program exited with code {self.exit_code}{where}"
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
    """Coalesces output into at most FLUSHES_PER_S calls, each at most CHUNK_BYTES long, each
    ending at a line's end: `print` writes its text and its newline apart, and a call between
    them would show the rest of the line as a line of its own (an empty one). A line without its
    end yet waits for it PARTIAL_S at most (a progress bar that rewrites one line with \\r)."""

    def __init__(self, on_output: Callable[[str], None] | None) -> None:
        self.on_output = on_output
        self.pending: list[str] = []
        self.size = 0
        self.skipped = 0
        self.last = 0.0
        self.since = 0.0  # when the text pending now began to arrive

    def add(self, text: str) -> None:
        if self.on_output is None:
            return
        room = CHUNK_BYTES - self.size
        if len(text) > room:
            self.skipped += len(text) - max(room, 0)
            text = text[: max(room, 0)]
        if text:
            if not self.pending:
                self.since = time.monotonic()
            self.pending.append(text)
            self.size += len(text)

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.on_output is None or not (self.pending or self.skipped):
            return
        if not force and now - self.last < 1.0 / FLUSHES_PER_S:
            return
        text, rest = "".join(self.pending), ""
        if not force and not self.skipped and not text.endswith("\n"):
            cut = text.rfind("\n") + 1
            if not cut and now - self.since < PARTIAL_S:
                return  # one line, still being written
            if cut:
                text, rest = text[:cut], text[cut:]
        if self.skipped:
            text += f"\n[... {self.skipped:,} characters skipped in this view ...]\n"
        self.pending, self.size, self.skipped, self.last = [rest] if rest else [], len(rest), 0, now
        self.since = now
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


TF32_OVERRIDE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"
TRACEBACK_CHARS = 20_000  # the frames that matter are the last ones


def _tail(text: str) -> str:
    """A traceback as the learner reads it: a 100k-character exception message is cut."""
    if len(text) <= TRACEBACK_CHARS:
        return text
    return f"[… {len(text) - TRACEBACK_CHARS:,} characters cut …]\n" + text[-TRACEBACK_CHARS:]


def _child_env(workdir: Path, memory_mb: int, env: dict | None, nproc: int | None = None) -> dict[str, str]:
    out = dict(os.environ)
    # NVIDIA's containers set this, making float32 matmuls TF32 ('high'); exercises run at
    # PyTorch's documented default 'highest' (a GPU model's predictions then match its
    # checkpoint's on the CPU), and a learner may still lower the precision in their code.
    out.pop(TF32_OVERRIDE, None)
    threads = decide_threads()  # for this run, as the machine is now
    if nproc:
        # The cores shared among the ranks: N processes of the policy's threads each would
        # oversubscribe the machine (2 ranks on 2 cores: 1 thread each).
        threads = max(1, threads // nproc)
    set_thread_env(out, threads)  # the learner's own torch.set_num_threads still wins in their code
    if env:  # what the caller names wins, thread counts included
        out.update({str(k): str(v) for k, v in env.items()})
    # The child imports tutor.exercises.child even where gpututor is not installed (a checkout).
    root = str(Path(__file__).resolve().parents[2])
    out["PYTHONPATH"] = os.pathsep.join(p for p in (root, out.get("PYTHONPATH", "")) if p)
    out["GPUTUTOR_REPORT"] = str(workdir / REPORTS)
    out["GPUTUTOR_SANDBOX_MEMORY_MB"] = str(memory_mb)
    out["GPUTUTOR_SANDBOX_OWNER"] = str(os.getpid())  # the child ends itself when this process is gone
    route_torch_caches(out)
    out["PYTHONUNBUFFERED"] = "1"
    out["PYTHONIOENCODING"] = "utf-8:backslashreplace"
    return out


@dataclass
class _Ran:
    """How one process (or torchrun) ran: what the loop in `_run` saw."""

    returncode: int | None
    timed_out: bool
    cancelled: bool
    output: str
    dropped: int


def _run(
    command: list[str],
    workdir: Path,
    env: dict[str, str],
    *,
    deadline: float,
    on_output: Callable[[str], None] | None,
    cancelled: Callable[[], bool],
    stderr: Any = subprocess.STDOUT,
    also_kill: Callable[[], None] = lambda: None,
    forked: Any = None,
) -> _Ran:
    """Start `command` in a session of its own (or take `forked`, the same program the fork
    server started: forkserver.ForkedChild), stream its output, and kill its group (and whatever
    `also_kill` reaches) when it ends, at `deadline` (time.monotonic()) or on cancel."""
    proc = forked or subprocess.Popen(
        command,
        cwd=workdir,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        start_new_session=True,  # its own process group: killpg reaches forked children
        env=env,
    )
    pgid = proc.pid  # the session leader's pid is the group id
    pipe = proc.stdout
    assert pipe is not None  # stdout=PIPE; a ForkedChild's stdout is its pipe's read end
    fd = pipe.fileno()
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

    def kill() -> None:
        _kill_group(pgid)
        also_kill()

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
                kill()  # children it left behind would keep the pipe open
            if exited_at is not None and (eof or time.monotonic() - exited_at > DRAIN_S):
                break
            if exited_at is None:
                if cancelled():
                    was_cancelled = True
                elif time.monotonic() > deadline:
                    timed_out = True
                if was_cancelled or timed_out:
                    kill()
                    proc.wait()
                    exited_at = time.monotonic()
    finally:
        kill()
        if proc.poll() is None:
            proc.wait()
        take(b"")
        tail = decoder.decode(b"", final=True)
        if tail:
            capture.add(tail)
            flusher.add(tail)
        pipe.close()
    flusher.flush(force=True)
    output, dropped = capture.result()
    return _Ran(proc.returncode, timed_out, was_cancelled, output, dropped)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _error_fields(err: dict[str, Any]) -> tuple[str | None, str | None, int | None, str | None]:
    """(type, message, line, traceback) of an error record a child wrote."""
    error_type = err.get("type") if isinstance(err.get("type"), str) else None
    message = str(err.get("message", ""))[:2000] if error_type else None
    line = err.get("line")
    text = _tail(err["traceback"]) if isinstance(err.get("traceback"), str) else None
    return error_type, message, line if isinstance(line, int) else None, text


def _is_memory(error_type: str | None, message: str | None, sig: str | None, output: str, stopped: bool) -> bool:
    return (
        error_type in ("MemoryError", "OutOfMemoryError")
        or bool(error_type and _MEMORY_TEXT.search(message or ""))
        or bool(sig and not stopped and _MEMORY_TEXT.search(output[-4000:]))
    )


def prestart(*, memory_mb: int, env: dict | None = None) -> bool:
    """Warm the fork server that `run_code` with these arguments would start its program from
    (forkserver.prestart: blocks while it starts; call it from a worker thread)."""
    return forkserver.prestart(_child_env(Path(os.getcwd()), memory_mb, env))


def run_code(
    code: str,
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int,
    on_output: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    env: dict | None = None,
    nproc: int | None = None,
) -> SandboxResult:
    """Run `code` as workdir/solution.py in a separate process (or `nproc` of them under
    torchrun); never raises for what it does."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / SOLUTION).write_text(code, encoding="utf-8")
    for stale in (REPORTS, ERROR_FILE):
        (workdir / stale).unlink(missing_ok=True)
    if nproc:
        return _launch(
            workdir,
            timeout=timeout,
            memory_mb=memory_mb,
            on_output=on_output,
            cancelled=cancelled,
            env=env,
            nproc=nproc,
        )

    start = time.monotonic()
    child_env = _child_env(workdir, memory_mb, env)
    # Started from the warm fork server where it can be (forkserver.py), else as `python -m`.
    forked = forkserver.start_child(workdir, child_env, [SOLUTION], until=start + timeout, cancelled=cancelled)
    ran = _run(
        [sys.executable, "-m", "tutor.exercises.child", SOLUTION],
        workdir,
        child_env,
        deadline=start + timeout,
        on_output=on_output,
        cancelled=cancelled,
        forked=forked,
    )
    rc = ran.returncode
    sig = _signal_name(-rc) if rc is not None and rc < 0 else None
    error_type, message, line, text = _error_fields(_read_error(workdir / ERROR_FILE))
    return SandboxResult(
        exit_code=None if sig else rc,
        signal=sig,
        timed_out=ran.timed_out,
        cancelled=ran.cancelled,
        memory_error=_is_memory(error_type, message, sig, ran.output, ran.timed_out or ran.cancelled),
        gpu_memory_error=reports_device_out_of_memory(error_type, message),
        gpu_memory_cap_mb=gpu_share.cap_mib(),
        output=ran.output,
        dropped_bytes=ran.dropped,
        reports=_read_reports(workdir / REPORTS),
        traceback=text,
        error_type=error_type,
        error_message=message,
        error_line=line,
        seconds=time.monotonic() - start,
    )


# ---------------------------------------------------------------- under torchrun


def _launch(
    workdir: Path,
    *,
    timeout: float,
    memory_mb: int,
    on_output: Callable[[str], None] | None,
    cancelled: Callable[[], bool],
    env: dict | None,
    nproc: int,
) -> SandboxResult:
    """Run solution.py under torchrun with `nproc` ranks; a launch that fails before the code
    ran is said and tried once more, within the same time limit."""
    start = time.monotonic()
    deadline = start + timeout
    if on_output is not None:
        on_output(
            f"[torchrun --standalone --nproc_per_node={nproc} {SOLUTION}: {nproc} processes, ranks 0 to {nproc - 1}]\n"
        )
    result = _launch_once(workdir, deadline, memory_mb, on_output, cancelled, env, nproc)
    if result.launch_problem and not (result.cancelled or result.timed_out) and time.monotonic() < deadline - 5:
        note = f"[{result.launch_problem}; starting the {nproc} processes once more]\n"
        if on_output is not None:
            on_output(note)
        result = _launch_once(workdir, deadline, memory_mb, on_output, cancelled, env, nproc)
        result.relaunched = True
        result.output = note + result.output
        if result.launch_problem:
            result.launch_problem += ", twice"
    result.seconds = time.monotonic() - start
    return result


def _launch_once(
    workdir: Path,
    deadline: float,
    memory_mb: int,
    on_output: Callable[[str], None] | None,
    cancelled: Callable[[], bool],
    env: dict | None,
    nproc: int,
) -> SandboxResult:
    ranks_dir, launch_dir = workdir / RANKS_DIR, workdir / LAUNCH_DIR
    for folder in (ranks_dir, launch_dir):  # what an earlier run left (torchrun makes a folder per run)
        shutil.rmtree(folder, ignore_errors=True)
    launch_dir.mkdir()
    for rank in range(nproc):
        for name in (ERROR_FILE, REPORTS):
            (workdir / per_rank(name, rank)).unlink(missing_ok=True)
    child_env = _child_env(workdir, memory_mb, env, nproc)
    token = f"{nproc}-{os.getpid()}-{time.monotonic_ns()}"  # this launch's, in every process it starts
    child_env["GPUTUTOR_LAUNCH"] = token
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        "--max-restarts=0",
        f"--log-dir={launch_dir / 'logs'}",
        "-m",
        "tutor.exercises.child",
        SOLUTION,
    ]

    def kill_ranks() -> None:
        _kill_launched(token, ranks_dir)

    with (launch_dir / LAUNCHER_LOG).open("wb") as log:
        ran = _run(
            command,
            workdir,
            child_env,
            deadline=deadline,
            on_output=on_output,
            cancelled=cancelled,
            stderr=log,
            also_kill=kill_ranks,
        )
    _wait_gone(token, ranks_dir)
    return _launch_result(workdir, ran, nproc)


def _rank_pids(ranks_dir: Path) -> list[int]:
    """The ranks that recorded their pid and still are those processes (not a later one given the same pid)."""
    pids = []
    for path in ranks_dir.glob("*.pid"):
        try:
            pid, _, started = path.read_text(encoding="ascii").partition(" ")
            pid_n = int(pid)
        except (OSError, ValueError):
            continue
        now = start_time(pid_n)
        if started.strip() and now is not None and now != started.strip():
            continue
        pids.append(pid_n)
    return pids


def _tagged(token: str) -> list[int]:
    """Processes whose environment carries this launch's token (Linux; [] elsewhere): the ranks,
    and whatever they forked, wherever torchrun put them."""
    found: list[int] = []
    needle = f"\0GPUTUTOR_LAUNCH={token}\0".encode()
    me = os.getpid()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in b"\0" + f.read() + b"\0":
                    found.append(int(entry))
        except OSError:
            continue
    return found


def _kill_launched(token: str, ranks_dir: Path) -> None:
    """SIGKILL every rank (the process group it leads, with its forks) and every tagged process."""
    for pid in {*_rank_pids(ranks_dir), *_tagged(token)}:
        try:
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _wait_gone(token: str, ranks_dir: Path) -> None:
    """Kill what is left of the launch and wait (a little) until none of it runs."""
    until = time.monotonic() + GONE_WAIT_S
    while True:
        _kill_launched(token, ranks_dir)
        left = [pid for pid in {*_rank_pids(ranks_dir), *_tagged(token)} if _running(pid)]
        if not left or time.monotonic() > until:
            return
        time.sleep(0.05)


_ROOT_EXIT = re.compile(r"exitcode\s*:\s*(-?\d+)")
_ROOT_RANK = re.compile(r"\brank\s*:\s*(\d+)")


def _launch_result(workdir: Path, ran: _Ran, nproc: int) -> SandboxResult:
    ranks_dir = workdir / RANKS_DIR
    stopped = ran.timed_out or ran.cancelled

    def read(rank: int, what: str) -> str | None:
        try:
            return (ranks_dir / f"{rank}.{what}").read_text(encoding="ascii").strip()
        except OSError:
            return None

    started = [read(r, "started") is not None for r in range(nproc)]
    exits = [read(r, "exit") for r in range(nproc)]
    errors = [(r, e) for r in range(nproc) if (e := _read_error(workdir / per_rank(ERROR_FILE, r))).get("type")]

    def stamped(item: tuple[int, dict[str, Any]]) -> float:
        when = item[1].get("time")
        return when if isinstance(when, (int, float)) else 0

    errors.sort(key=stamped)
    reports: dict[str, Any] = {}
    for rank in reversed(range(nproc)):  # rank 0's values win
        reports.update(_read_reports(workdir / per_rank(REPORTS, rank)))
    log = _launcher_log(workdir)
    # The cause, not its echo: a rank left waiting on the one that failed raises too ("Connection
    # closed by peer"), and on a loaded machine its error can be stamped first.
    causes = [item for item in errors if not PEER_GONE.search(str(item[1].get("message") or ""))]
    first = (causes or errors)[0] if errors else None
    clean = all(code == "0" for code in exits)

    exit_code: int | None = 0
    sig: str | None = None
    error_rank: int | None = None
    error_type = message = text = None
    line = None
    launch_problem = None
    everywhere = False
    if clean and not stopped:
        pass
    elif first is not None:
        error_rank = first[0]
        everywhere = len(errors) == nproc and len({(e.get("type"), e.get("line")) for _, e in errors}) == 1
        error_type, message, line, text = _error_fields(first[1])
        exit_code = 1
        if error_type and _CONNECT_FAILED.search(message or "") and "init_process_group" in (text or ""):
            launch_problem = (
                f"the {nproc} processes could not connect to each other in init_process_group ({_first_line(message)})"
            )
    else:
        failed = next((r for r, code in enumerate(exits) if code not in (None, "0")), None)
        root_code = _ROOT_EXIT.search(log)
        root_rank = _ROOT_RANK.search(log)
        if failed is not None:
            failed_exit = exits[failed]
            assert failed_exit is not None  # `failed` is a rank whose exit is neither None nor "0"
            error_rank, exit_code = failed, int(failed_exit) if failed_exit.lstrip("-").isdigit() else 1
        elif root_code and int(root_code.group(1)) < 0:
            sig = _signal_name(-int(root_code.group(1)))
            error_rank = int(root_rank.group(1)) if root_rank else None
            exit_code = None
        elif ran.returncode is not None and ran.returncode < 0:
            sig, exit_code = _signal_name(-ran.returncode), None
        else:
            exit_code = ran.returncode if ran.returncode else 1
        if not stopped and not all(started):
            who = "torchrun" if sig is None or error_rank is None else f"rank {error_rank}"
            how = f"stopped with {sig}" if sig else f"exited with code {exit_code}"
            launch_problem = f"the launch failed: {who} {how} before your code ran in every process"
            tail = _log_tail(log)
            if tail and sig is None:
                launch_problem += f" ({tail})"
    if stopped:
        exit_code = None if ran.returncode is None or ran.returncode < 0 else ran.returncode
        sig = "SIGKILL"
    return SandboxResult(
        exit_code=exit_code,
        signal=sig,
        timed_out=ran.timed_out,
        cancelled=ran.cancelled,
        memory_error=_is_memory(error_type, message, sig, ran.output, stopped),
        gpu_memory_error=reports_device_out_of_memory(error_type, message),
        gpu_memory_cap_mb=gpu_share.cap_mib(),
        output=ran.output,
        dropped_bytes=ran.dropped,
        reports=reports,
        traceback=text,
        error_type=error_type,
        error_message=message,
        error_line=line,
        processes=nproc,
        error_rank=error_rank,
        error_everywhere=first is not None and everywhere,
        launch_problem=launch_problem,
    )


def _launcher_log(workdir: Path) -> str:
    try:
        with (workdir / LAUNCH_DIR / LAUNCHER_LOG).open(encoding="utf-8", errors="replace") as f:
            return f.read()[-200_000:]
    except OSError:
        return ""


def _log_tail(log: str) -> str:
    """The last line of torchrun's log that says something (its own error), for a launch that failed."""
    for line in reversed(log.strip().splitlines()):
        line = line.strip()
        if line and not set(line) <= set("=-*") and not line.startswith(("File ", "^", "~")):
            return line if len(line) <= 200 else line[:199] + "…"
    return ""


def _first_line(text: str | None) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= 160 else line[:159] + "…"
