"""Why a measurement was noisy (issue 26, part 5): what else used the CPU or the GPU while a run
measured, read from the machine (tutor/measurement/noise.py), in the words the reveal shows."""

from __future__ import annotations

from tutor.checks import score_prediction
from tutor.checks.answers import NumberAnswer
from tutor.measurement import noise
from tutor.measurement.noise import GpuReading, Reading

SPEEDUP = NumberAnswer(type="number", unit="x", min=0, max=1000)


def reading(wall=0.0, busy=0.0, steal=0.0, own=0.0, load=None, gpu=None) -> Reading:
    return Reading(wall, busy, steal, own, load, gpu)


def test_other_programs_share_of_the_cores_is_named_with_its_figures():
    # 10 s on 2 cores: 14 core-seconds busy, 4 of them this process's own -> others took 50%.
    text = noise.why(reading(), reading(wall=10, busy=14, own=4), cores=2)
    assert text == "Other programs took 50% of this machine's 2 cores while it ran."


def test_this_process_own_work_is_not_blamed_on_others():
    text = noise.why(reading(), reading(wall=10, busy=19, own=18), cores=2)
    assert text.startswith("Nothing else was seen using the machine (other programs took 5% of the CPU)")


def test_a_virtual_machines_stolen_time_is_named():
    text = noise.why(reading(), reading(wall=10, busy=4, own=4, steal=3), cores=2)
    assert "host gave 15% of its CPU time to other machines" in text


def test_without_proc_stat_the_load_average_speaks():
    before, after = reading(busy=None), reading(wall=5, busy=None, load=5.2)
    assert "load average was 5.2 on 2 cores" in noise.why(before, after, cores=2)


def test_other_gpu_processes_a_busy_gpu_and_held_clocks_are_named():
    busy = GpuReading(others=2, others_mib=12_288, utilization=87, throttle=())
    hot = GpuReading(others=2, others_mib=12_288, utilization=100, throttle=("too hot (software thermal limit)",))
    text = noise.why(reading(gpu=busy), reading(wall=10, busy=1, own=1, gpu=hot), cores=8)
    assert "2 other processes held 12,288 MiB on the GPU" in text
    assert "the GPU was already 87% busy before this run started" in text
    assert "the GPU slowed its clocks (too hot (software thermal limit))" in text


def test_a_quiet_gpu_is_said_to_have_been_checked():
    quiet = GpuReading(others=0, others_mib=0, utilization=0, throttle=())
    text = noise.why(reading(gpu=quiet), reading(wall=10, busy=1, own=1, gpu=quiet), cores=8)
    assert text.startswith("Nothing else was seen") and "no other process was on the GPU" in text


def test_the_undecided_verdict_carries_the_runs_own_reason_and_offers_a_rerun():
    why = "Other programs took 61% of this machine's 2 cores while it ran."
    score = score_prediction("1.2", SPEEDUP, 1.0, "x", interval=(0.4, 1.3), why=why)
    assert score.undecided and why in score.summary and "Run it again (r) when it is quieter" in score.summary
    calm = score_prediction(
        "1.2",
        SPEEDUP,
        1.0,
        "x",
        interval=(0.4, 1.3),
        why="Nothing else was seen using the machine (other programs took 3% of the CPU): x.",
    )
    assert "the spread is this machine's own" in calm.summary and "run it again (r) to measure more" in calm.summary
    unknown = score_prediction("1.2", SPEEDUP, 1.0, "x", interval=(0.4, 1.3))
    assert "Run it again (r) to measure more" in unknown.summary


def test_a_gpu_slowed_for_heat_or_busy_with_another_program_gates_every_verdict():
    """Issue 37: telemetry that gates. Thermal or hardware slowdown by the end, or another program's
    kernels as the run began, make the run undecided; the routine power cap and a CPU do not."""
    hot = GpuReading(others=0, others_mib=0, utilization=0, throttle=("too hot (hardware thermal limit)",))
    capped = GpuReading(others=0, others_mib=0, utilization=0, throttle=("held to its power limit",))
    busy = GpuReading(others=1, others_mib=2048, utilization=87, throttle=())
    quiet = GpuReading(others=1, others_mib=2048, utilization=0, throttle=())  # present, not working
    assert noise.gate(reading(gpu=quiet), reading(wall=5, gpu=hot)).startswith(
        "The GPU slowed its clocks (too hot (hardware thermal limit))"
    )
    assert "Another program's work had the GPU 87% busy" in noise.gate(reading(gpu=busy), reading(wall=5, gpu=quiet))
    assert noise.gate(reading(gpu=quiet), reading(wall=5, gpu=capped)) is None
    assert noise.gate(reading(gpu=quiet), reading(wall=5, gpu=quiet)) is None
    assert noise.gate(reading(), reading(wall=10, busy=19, own=1)) is None  # a busy CPU is said, not gated


def test_a_gated_run_leaves_even_a_clear_hit_undecided():
    gate = "The GPU slowed its clocks (power brake), so its timings are not this card's own."
    score = score_prediction("1.0", SPEEDUP, 1.0, "x", interval=(0.99, 1.01), gate=gate)
    assert score.undecided and not score.hit and "the GPU slowed its clocks (power brake)" in score.summary
    assert "stays locked, and no try was used" in score.summary
    assert score_prediction("1.0", SPEEDUP, 1.0, "x", interval=(0.99, 1.01)).hit
