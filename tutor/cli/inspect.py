"""`gpututor inspect SCRIPT [OPTIONS] [-- ARGS]`: the learner's own training script, watched
(tutor/inspect/), reported in the course's words, or as JSON."""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from tutor.cli.context import BAD_INPUT, FAILED, OK, Context, bad, eprint, print_json, rich_console

OVERHEAD_PAIRS = 10  # --compare-plain: pairs of blocks, plain and watched in turns


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
    pairs = OVERHEAD_PAIRS if args.compare_plain else 0
    ran = launch.run_script(
        script,
        script_args,
        warmup=args.warmup,
        steps=args.steps,
        timeout=args.timeout,
        memory_mb=memory_mb,
        overhead_pairs=pairs,
    )
    report = findings.build(script, script_args, ran, args.timeout)
    extra: dict[str, Any] = {"overhead": overhead(ran.watched)} if pairs and report.ok else {}
    if args.json:
        print_json({**report.as_dict(), **extra})
    else:
        from tutor.inspect.show import renderables

        console = rich_console()
        for item in renderables(report):
            console.print(item)
        if "overhead" in extra:
            console.print(overhead_words(extra["overhead"]))
    return OK if report.ok else FAILED


def overhead(watched: dict[str, Any]) -> dict[str, Any]:
    """Watching's cost, from the overhead window's pairs of blocks (one plain, one watched, in turns
    in the same run): the median of the pairs' ratios, with its order-statistic interval."""
    from tutor.measurement.intervals import median_interval

    blocks = watched.get("overhead_blocks") or []
    steps = int(watched.get("overhead_block_steps") or 1)
    pairs = [(blocks[i], blocks[i + 1]) for i in range(0, len(blocks) - 1, 2)]
    ratios, plain, watch = [], [], []
    for a, b in pairs:
        p, w = (a, b) if a["plain"] else (b, a)
        if p["seconds"] > 0 and w["seconds"] > 0:
            ratios.append(w["seconds"] / p["seconds"])
            plain.append(p["seconds"] / steps)
            watch.append(w["seconds"] / steps)
    found = median_interval(ratios)
    wanted = int(watched.get("overhead_pairs_wanted") or 0)
    if found is None:
        return {"ratio": None, "pairs": 0, "pairs_wanted": wanted}
    return {
        "pairs_wanted": wanted,
        "ratio": found.median,
        "low": found.low,
        "high": found.high,
        "coverage": found.coverage,
        "short": found.short,
        "pairs": len(ratios),
        "ratios": ratios,
        "block_steps": steps,
        "watched_ms": statistics.median(watch) * 1e3,
        "plain_ms": statistics.median(plain) * 1e3,
    }


def overhead_words(o: dict[str, Any]) -> str:
    if not o.get("ratio"):
        return (
            "Watching's overhead: not measured (the script ended before a pair of blocks in turns was done, "
            "or none fitted in the time limit left: --timeout)"
        )
    pairs = f"{o['pairs']} pair{'s' if o['pairs'] != 1 else ''}"
    cut = (
        f"; {o['pairs_wanted'] - o['pairs']} more did not fit in the time limit or the script's steps"
        if o.get("pairs_wanted", 0) > o["pairs"]
        else ""
    )
    spread = (
        f"only {pairs}: too few for an interval"
        if o.get("short")
        else f"{o['coverage']:.0%} interval {o['low']:.3f}x to {o['high']:.3f}x"
    )
    return (
        f"Watching's overhead, measured in this run: {pairs} of {o['block_steps']}-step blocks, "
        f"plain and watched in turns: watched steps took {o['ratio']:.3f}x the plain ones "
        f"({spread}; {o['watched_ms']:.2f} against {o['plain_ms']:.2f} ms a step{cut})"
    )
