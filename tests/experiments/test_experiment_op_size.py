"""op-size: one add's time is a fixed cost at small sizes and grows with the elements only past it,
so the largest add costs far less than its share of elements; the GPU column only where one is."""

from __future__ import annotations

import pydantic
import pytest

from tutor import experiments
from tutor.experiments.events import Finished, Note, Started, Table
from tutor.experiments.op_size import crossover, elements, flat_up_to
from tutor.experiments.specs.op_size import sizes

QUICK = experiments.get("op-size").quick


def run(values=None, device="cpu"):
    events = list(experiments.start("op-size", {**QUICK, **(values or {})}, device=device))
    assert isinstance(events[0], Started) and isinstance(events[-1], Finished)
    return events, events[-1].metrics


def test_the_sweep_goes_up_tenfold_from_ten():
    assert sizes(10_000_000) == [10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    assert sizes(1_000) == [10, 100, 1_000]
    assert [elements(n) for n in sizes(10_000_000)] == ["10", "100", "1k", "10k", "100k", "1M", "10M"]


def test_a_size_that_is_not_a_power_of_ten_or_too_big_is_refused():
    spec = experiments.get("op-size")
    for largest in (5_000, 100_000_000, 100):
        with pytest.raises(pydantic.ValidationError):
            spec.make_params({"largest": largest})


def test_flat_stops_at_the_first_size_twice_the_smallest():
    sweep = [10, 100, 1_000, 10_000]
    assert flat_up_to(sweep, [1.0, 1.1, 1.9, 5.0]) == 1_000
    assert flat_up_to(sweep, [1.0, 2.0, 1.5, 5.0]) == 10  # counted from the smallest up, not past a jump
    assert flat_up_to(sweep, [1.0, 1.0, 1.0, 1.0]) == 10_000


def test_the_crossover_is_where_the_gpu_wins_from_then_on():
    sweep = [10, 100, 1_000, 10_000]
    cpu = [1.0, 1.0, 2.0, 10.0]
    assert crossover(sweep, cpu, [5.0, 5.0, 1.5, 1.0]) == 1_000
    assert crossover(sweep, cpu, [0.5, 5.0, 1.5, 1.0]) == 1_000  # a win below a loss does not count
    assert crossover(sweep, cpu, [5.0, 5.0, 5.0, 11.0]) is None  # the largest lost: no crossover
    assert crossover(sweep, cpu, [0.5, 0.5, 0.5, 0.5]) == 10


def test_on_the_cpu_a_fixed_cost_dominates_small_adds_and_the_ratio_holds_its_interval():
    events, m = run()
    assert set(experiments.get("op-size").metrics) <= set(m)
    assert m["seconds_largest"] > m["seconds_smallest"] > 0
    assert m["fixed_seconds"] == m["seconds_smallest"]
    assert m["elements_ratio"] == 10_000  # 100k over 10
    # The fixed cost: 10,000x the elements costs far less than 10,000x the time, on any CPU.
    assert 1 < m["size_ratio"] < m["elements_ratio"] / 10
    assert m["size_ratio_low"] <= m["size_ratio"] <= m["size_ratio_high"]
    assert m["flat_up_to"] in sizes(100_000)
    assert m["ns_per_element_largest"] == pytest.approx(m["seconds_largest"] / 100_000 * 1e9)
    assert m["a100_bandwidth_ratio"] is None  # 100k elements fit in a cache: no bandwidth verdict
    [table] = [e for e in events if isinstance(e, Table)]
    assert [r[0] for r in table.rows] == ["10", "100", "1k", "10k", "100k"]
    assert table.columns == ["elements", "CPU per add", "ns/element"]  # no GPU column on a CPU
    assert all(len(" | ".join(r)) < 60 for r in table.rows)
    for name in ("accel_seconds_smallest", "accel_seconds_largest", "accel_speedup_largest", "crossover_elements"):
        assert m[name] is None, name
    said = " ".join(e.text for e in events if isinstance(e, Note))
    assert "Fixed cost" in said and "No GPU here" in said and "launch" in said


def test_past_the_caches_the_bandwidth_is_set_against_an_a100s():
    _, m = run({"largest": 10_000_000, "repeats": 3})
    assert m["elements_ratio"] == 1_000_000
    assert m["gbps_largest"] == pytest.approx(12 * 10_000_000 / m["seconds_largest"] / 1e9)
    assert m["a100_bandwidth_ratio"] == pytest.approx(1555 / m["gbps_largest"])
    assert m["size_ratio"] < m["elements_ratio"] / 10
    assert m["alloc_seconds_largest"] > 0


@pytest.mark.gpu
def test_on_a_gpu_each_size_is_timed_there_too(accelerator):
    events, m = run(device=accelerator)
    assert m["accel_seconds_smallest"] > 0 and m["accel_seconds_largest"] > 0
    assert m["accel_speedup_largest"] == pytest.approx(m["seconds_largest"] / m["accel_seconds_largest"])
    assert m["crossover_elements"] is None or m["crossover_elements"] in sizes(100_000)
    [table] = [e for e in events if isinstance(e, Table)]
    assert table.columns[-2:] == ["GPU per add", "GPU gain"]
    assert "The GPU" in " ".join(e.text for e in events if isinstance(e, Note))
