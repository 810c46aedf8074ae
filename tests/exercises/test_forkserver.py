"""The fork server starts each exercise program warm, as the program it replaces would run
(tutor/exercises/forkserver.py). tests/exercises/test_sandbox.py runs every sandbox test both ways;
these check what only the fork path can get wrong."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from tutor.exercises import forkserver, sandbox
from tutor.exercises.sandbox import run_code

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux's")

# What a program sees of its start, printed as JSON (pids and the parent apart).
SEEN = """\
import json, os, sys, multiprocessing.process
print(json.dumps({
    "multiprocessing_dir": multiprocessing.process.ORIGINAL_DIR,
    "encoding": __import__("locale").getpreferredencoding(),
    "tmp": __import__("tempfile").gettempdir(), "user_site": __import__("site").getusersitepackages(),
    "name": __name__, "file": __file__, "argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[:2],
    "env": {k: os.environ.get(k) for k in ("EXTRA", "PYTHONUNBUFFERED", "GPUTUTOR_SANDBOX_MEMORY_MB")},
    "stdout": [sys.stdout.encoding, sys.stdout.errors, sys.stdout.write_through, sys.stdout.line_buffering],
    "stderr": [sys.stderr.encoding, sys.stderr.errors, sys.stderr.write_through],
    "stdin": sys.stdin.read(), "leads_group": os.getpgrp() == os.getpid() == os.getsid(0),
    "pid": os.getpid(), "parent": open(f"/proc/{os.getppid()}/cmdline").read().replace(chr(0), " "),
}))
"""


@pytest.fixture(scope="module")
def module_servers():
    """Servers this module's tests share (their names carry its tag), gone at its end: a test
    that only runs programs need not pay a server's start (a torch import) of its own."""
    tag = f"test{os.getpid()}m{time.monotonic_ns()}"
    yield tag
    for pid in _servers(tag):
        _kill(pid)


@pytest.fixture(autouse=True)
def forking_on(monkeypatch, module_servers):
    monkeypatch.setenv("GPUTUTOR_FORKSERVER_TAG", module_servers)
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "1")
    monkeypatch.setattr(forkserver, "_failed_at", 0.0)


@pytest.fixture
def own_servers(monkeypatch, forking_on):
    """Servers of this test's own, for a test that starts, kills or counts them; gone at its end."""
    tag = f"test{os.getpid()}x{time.monotonic_ns()}"
    monkeypatch.setenv("GPUTUTOR_FORKSERVER_TAG", tag)
    yield tag
    for pid in _servers(tag):
        _kill(pid)


def _servers(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    line = f.read()
            except OSError:
                continue
            if b"tutor.exercises.forkserver" in line and tag.encode() in line:
                found.append(int(entry))
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _gone(pid: int) -> bool:
    for _ in range(100):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if ") Z " in f.read():
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def run(code: str, tmp_path: Path, **kw):
    kw.setdefault("timeout", 60)
    kw.setdefault("memory_mb", 1024)
    return run_code(code, tmp_path / "work", **kw)


def seen(code: str, tmp_path: Path, **kw) -> dict:
    r = run(code, tmp_path, **kw)
    assert r.ok, r.output
    return json.loads(r.output)


@pytest.mark.parametrize("environment", [{}, {"LANG": "C", "LC_ALL": "C", "HOME": "/nonexistent-home", "TMPDIR": "/"}])
def test_a_program_forked_by_the_server_sees_its_start_as_python_m_gives_it(tmp_path, monkeypatch, environment):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    forked = seen(SEEN, tmp_path, env={"EXTRA": "yes"})
    assert "tutor.exercises.forkserver" in forked["parent"] and forked["leads_group"]
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "0")
    started = seen(SEEN, tmp_path, env={"EXTRA": "yes"})
    assert "tutor.exercises.forkserver" not in started["parent"]
    for key in ("pid", "parent"):
        forked.pop(key), started.pop(key)
    assert forked == started


def test_switched_off_or_off_linux_the_program_starts_as_today(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "0")
    assert not forkserver.enabled()
    assert "tutor.exercises.forkserver" not in seen(SEEN, tmp_path)["parent"]
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "1")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not forkserver.enabled()
    assert forkserver.start_child(tmp_path, dict(os.environ), ["solution.py"], until=time.monotonic() + 5) is None


def test_the_memory_limit_holds_in_a_forked_program(tmp_path):
    code = (
        "import os\nprint(open(f'/proc/{os.getppid()}/cmdline').read().replace(chr(0), ' '), flush=True)\n"
        "x = bytearray(600 * 2**20)\n"
    )
    r = run(code, tmp_path, memory_mb=256)
    assert "tutor.exercises.forkserver" in r.output
    assert r.memory_error and r.error_type == "MemoryError" and r.error_line == 3, r.output


@pytest.mark.parametrize("how", ["timeout", "cancel"])
def test_a_timeout_or_a_cancel_kills_a_forked_program_and_its_children(tmp_path, how, limit_clock):
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    open(f'child-{os.getpid()}.pid', 'w').close()\n"
        "    time.sleep(600)\n"
        "while not any(name.startswith('child-') for name in os.listdir('.')):\n"
        "    time.sleep(0.01)\n"
        "open(f'main-{os.getpid()}.pid', 'w').close()\n"
        "print(open(f'/proc/{os.getppid()}/cmdline').read().replace(chr(0), ' '), flush=True)\n"
        "time.sleep(600)\n"
    )
    stop, said = threading.Event(), []

    def on_output(text: str) -> None:
        said.append(text)
        if how == "cancel":
            stop.set()

    # The limit passes once the program has said where it runs, its child asleep (the clock moves
    # it then: tests/exercises/conftest.py), not after a wait of the limit's own.
    up = limit_clock(sandbox).run_out_when(lambda: "forkserver" in "".join(said))
    r = run(code, tmp_path, timeout=60, cancelled=up if how == "timeout" else stop.is_set, on_output=on_output)
    assert (r.timed_out, r.cancelled) == ((True, False) if how == "timeout" else (False, True))
    assert "tutor.exercises.forkserver" in r.output and r.signal == "SIGKILL"
    pids = [int(p.stem.split("-")[1]) for p in (tmp_path / "work").glob("*-*.pid")]
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)


def test_exit_codes_signals_and_errors_come_back_from_a_forked_program(tmp_path):
    assert run("import sys\nsys.exit(3)\n", tmp_path).exit_code == 3
    assert run("import os\nos._exit(4)\n", tmp_path).exit_code == 4
    r = run("raise SystemExit('bye')\n", tmp_path)
    assert r.exit_code == 1 and r.output.strip() == "bye"
    r = run("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", tmp_path)
    assert r.exit_code is None and r.signal == "SIGSEGV"
    r = run("x = 1\nraise ValueError('no')\n", tmp_path)
    assert r.exit_code == 1 and r.error_type == "ValueError" and r.error_line == 2
    r = run(
        "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()\n",
        tmp_path,
    )
    assert r.ok and "thread done" in r.output  # the end waits for the program's threads, as Python's does


def test_a_server_killed_mid_run_ends_the_run_and_the_next_run_starts_cleanly(tmp_path, own_servers):
    code = "import os, time\nprint(os.getpid(), os.getppid(), flush=True)\ntime.sleep(600)\n"
    seen_pids: list[int] = []

    def on_output(text: str) -> None:
        pid, server = map(int, text.split()[:2])
        seen_pids.append(pid)
        with open(f"/proc/{server}/cmdline", "rb") as f:
            if b"tutor.exercises.forkserver" in f.read():  # never this test's own process
                os.kill(server, signal.SIGKILL)

    r = run(code, tmp_path, timeout=60, on_output=on_output)
    assert not r.timed_out and not r.ok and r.signal == "SIGKILL"
    assert seen_pids and _gone(seen_pids[0])
    after = seen(SEEN, tmp_path)
    assert "tutor.exercises.forkserver" in after["parent"]  # a new server took over
    killed = _servers(own_servers)
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    assert all(_gone(pid) for pid in killed)
    assert run("print('still runs')\n", tmp_path).output == "still runs\n"


def test_a_forked_program_gets_the_threads_its_environment_asks_for(tmp_path, monkeypatch):
    code = (
        "import json, os, sys, torch, numpy as np\n"
        "a, b = torch.randn(400, 400, dtype=torch.float64), torch.randn(400, 400, dtype=torch.float64)\n"
        "c = a @ b\n"
        "right = abs(c[3, 5].item() - sum(a[3, k].item() * b[k, 5].item() for k in range(400))) < 1e-9\n"
        "x = np.random.rand(300, 300)\n"
        "np_right = bool(abs((x @ x)[1, 2] - sum(x[1, k] * x[k, 2] for k in range(300))) < 1e-9)\n"
        "print(json.dumps([torch.get_num_threads(), right, np_right, len(os.listdir('/proc/self/task')),\n"
        "                  'tutor.exercises.forkserver' in open(f'/proc/{os.getppid()}/cmdline').read()]))\n"
    )
    env = {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}
    forked = json.loads(run(code, tmp_path, env=env).output)
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "0")
    started = json.loads(run(code, tmp_path, env=env).output)
    assert forked[0] == 2 and forked[1:3] == [True, True] and forked[4]
    assert forked[:4] == started[:4] and not started[4]  # the same pool's threads as a fresh start


def test_the_server_forks_only_without_cuda_or_a_second_thread(monkeypatch):
    import torch

    assert forkserver.fork_is_safe()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert not forkserver.fork_is_safe()
    monkeypatch.undo()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not forkserver.fork_is_safe()
    finally:
        stop.set()
        thread.join()


def test_a_server_that_found_cuda_started_hands_the_run_back(tmp_path, monkeypatch, own_servers):
    """A server whose torch has a CUDA context (here: says it has) forks nothing and ends; the
    run starts today's way."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\ntorch.cuda.is_initialized = lambda: True\n")
    monkeypatch.setenv("PYTHONPATH", f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = seen(SEEN, tmp_path)
    assert "tutor.exercises.forkserver" not in r["parent"]
    assert _servers(own_servers) == [] or all(_gone(pid) for pid in _servers(own_servers))


def test_an_idle_server_ends(tmp_path, monkeypatch, own_servers):
    monkeypatch.setenv("GPUTUTOR_FORKSERVER_IDLE_S", "1")
    assert "forkserver" in seen(SEEN, tmp_path)["parent"]
    servers = _servers(own_servers)
    assert servers and all(_gone(pid) for pid in servers)  # within ~2 s of its last run
    name = forkserver.server_name(sandbox._child_env(tmp_path / "work", 1024, None))
    assert forkserver._try_connect(name) is None


def test_a_forked_program_ends_as_python_does_its_files_flushed_its_randomness_its_own(tmp_path):
    """A file left open is flushed at the end (the interpreter's finalization would), and two runs
    draw different random numbers (a fork copies the server's generators)."""
    code = (
        "import json, os, random, numpy as np\n"
        "f = open('out.txt', 'w')\n"
        "f.write('kept')\n"
        "def uses_f():\n"
        "    return f\n"
        "print(json.dumps([random.random(), float(np.random.rand()),\n"
        "                  'tutor.exercises.forkserver' in open(f'/proc/{os.getppid()}/cmdline').read()]))\n"
    )
    first = json.loads(run(code, tmp_path).output)
    assert (tmp_path / "work" / "out.txt").read_text() == "kept"
    second = json.loads(run(code, tmp_path).output)
    assert first[2] and second[2]
    assert first[0] != second[0] and first[1] != second[1]


def test_a_run_cancelled_while_the_server_starts_returns_and_the_server_comes_up(tmp_path, own_servers):
    env = dict(os.environ)
    assert (
        forkserver.start_child(tmp_path, env, ["solution.py"], until=time.monotonic() + 60, cancelled=lambda: True)
        is None
    )
    for _ in range(100):  # still starting, for the next run (a moment to exec)
        if _servers(own_servers):
            break
        time.sleep(0.05)
    assert _servers(own_servers)
    assert "tutor.exercises.forkserver" in seen(SEEN, tmp_path)["parent"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs another user to connect as")
def test_the_server_takes_no_run_from_another_user(tmp_path):
    """Anyone may reach an abstract socket's name: a server forks only for its own user."""
    assert "tutor.exercises.forkserver" in seen(SEEN, tmp_path)["parent"]
    name = forkserver.server_name(sandbox._child_env(tmp_path / "work", 1024, None))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # as nobody: connect and ask for a run
        try:
            os.setgid(65534)
            os.setuid(65534)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            conn.connect(f"\0{name}")
            request = json.dumps({"cwd": "/", "env": {}, "argv": ["x.py"], "owner": os.getpid()}).encode()
            socket.send_fds(conn, [request], [write_end])
            conn.settimeout(10)
            os._exit(3 if conn.recv(4096) == b"" else 4)  # closed without an answer: 3
        except OSError:
            os._exit(3)
        except BaseException:  # noqa: BLE001 - any other failure is its own exit code
            os._exit(5)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 3


def test_a_relative_scratch_dir_is_the_programs_cwd_as_before(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run_code(SEEN, Path("relative"), timeout=60, memory_mb=1024)
    assert r.ok, r.output
    assert json.loads(r.output)["cwd"] == str(tmp_path / "relative")
    assert "tutor.exercises.forkserver" in json.loads(r.output)["parent"]


def test_an_exercise_that_opens_warms_the_server_its_first_run_forks_from(tmp_path, own_servers):
    from tutor.course.loader import load_file
    from tutor.exercises.grader import grade_exercise, prestart

    step = load_file(Path(__file__).resolve().parents[2] / "lessons" / "devices.yaml").steps
    step = next(s for s in step if getattr(s, "kind", "") == "exercise" and not s.nproc)
    assert not _servers(own_servers)
    assert prestart(step, tmp_path / "work")  # blocks until the server answers
    (server,) = _servers(own_servers)
    parent = "import os\nprint(open(f'/proc/{os.getppid()}/cmdline').read().replace(chr(0), ' '))\n"
    result = grade_exercise(step, parent, tmp_path / "work")
    assert "tutor.exercises.forkserver" in result.sandbox.output  # forked, not started as python -m
    assert _servers(own_servers) == [server]  # by the server warmed before: no second one started


def test_a_torchrun_exercise_warms_nothing(tmp_path, own_servers):
    from tutor.course.loader import load_file
    from tutor.exercises.grader import prestart

    steps = load_file(Path(__file__).resolve().parents[2] / "lessons" / "beyond-one-gpu.yaml").steps
    launched = next(s for s in steps if getattr(s, "kind", "") == "exercise" and s.nproc)
    assert not prestart(launched, tmp_path / "work") and not _servers(own_servers)
