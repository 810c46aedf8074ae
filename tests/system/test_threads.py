"""The thread policy of the processes that train (tutor/threads.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tutor import threads

ROOT = Path(__file__).resolve().parents[2]


def test_few_cores_leave_one_for_everything_else_while_the_load_is_not_known(monkeypatch):
    monkeypatch.delenv("GPUTUTOR_THREADS", raising=False)
    assert [threads.training_threads(n) for n in (1, 2, 3, 4, 8, 64)] == [1, 1, 2, 3, 8, 64]


def test_a_run_takes_every_core_others_leave_it(monkeypatch):
    """Issue 36: all cores while nothing else uses them, one fewer for each core others keep busy
    (from half a core up), at least one."""
    monkeypatch.delenv("GPUTUTOR_THREADS", raising=False)
    two = [threads.training_threads(2, busy) for busy in (0.0, 0.2, 0.49, 0.5, 1.0, 1.4, 2.0)]
    assert two == [2, 2, 2, 1, 1, 1, 1]
    eight = [threads.training_threads(8, busy) for busy in (0.0, 1.0, 2.6, 7.9)]
    assert eight == [8, 7, 5, 1]


def _stat_reader(monkeypatch, others_per_second: float | None):
    """cpu_load.read as if other programs kept `others_per_second` cores busy (None: no /proc/stat)."""
    from tutor import cpu_load

    clock = {"t": 0.0}

    def read():
        clock["t"] += threads.LOOK_S
        busy = None if others_per_second is None else clock["t"] * others_per_second
        return cpu_load.CpuReading(clock["t"], busy, 0.0, 0.0)

    monkeypatch.setattr(cpu_load, "read", read)
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)


def test_the_decision_reads_the_load_and_leaves_a_users_setting_alone(monkeypatch):
    monkeypatch.delenv("GPUTUTOR_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv(threads.OURS, raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    _stat_reader(monkeypatch, 0.0)
    assert threads.decide() == 2  # idle: every core, as a plain PyTorch loop uses
    _stat_reader(monkeypatch, 1.0)
    assert threads.decide() == 1  # one core kept busy by another program: one left to it
    _stat_reader(monkeypatch, None)
    assert threads.decide() == 1  # the load cannot be read: the cautious count
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's own: kept
    assert threads.decide() == 2
    monkeypatch.setenv("GPUTUTOR_THREADS", "3")
    assert threads.decide() == 3


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="no /proc/stat (macOS): the cautious count is used")
def test_another_programs_busy_core_is_seen():
    """The real reading, with a process spinning beside it: at least half a core is others'."""
    spinner = subprocess.Popen(
        [sys.executable, "-c", "print('spinning', flush=True)\nwhile True: pass"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert spinner.stdout.readline() == "spinning\n"  # it has started: from here it spins
        assert threads.others_busy(look_s=0.3) >= threads.BUSY_CORE
    finally:
        spinner.kill()
        spinner.wait()


def test_an_override_wins_and_nonsense_is_ignored(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_THREADS", "3")
    assert threads.training_threads(2) == 3
    for bad in ("0", "-2", "two", ""):
        monkeypatch.setenv("GPUTUTOR_THREADS", bad)
        assert threads.training_threads(2) == 1


def test_the_cores_are_the_ones_this_process_may_use():
    if hasattr(os, "sched_getaffinity"):
        assert threads.usable_cores() == len(os.sched_getaffinity(0))
    assert threads.usable_cores() >= 1


def test_the_environment_is_set_unless_the_user_said(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_THREADS", "1")
    env = {}
    threads.set_env(env)
    assert env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", threads.OURS: "MKL_NUM_THREADS,OMP_NUM_THREADS"}
    threads.set_env(env, 2)  # the tutor's own value follows a later decision
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "2"
    env = {"OMP_NUM_THREADS": "7"}
    threads.set_env(env, 2)
    assert env["OMP_NUM_THREADS"] == "7" and env["MKL_NUM_THREADS"] == "2"  # the user's choice stays


def test_a_learners_program_runs_with_the_policy_and_can_change_it(tmp_path, monkeypatch):
    from tutor.exercises.sandbox import run_code

    monkeypatch.setenv("GPUTUTOR_THREADS", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    code = (
        "import torch\nfrom tutor.lab import report\nbefore = torch.get_num_threads()\n"
        "torch.set_num_threads(2)\nreport(before=before, after=torch.get_num_threads())\n"
    )
    result = run_code(code, tmp_path, timeout=120, memory_mb=4096)
    assert result.ok, result.output
    assert result.reports == {"before": 1, "after": 2}


def test_the_tutors_own_processes_train_with_the_policy(monkeypatch):
    env = {**os.environ, "GPUTUTOR_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run(
        [sys.executable, "-m", "tutor", "doctor", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    [cpu] = [d for d in json.loads(done.stdout)["devices"] if d["kind"] == "cpu"]
    assert cpu["threads"] == 1 and cpu["cores"] == threads.usable_cores()
    assert "training thread" in cpu["describe"]
