"""The sandbox survives hostile learner code and reports what happened (tutor/exercises/sandbox.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tutor.exercises import sandbox
from tutor.exercises.sandbox import run_code

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and rlimits are POSIX")


@pytest.fixture(autouse=True, params=["fork server", "python -m"])
def start(request, monkeypatch):
    """Every test runs both ways a program starts: forked from the warm server, and as today."""
    monkeypatch.setenv("GPUTUTOR_FORKSERVER", "1" if request.param == "fork server" else "0")
    return request.param


def run(code: str, tmp_path: Path, **kw):
    kw.setdefault("timeout", 30)
    kw.setdefault("memory_mb", 1024)
    return run_code(code, tmp_path / "work", **kw)


def test_clean_run_writes_solution_and_streams_output(tmp_path):
    chunks: list[str] = []
    r = run("print('hello')\nprint('world')\n", tmp_path, on_output=chunks.append)
    assert r.ok and r.exit_code == 0 and r.signal is None
    assert r.output == "hello\nworld\n" and "".join(chunks) == r.output
    assert (tmp_path / "work" / "solution.py").read_text().startswith("print('hello')")
    assert r.traceback is None and r.error_line is None


def test_the_child_runs_float32_matmuls_at_the_default_precision_in_nvidia_containers(tmp_path, monkeypatch):
    """NVIDIA's containers set TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 ('high', TF32): a GPU model's
    predictions would then miss its checkpoint's on the CPU by ~2e-4. The child runs at 'highest'."""
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    r = run("import torch\nprint(torch.get_float32_matmul_precision())\n", tmp_path, timeout=60)
    assert r.ok and r.output.strip() == "highest", r.output


def test_exception_gives_marked_traceback_and_line(tmp_path):
    code = "import json\n\ndef f(x):\n    return x / 0\n\nf(json.loads('1'))\n"
    r = run(code, tmp_path)
    assert r.exit_code == 1 and not r.ok
    assert r.error_type == "ZeroDivisionError" and r.error_line == 4
    assert '>>   File "solution.py", line 4, in f' in r.traceback
    assert '>>   File "solution.py", line 6, in <module>' in r.traceback
    assert "sandbox_child" not in r.traceback and "runpy" not in r.traceback  # the tutor's frames hidden
    assert "ZeroDivisionError" in r.output  # also printed for the learner


def test_library_frames_are_folded_not_marked(tmp_path):
    r = run("import json\njson.loads('{')\n", tmp_path)
    assert r.error_type == "JSONDecodeError" and r.error_line == 2
    marked = [line for line in r.traceback.splitlines() if line.startswith(">>")]
    assert all("solution.py" in line or "json.loads" in line for line in marked)
    assert "json" in r.traceback.split(">>     json.loads('{')")[1]  # the library frame where it raised


def test_syntax_error_points_at_the_line(tmp_path):
    r = run("x = 1\ny = (\n", tmp_path)
    assert r.error_type == "SyntaxError" and r.error_line == 2
    assert 'File "solution.py", line 2' in r.traceback
    assert r.problem() == "the program raised SyntaxError at line 2: '(' was never closed"  # the line once


def test_infinite_loop_times_out(tmp_path, limit_clock):
    """The limit comes while the loop runs (the clock passes it once the program says it is looping),
    never during the sandbox's start-up: a limit that ran out there would pass with no loop at all."""
    clock, seen = limit_clock(sandbox), []
    r = run(
        "print('looping', flush=True)\nwhile True:\n    pass\n",
        tmp_path,
        timeout=120,
        on_output=seen.append,
        cancelled=clock.run_out_when(lambda: "looping" in "".join(seen)),
    )
    assert r.timed_out and not r.cancelled and r.signal == "SIGKILL" and r.exit_code is None and not r.ok
    assert r.output == "looping\n"
    assert "time limit" in r.problem()


def test_cancel_stops_the_run(tmp_path):
    seen: list[str] = []
    cancelled_at: list[float] = []

    def cancelled() -> bool:  # once the program is asleep
        if not cancelled_at and "started" in "".join(seen):
            cancelled_at.append(time.monotonic())
        return bool(cancelled_at)

    r = run(
        "import time\nprint('started', flush=True)\ntime.sleep(60)\n",
        tmp_path,
        timeout=120,
        on_output=seen.append,
        cancelled=cancelled,
    )
    stopped_after = time.monotonic() - cancelled_at[0]
    assert r.cancelled and not r.timed_out and r.signal == "SIGKILL"
    assert "started" in r.output
    # From the cancel, not the start: ended long before the program's 60 s sleep, with room for a loaded
    # machine (the promise itself, within 0.5 s, is bench/cancel.py's figure).
    assert stopped_after < 15


def test_segfault_is_reported_as_a_signal(tmp_path):
    r = run("import ctypes\nctypes.string_at(0)\n", tmp_path)
    assert r.signal == "SIGSEGV" and r.exit_code is None and not r.ok
    assert "crashed (SIGSEGV)" in r.problem()


def test_sys_exit_and_os_exit_keep_their_codes(tmp_path):
    assert run("import sys\nsys.exit(3)\n", tmp_path).exit_code == 3
    r = run("import os\nprint('bye', flush=True)\nos._exit(7)\n", tmp_path)
    assert r.exit_code == 7 and r.output == "bye\n" and r.error_type is None


def test_output_flood_is_bounded_and_coalesced(tmp_path):
    calls: list[str] = []
    # Stopped once ten coalesced calls have come (the flood has run for a second at least, at
    # FLUSHES_PER_S): counted from the flood, never from the start, which torch's import can stretch.
    r = run(
        "while True:\n    print('x' * 1000)\n",
        tmp_path,
        timeout=120,
        on_output=calls.append,
        cancelled=lambda: len(calls) >= 10,
    )
    assert r.cancelled
    assert r.dropped_bytes > 0 and "bytes of output not kept" in r.output
    lines = r.output.splitlines()
    assert len(lines) <= sandbox.HEAD_LINES + sandbox.TAIL_LINES + 2
    assert len(r.output) <= sandbox.HEAD_BYTES + sandbox.TAIL_BYTES + 1000
    # Coalesced: at most FLUSHES_PER_S calls a second (+ the final flush), each bounded.
    assert 1 <= len(calls) <= sandbox.FLUSHES_PER_S * r.seconds + 2
    assert all(len(c) <= sandbox.CHUNK_BYTES + 2000 for c in calls)


def test_output_is_passed_on_at_line_ends():
    """print writes a line and its newline apart: a flush between them would show an empty line."""
    calls: list[str] = []
    flusher = sandbox._Flusher(calls.append)
    flusher.add("epoch 1: 95%")
    flusher.flush()
    assert calls == []  # the line's end has not come yet
    flusher.add("\nepoch 2: 96%")
    flusher.flush()
    assert calls == ["epoch 1: 95%\n"]
    flusher.last = 0.0
    flusher.since -= sandbox.PARTIAL_S  # a line that never ends (a progress bar's \r) goes after a while
    flusher.flush()
    assert calls == ["epoch 1: 95%\n", "epoch 2: 96%"]
    flusher.add("tail")
    flusher.flush(force=True)
    assert calls[-1] == "tail"


def test_memory_hog_gets_memory_error(tmp_path):
    r = run("data = bytearray(3 * 10**9)\nprint('allocated')\n", tmp_path, memory_mb=512)
    assert r.memory_error and r.error_type == "MemoryError" and r.error_line == 1
    assert "allocated" not in r.output and "out of memory" in r.problem()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's RLIMIT_DATA")
def test_the_program_cannot_lift_its_memory_limit(tmp_path):
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_DATA, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "print('lifted')\n"
    )
    r = run(code, tmp_path, memory_mb=512)
    assert "lifted" not in r.output and r.error_type == "ValueError", r.output


def test_forked_children_are_killed_with_the_program(tmp_path):
    code = (
        "import glob, os, time\n"
        "for i in range(3):\n"
        "    if os.fork() == 0:\n"
        "        open(f'child-{os.getpid()}.pid', 'w').close()\n"
        "        time.sleep(600)\n"
        "        os._exit(0)\n"
        "while len(glob.glob('child-*.pid')) < 3:  # every child is up\n"
        "    time.sleep(0.01)\n"
        "print('parent done')\n"
    )
    r = run(code, tmp_path)
    assert r.exit_code == 0 and "parent done" in r.output
    pids = [int(p.stem.split("-")[1]) for p in (tmp_path / "work").glob("child-*.pid")]
    assert len(pids) == 3
    for pid in pids:
        for _ in range(50):  # the kill is sent; give the kernel a moment to reap
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{pid}/stat") if Path(f"/proc/{pid}").exists() else open(os.devnull) as f:
                if ") Z " in f.read():  # a zombie waiting for init is dead
                    break
            time.sleep(0.1)
        else:
            pytest.fail(f"child {pid} still alive")


def test_reports_are_read_and_stale_ones_removed(tmp_path):
    code = (
        "import json, os\n"
        "with open(os.environ['GPUTUTOR_REPORT'], 'a') as f:\n"
        "    f.write(json.dumps({'speedup': 2.5}) + '\\n')\n"
        "    f.write('not json\\n')\n"
        "    f.write(json.dumps({'synced': True}) + '\\n')\n"
    )
    assert run(code, tmp_path).reports == {"speedup": 2.5, "synced": True}
    assert run("print(1)\n", tmp_path).reports == {}


def test_environment_is_inherited_and_extended(tmp_path):
    code = "import os\nprint(os.environ['GPUTUTOR_DATA_DIR'], os.environ['EXTRA'], os.environ['PYTHONUNBUFFERED'])\n"
    r = run(code, tmp_path, env={"EXTRA": "yes"})
    assert r.output.split() == [os.environ["GPUTUTOR_DATA_DIR"], "yes", "1"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cap is Linux's RLIMIT_DATA")
def test_the_budget_is_the_programs_own_torch_is_up_before_it_is_counted(tmp_path):
    """memory_mb is what the program may allocate: torch (~770 MiB of data) and the device's
    start-up come first, so even the schema's smallest budget leaves the program room."""
    code = (
        "import torch\n"
        "x = torch.ones(64 * 2**20, dtype=torch.uint8)  # 64 MiB: fits in 256\n"
        "print('fits', flush=True)\n"
        "y = torch.ones(512 * 2**20, dtype=torch.uint8)  # 512 MiB: does not\n"
    )
    r = run(code, tmp_path, memory_mb=256)
    assert "fits" in r.output
    assert r.memory_error and r.error_line == 4
