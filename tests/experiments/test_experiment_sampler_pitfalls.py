"""sampler-pitfalls: 2 gloo processes under torchrun feed their DDP models three ways; the sample
ids each rank trained on show a plain loader repeating the work on every rank, DistributedSampler
splitting the data, and a forgotten set_epoch repeating the order."""

from __future__ import annotations

import pydantic
import pytest
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Step, Table
from tutor.experiments.sampler_pitfalls import feeding_stats, order_hash, uneven_split
from tutor.experiments.spec import COMMON_METRICS

# 128 samples, batch 16 per rank: the plain loader takes 8 steps an epoch, the sampler 4 (64 a rank)
# 131 over 2 ranks: padded to 132, drop_last keeps 130; a shard of 66 ends in a batch of 2
QUICK = {"samples": 128, "batch_size": 16, "uneven_samples": 131}


@pytest.fixture(scope="module")
def cpu_run():
    return run_experiment("sampler-pitfalls", QUICK, "cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("sampler-pitfalls").metrics)
    assert (m["world_size"], m["backend"]) == (2, "gloo")
    assert 0 < m["launch_seconds"] <= m["job_seconds"] and m["attempts"] in (1, 2)


def test_a_plain_loader_gives_every_rank_the_same_batches(cpu_run):
    _, m = cpu_run
    assert m["plain_overlap"] == 1.0 and m["plain_distinct_per_epoch"] == 128
    assert m["plain_trained_per_epoch"] == 256 and m["plain_distinct_per_step"] == 16  # one rank's batch
    assert (m["plain_steps_per_epoch"], m["set_epoch_steps_per_epoch"]) == (8, 4)
    assert m["plain_same_order"] is False  # it reshuffles every epoch, alike on every rank
    # seeded per rank: batches differ, but each rank still walks the whole dataset
    assert m["rank_seeds_overlap"] == 1.0 and m["rank_seeds_step_overlap"] < 0.5


def test_the_sampler_splits_the_data_and_set_epoch_reshuffles(cpu_run):
    _, m = cpu_run
    for way in ("set_epoch", "no_set_epoch"):
        assert m[f"{way}_overlap"] == 0.0
        assert m[f"{way}_distinct_per_epoch"] == m[f"{way}_trained_per_epoch"] == 128
    assert m["set_epoch_distinct_per_step"] == 32
    assert m["set_epoch_same_order"] is False and m["no_set_epoch_same_order"] is True


def test_padding_and_drop_last_on_an_uneven_dataset(cpu_run):
    _, m = cpu_run
    assert (m["padded_total"], m["padded_repeats"]) == (132, 1)
    assert (m["drop_last_total"], m["drop_last_unseen"]) == (130, 1)
    assert m["loader_drop_last_cut"] == 4


def test_both_ranks_train_and_the_orders_are_shown(cpu_run):
    events, _ = cpu_run
    steps = [e for e in events if isinstance(e, Step)]
    assert sorted({e.label for e in steps}) == ["rank 0", "rank 1"]
    assert len(steps) == 2 * 2 * (8 + 4 + 4)  # ranks x epochs x (plain + set_epoch + no set_epoch)
    orders = next(e for e in events if isinstance(e, Table) and "order" in e.title)
    stale = [row[4] for row in orders.rows if row[0] == "no set_epoch"]
    assert len(stale) == 4 and stale[:2] == stale[2:]  # epoch 2's hashes are epoch 1's, rank by rank
    assert any("seeded its generator alike" in e.text for e in events if isinstance(e, Note))


def test_feeding_stats_of_two_ranks():
    same = [[[[0, 1], [2, 3]], [[3, 2], [1, 0]]]] * 2  # ids[rank][epoch][step]
    s = feeding_stats(same)
    assert (s["overlap"], s["distinct_per_epoch"], s["trained_per_epoch"]) == (1.0, 4, 8)
    assert (s["distinct_per_step"], s["step_overlap"], s["same_order"]) == (2, 1.0, False)
    split = [[[[0, 2]], [[0, 2]]], [[[1, 3]], [[1, 3]]]]
    s = feeding_stats(split)
    assert (s["overlap"], s["distinct_per_epoch"], s["distinct_per_step"], s["same_order"]) == (0.0, 4, 4, True)
    assert order_hash([[0, 2]]) == order_hash([[0], [2]]) != order_hash([[2, 0]])


def test_uneven_split_counts_repeats_and_left_out():
    assert uneven_split([[4, 0, 2], [1, 3, 4]], 5) == {"given": 6, "repeats": 1, "unseen": 0}
    assert uneven_split([[4, 0], [1, 3]], 5) == {"given": 4, "repeats": 0, "unseen": 1}


def test_each_rank_needs_a_full_batch():
    with pytest.raises(pydantic.ValidationError, match="at least world_size x batch_size"):
        experiments.get("sampler-pitfalls").make_params({"samples": 60, "batch_size": 32})
