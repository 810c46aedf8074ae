"""`gpututor calibrate` (measure this machine's roofline once), `gpututor roofline` (the
learner's own runs on it), and what `doctor` says about the calibration.

The measuring and the placing are tutor/measurement/calibration.py; this file prints them.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from tutor.cli.context import FAILED, OK, Context, UsageError, eprint, print_json, rich_console
from tutor.present import flops_text, number


def _device(ctx: Context) -> Any:
    from tutor.experiments import devices

    try:
        return devices.resolve(ctx.device)
    except devices.DeviceError as e:
        raise UsageError(str(e)) from None


def cmd_calibrate(args: argparse.Namespace, ctx: Context) -> int:
    from rich.markup import escape

    from tutor.experiments import gpu_share
    from tutor.measurement import calibration
    from tutor.measurement import peak as matmul_peak

    dev = _device(ctx)
    c = None if args.json else rich_console()
    if c is not None:
        c.print(
            f"[bold]calibrating[/] {escape(dev.describe())}: the matmul peak of "
            f"{', '.join(calibration.dtypes(dev))} (a sweep of sizes each), then memory bandwidth"
        )

    def progress(what: str, seconds: float, result: Any) -> None:
        if c is None:
            return
        if isinstance(result, matmul_peak.Peak):
            c.print(f"  {what}: {flops_text(result.tflops)} [dim]({escape(result.how_text())}; {seconds:.1f} s)[/]")
        else:
            c.print(
                f"  {what}: {number(result.gbps, 'GB/s')} [dim](device copy "
                f"{number(result.device_copy_gbps, 'GB/s')}, c = a * b {number(result.elementwise_gbps, 'GB/s')}; "
                f"arrays of {result.megabytes:,} MiB, best of {result.repeats}; {seconds:.1f} s)[/]"
            )

    started = time.perf_counter()
    began = time.time()  # a record measured before this is a quieter one that was kept
    try:
        with gpu_share.capped(dev):  # as every run: a class sharing the GPU keeps to its per-run cap
            record = calibration.measure(dev, on_progress=progress)
    except OSError as e:
        eprint(
            f"gpututor: calibrate: could not save the calibration in {calibration.cache_file().parent} "
            f"({e.strerror or e})"
        )
        return FAILED
    except (RuntimeError, ValueError) as e:  # out of memory on a shared GPU, an array that does not fit
        from tutor import errors

        text = str(e).strip().splitlines()
        cap = (
            f" ({gpu_share.cap_source()} caps each run at {gpu_share.cap_mib():,} MiB of GPU memory here)"
            if gpu_share.cap_mib() and errors.is_device_out_of_memory(e)
            else ""
        )
        eprint(f"gpututor: calibrate: the measurement failed: {text[0] if text else type(e).__name__}{cap}")
        return FAILED
    took = time.perf_counter() - started
    if args.json:
        print_json(
            {
                **calibration.summary(record),
                "cache_file": str(calibration.cache_file()),
                "roofline_command": calibration.ROOFLINE_COMMAND,
            }
        )
        return OK
    assert c is not None
    _print_roofs(c, record)
    from tutor.charts import roofline

    roof = record.peak(calibration.ROOF_DTYPE)
    assert roof is not None
    c.print(f"[bold]roofline of this machine[/] ({calibration.ROOF_DTYPE} compute roof):")
    c.print(roofline(roof.tflops, record.bandwidth.gbps, []), markup=False, highlight=False)
    if record.measured_at < began:  # this measurement was not kept: the quieter record above stays
        c.print(
            f"measured in {took:.1f} s and not kept: the record of {record.measured_on} shown above stays in "
            f"{escape(str(calibration.cache_file()))}."
        )
        return OK
    c.print(
        f"calibrated in {took:.1f} s; kept in {escape(str(calibration.cache_file()))} (and each peak in "
        f"{escape(matmul_peak.CACHE_NAME)}, which MFU uses). `gpututor doctor` shows it; "
        f"`{calibration.ROOFLINE_COMMAND}` places your runs on it."
    )
    return OK


def _print_roofs(c: Any, record: Any) -> None:
    """Each dtype's peak and ridge point, the bandwidth, and what it was measured with."""
    from rich.markup import escape

    for p in record.peaks:
        c.print(
            f"  {p.dtype:9} peak {flops_text(p.tflops):>14}   ridge at {number(record.ridge(p.dtype))} FLOP/B",
            highlight=False,
        )
    bw = record.bandwidth
    copies = ""
    if bw.copy_gbps is not None:
        copies = f"; host to device {number(bw.copy_gbps, 'GB/s')}"
        if bw.pinned_copy_gbps is not None:
            copies += f", pinned {number(bw.pinned_copy_gbps, 'GB/s')}"
    c.print(f"  memory    {number(bw.gbps, 'GB/s')} (best of device copy and c = a * b{copies})", highlight=False)
    c.print(f"  [dim]measured {record.measured_on} on {escape(record.device)} with {escape(record.with_text())}[/]")
    if record.others_said:
        c.print(f"  [dim]while it measured: {escape(record.others_said)}[/]")
    for note in record.notes:
        c.print(f"  [yellow]{escape(note)}[/]")


# ---------------------------------------------------------------- doctor


def doctor_report(dev: Any) -> dict[str, Any]:
    """doctor's "calibration" entry: read from the cache, never measured (a failure is reported)."""
    from tutor.measurement import calibration

    try:
        return calibration.report(dev)
    except Exception as e:  # noqa: BLE001 - doctor reports, it does not fail on one section
        return {"error": f"{type(e).__name__}: {e}", "command": calibration.COMMAND}


def print_doctor(c: Any, report: dict[str, Any]) -> None:
    from rich.markup import escape

    if "error" in report:
        c.print(f"[bold]calibration[/]: [red]unreadable[/] ({escape(report['error'])}); run `{report['command']}`")
        return
    found = report["calibration"]
    if found is None:
        other = report.get("other_device")
        where = f" (the one calibration here is of {escape(other['device'])}, {other['measured_on']})" if other else ""
        c.print(
            f"[bold]calibration[/]: this device is not calibrated{where}: run `{report['command']}` "
            "to measure its roofline"
        )
        return
    from tutor.measurement.calibration import Calibration

    record = Calibration.from_dict(found)
    c.print(f"[bold]calibration[/] (this machine's roofline; `{report['roofline_command']}` places your runs on it):")
    _print_roofs(c, record)
    if report["stale"]:
        c.print(f"  [yellow]stale[/]: {escape(report['stale'])}; run `{report['command']}` to measure it again")


# ---------------------------------------------------------------- roofline


def cmd_roofline(args: argparse.Namespace, ctx: Context) -> int:
    from tutor.course.progress import Progress
    from tutor.measurement import calibration

    dev = _device(ctx)
    state = calibration.report(dev)
    if state["calibration"] is None:
        why = f"this device ({state['device']}) is not calibrated" + (
            f"; the calibration here is of {state['other_device']['device']}" if state["other_device"] else ""
        )
        if args.json:
            print_json(
                {
                    "calibration": None,
                    "stale": None,
                    "roof": None,
                    "device": state["device"],
                    "message": why,
                    "command": calibration.COMMAND,
                    "points": [],
                    "listed": [],
                    "elsewhere": [],
                    "older": [],
                }
            )
        else:
            print(f"{why}: run `{calibration.COMMAND}` first, then `{calibration.ROOFLINE_COMMAND}`.")
        return OK
    record = calibration.Calibration.from_dict(state["calibration"])
    with Progress() as progress:
        if progress.warning:
            eprint(f"warning: {progress.warning}")
        runs = [r for r in (progress.latest_run(experiment=name) for name in calibration.EXPERIMENTS) if r is not None]
    placed = calibration.place_runs(record, runs)
    roof = record.peak(calibration.ROOF_DTYPE)
    assert roof is not None
    if args.json:
        print_json(
            {
                "calibration": state["calibration"],
                "stale": state["stale"],
                "command": calibration.COMMAND,
                "roof": {
                    "dtype": calibration.ROOF_DTYPE,
                    "peak_tflops": roof.tflops,
                    "bandwidth_gbps": record.bandwidth.gbps,
                    "ridge_point": record.ridge(),
                },
                **placed,
            }
        )
        return OK

    from rich.text import Text

    c = rich_console()
    ran = {r.experiment for r in runs}
    for line, style in calibration.roofline_lines(record, placed, state["stale"], ran):
        if style == "figure":
            c.print(line, markup=False, highlight=False)
        else:
            c.print(Text(line, style=style), highlight=False)
    return OK


# ---------------------------------------------------------------- the class's queue


def class_report(dev: Any) -> dict[str, Any]:
    """doctor's "class" entry: the class folder, each device's queue (who holds each slot, who
    waits), and for a CUDA device whether it is a MIG slice and what else NVML sees on it."""
    from tutor.measurement import noise, slots

    folder = slots.class_dir()
    report: dict[str, Any] = {"class_dir": str(folder) if folder else None, "queue": [], "note": None}
    if folder is not None:
        if slots.fcntl is None:
            report["note"] = slots.NO_FCNTL
        key = slots.device_key(dev.kind, dev.index) if dev is not None else None
        report["this_device"] = {"device": key, "slots": slots.slots_for(key)} if key else None
        report["queue"] = [
            {
                "device": q.device,
                "slots": q.slots,
                "holders": [h.as_dict() for h in q.holders],
                "waiting": len(q.waiting),
                "waiters": [h.as_dict() for h in q.waiting],
            }
            for q in slots.state(folder)
        ]
    shared = noise.sharing(dev) if dev is not None else None
    report["gpu_sharing"] = (
        None
        if shared is None
        else {
            "mig_slice": shared.mig,
            "other_processes": shared.others,
            "other_processes_mib": round(shared.others_mib, 1),
            "time_slicing": "cannot be seen from inside: only the processes NVML lists here are",
        }
    )
    return report


def print_class(c: Any, report: dict[str, Any]) -> None:
    from rich.markup import escape

    folder = report["class_dir"]
    if folder is None:
        c.print(
            "[bold]class folder[/]: none (settings.toml class_dir or $GPUTUTOR_CLASS_DIR): runs time without a queue"
        )
    else:
        this = report.get("this_device") or {}
        slots_said = f"; {this['device']} has {this['slots']} slot(s)" if this else ""
        c.print(f"[bold]class folder[/]: {escape(folder)}{escape(slots_said)}")
        if report["note"]:
            c.print(f"  [yellow]{escape(report['note'])}[/]")
        if not report["queue"]:
            c.print("  queue: empty (no run has held a slot since the folder was made)")
        for q in report["queue"]:
            held = ", ".join(
                f"{h['user']} (pid {h['pid']}, {h['experiment'] or '?'}, since {time.strftime('%H:%M:%S', time.localtime(h['since']))})"
                for h in q["holders"]
            )
            c.print(
                f"  {escape(q['device'])}: {len(q['holders'])}/{q['slots']} slot(s) held"
                + (f" by {escape(held)}" if held else "")
                + f"; {q['waiting']} waiting",
                highlight=False,
            )
    shared = report.get("gpu_sharing")
    if shared is not None:
        mig = {True: "a MIG slice of its card", False: "a whole card (no MIG)", None: "MIG unknown"}[
            shared["mig_slice"]
        ]
        others = shared["other_processes"]
        if others is None:
            seen = "NVML would not list its processes"
        elif others:
            seen = f"[yellow]other processes are using this GPU[/]: {others} holding {shared['other_processes_mib']:,.0f} MiB"
        else:
            seen = "no other process on it now"
        c.print(f"[bold]GPU sharing[/]: {mig}; {seen}. Time-slicing {shared['time_slicing']}.")
