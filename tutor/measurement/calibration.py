"""This machine's roofline, measured once: `gpututor calibrate`, shown by `doctor`, and the
learner's own runs placed on it by `gpututor roofline`.

A calibration is both roofs of one device, measured in one go and kept together:

- the compute roofs: the realistic matmul peak of each dtype the device runs natively (the
  sweep of tutor/measurement/peak.py; each is also kept in peaks.json, so MFU uses it);
- the memory roof: the best of the device copy and c = a * b on float32 arrays, measured by the
  bandwidth experiment's own code (tutor/experiments/bandwidth.py `MemoryTraffic`) with its
  default sizes; on a GPU the host-to-device copies too.

It is kept in the cache dir (calibration.json), one record per device identity (the same
identity peaks.json keys on: kind, name, SM count on CUDA), stamped with the CPU threads, torch,
CUDA and driver versions and the date. It stays usable but is said to be stale when it was
measured on another device, with another thread count, torch version or driver, or more than
peak.MAX_AGE_DAYS ago.

Reading the cache and placing runs need no torch; measuring imports it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable, Generator, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor import paths
from tutor.measurement import peak as matmul_peak
from tutor.measurement.method import CHANGED, METHOD, is_current, method_of

if TYPE_CHECKING:
    from tutor.experiments.devices import Device

CACHE_NAME = "calibration.json"
CACHE_VERSION = 1
MAX_AGE_DAYS = matmul_peak.MAX_AGE_DAYS  # one age limit for both caches
COMMAND = "gpututor calibrate"
ROOFLINE_COMMAND = "gpututor roofline"
ROOF_DTYPE = "float32"  # the chart's compute roof: the bandwidth experiment's points are full float32


# ---------------------------------------------------------------- the record (no torch)


@dataclass(frozen=True)
class Bandwidth:
    """The memory roof and what it was taken from (GB/s)."""

    gbps: float  # the roof: the best of device_copy_gbps and elementwise_gbps
    device_copy_gbps: float
    elementwise_gbps: float
    megabytes: int  # MiB per array
    repeats: int  # timings per operation, the best counts
    copy_gbps: float | None = None  # host to device, pageable (None on a CPU)
    pinned_copy_gbps: float | None = None  # host to device, pinned (None off CUDA)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Bandwidth:
        def opt(key: str) -> float | None:
            return None if d.get(key) is None else _positive(d[key])

        return cls(
            gbps=_positive(d["gbps"]),
            device_copy_gbps=_positive(d["device_copy_gbps"]),
            elementwise_gbps=_positive(d["elementwise_gbps"]),
            megabytes=int(d["megabytes"]),
            repeats=int(d["repeats"]),
            copy_gbps=opt("copy_gbps"),
            pinned_copy_gbps=opt("pinned_copy_gbps"),
        )


@dataclass(frozen=True)
class Calibration:
    """One device's measured roofs, and what they were measured with."""

    device: str  # identity, as peaks.json keys it: "cpu AMD EPYC", "cuda NVIDIA H100 ... (132 SMs)"
    kind: str  # cpu, cuda, mps
    name: str  # the device's name, as runs record it
    threads: int | None  # CPU intra-op threads (None on a GPU)
    torch: str
    cuda: str | None  # the CUDA toolkit torch was built with (None: a CPU build)
    driver: str | None  # the GPU driver's version (None off CUDA, or unreadable)
    measured_on: str  # ISO date, local time
    measured_at: float  # epoch seconds
    seconds: float  # how long the calibration took
    peaks: tuple[matmul_peak.Peak, ...]
    bandwidth: Bandwidth
    notes: tuple[str, ...] = field(default_factory=tuple)  # what was not measured, and why
    method: int = METHOD  # the measurement method (tutor/measurement/method.py); 1 before the mark
    others_share: float | None = None  # other programs' share of the cores while it measured (None: unread)
    others_said: str = ""  # what else used the machine meanwhile, in words (noise.why)

    def peak(self, dtype: str) -> matmul_peak.Peak | None:
        return next((p for p in self.peaks if p.dtype == dtype), None)

    def ridge(self, dtype: str = ROOF_DTYPE) -> float | None:
        """FLOP per byte where the roofs meet: peak / bandwidth."""
        p = self.peak(dtype)
        return None if p is None else p.tflops * 1e12 / (self.bandwidth.gbps * 1e9)

    def age_days(self, now: float | None = None) -> float:
        return ((time.time() if now is None else now) - self.measured_at) / 86400

    def stale_because(
        self, device: str, threads: int | None, torch_version: str, driver: str | None = None, now: float | None = None
    ) -> str | None:
        """Why this record no longer describes the device as it runs now (None: it does)."""
        if self.device != device:
            return f"measured on {self.device}, this is {device}"
        if self.threads != threads:
            return f"measured with {self.threads} CPU threads, training now uses {threads}"
        if self.torch != torch_version:
            return f"measured with torch {self.torch}, this is {torch_version}"
        if driver is not None and self.driver is not None and driver != self.driver:
            return f"measured with driver {self.driver}, this is {driver}"
        if self.age_days(now) > MAX_AGE_DAYS:
            return f"measured {self.measured_on}, more than {MAX_AGE_DAYS} days ago"
        if self.age_days(now) < -1:
            return f"dated {self.measured_on}, in the future"
        if self.method != METHOD:
            return f"measured the older way ({CHANGED})"
        return None

    def with_text(self) -> str:
        """What it was measured with, in words: "torch 2.4.0, CUDA 12.4, driver 550.54, 2 threads"."""
        bits = [f"torch {self.torch}"]
        if self.cuda:
            bits.append(f"CUDA {self.cuda}")
        if self.driver:
            bits.append(f"driver {self.driver}")
        if self.threads is not None:
            bits.append(f"{self.threads} thread{'s' if self.threads != 1 else ''}")
        return ", ".join(bits)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["peaks"] = [p.as_dict() for p in self.peaks]
        d["notes"] = list(self.notes)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Calibration:
        peaks = tuple(matmul_peak.Peak.from_dict(p) for p in d["peaks"])
        if not peaks:
            raise ValueError("a calibration without a peak")
        threads = d.get("threads")
        return cls(
            device=str(d["device"]),
            kind=str(d["kind"]),
            name=str(d["name"]),
            threads=int(threads) if threads is not None else None,
            torch=str(d["torch"]),
            cuda=None if d.get("cuda") is None else str(d["cuda"]),
            driver=None if d.get("driver") is None else str(d["driver"]),
            measured_on=str(d["measured_on"]),
            measured_at=float(d["measured_at"]),
            seconds=float(d.get("seconds", 0.0)),
            peaks=peaks,
            bandwidth=Bandwidth.from_dict(d["bandwidth"]),
            notes=tuple(str(n) for n in d.get("notes", ())),
            method=method_of(d),
            others_share=None if d.get("others_share") is None else float(d["others_share"]),
            others_said=str(d.get("others_said") or ""),
        )


def _positive(value: Any) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"not a measurement: {value}")
    return v


# ---------------------------------------------------------------- the cache (no torch)


def cache_file() -> Path:
    """Beside peaks.json."""
    return paths.cache_dir() / CACHE_NAME


def load() -> list[Calibration]:
    """Every stored calibration; an unreadable file counts as none, a bad record costs only itself."""
    try:
        raw = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if (
        not isinstance(raw, dict)
        or raw.get("version") != CACHE_VERSION
        or not isinstance(raw.get("calibrations"), list)
    ):
        return []
    found = []
    for d in raw["calibrations"]:
        try:
            found.append(Calibration.from_dict(d))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return found


# A calibration measured while other programs took this much more of the cores than during the one
# already kept (same device, threads, torch and method) does not replace it: a busy machine reads
# its roofs low (three runs within an hour on a 2-core VM stored float32 peaks of 0.08 to 0.156
# TFLOP/s), and MFU and the roofline would inherit the low one.
BUSIER_BY = 0.15


def quieter_kept(calibration: Calibration) -> Calibration | None:
    """The stored record of the same device that `calibration` must not replace, or None: one as
    current (threads, torch, method) that measured while the machine was clearly quieter."""
    old = find(calibration.device)
    if old is None or old.others_share is None or calibration.others_share is None:
        return None
    if (old.threads, old.torch, old.method) != (calibration.threads, calibration.torch, calibration.method):
        return None
    return old if calibration.others_share > old.others_share + BUSIER_BY else None


def store(calibration: Calibration) -> None:
    """Keep `calibration` in place of the record of the same device (written whole, then renamed)."""
    kept = [c for c in load() if c.device != calibration.device] + [calibration]
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".calibration-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": CACHE_VERSION, "calibrations": [c.as_dict() for c in kept]}, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def find(device: str) -> Calibration | None:
    """The record of this device identity, stale or not."""
    return next((c for c in load() if c.device == device), None)


def latest() -> Calibration | None:
    """The most recent record of any device (what doctor names when this device has none)."""
    return max(load(), key=lambda c: c.measured_at, default=None)


# ---------------------------------------------------------------- measuring (torch)


def dtypes(dev: Device) -> list[str]:
    """What is calibrated: float32 everywhere; on CUDA also TF32 (compute capability 8.0 on: below
    it TF32 does not exist and a "high" precision matmul is plain float32, whose speed would be
    stored as TF32's), bfloat16 (Ampere on) and float16; on MPS float16 (and bfloat16 where
    native); on a CPU bfloat16 only where it is native (an emulated one is slow to sweep and says
    nothing about training speed)."""
    if dev.kind == "cuda":
        tf32 = dev.capability is not None and dev.capability >= (8, 0)
        return ["float32"] + (["tfloat32"] if tf32 else []) + (["bfloat16"] if dev.bf16 else []) + ["float16"]
    if dev.kind == "mps":
        return ["float32", "float16"] + (["bfloat16"] if dev.bf16 else [])
    return ["float32"] + (["bfloat16"] if dev.bf16 else [])


def driver_version() -> str | None:
    """The NVIDIA driver's version (Linux: the kernel module's), else the CUDA driver API's; None
    where neither can be read. Needs no torch."""
    with contextlib.suppress(OSError):
        text = Path("/proc/driver/nvidia/version").read_text(encoding="utf-8", errors="replace")
        found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]+)", text)
        if found:
            return found.group(1)
    import ctypes

    for lib in ("libcuda.so.1", "nvcuda.dll"):
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        version = ctypes.c_int()
        with contextlib.suppress(AttributeError, OSError):
            if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value > 0:
                return f"CUDA API {version.value // 1000}.{version.value % 1000 // 10}"
    return None


def current(dev: Device) -> dict[str, Any]:
    """What a record is checked against now: identity, threads, torch, driver."""
    import torch

    name, threads = matmul_peak.identity(dev)
    return {
        "device": name,
        "threads": threads,
        "torch": torch.__version__,
        "driver": driver_version() if dev.kind == "cuda" else None,
    }


def bandwidth_defaults() -> tuple[int, int]:
    """(MiB per array, timings per operation) of the memory roof: the bandwidth experiment's
    defaults, arrays larger than any cache."""
    from tutor.experiments.specs.bandwidth import BandwidthParams

    fields = BandwidthParams.model_fields
    return int(fields["megabytes"].default), int(fields["repeats"].default)


def measure(
    dev: Device,
    on_progress: Callable[[str, float, Any], None] | None = None,
    megabytes: int | None = None,
    repeats: int | None = None,
) -> Calibration:
    """Measure both roofs of `dev` now, store the record (and each peak in peaks.json).
    `on_progress(what, seconds, result)` is called after each measurement: a Peak, then the
    bandwidth. The bandwidth defaults are the bandwidth experiment's own."""
    steps = measuring(dev, megabytes, repeats)
    while True:
        try:
            what, seconds, result, _ = next(steps)
        except StopIteration as done:
            return done.value
        if on_progress:
            on_progress(what, seconds, result)


def planned(dev: Device) -> list[str]:
    """What `measuring` measures, in order: each native dtype's peak, then the bandwidth."""
    return [f"{dtype} matmul peak" for dtype in dtypes(dev)] + ["memory bandwidth"]


def measuring(
    dev: Device, megabytes: int | None = None, repeats: int | None = None, sweeps: int = 1
) -> Generator[tuple[str, float, Any, list[float]], None, Calibration]:
    """`measure` as a generator: yields (what, seconds, result, every sweep's TFLOP/s) after each
    measurement, so a run step can show each as it lands; returns the stored Calibration.
    `sweeps`: each dtype's sweep is run that many times and the best kept (the others say how far
    the peak moves on this machine; the bandwidth's list is empty)."""
    import torch

    from tutor.experiments.bandwidth import MemoryTraffic
    from tutor.measurement import noise
    from tutor.threads import usable_cores

    started = time.perf_counter()
    before = noise.read(dev)
    default_megabytes, default_repeats = bandwidth_defaults()
    megabytes = default_megabytes if megabytes is None else megabytes
    repeats = default_repeats if repeats is None else repeats
    now_is = current(dev)
    peaks, notes = [], []
    for dtype in dtypes(dev):
        t0 = time.perf_counter()
        try:
            found = [matmul_peak.sweep(dev, dtype) for _ in range(max(1, sweeps))]
        except RuntimeError as e:  # a dtype this build cannot multiply here: said, the rest measured
            notes.append(f"{dtype}: not measured ({str(e).splitlines()[0] if str(e) else type(e).__name__})")
            if dtype == ROOF_DTYPE:
                raise
            continue
        p = max(found, key=lambda peak: peak.tflops)
        peaks.append(p)
        yield f"{dtype} matmul peak", time.perf_counter() - t0, p, [peak.tflops for peak in found]
    t0 = time.perf_counter()
    traffic = MemoryTraffic(dev, megabytes, repeats).run()
    assert traffic.device_copy_gbps is not None and traffic.elementwise_gbps is not None
    bandwidth = Bandwidth(
        gbps=traffic.bandwidth_gbps,
        device_copy_gbps=traffic.device_copy_gbps,
        elementwise_gbps=traffic.elementwise_gbps,
        megabytes=megabytes,
        repeats=repeats,
        copy_gbps=traffic.copy_gbps,
        pinned_copy_gbps=traffic.pinned_gbps,
    )
    yield "memory bandwidth", time.perf_counter() - t0, bandwidth, []
    now = time.time()
    after = noise.read(dev)
    calibration = Calibration(
        device=now_is["device"],
        kind=dev.kind,
        name=dev.name,
        threads=now_is["threads"],
        torch=torch.__version__,
        cuda=torch.version.cuda if dev.kind == "cuda" else None,
        driver=now_is["driver"],
        measured_on=datetime.date.fromtimestamp(now).isoformat(),
        measured_at=now,
        seconds=time.perf_counter() - started,
        peaks=tuple(peaks),
        bandwidth=bandwidth,
        notes=tuple(notes),
        others_share=noise.others_cpu_share(before, after, usable_cores()),
        others_said=noise.why(before, after),
    )
    quieter = quieter_kept(calibration)
    if quieter is not None:
        # Said, not stored: the note belongs to this measurement, the record stays the quieter one's.
        return replace(quieter, notes=(*quieter.notes, kept_words(calibration, quieter)))
    for p in peaks:
        matmul_peak.store(p)
    store(calibration)
    return calibration


def kept_words(busy: Calibration, quieter: Calibration) -> str:
    """Why a calibration just measured was not kept, in figures."""
    roof = busy.peak(ROOF_DTYPE)
    assert roof is not None  # `measuring` raises when it cannot measure the ROOF_DTYPE peak
    return (
        f"Not kept: other programs took {busy.others_share:.0%} of the cores while this calibration measured "
        f"(float32 peak {roof.tflops:.3g} TFLOP/s, bandwidth {busy.bandwidth.gbps:.3g} GB/s), "
        f"against {quieter.others_share:.0%} during the one of {quieter.measured_on}, which stays: a busy machine "
        f"reads its roofs low. Run `{COMMAND}` again when it is quieter."
    )


def report(dev: Device) -> dict[str, Any]:
    """What `gpututor doctor` says about the calibration of `dev` (reads the cache; measures nothing)."""
    now_is = current(dev)
    found = find(now_is["device"])
    other = None if found is not None else latest()
    out: dict[str, Any] = {
        "device": now_is["device"],
        "cache_file": str(cache_file()),
        "command": COMMAND,
        "roofline_command": ROOFLINE_COMMAND,
        "calibration": None,
        "stale": None,
        "other_device": None,
    }
    if found is not None:
        out["calibration"] = summary(found)
        out["stale"] = found.stale_because(now_is["device"], now_is["threads"], now_is["torch"], now_is["driver"])
    elif other is not None:  # calibrated, but on another device: that is what is stale
        out["other_device"] = {"device": other.device, "measured_on": other.measured_on}
        out["stale"] = other.stale_because(now_is["device"], now_is["threads"], now_is["torch"], now_is["driver"])
    return out


def summary(c: Calibration) -> dict[str, Any]:
    """The record, with each dtype's ridge point and the sweep in words, for doctor and --json."""
    d = c.as_dict()
    d["with_text"] = c.with_text()
    d["ridge_point"] = c.ridge()
    for p, entry in zip(c.peaks, d["peaks"], strict=True):
        entry["ridge_point"] = c.ridge(p.dtype)
        entry["how_text"] = p.how_text()
    return d


# ---------------------------------------------------------------- the learner's runs on it (no torch)


@dataclass(frozen=True)
class Source:
    """Where a stored run's metrics hold an achieved FLOP/s (and, for a point, its FLOP per byte)."""

    experiment: str
    label: str
    tflops: str  # the metric of the achieved TFLOP/s
    intensity: str | None  # the metric of its FLOP/B; None: the experiment reports none, so no point
    mark: str = "*"
    dtype: str | None = None  # the dtype its matmuls ran in, where the experiment fixes it
    dtype_metric: str | None = None  # or the metric that reports it


# Every experiment whose metrics hold an achieved FLOP/s (tests/experiments/test_calibrate.py
# checks each name against the specs, and that no spec's achieved FLOP/s is missing here).
SOURCES = (
    Source("bandwidth", "c = a * b", "elementwise_tflops", "elementwise_intensity", "e", dtype="float32"),
    Source("bandwidth", "matmul", "matmul_tflops", "matmul_intensity", "m", dtype="float32"),
    Source("sync-timing", "matmuls timed with synchronize", "tflops", None, dtype="float32"),
    Source("pipeline-breakdown", "a training step's model FLOPs", "achieved_tflops", None, dtype_metric="dtype"),
    Source("profile-step", "a training step's model FLOPs", "achieved_tflops", None),
)
EXPERIMENTS = tuple(dict.fromkeys(s.experiment for s in SOURCES))


def _run_device(run: Any) -> tuple[str, str]:
    """(kind, name) of the device a stored run used: `gpututor run` stores Device.as_dict(), the
    TUI its Started event ({"device": "cuda:0", "name": ...})."""
    d = run.device if isinstance(run.device, dict) else {}
    kind = str(d.get("kind") or str(d.get("device") or d.get("torch_device") or "").split(":")[0])
    return kind, str(d.get("name") or "")


def _number(value: Any) -> float | None:
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        else None
    )


CACHE_SAFE_MIB = 64  # as bandwidth.py: smaller arrays may sit in a cache and measure it


def _above(run: Any, above: bool) -> str | None:
    """Why a run beat its calibrated roof, in words (None when it did not)."""
    if not above:
        return None
    megabytes = run.params.get("megabytes") if run.experiment == "bandwidth" and isinstance(run.params, dict) else None
    if isinstance(megabytes, int) and megabytes < CACHE_SAFE_MIB:
        return (
            f"above the roof: its arrays of {megabytes:,} MiB may sit in a cache, which is faster than "
            "the memory the calibration measured"
        )
    return (
        "above the roof: this run went faster than the calibration measured (a calibration taken while "
        f"the machine was busy reads low: `{COMMAND}` again when it is quiet)"
    )


def _run_words(experiment: str, at: float) -> str:
    """'your bandwidth run of 2026-11-28 01:53': which run, as the learner knows it (not its row id)."""
    return f"your {experiment} run of {time.strftime('%Y-%m-%d %H:%M', time.localtime(at))}"


def place_runs(calibration: Calibration, runs: Iterable[Any]) -> dict[str, Any]:
    """The stored runs (RunRecord-like: id, experiment, params, device, metrics, at) on this
    calibration's roofline: `points` (an achieved FLOP/s and an intensity, both from the run's
    metrics, on this device), `listed` (a FLOP/s but no intensity: beside the chart), `elsewhere`
    (a run on another device), `older` (measured by an older method: never beside new ones). Each run's share of its roof is a formula of those numbers."""
    roof = calibration.peak(ROOF_DTYPE)
    assert roof is not None
    bandwidth_tflops_per_intensity = calibration.bandwidth.gbps * 1e9 / 1e12
    ridge = calibration.ridge()
    points: list[dict[str, Any]] = []
    listed: list[dict[str, Any]] = []
    elsewhere: list[dict[str, Any]] = []
    older: list[dict[str, Any]] = []
    for run in runs:
        for source in (s for s in SOURCES if s.experiment == run.experiment):
            tflops = _number(run.metrics.get(source.tflops))
            if tflops is None:
                continue
            kind, name = _run_device(run)
            label = source.label
            if source.experiment == "bandwidth" and source.mark == "m" and isinstance(run.params, dict):
                n = run.params.get("matmul_size")
                label = f"matmul {n}" if n else label
            base = {
                "experiment": run.experiment,
                "run_id": run.id,
                "label": label,
                "tflops": tflops,
                "at": run.at,
                "on": datetime.date.fromtimestamp(run.at).isoformat(),
                "run": _run_words(run.experiment, run.at),
            }
            if (kind, name) != (calibration.kind, calibration.name):
                elsewhere.append({**base, "device": f"{kind} {name}".strip()})
                continue
            if not is_current(run.device if isinstance(run.device, dict) else None):
                older.append(base)
                continue
            dtype = source.dtype or (
                str(run.metrics.get(source.dtype_metric))
                if source.dtype_metric and run.metrics.get(source.dtype_metric)
                else None
            )
            if source.experiment == "profile-step" and kind != "cuda":
                dtype = "float32"  # off CUDA its training is always full float32 (on CUDA: TF32 or not, unstored)
            intensity = _number(run.metrics.get(source.intensity)) if source.intensity else None
            if intensity is not None and dtype == ROOF_DTYPE:
                roof_there = min(roof.tflops, intensity * bandwidth_tflops_per_intensity)
                points.append(
                    {
                        **base,
                        "mark": source.mark,
                        "dtype": dtype,
                        "intensity": intensity,
                        "roof_tflops": roof_there,
                        "of_roof": tflops / roof_there,
                        "bound": "memory" if ridge is not None and intensity < ridge else "compute",
                        "above": _above(run, tflops > roof_there),
                    }
                )
                continue
            peak = calibration.peak(dtype) if dtype else None
            listed.append(
                {
                    **base,
                    "dtype": dtype,
                    "peak_tflops": peak.tflops if peak else None,
                    "of_peak": tflops / peak.tflops if peak else None,
                    "why": "it reports no arithmetic intensity"
                    if intensity is None
                    else f"its roof is {dtype}'s, the chart's is {ROOF_DTYPE}'s",
                    "above": _above(run, peak is not None and tflops > peak.tflops),
                }
            )
    return {"points": points, "listed": listed, "elsewhere": elsewhere, "older": older}


def chart_points(points: list[dict[str, Any]]) -> list[Any]:
    """The placed runs as tutor/charts.py Points (one run per experiment: its marks differ)."""
    from tutor.charts import Point

    return [Point(p["mark"], p["label"], p["intensity"], p["tflops"]) for p in points]


def find_for(kind: str, name: str) -> Calibration | None:
    """The record of the device `kind` `name` without torch (the tutor's screens never import it): its
    identity is "kind name", on CUDA followed by " (N SMs)"; the newest if a MIG slice and its
    chip both match."""
    exact = f"{kind} {name}"
    found = [c for c in load() if c.device == exact or c.device.startswith(exact + " (")]
    return max(found, key=lambda c: c.measured_at, default=None)


ROOFLINE_HEADING = "your runs on this machine's roofline"


def roofline_lines(
    record: Calibration, placed: dict[str, Any], stale: str | None, ran: set[str], heading: bool = True
) -> list[tuple[str, str]]:
    """What `gpututor roofline` says, for the terminal and the tutor's roofline screen alike:
    (line, style) pairs, style "" plain, "bold", "yellow" or "dim", and "figure" for the chart
    (shown as it is, unwrapped). `heading` False: the screen's own title says it already."""
    from tutor.charts import roofline
    from tutor.present import flops_text, metric, number

    roof = record.peak(ROOF_DTYPE)
    assert roof is not None

    if heading:
        first = (
            f"{ROOFLINE_HEADING}: {record.device}, calibrated {record.measured_on} with {record.with_text()} "
            f"({ROOF_DTYPE} compute roof)"
        )
    else:
        first = (
            f"Measured {record.measured_on} on {record.device}, with {record.with_text()} ({ROOF_DTYPE} compute roof)"
        )
    lines: list[tuple[str, str]] = [(first, "bold")]
    if stale:
        lines.append((f"stale: {stale}; `{COMMAND}` (or gpu-lab's calibrate step) measures it again", "yellow"))
    lines.append((roofline(roof.tflops, record.bandwidth.gbps, chart_points(placed["points"])), "figure"))
    for p in placed["points"]:
        if p["bound"] == "memory":
            roof_is = f"{number(record.bandwidth.gbps, 'GB/s')} of memory bandwidth x {number(p['intensity'])} FLOP/B"
        else:
            roof_is = f"the calibrated {ROOF_DTYPE} matmul peak"
        lines.append(
            (
                f"  {p['mark']} {p['label']}, {p['run']}: {flops_text(p['tflops'])} achieved at "
                f"{number(p['intensity'])} FLOP/B; the roof there is {flops_text(p['roof_tflops'])} "
                f"({roof_is}), so it reached {metric(p['of_roof'], '%')} of it: {p['bound']}-bound",
                "",
            )
        )
        if p["above"]:
            lines.append((f"    {p['above']}", "yellow"))
    if not placed["points"]:
        lines.append(
            (
                "  no point yet: `gpututor run bandwidth` (or gpu-lab's roofline step) measures operations "
                "with a known FLOP per byte and puts them here",
                "",
            )
        )
    if placed["listed"]:
        lines.append(("beside the chart (a FLOP/s, but no FLOP per byte to place it by):", "bold"))
        for p in placed["listed"]:
            dtype = p["dtype"] or "dtype not recorded"
            share = (
                f", {metric(p['of_peak'], '%')} of the calibrated {p['dtype']} peak ({flops_text(p['peak_tflops'])})"
                if p["of_peak"] is not None
                else ""
            )
            lines.append(
                (f"  {p['run']}: {p['label']}, {flops_text(p['tflops'])} achieved ({dtype}){share}; {p['why']}", "")
            )
            if p["above"]:
                lines.append((f"    {p['above']}", "yellow"))
    if placed["elsewhere"]:
        lines.append(("not on this roofline (your latest run of it was on another device):", "bold"))
        for p in placed["elsewhere"]:
            lines.append((f"  {p['run']}: {p['label']} on {p['device'] or 'an unrecorded device'}", ""))
    if placed.get("older"):
        lines.append((f"not on this roofline (measured the older way, {CHANGED}: run it again):", "bold"))
        for p in placed["older"]:
            lines.append((f"  {p['run']}: {p['label']}", ""))
    missing = [name for name in EXPERIMENTS if name not in ran]
    if missing:
        from tutor.experiments import REGISTRY  # each by its title, and the command that runs it

        named = [f"{REGISTRY[name].title if name in REGISTRY else name} (`gpututor run {name}`)" for name in missing]
        lines.append((f"not run yet, each reports an achieved FLOP/s: {'; '.join(named)}", "dim"))
    return lines
