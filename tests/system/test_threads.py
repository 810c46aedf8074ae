"""The thread policy of the processes that train (tutor/threads.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tutor import threads

ROOT = Path(__file__).resolve().parents[2]


def test_few_cores_leave_one_for_everything_else(monkeypatch):
    monkeypatch.delenv("GPUTUTOR_THREADS", raising=False)
    assert [threads.training_threads(n) for n in (1, 2, 3, 4, 8, 64)] == [1, 1, 2, 3, 8, 64]


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
    assert env == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env = {"OMP_NUM_THREADS": "7"}
    threads.set_env(env)
    assert env["OMP_NUM_THREADS"] == "7"  # the user's choice stays


def test_a_learners_program_runs_with_the_policy_and_can_change_it(tmp_path, monkeypatch):
    from tutor.exercises.sandbox import run_code

    monkeypatch.setenv("GPUTUTOR_THREADS", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    code = ("import torch\nfrom tutor.lab import report\nbefore = torch.get_num_threads()\n"
            "torch.set_num_threads(2)\nreport(before=before, after=torch.get_num_threads())\n")
    result = run_code(code, tmp_path, timeout=120, memory_mb=4096)
    assert result.ok, result.output
    assert result.reports == {"before": 1, "after": 2}


def test_the_tutors_own_processes_train_with_the_policy(monkeypatch):
    env = {**os.environ, "GPUTUTOR_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run([sys.executable, "-m", "tutor", "doctor", "--json"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [cpu] = [d for d in json.loads(done.stdout)["devices"] if d["kind"] == "cpu"]
    assert cpu["threads"] == 1 and cpu["cores"] == threads.usable_cores()
    assert "training thread" in cpu["describe"]
