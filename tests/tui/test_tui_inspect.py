"""The inspect screen (i on home, issue 40): `gpututor inspect` from the TUI. A real script is
watched for real in the sandbox's process (a short window: the screen's own STEPS and WARMUP),
its output streams live, escape and quitting stop it with every process it started, and what
cannot be watched is said in the report's own sentences."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from waiting import wait_for

from tutor.cli import build_parser
from tutor.inspect.findings import PHASE_WORDS
from tutor.ui.screens import inspect as inspect_screen
from tutor.ui.screens.home import HomeScreen
from tutor.ui.screens.inspect import DRAFT_KEY, InspectScreen

SCRIPTS = Path(__file__).resolve().parents[1] / "inspect_scripts"
SMALL = SCRIPTS / "small_train.py"

SLEEPER = """\
'''Starts a process of its own, says both pids, then sleeps: a script that never trains.'''
import os
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(f"sleeping: pid {os.getpid()} child {child.pid}", flush=True)
time.sleep(600)
"""


@pytest.fixture
def short_window(monkeypatch) -> None:
    """A window of a few steps, so a real run takes a few seconds."""
    monkeypatch.setattr(InspectScreen, "STEPS", 4)
    monkeypatch.setattr(InspectScreen, "WARMUP", 1)


@pytest.fixture
def examples(tmp_path: Path, monkeypatch) -> Path:
    """The shipped examples' folder, as this test lays it out (the package's own may or may not
    be there yet)."""
    folder = tmp_path / "examples"
    folder.mkdir()
    shutil.copy(SMALL, folder / "small_train.py")
    (folder / "_helpers.py").write_text("'''not an example'''\n")
    monkeypatch.setattr(inspect_screen, "EXAMPLES", folder)
    return folder


def report_text(screen: InspectScreen) -> str:
    from test_tui import text_of

    return " ".join(text_of(screen.query_one("#report")).split())


def status(screen: InspectScreen) -> str:
    from test_tui import text_of

    return " ".join(text_of(screen.query_one("#inspect-status")).split())


def log_text(screen: InspectScreen) -> str:
    return "\n".join(screen.query_one("#inspect-log").lines)


async def open_inspect(pilot) -> InspectScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, HomeScreen))
    await pilot.press("i")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, InspectScreen))
    return pilot.app.screen


async def start(pilot, screen: InspectScreen, script: str, args: str = "") -> None:
    screen.query_one("#script").value = script
    screen.query_one("#args").value = args
    screen.query_one("#script").focus()
    await pilot.press("enter")


def alive(pid: int) -> bool:
    """Running, not a zombie left for init to reap."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def sleeper_pids(screen: InspectScreen) -> list[int]:
    words = log_text(screen).split()
    return [int(words[words.index("pid") + 1]), int(words[words.index("child") + 1])]


def test_the_screen_watches_the_window_the_command_line_does():
    args = build_parser().parse_args(["inspect", "train.py"])
    assert (
        args.steps,
        args.warmup,
        args.timeout,
    ) == (InspectScreen.STEPS, InspectScreen.WARMUP, InspectScreen.TIMEOUT_S)


async def test_i_opens_it_and_a_real_script_is_watched_with_its_finding(demo_app, short_window, examples):
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        await start(pilot, screen, str(SMALL), "--mistake item --batch-size 32")
        await wait_for(pilot, lambda: screen.watching is None and "Watched in" in status(screen), timeout=90)
        text = report_text(screen)
        assert f"gpututor inspect {SMALL} --mistake item --batch-size 32" in text
        assert "stopped on purpose after 6 optimizer steps (1 warm-up, 1 probe, 4 timed)" in text
        assert "Step time on cpu" in text and all(words in text for words in PHASE_WORDS.values())
        assert "Findings (1)" in text and "a value read back every step" in text
        assert "1 finding" in status(screen)
        # the path and its arguments are kept for next time, as typed
        assert app.progress.draft(DRAFT_KEY, "script") == str(SMALL)
        assert app.progress.draft(DRAFT_KEY, "args") == "--mistake item --batch-size 32"
        await pilot.press("escape")
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, InspectScreen))
        assert pilot.app.screen.query_one("#script").value == str(SMALL)


async def test_a_shipped_example_is_listed_and_starts_on_enter(demo_app, examples):
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        listed = screen.query_one("#examples")
        assert [listed.get_option_at_index(i).id for i in range(listed.option_count)] == [
            str(examples / "small_train.py")
        ]
        listed.focus()
        await pilot.press("enter")
        assert screen.query_one("#script").value == str(examples / "small_train.py")
        assert screen.watching is not None and "Watching small_train.py" in status(screen)
        await pilot.press("escape")  # the run itself is the test above's; stopped here at once
        await wait_for(pilot, lambda: screen.watching is None, timeout=30)
        assert "Stopped after" in status(screen)


async def test_a_missing_path_or_a_folder_is_said_and_nothing_runs(demo_app, tmp_path):
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        await start(pilot, screen, "~/no/such/train.py")
        assert "~/no/such/train.py: no such file." in status(screen)
        assert screen.watching is None and not screen.query_one("#content").display
        await start(pilot, screen, str(tmp_path))
        assert f"{tmp_path} is a folder" in status(screen)
        await start(pilot, screen, "")
        assert "Type the path of your training script first" in status(screen)
        await start(pilot, screen, str(SMALL), "--mistake 'item")
        assert "The arguments cannot be read" in status(screen)
        assert screen.watching is None


async def test_a_crash_is_named_in_the_report(demo_app, tmp_path, short_window):
    crash = tmp_path / "crash.py"
    crash.write_text("import torch\nprint('about to fail')\nraise ValueError('bad config')\n")
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        await start(pilot, screen, str(crash))
        await wait_for(pilot, lambda: screen.watching is None and "Not watched" in status(screen), timeout=90)
        text = report_text(screen)
        assert "the script crashed after 0 optimizer steps: ValueError at line 3: bad config" in text
        assert "about to fail" in text and "Traceback" not in status(screen)


async def test_escape_stops_the_script_and_every_process_it_started(demo_app, tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        await start(pilot, screen, str(script))
        await wait_for(pilot, lambda: "sleeping: pid" in log_text(screen), timeout=60)  # streamed while it runs
        pids = sleeper_pids(screen)
        assert screen.watching is not None and not [p for p in pids if not alive(p)]
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.watching is None, timeout=30)
        assert "Stopped after" in status(screen) and isinstance(pilot.app.screen, InspectScreen)
        assert wait_gone(pids) == []
        await pilot.press("escape")  # nothing running now: back home
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HomeScreen))


async def test_quitting_mid_run_stops_the_script_and_every_process_it_started(demo_app, tmp_path):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_inspect(pilot)
        await start(pilot, screen, str(script))
        await wait_for(pilot, lambda: "sleeping: pid" in log_text(screen), timeout=60)
        pids = sleeper_pids(screen)
        await pilot.press("ctrl+c")
    # The app is gone; this test's process is not, so the script's own watch on its parent
    # cannot be what ends it: the worker, cancelled as the app exits, killed the group.
    assert wait_gone(pids) == []


def test_shipped_examples_are_whatever_the_folder_holds(tmp_path: Path):
    assert inspect_screen.shipped_examples(tmp_path / "absent") == []
    (tmp_path / "b_gpt.py").write_text('"""A tiny GPT.\n\nMore words."""\n')
    (tmp_path / "a_cnn.py").write_text("x = (\n")  # not even Python: listed, no description
    (tmp_path / "_util.py").write_text("")
    assert inspect_screen.shipped_examples(tmp_path) == [
        (tmp_path / "a_cnn.py", ""),
        (tmp_path / "b_gpt.py", "A tiny GPT."),
    ]


def test_snapshot_before_a_run(snap_compare, demo_app, settle, size, examples):
    """i on the home screen: the script and its arguments to type, an example to pick, what will run."""

    async def open_it(pilot) -> None:
        await settle(pilot)
        await pilot.press("i")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, InspectScreen))
        await settle(pilot)

    assert snap_compare(demo_app(), terminal_size=size, run_before=open_it)
