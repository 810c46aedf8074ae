"""The `?` screen: every key, and how a lesson works."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# How gpututor works

Each lesson is a list of steps. **Read** steps explain; **predict** steps ask you to
commit to a guess *before* anything runs (it is locked once you press enter);
**run** steps train a real model on your device and show loss and timing live, then
put the measurement beside your prediction; **check** steps grade your answer and
tell you what is missing, then let you verify it with a real run; **exercise** steps
give you starter code to finish in an editor, run it in a separate Python process
and check what it does, with feedback on each requirement it does not meet yet;
**instrument** steps are calculators you move with the keys (the chart and the figures
follow at once), locked until you have made the prediction they would answer.

Your position, predictions and answers are saved as you go: quit any time and
`gpututor` brings you back where you were.

## Keys

| key | what it does |
|---|---|
| `enter` | open a lesson · lock a prediction · submit an answer · continue |
| `↑` `↓`, `1`–`9`, `a`–`z` | a choice: move to an option (`enter` takes the one shown) |
| type a value | a choice: `4x`, `3 GB`, `about 3` finds the option it lies in; a prediction shows what it will lock and asks `enter` again; a bare number that could be an option's or a value asks which |
| `n` or `→` | next step |
| `p` or `←` | previous step |
| `r` | run the step's experiment (or the check's verify run) |
| `escape` | cancel a run · leave a text box · back to the lessons |
| `h` | a hint for the current check or exercise; press again for the next, more specific one |
| `g` | show the answer (after one try; before it, asked twice) |
| `↑` `↓`, `←` `→` | instrument (or a run's settings): pick a control, change it |
| `m` | instrument: show or hide the formulas, with the numbers in them |
| `ctrl+r` | exercise: run your code (in a separate Python process, with limits) |
| `ctrl+o` | exercise: back to the starter code (press twice) |
| `ctrl+g` | exercise: show the reference solution (twice; before your first run, three times); `g` outside the editor too |
| `e` | exercise: open your code in your own editor ($VISUAL or $EDITOR); saving it runs it |
| `r` (home) | review: the checks of finished lessons asked again, the ones you missed more often |
| `p` (home) | your prediction profile: how far your predictions were from what was measured, per concept |
| `f` (home) | this machine's roofline (once calibrated: gpu-lab's calibrate step or `gpututor calibrate`) with your runs placed on it |
| `i` (home) | inspect your own training script (or a shipped example): step-time split, MFU, memory, the course's mistakes it shows; `escape` stops it |
| `?` | this help |
| `q` | quit (a running experiment is stopped first) |

In a text box or the code editor, letters go into it: press `escape` to leave it, then
use the keys. On an instrument's controls the arrows change values: `escape` leaves
them, and `←` `→` move between steps again. Exercise code is saved as you type, and is read-only while it runs.
The mouse works too: click options, scroll with the wheel.

## Honesty rules

Every number on screen was measured on this machine in a run, or computed from a
formula shown beside it. GPU timings synchronise the device and warm up first. With
no GPU, the tutor says so and measures what runs here; it never invents GPU numbers.

Press `escape` or `?` to close.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP)

    def action_close(self) -> None:
        self.dismiss()
