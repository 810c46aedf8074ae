"""A device's realistic matmul peak: measured here with a short sweep, cached per machine.

MFU divides a run's FLOP/s by a peak. One n x n matmul timed a few times gave a different
figure on every run of a shared CPU (0.081 against 0.138 TFLOP/s), and other sizes went faster
still, so a learner's MFU could pass 100%. A realistic peak is a maximum: a sweep of sizes,
each timed by PyTorch's own timer (torch.utils.benchmark: warmed up, blocks of back-to-back
matmuls, the device synchronised at every clock read), the best block counts, the best size wins. Load from other processes only ever slows a matmul down, so the
best seen is the nearest to what the device can do.

The sweep is kept in the cache dir (peaks.json), one entry per device, dtype and CPU thread
count (a CPU's peak scales with the threads training uses, so it is measured with the same
count: the process's own intra-op pool, set by tutor/threads.py). An entry is reused while it
was measured with this torch version and within MAX_AGE_DAYS (a driver or BIOS change keeps
the torch version); otherwise it is measured again. `gpututor doctor --peak` re-measures. A CPU
sweep during which other programs took cores its threads needed is used for that run but not
kept: its lower peak would make every later MFU read high.

Reading the cache needs no torch; measuring imports it.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tutor import paths

if TYPE_CHECKING:
    from tutor.experiments.devices import Device

CACHE_NAME = "peaks.json"
CACHE_VERSION = 1
MAX_AGE_DAYS = 30
# Set: every sweep is kept whatever the load (a test suite, where the load is the suite itself).
IGNORE_LOAD_ENV = "GPUTUTOR_PEAKS_IGNORE_LOAD"
# Square sizes swept per device kind: a CPU's best is often mid-size (cache-resident blocks),
# a GPU's at the large end (enough tiles to fill every SM).
SIZES = {"cpu": (256, 512, 1024, 2048), "mps": (512, 1024, 2048, 4096), "cuda": (1024, 2048, 4096, 8192)}
BUDGET_S = {"cpu": 2.0, "mps": 3.0, "cuda": 3.0}  # the sweep stops starting new repeats and sizes past this
REPEATS = 5  # timed blocks per size, about; the best counts
SWEEP = "matmul sweep"
RAISED = "a run's achieved FLOP/s"  # how, when a training run beat the sweep
MEASURE_COMMAND = "gpututor doctor --peak"
CUT_TIME = "the time limit"
CUT_MEMORY = "the GPU memory free to this run"


@dataclass(frozen=True)
class Peak:
    """One measured peak and what it holds for."""

    tflops: float
    dtype: str  # float32, tfloat32, bfloat16, float16
    device: str  # the device's identity: kind and name ("cpu AMD EPYC", "cuda NVIDIA H100 ... (132 SMs)")
    threads: int | None  # the CPU's intra-op threads (None on a GPU: the host's threads do not set its peak)
    torch: str
    measured_on: str  # ISO date, local time
    measured_at: float  # epoch seconds, for the age
    how: str = SWEEP
    best_size: int | None = None  # the sweep's fastest n (None when raised by a run)
    sizes: tuple[int, ...] = field(default_factory=tuple)  # the sizes the sweep reached
    sizes_cut: tuple[int, ...] = field(default_factory=tuple)  # sizes left out, by `cut_by`
    cut_by: str = CUT_TIME  # what left them out: the time limit, or the GPU memory free to the run
    # The median block at the best size: the peak is the best block, and a sweep at another moment
    # lands between the two, so a figure divided by the peak (MFU) carries that spread too. None:
    # not known (a peak raised by a run, or cached before it was kept).
    typical_tflops: float | None = None
    # Cores other programs kept busy during the sweep, where that many that it was not kept (measure())
    others_busy_cores: float | None = None

    def identity(self) -> tuple[str, str, int | None]:
        return (self.device, self.dtype, self.threads)

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["sizes"], d["sizes_cut"] = list(self.sizes), list(self.sizes_cut)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Peak:
        tflops = float(d["tflops"])
        if not math.isfinite(tflops) or tflops <= 0:
            raise ValueError(f"not a peak: {tflops}")
        threads = d.get("threads")
        return cls(
            tflops=tflops,
            dtype=str(d["dtype"]),
            device=str(d["device"]),
            threads=int(threads) if threads is not None else None,
            torch=str(d["torch"]),
            measured_on=str(d["measured_on"]),
            measured_at=float(d["measured_at"]),
            how=str(d.get("how", SWEEP)),
            best_size=int(d["best_size"]) if d.get("best_size") is not None else None,
            sizes=tuple(int(n) for n in d.get("sizes", ())),
            sizes_cut=tuple(int(n) for n in d.get("sizes_cut", ())),
            cut_by=str(d.get("cut_by", CUT_TIME)),
            typical_tflops=_typical(d.get("typical_tflops"), tflops),
        )

    @property
    def spread(self) -> tuple[float, float]:
        """(typical, best) TFLOP/s: where a sweep at another moment lands; (best, best) when unknown."""
        return (self.typical_tflops or self.tflops, self.tflops)

    def spread_text(self) -> str:
        """', its typical block 0.09 TFLOP/s: MFU's interval reaches that far', or '' where unknown."""
        if self.typical_tflops is None or self.typical_tflops >= self.tflops:
            return ""
        return (
            f", its typical block {self.typical_tflops:.3g} TFLOP/s: an MFU's interval reaches that far, "
            "since a sweep at another moment lands between the two"
        )

    def age_days(self, now: float | None = None) -> float:
        return ((time.time() if now is None else now) - self.measured_at) / 86400

    def stale_because(self, torch_version: str, now: float | None = None) -> str | None:
        """Why this entry is not reused now (None: it is)."""
        if self.torch != torch_version:
            return f"measured with torch {self.torch}, this is {torch_version}"
        if self.age_days(now) > MAX_AGE_DAYS:
            return f"measured {self.measured_on}, more than {MAX_AGE_DAYS} days ago"
        if self.age_days(now) < -1:  # the clock went back: a date we cannot trust
            return f"dated {self.measured_on}, in the future"
        return None

    def threads_text(self) -> str:
        return "" if self.threads is None else f" with {self.threads} thread{'s' if self.threads != 1 else ''}"

    def how_text(self) -> str:
        """How it was measured, in words: "a sweep of 256..2048 matmuls, best at 512"."""
        if self.how != SWEEP:
            return f"raised to {self.how}, above what its sweep reached"
        sizes = (
            f"{self.sizes[0]}..{self.sizes[-1]}" if len(self.sizes) > 1 else str(self.sizes[0]) if self.sizes else "?"
        )
        cut = f"; {', '.join(map(str, self.sizes_cut))} left out by {self.cut_by}" if self.sizes_cut else ""
        loaded = (
            f"; measured while other programs kept {self.others_busy_cores:.1f} cores busy, so not kept"
            " (it reads low, and an MFU against it high)"
            if self.others_busy_cores is not None
            else ""
        )
        return f"best of a sweep of {sizes} square matmuls, at {self.best_size}{cut}{loaded}"


def _typical(value: Any, best: float) -> float | None:
    """A stored typical figure, if it is one: positive, finite, no more than the best."""
    try:
        typical = float(value)
    except (TypeError, ValueError):
        return None
    return typical if math.isfinite(typical) and 0 < typical <= best else None


# ---------------------------------------------------------------- the cache (no torch)


def cache_file() -> Path:
    return paths.cache_dir() / CACHE_NAME


def load() -> list[Peak]:
    """Every cached peak; an unreadable file (hand-edited, another version) counts as none."""
    try:
        raw = json.loads(cache_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(raw, dict) or raw.get("version") != CACHE_VERSION or not isinstance(raw.get("peaks"), list):
        return []
    found = []
    for d in raw["peaks"]:
        try:
            found.append(Peak.from_dict(d))
        except (KeyError, TypeError, ValueError):
            continue  # one bad entry costs only itself
    return found


def store(peak: Peak) -> None:
    """Keep `peak` in place of any entry for the same device, dtype and threads. Written to a
    temporary file and renamed, so a reader never sees half a file; a lost race between two
    writers loses one entry, which is measured again later."""
    kept = [p for p in load() if p.identity() != peak.identity()] + [peak]
    path = cache_file()
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".peaks-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": CACHE_VERSION, "peaks": [p.as_dict() for p in kept]}, f, indent=1)
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the peak is measured again next time, nothing breaks
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def find(device: str, dtype: str, threads: int | None) -> Peak | None:
    """The cached entry for this device, dtype and thread count, fresh or not."""
    return next((p for p in load() if p.identity() == (device, dtype, threads)), None)


# ---------------------------------------------------------------- measuring (torch)


def identity(dev: Device) -> tuple[str, int | None]:
    """(device identity, threads) as the cache keys them, for the device a run uses."""
    import torch

    name = f"{dev.kind} {dev.name}"
    if dev.kind == "cuda":  # a MIG slice keeps its chip's name but has only some of its SMs
        name += f" ({torch.cuda.get_device_properties(dev.index or 0).multi_processor_count} SMs)"
    return name, torch.get_num_threads() if dev.kind == "cpu" else None


def _torch_dtype(dtype: str) -> Any:
    import torch

    return {"float32": torch.float32, "tfloat32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        dtype
    ]


@contextlib.contextmanager
def _matmul_precision(dtype: str, kind: str) -> Any:
    """On CUDA, float32 and tfloat32 differ only by this switch: measure the one asked for."""
    import torch

    before = torch.get_float32_matmul_precision()
    want = "highest" if dtype == "float32" else "high" if dtype == "tfloat32" else before
    if kind == "cuda" and want != before:
        torch.set_float32_matmul_precision(want)
    try:
        yield
    finally:
        if torch.get_float32_matmul_precision() != before:
            torch.set_float32_matmul_precision(before)


def _room(dev: Device) -> int | None:
    """Bytes a sweep may still take on a GPU (free on the card, within the run's cap:
    gpu_share.py), the sweep's own freed tensors given back first; None off a GPU."""
    if dev.kind not in ("cuda", "mps"):
        return None
    from tutor.experiments import gpu_share

    try:
        _empty_cache(dev.kind)
        return gpu_share.available(dev.kind, dev.index)
    except Exception:  # noqa: BLE001 - unreadable: the sweep goes on unchecked, its sizes kept
        return None


def _empty_cache(kind: str) -> None:
    import torch

    if kind == "cuda":
        torch.cuda.empty_cache()
    elif kind == "mps":
        torch.mps.empty_cache()


def sweep_words(kind: str) -> str:
    """How a sweep measures, for a run's note: 'square matmuls of 256 to 2048, ...'."""
    sizes = SIZES.get(kind, SIZES["cpu"])
    return (
        f"square matmuls of {sizes[0]} to {sizes[-1]}, each timed by PyTorch's own timer "
        f"(torch.utils.benchmark), the best of about {REPEATS} blocks"
    )


def _tflops_at(n: int, device: str, tdtype: Any, repeats: int, deadline: float) -> tuple[float, float]:
    """One size timed by PyTorch's timer (timing.timed_blocks: warmed up, about `repeats` blocks of
    back-to-back matmuls, no later than `deadline` but one block at least): (the fastest block's
    TFLOP/s, which counts, and the median block's)."""
    import torch

    from tutor.measurement.timing import timed_blocks

    a = torch.randn(n, n, device=device, dtype=tdtype)
    b = torch.randn(n, n, device=device, dtype=tdtype)
    out = torch.empty(n, n, device=device, dtype=tdtype)
    blocks = timed_blocks(lambda: torch.mm(a, b, out=out), device, repeats, max(0.0, deadline - time.perf_counter()))
    flops = 2 * n**3 / 1e12
    return flops / blocks.best, flops / statistics.median(blocks.times)


def sweep(
    dev: Device, dtype: str, sizes: tuple[int, ...] | None = None, budget_s: float | None = None, repeats: int = REPEATS
) -> Peak:
    """Measure the peak: each size timed by PyTorch's own timer (torch.utils.benchmark, with this
    process's threads), about `repeats` blocks of back-to-back matmuls, the fastest block counts;
    the best size is the peak. Past `budget_s`
    no new repeat or size starts (the first size is always measured). On a GPU, once a size is
    measured, a size whose three matrices need more than half the memory this run may still take
    is not started, and one that runs out of memory ends the sweep: the sizes left out are said,
    the peak is the best of those measured (a shared GPU, a capped run, a small card)."""
    import torch

    device = dev.torch_device
    sizes = sizes or SIZES.get(dev.kind, SIZES["cpu"])
    deadline = time.perf_counter() + (BUDGET_S.get(dev.kind, 2.0) if budget_s is None else budget_s)
    tdtype = _torch_dtype(dtype)
    found: dict[int, tuple[float, float]] = {}  # size -> (best, typical) TFLOP/s
    cut_by = CUT_TIME
    with _matmul_precision(dtype, dev.kind), torch.no_grad():
        for n in sizes:
            if found and time.perf_counter() > deadline:
                break
            room = _room(dev) if found else None
            if room is not None and 3 * n * n * tdtype.itemsize > room // 2:
                cut_by = CUT_MEMORY
                break
            try:
                found[n] = _tflops_at(n, device, tdtype, repeats, deadline)
            except torch.OutOfMemoryError:
                if not found:  # no size fits: there is no peak to keep
                    raise
                cut_by = CUT_MEMORY
            if cut_by == CUT_MEMORY:  # out of the handler: its traceback no longer holds the tensors
                _empty_cache(dev.kind)
                break
    name, threads = identity(dev)
    best_n = max(found, key=lambda n: found[n][0])
    now = time.time()
    return Peak(
        tflops=found[best_n][0],
        typical_tflops=found[best_n][1],
        dtype=dtype,
        device=name,
        threads=threads,
        torch=torch.__version__,
        measured_on=datetime.date.fromtimestamp(now).isoformat(),
        measured_at=now,
        how=SWEEP,
        best_size=best_n,
        sizes=tuple(found),
        sizes_cut=tuple(n for n in sizes if n not in found),
        cut_by=cut_by,
    )


def cached(dev: Device, dtype: str) -> Peak | None:
    """The cached peak for this device, dtype and thread count, if it may be reused now."""
    import torch

    name, threads = identity(dev)
    p = find(name, dtype, threads)
    return p if p is not None and p.stale_because(torch.__version__) is None else None


def measure(dev: Device, dtype: str, **kwargs: Any) -> Peak:
    """Sweep now and cache the result (in place of the entry it re-measures), unless other programs
    kept a CPU's cores busy meanwhile: that peak is returned, marked, and measured again next time."""
    from tutor import cpu_load

    before = cpu_load.read() if dev.kind == "cpu" else None
    p = sweep(dev, dtype, **kwargs)
    busy = crowded(before, p.threads) if before is not None else None
    if busy is not None:
        return replace(p, others_busy_cores=busy)
    store(p)
    return p


def not_kept_words(peak: Peak) -> str | None:
    """What a run that swept says where its sweep was crowded and not kept (None: it was kept)."""
    if peak.others_busy_cores is None:
        return None
    return (
        f"Other programs kept {peak.others_busy_cores:.1f} cores busy during that sweep, taking cores its "
        f"{peak.threads or 1} thread(s) needed: its peak reads low (and an MFU against it high), so it is "
        "used for this run only, not kept."
    )


def crowded(before: Any, threads: int | None) -> float | None:
    """The cores other programs kept busy since `before` (a cpu_load reading), where that left the
    sweep fewer free cores than its threads; None where it had them (or the load is unreadable)."""
    from tutor import cpu_load
    from tutor import threads as thread_policy

    if os.environ.get(IGNORE_LOAD_ENV):
        return None
    busy = cpu_load.others_busy_cores(before, cpu_load.read())
    spare = max(0, thread_policy.usable_cores() - (threads or 1))  # more threads than cores: none spare
    return busy if busy is not None and busy > spare + thread_policy.BUSY_CORE else None


def raise_to(peak: Peak, achieved_tflops: float, how: str = RAISED) -> Peak:
    """A run whose model FLOP/s beat the peak proves its matmuls ran at least that fast: the
    realistic peak is at least that, so it is raised to it (and cached, unless the peak it raises
    was a crowded sweep's: the run beat it under the same load) and said."""
    now = time.time()
    raised = replace(
        peak,
        tflops=achieved_tflops,
        how=how,
        measured_on=datetime.date.fromtimestamp(now).isoformat(),
        measured_at=now,
        best_size=None,
        typical_tflops=None,
    )
    if peak.others_busy_cores is None:
        store(raised)
    return raised


def doctor_dtypes(dev: Device) -> list[str]:
    """The dtypes `gpututor doctor` shows and `--peak` measures: what a pipeline-breakdown run
    uses here, plain and with amp=auto where the device runs it natively (an emulated bfloat16
    CPU is measured on first use instead: its sweep is slow and says little)."""
    from tutor.experiments.training import float32_matmul_dtype

    plain = float32_matmul_dtype(dev)  # TF32 where allowed, from Ampere on
    amp = "bfloat16" if dev.kind == "cpu" and dev.bf16 else "float16" if dev.kind in ("cuda", "mps") else None
    return [plain] + ([amp] if amp else [])


def report(dev: Device, remeasure: bool = False) -> dict[str, Any]:
    """What `gpututor doctor` says about the peaks of `dev`: every cached entry for it and these
    threads (with why one would not be reused), and the doctor dtypes not measured yet. With
    `remeasure`, those dtypes are swept first (a few seconds), in place of their entries."""
    import torch

    name, threads = identity(dev)
    dtypes = doctor_dtypes(dev)
    measured_now = [measure(dev, d).dtype for d in dtypes] if remeasure else []
    entries = [p for p in load() if p.device == name and p.threads == threads]
    entries.sort(key=lambda p: (p.dtype not in dtypes, dtypes.index(p.dtype) if p.dtype in dtypes else 0, p.dtype))
    current = {p.dtype for p in entries if p.stale_because(torch.__version__) is None}
    return {
        "device": name,
        "threads": threads,
        "torch": torch.__version__,
        "cache_file": str(cache_file()),
        "measured_now": measured_now,
        "entries": [
            {**p.as_dict(), "how_text": p.how_text(), "stale": p.stale_because(torch.__version__)} for p in entries
        ],
        "not_measured": [d for d in dtypes if d not in current],
        "measure_command": MEASURE_COMMAND,
    }
