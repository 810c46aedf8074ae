"""Grade a code exercise: run the learner's program in the sandbox, then check each requirement.

`grade_exercise(step, code, workdir)` -> ExerciseResult. Requirement types (tutor/lesson.py):
output (regex on what it printed), source (regex on the code, comments stripped), report (a value
given to tutor.lab.report), file (written in the working directory; a checkpoint is loaded and
evaluated in a sandboxed process of its own, since a pickle is code), function (a named probe
calls the learner's function with the checker's inputs).

Function checks import the learner's file with __name__ != "__main__", so top-level work must sit
under `if __name__ == "__main__":` or it runs again (within the time limit) before the probe.
No torch here: the checker's torch work happens in subprocesses.
"""

from __future__ import annotations

import io
import math
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.lesson import (
    ErrorRequirement,
    ExerciseStep,
    FileRequirement,
    FunctionRequirement,
    OutputRequirement,
    ReportRequirement,
    SourceRequirement,
)
from tutor.sandbox import SOLUTION, SandboxResult, run_code

CHECK_TIMEOUT_S = 180.0  # loading and evaluating a checkpoint on the CPU


@dataclass(frozen=True)
class RequirementResult:
    id: str
    type: str
    passed: bool
    feedback: str  # empty when passed
    judged: bool = True  # False: the program stopped before this could be checked

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type, "passed": self.passed, "feedback": self.feedback,
                "judged": self.judged}


@dataclass
class ExerciseResult:
    passed: bool
    requirements: list[RequirementResult]
    sandbox: SandboxResult
    summary: str
    traceback: str | None = None
    hint: str | None = None  # the first failing requirement's feedback (or the step's hint)
    checker_notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        sb = self.sandbox
        return {
            "passed": self.passed, "summary": self.summary, "hint": self.hint,
            "requirements": [r.as_dict() for r in self.requirements],
            "output": sb.output, "dropped_bytes": sb.dropped_bytes, "traceback": self.traceback,
            "error_type": sb.error_type, "error_line": sb.error_line, "exit_code": sb.exit_code,
            "signal": sb.signal, "timed_out": sb.timed_out, "cancelled": sb.cancelled,
            "memory_error": sb.memory_error, "reports": sb.reports, "seconds": sb.seconds,
            "problem": sb.problem(),
        }


# ---------------------------------------------------------------- source


def strip_comments(code: str) -> str:
    """The code with comments blanked out (strings kept), so a commented-out line does not count."""
    lines = io.StringIO(code).readlines()  # rows as tokenize counts them: split at "\n" only
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r"(?m)^\s*#.*$", "", code)  # unfinished code: drop whole-line comments
    for tok in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        (row, col), (_, end) = tok.start, tok.end
        line = lines[row - 1]
        lines[row - 1] = line[:col] + line[end:]
    return "".join(lines)


def _search(pattern: str, text: str) -> bool | None:
    try:
        return re.search(pattern, text, re.MULTILINE) is not None
    except re.error:
        return None


# ---------------------------------------------------------------- probes (run in the sandbox)

_CHECKPOINT_PROBE = '''
import os, sys
import torch
from tutor.lab import report
path, keys, want_accuracy = {path!r}, {keys!r}, {want!r}
try:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
except Exception as e:
    report(load_error=f"{{type(e).__name__}}: {{e}}"[:600]); sys.exit(0)
report(loaded=True)
names = [str(k) for k in ckpt] if isinstance(ckpt, dict) else []
report(missing_keys=",".join(k for k in keys if k not in names), present_keys=",".join(names[:30]))
if want_accuracy:
    from tutor import lab
    from tutor.lab import MNISTClassifier
    state = ckpt.get("model_state_dict") if isinstance(ckpt, dict) else None
    if state is None and isinstance(ckpt, dict) and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
        state = ckpt  # a bare state_dict
    if state is None:
        report(state_error="the checkpoint has no model_state_dict"); sys.exit(0)
    model = MNISTClassifier()
    try:
        model.load_state_dict(state)
    except Exception as e:
        report(state_error=f"{{type(e).__name__}}: {{e}}"[:600]); sys.exit(0)
    model.eval()
    with torch.no_grad():
        pred = model(lab.test_x).argmax(1)
    report(accuracy=(pred == lab.test_y).float().mean().item(), synthetic=lab.is_synthetic())
'''

# Calls fn(model, loader, optimizer, criterion, device) -- the notebook's train_one_epoch -- with
# batches that remember whether .to()/.cuda() moved them, and a model/criterion that look.
_MOVES_BATCH_PROBE = '''
import runpy, sys
import torch
from torch import nn
from tutor.lab import MNISTClassifier, device, report

class Tracked(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {{}})
        if func in (torch.Tensor.to, torch.Tensor.cuda) and isinstance(out, Tracked):
            if out is args[0]:
                # Already there (.to("cpu") on the CPU returns the same tensor): hand back a new
                # one, as a real move would, so a dropped result still counts as not moved.
                with torch._C.DisableTorchFunctionSubclass():
                    out = out.view_as(out).as_subclass(Tracked)
            out._moved = True
        return out

seen = {{"inputs": [], "targets": []}}

class Spy(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MNISTClassifier()
    def forward(self, x):
        seen["inputs"].append(bool(getattr(x, "_moved", False)) and x.device.type == device.type)
        return self.inner(x.as_subclass(torch.Tensor))

class SpyLoss(nn.Module):
    def forward(self, out, y):
        seen["targets"].append(bool(getattr(y, "_moved", False)) and y.device.type == device.type)
        return nn.functional.cross_entropy(out.as_subclass(torch.Tensor), y.as_subclass(torch.Tensor))

g = torch.Generator().manual_seed(0)
batches = [(torch.randn(8, 1, 28, 28, generator=g).as_subclass(Tracked),
            torch.randint(0, 10, (8,), generator=g).as_subclass(Tracked)) for _ in range(3)]
module = runpy.run_path({solution!r}, run_name="gpututor_probe")
fn = module.get({name!r})
if not callable(fn):
    report(probe_error="no function named " + {name!r} + " in your code"); sys.exit(0)
model = Spy().to(device)
try:
    fn(model, batches, torch.optim.SGD(model.parameters(), lr=0.01), SpyLoss(), device)
except Exception as e:
    report(probe_error=f"calling {name}(model, loader, optimizer, criterion, device) raised "
                       f"{{type(e).__name__}}: {{e}}"[:600]); sys.exit(0)
report(batches_seen=len(seen["inputs"]), inputs_moved=bool(seen["inputs"]) and all(seen["inputs"]),
       targets_moved=bool(seen["targets"]) and all(seen["targets"]))
'''

from tutor.probes import PROBES  # noqa: E402 - the names lint checks against


def _probe(code: str, workdir: Path, memory_mb: int, cancelled: Callable[[], bool]) -> tuple[dict, SandboxResult]:
    result = run_code(code, workdir, timeout=CHECK_TIMEOUT_S, memory_mb=memory_mb, cancelled=cancelled)
    return result.reports, result


# ---------------------------------------------------------------- requirement checks


def _inside(workdir: Path, rel: str) -> Path | None:
    path = (workdir / rel).resolve()
    root = workdir.resolve()
    return path if path == root or root in path.parents else None


def _check_report(req: ReportRequirement, reports: dict[str, Any]) -> tuple[bool, str]:
    if req.name not in reports:
        return False, f"{req.feedback} (your program did not report {req.name}: call report({req.name}=...))"
    value = reports[req.name]
    number = _finite(value)
    if req.equals is not None:
        if isinstance(req.equals, bool):
            ok = value is req.equals
        elif isinstance(req.equals, (int, float)):
            ok = number is not None and math.isclose(number, req.equals, rel_tol=1e-9, abs_tol=1e-12)
        else:
            ok = str(value) == req.equals
        return ok, "" if ok else f"{req.feedback} (you reported {req.name}={_brief(value)})"
    if req.min is not None or req.max is not None:
        if number is None:
            return False, f"{req.feedback} (you reported {req.name}={_brief(value)}, which is not a finite number)"
        if (req.min is not None and number < req.min) or (req.max is not None and number > req.max):
            return False, f"{req.feedback} (you reported {req.name}={number:.4g})"
    return True, ""


def _finite(value: Any) -> float | None:
    """A reported number as a finite float; None for text, bools, nan, inf, ints past float range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _brief(value: Any, limit: int = 80) -> str:
    """What the learner reported, as feedback quotes it: a megabyte string is not repeated."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int too long to print, a deeply nested list
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_file(req: FileRequirement, workdir: Path, memory_mb: int, cancelled: Callable[[], bool],
                notes: list[str], accuracy_bars: bool = True) -> tuple[bool, str]:
    path = _inside(workdir, req.path)
    if path is None or not path.is_file():
        return False, f"{req.feedback} (no file {req.path} was written)"
    if not req.checkpoint:
        return True, ""
    want = req.min_accuracy is not None or req.min_accuracy_synthetic is not None
    code = _CHECKPOINT_PROBE.format(path=str(path), keys=list(req.keys), want=want)
    reports, run = _probe(code, workdir / ".checker" / req.id, memory_mb, cancelled)
    if "load_error" in reports:
        return False, (f"{req.feedback} ({req.path} does not load with torch.load(map_location=\"cpu\", "
                       f"weights_only=True): {reports['load_error']})")
    if not reports.get("loaded"):
        return False, f"{req.feedback} (the checker could not load {req.path}: {run.problem() or 'no result'})"
    missing = [k for k in str(reports.get("missing_keys", "")).split(",") if k]
    if missing:
        return False, (f"{req.feedback} ({req.path} lacks {', '.join(missing)}; "
                       f"it has: {reports.get('present_keys') or 'no keys'})")
    if not want:
        return True, ""
    if "state_error" in reports:
        return False, f"{req.feedback} (MNISTClassifier cannot use it: {reports['state_error']})"
    if "accuracy" not in reports:
        return False, f"{req.feedback} (the checker could not evaluate it: {run.problem() or 'no result'})"
    accuracy = float(reports["accuracy"])
    synthetic = bool(reports.get("synthetic"))
    bar = req.min_accuracy_synthetic if synthetic and req.min_accuracy_synthetic is not None else req.min_accuracy
    notes.append(f"{req.path}: test accuracy {accuracy:.2%}" + (" (synthetic digits: MNIST absent)" if synthetic else "")
                 + ("" if accuracy_bars or bar is None else f" (the {bar:.0%} bar is not applied on a data slice)"))
    if bar is not None and accuracy < bar and accuracy_bars:
        return False, f"{req.feedback} (its test accuracy is {accuracy:.2%}; at least {bar:.0%} is needed)"
    return True, ""


def _check_function(req: FunctionRequirement, workdir: Path, memory_mb: int,
                    cancelled: Callable[[], bool]) -> tuple[bool, str]:
    if req.probe != "moves_batch_to_device":
        return False, f"the tutor has no probe {req.probe!r} (a lesson error; known: {', '.join(sorted(PROBES))})"
    code = _MOVES_BATCH_PROBE.format(solution=str((workdir / SOLUTION).resolve()), name=req.name)
    reports, run = _probe(code, workdir / ".checker" / req.id, memory_mb, cancelled)
    if "probe_error" in reports:
        return False, f"{req.feedback} ({reports['probe_error']})"
    if "batches_seen" not in reports:
        why = run.problem() or "it gave no result"
        return False, (f"{req.feedback} (the checker could not call {req.name}: {why}; keep top-level work "
                       "under `if __name__ == \"__main__\":`)")
    if not reports.get("batches_seen"):
        return False, f"{req.feedback} ({req.name} never ran the model on a batch)"
    if not reports.get("inputs_moved"):
        return False, f"{req.feedback} ({req.name} gives the model images that were not moved with .to(device))"
    if not reports.get("targets_moved"):
        return False, f"{req.feedback} ({req.name} gives the loss labels that were not moved with .to(device))"
    return True, ""


def grade_exercise(
    step: ExerciseStep,
    code: str,
    workdir: Path,
    *,
    on_output: Callable[[str], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    accuracy_bars: bool = True,
) -> ExerciseResult:
    """Run `code` for `step` in `workdir` (a per-exercise scratch dir) and check its requirements.

    accuracy_bars=False (`lesson test` on a slice of the data) still loads and evaluates a
    checkpoint, and notes its accuracy, but does not hold it to `min_accuracy`."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for req in step.requirements:  # a file left by an earlier run must not pass this one
        if isinstance(req, FileRequirement) and (p := _inside(workdir, req.path)) is not None and p.is_file():
            p.unlink()
    run = run_code(code, workdir, timeout=step.timeout, memory_mb=step.memory_mb,
                   on_output=on_output, cancelled=cancelled)
    stopped = run.problem()
    # A "break it on purpose" exercise wants an exception: the one it names is success, not a stop.
    expected = [r for r in step.requirements if isinstance(r, ErrorRequirement)]
    raised_as_expected = bool(expected) and all(_error_matches(r, run) for r in expected)
    if raised_as_expected:
        stopped = None
    source = strip_comments(code)
    results: list[RequirementResult] = []
    notes: list[str] = []
    for req in step.requirements:
        judged = True
        if isinstance(req, ErrorRequirement):
            ok = _error_matches(req, run)
            fb = "" if ok else _error_feedback(req, run)
            results.append(RequirementResult(req.id, req.type, ok, fb, True))
            continue
        if isinstance(req, (OutputRequirement, SourceRequirement)):
            found = _search(req.pattern, run.output if isinstance(req, OutputRequirement) else source)
            if found is None:
                ok, fb = False, f"the lesson's pattern for {req.id!r} is not a valid regex"
            else:
                ok = found != req.absent
                fb = "" if ok else req.feedback
        elif isinstance(req, ReportRequirement):
            ok, fb = _check_report(req, run.reports)
        elif isinstance(req, FileRequirement):
            ok, fb = _check_file(req, workdir, step.memory_mb, cancelled, notes, accuracy_bars)
        elif isinstance(req, FunctionRequirement):
            if run.error_type == "SyntaxError":
                ok, fb = False, f"{req.feedback} (your code does not compile yet)"
            else:
                ok, fb = _check_function(req, workdir, step.memory_mb, cancelled)
        else:  # pragma: no cover - the lesson model admits no other type
            ok, fb = False, f"unknown requirement type {type(req).__name__}"
        if not ok and stopped and not isinstance(req, SourceRequirement):
            # What the program would have printed, reported or written after it stopped is unknown:
            # the lesson's feedback for a wrong outcome would blame the wrong thing.
            judged, fb = False, "not checked: the program stopped before it got this far"
        results.append(RequirementResult(req.id, req.type, ok, fb, judged))
    clean = run.ok or (raised_as_expected and not (run.timed_out or run.cancelled or run.memory_error))
    return ExerciseResult(clean and all(r.passed for r in results), results, run,
                          _summary(results, stopped), run.traceback, _hint(step, results, stopped), notes)


def source_requirement_met(req: SourceRequirement, code: str) -> bool | None:
    """A source requirement judged as the grader does (on the code, comments removed), without
    running it; None when the pattern is not a valid regex."""
    found = _search(req.pattern, strip_comments(code))
    return None if found is None else found != req.absent


def _error_matches(req: ErrorRequirement, run: SandboxResult) -> bool:
    if run.error_type != req.error:
        return False
    return not req.pattern or bool(_search(req.pattern, run.error_message or ""))


def _error_feedback(req: ErrorRequirement, run: SandboxResult) -> str:
    """The lesson's feedback, plus what did happen (the learner needs both to adjust the break)."""
    if run.error_type is None:
        happened = "the program ran to the end without an error"
    elif run.error_type != req.error:
        happened = f"it raised {run.error_type}, not {req.error}: {run.error_message}"
    else:
        happened = f"it raised {run.error_type}, but with another message: {run.error_message}"
    return f"{req.feedback} (This time {happened}.)"


def _summary(results: list[RequirementResult], stopped: str | None) -> str:
    met = sum(r.passed for r in results)
    if met == len(results) and not stopped:
        return "the requirement is met" if len(results) == 1 else f"all {len(results)} requirements met"
    parts = [f"{met} of {len(results)} requirement{'s' if len(results) != 1 else ''} met"]
    failing = [r.id for r in results if not r.passed and r.judged]
    if failing:
        parts.append(f"{', '.join(failing)} not yet")
    unchecked = sum(not r.judged for r in results)
    if unchecked:
        parts.append(f"{unchecked} not checked")
    summary = ", ".join(parts)
    return f"{summary}; {stopped}" if stopped else summary


def _hint(step: ExerciseStep, results: list[RequirementResult], stopped: str | None) -> str | None:
    """The first real failure's feedback; else what stopped the program; else the step's hint."""
    failing = [r for r in results if not r.passed and r.judged]
    if failing:
        return failing[0].feedback
    if stopped:
        return f"Fix this first: {stopped}."
    if all(r.passed for r in results):
        return None
    return step.hint or None
