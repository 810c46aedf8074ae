"""ddp-scaling: samples/s at world size 1 and 2 (gloo processes under torchrun), the all-reduce
per step against the compute, DDP's buckets counted by a comm hook. One launch for the module."""

from __future__ import annotations

import pydantic
import pytest
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.spec import COMMON_METRICS
from tutor.experiments.specs.ddp_scaling import sweep_sizes

PARAMS = {**experiments.get("ddp-scaling").quick, "bucket_cap_mb": 0.1}  # a small cap: 2 buckets


@pytest.fixture(scope="module")
def cpu_run():
    return run_experiment("ddp-scaling", PARAMS, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("ddp-scaling").metrics)
    assert (m["world_size"], m["backend"], m["per_rank_batch"]) == (2, "gloo", 64)


def test_the_buckets_hold_every_gradient_once(cpu_run):
    events, m = cpu_run
    assert m["parameters"] == 235_146 and m["allreduce_bytes"] == 940_584  # 4 B x parameters
    # bucket_cap_mb=0.1: a bucket closes once it reaches 104,857 B; fc3 and fc2 (136,744 B), then fc1
    assert m["bucket_count"] == 2
    assert any("136,744 B, 803,840 B" in e.text for e in events if isinstance(e, Note))


def test_the_real_run_measures_every_time_it_reports(cpu_run):
    _, m = cpu_run
    assert m["single_samples_per_s"] > 0 and m["ddp_samples_per_s"] > 0
    assert m["compute_seconds"] > 0 and m["allreduce_seconds"] > 0 and m["crossover_batch"] in (None, 4, 64)


# What rank 0 measured, made up so that every figure the experiment derives is worked out by hand below.
RANK_0 = {
    "parameters": 235_146,
    "bucket_bytes": [136_744, 803_840],
    "first_step_buckets": [136_744, 803_840],
    "logged_buckets": None,
    "single_samples_per_s": 1_000.0,
    "ddp_samples_per_s": 1_500.0,
    "single_step_s": 0.064,
    "ddp_round_step_s": 0.0853,
    "compute_seconds": 0.040,
    "allreduce_seconds": 0.010,
    "ddp_step_seconds": 0.045,
    "exposed_comm_seconds": 0.005,
    "dataset": "made up",
    "rows": [
        {"batch": 4, "compute_s": 0.002, "allreduce_s": 0.010, "ddp_s": 0.011, "exposed_s": 0.009},
        {"batch": 64, "compute_s": 0.040, "allreduce_s": 0.010, "ddp_s": 0.045, "exposed_s": 0.005},
    ],
}


def test_throughput_and_efficiency_follow_their_formulas(monkeypatch):
    """The figures derived from what the ranks measured, against numbers worked out by hand."""
    from tutor.experiments import ddp_scaling, distributed
    from tutor.experiments.devices import Device
    from tutor.experiments.events import Finished
    from tutor.experiments.specs.ddp_scaling import DdpScalingParams

    def launched(module, plan, args):
        return {"results": {0: RANK_0}, "seconds": 9.0, "ready_s": 3.0, "attempts": 1}
        yield  # a generator, as distributed.launch is

    monkeypatch.setattr(distributed, "launch", launched)
    params = DdpScalingParams(**{**PARAMS, "world_size": 2, "batch_size": 64})
    events = list(ddp_scaling.measure(params, Device("cpu", None, "CPU")))
    m = next(e for e in events if isinstance(e, Finished)).metrics
    assert m["speedup"] == pytest.approx(1.5)  # 1,500 / 1,000 samples/s
    assert m["scaling_efficiency"] == pytest.approx(0.75)  # 1,500 / (2 x 1,000)
    assert m["comm_compute_ratio"] == pytest.approx(0.25)  # 0.010 s all-reduce / 0.040 s compute
    assert m["exposed_comm_seconds"] == pytest.approx(0.005)  # 0.045 s DDP step - 0.040 s compute
    assert m["allreduce_bytes"] == 940_584 == 4 * 235_146 and m["bucket_count"] == 2
    assert m["crossover_batch"] == 64  # compute loses at 4 (0.002 < 0.010 s), wins at 64
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "1.5x the throughput" in notes and "= 1,500 / (2 x 1,000) = 75.0%" in notes
    assert "Up to a per-rank batch of 4 the all-reduce" in notes and "from 64 up the compute outweighed it" in notes


@pytest.mark.parametrize(("cores", "oversubscribed"), [(1, True), (2, False)])
def test_more_processes_than_cores_is_called_oversubscription(monkeypatch, cores, oversubscribed):
    from tutor.experiments import ddp_scaling, distributed
    from tutor.experiments.devices import Device
    from tutor.experiments.specs.ddp_scaling import DdpScalingParams

    def launched(module, plan, args):
        return {"results": {0: RANK_0}, "seconds": 9.0, "ready_s": 3.0, "attempts": 1}
        yield

    monkeypatch.setattr(distributed, "launch", launched)
    monkeypatch.setattr(ddp_scaling.os, "cpu_count", lambda: cores)
    params = DdpScalingParams(**{**PARAMS, "world_size": 2, "batch_size": 64})
    notes = " ".join(e.text for e in ddp_scaling.measure(params, Device("cpu", None, "CPU")) if isinstance(e, Note))
    assert ("measures oversubscription, not scaling" in notes) is oversubscribed


def test_the_sweep_table_has_a_row_per_batch_and_both_ranks_report(cpu_run):
    events, m = cpu_run
    sweep = next(e for e in events if isinstance(e, Table) and "compute against all-reduce" in e.title)
    assert [row[0] for row in sweep.rows] == ["4", "64"]
    assert sorted({e.label for e in events if isinstance(e, Step)}) == ["rank 0", "rank 1"]
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "bounded by its cores" in notes and "this run measured none of them" in notes
    assert 0 < m["launch_seconds"] <= m["job_seconds"] and m["attempts"] in (1, 2)


def test_crossover_is_the_smallest_batch_from_which_compute_always_won():
    from tutor.experiments.ddp_scaling import crossover, efficiency

    def rows(*pairs):
        return [{"batch": b, "compute_s": c, "allreduce_s": a} for b, c, a in pairs]

    assert crossover(rows((4, 1, 2), (16, 3, 2), (64, 9, 2))) == 16
    assert crossover(rows((4, 1, 2), (16, 3, 2), (64, 1, 2))) is None  # the largest lost: none
    assert crossover(rows((4, 3, 2), (16, 1, 2), (64, 9, 2))) == 64  # noise at 16 breaks the run from 64 down
    assert crossover(rows((4, 3, 2), (16, 5, 2))) == 4
    assert efficiency(100.0, 150.0, 2) == 0.75


def test_the_headline_reads_the_same_way_as_its_own_table():
    """Issue 35: with compute ahead at batch 4, behind at 16 and ahead at 64, the note said "Below a
    per-rank batch of 64 the all-reduce took longer than the compute", which the 4 row denies; with
    the largest batch lost it said the all-reduce took longer "at every per-rank batch"."""
    from tutor.experiments.ddp_scaling import who_won

    def rows(*pairs):
        return [{"batch": b, "compute_s": c, "allreduce_s": a} for b, c, a in pairs]

    assert who_won(rows((4, 1, 2), (16, 3, 2), (64, 9, 2)), "1 MB") == (
        "Up to a per-rank batch of 4 the all-reduce of 1 MB took longer than the compute; from 16 up the compute "
        "outweighed it."
    )
    flipping = who_won(rows((4, 3, 2), (16, 1, 2), (64, 9, 2)), "1 MB")
    assert flipping.startswith(
        "No clean switch in this sweep: the all-reduce of 1 MB took longer than the compute "
        "at per-rank batch 16, the compute outweighed it at 4 and 64."
    )
    assert "every" not in who_won(rows((4, 1, 2), (16, 3, 2), (64, 1, 2)), "1 MB")
    assert who_won(rows((4, 1, 2), (16, 1, 2)), "1 MB").startswith(
        "The all-reduce of 1 MB took longer than the compute at every per-rank batch from 4 to 16"
    )
    assert who_won(rows((16, 5, 2), (4, 3, 2)), "1 MB").startswith(
        "Compute outweighed the all-reduce at every per-rank batch from 4 to 16"
    )


def test_the_sweep_is_checked_and_tidied():
    assert sweep_sizes("64, 4,16,4") == [4, 16, 64]
    exp = experiments.get("ddp-scaling")
    assert exp.make_params({"sweep": "256, 4"}).sweep == "4,256"
    for bad in ("", "0,4", "4,2048", "1,2,3,4,5,6,7", "four"):
        with pytest.raises(pydantic.ValidationError):
            exp.make_params({"sweep": bad})
