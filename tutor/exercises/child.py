"""The process a learner's program runs in: `python -m tutor.exercises.child solution.py`.

Limits its own memory, runs the file as `__main__`, and when it raises prints the traceback a
learner can read (their frames marked '>>', the tutor's own frames hidden, library frames
folded) and writes it to .error.json for the grader. SystemExit passes through with its code.

When the grader asks ($GPUTUTOR_OBSERVE names a file), the program runs watched
(tutor/exercises/observe.py) and what it did is written there when it ends; the function probes named in
$GPUTUTOR_PROBES then call the functions it defined, in this same process (never a second run).
"""

from __future__ import annotations

import json
import os
import re
import runpy
import sys
import traceback
from pathlib import Path

ERROR_FILE = ".error.json"
_HIDDEN = (str(Path(__file__).resolve()), runpy.__file__, str(Path(__file__).with_name("observe.py").resolve()))


def start_torch() -> None:
    """Import torch and start the device the program will use (tutor.lab picks it the same way),
    so that their memory, not the program's, is in place when the budget takes its baseline:
    `import torch` alone is ~770 MiB of data, a CUDA context hundreds more."""
    try:
        import torch  # noqa: F401

        from tutor.experiments import devices

        devices.start_up(devices.resolve(None))
    except Exception:  # noqa: BLE001 - no torch, no device: the program meets that itself, with its traceback
        pass


def _data_bytes_now() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmData:")) * 1024
    except (OSError, StopIteration, ValueError):
        return None


def limit_memory(megabytes: int) -> None:
    """Let the program allocate `megabytes` on top of what the process holds now (torch and the
    device started). Linux: RLIMIT_DATA (heap and private writable mappings), which stops a hog
    with MemoryError yet leaves the large PROT_NONE address reservations CUDA makes alone
    (RLIMIT_AS would break CUDA initialisation). Elsewhere no cap: macOS has no RLIMIT_DATA it
    enforces, and under RLIMIT_AS the address space PyTorch and Metal reserve (gigabytes, not
    memory) would stop MPS before the program starts. The exercise's timeout still bounds it."""
    try:
        import resource
    except ImportError:  # Windows
        return
    if not sys.platform.startswith("linux"):
        return
    now = _data_bytes_now()
    if now is None:
        return
    limit = now + megabytes * 1024 * 1024
    which = resource.RLIMIT_DATA
    try:
        soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(which, (limit, limit))  # the hard limit too: the program cannot lift it
    except (ValueError, OSError):
        pass  # not permitted or not supported here: run without the cap


def _is_learner(filename: str, solution: str) -> bool:
    try:
        return os.path.samefile(filename, solution)
    except OSError:
        return False


def learner_traceback(exc: BaseException, solution: str) -> tuple[str, int | None]:
    """(text, line in solution.py of the deepest learner frame or None)."""
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    shown = os.path.basename(solution)
    lines = ["Traceback (most recent call last):\n"]
    error_line = None
    folded: list[traceback.FrameSummary] = []

    def fold() -> None:
        if len(folded) > 1:
            where = os.path.dirname(folded[0].filename)
            lines.append(f"     ... {len(folded) - 1} more frame(s) in {where}\n")
        if folded:
            f = folded[-1]
            lines.append(f'     File "{f.filename}", line {f.lineno}, in {f.name}\n')
            if f.line:
                lines.append(f"       {f.line.strip()}\n")
        folded.clear()

    for frame in te.stack:
        if frame.filename in _HIDDEN or os.path.abspath(frame.filename) in _HIDDEN or frame.filename.startswith("<frozen"):
            continue
        if _is_learner(frame.filename, solution):
            fold()
            error_line = frame.lineno
            lines.append(f'>>   File "{shown}", line {frame.lineno}, in {frame.name}\n')
            if frame.line:
                lines.append(f">>     {frame.line.strip()}\n")
        else:
            folded.append(frame)
    fold()
    if isinstance(exc, SyntaxError) and exc.filename and _is_learner(exc.filename, solution):
        error_line = exc.lineno
        lines.append(f">>   File \"{shown}\", line {exc.lineno}\n")
        exc.filename = shown
        te = traceback.TracebackException.from_exception(exc)
        lines.extend(list(te.format_exception_only())[1:] or list(te.format_exception_only()))
    else:
        lines.extend(te.format_exception_only())
    return "".join(lines), error_line


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]")


def strip_escapes(text: str) -> str:
    """Text without terminal escape codes (PyTorch puts bold into some of its messages)."""
    return _ANSI.sub("", text)


_REFUSED = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def readable(message: str) -> str:
    """An exception's message as a learner reads it: no terminal escape codes, and PyTorch's
    page on weights_only (whose first advice, weights_only=False, runs the file's code) cut to
    what the file holds."""
    message = _ANSI.sub("", message)
    if "Weights only load failed" in message:
        found = _REFUSED.search(message)
        what = f"it holds {found.group(1)}" if found else "it holds an object that is not a tensor or a plain value"
        return (f"Weights only load failed: {what}, which torch.load(..., weights_only=True) does not load "
                "(it loads tensors, state_dicts, numbers, text, lists and dicts)")
    return message


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: python -m tutor.exercises.child solution.py")
    mb = os.environ.get("GPUTUTOR_SANDBOX_MEMORY_MB")
    if mb and mb.isdigit():
        start_torch()
        limit_memory(int(mb))
    solution = os.path.abspath(argv[1])
    error_file = os.path.abspath(ERROR_FILE)  # before the learner's code can chdir
    observe_file = os.environ.get("GPUTUTOR_OBSERVE")
    observe_file = os.path.abspath(observe_file) if observe_file else None
    observer = _observer(solution) if observe_file else None
    sys.argv = [argv[1]]
    sys.path.insert(0, os.path.dirname(solution))  # as `python solution.py` would
    try:
        namespace = runpy.run_path(solution, run_name="__main__")
    except SystemExit:
        _finish(observer, observe_file, None)
        raise
    except BaseException as exc:  # noqa: BLE001 - every error the learner's code raises is shown
        _finish(observer, observe_file, None)
        text, line = learner_traceback(exc, solution)
        raw = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
        if readable(raw) != raw and raw:
            text = _ANSI.sub("", text.replace(raw, readable(raw)))
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        sys.stderr.write(text)
        sys.stderr.flush()
        # A SyntaxError's str() repeats "(solution.py, line N)"; the line is reported on its own.
        message = readable(raw)
        record = {"type": type(exc).__name__, "message": message[:2000], "line": line, "traceback": text}
        try:
            Path(error_file).write_text(json.dumps(record), encoding="utf-8")
        except OSError:
            pass
        os._exit(1)  # not sys.exit: atexit handlers of the learner's libraries could hang
    _finish(observer, observe_file, namespace)


def _observer(solution: str):
    try:
        from tutor.exercises.observe import Observer
    except ImportError:  # no torch: nothing to watch
        return None
    observer = Observer(solution, snapshots=bool(os.environ.get("GPUTUTOR_OBSERVE_SNAPSHOTS")))
    try:
        observer.install()
    except ImportError:
        return None
    return observer


def _finish(observer, path: str | None, namespace: dict | None) -> None:
    """Write what the program did; then, if it ran to the end, call its functions with probes."""
    if observer is None:
        return
    summary = observer.summary()
    observer.uninstall()
    specs = os.environ.get("GPUTUTOR_PROBES")
    if namespace is not None and specs:
        from tutor.exercises.probes import run_probes

        try:
            summary["probes"] = run_probes(json.loads(specs), namespace)
        except Exception as exc:  # noqa: BLE001 - a probe must not turn a finished run into a crash
            summary["probes_error"] = f"{type(exc).__name__}: {exc}"[:600]
    try:
        Path(path).write_text(json.dumps(summary), encoding="utf-8")
    except (OSError, TypeError, ValueError):
        pass
    snapshots = os.environ.get("GPUTUTOR_OBSERVE_SNAPSHOTS")
    if snapshots and observer.snapshots:
        try:
            import torch

            torch.save(observer.snapshots, snapshots)
        except Exception:  # noqa: BLE001 - a full disk: the best-checkpoint check says it could not tell
            pass


if __name__ == "__main__":
    main(sys.argv)
