"""`gpututor inspect SCRIPT [OPTIONS] [-- ARGS]`: the learner's own training script, watched
(tutor/inspect/), reported in the course's words, or as JSON."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tutor.cli.context import BAD_INPUT, FAILED, OK, Context, bad, eprint, print_json, rich_console


def cmd_inspect(args: argparse.Namespace, ctx: Context) -> int:
    script_args = list(args.script_args or [])
    from tutor.inspect import findings, launch

    script = Path(args.script).expanduser()
    if not script.is_file():
        if args.json:
            print_json(findings.missing(args.script, script_args).as_dict())
        return bad(args, "inspect", f"{args.script}: no such file") if not args.json else BAD_INPUT
    memory_mb = int(os.environ.get("GPUTUTOR_MEMORY_MB") or 4096)
    if not args.json:
        eprint(f"watching {script.name}: {args.warmup} warm-up steps, 1 probe step, {args.steps} timed ...")
    ran = launch.run_script(
        script, script_args, warmup=args.warmup, steps=args.steps, timeout=args.timeout, memory_mb=memory_mb
    )
    report = findings.build(script, script_args, ran, args.timeout)
    extra: dict[str, Any] = {}
    if args.compare_plain and report.ok and ran.watched.get("window_s"):
        plain = launch.run_script(
            script,
            script_args,
            warmup=args.warmup,
            steps=args.steps,
            timeout=args.timeout,
            memory_mb=memory_mb,
            plain=True,
            measure_roof=False,
        )
        extra["overhead"] = overhead(ran.watched, plain.watched)
    if args.json:
        print_json({**report.as_dict(), **extra})
    else:
        from tutor.inspect.show import renderables

        console = rich_console()
        for item in renderables(report):
            console.print(item)
        if "overhead" in extra:
            o = extra["overhead"]
            if o.get("ratio"):
                console.print(
                    f"Watching's overhead: the timed steps took {o['ratio']:.3f}x the plain run's "
                    f"({o['watched_ms']:.2f} against {o['plain_ms']:.2f} ms a step, back to back)"
                )
    return OK if report.ok else FAILED


def overhead(watched: dict[str, Any], plain: dict[str, Any]) -> dict[str, Any]:
    """The watched run's timed steps against the same steps of a run with only the step clock."""
    w, p = watched.get("window_s"), plain.get("window_s")
    n_w = len(watched.get("timed") or []) or 1
    n_p = int(plain.get("steps_wanted") or 1)
    if not w or not p:
        return {"ratio": None}
    return {"ratio": (w / n_w) / (p / n_p), "watched_ms": w / n_w * 1e3, "plain_ms": p / n_p * 1e3}
