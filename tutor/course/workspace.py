"""The learner's exercise files: one Python file per exercise step, in their data directory.

The tutor's built-in editor and any editor the learner likes ($VISUAL, $EDITOR, a second SSH
pane) edit the same file: `home/code/LESSON/STEP.py`. Saving it while the exercise is on screen
(or under `gpututor exercise LESSON STEP --watch`) re-grades it.

A change is noticed by polling the one file: its stat twice a second, its text when the stat
moved. Editors that save by writing a new file and renaming it over the old one (vim, many IDEs),
swap files beside it, and network filesystems, where change events often never arrive, all look
the same to a poll of one path, and it needs no native dependency. Torch-free.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from pathlib import Path

CODE_DIR = "code"
POLL_S = 0.5  # how often the tutor looks at the file while an exercise is on screen


def exercise_file(home: Path, lesson_id: str, step_id: str) -> Path:
    """Where an exercise's code lives: the same path in the tutor, the CLI and the learner's editor."""
    return home / CODE_DIR / lesson_id / f"{step_id}.py"


def read_code(path: Path) -> str | None:
    """The file's text, or None when it is missing or unreadable (the tutor keeps its own copy)."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write_code(path: Path, code: str) -> bool:
    """Write the whole file at once (a temporary file renamed over it): an editor or a watcher
    never reads half of it. False when it cannot be written; the tutor's own copy stands."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(code)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return True
    except OSError:
        return False


def keep_copy(path: Path, now: float | None = None) -> Path | None:
    """Before a reset: the file as it was, beside it (`STEP.before-reset-20261126-101500.py`).
    None when there was nothing to keep or it could not be written."""
    code = read_code(path)
    if not code:
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    copy = path.with_name(f"{path.stem}.before-reset-{stamp}.py")
    n = 1
    while copy.exists():  # two resets within a second
        n += 1
        copy = path.with_name(f"{path.stem}.before-reset-{stamp}-{n}.py")
    return copy if write_code(copy, code) else None


def editor_command(environ: dict[str, str] | None = None) -> list[str] | None:
    """The learner's editor as a command to which the file's path is added: $VISUAL, else
    $EDITOR (either may carry arguments: "code --wait"). None when neither is set."""
    env = os.environ if environ is None else environ
    for name in ("VISUAL", "EDITOR"):
        value = env.get(name, "").strip()
        if value:
            try:
                words = shlex.split(value)
            except ValueError:  # an unbalanced quote: take it as one command name
                words = [value]
            if words:
                return words
    return None


def shown_path(path: Path) -> str:
    """The path as a learner would type it: under the home directory, with ~."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


class FileWatch:
    """Notices when a file's text changes, whoever changed it, however it was saved.

    `poll()` returns the new text once per change, and None otherwise: while the file is
    missing (between an editor's delete and rename, or before it exists), unreadable, or still
    holds the text `known` (what the tutor itself wrote last)."""

    def __init__(self, path: Path, known: str | None = None) -> None:
        self.path = path
        self.known = known
        self._stat = self._stat_now()

    def _stat_now(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size, st.st_ino

    def note(self, text: str) -> None:
        """The tutor wrote `text` itself: not a change to react to."""
        self.known = text
        self._stat = self._stat_now()

    def poll(self) -> str | None:
        stat = self._stat_now()
        if stat is None or stat == self._stat:
            return None
        text = read_code(self.path)
        if text is None:
            return None  # caught mid-save: the next poll reads it whole
        self._stat = stat
        if text == self.known:
            return None  # touched, or written back unchanged
        self.known = text
        return text
