"""A child process that runs experiments for the TUI.

Why a process and not a thread: training an MLP is Python-heavy, and a thread shares the
GIL with Textual's rendering; measured here, that inflated the learner's timings by 60%.
In a child process the timings on screen are the machine's, and the TUI never imports
torch at all. The child starts in the background when the app starts (it imports torch
and detects devices once, and keeps MNIST cached between runs), and dies with the app.

Protocol over one duplex pipe (all values are plain picklable data):
    parent -> child   ("detect",)                        child -> ("devices", [Device...], chosen, problem)
    parent -> child   ("run", name, params, device)       child -> ("event", Event)* then ("ended", status, error)
    parent -> child   ("cancel",)                         (between events; the run ends "cancelled")
    parent -> child   ("run_now",)                        (while in a class's line: run now, timing shared)

A run that does not reach its next event within CANCEL_GRACE_S of a cancel (a long epoch on
the CPU, a big allocation) is stopped by killing the child; a fresh one is started at once.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from tutor.experiments.events import Event, Started

CANCEL_GRACE_S = 0.3  # escape stops any run within half a second, whatever it is doing
LOG_KEEP_BYTES = 1_000_000  # engine.log past this is moved to engine.log.1 when an engine starts


class EngineDied(Exception):
    """The experiment process exited unexpectedly (killed, crashed, out of memory)."""


def _serve(conn, log_path: str | None) -> None:
    """The child's main loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the TUI owns ctrl+c
    if hasattr(os, "setpgrp"):  # a group of its own: close() can stop its DataLoader workers with it
        os.setpgrp()
    # Nothing the child prints may reach the terminal the TUI draws on.
    target = open(log_path, "a", buffering=1) if log_path else open(os.devnull, "w")  # noqa: SIM115 - for the child's life
    os.dup2(target.fileno(), 1)
    os.dup2(target.fileno(), 2)
    sys.stdout = sys.stderr = target

    from tutor import paths, threads

    paths.route_torch_caches(os.environ)  # before torch is imported
    threads.set_env(os.environ)
    _start_children_as_in_process()
    from tutor import errors, experiments
    from tutor.experiments import devices, gpu_share, packs
    from tutor.measurement import slots

    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the app went away
        kind = request[0]
        if kind == "detect":
            found = devices.available()
            try:
                chosen, problem = devices.resolve(request[1]), None
            except devices.DeviceError as exc:
                chosen, problem = found[0], str(exc)
            conn.send(("devices", list(found), chosen, problem))
        elif kind == "run":
            _, name, params, device = request
            status, error = "finished", None
            gen = None
            on_gpu = False  # the run said so in its Started event
            budget = _run_budget()
            try:
                if budget:
                    try:  # the device's start-up is not the run's: out of the budget's baseline
                        devices.start_up(devices.resolve((params or {}).get("device") or device))
                    except devices.DeviceError:
                        pass  # said by experiments.start below, as for any run
                    limit_memory(budget)
                slots.choose_run_now(False)  # a choice made for an earlier run is not this one's
                if name not in experiments.REGISTRY:
                    # This process starts with the built-ins only: load the packs the app loaded.
                    packs.load_from_environment()
                gen = experiments.start(name, params, device)
                for event in gen:
                    if conn.poll():
                        control = conn.recv()[0]
                        if control == "run_now":  # seen by the waiting run at its next look
                            slots.choose_run_now()
                        elif control in ("cancel", "quit"):
                            status = "cancelled"
                            if control == "quit":
                                return
                            break
                    if isinstance(event, Started):
                        on_gpu = str(event.device).startswith(("cuda", "mps"))
                    conn.send(("event", event))
            except (BrokenPipeError, EOFError):
                return
            except Exception as exc:  # noqa: BLE001 - reported to the learner as a sentence
                status, error = "failed", errors.describe(exc)
                # The budget caps host memory: it is the cause only of a host out-of-memory.
                if budget and errors.is_out_of_memory(exc) and not errors.is_device_out_of_memory(exc):
                    error += f" ({MEMORY_ENV} limits each run to {budget} MiB here.)"
                elif on_gpu and errors.is_device_out_of_memory(exc) and gpu_share.cap_mib():
                    error += (
                        f" ({gpu_share.cap_source()} caps each run at {gpu_share.cap_mib():,} MiB of GPU "
                        "memory here, so that the learners sharing this GPU all fit.)"
                    )
            finally:
                if gen is not None:
                    gen.close()
                if budget:
                    limit_memory(None)
                release_device_memory()
            try:
                conn.send(("ended", status, error))
            except (BrokenPipeError, OSError):
                return
        elif kind == "quit":
            return


def _start_children_as_in_process() -> None:
    """Start this process's children (DataLoader workers) the way `gpututor run` and `lesson test`
    do: with the platform's default method. Python makes a process started by spawn spawn its own
    children too, so each worker was a fresh interpreter importing torch: on a 2-core machine
    data-bottleneck took 14 s in the TUI against 3 s headless, 11 s of it workers starting and
    stopping (issue 24)."""
    methods = mp.get_all_start_methods()  # the platform's default first
    if mp.get_start_method(allow_none=True) != methods[0]:
        mp.set_start_method(methods[0], force=True)


def release_device_memory() -> None:
    """After each run: free what the run's tensors left in the caching allocator, so an idle
    tutor holds no GPU memory a classmate on the same card could use."""
    import gc

    torch = sys.modules.get("torch")
    if torch is None:
        return
    gc.collect()  # the run's generator frames may still hold tensors in reference cycles
    if torch.cuda.is_initialized():
        # cuBLAS keeps a workspace per stream in the caching allocator that empty_cache cannot
        # free while it is held (torch's own leak checks clear it first); the next matmul makes another.
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()
        torch.cuda.empty_cache()
    mps = getattr(torch, "mps", None)
    if mps is not None and getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        mps.empty_cache()


MEMORY_ENV = "GPUTUTOR_MEMORY_MB"


def _run_budget() -> int | None:
    """$GPUTUTOR_MEMORY_MB: how much memory one run may allocate on top of what the
    experiment process holds between runs (for a shared machine, or to see an out-of-memory
    error on purpose). Unset: no limit beyond the machine's."""
    from tutor.experiments.gpu_share import mib_from

    return mib_from(MEMORY_ENV)


def limit_memory(budget_mb: int | None) -> None:
    """Cap the process's data segment (heap and anonymous mappings: where tensors live on the
    CPU) at its current size plus the budget; None lifts the cap. Linux only; elsewhere a no-op."""
    try:
        import resource
    except ImportError:
        return
    if budget_mb is None:
        _, hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
        return
    import torch  # noqa: F401 - imported first, so that the budget is the run's alone

    try:
        with open("/proc/self/status", encoding="ascii") as f:
            now_kb = next(int(line.split()[1]) for line in f if line.startswith("VmData:"))
    except (OSError, StopIteration, ValueError):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = now_kb * 1024 + budget_mb * 2**20
    resource.setrlimit(resource.RLIMIT_DATA, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _quiet_resource_tracker() -> None:
    """multiprocessing's resource tracker starts with the first child and writes to the terminal.
    When a run is stopped by killing DataLoader workers, it cleans up their semaphores and warns
    "There appear to be N leaked semaphore objects" under the learner's shell prompt. It does the
    cleaning either way: keep the cleaning, drop the warning (through the environment, which the
    tracker inherits; only warnings whose text starts with "resource_tracker")."""
    quiet = "ignore:resource_tracker:UserWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if quiet not in current.split(","):
        os.environ["PYTHONWARNINGS"] = ",".join(filter(None, [current, quiet]))


def _rotate(log_path: str | None) -> None:
    """Keep the engine's log from growing without bound: one old copy, the rest goes."""
    if not log_path:
        return
    try:
        if os.path.getsize(log_path) > LOG_KEEP_BYTES:
            os.replace(log_path, log_path + ".1")
    except OSError:
        pass  # no log yet, or it cannot be moved: keep appending


def _reap(proc: mp.process.BaseProcess, timeout: float) -> None:
    """Wait up to `timeout` for the child to exit, by its pid. (A timed join waits for its sentinel
    to close, which its forked DataLoader workers keep open for as long as they live.)"""
    deadline = time.monotonic() + timeout
    while proc.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)


def _kill_group(pid: int | None) -> None:
    """SIGKILL what is left of the child's process group (its DataLoader workers); POSIX only."""
    if pid is None or not hasattr(os, "killpg"):
        return
    try:
        if os.getpgid(pid) != pid:
            return  # the child is gone or never became a group leader: nothing of ours to stop
    except (ProcessLookupError, PermissionError):
        pass  # the leader is gone, its workers may not be
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Engine:
    """The parent's handle on the experiment process. One run at a time."""

    def __init__(self, log_path: str | None = None) -> None:
        self.log_path = log_path
        self._proc: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self._lock = threading.Lock()  # one conversation at a time
        atexit.register(self.close)  # runs before multiprocessing's own exit hook joins children

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        _rotate(self.log_path)
        ctx = mp.get_context("spawn")  # a fresh interpreter: no Textual state, no inherited threads
        parent, child = ctx.Pipe(duplex=True)
        # Not a daemon: a DataLoader with workers must be able to start child processes.
        # The atexit hook (and close()) make sure it never outlives the app.
        proc = ctx.Process(target=_serve, args=(child, self.log_path), name="gpututor-engine", daemon=False)
        # Textual swaps sys.stdout/stderr for objects without a file descriptor, and
        # multiprocessing hands stderr's descriptor to its helper: start with the real ones.
        _quiet_resource_tracker()
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = sys.__stdout__ or saved[0], sys.__stderr__ or saved[1]
        try:
            proc.start()
        finally:
            sys.stdout, sys.stderr = saved
        child.close()
        self._proc, self._conn = proc, parent

    def _recv(self, conn=None, proc=None) -> Any:
        conn, proc = conn or self._conn, proc or self._proc
        try:
            return conn.recv()
        except (EOFError, OSError, AttributeError):
            if proc is not None:
                _reap(proc, 2.0)  # so its exit code says how it died
                _kill_group(proc.pid)  # its DataLoader workers, if any: nothing to work for any more
            code = proc.exitcode if proc is not None else None
            if proc is self._proc:
                self._proc = None
            raise EngineDied(_died(code)) from None

    def detect(self, requested: str | None) -> tuple[list, Any, str | None]:
        with self._lock:
            self._ensure()
            assert self._conn is not None  # _ensure() leaves a live child and its pipe
            self._conn.send(("detect", requested))
            _, found, chosen, problem = self._recv()
            return found, chosen, problem

    def run(
        self,
        name: str,
        params: dict[str, Any],
        device: str | None,
        cancelled: Callable[[], bool],
        run_now: Callable[[], bool] | None = None,
    ) -> Iterator[tuple]:
        """Yield ("event", Event) items, then one ("ended", status, error).

        `cancelled` is polled while waiting; when it turns true the child is asked to stop.
        `run_now` likewise: when it turns true a run waiting in a class's line runs at once, its
        timing marked shared (measurement/slots.py).
        Raises EngineDied if the child dies (or the engine is closed) mid-run.
        """
        with self._lock:
            self._ensure()
            conn, proc = self._conn, self._proc
            assert conn is not None and proc is not None  # _ensure() leaves a live child and its pipe
            conn.send(("run", name, params, device))
            asked_at: float | None = None
            run_now_sent = False
            while True:
                if asked_at is not None and time.monotonic() - asked_at > CANCEL_GRACE_S:
                    # Still busy between two events: stop it for sure, and have the next one ready.
                    self.close(timeout=0.0)
                    try:
                        yield ("ended", "cancelled", None)
                    finally:  # after the learner has seen "Cancelled", even if the reader stops here
                        self._ensure()
                    return
                try:
                    if asked_at is None and cancelled():
                        conn.send(("cancel",))
                        asked_at = time.monotonic()
                    elif not run_now_sent and run_now is not None and run_now():
                        conn.send(("run_now",))
                        run_now_sent = True
                    ready = conn.poll(0.05)
                except (OSError, ValueError):
                    raise EngineDied("The experiment process was stopped.") from None
                if not ready:
                    if not proc.is_alive():
                        _kill_group(proc.pid)  # forked DataLoader workers hold the pipe open: no EOF while they live
                        self._recv(conn, proc)  # drains what is left, then raises EngineDied
                    continue
                message = self._recv(conn, proc)
                yield message
                if message[0] == "ended":
                    return

    def close(self, timeout: float = 0.3) -> None:
        """Stop the child: politely, then for sure. Never leaves it behind."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is None:
            return
        try:
            if conn is not None:  # set with the process: None only if _ensure() never finished
                conn.send(("cancel",))
                conn.send(("quit",))
        except (OSError, ValueError, AttributeError):
            pass
        _reap(proc, timeout)
        if proc.is_alive():
            proc.kill()
            _reap(proc, 1.0)
        _kill_group(proc.pid)  # DataLoader workers outlive a killed child otherwise
        try:
            if conn is not None:
                conn.close()
        except (OSError, AttributeError):
            pass

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def _died(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGKILL":
            return (
                "The experiment process was killed (SIGKILL), most likely because the machine ran out of "
                "memory. Try a smaller batch_size or fewer samples."
            )
        return f"The experiment process crashed ({name}). Press r to try again."
    return f"The experiment process exited unexpectedly (exit code {code}). Press r to try again."


__all__ = ["Engine", "EngineDied", "Event"]
