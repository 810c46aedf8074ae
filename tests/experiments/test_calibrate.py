"""`gpututor calibrate`'s record (tutor/measurement/calibration.py): what it measures on the CPU
with a tiny sweep, what it stores, when it is stale, and the learner's stored runs placed on it.
Each test keeps its caches in files of its own, never the user's. Behaviour only: no test
compares a timing with a fixed number."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import pkgutil
import time

import pytest
import torch

from tutor import experiments
from tutor.course.progress import Progress
from tutor.experiments import bandwidth, devices, specs
from tutor.measurement import calibration
from tutor.measurement import peak as matmul_peak


@pytest.fixture(autouse=True)
def caches(tmp_path, monkeypatch):
    """Both caches in this test's folder, and a tiny sweep and arrays: the behaviour, not the seconds."""
    peaks, record = tmp_path / "cache" / "peaks.json", tmp_path / "cache" / "calibration.json"
    monkeypatch.setattr(matmul_peak, "cache_file", lambda: peaks)
    monkeypatch.setattr(calibration, "cache_file", lambda: record)
    monkeypatch.setitem(matmul_peak.SIZES, "cpu", (64, 128))
    monkeypatch.setitem(matmul_peak.BUDGET_S, "cpu", 600.0)  # both sizes, however busy the machine
    monkeypatch.setattr(calibration, "bandwidth_defaults", lambda: (4, 2))
    return peaks, record


@pytest.fixture
def cpu():
    return devices.resolve("cpu")


@pytest.fixture
def no_measuring(monkeypatch):
    """Any measurement fails the test: what is read must come from the planted file."""
    monkeypatch.setattr(matmul_peak, "sweep", lambda *a, **k: pytest.fail("must not measure"))
    monkeypatch.setattr(bandwidth.MemoryTraffic, "run", lambda self: pytest.fail("must not measure"))


def planted(dev, **changes) -> calibration.Calibration:
    """A record for this process's `dev`, as if measured yesterday, with `changes`."""
    name, threads = matmul_peak.identity(dev)
    then = time.time() - 86400
    day = datetime.date.fromtimestamp(then).isoformat()
    peaks = tuple(
        matmul_peak.Peak(
            tflops=t,
            dtype=d,
            device=name,
            threads=threads,
            torch=torch.__version__,
            measured_on=day,
            measured_at=then,
            best_size=512,
            sizes=(256, 512),
        )
        for d, t in (("float32", 0.1), ("bfloat16", 0.4))
    )
    record = calibration.Calibration(
        device=name,
        kind=dev.kind,
        name=dev.name,
        threads=threads,
        torch=torch.__version__,
        cuda=None,
        driver=None,
        measured_on=day,
        measured_at=then,
        seconds=5.0,
        peaks=peaks,
        bandwidth=calibration.Bandwidth(
            gbps=10.0, device_copy_gbps=10.0, elementwise_gbps=8.0, megabytes=128, repeats=10
        ),
    )
    return dataclasses.replace(record, **changes)


# ---------------------------------------------------------------- measuring on the CPU


def test_calibrate_measures_each_native_dtype_and_the_bandwidth_and_stores_one_record(cpu, caches):
    peaks_file, record_file = caches
    seen = []
    c = calibration.measure(cpu, on_progress=lambda what, seconds, result: seen.append((what, result)))
    name, threads = matmul_peak.identity(cpu)
    assert c.device == name and c.kind == "cpu" and c.name == cpu.name
    assert c.threads == threads == torch.get_num_threads()
    assert c.torch == torch.__version__ and c.cuda is None and c.driver is None
    assert c.measured_on == datetime.date.today().isoformat() and c.seconds > 0
    assert [p.dtype for p in c.peaks] == calibration.dtypes(cpu) == ["float32"] + (["bfloat16"] if cpu.bf16 else [])
    assert all(p.tflops > 0 and p.sizes == (64, 128) for p in c.peaks)
    bw = c.bandwidth
    assert bw.megabytes == 4 and bw.repeats == 2 and bw.copy_gbps is None and bw.pinned_copy_gbps is None
    assert bw.gbps == max(bw.device_copy_gbps, bw.elementwise_gbps) > 0
    assert c.ridge() == pytest.approx(c.peak("float32").tflops * 1e12 / (bw.gbps * 1e9))
    assert [what for what, _ in seen] == [f"{d} matmul peak" for d in calibration.dtypes(cpu)] + ["memory bandwidth"]
    # stored beside peaks.json, read back whole; the peaks are MFU's too
    assert record_file.parent == peaks_file.parent
    assert calibration.find(name) == c and calibration.load() == [c]
    assert {p.dtype for p in matmul_peak.load()} == set(calibration.dtypes(cpu))
    assert matmul_peak.cached(cpu, "float32") == c.peak("float32")


def test_the_stored_record_holds_device_versions_date_peaks_and_bandwidth(cpu, caches):
    calibration.measure(cpu)
    raw = json.loads(caches[1].read_text())
    assert raw["version"] == calibration.CACHE_VERSION and len(raw["calibrations"]) == 1
    stored = raw["calibrations"][0]
    assert {
        "device",
        "kind",
        "name",
        "threads",
        "torch",
        "cuda",
        "driver",
        "measured_on",
        "measured_at",
        "seconds",
        "peaks",
        "bandwidth",
    } <= set(stored)
    assert stored["torch"] == torch.__version__ and stored["measured_on"] == datetime.date.today().isoformat()
    assert {"tflops", "dtype", "best_size", "sizes"} <= set(stored["peaks"][0])
    assert {"gbps", "device_copy_gbps", "elementwise_gbps", "megabytes", "repeats"} <= set(stored["bandwidth"])


def test_calibrating_again_replaces_this_devices_record_and_keeps_another(cpu):
    calibration.store(planted(cpu, device="cuda Some GPU (10 SMs)", kind="cuda", name="Some GPU", threads=None))
    calibration.store(planted(cpu))
    fresh = calibration.measure(cpu)
    assert sorted(c.device for c in calibration.load()) == sorted(["cuda Some GPU (10 SMs)", fresh.device])
    assert calibration.find(fresh.device) == fresh


def test_the_memory_roof_is_measured_by_the_bandwidth_experiments_own_code(cpu, monkeypatch):
    calls = []
    real = bandwidth.MemoryTraffic.steps

    def steps(self):
        calls.append((self.megabytes, self.repeats))
        yield from real(self)

    monkeypatch.setattr(bandwidth.MemoryTraffic, "steps", steps)
    calibration.measure(cpu)
    assert calls == [(4, 2)]


def test_dtypes_per_device_kind():
    cuda = devices.Device(kind="cuda", index=0, name="GPU", capability=(9, 0), bf16=True)
    assert calibration.dtypes(cuda) == ["float32", "tfloat32", "bfloat16", "float16"]
    assert calibration.dtypes(dataclasses.replace(cuda, capability=(8, 6), bf16=False)) == [
        "float32",
        "tfloat32",
        "float16",
    ]
    # A T4 or V100 has no TF32: a "high" precision matmul there is float32, not a TF32 peak.
    t4 = devices.Device(kind="cuda", index=0, name="Tesla T4", capability=(7, 5), bf16=False)
    assert calibration.dtypes(t4) == ["float32", "float16"]
    assert calibration.dtypes(devices.Device(kind="cpu", index=None, name="CPU", bf16=False)) == ["float32"]
    assert calibration.dtypes(devices.Device(kind="cpu", index=None, name="CPU", bf16=True)) == ["float32", "bfloat16"]


# ---------------------------------------------------------------- staleness, from a planted file


def test_a_fresh_record_of_this_device_is_not_stale(cpu, no_measuring):
    calibration.store(planted(cpu))
    r = calibration.report(cpu)
    assert r["stale"] is None and r["calibration"]["device"] == r["device"]
    assert r["command"] == "gpututor calibrate" and r["calibration"]["ridge_point"] == pytest.approx(0.1e12 / 10e9)


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"torch": "1.0.0"}, "measured with torch 1.0.0"),
        (
            {"measured_at": time.time() - (calibration.MAX_AGE_DAYS + 1) * 86400, "measured_on": "2000-01-01"},
            f"more than {calibration.MAX_AGE_DAYS} days ago",
        ),
        ({"threads": 97}, "measured with 97 CPU threads"),
    ],
)
def test_a_record_from_another_torch_an_old_date_or_other_threads_is_stale(cpu, no_measuring, changes, said):
    calibration.store(planted(cpu, **changes))
    r = calibration.report(cpu)
    assert r["calibration"] is not None  # still shown, with why it is stale
    assert said in r["stale"]


def test_a_record_of_another_device_is_not_this_ones(cpu, no_measuring):
    calibration.store(planted(cpu, device="cuda NVIDIA H100 (132 SMs)", kind="cuda", name="NVIDIA H100", threads=None))
    r = calibration.report(cpu)
    assert r["calibration"] is None and r["other_device"]["device"] == "cuda NVIDIA H100 (132 SMs)"
    assert "measured on cuda NVIDIA H100 (132 SMs)" in r["stale"]


def test_another_driver_is_stale_where_both_are_known(cpu):
    c = planted(cpu, driver="550.54")
    now = calibration.current(cpu)
    assert c.stale_because(now["device"], now["threads"], now["torch"], "550.54") is None
    assert "driver 550.54" in c.stale_because(now["device"], now["threads"], now["torch"], "560.1")
    assert c.stale_because(now["device"], now["threads"], now["torch"], None) is None


def test_an_unreadable_file_counts_as_no_calibration(cpu, caches, no_measuring):
    record_file = caches[1]
    record_file.parent.mkdir(parents=True)
    good = planted(cpu).as_dict()
    for text in (
        "{not json",
        json.dumps({"version": 99, "calibrations": []}),
        json.dumps([1]),
        json.dumps({"version": calibration.CACHE_VERSION, "calibrations": [{"x": 1}, {**good, "peaks": []}]}),
    ):
        record_file.write_text(text)
        assert calibration.load() == [] and calibration.report(cpu)["calibration"] is None
    record_file.write_text(json.dumps({"version": calibration.CACHE_VERSION, "calibrations": [{"x": 1}, good]}))
    assert [c.device for c in calibration.load()] == [good["device"]]  # a bad record costs only itself


# ---------------------------------------------------------------- the learner's runs on the roofline


def _record_runs(progress: Progress, dev) -> None:
    here = dev.as_dict()  # as `gpututor run` stores it
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
        experiment="sync-timing", params={"size": 128}, device=here, metrics={"tflops": 0.05}, status="finished"
    )
    # the TUI stores its Started event's device instead
    progress.record_run(
        experiment="pipeline-breakdown",
        params={},
        device={"device": "cpu", "name": dev.name},
        metrics={"achieved_tflops": 0.2, "dtype": "bfloat16"},
        status="finished",
    )
    progress.record_run(
        experiment="profile-step",
        params={},
        device={"kind": "cuda", "name": "NVIDIA H100"},
        metrics={"achieved_tflops": 30.0},
        status="finished",
    )
    progress.record_run(experiment="train", params={}, device=here, metrics={"accuracy": 0.9}, status="finished")


def test_runs_with_an_intensity_are_points_others_are_listed_and_nothing_is_invented(cpu, tmp_path):
    c = planted(cpu)
    with Progress(tmp_path / "progress.db") as progress:
        _record_runs(progress, cpu)
        runs = [r for r in (progress.latest_run(experiment=e) for e in calibration.EXPERIMENTS) if r]
    placed = calibration.place_runs(c, runs)
    points = {p["label"]: p for p in placed["points"]}
    assert set(points) == {"c = a * b", "matmul 512"}
    e, m = points["c = a * b"], points["matmul 512"]
    assert (e["intensity"], e["tflops"]) == (1 / 12, 0.0005) and (m["intensity"], m["tflops"]) == (512 / 6, 0.08)
    # the roof there is min(peak, intensity x bandwidth): 10 GB/s and 0.1 TFLOP/s, ridge at 10 FLOP/B
    assert e["roof_tflops"] == pytest.approx(10e9 / 12 / 1e12) and e["bound"] == "memory"
    assert m["roof_tflops"] == 0.1 and m["bound"] == "compute" and m["of_roof"] == pytest.approx(0.8)
    assert e["above"] is None and m["above"] is None
    listed = {p["experiment"]: p for p in placed["listed"]}
    assert set(listed) == {"sync-timing", "pipeline-breakdown"}
    assert all("intensity" not in p for p in listed.values())  # a FLOP/s alone is never given a place
    assert listed["sync-timing"]["of_peak"] == pytest.approx(0.05 / 0.1)
    assert listed["pipeline-breakdown"]["dtype"] == "bfloat16"
    assert listed["pipeline-breakdown"]["of_peak"] == pytest.approx(0.2 / 0.4)
    assert [p["experiment"] for p in placed["elsewhere"]] == ["profile-step"]
    assert placed["elsewhere"][0]["device"] == "cuda NVIDIA H100"
    marks = calibration.chart_points(placed["points"])
    assert sorted(p.mark for p in marks) == ["e", "m"]


def test_a_run_above_the_calibrated_roof_says_why(cpu, tmp_path):
    with Progress(tmp_path / "progress.db") as progress:
        progress.record_run(
            experiment="bandwidth",
            params={"megabytes": 8, "matmul_size": 256},
            device=cpu.as_dict(),
            metrics={
                "elementwise_tflops": 0.01,
                "elementwise_intensity": 1 / 12,
                "matmul_tflops": 0.05,
                "matmul_intensity": 256 / 6,
            },
            status="finished",
        )
        run = progress.latest_run(experiment="bandwidth")
    placed = calibration.place_runs(planted(cpu), [run])
    e = next(p for p in placed["points"] if p["mark"] == "e")
    assert e["of_roof"] > 1 and "8 MiB may sit in a cache" in e["above"]


def test_every_achieved_flops_metric_of_the_specs_has_a_source():
    for s in calibration.SOURCES:
        metrics = experiments.get(s.experiment).metrics
        assert s.tflops in metrics and metrics[s.tflops].unit == "TFLOP/s"
        assert s.intensity is None or s.intensity in metrics
        assert s.dtype_metric is None or s.dtype_metric in metrics
    known = {(s.experiment, s.tflops) for s in calibration.SOURCES}
    for info in pkgutil.iter_modules(specs.__path__):  # the built-in experiments
        spec = importlib.import_module(f"{specs.__name__}.{info.name}").SPEC
        for metric, m in spec.metrics.items():
            if m.unit == "TFLOP/s" and "peak" not in metric:
                assert (spec.name, metric) in known, f"{spec.name}.{metric}: a FLOP/s the roofline does not read"


# ---------------------------------------------------------------- a GPU


@pytest.mark.gpu
def test_calibrate_on_cuda_measures_tf32_and_half_precision_and_the_bus(monkeypatch):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    dev = devices.resolve("cuda")
    monkeypatch.setitem(matmul_peak.SIZES, "cuda", (256, 512))
    c = calibration.measure(dev)
    assert [p.dtype for p in c.peaks] == calibration.dtypes(dev)
    assert ("tfloat32" in calibration.dtypes(dev)) == (torch.cuda.get_device_capability(dev.index or 0) >= (8, 0))
    assert c.cuda == torch.version.cuda and c.threads is None
    assert c.bandwidth.copy_gbps > 0 and c.bandwidth.pinned_copy_gbps > 0
    assert calibration.report(dev)["stale"] is None


def test_a_record_or_run_of_an_older_measurement_method_is_never_beside_new_ones(cpu, tmp_path):
    """Issue 37: a calibration stored before the method mark is stale (measured again); a run stamped
    without the current method is left off the roofline and said, not plotted."""
    from tutor.measurement.method import METHOD

    old = calibration.Calibration.from_dict({k: v for k, v in planted(cpu).as_dict().items() if k != "method"})
    now = calibration.current(cpu)
    assert old.method == 1 and "measured the older way" in old.stale_because(
        now["device"], now["threads"], now["torch"]
    )
    assert planted(cpu).stale_because(now["device"], now["threads"], now["torch"]) is None
    with Progress(tmp_path / "progress.db") as progress:
        stamped = {**cpu.as_dict(), "host": "here", "torch_version": now["torch"]}
        metrics = {"elementwise_tflops": 0.0005, "elementwise_intensity": 1 / 12}
        progress.record_run(experiment="bandwidth", params={}, device=stamped, metrics=metrics, status="finished")
        older = progress.latest_run(experiment="bandwidth")
        progress.record_run(
            experiment="bandwidth", params={}, device={**stamped, "method": METHOD}, metrics=metrics, status="finished"
        )
        newer = progress.latest_run(experiment="bandwidth")
    placed = calibration.place_runs(planted(cpu), [older])
    assert placed["points"] == [] and [p["run_id"] for p in placed["older"]] == [older.id]
    assert [p["run_id"] for p in calibration.place_runs(planted(cpu), [newer])["points"]] == [newer.id]


def test_a_calibration_says_what_else_ran_and_a_busier_one_never_replaces_a_quieter(cpu, caches, monkeypatch):
    """Issue 37: three calibrations within an hour on one idle-to-busy machine stored peaks of 0.08
    to 0.156 TFLOP/s, each as 'the machine'. Now each records what else ran while it measured, and
    one measured while others took clearly more of the cores keeps the quieter record (and its
    peaks, which MFU reads), saying why."""
    from tutor.measurement import noise

    measured = calibration.measure(cpu)
    assert 0.0 <= measured.others_share <= 1.0 and measured.others_said.endswith(".")
    quiet = planted(cpu, others_share=0.05, others_said="Nothing else was seen using the machine.")
    calibration.store(quiet)
    monkeypatch.setattr(noise, "others_cpu_share", lambda before, after, cores: 0.61)
    busy = calibration.measure(cpu)
    assert calibration.find(quiet.device) == quiet and busy.peaks == quiet.peaks
    assert busy.notes[-1].startswith("Not kept: other programs took 61% of the cores while this calibration measured")
    assert "against 5% during the one of" in busy.notes[-1] and "`gpututor calibrate` again" in busy.notes[-1]
    assert calibration.load()[0].notes == ()  # the words are said, not stored
    monkeypatch.setattr(noise, "others_cpu_share", lambda before, after, cores: 0.15)  # not clearly busier
    again = calibration.measure(cpu)
    assert calibration.find(quiet.device) == again != quiet
