"""The report `gpututor inspect` gives: plain data (the CLI prints it, `--json` dumps it, a
screen can draw it) built from one watched run (launch.Ran), and the findings judged from
what the run did, each with its evidence and the lesson step that teaches it. Pure Python.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tutor.inspect.launch import Ran, uses_torch
from tutor.instruments.memory_ledger import BYTES_PER_PARAM

PHASE_WORDS = {
    "data": "waiting for data",
    "copy": "host-to-device copies",
    "forward": "forward (model and loss)",
    "backward": "backward",
    "optimizer": "optimizer (step, zero_grad)",
    "other": "other (the loop's own code)",
}
DATA_SHARE = 0.2  # a step that waits this share of its time on the loader waits on it
OUTPUT_LINES = 15


@dataclass
class Finding:
    key: str
    title: str
    evidence: str
    lesson: str  # lesson:step that teaches it
    fix: str


@dataclass
class Phase:
    name: str
    words: str
    seconds: float  # mean per step
    share: float


@dataclass
class MemoryPart:
    name: str
    measured_bytes: int | None
    formula_bytes: int | None
    formula: str
    how: str


@dataclass
class Report:
    script: str
    args: list[str]
    outcome: str  # stopped, finished, exited, crashed, timed_out, no_torch, no_training, missing
    problem: str | None  # one sentence when the script was not watched through its window
    stopped_note: str | None = None
    device: str | None = None
    steps_done: int = 0
    steps_timed: int = 0
    step_s: float | None = None  # mean over the timed window
    step_median_s: float | None = None
    steps_per_s: float | None = None
    split: list[Phase] = field(default_factory=list)
    split_how: str = ""
    flops_per_step: int | None = None
    achieved_tflops: float | None = None
    roof_tflops: float | None = None
    roof_dtype: str | None = None
    mfu: float | None = None
    sheet_tflops: float | None = None
    sheet_label: str | None = None
    mfu_how: str = ""
    memory: list[MemoryPart] = field(default_factory=list)
    peak_bytes: int | None = None
    peak_how: str = ""
    findings: list[Finding] = field(default_factory=list)
    output_tail: str = ""
    files_written: list[str] = field(default_factory=list)
    traceback: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def missing(script: str, args: list[str]) -> Report:
    return Report(script, args, "missing", f"{script}: no such file")


def _tail(text: str, lines: int = OUTPUT_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def build(script: Path, args: list[str], ran: Ran, timeout: float) -> Report:
    w = ran.watched
    report = Report(
        str(script),
        args,
        str(w.get("outcome") or ("timed_out" if ran.timed_out else "crashed")),
        None,
        steps_done=int(w.get("steps_done") or 0),
        output_tail=_tail(ran.output),
        files_written=ran.files_written,
        traceback=w.get("traceback"),
        seconds=ran.seconds,
    )
    report.problem = _problem(report, w, ran, script, timeout)
    timed = w.get("timed") or []
    if timed:
        _timing(report, w, timed)
        _mfu(report, w)
        _memory(report, w)
        report.findings = judge(w, report)
    return report


def _problem(report: Report, w: dict[str, Any], ran: Ran, script: Path, timeout: float) -> str | None:
    steps = report.steps_done
    where = f"after {steps} optimizer step{'s' if steps != 1 else ''}"
    if report.outcome == "timed_out" or (ran.timed_out and not w):
        phase = PHASE_WORDS.get(str(w.get("phase_now")), "")
        doing = f", in {phase}" if phase and steps else ""
        return f"the script ran past the {timeout:g} s time limit and was stopped ({where}{doing})"
    if report.outcome == "crashed":
        line = f" at line {w['error_line']}" if w.get("error_line") else ""
        first = str(w.get("error") or "").strip().split("\n", 1)[0][:300]
        if not w:
            return f"the script's process ended without a report (exit code {ran.exit_code})"
        return f"the script crashed {where}: {w.get('error_type')}{line}: {first}"
    if steps == 0:
        if not uses_torch(script) and not w.get("forward"):
            report.outcome = "no_torch"
            return "the script does not use torch: it never imports it, so there is no training to watch"
        how = f"exited with code {w.get('exit_code')}" if report.outcome == "exited" else "ended"
        report.outcome = "no_training"
        return f"the script {how} without taking an optimizer step: there is no training step to watch"
    if not w.get("timed"):
        needed = int(w.get("warmup") or 0) + 2
        return (
            f"the script took only {steps} optimizer step{'s' if steps != 1 else ''}; at least {needed} are needed "
            "(warm-up, one probe step, one timed step): let it train longer"
        )
    if report.outcome == "stopped":
        split = int(w.get("split_steps") or 0)
        split_words = f", {split} split with a synchronize at each phase" if split else ""
        blocks = len(w.get("overhead_blocks") or []) * int(w.get("overhead_block_steps") or 0)
        split_words += f", {blocks} in blocks for watching's overhead" if blocks else ""
        report.stopped_note = (
            f"stopped on purpose after {steps} optimizer steps ({w.get('warmup')} warm-up, 1 probe, "
            f"{len(w.get('timed') or [])} timed{split_words}), so what it would do after them (a checkpoint "
            "saved at the end, say) did not run and is not checked"
        )
    elif report.outcome == "exited" and w.get("exit_code"):
        return f"the script exited with code {w.get('exit_code')} {where}"
    return None


def _timing(report: Report, w: dict[str, Any], timed: list[dict[str, Any]]) -> None:
    totals = [float(r["total"]) for r in timed]
    report.steps_timed = len(timed)
    window = w.get("window_s")
    report.step_s = float(window) / len(timed) if window else statistics.fmean(totals)
    report.step_median_s = statistics.median(totals)
    report.steps_per_s = 1.0 / report.step_s if report.step_s else None
    rows = w.get("split") or timed  # a GPU: the split window, synchronised at each boundary
    mean_total = statistics.fmean(float(r["total"]) for r in rows)
    parts = {name: statistics.fmean(float(r.get(name, 0.0)) for r in rows) for name in PHASE_WORDS}
    # "other" is what the step's clock saw beyond the phases' clocks: the parts sum to the step
    parts["other"] = max(0.0, mean_total - sum(v for k, v in parts.items() if k != "other"))
    report.split = [Phase(k, PHASE_WORDS[k], v, v / mean_total if mean_total else 0.0) for k, v in parts.items()]
    fwd = w.get("forward") or {}
    report.device = str(fwd.get("weights_device") or fwd.get("device_type") or "cpu")
    if w.get("split"):
        report.split_how = (
            f"GPU: the timed window ({len(timed)} steps) ran with no synchronize but at its two ends; the split is "
            f"from {len(rows)} further steps with a synchronize at each phase boundary, which stalls the queue "
            f"(those steps took {mean_total * 1e3:.2f} ms each)"
        )
    else:
        report.split_how = (
            f"a clock read at each phase boundary of {len(timed)} timed steps; on a CPU each call finishes its work "
            "before it returns, so no synchronize is needed"
        )
    report.split_how += _data_how(rows)


def _data_how(rows: list[dict[str, Any]]) -> str:
    """How the data phase was timed: inside a DataLoader's __next__, or, in steps without one, the
    script's own code before the training forward (a hand-rolled get_batch)."""
    made = sum(1 for r in rows if r.get("data_from") == "script")
    if not made:
        return ""
    return (
        f"; data, in the {made} of {len(rows)} steps with no DataLoader: the script's own code from the step's "
        "start to its first training forward (its get_batch), copies and zero_grad left out"
    )


def _mfu(report: Report, w: dict[str, Any]) -> None:
    flops = (w.get("probe") or {}).get("flops")
    roof = w.get("roof") or {}
    report.roof_dtype = roof.get("dtype")
    if not flops or not report.steps_per_s:
        report.mfu_how = "no FLOPs were counted (the model ran no matmul or convolution torch counts)"
        return
    report.flops_per_step = int(flops)
    report.achieved_tflops = flops * report.steps_per_s / 1e12
    report.roof_tflops = roof.get("tflops")
    report.sheet_tflops, report.sheet_label = roof.get("sheet_tflops"), roof.get("sheet_label")
    if report.roof_tflops:
        report.mfu = report.achieved_tflops / report.roof_tflops
    busy = roof.get("others_busy_cores")
    loaded = (
        f"; measured just now while other programs kept {busy:.1f} cores busy, so it reads low and this MFU high,"
        " and it was not kept: the next run measures it again"
        if busy is not None
        else ""
    )
    where = (
        f"against this machine's measured {report.roof_dtype} dense matmul peak ({roof.get('how')}, "
        f"{roof.get('measured_on')}{loaded})"
        if report.roof_tflops
        else f"no measured {report.roof_dtype} peak for this machine ({roof.get('error') or 'not cached'}): "
        "run `gpututor doctor --peak`"
    )
    report.mfu_how = (
        f"FLOPs of one step counted by torch.utils.flop_counter (matmuls and convolutions, forward and backward) "
        f"on an untimed step, times the timed window's {report.steps_per_s:.1f} steps/s, {where}"
    )


def _precision(fwd: dict[str, Any]) -> str:
    if fwd.get("autocast"):
        return "mixed"
    return "fp16" if fwd.get("weights_dtype") in ("float16", "bfloat16") else "fp32"


def _state_buffers(keys: list[str]) -> list[str]:
    """The optimizer's per-parameter state buffers by name (Adam: exp_avg, exp_avg_sq; SGD with
    momentum: momentum_buffer); the step counter is not one."""
    return [k for k in keys if k != "step"]


def _memory(report: Report, w: dict[str, Any]) -> None:
    probe = w.get("probe") or {}
    fwd = w.get("forward") or {}
    n = int(probe.get("params") or 0)
    precision = _precision(fwd)
    weight_b, grad_b, _copies, moments = BYTES_PER_PARAM[precision]
    buffers = _state_buffers(list(probe.get("optimizer_keys") or []))
    opt_b = moments["momentum"] * len(buffers)  # the ledger's bytes per buffer, one buffer a parameter
    name = probe.get("optimizer") or "optimizer"
    kind = f"{name}: {', '.join(buffers)}" if buffers else f"{name}: no state"
    report.memory = [
        MemoryPart(
            "weights", probe.get("weight_bytes"), n * weight_b, f"{n:,} params x {weight_b} B", "the parameters"
        ),
        MemoryPart("gradients", probe.get("gradient_bytes"), n * grad_b, f"{n:,} x {grad_b} B", "each .grad"),
        MemoryPart(
            "optimizer state", probe.get("optimizer_bytes"), n * opt_b, f"{n:,} x {opt_b} B", f"{name}.state ({kind})"
        ),
    ]
    parts = [p.measured_bytes or 0 for p in report.memory]
    if w.get("cuda") and probe.get("peak_allocated") is not None:
        acts = int(probe["peak_allocated"]) - int(probe.get("allocated_before") or 0)
        report.memory.append(
            MemoryPart("activations", acts, None, "", "CUDA allocator: the step's peak above what it started with")
        )
        report.peak_bytes = int(probe["peak_allocated"])
        report.peak_how = "torch.cuda.max_memory_allocated over the probe step"
    elif probe.get("activation_bytes") is not None:
        report.memory.append(
            MemoryPart(
                "activations",
                int(probe["activation_bytes"]),
                None,
                "",
                "saved-tensor hooks: unique storages autograd saved for backward (weights left out)",
            )
        )
        report.peak_bytes = sum(parts) + int(probe["activation_bytes"])
        report.peak_how = "the sum of the parts above (a CPU has no allocator peak to read)"


def judge(w: dict[str, Any], report: Report) -> list[Finding]:
    """Each mistake of the course the run shows, with what showed it."""
    found: list[Finding] = []
    fwd = w.get("forward") or {}
    timed = w.get("timed") or []
    accel = w.get("accelerator")
    weights_on = str(fwd.get("weights_device") or "")
    batch_on = str(fwd.get("batch_device") or "")
    if accel and weights_on.startswith("cpu"):
        found.append(
            Finding(
                "model-on-cpu",
                f"the model trains on the CPU while {accel} is here",
                f"{fwd.get('module')}'s weights were on {weights_on}, the batch on {batch_on}, at a training forward",
                "gpu-training:device-aware-loop",
                f"device = torch.device('{accel}'); model.to(device); and each batch .to(device)",
            )
        )
    elif weights_on and batch_on and weights_on != batch_on:
        found.append(
            Finding(
                "batch-device",
                "the batches are not where the model is",
                f"weights on {weights_on}, batch on {batch_on}",
                "gpu-training:mismatch-explain",
                "move each batch with .to(device), the model's device",
            )
        )
    reads = statistics.fmean(r.get("reads", 0) for r in timed) if timed else 0.0
    if reads >= 1:
        syncs = statistics.fmean(r.get("syncs", 0) for r in timed)
        cost = (
            f"{syncs:.1f} of them waited for the GPU's queue"
            if syncs
            else "on this CPU each costs little; on a GPU each waits for all the work queued"
        )
        found.append(
            Finding(
                "sync-per-step",
                "a value read back every step (.item(), .tolist(), .cpu())",
                f"{reads:.1f} reads per timed step from the script's own code; {cost}",
                "gpu-training:practice-loop",
                "keep a running tensor sum on the device and read it every N steps",
            )
        )
    data = next((p for p in report.split if p.name == "data"), None)
    loader = w.get("loader") or {}
    if data is not None and data.share >= DATA_SHARE and loader:
        unused = []
        if not loader.get("num_workers"):
            unused.append("num_workers=0 (the loader runs in the training process)")
        if accel and not loader.get("pin_memory"):
            unused.append("pin_memory off")
        if unused:
            found.append(
                Finding(
                    "data-wait",
                    "the step waits on the DataLoader",
                    f"{data.share:.0%} of each step ({data.seconds * 1e3:.2f} ms) is spent in the loader's __next__; "
                    + ", ".join(unused),
                    "gpu-lab:data-predict",
                    "DataLoader(..., num_workers=4, pin_memory=True), or transform the data once up front",
                )
            )
    checked, alive = int(w.get("losses_checked") or 0), int(w.get("losses_alive_old") or 0)
    if checked >= 2 and alive >= max(2, checked // 2):
        found.append(
            Finding(
                "losses-kept",
                "losses kept with their graphs",
                f"{alive} of the last {checked} losses from {3}+ steps back are still alive, each holding its "
                "autograd graph: memory grows every step",
                "gpu-lab:leak-predict",
                "keep loss.item() or loss.detach(), not the loss itself",
            )
        )
    checks = w.get("grad_checks") or []
    if len(checks) >= 2 and all(c.get("stale") for c in checks):
        norms = " -> ".join(f"{c['norm']:.3g}" for c in checks)
        found.append(
            Finding(
                "no-zero-grad",
                "gradients are never zeroed: they pile up step after step",
                f"at backward of steps {checks[0]['step']}-{checks[-1]['step']} the gradients still held the "
                f"previous step's values ({w.get('zero_grads', 0)} zero_grad calls); gradient norm {norms}",
                "cpu-vs-gpu:zero-grad-predict",
                "optimizer.zero_grad() once per step, before backward",
            )
        )
    fast_low = fwd.get("device_type") == "cuda"  # a CPU's low precision is not reliably faster: not flagged
    if fast_low and not fwd.get("autocast") and fwd.get("weights_dtype") == "float32":
        found.append(
            Finding(
                "no-autocast",
                "no autocast on a GPU with fast 16-bit matmuls",
                f"the forward ran in float32 ({'TF32 allowed' if fwd.get('tf32') else 'TF32 off'}) with autocast off",
                "gpu-training:amp-when",
                "with torch.autocast('cuda', dtype=torch.bfloat16): around the forward and loss",
            )
        )
    if w.get("backward_autocast"):
        found.append(
            Finding(
                "autocast-backward",
                "backward runs inside autocast",
                "autocast was on when loss.backward() was called",
                "gpu-training:autocast-and-scaler",
                "end the autocast block after the loss; call backward outside it",
            )
        )
    if w.get("scaler_calls") and fwd.get("autocast_dtype") == "bfloat16":
        found.append(
            Finding(
                "scaler-bf16",
                "a GradScaler with bfloat16",
                f"GradScaler.scale called {w['scaler_calls']} times while autocast ran in bfloat16",
                "gpu-training:autocast-and-scaler",
                "drop the scaler: bfloat16 has float32's range, its gradients do not underflow",
            )
        )
    clock_reads = statistics.fmean(r.get("clock_reads", 0) for r in timed) if timed else 0.0
    if w.get("cuda") and clock_reads >= 1 and not w.get("script_syncs"):
        found.append(
            Finding(
                "timing-no-sync",
                "steps timed without synchronize",
                f"{clock_reads:.1f} clock reads per step from the script and no torch.cuda.synchronize call",
                "devices:sync-predict",
                "torch.cuda.synchronize() before each clock read, or CUDA events",
            )
        )
    device_saves = [s for s in w.get("saves") or [] if set(s.get("devices") or {}) - {"cpu"}]
    if device_saves:
        s = device_saves[0]
        found.append(
            Finding(
                "checkpoint-on-device",
                "a checkpoint saved with GPU tensors",
                f"torch.save({s['file']}) held {s['devices']} tensors: torch.load on a CPU-only machine fails "
                "without map_location",
                "gpu-training:map-location-predict",
                "load with torch.load(path, map_location='cpu', weights_only=True), or save .cpu() copies",
            )
        )
    return found
