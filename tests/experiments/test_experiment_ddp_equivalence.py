"""ddp-equivalence: 2 gloo processes under torchrun, batch/2 each, take the steps one process
takes with the whole batch; DDP's constructor makes the replicas equal."""

from __future__ import annotations

import pydantic
import pytest
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS


@pytest.fixture(scope="module")
def cpu_run():
    """The quick run `lesson test` makes for beyond-one-gpu (made once for both: tests/conftest.py)."""
    return run_experiment("ddp-equivalence", experiments.get("ddp-equivalence").quick, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("ddp-equivalence").metrics)
    assert (m["world_size"], m["backend"], m["global_batch"], m["per_rank_batch"]) == (2, "gloo", 16, 8)


def test_all_reduced_gradients_are_the_whole_batch_gradient(cpu_run):
    _, m = cpu_run
    assert m["grads_allclose"] is True and m["grad_max_diff"] < 1e-6
    # a rank's own half-batch gradient is far off: the all-reduce is what fixes it
    assert m["local_grad_max_diff"] > 100 * max(m["grad_max_diff"], 1e-9)
    assert m["weights_max_diff"] < 1e-5


def test_ddp_makes_the_replicas_one(cpu_run):
    _, m = cpu_run
    assert m["weights_differed_before_wrap"] is True and m["ranks_identical_after_wrap"] is True
    assert m["ranks_max_diff"] == 0.0
    assert m["allreduce_bytes"] == 940_584  # 4 B x 235,146 parameters of MNISTClassifier


def test_both_ranks_stream_their_steps_and_the_launch_is_timed(cpu_run):
    events, m = cpu_run
    steps = [e for e in events if isinstance(e, Step)]
    assert sorted({e.label for e in steps}) == ["rank 0", "rank 1"] and len(steps) == 4
    assert any(isinstance(e, Table) for e in events)
    assert any("gloo on the CPU" in e.text for e in events if isinstance(e, Note))
    assert 0 < m["launch_seconds"] <= m["job_seconds"] and m["attempts"] in (1, 2)


def test_the_batch_must_split_evenly_over_the_ranks():
    with pytest.raises(pydantic.ValidationError, match="multiple of world_size"):
        experiments.get("ddp-equivalence").make_params({"batch_size": 33, "world_size": 2})


def _cuda_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_gpus() != 1, reason="needs exactly one CUDA GPU")
def test_one_gpu_runs_the_ranks_on_the_cpu_and_says_why():
    from tutor.experiments import devices, distributed

    plan = distributed.choose(devices.resolve("cuda"), 2)
    assert plan.backend == "gloo" and "this machine has 1" in plan.why


@pytest.mark.gpu
@pytest.mark.skipif(_cuda_gpus() < 2, reason="needs 2 CUDA GPUs")
def test_two_gpus_run_nccl_one_gpu_per_rank():
    _, m = run_experiment("ddp-equivalence", {"batch_size": 32, "steps": 3}, "cuda")
    assert m["backend"] == "nccl" and m["grads_allclose"] is True and m["ranks_max_diff"] == 0.0


def test_the_run_lesson_test_and_these_tests_share_is_made_once(cpu_run, shared_runs):
    """The quick run is made once in a test session (tests/conftest.py): asked again, by this test or
    by `lesson test` in another worker, it is the same run's events, read back."""
    from experiment_runs import shared_path

    quick = experiments.get("ddp-equivalence").quick
    kept = shared_path(shared_runs, "ddp-equivalence", quick, "cpu")
    assert kept == shared_path(shared_runs, "ddp-equivalence", dict(quick), None)  # as lesson test asks for it
    written = kept.stat().st_mtime_ns
    again = list(experiments.start("ddp-equivalence", quick, device="cpu"))
    assert again == cpu_run[0] and kept.stat().st_mtime_ns == written  # read back, not run again
