"""One run of an experiment, in this process, for the experiment tests; and the runs that tests
in every worker share (`shared_start`), and the exercise gradings they share (`shared_grade`)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

from tutor import experiments
from tutor.authoring.lesson_test import could_not_tell
from tutor.experiments.events import Event, Finished, Started


def run_experiment(
    name: str, values: dict[str, Any] | None = None, device: str = "cpu"
) -> tuple[list[Event], dict[str, Any]]:
    """(events, metrics): the run must start with Started, end with Finished, and report every
    metric the registry declares for it; a run whose repeats spread (NAME_low, NAME_high) also
    says what else the machine was doing meanwhile (noise_why), and no other run does."""
    events = list(experiments.start(name, values or {}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    metrics = events[-1].metrics
    assert set(experiments.get(name).metrics) <= set(metrics), set(experiments.get(name).metrics) - set(metrics)
    spread = any(k.endswith("_low") and k[:-4] in metrics and metrics[k] is not None for k in metrics)
    assert spread == isinstance(metrics.get("noise_why"), str), (spread, metrics.get("noise_why"))
    return events, metrics


# ---------------------------------------------------------------- one run, shared by every test that needs it

# Experiments whose runs the experiment tests and `lesson test` both make with the same settings
# (torchrun and two ranks: seconds each). In a test session each is made once, by whichever test
# asks first, and every other test (in any pytest-xdist worker) judges that run's events.
SHARED = frozenset({"ddp-equivalence", "sampler-pitfalls", "ddp-scaling", "zero-sharding"})


def shared_start(start, cache_dir: Path, name: str, values: dict[str, Any] | None = None, device: str | None = None):
    """`experiments.start` (passed as `start`), but a run of a SHARED experiment is made once per
    settings and device and its events kept in `cache_dir`, under a lock the workers share."""
    if name not in SHARED:
        return start(name, values, device=device)
    from filelock import FileLock

    path = shared_path(cache_dir, name, values, device)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return iter(pickle.loads(path.read_bytes()))
        events = list(start(name, values, device=device))  # a run that raises is not kept
        path.write_bytes(pickle.dumps(events))
    return iter(events)


def shared_path(cache_dir: Path, name: str, values: dict[str, Any] | None = None, device: str | None = None) -> Path:
    """Where the shared run of `name` with these settings on this device is kept: keyed by what
    the run is (its validated params, the device they resolve to, the thread count), not by how
    it was asked for (device=None and "cpu" are one run on a machine without a GPU)."""
    from tutor.experiments import devices

    params = experiments.get(name).make_params(values or {})
    dev = devices.resolve(params.device or device, free_memory=False)
    key = hashlib.sha256(
        json.dumps(
            [name, params.model_dump(mode="json"), dev.kind, dev.index, os.environ.get("GPUTUTOR_THREADS")],
            sort_keys=True,
        ).encode()
    ).hexdigest()[:20]
    return cache_dir / f"{name}-{key}.pickle"


# ---------------------------------------------------------------- one grading, shared the same way

# What an exercise program's grading does not depend on: where the test keeps its own files, how
# many programs a runner starts at once, CI's strictness; GPUTUTOR_DEVICE, read as the device it
# resolves to (`lesson test` sets "cpu", the exercise tests leave it unset: one device here); and
# the thread variables the tutor set itself, which the sandbox sets again for each program from
# GPUTUTOR_THREADS (tutor/threads.py: only a user's own OMP_NUM_THREADS reaches a program).
_NOT_THE_PROGRAMS = frozenset(
    {
        "GPUTUTOR_HOME",
        "GPUTUTOR_CACHE_DIR",
        "GPUTUTOR_PROGRAMS_AT_ONCE",
        "GPUTUTOR_STRICT_TESTS",
        "GPUTUTOR_DEVICE",
        "GPUTUTOR_THREADS_SET",
    }
)


def shared_grade(
    grade,
    cache_dir: Path,
    step,
    code: str,
    workdir: Path,
    *,
    on_output=None,
    cancelled=None,
    accuracy_bars: bool = True,
):
    """`grade_exercise` (passed as `grade`), but a grading of the same code for the same step, with
    the same data slice, threads and device, is made once per test session and its result kept in
    `cache_dir`, under a lock the workers share: `lesson test` and the exercise tests grade many of
    the built-in lessons' programs alike. A grading that streams its output or can be cancelled is
    made as asked; one served from the cache leaves `workdir` empty (a test that reads the files a
    program wrote must not ask for a shared grading)."""
    if on_output is not None or cancelled is not None:
        kwargs = {"on_output": on_output, **({"cancelled": cancelled} if cancelled is not None else {})}
        return grade(step, code, workdir, accuracy_bars=accuracy_bars, **kwargs)
    from filelock import FileLock

    path = grading_path(cache_dir, step, code, accuracy_bars)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return pickle.loads(path.read_bytes())
        result = grade(step, code, workdir, accuracy_bars=accuracy_bars)  # a grading that raises is not kept
        # Nor one lesson test would grade again alone (it failed only where it could not tell); a
        # starter's crash or a mistake's judged failure is kept, undecided speed-up or not.
        if not could_not_tell(result):
            path.write_bytes(pickle.dumps(result))
    return result


def grading_path(cache_dir: Path, step, code: str, accuracy_bars: bool) -> Path:
    """Where the shared grading of `code` for `step` is kept: keyed by the step as loaded, the code,
    whether accuracy bars apply, the GPUTUTOR_* and CUDA_* environment the program inherits (the
    data slice, the threads, the memory caps), a user's own thread counts and the device tutor.lab
    resolves for it."""
    from tutor import threads
    from tutor.experiments import devices

    dev = devices.resolve(None, free_memory=False)
    env = {k: v for k, v in os.environ.items() if k.startswith(("GPUTUTOR_", "CUDA_")) and k not in _NOT_THE_PROGRAMS}
    ours = os.environ.get(threads.OURS, "").split(",")
    env.update({k: os.environ[k] for k in threads.ENV_KEYS if k in os.environ and k not in ours})
    key = hashlib.sha256(
        json.dumps(
            [step.model_dump(mode="json"), code, accuracy_bars, env, dev.kind, dev.index], sort_keys=True
        ).encode()
    ).hexdigest()[:20]
    return cache_dir / f"grading-{step.id}-{key}.pickle"
