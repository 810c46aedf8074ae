"""`inspect-example`: `gpututor inspect` (tutor/inspect/) run on a training script the package
ships, so a lesson can ask for predictions of what it will find (the step split, MFU, peak memory)
and reveal them with the report's own figures. The script runs in a process of its own, as `python
SCRIPT` would; this generator relays its output and turns the report into metrics, with intervals
from the timed steps for the figures that are timings."""

from __future__ import annotations

import queue
import statistics
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tutor.experiments.devices import Device
from tutor.experiments.events import Event, Finished, Note, Started, Table
from tutor.experiments.specs.inspect_example import InspectExampleParams
from tutor.measurement.intervals import bounds, median_interval

EXAMPLES = Path(__file__).resolve().parent.parent / "inspect" / "examples"
SCRIPTS = {"mnist-cnn": "mnist_cnn.py", "char-gpt": "char_gpt.py"}
# The script's start (Python, torch, its data) and, once per machine, the measured roof come on top
# of the steps; a run that needs longer than this has gone wrong.
TIMEOUT_S = 55.0
OUTPUT_LINES_SHOWN = 6


def script_args(p: InspectExampleParams, device: str) -> list[str]:
    """The example's own flags: its device and batch, and for MNIST where the tutor's data is."""
    from tutor.inspect import launch

    args = ["--device", device, *(["--batch-size", str(p.batch_size)] if p.batch_size else [])]
    return args + launch.example_args(EXAMPLES / SCRIPTS[p.example])


def measure(p: InspectExampleParams, dev: Device) -> Iterator[Event]:
    from tutor.inspect import findings, launch

    script = EXAMPLES / SCRIPTS[p.example]
    args = script_args(p, dev.torch_device)
    yield Started(
        "inspect-example",
        dev.torch_device,
        dev.name,
        f"the script's own data ({script.name})",
        f"python {script.name} {' '.join(args)}: {p.warmup} warm-up steps, 1 probe step, {p.steps} timed",
    )
    yield Note(
        f"Watching {script.name} as `gpututor inspect` does: the script runs in a process of its own; "
        "each step is clocked at its phase boundaries, one untimed step counts FLOPs and memory, "
        "then the script is stopped on purpose."
    )
    lines: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    done: list[Any] = []

    def watch() -> None:
        try:
            done.append(
                launch.run_script(
                    script,
                    args,
                    warmup=p.warmup,
                    steps=p.steps,
                    timeout=TIMEOUT_S,
                    hold_slot=False,  # this run's turn (experiments.start) holds the device already
                    on_output=lines.put,
                    cancelled=stop.is_set,
                )
            )
        except BaseException as error:  # noqa: BLE001 - carried to the generator, which raises it there
            done.append(error)

    watcher = threading.Thread(target=watch, name="inspect-example", daemon=True)
    watcher.start()
    shown = 0
    try:
        # Yield while the script runs: a cancel reaches this generator at a yield, and stops the script.
        while watcher.is_alive() or not lines.empty():
            try:
                text = lines.get(timeout=0.25)
            except queue.Empty:
                continue
            for line in text.splitlines():
                if line.strip() and shown < OUTPUT_LINES_SHOWN:
                    shown += 1
                    yield Note(f"{script.name}: {line.strip()[:160]}", level="info")
    finally:
        stop.set()
        watcher.join(timeout=10)
    if isinstance(done[0], BaseException):
        raise done[0]
    ran = done[0]
    report = findings.build(script, args, ran, TIMEOUT_S)
    if not report.ok:
        said = report.output_tail.strip().splitlines()[-1:] if report.output_tail.strip() else []
        last = f"; its last words: {said[0].strip()[:200]}" if said else ""
        raise RuntimeError(f"{script.name} was not watched through: {report.problem}{last}")
    yield from _report(report, ran.watched)


def _report(report: Any, watched: dict[str, Any]) -> Iterator[Event]:
    timed = watched.get("timed") or []
    # On a GPU only the window's two ends are synchronised, so one step's clock times its launches:
    # the step is the window's mean (no interval), the shares come from the split steps, which
    # synchronise at each boundary. On a CPU each step's own clock is its time.
    on_gpu = bool(watched.get("split"))
    phases = watched.get("split") or timed
    totals = [float(r["total"]) for r in timed]
    data_shares = [float(r.get("data", 0.0)) / float(r["total"]) for r in phases if float(r["total"]) > 0]
    step = report.step_s if on_gpu and report.step_s else statistics.median(totals)
    step_low, step_high = (None, None) if on_gpu else bounds(median_interval(totals))
    data_low, data_high = bounds(median_interval(data_shares))
    shares = {phase.name: phase.share for phase in report.split}
    yield Table(
        f"Where a step's time goes on {report.device} ({report.steps_timed} timed steps)",
        ["phase", "ms a step", "share"],
        [[phase.words, f"{phase.seconds * 1e3:.2f}", f"{phase.share:.0%}"] for phase in report.split],
    )
    yield Note(f"How: {report.split_how}.")
    mfu = mfu_low = mfu_high = None
    if report.flops_per_step and report.roof_tflops:
        roof = report.roof_tflops * 1e12

        def utilisation(seconds: float | None) -> float | None:
            return report.flops_per_step / seconds / roof if seconds else None

        mfu, mfu_low, mfu_high = utilisation(step), utilisation(step_high), utilisation(step_low)
        which = "the window's mean step, synchronised at its ends" if on_gpu else "the median step"
        yield Note(
            f"MFU {mfu:.1%}: {report.flops_per_step / 1e9:.3f} GFLOP a step / {step * 1e3:.2f} ms ({which}) "
            f"= {report.flops_per_step / step / 1e12:.3f} TFLOP/s, against this machine's measured "
            f"{report.roof_dtype} dense peak of {report.roof_tflops:.3f} TFLOP/s.",
            level="result",
        )
    else:
        yield Note(f"No MFU: {report.mfu_how}.", level="warning")
    if report.memory:
        yield Table(
            "Memory of one step, measured beside the ledger's formula",
            ["part", "measured", "formula"],
            [[m.name, _mb(m.measured_bytes), m.formula or "-"] for m in report.memory],
        )
    for finding in report.findings:
        yield Note(
            f"Finding: {finding.title}. Seen: {finding.evidence}. Fix: {finding.fix} (taught in {finding.lesson}).",
            level="warning",
        )
    if not report.findings:
        yield Note("No finding: none of the course's mistakes showed in the watched steps.", level="result")
    yield Finished(
        {
            "step_seconds": step,
            "step_seconds_low": step_low,
            "step_seconds_high": step_high,
            "data_share": statistics.median(data_shares) if data_shares else None,
            "data_share_low": data_low,
            "data_share_high": data_high,
            "forward_share": shares.get("forward"),
            "backward_share": shares.get("backward"),
            "optimizer_share": shares.get("optimizer"),
            "flops_per_step": report.flops_per_step,
            "mfu": mfu,
            "mfu_low": mfu_low,
            "mfu_high": mfu_high,
            "peak_mb": report.peak_bytes / 1e6 if report.peak_bytes is not None else None,
            "findings": len(report.findings),
            "first_finding": report.findings[0].key if report.findings else None,
            "device": report.device,
        }
    )


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f} MB"
