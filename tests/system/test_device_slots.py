"""A shared box times runs fairly (measurement/slots.py, experiments/turns.py), with real processes:
several contend for one slot through one class folder, each logging when it entered and left its
timed window; a holder killed with -9 and a waiter killed in line must not block the rest."""

from __future__ import annotations

import contextlib
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


def test_an_exercise_program_waits_its_turn_and_says_its_place(tmp_path: Path, monkeypatch) -> None:
    """A learner's exercise program (the sandbox's child) holds the CPU's slot while it runs: with
    every slot held by another learner it waits, saying its place, and starts once one is free."""
    from tutor.exercises.sandbox import run_code

    folder = tmp_path / "class"
    monkeypatch.setenv(slots.CLASS_DIR_ENV, str(folder))
    queue = slots.queue_for("cpu")
    assert queue is not None
    held = []
    for _ in range(slots.slots_for("cpu")):  # every CPU slot, held by "another learner" (this process)
        ticket = queue.join("other")
        assert ticket.take()
        held.append(ticket)
    freed: list[float] = []

    def free_later() -> None:
        time.sleep(6.0)
        freed.append(time.time())
        for ticket in held:
            ticket.release()

    import threading

    threading.Thread(target=free_later, daemon=True).start()
    code = "import time\nprint('started at', time.time())\n"
    run = run_code(code, tmp_path / "work", timeout=60, memory_mb=2048)
    assert run.ok, run.output
    started = float(run.output.split("started at ")[1].split()[0])
    assert freed and started >= freed[0]
    assert "[gpututor] waiting for the CPU: " in run.output and "run(s) ahead of you" in run.output
    assert "[gpututor] your turn on the CPU after" in run.output
    (record,) = [r for r in slots.read_history(folder) if r.get("experiment") == "exercise"]
    assert record["device"] == "cpu" and not record["shared"]


def test_an_exercise_program_that_crashes_still_writes_its_turn_into_the_history(tmp_path: Path, monkeypatch) -> None:
    """The child leaves through os._exit after a crash (no atexit handler runs): it releases first."""
    from tutor.exercises.sandbox import run_code

    folder = tmp_path / "class"
    monkeypatch.setenv(slots.CLASS_DIR_ENV, str(folder))
    run = run_code("raise ValueError('planted')\n", tmp_path / "work", timeout=60, memory_mb=2048)
    assert not run.ok and "planted" in run.output
    (record,) = [r for r in slots.read_history(folder) if r.get("experiment") == "exercise"]
    assert record["device"] == "cpu" and record["released"] >= record["took"]


def test_gpututor_inspect_holds_the_slot_while_the_script_runs(tmp_path: Path, monkeypatch) -> None:
    from tutor.inspect import launch

    folder = tmp_path / "class"
    monkeypatch.setenv(slots.CLASS_DIR_ENV, str(folder))
    script = ROOT / "tests" / "inspect_scripts" / "small_train.py"
    ran = launch.run_script(script, [], warmup=1, steps=2, timeout=60, measure_roof=False)
    assert ran.watched.get("outcome") == "stopped" and ran.watched.get("timing_shared") is False
    (record,) = slots.read_history(folder)
    assert (record["experiment"], record["device"], record["shared"]) == ("inspect", "cpu", False)


def test_a_distributed_run_holds_a_slot_of_every_gpu_it_uses_in_index_order(monkeypatch) -> None:
    """NCCL gives each of N ranks its own GPU: the run waits for cuda:0, then cuda:1 ... (in that
    order, so two such runs never hold one each), and holds them all to its end; a gloo run is
    the CPU's, whatever device it was asked for."""
    from types import SimpleNamespace

    from tutor import experiments
    from tutor.experiments import turns
    from tutor.experiments.events import Finished
    from tutor.experiments.spec import Params

    class Ranks(Params):
        world_size: int = 2

    cuda = SimpleNamespace(kind="cuda", index=0, torch_device="cuda:0")
    monkeypatch.setattr(experiments, "gpu_count", lambda: 3)  # a box with three GPUs
    assert experiments.slot_keys(Ranks(world_size=3), cuda) == ["cuda:0", "cuda:1", "cuda:2"]
    assert experiments.slot_keys(Params(), cuda) == ["cuda:0"]
    assert experiments.slot_keys(Ranks(world_size=4), cuda) == ["cpu"]  # gloo: one GPU short of NCCL
    assert experiments.slot_keys(Ranks(), SimpleNamespace(kind="cpu", index=None)) == ["cpu"]

    log: list[str] = []

    def wait_turn(key, name, folder=None):
        log.append(f"wait {key}")
        yield from ()
        return SimpleNamespace(shared=False, release=lambda: log.append(f"release {key}"))

    def measure(params, dev):
        log.append("measure")
        yield Finished({})

    monkeypatch.setattr(turns, "wait_turn", wait_turn)
    from tutor.experiments import gpu_share

    monkeypatch.setattr(gpu_share, "capped", lambda dev: contextlib.nullcontext())
    list(experiments._within_the_gpu_cap(measure, Ranks(), cuda, "ddp"))
    assert log == ["wait cuda:0", "wait cuda:1", "measure", "release cuda:0", "release cuda:1"]


def test_the_capstone_run_with_a_class_folder_holds_one_slot_not_two(tmp_path: Path, monkeypatch) -> None:
    """inspect-example's own turn (experiments.start) holds the CPU's slot; the script it starts
    must not stand in line behind its own parent (it once waited there until its time limit)."""
    from experiment_runs import run_experiment

    folder = tmp_path / "class"
    monkeypatch.setenv(slots.CLASS_DIR_ENV, str(folder))
    monkeypatch.setattr(slots, "slots_for", lambda key: 1)  # one slot: a second place in line would wait
    _, m = run_experiment("inspect-example", {"steps": 4, "warmup": 1, "example": "char-gpt", "batch_size": 4})
    assert m["flops_per_step"] > 0 and not m.get(slots.TIMING_SHARED)
    (record,) = slots.read_history(folder)
    assert (record["experiment"], record["device"]) == ("inspect-example", "cpu")
