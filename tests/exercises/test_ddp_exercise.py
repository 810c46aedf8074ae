"""The lesson `beyond-one-gpu`'s exercise: the learner's file runs under torchrun with 2
processes (tutor/exercises/sandbox.py `nproc`), each rank watched on its own
(tutor/exercises/observe.py, ranks=True), and behaviour.py compares the ranks.

`lesson test` runs the lesson's solution and its five listed mistakes on every built-in lesson
(tests/system), so none of them runs here. What runs here is what it does not: the judges on
fabricated per-rank summaries (no process), correct code written two other ways, and the
launch itself: a crash in one rank, a timeout, a cancel and the tutor going away leave no
process behind, and a launch that fails before the code ran is tried once more.
Each torchrun launch costs ~5 s here (torch imported in three processes).
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tutor.course.lesson import ExerciseStep, Lesson, LessonError, ReadStep
from tutor.course.loader import load_file, load_text
from tutor.exercises import sandbox
from tutor.exercises.behaviour import Context, judge
from tutor.exercises.names import BEHAVIOURS, DISTRIBUTED

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "beyond-one-gpu.yaml"
PROGRAMS = Path(__file__).resolve().parent / "exercise_programs"
EDITOR_COLUMNS = 69
STEP = "ex-ddp-script"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups, /proc, RLIMIT_DATA")


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(LESSON)


# ---------------------------------------------------------------- the lesson's shape


def test_lesson_identity_and_place(lesson: Lesson) -> None:
    assert (lesson.id, lesson.order) == ("beyond-one-gpu", 50)
    before = load_file(ROOT / "lessons" / "training-iron-law.yaml")
    assert before.next == lesson.id and before.order < lesson.order
    assert isinstance(lesson.steps[0], ReadStep) and lesson.steps[0].id == "intro"
    assert isinstance(lesson.steps[-1], ReadStep) and lesson.steps[-1].id == "closing"
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "torchrun"):
        assert name in lesson.steps[0].body, name


def test_the_exercise_runs_under_torchrun_and_fits_the_editor(lesson: Lesson) -> None:
    step = lesson.step(STEP)
    assert isinstance(step, ExerciseStep) and step.nproc == 2
    assert step.timeout <= 180 and "____" in step.starter and len(step.tiered_hints) >= 2
    for name, code in [("starter", step.starter), ("solution", step.solution)] + [
        (m.name, m.code) for m in step.mistakes
    ]:
        ast.parse(code, filename=name)
        assert not [line for line in code.splitlines() if len(line) > EDITOR_COLUMNS], name
    # The five mistakes the issue names, each failing the requirement about its cause.
    named = {r.id: r for r in step.requirements}
    checks = {getattr(named[m.fails], "check", named[m.fails].type) for m in step.mistakes}
    assert {
        "ranks_split_data",
        "gradients_synchronized",
        "saves_on_rank_zero",
        "reshuffles_each_epoch",
        "file",
    } <= checks
    assert {getattr(r, "check", "") for r in step.requirements} >= DISTRIBUTED


def test_every_distributed_check_has_a_judge_and_a_name_lint_knows() -> None:
    from tutor.exercises.behaviour import BEHAVIOUR_JUDGES

    assert DISTRIBUTED <= BEHAVIOURS and set(BEHAVIOUR_JUDGES) == BEHAVIOURS


def test_lint_wants_launch_for_the_checks_that_compare_ranks_and_no_probe_under_it() -> None:
    head = 'id: l\ntitle: L\nsteps:\n  - id: ex\n    kind: exercise\n    starter: "x = 1"\n    solution: "x = 1"\n'
    with pytest.raises(LessonError) as info:
        load_text(head + "    requirements:\n      - {type: behaviour, id: b, check: ranks_split_data, feedback: x}\n")
    assert "launch: {nproc: 2}" in info.value.issues[0].message
    with pytest.raises(LessonError) as info:
        load_text(
            head + "    launch: {nproc: 2}\n    requirements:\n      - {type: function, id: f, name: g, "
            "probe: picks_device, feedback: x}\n"
        )
    assert "a function probe calls the learner's function in one process" in info.value.issues[0].message
    with pytest.raises(LessonError) as info:
        load_text(
            head + "    launch: {nproc: 1}\n    requirements:\n      - {type: report, id: r, name: x, feedback: x}\n"
        )
    assert "greater than or equal to 2" in info.value.issues[0].message
    assert (
        load_text(head + "    launch: {}\n    requirements:\n      - {type: report, id: r, name: x, feedback: x}\n")
        .steps[0]
        .nproc
        == 2
    )


# ---------------------------------------------------------------- the judges, on fabricated ranks


def _rank(
    rank: int,
    epochs: list[list[int]],
    *,
    prints=(1.5, 2.5),
    saves=None,
    dataset=8,
    sampler="DistributedSampler",
    sampler_epochs=None,
    joined=1,
    left=1,
    backend="gloo",
    world_size=2,
    device="cpu",
) -> dict:
    sampler_epochs = sampler_epochs if sampler_epochs is not None else list(range(len(epochs)))
    return {
        "rank": rank,
        "models": [{"class": "DistributedDataParallel", "train_calls": 4, "devices": {f"{device}/{device}": 4}}],
        "passes": [
            {
                "dataset": dataset,
                "sampler": sampler,
                "batches": 2,
                "samples": list(samples),
                "sampler_epoch": e,
                "trained": True,
            }
            for samples, e in zip(epochs, sampler_epochs)
        ],
        "steps": len(prints),
        "step_prints": list(prints),
        "saves": saves
        if saves is not None
        else ([{"line": 60, "path": "/w/saved_models/ddp.pth"}] if rank == 0 else []),
        "process_group": {"joined": joined, "left": left, "backend": backend, "world_size": world_size, "rank": rank},
    }


def _ctx(*ranks: dict, stopped: bool = False, error: tuple[str, str] | None = None) -> Context:
    observed = dict(ranks[0]) if ranks and ranks[0] is not None else {}
    observed["ranks"] = list(ranks)
    return Context(observed, "", *(error or (None, None)), stopped=stopped)


GOOD = (_rank(0, [[1, 2, 3, 4], [5, 6, 7, 8]]), _rank(1, [[5, 6, 7, 8], [1, 2, 3, 4]]))


def test_the_judges_pass_what_ddp_with_a_distributed_sampler_does() -> None:
    for check in sorted(DISTRIBUTED):
        assert judge(check, _ctx(*GOOD)).passed, check


def test_ranks_on_the_same_images_or_half_the_data_fail_with_the_count() -> None:
    same = _ctx(
        _rank(0, [[1, 2, 3, 4, 5, 6, 7, 8]] * 2, sampler="RandomSampler"),
        _rank(1, [[8, 7, 6, 5, 4, 3, 2, 1]] * 2, sampler="RandomSampler"),
    )
    verdict = judge("ranks_split_data", same)
    assert verdict.cause.startswith("In epoch 1 ranks 0 and 1 trained on the same 8 images")
    assert "RandomSampler" in verdict.cause
    overlap = judge("ranks_split_data", _ctx(_rank(0, [[1, 2, 3, 4]]), _rank(1, [[4, 5, 6, 7]])))
    assert "1 of the 4 images rank 0 trained on were in rank 1's share too (25%)" in overlap.cause
    half = judge("ranks_split_data", _ctx(_rank(0, [[1, 2]], dataset=8), _rank(1, [[3, 4]], dataset=8)))
    assert "together trained on 4 of the 8 images in the dataset (50%)" in half.cause


def test_the_same_order_twice_names_the_samplers_epoch() -> None:
    stuck = _ctx(
        _rank(0, [[1, 2, 3, 4]] * 2, sampler_epochs=[0, 0]), _rank(1, [[5, 6, 7, 8]] * 2, sampler_epochs=[0, 0])
    )
    verdict = judge("reshuffles_each_epoch", stuck)
    assert verdict.cause.startswith("Rank 0 trained on the same 4 images in the same order in epoch 2 as in epoch 1")
    assert "DistributedSampler's epoch was 0 both times" in verdict.cause
    once = judge("reshuffles_each_epoch", _ctx(_rank(0, [[1, 2, 3, 4]]), _rank(1, [[5, 6, 7, 8]])))
    assert not once.passed and once.judged and "train 2 epochs" in once.cause
    by_hand = _ctx(_rank(0, [[1, 2, 3, 4]]), {**_rank(1, [[5, 6, 7, 8]]), "passes": []})
    assert "did not come from a DataLoader" in judge("ranks_split_data", by_hand).cause


def test_weights_that_drift_apart_fail_at_the_first_step_they_differ() -> None:
    apart = judge(
        "gradients_synchronized",
        _ctx(_rank(0, [[1]], prints=(1.0, 2.0, 3.0)), _rank(1, [[2]], prints=(1.0, 2.001, 3.0))),
    )
    assert apart.cause.startswith("After optimizer step 2 the weights in rank 1 differed from rank 0's")
    noise = _ctx(_rank(0, [[1]], prints=(1000.0,)), _rank(1, [[2]], prints=(1000.0000001,)))
    assert judge("gradients_synchronized", noise).passed
    uneven = judge("gradients_synchronized", _ctx(_rank(0, [[1]], prints=(1.0,)), _rank(1, [[2]], prints=(1.0, 2.0))))
    assert uneven.cause.startswith("Rank 0 took 1 optimizer steps and rank 1 2")


def test_saves_from_another_rank_are_named_with_their_line() -> None:
    both = [{"line": 44, "path": "/w/saved_models/ddp.pth"}]
    every = judge("saves_on_rank_zero", _ctx(_rank(0, [[1]]), _rank(1, [[2]], saves=both)))
    assert (
        every.cause == "Rank 1 called torch.save too (line 44), on the same file as rank 0: the processes "
        "wrote it at the same time."
    )
    wrong = judge("saves_on_rank_zero", _ctx(_rank(0, [[1]], saves=[]), _rank(1, [[2]], saves=both)))
    assert wrong.cause.startswith("The checkpoint was written by rank 1 (line 44), not rank 0")
    assert (
        judge("saves_on_rank_zero", _ctx(_rank(0, [[1]], saves=[]), _rank(1, [[2]]))).cause
        == "No process called torch.save."
    )


def test_the_process_group_joined_with_the_right_backend_and_left() -> None:
    no_init = _ctx(
        _rank(0, [[1]], joined=0),
        _rank(1, [[2]], joined=0),
        stopped=True,
        error=(
            "ValueError",
            ("Default process group has not been initialized, please make sure to call init_process_group."),
        ),
    )
    verdict = judge("joins_process_group", no_init)
    assert verdict.explains_stop and verdict.cause.startswith("Rank 0 never called dist.init_process_group()")
    gloo_on_gpu = judge("joins_process_group", _ctx(_rank(0, [[1]], device="cuda"), _rank(1, [[2]], device="cuda")))
    assert gloo_on_gpu.cause == "Rank 0 trained on CUDA with the gloo backend: GPUs exchange gradients through nccl."
    alone = judge("joins_process_group", _ctx(_rank(0, [[1]], world_size=1), _rank(1, [[2]], world_size=1)))
    assert alone.cause.startswith("Rank 0 joined a group of 1 process, but torchrun started 2")
    kept = judge("joins_process_group", _ctx(_rank(0, [[1]], left=0), _rank(1, [[2]])))
    assert kept.cause.startswith("Rank 0 never called dist.destroy_process_group() at the end")
    assert not judge("joins_process_group", _ctx(_rank(0, [[1]], left=0), _rank(1, [[2]]), stopped=True)).judged


def test_what_a_run_cannot_show_is_not_held_against_it() -> None:
    gone = _ctx(GOOD[0], None, stopped=True)
    for check in sorted(DISTRIBUTED):
        verdict = judge(check, gone)
        assert not verdict.passed and not verdict.judged and "rank 1 stopped before" in verdict.cause, check
    one_process = Context({"models": []}, "")
    assert "this run was one process" in judge("ranks_split_data", one_process).cause
    overwritten = _ctx({**GOOD[0], "passes": "not a list"}, GOOD[1])
    assert not judge("ranks_split_data", overwritten).judged


# ---------------------------------------------------------------- a launch's outcome, from its files


def _launch_dir(tmp_path: Path, *, started=(0, 1), exits=(), log="") -> Path:
    ranks = tmp_path / sandbox.RANKS_DIR
    ranks.mkdir(parents=True)
    for rank in started:
        (ranks / f"{rank}.started").write_text("")
    for rank, code in exits:
        (ranks / f"{rank}.exit").write_text(code)
    (tmp_path / sandbox.LAUNCH_DIR).mkdir()
    (tmp_path / sandbox.LAUNCH_DIR / sandbox.LAUNCHER_LOG).write_text(log)
    return tmp_path


def test_torchrun_aborting_before_the_code_ran_is_a_failed_launch(tmp_path: Path) -> None:
    ran = sandbox._Ran(-signal.SIGABRT, False, False, "", 0)
    result = sandbox._launch_result(_launch_dir(tmp_path, started=()), ran, 2)
    assert (
        result.launch_problem == "the launch failed: torchrun stopped with SIGABRT before your code ran in "
        "every process"
    )
    assert result.problem() == result.launch_problem and not result.ok


def test_a_crash_after_the_code_started_is_the_programs_with_its_rank(tmp_path: Path) -> None:
    log = "Root Cause (first observed failure):\n[1]:\n  rank      : 1 (local_rank: 1)\n  exitcode  : -11 (pid: 9)\n"
    result = sandbox._launch_result(
        _launch_dir(tmp_path, exits=[(0, "0")], log=log), sandbox._Ran(1, False, False, "", 0), 2
    )
    assert result.launch_problem is None and result.signal == "SIGSEGV" and result.error_rank == 1
    assert result.problem() == "the program crashed (SIGSEGV) in rank 1"


def test_the_same_error_in_every_rank_is_said_once(tmp_path: Path) -> None:
    import json

    workdir = _launch_dir(tmp_path, exits=[(0, "1"), (1, "1")])
    for rank, at in ((0, 2.0), (1, 1.0)):
        record = {
            "type": "NameError",
            "message": "name '____' is not defined",
            "line": 17,
            "rank": rank,
            "time": at,
            "traceback": f"rank {rank}'s traceback",
        }
        (workdir / f".error.json.{rank}").write_text(json.dumps(record))
    result = sandbox._launch_result(workdir, sandbox._Ran(1, False, False, "", 0), 2)
    assert result.traceback == "rank 1's traceback"  # the first to raise
    assert result.problem() == "the program raised NameError at line 17 in every rank: name '____' is not defined"


def test_the_rank_that_failed_is_reported_though_the_one_waiting_on_it_was_stamped_first(tmp_path: Path) -> None:
    """On a loaded machine the waiting rank's echo ("Connection closed by peer") can carry the
    earlier time: the cause, rank 1's MemoryError, is still the one reported."""
    import json

    workdir = _launch_dir(tmp_path, exits=[(0, "1"), (1, "1")])
    records = {
        0: (
            "RuntimeError",
            "[../third_party/gloo/gloo/transport/tcp/pair.cc:538] Connection closed by peer [127.0.0.1]:29500",
            6,
            1.0,
        ),
        1: ("MemoryError", "", 5, 2.0),
    }
    for rank, (kind, message, line, at) in records.items():
        record = {
            "type": kind,
            "message": message,
            "line": line,
            "rank": rank,
            "time": at,
            "traceback": f"rank {rank}'s traceback",
        }
        (workdir / f".error.json.{rank}").write_text(json.dumps(record))
    result = sandbox._launch_result(workdir, sandbox._Ran(1, False, False, "", 0), 2)
    assert result.error_rank == 1 and result.error_type == "MemoryError" and result.traceback == "rank 1's traceback"


def test_a_failed_launch_is_said_and_tried_once_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = []
    real = sandbox._launch_result

    def fail_first(workdir, ran, nproc):
        attempts.append(ran)
        if len(attempts) == 1:
            return real(
                _launch_dir(tmp_path / "fake", started=()), sandbox._Ran(-signal.SIGABRT, False, False, "", 0), nproc
            )
        return real(workdir, ran, nproc)

    monkeypatch.setattr(sandbox, "_launch_result", fail_first)
    said: list[str] = []
    result = sandbox.run_code(
        "print('hello from', __import__('os').environ['RANK'])\n",
        tmp_path / "w",
        timeout=90,
        memory_mb=1024,
        nproc=2,
        on_output=said.append,
    )
    assert len(attempts) == 2 and result.ok and result.relaunched, result.output
    note = (
        "[the launch failed: torchrun stopped with SIGABRT before your code ran in every process; starting "
        "the 2 processes once more]"
    )
    assert note in "".join(said) and result.output.startswith(note)
    assert "hello from 0" in result.output and "hello from 1" in result.output


def test_two_ranks_printing_at_once_keep_each_line_whole(tmp_path: Path) -> None:
    """print writes its pieces one by one; unbuffered, two ranks' lines mixed on the shared pipe
    ('hello fromhello from 1'). Each rank's output is buffered to the line: one write per line."""
    code = (
        "import os\nimport torch.distributed as dist\nrank = os.environ['RANK']\n"
        "dist.init_process_group('gloo')\ndist.barrier()  # both print at once\n"
        "for i in range(100):\n    print('line', i, 'of rank', rank, 'says', *'x' * 40)  # 45 pieces a line\n"
        "dist.destroy_process_group()\n"
    )
    result = sandbox.run_code(code, tmp_path / "w", timeout=90, memory_mb=1024, nproc=2)
    assert result.ok, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("line ") or "of rank" in line]
    assert len(lines) == 200
    assert all(re.fullmatch(r"line \d+ of rank [01] says( x){40}", line) for line in lines), next(
        line for line in lines if not re.fullmatch(r"line \d+ of rank [01] says( x){40}", line)
    )


# ---------------------------------------------------------------- launches: what is left behind


def _tagged_processes() -> list[int]:
    """Processes started by a launch of this test process (their token names our pid)."""
    mine = f"GPUTUTOR_LAUNCH=2-{os.getpid()}-".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mine in f.read():
                        found.append(int(entry))
            except OSError:
                pass
    return [pid for pid in found if sandbox._running(pid)]


def _pids(workdir: Path, pattern: str) -> list[int]:
    return [int(p.read_text().split()[0]) for p in workdir.glob(pattern) if p.read_text().strip()]


def _all_gone(pids: list[int], within: float = 5.0) -> list[int]:
    until = time.monotonic() + within
    while time.monotonic() < until:
        left = [pid for pid in pids if sandbox._running(pid)]
        if not left:
            return []
        time.sleep(0.1)
    return left


# Each rank forks a child that would sleep for ten minutes, then waits forever itself.
HANGS = (
    "import os, time\n"
    "rank = os.environ['RANK']\n"
    "child = os.fork()\n"
    "if child == 0:\n"
    "    time.sleep(600)\n"
    "    os._exit(0)\n"
    "open(f'grandchild-{rank}.pid', 'w').write(str(child))\n"
    "print('rank', rank, 'waiting', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.mark.long
def test_a_timeout_ends_every_rank_and_what_it_forked(tmp_path: Path, limit_clock) -> None:
    # The limit passes once both ranks are up and have forked (torchrun and two ranks starting
    # torch take a loaded machine well past any fixed limit): the test clock moves it then.
    clock = limit_clock(sandbox)
    result = sandbox.run_code(
        HANGS,
        tmp_path,
        timeout=120,
        memory_mb=1024,
        nproc=2,
        cancelled=clock.run_out_when(lambda: len(_pids(tmp_path, "grandchild-*.pid")) == 2),
    )
    assert result.timed_out and not result.cancelled and not result.ok, result.output
    assert "several processes" in result.problem()
    pids = _pids(tmp_path / sandbox.RANKS_DIR, "*.pid") + _pids(tmp_path, "grandchild-*.pid")
    assert len(pids) == 4, result.output  # both ranks, and what each forked
    assert not _all_gone(pids, within=0.5)  # the sandbox waited for them before it returned
    assert not _tagged_processes()


@pytest.mark.long
def test_a_cancel_ends_every_rank(tmp_path: Path) -> None:
    cancelled_at: list[float] = []

    def cancelled() -> bool:  # both forks' pids written (a file exists a moment before its text does)
        if not cancelled_at and len(_pids(tmp_path, "grandchild-*.pid")) == 2:
            cancelled_at.append(time.monotonic())
        return bool(cancelled_at)

    result = sandbox.run_code(HANGS, tmp_path, timeout=120, memory_mb=1024, nproc=2, cancelled=cancelled)
    assert result.cancelled and result.problem() == "the run was stopped"
    assert time.monotonic() - cancelled_at[0] < 30  # from the cancel, not torchrun's start; the ranks sleep 600 s
    pids = _pids(tmp_path / sandbox.RANKS_DIR, "*.pid") + _pids(tmp_path, "grandchild-*.pid")
    assert len(pids) == 4 and not _all_gone(pids, within=0.5)
    assert not _tagged_processes()


@pytest.mark.long
def test_when_the_tutor_goes_away_every_rank_and_torchrun_end(tmp_path: Path) -> None:
    """The process that ran the sandbox is killed outright (the terminal closed, a kill -9): torchrun
    started each rank in a session of its own, so only the ranks' watch on that process ends them."""
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys; from pathlib import Path; from tutor.exercises.sandbox import run_code; "
                "run_code(sys.argv[1], Path(sys.argv[2]), timeout=300, memory_mb=1024, nproc=2)"
            ),
            HANGS,
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        until = time.monotonic() + 90
        while len(_pids(tmp_path, "grandchild-*.pid")) < 2 and time.monotonic() < until:
            time.sleep(0.1)
        pids = _pids(tmp_path / sandbox.RANKS_DIR, "*.pid") + _pids(tmp_path, "grandchild-*.pid")
        assert len(pids) == 4
        launched = f"GPUTUTOR_LAUNCH=2-{owner.pid}-".encode()

        def of_this_launch() -> list[int]:
            found = []
            for entry in os.listdir("/proc"):
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if launched in f.read() and sandbox._running(int(entry)):
                            found.append(int(entry))
                except (OSError, ValueError):
                    pass
            return found

        assert len(of_this_launch()) >= 5  # torchrun, 2 ranks, 2 forks
        owner.kill()
        owner.wait()
        assert not _all_gone(pids)
        assert not _all_gone(of_this_launch(), within=10)  # torchrun sees its ranks gone and ends
    finally:
        if owner.poll() is None:
            owner.kill()


@pytest.mark.long
def test_a_crash_in_one_rank_shows_that_ranks_traceback(tmp_path: Path) -> None:
    """Rank 1 runs out of its own memory limit; rank 0, waiting for it at a barrier, says so in one
    line; torchrun's own report of the failure stays in its log."""
    code = (
        "import os\n"
        "import torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "if dist.get_rank() == 1:\n"
        "    hog = bytearray(4 * 1024**3)\n"
        "dist.barrier()\n"
    )
    result = sandbox.run_code(code, tmp_path, timeout=90, memory_mb=512, nproc=2)
    assert result.error_rank == 1 and result.error_type == "MemoryError" and result.memory_error, result.output
    assert result.problem() == "the program ran out of memory in rank 1 (it hit the exercise's memory limit)"
    assert '>>   File "solution.py", line 5, in <module>' in result.traceback
    assert "[rank 1 of 2] Traceback (most recent call last):" in result.output
    # Rank 0, waiting at the barrier, says so in one line, unless torchrun stopped it first (it
    # stops the other ranks as soon as one fails: a race CI once lost). Never a traceback.
    rank0 = [line for line in result.output.splitlines() if line.startswith("[rank 0 of 2]")]
    assert all(
        line == "[rank 0 of 2] stopped at line 6: another process ended while this one waited for it" for line in rank0
    ), result.output
    assert "ChildFailedError" not in result.output and "torch.distributed.elastic" not in result.output
    assert "ChildFailedError" in (tmp_path / sandbox.LAUNCH_DIR / sandbox.LAUNCHER_LOG).read_text()
    assert not _tagged_processes()


# ---------------------------------------------------------------- correct code, written other ways


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "4000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")


@pytest.mark.long
@pytest.mark.parametrize("program", ["ddp_second_style.py", "ddp_gradients_by_hand.py"])
def test_correct_code_passes_however_it_is_written(lesson, small_lab, tmp_path, program) -> None:
    from tutor.exercises.grader import grade_exercise

    code = (PROGRAMS / program).read_text(encoding="utf-8")
    result = grade_exercise(lesson.step(STEP), code, tmp_path, accuracy_bars=False)
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    assert result.passed, {r.id: r.feedback for r in result.requirements if not r.passed}


def _cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.long
@pytest.mark.skipif(_cuda_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_on_two_gpus_the_solution_trains_with_nccl_one_gpu_per_rank(lesson, small_lab, tmp_path) -> None:
    """The lesson's own solution, as a learner on a GPU box runs it: nccl, cuda:LOCAL_RANK, 10 epochs."""
    from tutor.exercises.grader import grade_exercise

    step = lesson.step(STEP)
    result = grade_exercise(step, step.solution, tmp_path, accuracy_bars=False)
    assert "2 processes on cuda (nccl), 10 epochs" in result.sandbox.output, result.sandbox.output[-2000:]
    assert result.passed, {r.id: r.feedback for r in result.requirements if not r.passed}


@pytest.mark.gpu
@pytest.mark.long
@pytest.mark.skipif(_cuda_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_on_two_gpus_gloo_for_cuda_batches_is_named(lesson, small_lab, tmp_path) -> None:
    from tutor.exercises.grader import grade_exercise

    step = lesson.step(STEP)
    code = step.solution.replace('backend = "nccl"', 'backend = "gloo"')
    result = grade_exercise(step, code, tmp_path, accuracy_bars=False)
    failed = {r.id: r.feedback for r in result.requirements if not r.passed}
    assert "process-group" in failed and "gloo" in failed["process-group"], failed
