"""Shared test set-up: a throwaway GPUTUTOR_HOME, the repository's MNIST, the `gpu` marker, and
CI's strictness: under CI (CI=true, or GPUTUTOR_STRICT_TESTS=1 as .ci/run sets) a missing
../shared/data stops the run, and any skip but a @pytest.mark.gpu test's fails it, so whole
groups of tests cannot vanish quietly. The skip count is printed either way."""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import pytest

# CI clones the repository with ../shared beside it; real MNIST lies in shared/data.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# Elsewhere (a GPU box the checkout was copied to without ../shared), MNIST named by
# GPUTUTOR_DATA_DIR when the run starts: bench/first_gpu.sh unpacks it there.
_NAMED = Path(os.environ.get("GPUTUTOR_DATA_DIR") or "/nonexistent")
MNIST_DIR = SHARED_DATA if SHARED_DATA.is_dir() else _NAMED if (_NAMED / "MNIST" / "raw").is_dir() else None
STRICT = os.environ.get("GPUTUTOR_STRICT_TESTS") == "1" or os.environ.get("CI", "").lower() == "true"
_ENV = (
    "GPUTUTOR_HOME",
    "GPUTUTOR_DATA_DIR",
    "GPUTUTOR_CACHE_DIR",
    "GPUTUTOR_DEVICE",
    "GPUTUTOR_DEBUG",
    "NO_COLOR",
    "GPUTUTOR_MEMORY_MB",
    "GPUTUTOR_GPU_MEMORY_MB",
    "GPUTUTOR_CLASS_DIR",
)
# A developer's own class folder would queue the tests' runs behind a real class's: tests that
# want one set it themselves.
os.environ.pop("GPUTUTOR_CLASS_DIR", None)


def _restore(saved: dict[str, str | None]) -> None:
    """Put the environment variables back as they were (unset where they were unset)."""
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return max(1, os.cpu_count() or 1)


# One program per core in all: under pytest-xdist each worker may run lesson test's exercise
# programs side by side, so each gets its share of the cores, never a core each of its own.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT", "").isdigit():
    os.environ.setdefault(
        "GPUTUTOR_PROGRAMS_AT_ONCE", str(max(1, _cores() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    )


# Every run decides its threads from the load as it starts (tutor/threads.py); in tests the load
# is other tests, so a count that changed between two runs of one test would make a peak cached
# by the first (keyed by threads) unseen by the second. The tests pin the count the policy gives
# an unknown load; tests/system/test_threads.py lifts the pin to test the decision itself.
from tutor import threads as _threads  # noqa: E402 - stdlib only, no torch

os.environ.setdefault("GPUTUTOR_THREADS", str(_threads.training_threads(others_busy=None)))

# A CPU peak swept while other programs took its cores is not kept (tutor/measurement/peak.py); in
# tests those programs are the other tests, so every sweep is kept, in this process and the ones it
# starts, as on a quiet machine. tests/experiments/test_peak.py lifts it to test the rule.
os.environ["GPUTUTOR_PEAKS_IGNORE_LOAD"] = "1"


@pytest.fixture(scope="session", autouse=True)
def session_dirs(tmp_path_factory):
    """A throwaway home and cache dir for the whole test process, set before any fixture runs:
    a module-scoped fixture that runs an experiment (before any test's own home is set) writes
    there too, never in the user's dirs. One cache per worker: a peak is measured once in it."""
    saved = {k: os.environ.get(k) for k in ("GPUTUTOR_HOME", "GPUTUTOR_CACHE_DIR", "GPUTUTOR_DATA_DIR")}
    os.environ["GPUTUTOR_HOME"] = str(tmp_path_factory.mktemp("home"))
    os.environ["GPUTUTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    if MNIST_DIR is not None:  # else each test's fixture points at an empty dir (the offline digits)
        os.environ["GPUTUTOR_DATA_DIR"] = str(MNIST_DIR)
    yield
    _restore(saved)


@pytest.fixture(scope="session", autouse=True)
def shared_runs(tmp_path_factory):
    """Each run that several tests judge (experiment_runs.SHARED) is made once in the whole test
    session, whichever worker asks first (lesson test or an experiment test), and kept in one
    folder all pytest-xdist workers share."""
    from experiment_runs import shared_start

    from tutor import experiments

    base = tmp_path_factory.getbasetemp()
    cache_dir = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    cache_dir.mkdir(exist_ok=True)
    original = experiments.start
    experiments.start = lambda name, values=None, device=None: shared_start(original, cache_dir, name, values, device)
    yield cache_dir
    experiments.start = original


@pytest.fixture
def shared_gradings(shared_runs, monkeypatch):
    """Exercise gradings made once in the whole test session, as shared_runs makes runs: a test
    that grades a built-in lesson's program as `lesson test` grades it (the same data slice, accuracy
    bars and threads: tests/experiment_runs.py's shared_grade) judges that one grading, whichever
    test, in whichever worker, asked first. Only tests that ask for this fixture share."""
    from experiment_runs import shared_grade

    from tutor.exercises import grader

    original = grader.grade_exercise
    monkeypatch.setattr(
        grader,
        "grade_exercise",
        lambda step, code, workdir, **kw: shared_grade(original, shared_runs, step, code, workdir, **kw),
    )


@pytest.fixture(autouse=True)
def gpututor_env(tmp_path: Path):
    """No test touches the real user dirs; env changes made by the code under test are undone.

    (`gpututor --device/--data-dir` set os.environ for their process, so a `main([...])`
    call inside a test would otherwise leak into the next test.)
    """
    saved = {k: os.environ.get(k) for k in _ENV}
    os.environ["GPUTUTOR_HOME"] = str(tmp_path)
    if MNIST_DIR is not None:
        os.environ["GPUTUTOR_DATA_DIR"] = str(MNIST_DIR)
    else:  # no MNIST here: an empty dir makes data.load() use the offline fallback at once
        (tmp_path / "no-mnist").mkdir(exist_ok=True)
        os.environ["GPUTUTOR_DATA_DIR"] = str(tmp_path / "no-mnist")
    for k in ("GPUTUTOR_DEVICE", "GPUTUTOR_DEBUG"):
        os.environ.pop(k, None)
    yield
    _restore(saved)


@pytest.fixture(autouse=True)
def built_in_experiments_only():
    """A lesson pack a test loads registers its experiments for the process; they leave with the
    test, so a later test in the same worker (the docs naming every experiment) sees the built-ins."""
    from tutor import experiments

    before = dict(experiments.REGISTRY)
    yield
    if before != experiments.REGISTRY:
        experiments.REGISTRY.clear()
        experiments.REGISTRY.update(before)


@pytest.fixture
def accelerator() -> str:
    """The device a @pytest.mark.gpu test that any accelerator can run uses: "cuda", else "mps".
    (Tests that need CUDA itself say so with a skipif; the marker alone skips without either.)"""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    pytest.skip("needs a CUDA or MPS device")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long tests first (a worker that draws one last would finish alone), then skip
    @pytest.mark.gpu tests where neither CUDA nor MPS is available."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None and item.get_closest_marker("slow") is None)
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return  # no torch import for a run that needs none
    import torch

    mps = getattr(torch.backends, "mps", None)
    if torch.cuda.is_available() or (mps is not None and mps.is_available()):
        return
    skip = pytest.mark.skip(reason="needs a CUDA or MPS device (none visible to PyTorch here)")
    for item in gpu_items:
        item.add_marker(skip)


def pytest_sessionstart(session: pytest.Session) -> None:
    if STRICT and not SHARED_DATA.is_dir():
        pytest.exit(
            f"CI needs real MNIST at {SHARED_DATA} (../shared/data beside the checkout): without it "
            "the MNIST tests would skip and the rest would train on the offline digits.",
            returncode=3,
        )


_skips: list[tuple[str, str, bool]] = []  # (test, reason, a gpu test)


_tier_seconds: dict[str, float] = {}  # tests/<tier>: set-up, call and tear-down summed over its tests
# Each tier's share of CI's 10 minutes on the 2-core machine (summed test seconds; the README's
# table): printed beside what a run took, so a change that adds to a tier sees what it costs.
TIER_BUDGET_S = {
    "unit": 40,
    "content": 5,
    "experiments": 168,
    "exercises": 345,
    "tui": 198,
    "system": 336,
    "inspect": 75,
}

# The fast tier (`pytest tests/unit tests/content`) runs in seconds because it starts no sandbox,
# no fresh interpreter and no torch: a test there that loads torch is named, and fails the run.
FAST_TIERS = ("unit", "content")
_loaded_torch: list[str] = []  # the fast-tier test after which torch was first found loaded
_torch_in_the_fast_tier: list[bool] = []  # set when a run of the fast tier alone loaded it


def _tier(nodeid: str) -> str | None:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """What earlier tests left in this worker is kept out of the garbage collector's full passes
    while a test runs: experiments call gc.collect() between batches and steps to release memory
    as a learner's run would, and in a worker that has run hundreds of tests (Textual apps among
    them) each pass walked all of it: batch-sweep's 1.2 s run took 5-15 s there. Objects the test
    itself makes are collected as usual; the rest are collectable again once it ends."""
    gc.freeze()
    try:
        return (yield)
    finally:
        gc.unfreeze()


def pytest_runtest_logfinish(nodeid: str, location) -> None:
    if not _loaded_torch and _tier(nodeid) in FAST_TIERS and "torch" in sys.modules:
        _loaded_torch.append(nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    tier = _tier(report.nodeid)
    if tier is not None:
        _tier_seconds[tier] = _tier_seconds.get(tier, 0.0) + (report.duration or 0.0)
    if report.failed and os.environ.get("GPUTUTOR_FAILURES_AT_ONCE"):
        # A run cut off by a time limit (bench/first_gpu.sh on a lent GPU) never reaches pytest's
        # failure summary: each failure's traceback is printed the moment it happens instead.
        sys.stdout.write(f"\n--- FAILED {report.nodeid} ({report.when})\n{report.longreprtext}\n")
        sys.stdout.flush()
    if report.skipped:
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _skips.append((report.nodeid, reason, "gpu" in report.keywords))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if STRICT and exitstatus == 0 and any(not gpu for _, _, gpu in _skips):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if _fast_tier_only(session) and _loaded_torch:
        _torch_in_the_fast_tier.append(True)
        if exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _fast_tier_only(session: pytest.Session) -> bool:
    """Only fast-tier tests ran (torch loaded by a test of another tier in the same run is theirs)."""
    return bool(session.items) and all(_tier(item.nodeid) in FAST_TIERS for item in session.items)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    gpu = sum(1 for _, _, g in _skips if g)
    others = [(test, reason) for test, reason, g in _skips if not g]
    if _tier_seconds:  # one worker's worth of time: with -n N the wall time is about 1/N of the sum
        terminalreporter.write_line(
            "test time by tier (summed over tests; CI's budget on 2 cores): "
            + ", ".join(
                f"{tier} {seconds:.0f} s ({TIER_BUDGET_S[tier]} s{', over' if seconds > TIER_BUDGET_S[tier] else ''})"
                if tier in TIER_BUDGET_S
                else f"{tier} {seconds:.0f} s"
                for tier, seconds in sorted(_tier_seconds.items(), key=lambda kv: -kv[1])
            )
        )
    if _torch_in_the_fast_tier:
        terminalreporter.write_line(
            f"torch was loaded in the fast tier, first found after {_loaded_torch[0]}: "
            "torch tests belong in tests/experiments  <- fails the run"
        )
    terminalreporter.write_line(f"skipped: {len(_skips)} ({gpu} need a GPU, {len(others)} other)")
    for test, reason in others:
        terminalreporter.write_line(
            f"  not a GPU test, skipped: {test}: {reason}" + ("  <- fails the run under CI" if STRICT else "")
        )
