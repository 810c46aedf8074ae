"""`gpututor doctor --selftest`: every device path, for real, one line each."""

from __future__ import annotations

import json
import sys

import pytest

from tutor.cli import main
from tutor.experiments import selftest

CPU_PATHS = {"device detection", "synchronised timing", "autocast + GradScaler step",
             "checkpoint: save on the device, load on the CPU", "torchrun: processes that all-reduce"}


def test_on_this_cpu_each_path_that_applies_runs_for_real_and_the_rest_say_why_not(capsys):
    assert main(["doctor", "--selftest", "--json", "--device", "cpu"]) == 0
    report = json.loads(capsys.readouterr().out)
    checks = {c["name"]: c for c in report["checks"]}
    assert [c["name"] for c in report["checks"]] == [name for name, _ in selftest.CHECKS]
    assert report["failed"] == 0
    for name in CPU_PATHS | ({"out of memory, caught under a cap"} if sys.platform.startswith("linux") else set()):
        assert checks[name]["status"] == "ok", checks[name]
    for check in checks.values():
        assert check["status"] in ("ok", "n/a") and check["detail"]  # n/a says why: never a silent pass
    assert checks["pinned non-blocking copy"]["status"] == "n/a"
    assert "2 processes under torchrun, gloo on cpu: all-reduce gave 3 on every rank" in \
        checks["torchrun: processes that all-reduce"]["detail"]


def test_a_failing_check_is_said_with_its_reason_and_the_exit_code_is_1(monkeypatch, capsys):
    def broken(dev):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(selftest, "CHECKS", [("synchronised timing", broken), *selftest.CHECKS[2:4]])
    assert main(["doctor", "--selftest", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    assert "failed synchronised timing: RuntimeError: CUDA error: an illegal memory" in out
    assert "1 failed" in out


def test_an_unavailable_device_is_said_not_tracebacked(capsys):
    assert main(["doctor", "--selftest", "--device", "cuda:7"]) == 2
    assert "gpututor:" in capsys.readouterr().err


@pytest.mark.gpu
def test_every_path_passes_on_this_accelerator(accelerator, capsys):
    assert main(["doctor", "--selftest", "--json", "--device", accelerator]) == 0
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert all(c["status"] != "failed" for c in checks.values()), checks
    if accelerator == "cuda":  # every check applies to CUDA
        assert all(c["status"] == "ok" for c in checks.values()), checks
