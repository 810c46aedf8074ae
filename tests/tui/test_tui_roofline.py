"""The roofline screen (f on home, issue 26 part 4): this machine's calibrated roofline with the
learner's own runs on it, as `gpututor roofline` says it; what to do when it is not calibrated."""

from __future__ import annotations

import time
from importlib import metadata
from pathlib import Path

from fakes import TEST_CPU, ScriptedEngine
from test_tui import LESSONS
from waiting import wait_for

from tutor.measurement import calibration
from tutor.measurement import peak as matmul_peak
from tutor.ui.app import TutorApp
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.roofline import RooflineScreen


def plant(torch_version: str) -> None:
    """A calibration of the scripted engine's CPU, measured an hour ago."""
    then = time.time() - 3600
    day = time.strftime("%Y-%m-%d", time.localtime(then))
    name = f"cpu {TEST_CPU.name}"
    peak = matmul_peak.Peak(
        tflops=0.1,
        dtype="float32",
        device=name,
        threads=TEST_CPU.threads,
        torch=torch_version,
        measured_on=day,
        measured_at=then,
        best_size=512,
        sizes=(256, 512),
    )
    calibration.store(
        calibration.Calibration(
            device=name,
            kind="cpu",
            name=TEST_CPU.name,
            threads=TEST_CPU.threads,
            torch=torch_version,
            cuda=None,
            driver=None,
            measured_on=day,
            measured_at=then,
            seconds=5.0,
            peaks=(peak,),
            bandwidth=calibration.Bandwidth(
                gbps=10.0, device_copy_gbps=10.0, elementwise_gbps=8.0, megabytes=128, repeats=10
            ),
        )
    )


def shown(screen: RooflineScreen) -> str:
    from test_tui import text_of
    from textual.widgets import Static

    return "\n".join(text_of(s) for s in screen.query(Static) if "profile-text" in s.classes)


async def _open(pilot) -> RooflineScreen:
    await wait_for(pilot, lambda: pilot.app.device is not None)
    assert isinstance(pilot.app.screen, HomeScreen)
    await pilot.press("f")
    await pilot.pause()
    assert isinstance(pilot.app.screen, RooflineScreen)
    return pilot.app.screen


async def test_an_uncalibrated_machine_is_told_how_to_calibrate(tmp_path: Path, calibration_cache: Path):
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(pilot)
        text = " ".join(shown(screen).split())
        assert "cpu Test CPU is not calibrated yet" in text
        assert "gpu-lab's 'Run: this machine's roofline, kept' step" in text and "gpututor calibrate" in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
    assert not calibration_cache.exists()  # the screen reads, never measures or writes


async def test_the_learners_runs_are_placed_on_the_calibrated_roofline(tmp_path: Path, calibration_cache: Path):
    plant(metadata.version("torch"))
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    app.progress.record_run(
        experiment="bandwidth",
        params={"megabytes": 128, "matmul_size": 512},
        device=TEST_CPU.as_dict(),
        status="finished",
        metrics={
            "elementwise_tflops": 0.0005,
            "elementwise_intensity": 1 / 12,
            "matmul_tflops": 0.08,
            "matmul_intensity": 512 / 6,
        },
    )
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(pilot)
        text = shown(screen)
        # One heading, the screen's (issue 35: the lines repeated it), then which calibration
        assert "your runs on this machine's roofline" not in text
        assert "Measured " in text and " on cpu Test CPU, with torch" in " ".join(text.split())
        assert "compute roof" in text and "memory roof" in text  # the chart's legend
        # Each point says what each number is, and which run it is in words, not a row id
        flat = " ".join(text.split())
        assert "run #" not in text and "e c = a * b, your bandwidth run of " in flat
        assert "m matmul 512, your bandwidth run of " in flat
        assert (
            "0.5 GFLOP/s achieved at 0.0833 FLOP/B; the roof there is 0.833 GFLOP/s (10 GB/s of memory "
            "bandwidth x 0.0833 FLOP/B), so it reached 60.0% of it: memory-bound" in flat
        )
        assert "the roof there is 100 GFLOP/s (the calibrated float32 matmul peak), so it reached 80.0% of it" in flat
        assert "memory-bound" in text and "compute-bound" in text
        assert "not run yet" in text and "sync-timing" in text
        # Was "not run yet (…): sync-timing, pipeline-breakdown": ids alone; now each by its title.
        assert "Timing GPU work with and without synchronize (`gpututor run sync-timing`)" in " ".join(text.split())
        assert "stale" not in text
        from test_tui import text_of
        from textual.widgets import Static

        figure = next(text_of(s) for s in screen.query(Static) if "/ memory roof" in text_of(s))
        assert max(len(line.rstrip()) for line in figure.splitlines()) <= 76  # whole at 80 columns, uncut


async def test_a_calibration_from_another_torch_is_said_to_be_stale(tmp_path: Path, calibration_cache: Path):
    plant("1.0.0")
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(pilot)
        text = " ".join(shown(screen).split())
        assert "stale: measured with torch 1.0.0" in text and "gpututor calibrate" in text


async def test_opened_before_the_device_is_known_it_draws_once_it_is(tmp_path: Path, calibration_cache: Path):
    plant(metadata.version("torch"))
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.device is not None)
        detected, app.device = app.device, None
        await pilot.press("f")
        await pilot.pause()
        screen = app.screen
        assert "Detecting the device" in shown(screen)
        app.device = detected
        await wait_for(pilot, lambda: " on cpu Test CPU, with torch" in " ".join(shown(screen).split()))


async def test_a_builds_local_label_is_not_another_torch(tmp_path: Path, calibration_cache: Path):
    """torch.__version__ says 2.14.1+cu130 where the package metadata says 2.14.1: the same torch."""
    plant(metadata.version("torch").split("+")[0] + "+cu130")
    app = TutorApp(lessons_dirs=[LESSONS], home=tmp_path, device="cpu", engine=ScriptedEngine())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(pilot)
        text = " ".join(shown(screen).split())
        assert " on cpu Test CPU, with torch" in text and "stale" not in text
