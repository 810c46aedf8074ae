"""A shared box times runs fairly (measurement/slots.py, experiments/turns.py), with real processes:
several contend for one slot through one class folder, each logging when it entered and left its
timed window; a holder killed with -9 and a waiter killed in line must not block the rest."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tutor import checks
from tutor.checks.answers import ChoiceAnswer, ChoiceOption
from tutor.measurement import slots

ROOT = Path(__file__).resolve().parents[2]

# One learner's run, as experiments.start waits for its turn: it logs the places it is shown, when
# its window opens and closes. argv: class_dir, log, hold_s, until_file ("" for none), choice_s,
# run_now_after_s (-1: never).
WORKER = r"""
import json, os, sys, time
from pathlib import Path
from tutor.experiments import turns
from tutor.experiments.events import Note, Waiting
from tutor.measurement import slots

folder, log, hold, until, choice_s, run_now_after = sys.argv[1:7]
slots.CHOICE_S = float(choice_s)
out = open(log, "a", buffering=1)
def say(**kw):
    out.write(json.dumps({"pid": os.getpid(), "t": time.time(), **kw}) + "\n")
gen = turns.wait_turn("cpu", "test", Path(folder))
began = time.monotonic()
try:
    while True:
        event = next(gen)
        if isinstance(event, Waiting):
            say(event="waiting", ahead=event.waiting_ahead, running=event.running, choice=event.choice,
                text=event.text())
        elif isinstance(event, Note):
            say(event="note", text=event.text)
        if float(run_now_after) >= 0 and time.monotonic() - began > float(run_now_after):
            slots.choose_run_now()
except StopIteration as stop:
    turn = stop.value
say(event="enter", shared=turn.shared)
if until:
    while not Path(until).exists():
        time.sleep(0.02)
else:
    time.sleep(float(hold))
say(event="exit")
turn.release()
"""


def _start(
    folder: Path,
    log: Path,
    hold: float = 0.15,
    until: Path | None = None,
    choice_s: float = 60.0,
    run_now_after: float = -1,
    threads: int | None = None,
) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GPUTUTOR_CLASS_DIR", None)
    if threads is not None:
        env["GPUTUTOR_THREADS"] = str(threads)
    else:
        env.pop("GPUTUTOR_THREADS", None)
    args = [str(folder), str(log), str(hold), str(until or ""), str(choice_s), str(run_now_after)]
    return subprocess.Popen([sys.executable, "-c", WORKER, *args], env=env, cwd=ROOT)


def _lines(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _wait_for(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for the workers")


def _seen(log: Path, pid: int, event: str) -> list[dict]:
    return [r for r in _lines(log) if r["pid"] == pid and r["event"] == event]


def _windows(log: Path) -> dict[int, tuple[float, float]]:
    rows = _lines(log)
    enter = {r["pid"]: r["t"] for r in rows if r["event"] == "enter"}
    leave = {r["pid"]: r["t"] for r in rows if r["event"] == "exit"}
    return {pid: (enter[pid], leave[pid]) for pid in enter}


def _finish(procs: list[subprocess.Popen], timeout: float = 15.0) -> None:
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise


@pytest.fixture
def one_core(monkeypatch):
    """Every worker's CPU queue has one slot, whatever this machine's cores."""
    monkeypatch.setenv("GPUTUTOR_THREADS", str(os.cpu_count() or 1))


def _holder(folder: Path, log: Path, release: Path, **kw) -> subprocess.Popen:
    holder = _start(folder, log, until=release, **kw)
    _wait_for(lambda: bool(_seen(log, holder.pid, "enter")))
    return holder


def test_contenders_take_turns_in_order_and_windows_never_overlap(tmp_path: Path) -> None:
    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "release"
    threads = os.cpu_count() or 1  # one slot
    holder = _holder(folder, log, release, threads=threads)
    waiters = []
    for i in range(3):  # each in line (its place shown) before the next comes
        w = _start(folder, log, hold=0.15, threads=threads)
        _wait_for(lambda w=w: bool(_seen(log, w.pid, "waiting")))
        first = _seen(log, w.pid, "waiting")[0]
        assert (first["running"], first["ahead"]) == (1, i), first
        assert f"{i + 1} run{'s' if i else ''} ahead of you" in first["text"]
        waiters.append(w)
    release.touch()
    _finish([holder, *waiters])
    windows = _windows(log)
    assert len(windows) == 4
    order = sorted(windows, key=lambda pid: windows[pid][0])
    assert order == [holder.pid, *(w.pid for w in waiters)]  # first come, first timed
    spans = [windows[pid] for pid in order]
    for (_, left), (entered, _) in itertools.pairwise(spans):
        assert entered >= left, "two timed windows overlapped"
    history = slots.read_history(folder)
    assert sorted(h["pid"] for h in history) == sorted(windows)
    assert not list((folder / slots.QUEUE).glob("*.wait.*"))  # every ticket handed in


def test_a_holder_killed_with_9_releases_at_once(tmp_path: Path) -> None:
    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "never"
    threads = os.cpu_count() or 1
    holder = _holder(folder, log, release, threads=threads)
    waiter = _start(folder, log, hold=0.05, threads=threads)
    _wait_for(lambda: bool(_seen(log, waiter.pid, "waiting")))
    holders = slots.state(folder)[0].holders
    assert [h.pid for h in holders] == [holder.pid]  # doctor's view: who holds the slot
    killed = time.time()
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    _finish([waiter])
    entered = _seen(log, waiter.pid, "enter")[0]["t"]
    assert entered - killed < 2.0, f"the next run got in {entered - killed:.2f} s after the kill"


def test_a_dead_waiters_ticket_does_not_block(tmp_path: Path) -> None:
    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "release"
    threads = os.cpu_count() or 1
    holder = _holder(folder, log, release, threads=threads)
    doomed = _start(folder, log, threads=threads)
    _wait_for(lambda: bool(_seen(log, doomed.pid, "waiting")))
    behind = _start(folder, log, hold=0.05, threads=threads)
    _wait_for(lambda: bool(_seen(log, behind.pid, "waiting")))
    assert _seen(log, behind.pid, "waiting")[0]["ahead"] == 1
    os.kill(doomed.pid, signal.SIGKILL)
    doomed.wait()
    _wait_for(lambda: _seen(log, behind.pid, "waiting")[-1]["ahead"] == 0)  # its place moved up
    assert slots.state(folder)[0].waiting == [slots.state(folder)[0].waiting[0]]  # only `behind` is in line
    release.touch()
    _finish([holder, behind])
    assert _seen(log, behind.pid, "enter")
    assert not _seen(log, doomed.pid, "enter")
    assert not list((folder / slots.QUEUE).glob("*.wait.*"))  # the dead one's ticket was removed


def test_run_now_after_the_choice_runs_shared(tmp_path: Path) -> None:
    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "release"
    threads = os.cpu_count() or 1
    holder = _holder(folder, log, release, threads=threads)
    impatient = _start(folder, log, hold=0.05, choice_s=0.4, run_now_after=0.8, threads=threads)
    _finish([impatient])
    waits = _seen(log, impatient.pid, "waiting")
    assert not waits[0]["choice"] and waits[-1]["choice"]  # offered once it had waited choice_s
    assert _seen(log, impatient.pid, "enter")[0]["shared"] is True
    notes = " ".join(r["text"] for r in _seen(log, impatient.pid, "note"))
    assert "timing is shared" in notes
    release.touch()
    _finish([holder])
    history = {h["pid"]: h for h in slots.read_history(folder)}
    assert impatient.pid not in history  # it never held the slot
    assert history[holder.pid]["shared"] is False


def test_cpu_slots_come_from_cores_and_threads(tmp_path: Path, monkeypatch) -> None:
    assert slots.cpu_slots(2, 2) == 1
    assert slots.cpu_slots(2, 1) == 2
    assert slots.cpu_slots(16, 3) == 5
    assert slots.cpu_slots(1, 4) == 1
    from tutor import threads

    monkeypatch.setenv("GPUTUTOR_THREADS", "1")
    assert slots.slots_for("cpu") == threads.usable_cores()
    monkeypatch.setenv("GPUTUTOR_THREADS", str(threads.usable_cores()))
    assert slots.slots_for("cpu") == 1
    assert slots.slots_for("cuda:0") == 1
    if threads.usable_cores() < 2:
        pytest.skip("two slots need two cores")
    # Two one-thread runs on two cores time side by side; a third waits.
    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "release"
    first = _holder(folder, log, release, threads=1)
    second = _holder(folder, log, release, threads=1)
    third = _start(folder, log, hold=0.05, threads=1)
    if threads.usable_cores() == 2:
        _wait_for(lambda: bool(_seen(log, third.pid, "waiting")))
        assert _seen(log, third.pid, "waiting")[0]["running"] == 2
    release.touch()
    _finish([first, second, third])


def test_no_class_folder_no_queue(monkeypatch) -> None:
    from tutor.experiments import turns

    monkeypatch.delenv("GPUTUTOR_CLASS_DIR", raising=False)
    assert slots.queue_for("cpu") is None
    gen = turns.wait_turn("cpu", "test")
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value.ticket is None and not stop.value.value.shared


def test_a_shared_timing_is_never_graded() -> None:
    spec = ChoiceAnswer(
        type="choice", options=[ChoiceOption(text="under 2x", min=0, max=2), ChoiceOption(text="2x or more", min=2)]
    )
    fair = checks.score_prediction("2x or more", spec, 3.0, "x", interval=(2.8, 3.2))
    assert fair.hit
    shared = checks.score_prediction("2x or more", spec, 3.0, "x", interval=(2.8, 3.2), shared=True)
    assert shared.undecided and not shared.hit
    assert "timed beside another" in shared.summary
    missed = checks.score_prediction("under 2x", spec, 3.0, "x", shared=True)  # without an interval too
    assert missed.undecided and not missed.hit


def test_a_ratio_of_runs_is_shared_when_either_is() -> None:
    from tutor.course.session import Evidence, ratio_evidence

    top = Evidence({"speedup": 4.0, slots.TIMING_SHARED: True}, "measured", None)
    bottom = Evidence({"speedup": 2.0}, "measured", None)
    assert ratio_evidence("speedup", top, bottom).metrics.get(slots.TIMING_SHARED) is True


@pytest.mark.gpu
def test_nvml_says_mig_and_other_processes_on_a_cuda_card() -> None:
    pytest.importorskip("pynvml")
    from tutor.experiments import devices
    from tutor.measurement import noise

    dev = devices.resolve("auto")
    if dev.kind != "cuda":
        pytest.skip("an NVIDIA GPU is needed")
    seen = noise.sharing(dev)
    assert seen is not None
    assert seen.mig in (True, False)
    assert seen.others is None or seen.others >= 0
    import torch

    torch.ones(1, device=dev.torch_device)  # a context of our own: never counted among the others
    again = noise.sharing(dev)
    assert again is not None and again.others == seen.others


def test_the_engine_waits_in_line_cancels_and_runs_now(tmp_path: Path, monkeypatch) -> None:
    """The TUI's engine process, for real: a run in line shows its place, the learner's cancel
    stops it at once (the engine is not killed for it), and run now finishes it marked shared."""
    from tutor.experiments.engine import Engine
    from tutor.experiments.events import Finished, Waiting

    folder, log, release = tmp_path / "class", tmp_path / "log.jsonl", tmp_path / "release"
    threads = os.cpu_count() or 1
    monkeypatch.setenv("GPUTUTOR_CLASS_DIR", str(folder))  # the engine process inherits both
    monkeypatch.setenv("GPUTUTOR_THREADS", str(threads))
    holder = _holder(folder, log, release, threads=threads)
    engine = Engine(log_path=str(tmp_path / "engine.log"))
    try:
        engine.detect("cpu")
        pid = engine.pid
        stop = [False]
        messages = []
        for message in engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: stop[0]):
            messages.append(message)
            if message[0] == "event" and isinstance(message[1], Waiting):
                assert "1 run ahead of you" in message[1].text()
                stop[0] = True
        assert messages[-1][:2] == ("ended", "cancelled")
        assert engine.pid == pid  # stopped between events, not killed
        assert not list((folder / slots.QUEUE).glob("*.wait.*"))  # out of the line

        now = [False]
        finished = None
        for message in engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: False, run_now=lambda: now[0]):
            if message[0] == "event" and isinstance(message[1], Waiting):
                now[0] = True
            if message[0] == "event" and isinstance(message[1], Finished):
                finished = message[1]
        assert finished is not None and finished.metrics.get(slots.TIMING_SHARED) is True

        release.touch()
        _finish([holder])
        events = [m[1] for m in engine.run("fp16-underflow", {}, "cpu", cancelled=lambda: False) if m[0] == "event"]
        assert not any(isinstance(e, Waiting) for e in events)  # its turn at once
        assert slots.TIMING_SHARED not in events[-1].metrics  # a choice made for one run only
    finally:
        engine.close()
        release.touch()
