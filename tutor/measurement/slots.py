"""A shared box times runs fairly: the timed window of a run holds a slot of the device it times.

Learners on one machine share a class folder (`class_dir` in settings.toml, or
$GPUTUTOR_CLASS_DIR). Two runs timed on one GPU at once (or on the same cores) corrupt both
timings, so each run holds a slot of its device while it measures: one slot per GPU (`cuda:0`,
`cuda:1`, `mps`); on the CPU as many as the cores allow for the threads a run uses
(cores // threads, at least one). Without a class folder there is no queue at all.

What is held: the whole of the experiment's `measure()` (experiments.start wraps it), its data
loading included: every experiment loads inside its own generator, so splitting "untimed" work
off would mean changing each one. The tutor's own start-up (importing torch, detecting devices,
the engine process) happens before, outside the slot.

How: `fcntl.flock` on files in `<class_dir>/queue/`. The kernel drops a flock when its process
dies, however it dies (kill -9 included), so a crashed holder never blocks the queue. Waiters
stand in line FIFO: each takes a numbered ticket file, flocked by its owner while it waits, so a
dead waiter's ticket is seen (its lock is free) and removed; a waiter's place is the live
tickets ahead of it, and only the first in line tries the slots. Forked children (DataLoader
workers) close their copies of these descriptors, so a killed holder's orphaned workers do not
keep its slot. Where fcntl is missing (Windows) there is no queue, and a note says so.

No learner waits past CHOICE_S without a choice: keep waiting, or run now with the timing marked
shared (`timing_shared` in its metrics), which no prediction is graded on (tutor/checks/predict.py).
Each slot held is appended to `queue/history.jsonl` (pid, user, device, took, released, waited,
shared): the runs' own record of who timed when.

Torch-free: the device is a key ("cuda:0", "cpu") and the threads a number.
"""

from __future__ import annotations

import atexit
import contextlib
import getpass
import json
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]


QUEUE = "queue"
HISTORY = "history.jsonl"
HISTORY_KEEP_BYTES = 1_000_000  # past this, history.jsonl is moved to history.jsonl.1
CHOICE_S = 60.0  # no learner waits past a minute without a choice
POLL_S = 0.1  # how often a waiter yields (a cancel is seen between events) and, first in line, tries the slots
LOOK_S = 1.0  # how often one further back counts its place: each look locks every ticket ahead of it
TIMING_SHARED = "timing_shared"  # the metric a run timed without its slot carries (True)
NO_FCNTL = "no class queue on this system (fcntl is missing): runs are timed without waiting their turn"

_held_fds: set[int] = set()  # descriptors whose flock this process holds: closed in forked children
_run_now = False  # the learner chose to run now, timing shared (the engine's "run_now", `run --no-wait`)


def _forget_in_child() -> None:
    """In a forked child: close our copies of the lock files, so that only this process's life
    holds them (closing a copy never unlocks the parent's lock; LOCK_UN would)."""
    for fd in list(_held_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held_fds.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def choose_run_now(chosen: bool = True) -> None:
    """The learner's choice: stop waiting and run now, the timing marked shared (or clear it)."""
    global _run_now
    _run_now = chosen


def run_now_chosen() -> bool:
    return _run_now


def device_key(kind: str, index: int | None = None) -> str:
    """The slot's device: "cuda:0" (a GPU by its index), "mps", "cpu"."""
    return f"{kind}:{index or 0}" if kind == "cuda" else kind


def device_words(key: str) -> str:
    """The device as the waiting line says it: "the GPU", "GPU 1", "the CPU"."""
    if key.startswith("cuda"):
        index = key.partition(":")[2]
        return f"GPU {index}" if index not in ("", "0") else "the GPU"
    return {"mps": "the GPU", "cpu": "the CPU"}.get(key, key)


def cpu_slots(cores: int, threads: int) -> int:
    """How many runs may time on `cores` cores at once, each with `threads` threads."""
    return max(1, cores // max(1, threads))


def planned_threads() -> int:
    """The threads a CPU run will use at most: GPUTUTOR_THREADS or the user's OMP_NUM_THREADS,
    else every core (threads.decide may take fewer when it starts, never more). Decided before the
    slot is taken and without the load: the other class runs' load is what the slot keeps away."""
    from tutor import threads

    return threads._override() or threads._users_own() or threads.usable_cores()


def slots_for(key: str) -> int:
    if key != "cpu":
        return 1
    from tutor import threads

    return cpu_slots(threads.usable_cores(), planned_threads())


@dataclass(frozen=True)
class Holder:
    """Who holds a slot or a ticket: as written in its file."""

    pid: int
    user: str
    host: str
    since: float  # time.time()
    experiment: str
    slot: str = ""  # the file's name

    @classmethod
    def read(cls, path: Path) -> Holder:
        try:
            data = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            data = {}
        return cls(
            int(data.get("pid") or 0),
            str(data.get("user") or "?"),
            str(data.get("host") or ""),
            float(data.get("since") or 0.0),
            str(data.get("experiment") or ""),
            path.name,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "user": self.user,
            "host": self.host,
            "since": self.since,
            "experiment": self.experiment,
            "slot": self.slot,
        }


def _me(experiment: str) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no login name in a bare container
        user = str(os.getuid()) if hasattr(os, "getuid") else "?"
    return {
        "pid": os.getpid(),
        "user": user,
        "host": socket.gethostname(),
        "since": time.time(),
        "experiment": experiment,
    }


def _open(path: Path) -> int:
    """A lock file, opened for writing where we may (created readable and writable by the class)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
    except PermissionError:  # another learner's file: lockable read-only, its words stay theirs
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # the umask took some: classmates must open it too
    return fd


def _write(fd: int, data: dict[str, Any]) -> None:
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(data).encode(), 0)


def _locked_by_other(path: Path) -> bool | None:
    """Is `path` flocked by a live process? None: it is gone."""
    assert fcntl is not None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError:
        return True  # unreadable: count it, rather than jump a queue we cannot see
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)  # drops our shared lock, if we got it
    return False


def _safe(key: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", key.lower())


class DeviceQueue:
    """The slots and the line of one device in one class folder."""

    def __init__(self, class_dir: Path, key: str, slots: int) -> None:
        self.dir = Path(class_dir) / QUEUE
        self.key = key
        self.slots = max(1, slots)
        self.name = _safe(key)

    def ensure(self) -> None:
        fresh = not self.dir.is_dir()
        self.dir.mkdir(parents=True, exist_ok=True)
        if fresh:
            with contextlib.suppress(OSError):
                os.chmod(self.dir, 0o777)  # every learner's runs take tickets here

    def slot_paths(self) -> list[Path]:
        return [self.dir / f"{self.name}.slot{i}" for i in range(self.slots)]

    def _ticket_paths(self) -> list[Path]:
        return sorted(self.dir.glob(f"{self.name}.wait.*"))

    def holders(self) -> list[Holder]:
        """Every slot of this device held now (by a live process), whatever the slot count."""
        held = []
        for path in sorted(self.dir.glob(f"{self.name}.slot*")):
            if _locked_by_other(path):
                held.append(Holder.read(path))
        return held

    def waiting(self, before: str | None = None) -> list[Holder]:
        """The live tickets in line (before ticket `before`, where given), first first; dead ones
        (their owner gone: the lock is free) are removed on the way."""
        line = []
        for path in self._ticket_paths():
            if before is not None and path.name >= before:
                break
            live = _locked_by_other(path)
            if live:
                line.append(Holder.read(path))
            elif live is False:
                with contextlib.suppress(OSError):
                    path.unlink()  # a waiter that died in line
        return line

    def join(self, experiment: str) -> Ticket:
        """A ticket at the end of the line, flocked by this process while it waits."""
        assert fcntl is not None
        self.ensure()
        counter = _open(self.dir / f"{self.name}.counter")
        try:
            fcntl.flock(counter, fcntl.LOCK_EX)
            raw = os.pread(counter, 32, 0).decode(errors="replace").strip()
            number = (int(raw) if raw.isdigit() else 0) + 1
            os.ftruncate(counter, 0)
            os.pwrite(counter, str(number).encode(), 0)
        finally:
            os.close(counter)  # and its lock
        # Locked before it is seen under its name: no one may take it for a dead waiter's.
        staging = self.dir / f".{self.name}.join.{os.getpid()}.{number}"
        fd = _open(staging)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _held_fds.add(fd)
        _write(fd, _me(experiment))
        name = f"{self.name}.wait.{number:012d}.{os.getpid()}"
        os.replace(staging, self.dir / name)
        return Ticket(self, name, fd, experiment)


@dataclass
class Ticket:
    queue: DeviceQueue
    name: str
    fd: int | None
    experiment: str
    slot_fd: int | None = None
    slot: str = ""
    took: float = 0.0
    joined: float = field(default_factory=time.time)

    def look(self) -> tuple[int, int]:
        """(live tickets ahead of this one, slots held now)."""
        return len(self.queue.waiting(before=self.name)), len(self.queue.holders())

    def take(self) -> bool:
        """Try every slot once; on success the ticket is handed in."""
        assert fcntl is not None
        for path in self.queue.slot_paths():
            fd = _open(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            _held_fds.add(fd)
            _write(fd, _me(self.experiment))
            self.slot_fd, self.slot, self.took = fd, path.name, time.time()
            self.leave()
            return True
        return False

    def leave(self) -> None:
        """Out of the line: the ticket's file removed, then its lock dropped."""
        if self.fd is None:
            return
        with contextlib.suppress(OSError):
            (self.queue.dir / self.name).unlink()
        _close(self.fd)
        self.fd = None

    def release(self, shared: bool = False) -> None:
        """The slot back (and into the history), or the place in line given up."""
        self.leave()
        if self.slot_fd is None:
            return
        released = time.time()
        with contextlib.suppress(OSError):
            os.ftruncate(self.slot_fd, 0)  # a free slot names no one
        _close(self.slot_fd)
        self.slot_fd = None
        _history(
            self.queue,
            {
                **{k: v for k, v in _me(self.experiment).items() if k != "since"},
                "device": self.queue.key,
                "slot": self.slot,
                "took": self.took,
                "released": released,
                "waited_s": round(self.took - self.joined, 3),
                "shared": shared,
            },
        )


def _close(fd: int) -> None:
    _held_fds.discard(fd)
    with contextlib.suppress(OSError):
        os.close(fd)  # the last descriptor of its file: the flock goes with it


def _history(queue: DeviceQueue, record: dict[str, Any]) -> None:
    path = queue.dir / HISTORY
    with contextlib.suppress(OSError):
        if path.exists() and path.stat().st_size > HISTORY_KEEP_BYTES:
            os.replace(path, path.with_name(HISTORY + ".1"))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())  # one write: whole lines from every learner
        finally:
            os.close(fd)


def read_history(class_dir: Path) -> list[dict[str, Any]]:
    """Every slot held, as recorded when it was given back (the bench and doctor read it)."""
    try:
        lines = (Path(class_dir) / QUEUE / HISTORY).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


@dataclass
class Turn:
    """A run's turn on its device: the slot it holds (if any), or that it runs shared."""

    ticket: Ticket | None = None
    shared: bool = False
    waited_s: float = 0.0

    def release(self) -> None:
        if self.ticket is not None:
            self.ticket.release(self.shared)
            self.ticket = None


def hold_for_this_process(key: str, what: str, say: Any = print, every_s: float = 5.0) -> Turn:
    """For a program the tutor starts as a process of its own (an exercise, a script under `gpututor
    inspect`): wait in line for a slot of `key`, saying the place through `say` every `every_s`,
    then hold it until the process ends (the kernel drops the flock with it; its parent's kill
    of the group is the cancel). Past CHOICE_S it stops waiting and runs with the timing shared,
    said so: a program has no one to ask. No class folder: returns at once."""
    queue = queue_for(key)
    if queue is None or fcntl is None:
        return Turn()
    try:
        ticket = queue.join(what)
    except OSError as e:
        say(f"[gpututor] the class queue in {queue.dir} cannot be used ({e.strerror or e}): timed without it")
        return Turn()
    try:
        return _wait_holding(queue, ticket, key, say, every_s)
    except OSError as e:  # the class folder removed or unwritable mid-wait: timed without it
        ticket.release()
        say(f"[gpututor] the class queue in {queue.dir} cannot be used ({e.strerror or e}): timed without it")
        return Turn()


def _release_in(owner: int, turn: Turn) -> None:
    """A forked child inherits the exit handler, not the slot (its copy of the lock is closed)."""
    if os.getpid() == owner:
        turn.release()


def _wait_holding(queue: DeviceQueue, ticket: Ticket, key: str, say: Any, every_s: float) -> Turn:
    words, started, said = device_words(key), time.monotonic(), -every_s
    while True:
        ahead, running = ticket.look()
        if ahead == 0 and ticket.take():
            waited = time.monotonic() - started
            if said >= 0:
                say(f"[gpututor] your turn on {words} after {waited:.0f} s in line: the timing is yours alone")
            turn = Turn(ticket, waited_s=waited)
            atexit.register(_release_in, os.getpid(), turn)  # at a normal exit; a kill drops the flock alone
            return turn
        waited = time.monotonic() - started
        if waited >= CHOICE_S:
            ticket.leave()
            say(
                f"[gpututor] still in line for {words} after {waited:.0f} s: running now beside "
                f"{running} other run(s), so this run's timings are shared"
            )
            return Turn(shared=True, waited_s=waited)
        if waited - said >= every_s:
            said = waited
            say(
                f"[gpututor] waiting for {words}: {running + ahead} run(s) ahead of you "
                f"({running} running, {ahead} waiting) · {waited:.0f} s"
            )
        time.sleep(POLL_S if ahead == 0 else LOOK_S)


CLASS_DIR_ENV = "GPUTUTOR_CLASS_DIR"  # tutor.settings' name: the CLI sets it from settings.toml's class_dir


def class_dir() -> Path | None:
    """The class folder, from the environment (the CLI puts settings.toml's `class_dir` there, so
    the engine process and `gpututor run` read the same)."""
    value = os.environ.get(CLASS_DIR_ENV, "").strip()
    return Path(value).expanduser() if value else None


def queue_for(key: str, folder: Path | None = None) -> DeviceQueue | None:
    """This device's queue in the class folder (None: no class folder, so no queue)."""
    folder = folder if folder is not None else class_dir()
    return DeviceQueue(folder, key, slots_for(key)) if folder is not None else None


@dataclass(frozen=True)
class QueueState:
    device: str
    slots: int
    holders: list[Holder]
    waiting: list[Holder]


def state(class_dir: Path) -> list[QueueState]:
    """Every device's queue in the class folder, as `doctor` shows it (slots counted by file)."""
    root = Path(class_dir) / QUEUE
    if fcntl is None or not root.is_dir():
        return []
    names = sorted(
        {p.name.split(".slot")[0] for p in root.glob("*.slot*")}
        | {p.name.split(".wait.")[0] for p in root.glob("*.wait.*")}
    )
    out = []
    for name in names:
        q = DeviceQueue(class_dir, name, 1)
        q.name = name
        files = len(list(root.glob(f"{name}.slot*")))
        out.append(QueueState(name.replace("-", ":"), max(1, files), q.holders(), q.waiting()))
    return out


__all__ = [
    "CHOICE_S",
    "TIMING_SHARED",
    "DeviceQueue",
    "Holder",
    "QueueState",
    "Turn",
    "choose_run_now",
    "class_dir",
    "cpu_slots",
    "device_key",
    "device_words",
    "queue_for",
    "read_history",
    "state",
]
