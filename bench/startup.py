"""Start-up time: `gpututor` to the first painted home screen, and `gpututor --help`.

Runs the real console script in a pseudo-terminal and waits for the home screen's text.
Baseline in the same process: a bare `python -c "pass"` start, so the ratio shows what
gpututor adds on top of the interpreter (and `import torch`, which the TUI must not pay
for at start-up).

    python bench/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import pty
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MARKER = b"Lessons"


def time_to_screen(cmd: list[str], env: dict[str, str], timeout: float = 30.0) -> float:
    pid, fd = pty.fork()
    if pid == 0:  # child: the TUI in a 80x24 pseudo-terminal
        os.environ.update(env)
        os.execvp(cmd[0], cmd)
    t0 = time.perf_counter()
    seen = b""
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    break
                if MARKER in seen:
                    return time.perf_counter() - t0
        raise RuntimeError("the home screen did not appear")
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def time_command(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    exe = shutil.which("gpututor")
    if exe is None:
        sys.exit("gpututor is not on PATH: pip install -e . first")
    with tempfile.TemporaryDirectory(prefix="gpututor-bench-") as home:
        measure(exe, {"GPUTUTOR_HOME": home, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}, args.repeats)


def measure(exe: str, env: dict[str, str], repeats: int) -> None:
    python = [sys.executable, "-c", "pass"]
    torch_import = [sys.executable, "-c", "import torch"]
    time_command(python)  # warm the file cache
    time_command([exe, "--help"])
    base = statistics.median(time_command(python) for _ in range(repeats))
    helps = statistics.median(time_command([exe, "--help"]) for _ in range(repeats))
    torch_s = statistics.median(time_command(torch_import) for _ in range(max(1, repeats // 2)))
    screens = [time_to_screen([exe], env) for _ in range(repeats)]
    screen = statistics.median(screens)

    print(f"python -c pass (baseline)        {base:6.3f} s")
    print(f"gpututor --help                  {helps:6.3f} s   {helps / base:5.1f}x baseline   goal <= 0.3 s")
    print(f"gpututor to the first screen     {screen:6.3f} s   {screen / base:5.1f}x baseline   goal <= 1 s")
    print(f"python -c 'import torch' (for comparison; the TUI defers it) {torch_s:6.3f} s")


if __name__ == "__main__":
    main()
