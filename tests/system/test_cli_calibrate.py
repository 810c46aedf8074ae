"""`gpututor calibrate`, the calibration in `gpututor doctor`, and `gpututor roofline`: outputs,
JSON, exit codes and what each says when nothing is calibrated or the record is stale. The
caches are files of each test's own; the sweep and arrays are tiny (behaviour, not seconds)."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.course.progress import Progress

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def caches(tmp_path: Path, monkeypatch):
    from tutor.measurement import calibration
    from tutor.measurement import peak as matmul_peak

    record = tmp_path / "cache" / "calibration.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: tmp_path / "cache" / "peaks.json")
    monkeypatch.setattr(calibration, "cache_file", lambda: record)
    monkeypatch.setitem(matmul_peak.SIZES, "cpu", (64, 128))
    monkeypatch.setitem(matmul_peak.BUDGET_S, "cpu", 600.0)
    monkeypatch.setattr(calibration, "bandwidth_defaults", lambda: (4, 2))
    return record


@pytest.fixture
def no_measuring(monkeypatch):
    from tutor.experiments import bandwidth
    from tutor.measurement import peak as matmul_peak

    monkeypatch.setattr(matmul_peak, "sweep", lambda *a, **k: pytest.fail("must not measure"))
    monkeypatch.setattr(bandwidth.MemoryTraffic, "run", lambda self: pytest.fail("must not measure"))


def test_calibrate_json_stores_the_record_and_doctor_shows_it_without_measuring(capsys, caches, monkeypatch):
    import torch

    code, out, err = run_cli(capsys, "calibrate", "--device", "cpu", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["kind"] == "cpu" and record["torch"] == torch.__version__
    assert record["measured_on"] == datetime.date.today().isoformat() and caches.exists()
    assert record["peaks"][0]["dtype"] == "float32" and record["peaks"][0]["ridge_point"] > 0
    assert record["bandwidth"]["gbps"] > 0 and record["cache_file"] == str(caches)

    from tutor.experiments import bandwidth
    from tutor.measurement import peak as matmul_peak

    monkeypatch.setattr(matmul_peak, "sweep", lambda *a, **k: pytest.fail("doctor must not measure"))
    monkeypatch.setattr(bandwidth.MemoryTraffic, "run", lambda self: pytest.fail("doctor must not measure"))
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu", "--json")
    assert code == 0
    shown = json.loads(out)["calibration"]
    assert shown["stale"] is None and shown["calibration"]["measured_at"] == record["measured_at"]
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu")
    assert code == 0
    assert "calibration" in out and "ridge at" in out and "GB/s" in out and record["measured_on"] in out
    assert "stale" not in out


def test_calibrate_prints_each_roof_and_the_roofline(capsys, caches):
    code, out, err = run_cli(capsys, "calibrate", "--device", "cpu")
    assert code == 0, err
    assert "float32 matmul peak" in out and "memory bandwidth" in out and "ridge at" in out
    assert "memory roof" in out and "compute roof" in out and "FLOP/B" in out  # the chart's legend
    assert "gpututor roofline" in out and str(caches.parent) in out.replace("\n", "")


def _plant(caches: Path, **changes) -> None:
    """A record of this process's CPU, measured yesterday, with `changes`."""
    import torch

    from tutor.experiments import devices
    from tutor.measurement import calibration
    from tutor.measurement import peak as matmul_peak

    dev = devices.resolve("cpu")
    name, threads = matmul_peak.identity(dev)
    then = time.time() - 86400
    day = datetime.date.fromtimestamp(then).isoformat()
    peak = matmul_peak.Peak(
        tflops=0.1,
        dtype="float32",
        device=name,
        threads=threads,
        torch=torch.__version__,
        measured_on=day,
        measured_at=then,
        best_size=512,
        sizes=(256, 512),
    )
    fields = {
        "device": name,
        "kind": "cpu",
        "name": dev.name,
        "threads": threads,
        "torch": torch.__version__,
        "cuda": None,
        "driver": None,
        "measured_on": day,
        "measured_at": then,
        "seconds": 5.0,
        "peaks": (peak,),
        "bandwidth": calibration.Bandwidth(
            gbps=10.0, device_copy_gbps=10.0, elementwise_gbps=8.0, megabytes=128, repeats=10
        ),
    }
    calibration.store(calibration.Calibration(**{**fields, **changes}))


def test_doctor_says_a_record_from_another_torch_is_stale_and_what_to_run(capsys, caches, no_measuring):
    _plant(caches, torch="1.0.0")
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu", "--json")
    assert code == 0 and "torch 1.0.0" in json.loads(out)["calibration"]["stale"]
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu")
    assert "stale" in out and "torch 1.0.0" in out and "gpututor calibrate" in out


def test_doctor_and_roofline_say_when_nothing_is_calibrated(capsys, caches, no_measuring):
    code, out, _ = run_cli(capsys, "doctor", "--device", "cpu")
    assert code == 0 and "not calibrated" in out and "gpututor calibrate" in out
    code, out, _ = run_cli(capsys, "roofline", "--device", "cpu")
    assert code == 0 and "not calibrated" in out and "gpututor calibrate" in out
    code, out, _ = run_cli(capsys, "roofline", "--device", "cpu", "--json")
    report = json.loads(out)
    assert code == 0 and report["calibration"] is None and report["command"] == "gpututor calibrate"
    assert report["stale"] is None and report["roof"] is None  # every key --help promises, empty
    assert not caches.exists()


def test_a_calibration_of_another_device_is_named_not_used(capsys, caches, no_measuring):
    _plant(caches, device="cuda NVIDIA H100 (132 SMs)", kind="cuda", name="NVIDIA H100", threads=None)
    _code, out, _ = run_cli(capsys, "doctor", "--device", "cpu")
    assert "not calibrated" in out and "NVIDIA H100" in out
    _code, out, _ = run_cli(capsys, "roofline", "--device", "cpu", "--json")
    assert json.loads(out)["calibration"] is None


def test_roofline_places_the_stored_runs_and_lists_a_flops_without_intensity(capsys, caches, no_measuring):
    from tutor.experiments import devices

    _plant(caches)
    here = devices.resolve("cpu").as_dict()
    with Progress() as progress:  # the learner's database in this test's GPUTUTOR_HOME
        progress.record_run(
            experiment="bandwidth",
            params={"megabytes": 128, "matmul_size": 512},
            device=here,
            metrics={
                "elementwise_tflops": 0.0005,
                "elementwise_intensity": 1 / 12,
                "matmul_tflops": 0.08,
                "matmul_intensity": 512 / 6,
            },
            status="finished",
        )
        progress.record_run(
            experiment="pipeline-breakdown",
            params={},
            device=here,
            metrics={"achieved_tflops": 0.02, "dtype": "float32"},
            status="finished",
        )
    code, out, err = run_cli(capsys, "roofline", "--device", "cpu", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["roof"]["peak_tflops"] == 0.1 and report["roof"]["bandwidth_gbps"] == 10.0
    assert sorted(p["mark"] for p in report["points"]) == ["e", "m"]
    assert [p["experiment"] for p in report["listed"]] == ["pipeline-breakdown"]
    assert report["listed"][0]["of_peak"] == pytest.approx(0.2)
    code, out, _ = run_cli(capsys, "roofline", "--device", "cpu")
    assert code == 0
    assert "e c = a * b: 0.5 GFLOP/s at 0.0833 FLOP/B" in out and "m matmul 512: 80 GFLOP/s" in out  # the legend
    assert "run #" not in out  # which run, in words (issue 35)
    assert "e c = a * b, your bandwidth run of " in out and "the roof there is 0.833 GFLOP/s" in out
    assert "beside the chart" in out and "your pipeline-breakdown run of " in out
    assert "20.0% of the calibrated" in out
    assert "not run yet" in out and "sync-timing" in out


def test_calibrate_and_roofline_help_import_no_torch_and_say_why_roofline_is_a_verb():
    code = (
        "import sys; from tutor.cli import main\n"
        "for verb in ('calibrate', 'roofline'):\n"
        "    try: main([verb, '--help'])\n"
        "    except SystemExit: pass\n"
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stderr.strip().endswith("NO-TORCH")
    words = " ".join(done.stdout.split())
    assert "only reads" in words and "calibrate --roofline" in words


def test_a_bad_device_is_bad_input(capsys, caches):
    code, _, err = run_cli(capsys, "calibrate", "--device", "cuda:99")
    assert code == 2 and "cuda:99" in err and "Traceback" not in err


def test_a_failed_measurement_is_one_sentence(capsys, caches, monkeypatch):
    from tutor.measurement import peak as matmul_peak

    def oom(*a, **k):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB\nmore details")

    monkeypatch.setattr(matmul_peak, "sweep", oom)
    code, _, err = run_cli(capsys, "calibrate", "--device", "cpu")
    assert code == 1 and "the measurement failed: CUDA out of memory" in err and "Traceback" not in err
    assert not caches.exists()


def test_calibrate_measures_within_the_per_run_gpu_cap_as_runs_do(capsys, caches, monkeypatch):
    """A class sharing a GPU: `gpututor calibrate` is held to the same cap as a run (gpu_share.capped)."""
    import contextlib

    from tutor.experiments import gpu_share
    from tutor.measurement import calibration

    held = []

    @contextlib.contextmanager
    def capped(dev):
        held.append(dev.kind)
        yield None
        held.append("released")

    real = calibration.measure

    def measure(dev, **kwargs):
        assert held == [dev.kind], "measured outside the cap"
        return real(dev, **kwargs)

    monkeypatch.setattr(gpu_share, "capped", capped)
    monkeypatch.setattr(calibration, "measure", measure)
    code, _, err = run_cli(capsys, "calibrate", "--device", "cpu", "--json")
    assert code == 0, err
    assert held == ["cpu", "released"]


def test_out_of_gpu_memory_under_a_cap_names_the_cap(capsys, caches, monkeypatch):
    import torch

    from tutor.measurement import peak as matmul_peak

    def oom(*a, **k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 768 MiB")

    monkeypatch.setattr(matmul_peak, "sweep", oom)
    monkeypatch.setenv("GPUTUTOR_GPU_MEMORY_MB", "2048")
    code, _, err = run_cli(capsys, "calibrate", "--device", "cpu")
    assert code == 1 and "GPUTUTOR_GPU_MEMORY_MB caps each run at 2,048 MiB" in err and "Traceback" not in err


def test_a_calibration_on_a_busier_machine_says_it_was_not_kept(capsys, caches, monkeypatch):
    """Issue 37: measured while other programs took 90% of the cores, against 0% for the record
    kept: the quieter record stays, the command says so and why, and never that it kept the new one."""
    from tutor.measurement import noise

    _plant(caches, others_share=0.0, others_said="Nothing else was seen using the machine.")
    monkeypatch.setattr(noise, "others_cpu_share", lambda before, after, cores: 0.9)
    code, out, err = run_cli(capsys, "calibrate", "--device", "cpu")
    text = " ".join(out.split())
    assert code == 0, err
    assert "Not kept: other programs took 90% of the cores while this calibration measured" in text
    assert "and not kept: the record of" in text and "calibrated in" not in text
    assert "while it measured: Nothing else was seen using the machine." in text
