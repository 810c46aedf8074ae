"""An exercise step: edit code in the tutor, run it in a sandboxed process, see what it met.

The code never runs in this process: tutor/exercises/grader.py runs it in a separate Python
(tutor/exercises/sandbox.py) with a timeout and a memory limit. Every edit is saved to the progress
store and to the exercise's file (debounced), so nothing is lost on quit or crash. The learner may
edit that file in their own editor instead: `e` opens it in $VISUAL/$EDITOR, and a save from any
editor while the step is on screen loads the new code and grades it (tutor/course/workspace.py).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Markdown, RichLog, Static, TextArea
from textual.worker import get_current_worker

from tutor.course import workspace
from tutor.course.lesson import ExerciseStep
from tutor.course.session import LessonSession
from tutor.ui.widgets.code_editor import CodeEditor
from tutor.ui.widgets.step_view import StepView, hints_text

SAVE_AFTER_S = 0.4  # debounce: save the draft this long after the last keystroke
OUTPUT_LINES = 400  # the output panel keeps the latest lines only


class ExerciseStepView(StepView[ExerciseStep]):
    BINDINGS = [
        Binding("ctrl+r", "run_code", "run code", priority=True),
        Binding("ctrl+o", "reset_code", "reset", priority=True),
        Binding("ctrl+g", "show_solution", "solution", priority=True),
        # The code editor would take escape to move focus on: stop a program or leave the editor.
        Binding("escape", "stop_or_leave", "stop/leave", show=False, priority=True),
    ]

    @dataclass
    class Output(Message):
        text: str

    @dataclass
    class Graded(Message):
        result: Any  # tutor.exercises.grader.ExerciseResult, or None when the run could not start
        error: str | None = None
        code: str = ""  # the code that was graded (recorded with its verdicts)

    def __init__(self, session: LessonSession, index: int) -> None:
        super().__init__(session, index)
        self._save_timer: Timer | None = None
        self._confirm_solution: str | bool = False
        self._solution_asks = 0
        self._program_running = False
        self._editor_had_focus = False
        self.passed = False
        self._watch: workspace.FileWatch | None = None

    def compose(self) -> ComposeResult:
        if self.step.body:
            yield Markdown(self.step.body)
        code = self.session.draft(self.step)
        editor = CodeEditor.code_editor(
            code if code is not None else self.step.starter, language="python", id="editor", soft_wrap=True
        )  # at 80 columns, nothing hides off to the right
        yield editor
        yield Static(
            Text.assemble(
                ("Your file: ", "dim"),
                workspace.shown_path(self.session.code_file(self.step)),
                (" · e opens it in your editor; saving it runs it", "dim"),
            ),
            id="code-file",
        )
        yield Static("", id="exercise-status", classes="feedback")
        # What failed comes right under the status; the program's output after it.
        yield Static("", id="results", classes="feedback")
        yield Static("", id="hint", classes="hint")
        # Wrapped at the width it has: its default 78 columns, wider than the box at 80, cut line ends off.
        output = RichLog(id="output", max_lines=OUTPUT_LINES, min_width=20, wrap=True, markup=False, highlight=False)
        output.border_title = "your program's output"
        yield output
        yield Static("", id="solution", classes="reference")

    def on_mount(self) -> None:
        for selector in ("#output", "#results", "#hint", "#solution"):
            self.query_one(selector).display = False
        history = self.session.history(self.step)
        self.passed = any(a.correct for a in history)
        if self.passed:
            self._status(
                Text.assemble(
                    ("✓ You solved this one. ", "bold green"),
                    ("ctrl+r runs it again; ctrl+g shows the reference solution.", "dim"),
                )
            )
        if self.session.hints_shown(self.step):
            self._show_hints(self.session.hints_shown(self.step))
        # The editor takes focus on enter, so arrows and page keys first scroll the instructions.
        # The file on disk holds what the editor shows, for the learner's own editor to open.
        path, code = self.session.code_file(self.step), self.query_one("#editor", TextArea).text
        if workspace.read_code(path) != code:
            workspace.write_code(path, code)
        self._watch = workspace.FileWatch(path, known=code)
        self.set_interval(workspace.POLL_S, self._poll_file, name="watch-exercise-file")
        self.app.warm_sandbox(self.step, self.workdir)

    @property
    def workdir(self) -> Path:
        return self.session.progress.path.parent / "exercises" / self.lesson.id / self.step.id

    def _show(self, selector: str, content: Text | Syntax | Group | str) -> None:
        """Fill a panel under the editor; an empty one takes no rows (they are scarce at 80x24)."""
        panel = self.query_one(selector, Static)
        panel.update(content)
        panel.display = bool(content)

    def _status(self, text: Text | str, *, top: bool = False) -> None:
        """Show `text` under the editor and scroll it into view (at 80x24 it sits below the fold);
        top=True brings it to the top, so the results under it show too."""
        status = self.query_one("#exercise-status", Static)
        status.update(text)
        status.call_after_refresh(status.scroll_visible, top=top, animate=False)

    # ------------------------------------------------------------------ editing

    @on(TextArea.Changed, "#editor")
    def _edited(self) -> None:
        if self._save_timer is not None:
            self._save_timer.stop()
        self._save_timer = self.set_timer(SAVE_AFTER_S, self._save)

    def _save(self) -> None:
        self._save_timer = None
        code = self.query_one("#editor", TextArea).text
        self.session.save_draft(self.step, code)
        if self._watch is not None:
            self._watch.note(code)  # our own write: not a save to react to

    def _poll_file(self) -> None:
        """A save from another editor: its code in the tutor's editor, then run and graded."""
        if self._watch is None or self._program_running:
            return  # looked at again once the program ends
        code = self._watch.poll()
        if code is None:
            return
        if self._save_timer is not None:  # unsaved keystrokes here lose to the newer save there
            self._save_timer.stop()
            self._save_timer = None
        editor = self.query_one("#editor", TextArea)
        editor.load_text(code)
        self.session.save_draft(self.step, code)
        self.action_run_code(because="Your file was saved: running it…")

    def action_edit(self) -> bool:
        """The exercise's file in the learner's $VISUAL/$EDITOR, the tutor suspended meanwhile."""
        if self._program_running:
            self._status(Text("Your program is still running: escape stops it, then e.", style="yellow"))
            return True
        self._save()
        path = self.session.code_file(self.step)
        shown = workspace.shown_path(path)
        command = workspace.editor_command()
        if command is None:
            self._status(
                Text(
                    f"No $VISUAL or $EDITOR is set: edit here (enter), or open {shown} in any editor; "
                    "saving it runs it.",
                    style="yellow",
                )
            )
            return True
        try:
            with self.app.suspend():
                subprocess.call([*command, str(path)])
        except SuspendNotSupported:
            self._status(
                Text(
                    f"This terminal cannot hand itself over to {command[0]}: edit here (enter), or "
                    f"open {shown} from another terminal; saving it runs it.",
                    style="yellow",
                )
            )
            return True
        except OSError as e:
            self._status(
                Text(
                    f"Could not start {command[0]} ({e.strerror or e}): check $VISUAL/$EDITOR, or edit here (enter).",
                    style="yellow",
                )
            )
            return True
        self._poll_file()  # what the editor saved, run now rather than at the next poll
        return True

    def on_unmount(self) -> None:
        if self._save_timer is not None:  # leaving the step: keep the last keystrokes too
            self._save_timer.stop()
            try:
                self._save()
            except Exception:  # noqa: BLE001 - the editor is already gone; its last save stands
                pass

    def action_reset_code(self) -> None:
        editor = self.query_one("#editor", TextArea)
        if editor.text == self.step.starter:
            return
        if not self._confirm("reset"):
            self._status(Text("ctrl+o again: back to the starter code (a copy of yours is kept)", style="yellow"))
            return
        self._save()  # the file holds the latest keystrokes before it is copied
        kept = workspace.keep_copy(self.session.code_file(self.step))
        editor.load_text(self.step.starter)
        self._save()
        self._status(
            Text(
                "Back to the starter code." + (f" Your code is kept in {workspace.shown_path(kept)}." if kept else ""),
                style="dim",
            )
        )

    def action_show_solution(self) -> None:
        """Once passed: at once. After a graded run: ctrl+g twice. Before any: asked twice more."""
        if not self.passed:
            tried = self.session.attempted(self.step)
            self._solution_asks = self._solution_asks + 1 if self._confirm_solution == "solution" else 1
            self._confirm_solution = "solution"
            needed = 2 if tried else 3
            if self._solution_asks < needed:
                if tried:
                    text = "Again (ctrl+g, or g outside the editor): show the reference solution; h gives a hint first"
                elif self._solution_asks == 1:
                    text = (
                        "The solution opens after one run of your code (ctrl+r, or r). Give up without trying? "
                        "Ask again."
                    )
                else:
                    text = "Sure? Once more shows the reference solution."
                self._status(Text(text, style="yellow"))
                return
            self._confirm_solution = False
        self.session.show_solution(self.step)
        # Headed, or below the editor it reads as the learner's own file.
        heading = Text.assemble(
            ("Reference solution", "bold"), (" (the lesson's; yours is in the editor above)", "dim")
        )
        self._show(
            "#solution",
            Group(
                heading,
                Syntax(
                    self.step.solution.rstrip(),
                    "python",
                    theme="ansi_dark",
                    line_numbers=True,
                    background_color="default",
                ),
            ),
        )
        self.query_one("#solution", Static).scroll_visible()

    def _confirm(self, what: str) -> bool:
        """True on the second press of the same key in a row."""
        if self._confirm_solution == what:
            self._confirm_solution = False
            return True
        self._confirm_solution = what
        return False

    # ------------------------------------------------------------------ running

    def action_enter(self) -> bool:
        if self._program_running:  # the editor is read-only until the program ends
            return True
        editor = self.query_one("#editor", TextArea)
        editor.focus()
        editor.scroll_visible()
        return True

    def action_run(self) -> bool:
        self.action_run_code()
        return True

    def action_run_code(self, because: str = "") -> None:
        if self._program_running:
            return
        self._save()
        self._confirm_solution = False  # a ctrl+g asked before this run does not count after it
        self._set_running(True)
        log = self.query_one("#output", RichLog)
        log.clear()
        log.display = True
        self._show("#results", "")
        self._show("#hint", "")
        # The status to the top: its output streams in right under it.
        self._status(
            Text(
                (because + " " if because else "")
                + "Running your code in a separate Python process… (escape stops it)",
                style="italic",
            ),
            top=True,
        )
        self.refresh_hint()
        self._grade(self.query_one("#editor", TextArea).text)

    def _set_running(self, running: bool) -> None:
        # The code on screen is the code that runs: no edits until it ends, and keys such as ?
        # reach the app instead of the editor. Focus leaves the editor meanwhile, or closing the
        # help would scroll back up to it and away from the output; it comes back afterwards.
        self._program_running = running
        editor = self.query_one("#editor", TextArea)
        editor.read_only = running
        if running:
            self._editor_had_focus = self.screen.focused is editor
            if self._editor_had_focus:
                self.focus_content()
        elif self._editor_had_focus:
            editor.focus(scroll_visible=False)

    @work(thread=True, exclusive=True, exit_on_error=False, group="exercise", name="exercise")
    def _grade(self, code: str) -> None:
        worker = get_current_worker()
        try:
            result = self.app.grader(
                self.step,
                code,
                self.workdir,
                on_output=lambda text: self.post_message(self.Output(text)),
                cancelled=lambda: worker.is_cancelled,
            )
            self.post_message(self.Graded(result, code=code))
        except Exception as exc:  # noqa: BLE001 - shown as a sentence, the lesson goes on
            from tutor import errors

            self.post_message(self.Graded(None, errors.describe(exc)))

    @on(Output)
    def _output(self, message: Output) -> None:
        message.stop()
        self.query_one("#output", RichLog).write(message.text.rstrip("\n"))

    @on(Graded)
    def _graded(self, message: Graded) -> None:
        message.stop()
        self._set_running(False)
        result = message.result
        if result is None:
            self._status(Text.assemble(("✗ Could not run the code: ", "bold red"), message.error or "unknown error"))
            self.refresh_hint()
            return
        self._show("#results", _results_text(result))
        if result.passed:
            self.passed = True
            self._status(
                Text.assemble(
                    ("✓ Passed: ", "bold green"),
                    result.summary,
                    (". ctrl+g shows the reference solution; n moves on.", "dim"),
                ),
                top=True,
            )
            self.session.record_exercise(self.step, result, message.code)  # and completes it
            self.post_message(self.Completed(self.step.id))
        else:
            self._status(Text.assemble(("✗ Not yet: ", "bold red"), result.summary), top=True)
            self.session.record_exercise(self.step, result, message.code)
        self.refresh_hint()

    def action_stop_or_leave(self) -> None:
        if not self.cancel_run():
            self.focus_content()
            self.call_after_refresh(self.refresh_hint)

    def cancel_run(self) -> bool:
        if not self._program_running:
            return False
        self.workers.cancel_group(self, "exercise")
        self._status(Text("Stopping your program…", style="yellow"))
        return True

    @property
    def running(self) -> bool:
        return self._program_running

    def action_hint(self) -> bool:
        """The next hint tier, under the ones already shown."""
        if not self.step.tiered_hints:
            self._show("#hint", Text.assemble(("Hint: ", "bold"), "Read the instructions above the editor again."))
            return True
        self._show_hints(self.session.next_hint(self.step))
        return True

    def _show_hints(self, shown: list[str]) -> None:
        self._show("#hint", hints_text(shown, len(self.step.tiered_hints)))
        self.query_one("#hint", Static).scroll_visible(animate=False)

    def keys_hint(self) -> str:
        if self._program_running:
            return "escape stop the program · ? help"
        if isinstance(self.screen.focused, TextArea):
            return "ctrl+r run · ctrl+o reset · ctrl+g solution · esc leave editor"
        return "enter edit · e your editor · r run · h hint · g solution · n next · ? help"


def _results_text(result: Any) -> Text:
    """What failed first (with its feedback), then the traceback, then one line for what was met."""
    lines: list[Text] = []
    for item in result.requirements:
        if not item.passed:
            mark = ("✗ ", "bold red") if item.judged else ("· ", "yellow")
            lines.append(Text.assemble(mark, (item.name, "bold"), ": ", item.feedback))
    if result.traceback:
        if result.passed:  # a "break it" exercise: the exception is the point; now read it
            lines.append(
                Text("Your code raised the error it should (your lines are marked >>). Read it:", style="bold yellow")
            )
            lines.append(Text(result.traceback, style="yellow"))
        else:
            lines.append(Text("Your code raised an exception (your lines are marked >>):", style="bold red"))
            lines.append(Text(result.traceback, style="red"))
    met = [item.name for item in result.requirements if item.passed]
    if met:
        lines.append(Text.assemble(("✓ ", "bold green"), "met: ", ", ".join(met)))
    lines.extend(Text(f"  ({note})", style="dim") for note in result.checker_notes)
    return Text("\n").join(lines)
