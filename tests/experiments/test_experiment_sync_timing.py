"""sync-timing: without synchronize, a GPU timing measures the launches; on a CPU both ways agree."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments.events import Note, Started, Step, Table
from tutor.experiments.spec import COMMON_METRICS


def run(device, **params):
    values = {"size": 64, "calls": 3, "repeats": 2, **params}
    return run_experiment("sync-timing", values, device)


@pytest.fixture(scope="module")
def cpu_run():
    return run("cpu")


def test_every_declared_metric_is_reported(cpu_run):
    _, m = cpu_run
    assert set(m) - set(COMMON_METRICS) == set(experiments.get("sync-timing").metrics)
    assert m["device"] == "cpu"


def test_the_run_says_what_else_the_machine_was_doing_beside_its_spread(cpu_run):
    """experiments.start adds it to any run that reports a spread: the reason a noisy reveal gives."""
    _, m = cpu_run
    assert m["ratio_low"] <= m["ratio_high"]
    why = m["noise_why"]
    assert why.endswith(".") and ("Other programs took" in why or why.startswith("Nothing else was seen"))


def test_the_cpu_is_synchronous(cpu_run):
    events, m = cpu_run
    assert m["asynchronous"] is False and m["events_seconds"] is None
    assert m["unsynced_seconds"] > 0 and m["synced_seconds"] > 0
    # the ways took turns: the median of each repeat's own ratio, inside its interval
    assert m["ratio_low"] <= m["ratio"] <= m["ratio_high"]
    assert m["tflops"] == pytest.approx(2 * 64**3 * 3 / m["synced_seconds"] / 1e12)
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "No GPU here" in notes and "synchronous" in notes and "loss.item()" in notes


def test_table_has_one_row_per_clock_off_cuda(cpu_run):
    events, _ = cpu_run
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows] == ["perf_counter, no sync", "perf_counter + synchronize"]
    assert table.columns == ["method", "time", "what it measured"]


def test_progress_after_every_repeat(cpu_run):
    events, _ = cpu_run
    steps = [e for e in events if isinstance(e, Step)]
    assert [s.step for s in steps] == [1, 2] and all(s.total == 2 for s in steps)


def test_default_size_is_capped_on_the_cpu_but_an_explicit_one_is_not(monkeypatch):
    from tutor.experiments import sync_timing

    monkeypatch.setattr(sync_timing, "CPU_SIZE", 32)  # keep the default-params run small
    events, _ = run_experiment("sync-timing", {"calls": 1, "repeats": 1}, "cpu")
    assert "of 32 x 32" in events[0].detail
    assert any("instead of the default 2048" in e.text for e in events if isinstance(e, Note))
    events, _ = run("cpu", size=48, calls=1, repeats=1)
    assert "of 48 x 48" in events[0].detail
    assert not any("instead of the default" in e.text for e in events if isinstance(e, Note))


def test_float32_matmul_precision_is_restored():
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        run("cpu", calls=1, repeats=1)
        assert torch.get_float32_matmul_precision() == "high"
    finally:
        torch.set_float32_matmul_precision(before)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_unsynced_timing_measures_only_the_launches():
    events, m = run("cuda", size=2048, calls=20, repeats=5)
    assert isinstance(events[0], Started) and m["device"].startswith("cuda")
    assert m["asynchronous"] is True
    # asynchronous execution: queueing 20 matmuls of 17 GFLOP each is far quicker than running them
    assert m["ratio"] > 2
    assert m["events_seconds"] == pytest.approx(m["synced_seconds"], rel=0.2)
    table = next(e for e in events if isinstance(e, Table))
    assert [row[0] for row in table.rows][-1] == "CUDA events"


@pytest.mark.gpu
def test_any_accelerator_runs_asynchronously_and_the_synced_timing_says_so(accelerator):
    _events, m = run(accelerator, size=2048, calls=20, repeats=5)
    assert m["device"].startswith(accelerator) and m["asynchronous"] is True
    assert m["synced_seconds"] >= m["unsynced_seconds"]


@pytest.mark.parametrize(
    "unsynced, synced, says",
    [
        (
            [0.100, 0.110],
            [0.098, 0.100],
            [
                "came out shorter here",
                "cannot make the work faster",
                "run-to-run noise",
                "spread over 10% of their median",
            ],
        ),
        ([0.100, 0.101], [0.150, 0.151], ["larger than the repeats' own spread (1% of their median)"]),
    ],
)
def test_on_the_cpu_the_note_explains_the_difference_with_the_measured_noise(monkeypatch, unsynced, synced, says):
    """A synchronised time shorter than the plain one (the issue saw it on the devices lesson)
    is explained, with the spread the repeats themselves measured."""
    from tutor.experiments import sync_timing

    clocks = {"u": iter(unsynced), "s": iter(synced)}
    monkeypatch.setattr(sync_timing, "_unsynced", lambda *_: next(clocks["u"]))
    monkeypatch.setattr(sync_timing, "_synced", lambda *_: next(clocks["s"]))
    events, _ = run("cpu")
    result = next(e.text for e in events if isinstance(e, Note) and "both clocks measure" in e.text)
    for words in says:
        assert words in result
    if synced[0] > unsynced[0]:
        assert "came out shorter" not in result


def test_from_6_repeats_it_measures_more_until_the_interval_is_precise_or_the_time_is_spent(monkeypatch):
    """Issue 37, item 2: repeats that stop when the measurement is decided enough. Ratios that agree
    stop at the first look; ratios that keep disagreeing go on, look by look, to the most it makes."""
    from tutor.experiments import sync_timing

    events, m = run("cpu", repeats=9)
    steps = [e for e in events if isinstance(e, Step)]
    said = next(e.text for e in events if isinstance(e, Note) and e.text.startswith("Repeats: "))
    timed = max(e.step for e in steps)
    assert timed >= 9 and f"Repeats: {timed} of each way (at least 9, looking at 9, 13, 19, 28, 40)" in said
    assert m["ratio_low"] <= m["ratio"] <= m["ratio_high"]

    clocks = iter([0.1, 0.2] * 100)  # every other repeat's synced way twice as long: never precise
    monkeypatch.setattr(sync_timing, "_unsynced", lambda *_: 0.1)
    monkeypatch.setattr(sync_timing, "_synced", lambda *_: next(clocks))
    events, m = run("cpu", repeats=9)
    said = next(e.text for e in events if isinstance(e, Note) and e.text.startswith("Repeats: "))
    assert said.startswith("Repeats: 40 of each way") and "that is the most it makes" in said
    assert len([e for e in events if isinstance(e, Step)]) == 40


@pytest.mark.parametrize(
    "edges, repeats, says",
    [
        ((10.0,), 9, "its interval was clear of 10x, where the predictions' verdicts turn"),
        ((1.5,), 40, "still reaches one of 1.5x, where the verdicts turn"),
    ],
)
def test_told_where_the_verdicts_turn_it_measures_until_they_are_decided(monkeypatch, edges, repeats, says):
    """Issue 37 item 2: ratios of 1x and 2x by turns are never precise, yet they decide an option
    edge at 10x at the first look; an edge at 1.5x, inside them, keeps it measuring to the most."""
    from tutor.experiments import sync_timing

    clocks = iter([0.1, 0.2] * 100)
    monkeypatch.setattr(sync_timing, "_unsynced", lambda *_: 0.1)
    monkeypatch.setattr(sync_timing, "_synced", lambda *_: next(clocks))
    events, _m = run("cpu", repeats=9, decide=edges)
    said = next(e.text for e in events if isinstance(e, Note) and e.text.startswith("Repeats: "))
    assert said.startswith(f"Repeats: {repeats} of each way") and says in said
    steps = [e for e in events if isinstance(e, Step)]
    assert max(e.step for e in steps) == repeats
    assert (steps[-1].step, steps[-1].total) == (repeats, repeats)  # the progress ends full, not "9/40"
