"""The process a learner's program runs in: `python -m tutor.exercises.child solution.py`.

Limits its own memory (and its GPU memory, to the shared-GPU cap), runs the file as `__main__`,
and when it raises prints the traceback a learner can read (their frames marked '>>', the
tutor's own frames hidden, library frames folded) and writes it to .error.json for the grader.
SystemExit passes through with its code.

When the grader asks ($GPUTUTOR_OBSERVE names a file), the program runs watched
(tutor/exercises/observe.py) and what it did is written there when it ends; the function probes named in
$GPUTUTOR_PROBES then call the functions it defined, in this same process (never a second run).

Under torchrun (the sandbox sets $GPUTUTOR_LAUNCH; torchrun sets RANK), this is one rank of several:
its files get the rank as a suffix (`.observed.json.1`, `.error.json.1`, the reports), it writes its
pid, when the learner's code started and how it ended into `.ranks/`, and its stderr joins its
stdout (the sandbox's pipe; torchrun's own log goes elsewhere). torchrun starts each rank in a
session of its own, out of reach of the sandbox's process group: every child watches its parent
and the process that started the run ($GPUTUTOR_SANDBOX_OWNER) and ends itself, with whatever it
forked, as soon as either is gone.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor.errors import PEER_GONE

if TYPE_CHECKING:
    from tutor.exercises.observe import Observer

ERROR_FILE = ".error.json"
# A rank's error that only says another rank went away (gloo, NCCL): one line, not a traceback.
RANKS_DIR = ".ranks"  # per rank: RANK.pid ("pid start-time"), RANK.started, RANK.exit (its exit code)
WATCH_S = 0.2  # how often a child looks for its parent and the run's owner
_HIDDEN = (str(Path(__file__).resolve()), runpy.__file__, str(Path(__file__).with_name("observe.py").resolve()))


def start_torch(rank: int | None = None):
    """Import torch and start the device the program will use (tutor.lab picks it the same way),
    so that their memory, not the program's, is in place when the budget takes its baseline:
    `import torch` alone is ~770 MiB of data, a CUDA context hundreds more. A rank of a launch
    starts cuda:LOCAL_RANK where there is a GPU for every local rank (NCCL's case), else nothing:
    its processes train on the CPU with gloo. Returns the device started (a devices.Device), or None."""
    try:
        import torch

        from tutor.experiments import devices

        if rank is None:
            dev = devices.resolve(None)
        else:
            local = int(os.environ.get("LOCAL_RANK", "0") or 0)
            world = int(os.environ.get("LOCAL_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)
            if not (torch.cuda.is_available() and torch.cuda.device_count() >= world):
                return None
            dev = devices.resolve(f"cuda:{local}")
        devices.start_up(dev)
        return dev
    except Exception:  # noqa: BLE001 - no torch, no device: the program meets that itself, with its traceback
        return None


def take_turn(dev, what: str):
    """On a machine a class shares (a class folder), wait for a slot of the program's device and
    hold it while this process lives (measurement/slots.py), the place in line said on stderr.
    Returns the slots.Turn: `shared` when it ran beside another run after a minute in line."""
    from tutor.measurement import slots

    key = slots.device_key(dev.kind, dev.index) if dev is not None else "cpu"
    return slots.hold_for_this_process(key, what, lambda text: print(text, file=sys.stderr, flush=True))


def limit_gpu_memory(dev) -> None:
    """Hold the program to the shared-GPU cap on the device it trains on, as the tutor holds each
    experiment run (tutor/experiments/gpu_share.py: $GPUTUTOR_GPU_MEMORY_MB, settings.toml's
    gpu_memory_mb, else $GPUTUTOR_MEMORY_MB): one learner's exercise must not take a card the
    class shares. Past it PyTorch's allocator raises its out-of-memory error."""
    from tutor.experiments import gpu_share

    cap = gpu_share.cap_mib()
    if cap is None or dev is None or dev.kind not in ("cuda", "mps"):
        return
    try:
        import torch

        if dev.kind == "cuda":
            index = dev.index or 0
            total = torch.cuda.get_device_properties(index).total_memory
            with torch.cuda.device(index):  # older PyTorch sizes the fraction by the current device
                torch.cuda.set_per_process_memory_fraction(min(1.0, cap * gpu_share.MIB / total), index)
        else:
            fraction = cap * gpu_share.MIB / torch.mps.recommended_max_memory()
            gpu_share.set_mps_fraction(min(2.0, fraction))  # remembered: a capped() block restores to it
    except Exception:  # noqa: BLE001 - a device that fails here: the program meets that itself
        pass


# ---------------------------------------------------------------- ranks and their parents


def per_rank(path: str, rank: int) -> str:
    """The file a rank writes in place of `path` (the sandbox and the grader read them back)."""
    return f"{path}.{rank}"


def launched_rank() -> int | None:
    """This process's rank when the sandbox launched the program under torchrun, else None."""
    if not os.environ.get("GPUTUTOR_LAUNCH"):
        return None
    value = os.environ.get("RANK", "").strip()
    return int(value) if value.isdigit() else None


def start_time(pid: int) -> str | None:
    """When process `pid` started (Linux: /proc/PID/stat field 22), to tell it from a later
    process given the same pid; None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def _parent_is_launcher(pid: int) -> bool:
    """Whether the parent of a rank is still torchrun (Linux; True where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read()
    except OSError:
        return True
    return b"torch.distributed.run" in command or b"torchrun" in command


def watch_parent(owner: int | None, launched: bool) -> None:
    """End this process, and the process group it leads (DataLoader workers and anything else it
    forked), as soon as its parent or the run's owner is gone: a sandbox that was killed, a
    torchrun the sandbox killed at a timeout or cancel, a tutor that quit. A rank that starts
    after its torchrun is already gone (its parent is then init) ends at once."""
    parent = os.getppid()
    if launched and (parent == 1 or not _parent_is_launcher(parent)):
        _end_self()

    def gone() -> bool:
        return os.getppid() != parent or (owner is not None and not _alive(owner))

    def watch() -> None:
        while not gone():
            time.sleep(WATCH_S)
        _end_self()

    threading.Thread(target=watch, name="gpututor-watch-parent", daemon=True).start()


def _end_self() -> None:
    try:
        if os.getpgrp() == os.getpid():  # torchrun made it a session leader: its forks go with it
            os.killpg(os.getpid(), signal.SIGKILL)
    finally:
        os._exit(1)


def _enter_rank(rank: int) -> None:
    """Make this process one rank of a launch: its own files, its pid recorded, stderr to stdout."""
    os.makedirs(RANKS_DIR, exist_ok=True)
    Path(RANKS_DIR, f"{rank}.pid").write_text(f"{os.getpid()} {start_time(os.getpid()) or ''}", encoding="ascii")
    try:
        os.dup2(1, 2)  # the sandbox reads stdout; torchrun's own stderr is its log
    except OSError:
        pass
    # The ranks share one pipe. Unbuffered, print("hello from", rank) writes its pieces one by
    # one and two ranks' lines mix ("hello fromhello from 1"); buffered to the line, each line is
    # one write, which a pipe keeps whole up to 4 KiB.
    streams: tuple[Any, ...] = (sys.stdout, sys.stderr)  # reconfigured where they can be
    for stream in streams:
        try:
            stream.reconfigure(line_buffering=True, write_through=False)
        except (AttributeError, ValueError, OSError):
            pass
    for name in ("GPUTUTOR_REPORT", "GPUTUTOR_OBSERVE"):
        if os.environ.get(name):
            os.environ[name] = per_rank(os.environ[name], rank)
    if rank != 0:  # the weights at each evaluation: rank 0's, for a best-checkpoint check
        os.environ.pop("GPUTUTOR_OBSERVE_SNAPSHOTS", None)
        os.environ.pop("GPUTUTOR_PROBES", None)


def _data_bytes_now() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmData:")) * 1024
    except (OSError, StopIteration, ValueError):
        return None


def limit_memory(megabytes: int) -> None:
    """Let the program allocate `megabytes` on top of what the process holds now (torch and the
    device started). Linux: RLIMIT_DATA (heap and private writable mappings), which stops a hog
    with MemoryError yet leaves the large PROT_NONE address reservations CUDA makes alone
    (RLIMIT_AS would break CUDA initialisation). Elsewhere no cap: macOS has no RLIMIT_DATA it
    enforces, and under RLIMIT_AS the address space PyTorch and Metal reserve (gigabytes, not
    memory) would stop MPS before the program starts. The exercise's timeout still bounds it."""
    try:
        import resource
    except ImportError:  # Windows
        return
    if not sys.platform.startswith("linux"):
        return
    now = _data_bytes_now()
    if now is None:
        return
    limit = now + megabytes * 1024 * 1024
    which = resource.RLIMIT_DATA
    try:
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(which, (limit, limit))  # the hard limit too: the program cannot lift it
    except (ValueError, OSError):
        pass  # not permitted or not supported here: run without the cap


def _is_learner(filename: str, solution: str) -> bool:
    try:
        return os.path.samefile(filename, solution)
    except OSError:
        return False


def learner_traceback(exc: BaseException, solution: str) -> tuple[str, int | None]:
    """(text, line in solution.py of the deepest learner frame or None)."""
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    shown = os.path.basename(solution)
    lines = ["Traceback (most recent call last):\n"]
    error_line = None
    folded: list[traceback.FrameSummary] = []

    def fold() -> None:
        if len(folded) > 1:
            where = os.path.dirname(folded[0].filename)
            lines.append(f"     ... {len(folded) - 1} more frame(s) in {where}\n")
        if folded:
            f = folded[-1]
            lines.append(f'     File "{f.filename}", line {f.lineno}, in {f.name}\n')
            if f.line:
                lines.append(f"       {f.line.strip()}\n")
        folded.clear()

    for frame in te.stack:
        if (
            frame.filename in _HIDDEN
            or os.path.abspath(frame.filename) in _HIDDEN
            or frame.filename.startswith("<frozen")
        ):
            continue
        if _is_learner(frame.filename, solution):
            fold()
            error_line = frame.lineno
            lines.append(f'>>   File "{shown}", line {frame.lineno}, in {frame.name}\n')
            if frame.line:
                lines.append(f">>     {frame.line.strip()}\n")
        else:
            folded.append(frame)
    fold()
    if isinstance(exc, SyntaxError) and exc.filename and _is_learner(exc.filename, solution):
        error_line = exc.lineno
        lines.append(f'>>   File "{shown}", line {exc.lineno}\n')
        exc.filename = shown
        te = traceback.TracebackException.from_exception(exc)
        lines.extend(list(te.format_exception_only())[1:] or list(te.format_exception_only()))
    else:
        lines.extend(te.format_exception_only())
    return "".join(lines), error_line


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")


def strip_escapes(text: str) -> str:
    """Text without terminal escape codes (PyTorch puts bold into some of its messages)."""
    return _ANSI.sub("", text)


_REFUSED = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def readable(message: str) -> str:
    """An exception's message as a learner reads it: no terminal escape codes, and PyTorch's
    page on weights_only (whose first advice, weights_only=False, runs the file's code) cut to
    what the file holds."""
    message = _ANSI.sub("", message)
    if "Weights only load failed" in message:
        found = _REFUSED.search(message)
        what = f"it holds {found.group(1)}" if found else "it holds an object that is not a tensor or a plain value"
        return (
            f"Weights only load failed: {what}, which torch.load(..., weights_only=True) does not load "
            "(it loads tensors, state_dicts, numbers, text, lists and dicts)"
        )
    return message


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: python -m tutor.exercises.child solution.py")
    rank = launched_rank()
    owner = os.environ.get("GPUTUTOR_SANDBOX_OWNER", "")
    watch_parent(int(owner) if owner.isdigit() else None, rank is not None)
    if rank is not None:
        _enter_rank(rank)
    mb = os.environ.get("GPUTUTOR_SANDBOX_MEMORY_MB")
    dev = None
    if mb and mb.isdigit():
        dev = start_torch(rank)
        limit_gpu_memory(dev)
        limit_memory(int(mb))
    # A launch's ranks are not queued one by one: each would wait on the others' slots.
    turn = take_turn(dev, "exercise") if rank is None else None
    solution = os.path.abspath(argv[1])
    error_file = os.path.abspath(ERROR_FILE if rank is None else per_rank(ERROR_FILE, rank))  # before a chdir
    ranks_dir = os.path.abspath(RANKS_DIR)
    observe_file = os.environ.get("GPUTUTOR_OBSERVE")
    observe_file = os.path.abspath(observe_file) if observe_file else None
    observer = _observer(solution, rank is not None) if observe_file else None
    sys.argv = [argv[1]]
    sys.path.insert(0, os.path.dirname(solution))  # as `python solution.py` would

    def mark(what: str, text: str = "") -> None:
        if rank is not None:
            _mark_in(ranks_dir, rank, what, text)

    mark("started")
    try:
        namespace = runpy.run_path(solution, run_name="__main__")
    except SystemExit as exc:
        _finish(observer, observe_file, None)
        code = exc.code
        mark("exit", str(code if isinstance(code, int) else 0 if code is None else 1))
        raise
    except BaseException as exc:  # noqa: BLE001 - every error the learner's code raises is shown
        _finish(observer, observe_file, None)
        text, line = learner_traceback(exc, solution)
        raw = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
        if readable(raw) != raw and raw:
            text = _ANSI.sub("", text.replace(raw, readable(raw)))
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        world = os.environ.get("WORLD_SIZE", "?")
        shown = text if rank is None else f"[rank {rank} of {world}] {text}"
        if rank is not None and PEER_GONE.search(raw):
            where = f" at line {line}" if line else ""
            shown = f"[rank {rank} of {world}] stopped{where}: another process ended while this one waited for it\n"
        sys.stderr.write(shown)
        sys.stderr.flush()
        # A SyntaxError's str() repeats "(solution.py, line N)"; the line is reported on its own.
        message = readable(raw)
        record = {
            "type": type(exc).__name__,
            "message": message[:2000],
            "line": line,
            "traceback": text,
            "rank": rank,
            "time": time.time(),
        }
        try:
            Path(error_file).write_text(json.dumps(record), encoding="utf-8")
        except OSError:
            pass
        mark("exit", "1")
        if turn is not None:
            turn.release()  # into the class queue's history: os._exit runs no atexit handler
        os._exit(1)  # not sys.exit: atexit handlers of the learner's libraries could hang
    _finish(observer, observe_file, namespace)
    mark("exit", "0")


def _mark_in(folder: str, rank: int, what: str, text: str = "") -> None:
    """Record a rank's progress in .ranks/ (an absolute folder: the learner's code may chdir)."""
    try:
        Path(folder, f"{rank}.{what}").write_text(text, encoding="ascii")
    except OSError:
        pass


def _observer(solution: str, ranks: bool = False) -> Observer | None:
    try:
        from tutor.exercises.observe import Observer
    except ImportError:  # no torch: nothing to watch
        return None
    observer = Observer(solution, snapshots=bool(os.environ.get("GPUTUTOR_OBSERVE_SNAPSHOTS")), ranks=ranks)
    try:
        observer.install()
    except ImportError:
        return None
    return observer


def _finish(observer: Observer | None, path: str | None, namespace: dict[str, Any] | None) -> None:
    """Write what the program did; then, if it ran to the end, call its functions with probes."""
    if observer is None or path is None:  # there is an observer only where there is a file to write
        return
    summary = observer.summary()
    observer.uninstall()
    specs = os.environ.get("GPUTUTOR_PROBES")
    if namespace is not None and specs:
        from tutor.exercises.probes import run_probes

        try:
            summary["probes"] = run_probes(json.loads(specs), namespace)
        except Exception as exc:  # noqa: BLE001 - a probe must not turn a finished run into a crash
            summary["probes_error"] = f"{type(exc).__name__}: {exc}"[:600]
    try:
        Path(path).write_text(json.dumps(summary), encoding="utf-8")
    except (OSError, TypeError, ValueError):
        pass
    snapshots = os.environ.get("GPUTUTOR_OBSERVE_SNAPSHOTS")
    if snapshots and observer.snapshots:
        try:
            import torch

            torch.save(observer.snapshots, snapshots)
        except Exception:  # noqa: BLE001 - a full disk: the best-checkpoint check says it could not tell
            pass


if __name__ == "__main__":
    main(sys.argv)
