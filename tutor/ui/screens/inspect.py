"""The inspect screen (i on home): `gpututor inspect` on the learner's own training script. The
script's path and arguments (or one of the shipped examples), its output live while it is
watched, then the report the CLI prints (tutor/inspect/show.py).

Torch-free: the script runs in the sandbox's process (tutor/inspect/launch.py), started by a
thread worker; escape cancels it and the sandbox kills the script's whole process group, as it
does when the screen goes away or the app quits (Textual cancels the worker)."""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Log, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import Worker, get_current_worker

import tutor.inspect

if TYPE_CHECKING:
    from tutor.inspect.findings import Report
    from tutor.ui.app import TutorApp

EXAMPLES = Path(tutor.inspect.__file__).parent / "examples"
# Where the last script and its arguments are kept: the progress store's drafts (what a learner
# typed, one row per place), under a key no lesson id can take (ids have no colon).
DRAFT_KEY = ":inspect"
MEMORY_MB = 4096  # the CLI's default too (GPUTUTOR_MEMORY_MB overrides both)
LOG_LINES = 2000  # the live output kept on screen; the report keeps the last lines as well

EXAMPLE_WIDTH = 74  # an example's row, name and description, on one line at 80 columns
INTRO = (
    "The report: where a step's time goes (data, copies, forward, backward, optimizer), MFU against "
    "this machine's measured roof, memory beside the ledger's formula, and each mistake of the course "
    "the run shows, with its evidence and the lesson step that teaches it. The same as `gpututor "
    "inspect SCRIPT -- ARGS` in a terminal."
)
KEYS_IDLE = "enter inspect · tab next field · escape back · ctrl+c quit"
KEYS_RUNNING = "escape stop the script · ctrl+c quit (the script is stopped first)"
KEYS_DONE = "↑↓ scroll the report · tab edit · ctrl+r inspect again · escape back"


def shipped_examples(folder: Path | None = None) -> list[tuple[Path, str]]:
    """The example scripts the package ships (whatever *.py is there now), each with the first
    line of its docstring."""
    folder = folder or EXAMPLES
    found = []
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        if path.name.startswith("_"):
            continue
        try:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        except (OSError, SyntaxError, ValueError):
            doc = ""
        found.append((path, doc.strip().split("\n", 1)[0]))
    return found


def _memory_mb() -> int:
    try:
        return int(os.environ.get("GPUTUTOR_MEMORY_MB") or MEMORY_MB)
    except ValueError:
        return MEMORY_MB


class InspectScreen(Screen):
    if TYPE_CHECKING:
        app = getters.app(TutorApp)

    # The window and the limit `gpututor inspect` uses by default (its parser in tutor/cli/__init__.py;
    # tests/tui/test_tui_inspect.py checks they agree).
    STEPS = 20
    WARMUP = 3
    TIMEOUT_S = 120

    BINDINGS = [
        Binding("ctrl+r", "start", "inspect", priority=True),
        Binding("escape", "stop_or_back", "stop / back"),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
    ]

    @dataclass
    class Output(Message):
        """Lines the script wrote (posted from the worker thread)."""

        text: str

    @dataclass
    class Ended(Message):
        """The watched run is over: its report, or cancelled, or what went wrong instead."""

        report: Report | None = None
        cancelled: bool = False
        error: str | None = None
        seconds: float = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.watching: Worker[None] | None = None  # from the start until its Ended arrives
        self.examples = shipped_examples()

    def compose(self) -> ComposeResult:
        yield Static(Text("Inspect your own training script", style="bold"), id="where")
        with Horizontal(classes="inspect-row"):
            yield Static("script", classes="inspect-label")
            yield Input(placeholder="path/to/train.py", id="script", compact=True)
        with Horizontal(classes="inspect-row"):
            yield Static("arguments", classes="inspect-label")
            yield Input(placeholder="--epochs 1 (as after `python train.py`)", id="args", compact=True)
        if self.examples:
            yield OptionList(
                *(
                    Option(
                        Text.assemble(("example ", "dim"), (p.name, "bold"), f"  {self._fit(p.name, doc)}"), id=str(p)
                    )
                    for p, doc in self.examples
                ),
                id="examples",
                compact=True,
            )
        else:
            yield Static(Text(f"(no shipped examples in {EXAMPLES})", style="dim"), id="examples-none")
        yield Static(self._plan(), id="inspect-status")
        yield Log(id="inspect-log", max_lines=LOG_LINES)
        with VerticalScroll(id="content"):
            yield Static(Text(INTRO, style="dim"), id="report")
        yield Static(KEYS_IDLE, id="keys-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#inspect-log", Log).display = False
        script, args = self.query_one("#script", Input), self.query_one("#args", Input)
        script.value = self.app.progress.draft(DRAFT_KEY, "script") or ""
        args.value = self.app.progress.draft(DRAFT_KEY, "args") or ""
        script.focus()

    @staticmethod
    def _fit(name: str, doc: str) -> str:
        room = EXAMPLE_WIDTH - len("example ") - len(name) - 2
        return doc if len(doc) <= room else doc[: max(0, room - 1)].rstrip() + "…"

    def _plan(self) -> Text:
        return Text(
            f"Runs it as `python SCRIPT ARGS` would, in its folder; watches {self.WARMUP} warm-up steps, 1 probe "
            f"step and {self.STEPS} timed, then stops it (time limit {self.TIMEOUT_S} s); lists the files it wrote.",
            style="dim",
        )

    # ------------------------------------------------------------------ starting

    @on(Input.Submitted)
    def _submitted(self) -> None:
        self.action_start()

    @on(OptionList.OptionSelected, "#examples")
    def _example(self, event: OptionList.OptionSelected) -> None:
        if self.watching is not None:
            return
        from tutor.inspect.launch import example_args

        script = Path(str(event.option.id))
        self.query_one("#script", Input).value = str(script)
        self.query_one("#args", Input).value = shlex.join(example_args(script))  # shown: nothing hidden
        self.action_start()

    def _say(self, text: Text | str, *, report_shown: bool = False) -> None:
        """The status line; a report stays under it only when it is the one it speaks of."""
        self.query_one("#inspect-status", Static).update(text)
        self.query_one("#content").display = report_shown

    def action_start(self) -> None:
        if self.watching is not None:
            return
        typed = self.query_one("#script", Input).value.strip()
        if not typed:
            self._say(Text("Type the path of your training script first (or pick an example).", style="yellow"))
            return
        try:
            args = shlex.split(self.query_one("#args", Input).value)
        except ValueError as exc:  # an unclosed quote
            self._say(Text(f"The arguments cannot be read: {exc}.", style="yellow"))
            return
        self.app.progress.save_draft(DRAFT_KEY, "script", typed)
        self.app.progress.save_draft(DRAFT_KEY, "args", self.query_one("#args", Input).value)
        script = Path(typed).expanduser()
        if not script.is_file():
            from tutor.inspect import findings

            problem = findings.missing(typed, args).problem
            if script.is_dir():
                problem = f"{typed} is a folder: give the script in it, e.g. {Path(typed, 'train.py')}"
            self._say(Text(f"{problem}.", style="bold red"))
            return
        log = self.query_one("#inspect-log", Log)
        log.clear()
        log.display = True
        for box in self.query(Input):
            box.disabled = True
        for examples in self.query("#examples"):  # a pick mid-run would rename the script being watched
            examples.disabled = True
        self._say(
            Text.assemble(
                ("Watching ", "bold"),
                (script.name, "bold cyan"),
                f": {self.WARMUP} warm-up steps, 1 probe, {self.STEPS} timed (limit {self.TIMEOUT_S} s). "
                "What it writes:",
            )
        )
        self.query_one("#keys-hint", Static).update(KEYS_RUNNING)
        self.watching = self.run_worker(
            lambda: self._watch(script, args),
            name="inspect",
            group="inspect",
            thread=True,
            exclusive=True,
            exit_on_error=False,
        )

    def _watch(self, script: Path, args: list[str]) -> None:
        """In the worker thread: run the script watched, then build its report. Never raises."""
        worker = get_current_worker()
        try:
            from tutor.inspect import findings, launch

            ran = launch.run_script(
                script,
                args,
                warmup=self.WARMUP,
                steps=self.STEPS,
                timeout=self.TIMEOUT_S,
                memory_mb=_memory_mb(),
                on_output=self._relay,
                cancelled=lambda: worker.is_cancelled,
            )
            if worker.is_cancelled:
                self.post_message(self.Ended(cancelled=True, seconds=ran.seconds))
                return
            self.post_message(self.Ended(findings.build(script, args, ran, self.TIMEOUT_S), seconds=ran.seconds))
        except Exception as exc:  # noqa: BLE001 - a sentence on the screen, never a traceback
            from tutor import errors

            self.post_message(self.Ended(error=errors.describe(exc)))

    # ------------------------------------------------------------------ while it runs, and after

    def _relay(self, text: str) -> None:
        """In the worker thread: what the script wrote, to the log."""
        self.post_message(self.Output(text))

    @on(Output)
    def _output(self, message: Output) -> None:
        self.query_one("#inspect-log", Log).write(message.text)

    @on(Ended)
    def _ended(self, message: Ended) -> None:
        self.watching = None
        for box in self.query(Input):
            box.disabled = False
        for examples in self.query("#examples"):
            examples.disabled = False
        if message.report is not None:
            self._show(message.report)
            return
        self.query_one("#keys-hint", Static).update(KEYS_IDLE)
        self.query_one("#script", Input).focus()
        if message.cancelled:
            self._say(
                Text(
                    f"Stopped after {message.seconds:.1f} s: the script and every process it started were ended. "
                    "No report: press enter to inspect it again.",
                    style="yellow",
                )
            )
        else:
            self._say(Text(f"The script could not be watched: {message.error}", style="bold red"))

    def _show(self, report: Report) -> None:
        from tutor.inspect.show import renderables

        self.query_one("#inspect-log", Log).display = False
        content = self.query_one("#content", VerticalScroll)
        self.query_one("#report", Static).update(Group(*renderables(report)))
        content.scroll_home(animate=False)
        if report.ok:
            found = len(report.findings)
            words = f"{found} finding{'s' if found != 1 else ''}" if found else "no finding"
            self._say(
                Text(f"Watched in {report.seconds:.1f} s: {words}. The report:", style="bold green"), report_shown=True
            )
        else:
            self._say(Text("Not watched through: the report says why.", style="bold red"), report_shown=True)
        self.query_one("#keys-hint", Static).update(KEYS_DONE)
        content.focus()

    def action_page(self, direction: int) -> None:
        content = self.query_one("#content", VerticalScroll)
        content.scroll_page_down() if direction > 0 else content.scroll_page_up()

    def action_stop_or_back(self) -> None:
        if self.watching is not None:
            self.watching.cancel()  # the sandbox sees it within 50 ms and kills the script's group
            self._say(Text("Stopping the script ...", style="yellow"))
            return
        self.app.pop_screen()
