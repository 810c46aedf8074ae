"""A lesson's own grader (a `python` requirement): the author's function judges the learner's run.

`grader: "grading.py:check_losses"` names a file beside the lesson and a function in it. After the
learner's program ended, the grading process starts `python -P -m tutor.exercises.pack_grader JOB`,
which imports that file and calls the function with one `LearnerRun` (what the program reported,
printed and wrote, read-only); it returns True/False or (passed, feedback).

Why a process of its own, not a thread of the grading process: a thread that overruns cannot be
stopped (the TUI would keep a spinning grader for good), and an author's bug (a crash, sys.exit,
a flood of memory) must not take the tutor with it. A process is killed with its whole group at
the time limit. It is not the learner's sandbox either: the program has ended (its process group
killed) before the grader starts, and the learner's folder is never on the grader's import path
(`-P`; the grader's own folder is), so a file the program wrote cannot stand in for a module.

The learner never sees a traceback: a grader that raises, overruns or returns something else is
"this exercise's checker failed" (the lesson's fault), with the traceback kept for the author
(`RequirementResult.checker_error`: `gpututor exercise --json`, `lesson test`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tutor.course.lesson import PythonRequirement
    from tutor.exercises.sandbox import SandboxResult

JOB_INPUT, JOB_RESULT, JOB_LOG = "job.json", "result.json", "grader.log"
LOG_TAIL = 4000  # characters of what a grader printed, kept for its author
MAX_FEEDBACK = 2000
MAX_LISTED = 10_000  # files a run may leave that the grader can see
# The tutor's own files in the working directory: not the program's.
OWN = frozenset({"solution.py", ".reports.jsonl", ".error.json", ".observed.json", ".snapshots.pt"})
CHECKER_DIR = ".checker"


# ---------------------------------------------------------------- what a grader receives


class MissingReport(KeyError):
    """run.reports[name] for a name the program did not report: the learner's miss, not the grader's."""


class MissingFile(FileNotFoundError):
    """A file the program did not write (in this run): the learner's miss, not the grader's."""


class Reports(Mapping[str, Any]):
    """The values the program gave `report(name=value)`: numbers, text, True/False. Read-only."""

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise MissingReport(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Reports({self._values!r})"


class Files:
    """The files the program wrote or changed in its working directory during this run (a file left
    by an earlier run is not here), by path relative to that directory, read-only."""

    def __init__(self, root: Path, written: list[str]) -> None:
        self._root = root
        self._written = frozenset(written)

    def names(self) -> list[str]:
        """Their relative paths ("out/losses.csv"), sorted."""
        return sorted(self._written)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._find(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def read_bytes(self, name: str) -> bytes:
        return self._path(name).read_bytes()

    def read_text(self, name: str) -> str:
        return self._path(name).read_text(encoding="utf-8", errors="replace")

    def open(self, name: str) -> IO[bytes]:
        """The file opened for reading, in binary: for torch.load(..., map_location="cpu", weights_only=True),
        csv, json."""
        return self._path(name).open("rb")

    def _find(self, name: str) -> Path | None:
        rel = Path(name).as_posix()
        if rel.startswith("./"):
            rel = rel[2:]
        if rel not in self._written:
            return None
        path = (self._root / rel).resolve()
        root = self._root.resolve()
        return path if root in path.parents and path.is_file() else None  # a symlink out is not the program's file

    def _path(self, name: str) -> Path:
        path = self._find(name)
        if path is None:
            raise MissingFile(name)
        return path

    def __repr__(self) -> str:
        return f"Files({self.names()!r})"


@dataclass(frozen=True)
class LearnerRun:
    """One run of the learner's program, as a grader function receives it."""

    step: str  # the exercise step's id
    requirement: str  # this requirement's id
    code: str  # the learner's program
    output: str  # what it printed, stdout and stderr together (a flood keeps its head and tail)
    reports: Reports  # report(name=value) values; a missing name is the learner's miss
    files: Files  # the files it wrote in its working directory, read-only
    finished: bool  # it ran to the end and exited 0
    stopped: str | None  # why it did not finish, in one sentence ("the program raised ValueError at line 3: ...")
    exit_code: int | None
    error_type: str | None  # the exception it stopped with ("RuntimeError"), or None
    error_message: str | None
    quick: bool  # `gpututor lesson test` without --full: the program ran on a slice of MNIST


# ---------------------------------------------------------------- the grading process's side


@dataclass(frozen=True)
class GraderVerdict:
    passed: bool
    feedback: str = ""  # the grader's words; "" leaves the requirement's own feedback
    failure: str | None = None  # the checker itself failed: one sentence for the learner
    detail: str = ""  # for the author: the traceback, what the grader printed
    cancelled: bool = False  # the learner stopped the run while the grader ran: no verdict


def checker_failed(why: str) -> str:
    return (
        f"This exercise's checker failed, so this was not checked: {why}. The fault is in the lesson, "
        "not in your program: tell the lesson's author."
    )


def snapshot(workdir: Path) -> dict[str, tuple[int, int, int]]:
    """What is in the working directory before a run, to tell which files the run wrote."""
    found: dict[str, tuple[int, int, int]] = {}
    for rel, st in _walk(workdir):
        found[rel] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return found


def _walk(workdir: Path) -> Iterator[tuple[str, os.stat_result]]:
    count = 0
    for folder, dirs, files in os.walk(workdir):  # symlinked folders are not followed
        here = Path(folder).relative_to(workdir)
        if here == Path("."):
            dirs[:] = [d for d in dirs if d != CHECKER_DIR]
        for name in files:
            rel = (here / name).as_posix()
            if here == Path(".") and name in OWN:
                continue
            try:
                st = os.stat(Path(folder) / name, follow_symlinks=False)
            except OSError:
                continue
            yield rel, st
            count += 1
            if count >= MAX_LISTED:
                return


def written_since(workdir: Path, before: dict[str, tuple[int, int, int]]) -> list[str]:
    return [rel for rel, st in _walk(workdir) if before.get(rel) != (st.st_ino, st.st_size, st.st_mtime_ns)]


def run_grader(
    req: PythonRequirement,
    *,
    step_id: str,
    code: str,
    run: SandboxResult,
    workdir: Path,
    written: list[str],
    quick: bool = False,
    cancelled: Callable[[], bool] = lambda: False,
) -> GraderVerdict:
    """Call the requirement's grader on this run, in a process of its own within req.timeout.
    Never raises: whatever the grader does becomes a verdict."""
    if cancelled():
        return GraderVerdict(False, cancelled=True)
    path = req.grader_path()
    if path is None:
        return GraderVerdict(
            False,
            failure=checker_failed(
                f"the lesson was not loaded from a file, so its grader {req.grader_file} cannot be found"
            ),
        )
    if not path.is_file():
        return GraderVerdict(
            False, failure=checker_failed(f"its grader file {req.grader_file} is missing"), detail=f"no file {path}"
        )
    job = Path(workdir) / CHECKER_DIR / req.id
    try:
        shutil.rmtree(job, ignore_errors=True)  # nothing from an earlier run, or from the program
        job.mkdir(parents=True, exist_ok=True)
        (job / JOB_INPUT).write_text(
            json.dumps(
                {
                    "file": str(path.resolve()),
                    "function": req.grader_function,
                    "step": step_id,
                    "requirement": req.id,
                    "code": code,
                    "output": run.output,
                    "reports": run.reports,
                    "workdir": str(Path(workdir).resolve()),
                    "written": written,
                    "finished": run.ok,
                    "stopped": run.problem(),
                    "exit_code": run.exit_code,
                    "error_type": run.error_type,
                    "error_message": run.error_message,
                    "quick": quick,
                }
            ),
            encoding="utf-8",
        )
        log = (job / JOB_LOG).open("wb")
    except (OSError, ValueError) as e:  # a full disk, an unwritable folder
        return GraderVerdict(False, failure=checker_failed(f"the tutor could not start it ({e})"), detail=repr(e))
    timed_out = was_cancelled = False
    with log:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "tutor.exercises.pack_grader", str(job)],
                cwd=job,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: what it starts is killed with it
                env=_env(),
            )
        except OSError as e:
            return GraderVerdict(False, failure=checker_failed(f"the tutor could not start it ({e})"), detail=repr(e))
        deadline = time.monotonic() + req.timeout
        try:
            while proc.poll() is None:
                if cancelled():
                    was_cancelled = True
                    break
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(0.02)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
    printed = _log_tail(job / JOB_LOG)
    if was_cancelled:
        return GraderVerdict(False, cancelled=True)
    name = f"{req.grader_function}() in {req.grader_file}"
    result = _read_result(job / JOB_RESULT)
    if result is None and timed_out:
        return GraderVerdict(
            False,
            failure=checker_failed(f"{name} ran past its {req.timeout:g} s time limit and was stopped"),
            detail=printed,
        )
    if result is None:
        return GraderVerdict(
            False,
            failure=checker_failed(f"{name} ended without a verdict (exit code {proc.returncode})"),
            detail=printed,
        )
    detail = "\n".join(x for x in (str(result.get("traceback") or ""), printed and f"it printed:\n{printed}") if x)
    if isinstance(result.get("failure"), str):
        return GraderVerdict(False, failure=checker_failed(result["failure"]), detail=detail)
    passed, feedback = result.get("passed"), result.get("feedback")
    if not isinstance(passed, bool) or not isinstance(feedback, str):
        return GraderVerdict(False, failure=checker_failed(f"{name} gave an unreadable verdict"), detail=detail)
    if result.get("missing"):  # a report or file the program did not make: then the lesson's advice
        feedback = f"{feedback} {req.feedback}"
    return GraderVerdict(passed, feedback[:MAX_FEEDBACK], detail=detail)


def _env() -> dict[str, str]:
    from tutor.paths import route_torch_caches
    from tutor.threads import set_env as set_thread_env

    env = dict(os.environ)
    env.pop("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", None)  # as in the learner's sandbox: float32 at 'highest', not TF32
    root = str(Path(__file__).resolve().parents[2])  # tutor importable from a checkout too
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONIOENCODING"] = "utf-8:backslashreplace"
    route_torch_caches(env)  # a grader may import torch to read a checkpoint
    # ...on the CPU: a checkpoint saved on CUDA would otherwise load onto cuda:0, a context and
    # memory on a card the class shares (or a CUDA out-of-memory) for a check that needs no GPU.
    env["CUDA_VISIBLE_DEVICES"] = ""
    set_thread_env(env)
    return env


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - LOG_TAIL))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---------------------------------------------------------------- the grader's process


def _brief(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the grader's own object: its repr may fail too
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verdict(got: Any, name: str) -> dict[str, Any]:
    """What the grader returned, as {"passed", "feedback"}, or a failure naming what it was."""
    if isinstance(got, bool):
        return {"passed": got, "feedback": ""}
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], bool) and isinstance(got[1], str):
        return {"passed": got[0], "feedback": got[1]}
    said = "None (no return reached?)" if got is None else f"{_brief(got)} ({type(got).__name__})"
    return {"failure": f"{name} returned {said}; a grader returns True, False or (passed, feedback)"}


def _where(exc: BaseException, folder: Path) -> str:
    """The grader's own line the exception came through last: 'grading.py line 12'."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{Path(exc.filename).name} line {exc.lineno}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if folder in Path(f.filename).resolve().parents]
    return f"{Path(frames[-1].filename).name} line {frames[-1].lineno}" if frames else ""


def _call(job: dict[str, Any]) -> dict[str, Any]:
    path = Path(job["file"])
    name = f"{job['function']}() in {path.name}"
    sys.path.insert(0, str(path.parent))  # its own helpers beside it import as modules
    run = LearnerRun(
        step=job["step"],
        requirement=job["requirement"],
        code=job["code"],
        output=job["output"],
        reports=Reports(job["reports"]),
        files=Files(Path(job["workdir"]), job["written"]),
        finished=job["finished"],
        stopped=job["stopped"],
        exit_code=job["exit_code"],
        error_type=job["error_type"],
        error_message=job["error_message"],
        quick=job["quick"],
    )
    module_name = "gpututor_grader_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            return {"failure": f"{path.name} cannot be imported as Python"}
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
        function = getattr(module, job["function"], None)
        if not callable(function):
            return {"failure": f"{path.name} defines no function {job['function']}"}
        return _verdict(function(run), name)
    except MissingReport as e:
        key = e.args[0] if e.args else "?"
        return {
            "passed": False,
            "missing": True,
            "feedback": f"Your program did not report {key}: call report({key}=...) once it has the value.",
        }
    except MissingFile as e:
        return {
            "passed": False,
            "missing": True,
            "feedback": f"Your program did not write {e.args[0] if e.args else 'the file'} in this run.",
        }
    except SystemExit as e:
        return {"failure": f"{name} called sys.exit({_brief(e.code)})", "traceback": traceback.format_exc()}
    except BaseException as e:  # noqa: BLE001 - the author's bug, reported as such
        where = _where(e, path.parent.resolve())
        message = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        return {
            "failure": f"{name} raised {type(e).__name__}{f' at {where}' if where else ''}"
            f"{f': {message}' if message else ''}",
            "traceback": traceback.format_exc()[-20_000:],
        }


def _child(argv: list[str]) -> None:
    job_dir = Path(argv[0])
    job = json.loads((job_dir / JOB_INPUT).read_text(encoding="utf-8"))
    result = _call(job)
    partial = job_dir / (JOB_RESULT + ".part")
    partial.write_text(json.dumps(result), encoding="utf-8")
    partial.replace(job_dir / JOB_RESULT)  # whole or absent, even if stopped while writing
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # threads the grader left running must not hold the verdict until the time limit


if __name__ == "__main__":
    # Run as the module its graders import (`from tutor.exercises.pack_grader import LearnerRun`),
    # not as a second copy named __main__.
    from tutor.exercises import pack_grader

    pack_grader._child(sys.argv[1:])
