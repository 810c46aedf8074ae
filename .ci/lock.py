"""Write requirements-lock.txt: the exact versions, in this environment, of everything the
project's install step (`pip install -e ".[test,dev]"`) pulls in. CI installs with it as pip
constraints, so CI tests what was tested here, and the screen snapshots meet the Textual that
drew them. Run it after changing a dependency, in an environment where the tests pass:

    python .ci/lock.py
"""

from __future__ import annotations

import importlib.metadata as md
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements-lock.txt"


def needed() -> list[str]:
    """The names pip resolves for the install step (asked of pip itself, installing nothing)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--dry-run",
                "--ignore-installed",
                "--quiet",
                "--report",
                str(report),
                f"{ROOT}[test,dev]",
            ],
            check=True,
        )
        names = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    return sorted({n for n in names if n.lower() != "gpututor"}, key=str.lower)


def main() -> int:
    lines = []
    for name in needed():
        try:
            lines.append(f"{name}=={md.version(name)}")
        except md.PackageNotFoundError:
            print(f"{name} is not installed here: install the project first", file=sys.stderr)
            return 1
    LOCK.write_text(
        "# pip constraints: what the tests and the screen snapshots were last run with (python .ci/lock.py)\n"
        + "\n".join(lines)
        + "\n"
    )
    print(f"{LOCK.name}: {len(lines)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
