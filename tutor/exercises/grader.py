"""Grade a code exercise: run the learner's program in the sandbox, then check each requirement.

`grade_exercise(step, code, workdir)` -> ExerciseResult. Requirement types (tutor/course/lesson.py):
behaviour (what the program did, watched from inside its process: tutor/exercises/observe.py, judged by
tutor/exercises/behaviour.py), function (a named probe calls the learner's function with the checker's
inputs, in the same process once the program has finished: it never runs twice), report (a value
given to tutor.lab.report), file (written in the working directory; a checkpoint is loaded and
evaluated in a sandboxed process of its own, since a pickle is code), output (regex on what it
printed), source (regex on the code, comments stripped: a hint at most, since it reads spelling),
python (the lesson's own function judges the run: tutor/exercises/pack_grader.py).

Feedback puts the cause the run showed first, then the lesson's advice. No torch here: the
checker's torch work happens in subprocesses.
"""

from __future__ import annotations

import io
import json
import math
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.course.lesson import (
    BehaviourRequirement,
    ErrorRequirement,
    ExerciseStep,
    FileRequirement,
    FunctionRequirement,
    InspectRequirement,
    OutputRequirement,
    PythonRequirement,
    ReportRequirement,
    SourceRequirement,
)
from tutor.exercises import inspected
from tutor.exercises.behaviour import (
    PROBE_JUDGES,
    Context,
    Judgement,
    judge,
    judge_probe,
)
from tutor.exercises.child import per_rank, strip_escapes
from tutor.exercises.pack_grader import run_grader, snapshot, written_since
from tutor.exercises.sandbox import SandboxResult, run_code
from tutor.exercises.sandbox import prestart as sandbox_prestart
from tutor.measurement.slots import CHOICE_S, class_dir

CHECK_TIMEOUT_S = 180.0  # loading and evaluating a checkpoint on the CPU
OBSERVED = ".observed.json"  # what the program did (tutor/exercises/observe.py), written by the sandbox child
SNAPSHOTS = ".snapshots.pt"  # its weights at each evaluation, for a `best` checkpoint


def clean(text: str) -> str:
    """Text from PyTorch or a program as feedback shows it: no terminal escape codes."""
    return strip_escapes(text)


@dataclass(frozen=True)
class RequirementResult:
    id: str
    type: str
    passed: bool
    feedback: str  # empty when passed
    judged: bool = True  # False: the program stopped before this could be checked
    checker_error: str = (
        ""  # the lesson's own grader failed: its traceback, for the author (never shown to the learner)
    )
    title: str = ""  # the requirement's title in the lesson, if it has one

    @property
    def name(self) -> str:
        """What the learner reads for it: its title, or its id in words ("each rank its share")."""
        return self.title or self.id.replace("-", " ")

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.name,
            "type": self.type,
            "passed": self.passed,
            "feedback": self.feedback,
            "judged": self.judged,
            "checker_error": self.checker_error,
        }


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
            "passed": self.passed,
            "summary": self.summary,
            "hint": self.hint,
            "requirements": [r.as_dict() for r in self.requirements],
            "output": sb.output,
            "dropped_bytes": sb.dropped_bytes,
            "traceback": self.traceback,
            "error_type": sb.error_type,
            "error_line": sb.error_line,
            "exit_code": sb.exit_code,
            "signal": sb.signal,
            "timed_out": sb.timed_out,
            "cancelled": sb.cancelled,
            "memory_error": sb.memory_error,
            "reports": sb.reports,
            "seconds": sb.seconds,
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

NEAR_TIE_IMAGES = 3  # a best-epoch check's tolerance: see _best_verdict

_CHECKPOINT_PROBE = r"""
import os, re, sys
import torch
from tutor.lab import report
path, keys, want_accuracy, snapshots = {path!r}, {keys!r}, {want!r}, {snapshots!r}
try:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
except Exception as e:
    text = str(e)
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        name = found.group(1)
        kind = "other"
        if name.startswith("numpy"):
            kind = "numpy"
        else:
            import importlib
            module, _, attr = name.rpartition(".")
            try:
                obj = getattr(importlib.import_module(module), attr)
                kind = "module" if isinstance(obj, type) and issubclass(obj, torch.nn.Module) else "other"
            except Exception:
                kind = "main" if module == "__main__" else "other"  # a class the program defined
        report(load_refused=name, load_refused_kind=kind)
    else:
        report(load_error=f"{{type(e).__name__}}: {{text.splitlines()[0] if text else ''}}"[:400])
    sys.exit(0)
report(loaded=True)
if isinstance(ckpt, torch.nn.Module):
    report(load_refused=type(ckpt).__name__, load_refused_kind="module"); sys.exit(0)
names = [str(k) for k in ckpt] if isinstance(ckpt, dict) else []
report(missing_keys=",".join(k for k in keys if k not in names), present_keys=",".join(names[:30]))
state = ckpt.get("model_state_dict") if isinstance(ckpt, dict) else None
if state is None and isinstance(ckpt, dict) and ckpt and all(isinstance(v, torch.Tensor) for v in ckpt.values()):
    state = ckpt  # a bare state_dict
if want_accuracy or snapshots:
    from tutor import lab
    from tutor.lab import MNISTClassifier
    if not isinstance(state, dict):
        report(state_error="the checkpoint has no model_state_dict"); sys.exit(0)
    model = MNISTClassifier()
    try:
        model.load_state_dict(state)
    except Exception as e:
        wrapped = [str(k) for k in state if str(k).startswith("module.")]
        if wrapped and len(wrapped) == len(state):
            report(state_prefix="module.", state_first=wrapped[0])
        report(state_error=f"{{type(e).__name__}}: {{e}}"[:600]); sys.exit(0)
    images, labels = lab.test_set.tensors  # lab.test_x's images, read without torchvision: seconds sooner
    def accuracy(m):
        m.eval()
        with torch.no_grad():
            return (m(images).argmax(1) == labels).float().mean().item()
    report(accuracy=accuracy(model), synthetic=lab.is_synthetic())
if snapshots and os.path.exists(snapshots) and isinstance(state, dict):
    taken = torch.load(snapshots, map_location="cpu", weights_only=True)
    same = [s for s in taken if set(s["state"]) == set(state)
            and all(torch.equal(s["state"][k], state[k].to(s["state"][k].dtype)) for k in state)]
    if same:
        mine = [s for s in taken if s["model"] == same[-1]["model"]]
        scores = []
        for s in mine:
            m = MNISTClassifier()
            m.load_state_dict(s["state"])
            scores.append(accuracy(m))
        report(saved_epoch=same[-1]["phase"], epochs_seen=len(mine), test_images=len(labels),
               epoch_accuracies=",".join(f"{{a:.6f}}" for a in scores))
    else:
        report(saved_epoch=0, epochs_seen=len(taken))
"""

from tutor.exercises.names import PROBES  # noqa: E402 - the names lint checks against


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
        # The real reason first: the lesson's feedback is about a wrong value, not a missing one.
        return False, (
            f"Your program did not report {req.name}: call report({req.name}=...) "
            "once it has the value (the starter's report(...) line does)."
        )
    value = reports[req.name]
    number = _finite(value)
    if req.equals is not None:
        if isinstance(req.equals, bool):
            ok = value is req.equals
        elif isinstance(req.equals, (int, float)):
            ok = number is not None and math.isclose(number, req.equals, rel_tol=1e-9, abs_tol=1e-12)
        else:
            ok = str(value) == req.equals
        return ok, "" if ok else f"You reported {req.name}={_brief(value)}. {req.feedback}"
    if req.min is not None or req.max is not None:
        if number is None:
            return False, f"You reported {req.name}={_brief(value)}, which is not a finite number. {req.feedback}"
        if (req.min is not None and number < req.min) or (req.max is not None and number > req.max):
            return False, f"You reported {req.name}={number:.4g}. {req.feedback}"
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


def _refused(path: str, name: str, kind: str) -> str:
    """Why torch.load(weights_only=True) refused the file, named as the learner's mistake."""
    if kind == "module":
        return (
            f"{path} holds the model object ({name.rsplit('.', 1)[-1]}), which torch.load(..., "
            "weights_only=True) refuses: a pickled object is code. Save model.state_dict() instead "
            "(in a dict, with the other entries)."
        )
    if kind == "numpy":
        return (
            f"{path} holds a NumPy value ({name}), which torch.load(..., weights_only=True) refuses. "
            "Save plain Python numbers: float(value), or loss.item() for a tensor."
        )
    return (
        f"{path} holds an object of type {name}, which torch.load(..., weights_only=True) refuses. "
        "Save state_dicts, tensors and plain numbers or text only."
    )


def _check_file(
    req: FileRequirement,
    workdir: Path,
    memory_mb: int,
    cancelled: Callable[[], bool],
    notes: list[str],
    accuracy_bars: bool = True,
    observed: dict[str, Any] | None = None,
) -> tuple[bool, str]:
    path = _inside(workdir, req.path)
    if path is None or not path.is_file():
        return False, f"No file {req.path} was written. {req.feedback}"
    if not req.checkpoint:
        return True, ""
    want = req.min_accuracy is not None or req.min_accuracy_synthetic is not None
    snapshots = workdir / SNAPSHOTS if req.best and (workdir / SNAPSHOTS).is_file() else None
    code = _CHECKPOINT_PROBE.format(
        path=str(path), keys=list(req.keys), want=want, snapshots=str(snapshots) if snapshots else ""
    )
    reports, run = _probe(code, workdir / ".checker" / req.id, memory_mb, cancelled)
    if "load_refused" in reports:
        kind = str(reports.get("load_refused_kind"))
        if kind == "main":  # a class of the program's own: the run saw whether it was a model
            saves = (observed or {}).get("saves")
            saved = (
                [e for e in saves if isinstance(e, dict) and e.get("path") == str(path)]
                if isinstance(saves, list)
                else []
            )
            kind = "module" if any(e.get("modules") for e in saved) else "other"
        return False, _refused(req.path, str(reports["load_refused"]), kind)
    if "load_error" in reports:
        return False, (
            f'{req.path} does not load with torch.load(map_location="cpu", weights_only=True): '
            f"{clean(str(reports['load_error']))}. {req.feedback}"
        )
    if not reports.get("loaded"):
        return False, f"The checker could not load {req.path}: {clean(run.problem() or 'no result')}."
    missing = [k for k in str(reports.get("missing_keys", "")).split(",") if k]
    if missing:
        return False, (
            f"{req.path} lacks {', '.join(missing)} (it has: {reports.get('present_keys') or 'no keys'}). "
            f"{req.feedback}"
        )
    if reports.get("state_prefix") == "module.":
        return False, (
            f"The weights in {req.path} are named {reports.get('state_first', 'module.…')} and so on: "
            "that is the DistributedDataParallel wrapper's state_dict, whose names all start with "
            "'module.', so a plain MNISTClassifier cannot load them. Save model.module.state_dict(), "
            f"the weights of the model inside the wrapper. {req.feedback}"
        )
    if "state_error" in reports:
        return False, f"MNISTClassifier cannot use the weights in {req.path}: {clean(str(reports['state_error']))}"
    if want and "accuracy" not in reports:
        return False, f"The checker could not evaluate {req.path}: {clean(run.problem() or 'no result')}."
    if want:
        accuracy = float(reports["accuracy"])
        synthetic = bool(reports.get("synthetic"))
        bar = req.min_accuracy_synthetic if synthetic and req.min_accuracy_synthetic is not None else req.min_accuracy
        notes.append(
            f"{req.path}: test accuracy {accuracy:.2%}"
            + (" (synthetic digits: MNIST absent)" if synthetic else "")
            + ("" if accuracy_bars or bar is None else f" (the {bar:.0%} bar is not applied on a data slice)")
        )
    if req.best:
        verdict = _best_verdict(req, reports, notes, on_accelerator=_trained_off_cpu(observed))
        if verdict is not None:
            return False, verdict
    if want and bar is not None and accuracy < bar and accuracy_bars:
        return False, f"{req.path} reaches {accuracy:.2%} test accuracy; at least {bar:.0%} is needed. {req.feedback}"
    return True, ""


def _trained_off_cpu(observed: dict[str, Any] | None) -> bool:
    """Did a model the program trained have its weights on a GPU (cuda, mps)?"""
    models = (observed or {}).get("models")
    return isinstance(models, list) and any(
        str(key).split("/")[0] != "cpu" for m in models if isinstance(m, dict) for key in (m.get("devices") or {})
    )


def _best_verdict(
    req: FileRequirement, reports: dict[str, Any], notes: list[str], on_accelerator: bool = True
) -> str | None:
    """Whether the saved weights are the best the run evaluated; None when they are (or the
    run cannot tell: then a note says so)."""
    epoch = reports.get("saved_epoch")
    scores = [float(a) for a in str(reports.get("epoch_accuracies", "")).split(",") if a]
    if not isinstance(epoch, int) or not 0 < epoch <= len(scores):
        notes.append(
            f"{req.path}: could not match its weights with an evaluation in the run, so which epoch it "
            "holds is not checked"
        )
        return None
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    held = scores[int(epoch) - 1]
    # The program picked its epoch by its own evaluation (on a GPU, maybe under autocast), these
    # scores are the CPU's: on near-tied epochs a few images' argmax can flip between the two, so
    # a gap of up to NEAR_TIE_IMAGES test images is a tie, not a worse epoch kept.
    # On a CPU both evaluations are the same computation: no slack there.
    images = reports.get("test_images")
    slack = NEAR_TIE_IMAGES / images if on_accelerator and isinstance(images, int) and images > 0 else 0.0
    if held + slack + 1e-9 < scores[best]:  # 1e-9: the scores travel as 6-decimal text
        return (
            f"{req.path} holds the weights of epoch {epoch} ({held:.2%} test accuracy), but epoch {best + 1} "
            f"reached {scores[best]:.2%}: the file kept {'an earlier' if int(epoch) - 1 < best else 'a later'}, worse "
            f"epoch. {req.feedback}"
        )
    if held + 1e-9 < scores[best]:
        notes.append(
            f"{req.path}: the weights of epoch {epoch} of {len(scores)} ({held:.2%}), within "
            f"{NEAR_TIE_IMAGES} test images of epoch {best + 1}'s {scores[best]:.2%}: a tie"
        )
    else:
        notes.append(f"{req.path}: the weights of epoch {epoch} of {len(scores)}, the best ({held:.2%})")
    return None


def _check_function(req: FunctionRequirement, observed: dict[str, Any] | None, run: SandboxResult) -> tuple[bool, str]:
    if req.probe not in PROBES:
        return False, f"the tutor has no probe {req.probe!r} (a lesson error; known: {', '.join(sorted(PROBES))})"
    probes = (observed or {}).get("probes")
    result = probes.get(req.id) if isinstance(probes, dict) else None
    if not isinstance(result, dict):
        why = (observed or {}).get("probes_error") or run.problem() or "it gave no result"
        return False, f"The checker could not call {req.name}: {clean(str(why))}."
    if result.get("missing"):
        return False, (
            f"Your program defines no function {req.name} at the top level of the file; the checker "
            f"calls it with inputs of its own. {req.feedback}"
        )
    if "error" in result:
        return False, f"{clean(str(result['error']))}. {req.feedback}"
    if req.probe in PROBE_JUDGES:  # the memory techniques' probes: judged in tutor/exercises/behaviour.py
        verdict = judge_probe(req.probe, result, req.name)
        if verdict.passed:
            return True, ""
        return False, f"{clean(verdict.cause)} {req.feedback}" if verdict.advice else clean(verdict.cause)
    if req.probe == "picks_device":
        answers = result.get("answers")
        answers = {str(k): str(v) for k, v in answers.items()} if isinstance(answers, dict) else {}
        # MPS is a bonus (the course's own script knows only CUDA): the CPU is a fine answer there.
        allowed = {"cuda": {"cuda"}, "mps": {"mps", "cpu"}, "cpu": {"cpu"}}
        wrong = [
            f"on a {machine} machine it returned {got}"
            for machine, got in answers.items()
            if got not in allowed.get(machine, {machine})
        ]
        if wrong:
            return False, f"{req.name}() does not follow the machine: {'; '.join(wrong)}. {req.feedback}"
        return True, ""
    if not result.get("batches_seen"):
        return False, f"{req.name} never ran the model on a batch. {req.feedback}"
    if not result.get("inputs_moved"):
        return False, (
            f"{req.name} hands the model images that did not come out of .to(device) (a dropped "
            f".to() result counts: it returns a copy). {req.feedback}"
        )
    if not result.get("targets_moved"):
        return False, f"{req.name} hands the loss labels that did not come out of .to(device). {req.feedback}"
    return True, ""


def _read_observed(path: Path) -> dict[str, Any] | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            data = json.loads(f.read(8_000_000))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _read_ranks_observed(workdir: Path, nproc: int) -> dict[str, Any] | None:
    """What each rank of a launch did: rank 0's summary, with every rank's under "ranks" (index =
    rank; None for a rank that wrote none), for the checks that compare them."""
    ranks = [_read_observed(Path(per_rank(str(workdir / OBSERVED), rank))) for rank in range(nproc)]
    if all(summary is None for summary in ranks):
        return None
    observed = dict(ranks[0]) if ranks[0] is not None else {}
    observed["ranks"] = ranks
    return observed


def _observe_env(step: ExerciseStep, workdir: Path) -> dict[str, str]:
    """What the sandbox child should watch for this step's requirements."""
    watched = [
        r
        for r in step.requirements
        if isinstance(r, (BehaviourRequirement, FunctionRequirement)) or (isinstance(r, FileRequirement) and r.best)
    ]
    if not watched:
        return {}
    env = {"GPUTUTOR_OBSERVE": str((workdir / OBSERVED).resolve())}
    probes = [
        {"id": r.id, "name": r.name, "probe": r.probe} for r in step.requirements if isinstance(r, FunctionRequirement)
    ]
    if probes:
        env["GPUTUTOR_PROBES"] = json.dumps(probes)
    if any(isinstance(r, FileRequirement) and r.best for r in step.requirements):
        env["GPUTUTOR_OBSERVE_SNAPSHOTS"] = str((workdir / SNAPSHOTS).resolve())
    return env


def prestart(step: ExerciseStep, workdir: Path) -> bool:
    """Warm what `grade_exercise(step, ..., workdir)` will start its program from (the fork
    server; a torchrun step launches its ranks afresh each time); blocks while it starts."""
    if step.nproc:
        return False
    return sandbox_prestart(memory_mb=step.memory_mb, env=_observe_env(step, Path(workdir)))


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
    nproc = step.nproc
    for stale in (OBSERVED, SNAPSHOTS, *(per_rank(OBSERVED, rank) for rank in range(nproc or 0))):
        (workdir / stale).unlink(missing_ok=True)
    graded_by_pack = any(isinstance(r, PythonRequirement) for r in step.requirements)
    before = snapshot(workdir) if graded_by_pack else {}  # a lesson's grader sees only this run's files
    run = run_code(
        code,
        workdir,
        timeout=step.timeout + (CHOICE_S if class_dir() else 0.0),  # a minute in the class queue at most
        memory_mb=step.memory_mb,
        on_output=on_output,
        cancelled=cancelled,
        env=_observe_env(step, workdir),
        nproc=nproc,
    )
    observed = _read_ranks_observed(workdir, nproc) if nproc else _read_observed(workdir / OBSERVED)
    stopped = run.problem()
    # A "break it on purpose" exercise wants an exception: the one it names is success, not a stop.
    expected = [r for r in step.requirements if isinstance(r, ErrorRequirement)]
    raised_as_expected = bool(expected) and all(_error_matches(r, run) for r in expected)
    if raised_as_expected:
        stopped = None
    source = strip_comments(code)
    written = written_since(workdir, before) if graded_by_pack else []
    context = Context(
        observed or {}, code, run.error_type, run.error_message, stopped=bool(stopped), reports=run.reports
    )
    results: list[RequirementResult] = []
    notes: list[str] = []
    watched: inspected.Watched | None = None  # the program under `gpututor inspect`, once for all its requirements
    for req in step.requirements:
        judged = True
        explains_stop = False
        checker_error = ""
        if isinstance(req, ErrorRequirement):
            ok = _error_matches(req, run)
            fb = "" if ok else _error_feedback(req, run)
            results.append(RequirementResult(req.id, req.type, ok, fb, True, title=req.title))
            continue
        if isinstance(req, (OutputRequirement, SourceRequirement)):
            found = _search(req.pattern, run.output if isinstance(req, OutputRequirement) else source)
            if found is None:
                ok, fb = False, f"the lesson's pattern for {req.id!r} is not a valid regex"
            else:
                ok = found != req.absent
                fb = "" if ok else req.feedback
        elif isinstance(req, BehaviourRequirement):
            verdict = _behaviour(req, context, observed, run)
            ok, judged, explains_stop = verdict.passed, verdict.judged, verdict.explains_stop
            fb = "" if ok else (f"{verdict.cause} {req.feedback}" if judged else f"not checked: {verdict.cause}")
        elif isinstance(req, ReportRequirement):
            ok, fb = _check_report(req, run.reports)
        elif isinstance(req, FileRequirement):
            ok, fb = _check_file(req, workdir, step.memory_mb, cancelled, notes, accuracy_bars, observed)
            # What the file holds is a fact even when the program then stopped (often at its own
            # torch.load of that very file).
            explains_stop = not ok and "torch.load(..., weights_only=True) refuses" in fb
        elif isinstance(req, FunctionRequirement):
            if run.error_type == "SyntaxError":
                ok, fb = False, f"Your code does not compile yet. {req.feedback}"
            else:
                ok, fb = _check_function(req, observed, run)
                fallback = PROBE_SEEN_AS.get(req.probe)
                if not ok and stopped and observed is not None and fallback and not _probed(req, observed):
                    # The probe runs after the program: a stop (a GPU's device mismatch) left it unrun,
                    # but what the program did while training may already name the cause.
                    seen = judge(fallback, context)
                    if not seen.passed and seen.explains_stop:
                        ok, fb, explains_stop = False, f"{seen.cause} {req.feedback}", True
        elif isinstance(req, InspectRequirement):
            if watched is None:
                watched = inspected.watch(code, workdir, inspected.LEARNER_FILE, step, cancelled)
            ok, judged, fb = inspected.check(req, step, watched, workdir, cancelled)
            if ok and fb:
                notes.append(fb)  # the measured gain, said beside the pass
                fb = ""
        elif isinstance(req, PythonRequirement):
            graded = run_grader(
                req,
                step_id=step.id,
                code=code,
                run=run,
                workdir=workdir,
                written=written,
                quick=not accuracy_bars,
                cancelled=cancelled,
            )
            ok = graded.passed
            if graded.cancelled:
                ok, judged, fb = False, False, "not checked: the run was stopped"
            elif graded.failure is not None:
                fb, checker_error = graded.failure, graded.detail or graded.failure
            else:
                fb = "" if ok else graded.feedback or req.feedback
        else:  # pragma: no cover - the lesson model admits no other type
            ok, fb = False, f"unknown requirement type {type(req).__name__}"
        if not ok and stopped and judged and not explains_stop and not isinstance(req, SourceRequirement):
            # What the program would have printed, reported or written after it stopped is unknown:
            # the lesson's feedback for a wrong outcome would blame the wrong thing.
            judged, fb = False, "not checked: the program stopped before it got this far"
        elif checker_error:
            judged = False  # the checker's fault: not held against the learner
        results.append(RequirementResult(req.id, req.type, ok, clean(fb), judged, checker_error, req.title))
    finished = run.ok or (raised_as_expected and not (run.timed_out or run.cancelled or run.memory_error))
    return ExerciseResult(
        finished and all(r.passed for r in results),
        results,
        run,
        _summary(results, stopped),
        run.traceback,
        _hint(step, results, stopped),
        notes,
    )


# A probe, and the behaviour judge that tells the same from what the observer saw while the
# program ran: used when the program stopped before the probe could be called.
PROBE_SEEN_AS = {"moves_batch_to_device": "batches_on_device"}


def _probed(req: FunctionRequirement, observed: dict[str, Any]) -> bool:
    probes = observed.get("probes")
    return isinstance(probes, dict) and isinstance(probes.get(req.id), dict)


def _behaviour(
    req: BehaviourRequirement, context: Context, observed: dict[str, Any] | None, run: SandboxResult
) -> Judgement:
    if observed is None:
        if run.error_type == "SyntaxError":
            return Judgement(False, "your code does not compile yet", judged=False)
        return Judgement(False, "the program stopped before the checker could see what it did", judged=False)
    return judge(req.check, context)


def source_requirement_met(req: SourceRequirement, code: str) -> bool | None:
    """A source requirement judged as the grader does (on the code, comments removed), without
    running it; None when the pattern is not a valid regex."""
    found = _search(req.pattern, strip_comments(code))
    return None if found is None else found != req.absent


def _error_matches(req: ErrorRequirement, run: SandboxResult) -> bool:
    if run.error_type not in req.errors:
        return False
    return not req.pattern or bool(_search(req.pattern, run.error_message or ""))


def _error_feedback(req: ErrorRequirement, run: SandboxResult) -> str:
    """The lesson's feedback, plus what did happen (the learner needs both to adjust the break)."""
    if run.error_type is None:
        happened = "the program ran to the end without an error"
    elif run.error_type not in req.errors:
        happened = f"it raised {run.error_type}, not {' or '.join(req.errors)}: {run.error_message}"
    else:
        happened = f"it raised {run.error_type}, but with another message: {run.error_message}"
    return f"{req.feedback} (This time {happened}.)"


def _summary(results: list[RequirementResult], stopped: str | None) -> str:
    met = sum(r.passed for r in results)
    if met == len(results) and not stopped:
        return "the requirement is met" if len(results) == 1 else f"all {len(results)} requirements met"
    parts = [f"{met} of {len(results)} requirement{'s' if len(results) != 1 else ''} met"]
    failing = [f"“{r.name}”" for r in results if not r.passed and r.judged]
    if failing:
        parts.append(f"{', '.join(failing[:-1])} and {failing[-1]}" if len(failing) > 1 else failing[0])
        parts[-1] += " not yet"
    unchecked = sum(not r.judged for r in results)
    if unchecked:
        parts.append(f"{unchecked} not checked")
    summary = ", ".join(parts)
    return f"{summary}; {stopped}" if stopped else summary


def _hint(step: ExerciseStep, results: list[RequirementResult], stopped: str | None) -> str | None:
    """The first real failure's feedback; else what stopped the program; else the step's hint."""
    failing = [r for r in results if not r.passed and r.judged]
    if stopped:  # a failure judged although the program stopped is the reason it stopped: say it first
        failing.sort(key=lambda r: r.type != "behaviour")
    if failing:
        return failing[0].feedback
    if stopped:
        return f"Fix this first: {stopped}."
    broken = [r for r in results if r.checker_error]
    if broken:  # nothing the learner can fix: say so rather than hint
        return broken[0].feedback
    if all(r.passed for r in results):
        return None
    return step.tiered_hints[0] if step.tiered_hints else None
