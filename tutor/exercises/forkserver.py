"""A warm start for exercise programs: a process that has imported torch forks each one.

Starting `python -m tutor.exercises.child` costs Python's start and `import torch`, seconds on a
small machine, for every run of every exercise. The fork server pays that once: it imports torch
(torch alone: `tutor.lab` resolves the device, which would start CUDA) and forks a child for each
run, which then becomes exactly what `python -m tutor.exercises.child solution.py` is: a session
and process group of its own (the sandbox kills the group), the run's cwd, environment,
sys.path[0], stdin from /dev/null, stdout and stderr on the sandbox's pipe, its thread count, and
`child.main` sets its memory limits and runs the file as `__main__` as before; at its end it waits
for the program's threads, runs atexit and collects what is left (an unclosed file is flushed), as
Python's exit does. What still differs: sys.orig_argv, and the hash seed of str (one per server,
not per run: set iteration order repeats from run to run; PYTHONHASHSEED fixes it either way).

Fork safety: the server never initialises CUDA (only `import torch`; it asserts
`torch.cuda.is_initialized()` is False before every fork) and runs no torch operation, so no
intra-op (OpenMP/MKL) pool and no thread but its own exists when it forks; the child starts its
device and pools itself. Only on Linux: macOS (fork after Objective-C and Accelerate are loaded is
unsafe) and Windows (no fork) keep today's start, as does GPUTUTOR_FORKSERVER=0, and any failure.

Protocol: one server per user and per what a child would otherwise take from the process that
starts it (`server_key`: the environment Python and torch read at start-up, resource limits,
CPUs, niceness, umask, the code's and torch's files), listening on a SOCK_SEQPACKET Unix socket
with an abstract name (no file; both ends check the other runs as this user). A run connects,
sends {cwd, env, argv} with the pipe's write end (SCM_RIGHTS), and reads back {"pid": N} once the
child leads its own group, then {"exit": returncode} (negative: the signal) when it ends. A
connection that closes while its child runs (the sandbox died) kills the child's group.

Lifetime: started when an exercise opens in the TUI (`prestart`), or else on the first run that
wants it (the sandbox waits for a server that is starting rather than importing torch twice), it ends after IDLE_S without a run while a process that used it lives (a TUI
session), ORPHAN_IDLE_S once none does (a one-shot `gpututor exercise`: the next call within that
time starts at once), and at once when it finds a CUDA context it must not fork.
"""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

IDLE_S = 15 * 60.0  # idle, while a process that used it lives
ORPHAN_IDLE_S = 5 * 60.0  # idle, once every process that used it is gone
START_WAIT_S = 60.0  # how long a run waits for a server it started to import torch
ANSWER_S = 10.0  # how long a run waits for a warm server to fork its child
RETRY_AFTER_S = 60.0  # after a server failed to start, today's start until then
MESSAGE_BYTES = 1 << 20
# What Python and torch read from the environment when they start, before a child can set its own
# (the locale: open()'s default encoding; HOME: the user site-packages on sys.path): a run whose
# values differ gets a server of its own. Everything else is set per child.
_START_UP_VARS = (
    "PYTHON",
    "LD_",
    "TORCH",
    "PYTORCH",
    "CUDA",
    "NVIDIA",
    "OMP_",
    "MKL",
    "KMP_",
    "GOMP",
    "OPENBLAS",
    "NUMEXPR",
    "TRITON",
    "HIP",
    "ROCM",
    "HSA_",
    "CUBLAS",
    "CUDNN",
    "NCCL",
    "MALLOC",
    "GLIBC",
    "LANG",
    "LC_",
    "HOME",
)
_ROOT = str(Path(__file__).resolve().parents[2])
_failed_at = 0.0  # when a server last failed to start (this process)
_server_stdio: list = []  # in a child: the server's own stdio objects, kept from the collector
_stdout_is_set = False  # in a child: fd 1 is the run's pipe


def enabled() -> bool:
    """Whether runs start from the fork server here (Linux, not switched off)."""
    return (
        sys.platform.startswith("linux")
        and os.environ.get("GPUTUTOR_FORKSERVER", "1").strip() != "0"
        and hasattr(socket, "send_fds")
    )


def server_key(env: dict[str, str]) -> str:
    """The server a run with this environment may use: same Python, same code, same start-up env."""
    fixed = sorted((k, v) for k, v in env.items() if k.startswith(_START_UP_VARS))
    text = json.dumps([sys.executable, _ROOT, fixed, _versions(), _inherited()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _inherited() -> list:
    """What a child inherits from the process that starts it rather than from its environment:
    resource limits, the CPUs it may use, its niceness, its umask (read, not set: os.umask would
    change it for every thread of a running TUI)."""
    import resource

    limits = [
        resource.getrlimit(getattr(resource, name))
        for name in (
            "RLIMIT_NOFILE",
            "RLIMIT_STACK",
            "RLIMIT_CORE",
            "RLIMIT_AS",
            "RLIMIT_DATA",
            "RLIMIT_NPROC",
            "RLIMIT_CPU",
        )
        if hasattr(resource, name)
    ]
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            umask = next((line.split()[1] for line in f if line.startswith("Umask:")), "")
    except OSError:
        umask = ""
    return [limits, sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0), umask]


def _versions() -> list[int]:
    """When the code a server holds imported last changed: an edited or upgraded one gets a new server."""
    import importlib.util

    here = Path(__file__).resolve().parent
    files = [here / "forkserver.py", here / "child.py", here.parent / "errors.py"]
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        files.append(Path(spec.origin))
    stamps = []
    for path in files:
        try:
            stamps.append(path.stat().st_mtime_ns)
        except OSError:
            stamps.append(0)
    return stamps


def server_name(env: dict[str, str]) -> str:
    """The server's address: a Linux abstract socket (no file anywhere, gone with its process),
    this user's, for this key. GPUTUTOR_FORKSERVER_TAG sets servers apart (tests, the bench)."""
    tag = os.environ.get("GPUTUTOR_FORKSERVER_TAG", "")
    return f"gpututor-fork-{os.getuid()}-{server_key(env)}{'-' + tag if tag else ''}"


def _same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end runs as this user: anyone may reach an abstract
    name, and a run's request is code to execute and an environment to keep."""
    try:
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return False
    return uid == os.getuid()


# ---------------------------------------------------------------- the sandbox's side


class ForkedChild:
    """A child the server forked, seen as the sandbox sees a Popen: pid (its group), poll(),
    wait(), returncode, stdout (the pipe's read end)."""

    def __init__(self, conn: socket.socket, pid: int, stdout: Any) -> None:
        self.conn, self.pid, self.stdout = conn, pid, stdout
        self.returncode: int | None = None

    def _take(self, block: bool) -> None:
        if self.returncode is not None:
            return
        self.conn.setblocking(block)
        try:
            data = self.conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        try:
            self.returncode = int(json.loads(data)["exit"]) if data else -signal.SIGKILL
        except (ValueError, KeyError, TypeError):
            self.returncode = -signal.SIGKILL
        # No answer (the server died): its child ends itself when its parent is gone (child.py);
        # the sandbox kills its group either way.
        self.conn.close()

    def poll(self) -> int | None:
        self._take(block=False)
        return self.returncode

    def wait(self) -> int:
        self._take(block=True)
        assert self.returncode is not None
        return self.returncode


def start_child(
    cwd: Path, env: dict[str, str], argv: list[str], *, until: float, cancelled: Callable[[], bool] = lambda: False
) -> ForkedChild | None:
    """Start `python -m tutor.exercises.child ARGV` in `cwd` with `env` from the fork server (started
    now if none runs); None where that cannot be done, and the caller starts it today's way."""
    global _failed_at
    if not enabled() or time.monotonic() - _failed_at < RETRY_AFTER_S:
        return None
    conn = _connect(server_name(env), env, until, cancelled)
    if conn is None:
        return None
    read_end, write_end = os.pipe()
    try:
        request = json.dumps(
            {
                "cwd": os.path.abspath(cwd),
                "env": env,
                "argv": argv,  # the server's cwd is /
                "owner": os.getpid(),
            }
        ).encode()
        socket.send_fds(conn, [request], [write_end])
        os.close(write_end)
        write_end = -1
        ready, _, _ = select.select([conn], [], [], ANSWER_S)
        answer = json.loads(conn.recv(4096)) if ready else {}
        pid = int(answer["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        _failed_at = time.monotonic()  # no answer, or a refusal (fork_is_safe): today's start for a while
        conn.close()  # the server kills a child it forked for a connection that closed
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)
        return None
    return ForkedChild(conn, pid, open(read_end, "rb", buffering=0))


def prestart(env: dict[str, str]) -> bool:
    """Start the server a run with `env` would use, unless one answers: an exercise that opens
    warms it, so its first run forks at once. Blocks while the server imports torch (seconds),
    so call it off the UI's thread; whether a server now answers."""
    if not enabled() or time.monotonic() - _failed_at < RETRY_AFTER_S:
        return False
    conn = _connect(server_name(env), env, time.monotonic() + START_WAIT_S, lambda: False)
    if conn is None:
        return False
    conn.close()  # a connection that sends nothing is no run: the server forgets it
    return True


def _connect(name: str, env: dict[str, str], until: float, cancelled: Callable[[], bool]) -> socket.socket | None:
    """A connection to the server called `name`; one is started if none answers. One run at a
    time starts it (the one that binds NAME.starting); the others wait for it."""
    global _failed_at
    conn = _try_connect(name)
    if conn is not None:
        return conn
    starting: socket.socket | None = None
    server: subprocess.Popen | None = None
    give_up = min(until, time.monotonic() + START_WAIT_S)
    try:
        while time.monotonic() < give_up:
            if starting is None:
                starting = _claim(f"{name}.starting")
                if starting is not None:
                    try:
                        server = subprocess.Popen(
                            [sys.executable, "-m", "tutor.exercises.forkserver", name, str(os.getpid())],
                            cwd="/",
                            env=_server_env(env),
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            start_new_session=True,
                        )
                    except OSError:
                        break
            elif server is not None and server.poll() is not None:
                break  # it ended without answering (no torch here, or it found CUDA started)
            conn = _try_connect(name)
            if conn is not None:
                return conn  # the server outlives this call; Popen reaps it if it ends first
            if cancelled():
                return None  # the server goes on starting, for the next run
            time.sleep(0.02)
        _failed_at = time.monotonic()
        if server is not None and server.poll() is None:
            server.kill()
            server.wait()
        return None
    finally:
        if starting is not None:
            starting.close()


def _claim(name: str) -> socket.socket | None:
    """Bind the abstract name (held until the socket closes or its process dies), or None if taken."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(f"\0{name}")
    except OSError:
        sock.close()
        return None
    return sock


def _try_connect(name: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(f"\0{name}")
    except OSError:
        conn.close()
        return None
    if not _same_user(conn):
        conn.close()
        return None
    return conn


def _server_env(env: dict[str, str]) -> dict[str, str]:
    """The server's own environment: the run's start-up variables (its key), Python's stdio as the
    child's, and the path to this code."""
    out = {k: v for k, v in env.items() if k.startswith((*_START_UP_VARS, "GPUTUTOR_FORKSERVER")) or k == "PATH"}
    out["PYTHONPATH"] = env.get("PYTHONPATH", _ROOT)
    return out


# ---------------------------------------------------------------- the server


def serve(name: str, owner: int) -> None:
    import torch  # noqa: F401 - the point of this process: imported once, before any fork; no op runs here

    import tutor.exercises.child  # noqa: F401 - the child's own code, torch-free at import

    listener = _claim(name)
    if listener is None:
        return  # another server has the name
    listener.listen(16)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    runs: dict[socket.socket, int | None] = {}  # connection -> its child's pid (None: not yet)
    owners = {owner}
    last = time.monotonic()

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for conn, child in list(runs.items()):
                if child == pid:
                    try:
                        conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
                    except OSError:
                        pass
                    conn.close()
                    del runs[conn]

    while True:
        watched: list[socket.socket | int] = [listener, wake_r, *runs]
        readable, _, _ = select.select(watched, [], [], 1.0)
        if wake_r in readable:
            try:
                os.read(wake_r, 4096)
            except BlockingIOError:
                pass
        reap()
        for conn in readable:
            if conn is listener:
                new, _ = listener.accept()
                if _same_user(new):
                    runs[new] = None
                else:
                    new.close()
            elif conn in runs:
                child = runs[conn]
                try:
                    message, fds, _, _ = socket.recv_fds(conn, MESSAGE_BYTES, 2)
                except OSError:
                    message, fds = b"", []
                if child is not None or not message:  # closed: the sandbox is gone, so is its run
                    if child is not None:
                        _kill_group(child)
                    for fd in fds:
                        os.close(fd)
                    conn.close()
                    del runs[conn]
                    continue
                if not fork_is_safe():  # the sandbox starts this run, and the next ones, today's way
                    conn.close()
                    sys.exit(1)
                try:
                    request = json.loads(message)
                    if len(fds) != 1 or not isinstance(request, dict):
                        raise ValueError("a run sends its request and one pipe")
                    owners.add(int(request.get("owner") or 0))
                    runs[conn] = _fork(request, fds, conn, [listener, *runs], (wake_r, wake_w))
                except (ValueError, TypeError, OSError):
                    for fd in fds:
                        _close(fd)
                    conn.close()
                    del runs[conn]
        if runs:
            last = time.monotonic()
            continue
        owners = {pid for pid in owners if pid and _alive(pid)}
        if time.monotonic() - last > _idle_s(bool(owners)):
            return


def fork_is_safe() -> bool:
    """Nothing here a fork would copy half-made: no CUDA context (forked, it is unusable in the
    child), no thread but this one (a lock another thread holds would stay locked in the child)."""
    import threading

    import torch

    return not torch.cuda.is_initialized() and threading.active_count() == 1


def _idle_s(owned: bool) -> float:
    named = os.environ.get("GPUTUTOR_FORKSERVER_IDLE_S", "")
    try:
        return float(named)
    except ValueError:
        return IDLE_S if owned else ORPHAN_IDLE_S


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _fork(request: dict, fds: list[int], conn: socket.socket, open_sockets: list, wake: tuple[int, int]) -> int | None:
    """Fork the run's child; its pid once it leads its own group (the sandbox may kill it then)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            for sock in open_sockets:
                sock.close()
            for fd in wake:
                os.close(fd)
            _become_child(request, fds[0], ready_w)
        except BaseException as exc:  # noqa: BLE001 - a child that could not start must not return into the server
            try:  # said where the program's output goes (fd 1 once set up, else the pipe itself)
                os.write(
                    1 if _stdout_is_set else fds[0],
                    f"the tutor could not start the program: {type(exc).__name__}: {exc}\n".encode(),
                )
            except BaseException:  # noqa: BLE001
                pass
            os._exit(70)
    os.close(ready_w)
    for fd in fds:
        _close(fd)
    started = os.read(ready_r, 1)
    os.close(ready_r)
    if not started:
        return pid  # it died before leading its group; its exit is reported as any other
    try:
        conn.send(json.dumps({"pid": pid}).encode())
    except OSError:
        _kill_group(pid)
    return pid


def _become_child(request: dict, out_fd: int, ready_w: int) -> None:
    """Turn this fork into `python -m tutor.exercises.child ARGV`, as the sandbox would start it."""
    import io
    import threading

    os.setsid()
    os.write(ready_w, b"1")
    os.close(ready_w)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    global _stdout_is_set
    _stdout_is_set = True
    for fd in (devnull, out_fd):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = os.getcwd()  # as `python -m` puts it
    encoding, _, errors = (os.environ.get("PYTHONIOENCODING") or "utf-8").partition(":")
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    _server_stdio.extend((sys.stdin, sys.stdout, sys.stderr))  # never finalized: they would close fds 0-2
    for fd, name in ((1, "stdout"), (2, "stderr")):
        raw = io.FileIO(fd, "w", closefd=False)
        buffer = raw if unbuffered else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffer,
            encoding=encoding or "utf-8",
            errors=errors or ("backslashreplace" if name == "stderr" else "strict"),
            line_buffering=not unbuffered and name == "stderr",
            write_through=unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    # typeshed marks sys.__stdin__ Final; a fresh interpreter's is what this fork must look like
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding or "utf-8"
    )
    # Threads: torch sizes its intra-op pool at the first operation, from OMP_NUM_THREADS and
    # MKL_NUM_THREADS (MKL's wins); OpenMP read OMP_NUM_THREADS when torch loaded it. Both are
    # the server's own values, equal to the run's (they are in its key), so the child gets the
    # threads `python -m` would give it, and the learner's torch.set_num_threads still wins.
    import tempfile

    tempfile.tempdir = None  # found again from this run's TMPDIR, should anything have asked already
    if "numpy.random" in sys.modules:  # Python's random reseeds itself in a fork; numpy's global one does not
        sys.modules["numpy.random"].seed()
    if "multiprocessing.process" in sys.modules:  # torch imports it: what it took from the server, made this run's
        process: Any = sys.modules["multiprocessing.process"]  # its ORIGINAL_DIR is private: not in typeshed
        process.ORIGINAL_DIR = os.getcwd()
        process.current_process().authkey = os.urandom(32)
    from tutor.exercises import child

    sys.argv = [child.__file__, *request["argv"]]
    code = 0
    try:
        child.main(sys.argv)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    # The end `python -m` would make: wait for the program's own threads, run atexit, then free
    # what is left, so that a file the program never closed is flushed as the interpreter's
    # finalization would (its functions hold its globals in a cycle only the collector frees).
    import atexit
    import gc

    for step in (threading._shutdown, atexit._run_exitfuncs, gc.collect):  # type: ignore[attr-defined]
        try:
            step()
        except BaseException:  # noqa: BLE001
            pass
    for std in (sys.stdout, sys.stderr):
        try:
            std.flush()
        except BaseException:  # noqa: BLE001
            pass
    os._exit(code)


def _exit_code(code: Any) -> int:
    """The exit status SystemExit(code) gives, as the interpreter makes it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except BaseException:  # noqa: BLE001
        pass
    return 1


if __name__ == "__main__":
    serve(sys.argv[1], int(sys.argv[2]))
