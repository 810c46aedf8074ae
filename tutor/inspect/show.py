"""`gpututor inspect`'s report drawn with Rich (the CLI prints it; a screen can show the same
renderables). Fits 80 columns."""

from __future__ import annotations

from typing import Any

from tutor.inspect.findings import Report


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.2f} ms"


def renderables(report: Report) -> list[Any]:
    from rich.table import Table
    from rich.text import Text

    out: list[Any] = [Text(f"gpututor inspect {report.script} {' '.join(report.args)}".rstrip(), style="bold")]
    if report.problem:
        out.append(Text(f"Not watched through: {report.problem}.", style="bold red"))
    if report.stopped_note:
        out.append(Text(f"The script was {report.stopped_note}.", style="dim"))
    if report.split:
        out.append(
            Text(
                f"\nStep time on {report.device}: {_ms(report.step_s)} mean, {_ms(report.step_median_s)} median "
                f"over {report.steps_timed} steps ({report.steps_per_s:.1f} steps/s)",
                style="bold",
            )
        )
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
        table.add_column("where the step's time goes")
        table.add_column("per step", justify="right")
        table.add_column("share", justify="right")
        for phase in report.split:
            table.add_row(phase.words, _ms(phase.seconds), f"{phase.share:.0%}")
        out.extend([table, Text(f"How: {report.split_how}.", style="dim")])
    if report.flops_per_step:
        mfu = f"{report.mfu:.1%}" if report.mfu is not None else "not known"
        roof = f"{report.roof_tflops:.3g} TFLOP/s" if report.roof_tflops else "no measured roof"
        line = (
            f"\nMFU {mfu}: {report.flops_per_step / 1e9:.3g} GFLOP per step, {report.achieved_tflops:.3g} TFLOP/s "
            f"of {roof} ({report.roof_dtype}, dense)"
        )
        out.append(Text(line, style="bold"))
        if report.sheet_tflops and report.achieved_tflops:
            share = report.achieved_tflops / report.sheet_tflops
            out.append(
                Text(f"{share:.1%} of the spec sheet's {report.sheet_tflops:.0f} TFLOP/s ({report.sheet_label})")
            )
        out.append(Text(f"How: {report.mfu_how}.", style="dim"))
    if report.memory:
        out.append(Text("\nMemory", style="bold"))
        table = Table(show_header=True, header_style="bold", box=None, padding=(0, 1))
        table.add_column("part")
        table.add_column("measured", justify="right")
        table.add_column("ledger formula", justify="right")
        for part in report.memory:
            formula = f"{_bytes(part.formula_bytes)} = {part.formula}" if part.formula_bytes is not None else "-"
            table.add_row(part.name, _bytes(part.measured_bytes), formula)
        table.add_row("peak", _bytes(report.peak_bytes), "")
        out.extend([table, Text(f"Peak: {report.peak_how}.", style="dim")])
    if report.split:
        if report.findings:
            out.append(Text(f"\nFindings ({len(report.findings)})", style="bold"))
            for f in report.findings:
                out.append(Text(f"- {f.title}", style="bold yellow"))
                out.append(Text(f"  seen: {f.evidence}"))
                out.append(Text(f"  fix: {f.fix}"))
                out.append(Text(f"  lesson: {f.lesson}", style="dim"))
        else:
            out.append(Text("\nFindings: none of the course's mistakes showed in this run.", style="green"))
    if report.traceback:
        out.append(Text("\n" + report.traceback.rstrip(), style="red"))
    if report.output_tail:
        out.append(Text("\nWhat the script wrote (last lines):", style="bold"))
        out.append(Text(report.output_tail))
    written = ", ".join(report.files_written[:10]) if report.files_written else "nothing"
    more = f" and {len(report.files_written) - 10} more" if len(report.files_written) > 10 else ""
    out.append(Text(f"Files it wrote in its folder: {written}{more}", style="dim"))
    return out
