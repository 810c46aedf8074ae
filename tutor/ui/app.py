"""The Textual app: one App, seven screens (tutor/ui/screens/), one stylesheet.

torch is never imported in this process: the engine process (tutor/experiments/engine.py) imports
it, detects the device and runs the experiments, starting in the background once the
first screen is painted.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.signal import Signal
from textual.worker import Worker, WorkerState

try:  # Textual 2+ reads its own markup; before that, Rich's
    from textual.markup import escape
except ImportError:  # pragma: no cover
    from rich.markup import escape

from tutor import errors
from tutor.course.catalog import discover
from tutor.course.lesson import ExerciseStep, LoadedLesson
from tutor.course.progress import Progress
from tutor.course.session import LessonSession
from tutor.experiments.engine import Engine
from tutor.ui.screens.help import HelpScreen
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.lesson import LessonScreen


def _grade_in_sandbox(*args: Any, **kwargs: Any) -> Any:
    from tutor.exercises.grader import (
        grade_exercise,  # imported when the first program runs
    )

    return grade_exercise(*args, **kwargs)


def _warm_sandbox(step: ExerciseStep, workdir: Path) -> None:
    """Start the process the exercise's programs fork from while the learner reads the step, so
    the first ctrl+r prints at once. Only an optimisation: whatever fails, the run starts as before."""
    try:
        from tutor.exercises.grader import prestart

        prestart(step, workdir)
    except Exception:  # noqa: BLE001 - the run itself reports what is wrong
        pass


class TutorApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "gpututor"
    SUB_TITLE = "predict, then measure"
    BINDINGS = [Binding("ctrl+c", "quit", "quit", show=False, priority=True)]

    def __init__(
        self,
        lessons_dirs: Iterable[str | Path] = (),
        device: str | None = None,
        data_dir: str | None = None,
        home: Path | None = None,
        progress: Progress | None = None,
        warnings: Iterable[str] = (),
        engine: Engine | None = None,
        grader: Callable[..., Any] | None = None,
    ) -> None:
        """`engine`: what runs experiments (the TUI tests pass a scripted one; by default the
        engine process, started in the background once the first screen is up). `grader`: what
        runs and grades an exercise program, with `grade_exercise`'s signature (by default that
        function: the program in its sandbox process)."""
        super().__init__()
        self.startup_warnings = list(warnings)  # settings.toml problems, said once the screen is up
        self.lessons_dirs = list(lessons_dirs)
        self.device_override = device
        if data_dir:  # the engine process inherits the environment when it starts
            os.environ["GPUTUTOR_DATA_DIR"] = str(data_dir)
        self.catalog = discover(self.lessons_dirs)
        self.progress = progress or Progress(home / "progress.db" if home else None)
        # Saving can fail mid-session (locked, disk full), in whichever thread wrote.
        self.progress.on_warning = lambda warning: self.post_message(self.ProgressNotSaved(warning))
        self.engine = engine or Engine(
            log_path=str(self.progress.path.parent / "engine.log") if self.progress.path else None
        )
        self.grader = grader or _grade_in_sandbox
        self.device_text: Text = Text("Device: detecting… (loading PyTorch)", style="dim")
        self.device = None  # the Device runs use, once detected (instruments read its memory)
        # App-wide news, said once: whoever shows the device (the home screen, an instrument whose
        # budget is this machine's memory) subscribes, instead of the app walking its screens.
        self.device_detected: Signal[object] = Signal(self, "device-detected")

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        **_: Any,
    ) -> None:
        """Every toast here is plain text: a lesson title, a path or an error's words may hold
        "[...]", which markup would hide or choke on. (Screens' notify comes here too.)"""
        super().notify(escape(message), title=title, severity=severity, timeout=timeout)

    def warm_sandbox(self, step: ExerciseStep, workdir: Path) -> None:
        """An exercise step opened: warm what runs its programs (the default grader only). A
        daemon thread, not a worker: it may wait seconds for torch to import, and quitting
        must not wait for it."""
        if self.grader is _grade_in_sandbox:
            threading.Thread(target=_warm_sandbox, args=(step, workdir), name="warm-sandbox", daemon=True).start()

    @dataclass
    class ProgressNotSaved(Message):
        """The progress store moved to memory because the file stopped taking writes."""

        warning: str

    def on_mount(self) -> None:
        self.push_screen(HomeScreen())
        if self.progress.warning:
            self.notify(self.progress.warning, severity="warning", timeout=10)
        for warning in self.startup_warnings:
            self.notify(warning, severity="warning", timeout=10)
        self.detect_device()

    @on(ProgressNotSaved)
    def say_progress_not_saved(self, message: ProgressNotSaved) -> None:
        self.notify(message.warning, title="Progress not saved", severity="warning", timeout=15)

    # ------------------------------------------------------------------ device

    @work(thread=True, exit_on_error=False, name="detect-device")
    def detect_device(self) -> None:
        """Start the engine process (it imports torch) and ask it what this machine has."""
        found, chosen, problem = self.engine.detect(self.device_override)
        self.call_from_thread(self._device_ready, found, chosen, problem)

    def _device_ready(self, found, chosen, problem: str | None) -> None:
        self.device = chosen
        text = Text.assemble(("Device: ", "bold"), (chosen.describe(), "bold cyan"))
        if not chosen.is_accelerator:
            if any(d.is_accelerator for d in found):
                text.append("\n  (an accelerator is present, but you chose the CPU)", style="dim")
            else:
                text.append(
                    "\n  No GPU here (no CUDA, no MPS): runs measure this CPU, and steps that compare "
                    "with a GPU say what they cannot measure.",
                    style="yellow",
                )
        from tutor.experiments import (
            gpu_share,  # torch-free: reads the cap from the environment
        )

        shared = chosen.sharing(gpu_share.cap_mib(), gpu_share.cap_source())
        if shared:
            text.append(f"\n  {shared}", style="dim")
        if problem:
            text.append(f"\n  {problem}", style="bold red")
        self.device_text = text
        self.device_detected.publish(chosen)

    # ------------------------------------------------------------------ lessons

    def open_lesson(self, lesson_id: str) -> None:
        """The lesson where the learner left it."""
        item = self.catalog.get(lesson_id)
        self.push_screen(LessonScreen(LessonSession(item.lesson, self.progress), path=item.path))

    def replace_lesson(self, item: LoadedLesson) -> None:
        """A lesson reloaded from its file (hot reload): the home screen lists the new version."""
        lessons = self.catalog.lessons
        lessons[:] = [
            item if x.lesson.id == item.lesson.id else x for x in lessons
        ]  # the catalog is frozen; its list is not

    def finish_lesson(self, session: LessonSession) -> None:
        lesson = session.lesson
        missing = [s.title or s.id for s in session.unfinished()]
        if missing:
            self.notify(
                f"End of “{lesson.title}”. Not done yet: {', '.join(missing[:4])}{' …' if len(missing) > 4 else ''}",
                timeout=8,
            )
        else:
            nxt = ""
            if lesson.next:
                following = next((x.lesson for x in self.catalog.lessons if x.lesson.id == lesson.next), None)
                nxt = (
                    f" Next: “{following.title}”."
                    if following
                    else f" The next lesson ({lesson.next}) is not installed in this version yet."
                )
            self.notify(f"You finished “{lesson.title}”.{nxt}", timeout=8)
        self.pop_screen()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # ------------------------------------------------------------------ errors

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Central error handling: a worker that dies says why, the app carries on."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(errors.describe(event.worker.error), title="Something went wrong", severity="error", timeout=10)

    async def action_quit(self) -> None:
        self.engine.close()  # stop a run at once, so the worker relaying it ends too
        self.exit()

    def on_unmount(self) -> None:
        self.engine.close()
        self.progress.close()
