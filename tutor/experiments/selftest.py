"""`gpututor doctor --selftest`: a short, real check of every device path the lessons use.

What a learner runs on a new GPU box before class (and what `pytest -m gpu` runs too). Each
check does the thing for real on the chosen device, in this process, and says one of: ok (what
it saw), failed (the reason) or n/a here (why it does not apply: no CUDA, say). Nothing is
simulated; a check that cannot run here is "n/a", never "ok".
"""

from __future__ import annotations

import gc
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

OK, FAILED, NOT_HERE = "ok", "failed", "n/a"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok, failed, n/a
    detail: str
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _first_sentence(text: str) -> str:
    return text.split(". ")[0]


class NotHere(Exception):
    """The check does not apply on this device (the message says why)."""


def _detect(dev: Any) -> str:
    from tutor.experiments import devices

    found = devices.available()
    return f"{len(found)} device(s): " + "; ".join(d.describe() for d in found) + f"; using {dev.torch_device}"


def _timing(dev: Any) -> str:
    import torch

    from tutor.measurement.timing import Stopwatch

    a = torch.randn(512, 512, device=dev.torch_device)
    (a @ a).sum().item()  # warm-up: context, kernels
    clock = Stopwatch(dev.torch_device)
    for _ in range(10):
        a = a @ a
        a = a / a.norm()
    seconds = clock.elapsed()  # synchronised: the matmuls are done when the clock stops
    if not seconds > 0:
        raise AssertionError(f"a synchronised timing read {seconds} s")
    return f"10 matmuls of 512 x 512, synchronised: {seconds * 1000:.2f} ms"


def _autocast_step(dev: Any) -> str:
    import torch
    from torch import nn

    from tutor.experiments.training import autocast_settings, make_scaler

    amp = autocast_settings("auto", dev)
    if not amp.enabled:
        raise NotHere(amp.note or f"autocast is not available on {dev.kind}")
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(dev.torch_device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = make_scaler(amp, dev)
    x = torch.randn(32, 64, device=dev.torch_device)
    y = torch.randint(0, 10, (32,), device=dev.torch_device)
    before = [p.detach().clone() for p in model.parameters()]
    with amp.autocast(dev.kind):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
    if out.dtype != amp.dtype:
        raise AssertionError(f"the forward under autocast gave {out.dtype}, not {amp.dtype}")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    moved = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    if not moved:
        raise AssertionError("the optimizer step changed no weight")
    scaled = f", GradScaler scale {scaler.get_scale():g}" if scaler.is_enabled() else " (no GradScaler needed)"
    return f"one training step under autocast({amp.dtype_name}){scaled}"


def _tf32(dev: Any) -> str:
    import torch

    if dev.kind != "cuda":
        raise NotHere("TF32 is a CUDA matmul mode")
    from tutor.experiments.training import full_float32_matmuls

    before = (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32)
    a = torch.randn(1024, 1024, device=dev.torch_device)
    with full_float32_matmuls() as was_on:
        exact = a @ a
    torch.set_float32_matmul_precision("high")
    try:
        fast = a @ a
    finally:
        torch.set_float32_matmul_precision(before[0])
        torch.backends.cuda.matmul.allow_tf32 = before[1]
    if (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32) != before:
        raise AssertionError("the TF32 setting was not restored")
    diff = (exact - fast).abs().max().item()
    cc = dev.capability or (0, 0)
    active = (
        f"TF32 active (differs from full float32 by {diff:.2g})"
        if diff > 0
        else ("no difference: TF32 does not run on this GPU" if cc < (8, 0) else "no difference seen")
    )
    return f"TF32 was {'on' if was_on else 'off'} here; {active}; setting restored"


def _peak_memory(dev: Any) -> str:
    import torch

    if dev.kind != "cuda":
        raise NotHere("peak memory is read from CUDA's allocator (elsewhere the lessons count tensors)")
    torch.cuda.reset_peak_memory_stats(dev.index or 0)
    base = torch.cuda.memory_allocated(dev.index or 0)
    x = torch.empty(64 << 20, dtype=torch.uint8, device=dev.torch_device)  # 64 MiB
    peak = torch.cuda.max_memory_allocated(dev.index or 0) - base
    del x
    if peak < 64 << 20:
        raise AssertionError(f"a 64 MiB tensor raised the peak by only {peak:,} bytes")
    return f"a 64 MiB tensor raised max_memory_allocated by {peak / 2**20:.1f} MiB"


def _caught_oom(dev: Any) -> str:
    import torch

    from tutor import errors

    if dev.kind == "cpu":
        return _caught_host_oom()
    if dev.kind == "mps":
        return _caught_mps_oom(dev)
    index = dev.index or 0
    total = torch.cuda.get_device_properties(index).total_memory
    get = getattr(torch.cuda, "get_per_process_memory_fraction", None)
    restore = get(index) if get else 1.0
    cap = 256 << 20
    # Reserved counts the allocator's cached free blocks too, and past the limit it frees them and
    # retries: with over 256 MiB cached (other GPU tests earlier in this process) 512 MiB would fit.
    gc.collect()
    torch.cuda.empty_cache()
    # What stays reserved holds live tensors, and free splits beside them that an allocation may
    # reuse: ask for more than all of it, plus twice the cap, so only a new block could hold it.
    held = torch.cuda.memory_reserved(index)
    asked = held + 2 * cap
    torch.cuda.set_per_process_memory_fraction((held + cap) / total, index)
    caught = None
    try:
        torch.empty(asked, dtype=torch.uint8, device=dev.torch_device)
    except torch.cuda.OutOfMemoryError as exc:
        caught = exc
    finally:
        torch.cuda.set_per_process_memory_fraction(restore, index)
        gc.collect()
        torch.cuda.empty_cache()
    if caught is None:
        raise AssertionError(f"{asked >> 20:,} MiB fitted under a 256 MiB cap: the cap did not hold")
    after = torch.empty(cap, dtype=torch.uint8, device=dev.torch_device)  # the same memory, once the cap is gone
    del after
    torch.cuda.empty_cache()
    return (
        f"{asked >> 20:,} MiB under a 256 MiB cap: caught: “{_first_sentence(errors.describe(caught))}”; "
        "memory usable again after"
    )


def _caught_host_oom() -> str:
    """The engine's own per-run cap ($GPUTUTOR_MEMORY_MB: RLIMIT_DATA above what is in use)."""
    import sys

    import torch

    from tutor import errors
    from tutor.experiments.engine import limit_memory

    if not sys.platform.startswith("linux"):
        raise NotHere("the per-run memory cap is Linux's RLIMIT_DATA")
    caught = None
    limit_memory(64)
    try:
        torch.ones(512 << 20, dtype=torch.uint8)
    except (RuntimeError, MemoryError) as exc:
        caught = exc
    finally:
        limit_memory(None)
    if caught is None or not errors.is_out_of_memory(caught):
        raise AssertionError(f"512 MiB under a 64 MiB cap: {'it fitted' if caught is None else caught}")
    torch.ones(64 << 20, dtype=torch.uint8)  # and memory is usable again once the cap is lifted
    return (
        f"512 MiB under a 64 MiB cap: caught: “{_first_sentence(errors.describe(caught))}”; memory usable again after"
    )


def _caught_mps_oom(dev: Any) -> str:
    import torch

    from tutor import errors
    from tutor.experiments import gpu_share

    limit = torch.mps.recommended_max_memory()
    restore = gpu_share.current_mps_fraction()  # the class's cap when under one
    # As on CUDA: the driver's count includes cached heaps, which the allocator frees past the limit.
    gc.collect()
    torch.mps.empty_cache()
    gpu_share.set_mps_fraction((torch.mps.driver_allocated_memory() + (256 << 20)) / limit)
    caught = None
    try:
        torch.ones(1 << 30, dtype=torch.uint8, device="mps")
        torch.mps.synchronize()
    except RuntimeError as exc:
        caught = exc
    finally:
        gpu_share.set_mps_fraction(restore)
        gc.collect()
        torch.mps.empty_cache()
    if caught is None:
        raise AssertionError("1 GiB fitted under a 256 MiB cap: the cap did not hold")
    if not errors.is_device_out_of_memory(caught):  # any other error is no proof the cap held
        raise AssertionError(f"1 GiB under a 256 MiB cap raised {type(caught).__name__}: {caught}")
    return f"1 GiB under a 256 MiB cap: caught: “{_first_sentence(errors.describe(caught))}”"


def _checkpoint(dev: Any) -> str:
    import torch
    from torch import nn

    model = nn.Linear(16, 4).to(dev.torch_device)
    with tempfile.TemporaryDirectory(prefix="gpututor-selftest-") as tmp:
        path = os.path.join(tmp, "checkpoint.pt")
        torch.save({"model_state_dict": model.state_dict()}, path)
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    restored = nn.Linear(16, 4)
    restored.load_state_dict(loaded["model_state_dict"])
    same = all(torch.equal(a.cpu(), b) for a, b in zip(model.parameters(), restored.parameters()))
    if not same:
        raise AssertionError("the weights loaded on the CPU differ from those saved")
    where = {str(t.device) for t in loaded["model_state_dict"].values()}
    return f"saved on {dev.torch_device}, loaded with map_location='cpu' (tensors on {', '.join(sorted(where))}): equal"


def _pinned_copy(dev: Any) -> str:
    import torch

    if dev.kind != "cuda":
        raise NotHere("pinned memory speeds up copies to a CUDA GPU")
    host = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    if not host.is_pinned():
        raise AssertionError("pin_memory() gave memory that is not page-locked")
    on_gpu = host.to(dev.torch_device, non_blocking=True)
    torch.cuda.synchronize(dev.index or 0)
    if not torch.equal(on_gpu.cpu(), host):
        raise AssertionError("the non_blocking copy arrived different")
    return "4 MiB page-locked, copied with non_blocking=True, synchronised: equal"


def _cache_released(dev: Any) -> str:
    import torch

    from tutor.experiments.engine import release_device_memory

    if dev.kind != "cuda":
        raise NotHere("the caching allocator's reserve is CUDA's")
    x = torch.empty(32 << 20, dtype=torch.uint8, device=dev.torch_device)
    del x
    held = torch.cuda.memory_reserved(dev.index or 0)
    release_device_memory()
    after = torch.cuda.memory_reserved(dev.index or 0)
    if after >= held and held > 0:
        raise AssertionError(f"the cache still holds {after / 2**20:.0f} MiB after a run")
    return f"after a run the engine hands back the cache: {held / 2**20:.0f} -> {after / 2**20:.0f} MiB reserved"


def _kernels_by_phase(dev: Any) -> str:
    """profile-step's split of GPU kernel time over a step's phases. Backward's kernels are
    launched from autograd's own device thread, outside the "backward" label's nesting: they
    must still be credited to it (by time), or the phase table says backward costs nothing."""
    if dev.kind != "cuda":
        raise NotHere("kernel times per phase come from CUDA's profiler (CUPTI)")
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, record_function

    from tutor.experiments.profile_step import device_time_by_phase

    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(dev.torch_device)
    x = torch.randn(256, 1024, device=dev.torch_device)
    y = torch.randint(0, 10, (256,), device=dev.torch_device)

    def step() -> None:
        with record_function("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with record_function("backward"):
            loss.backward()
        torch.cuda.synchronize(dev.torch_device)

    step()  # warm-up: kernels chosen, autograd's device thread started
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    us = device_time_by_phase(events)
    if not (us["forward"] > 0 and us["backward"] > 0):
        raise AssertionError(
            f"kernels credited: forward {us['forward']:.0f} µs, backward {us['backward']:.0f} µs "
            "(each phase launched some)"
        )
    return f"one step's kernels: forward {us['forward']:.0f} µs, backward {us['backward']:.0f} µs, each in its phase"


def _gpu_reading(dev: Any) -> str:
    """What a noisy run says of the GPU (noise.py, through NVML): other processes, utilisation, clocks."""
    if dev.kind != "cuda":
        raise NotHere("NVML reads NVIDIA GPUs")
    try:
        import pynvml  # noqa: F401
    except ImportError:
        raise NotHere("nvidia-ml-py is not installed: a noisy run cannot say what else used the GPU") from None
    from tutor.measurement import noise

    reading = noise.read(dev).gpu
    if reading is None:
        raise NotHere(
            "NVML did not answer here (no driver library in this container, or the card not "
            "found): a noisy run says what it saw of the CPU only"
        )
    seen = [
        f"{reading.others} other process(es) hold {reading.others_mib:,.0f} MiB"
        if reading.others is not None
        else "other processes not listed (a MIG slice not found, or no permission)"
    ]
    seen.append(
        f"utilisation {reading.utilization}%"
        if reading.utilization is not None
        else "no utilisation (a MIG slice has none)"
    )
    if reading.throttle is not None:
        seen.append("clocks " + (", ".join(reading.throttle) if reading.throttle else "not held down"))
    return "; ".join(seen)


def rank_main(ctx: Any) -> None:
    """Each rank of the torchrun check: one all-reduce of a tensor on its device."""
    import torch
    import torch.distributed as dist

    t = torch.full((1024,), float(ctx.rank + 1), device=ctx.device)
    dist.all_reduce(t)
    ctx.result(total=t[0].item(), device=str(ctx.device))


def _torchrun(dev: Any) -> str:
    from tutor.experiments import distributed

    plan = distributed.choose(dev, 2)
    job = distributed.drain(distributed.launch("selftest", plan, timeout_s=60))
    want = sum(range(1, plan.world_size + 1))
    got = {rank: r["total"] for rank, r in job["results"].items()}
    if any(total != want for total in got.values()):
        raise AssertionError(f"all-reduce gave {got}, not {want} on every rank")
    devices_used = ", ".join(sorted({r["device"] for r in job["results"].values()}))
    return (
        f"{plan.world_size} processes under torchrun, {plan.backend} on {devices_used}: all-reduce gave {want} "
        f"on every rank; joined in {job['ready_s']:.1f} s"
        + (f" ({plan.why.split('. ')[0]})" if dev.is_accelerator and not plan.on_gpus else "")
    )


def _inspect(dev: Any) -> str:
    """`gpututor inspect` on the shipped char_gpt.py, made small: the script in a process of its
    own on this device, its steps split and its FLOPs counted."""
    from pathlib import Path

    from tutor.inspect import findings, launch

    script = Path(launch.__file__).with_name("examples") / "char_gpt.py"
    args = ["--device", dev.torch_device, "--batch-size", "4", "--block-size", "16", "--n-layer", "1", "--n-embd", "32"]
    ran = launch.run_script(script, args, warmup=1, steps=4, split_steps=2, timeout=90, measure_roof=False)
    report = findings.build(script, args, ran, 90)
    if not report.ok:
        raise AssertionError(f"{script.name} was not watched through: {report.problem}")
    if not (report.flops_per_step and report.split and str(report.device).startswith(dev.kind)):
        raise AssertionError(f"watched on {report.device}, {report.flops_per_step} FLOPs, split {report.split}")
    how = "synchronised at each phase" if report.split_how.startswith("GPU") else "clocked at each phase"
    return (
        f"{script.name} on {report.device}: {report.steps_timed} steps {how}, "
        f"{report.flops_per_step / 1e6:.1f} MFLOP a step, {len(report.findings)} finding(s)"
    )


CHECKS: list[tuple[str, Callable[[Any], str]]] = [
    ("device detection", _detect),
    ("synchronised timing", _timing),
    ("autocast + GradScaler step", _autocast_step),
    ("TF32 flags", _tf32),
    ("peak memory", _peak_memory),
    ("out of memory, caught under a cap", _caught_oom),
    ("checkpoint: save on the device, load on the CPU", _checkpoint),
    ("pinned non-blocking copy", _pinned_copy),
    ("GPU cache released after a run", _cache_released),
    ("profiler: kernel time per phase", _kernels_by_phase),
    ("GPU activity read through NVML", _gpu_reading),
    ("torchrun: processes that all-reduce", _torchrun),
    ("gpututor inspect on a script", _inspect),
]


def run_checks(device: str | None = None) -> Iterator[Check]:
    """Each check in turn, on `device` (default: the best here); one Check each."""
    from tutor import errors
    from tutor.experiments import devices

    dev = devices.resolve(device)
    for name, check in CHECKS:
        t0 = time.perf_counter()
        try:
            status, detail = OK, check(dev)
        except NotHere as why:
            status, detail = NOT_HERE, str(why)
        except Exception as exc:  # noqa: BLE001 - a failed check is the result to report
            status, detail = FAILED, errors.describe(exc).removeprefix("The experiment failed with ")
        yield Check(name, status, detail, time.perf_counter() - t0)
