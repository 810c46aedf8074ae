"""Grading code exercises (tutor/exercises/grader.py), the lab environment and `gpututor exercise`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.course.lesson import ExerciseStep
from tutor.course.loader import load_file
from tutor.exercises.grader import grade_exercise, strip_comments

FIXTURE = Path(__file__).parent / "exercise_lessons"
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


@pytest.fixture(autouse=True)
def small_data(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "2000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")


@pytest.fixture(scope="module")
def lesson():
    return load_file(FIXTURE / "exercise-fixture.yaml")


def by_id(result):
    return {r.id: r for r in result.requirements}


def step_with(**kw) -> ExerciseStep:
    return ExerciseStep.model_validate(
        {"id": "t", "kind": "exercise", "starter": "", "solution": "", "timeout": 60, "memory_mb": 2048, **kw}
    )


def test_reference_solution_passes(lesson, tmp_path):
    step = lesson.step("train-and-save")
    seen: list[str] = []
    result = grade_exercise(step, step.solution, tmp_path, on_output=seen.append)
    assert result.passed, result.summary + str([r.feedback for r in result.requirements])
    assert result.summary == "all 6 requirements met" and result.hint is None
    assert 0.5 <= result.sandbox.reports["accuracy"] <= 1.0
    assert "reported: accuracy=" in "".join(seen)
    assert any("test accuracy" in n for n in result.checker_notes)


def test_typical_mistakes_get_their_feedback(lesson, tmp_path):
    step = lesson.step("train-and-save")
    wrong = (
        step.solution.replace("images, labels = images.to(device), labels.to(device)", "pass  # model.cuda()")
        .replace('print(f"loss {loss:.3f} accuracy {accuracy:.3f}")', "")
        .replace("report(accuracy=accuracy)", "")
        .replace('{"model_state_dict": model.state_dict(), "accuracy": accuracy}', "model.state_dict()")
    )
    assert wrong != step.solution
    result = grade_exercise(step, wrong, tmp_path)
    got = by_id(result)
    assert not result.passed and result.sandbox.ok
    assert not got["prints-accuracy"].passed and "Print the accuracy" in got["prints-accuracy"].feedback
    assert got["moves-to-device"].passed  # model.to(device) is still there
    assert got["no-hardcoded-cuda"].passed  # .cuda() only in a comment
    assert "did not report accuracy" in got["reports-accuracy"].feedback
    assert "lacks model_state_dict" in got["checkpoint"].feedback
    assert "images that did not come out of .to(device)" in got["batches-moved"].feedback
    assert result.summary.startswith("2 of 6 requirements met")
    assert result.hint == got["prints-accuracy"].feedback


def test_stale_checkpoint_from_an_earlier_run_does_not_count(lesson, tmp_path):
    step = lesson.step("train-and-save")
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "model.pth").write_bytes(b"old")
    result = grade_exercise(step, "print('accuracy 1')\n", tmp_path)
    assert by_id(result)["checkpoint"].feedback.startswith("No file saved/model.pth was written.")


def test_exception_shows_marked_line_and_still_judges_source(lesson, tmp_path):
    step = lesson.step("hello")
    code = "def greet(n):\n    return f'hello {n}'\n\nprint(greet(undefined_name))\n"
    result = grade_exercise(step, code, tmp_path)
    assert not result.passed
    assert result.sandbox.error_type == "NameError" and result.sandbox.error_line == 4
    assert '>>   File "solution.py", line 4' in result.traceback
    got = by_id(result)
    assert got["defines-greet"].passed and got["defines-greet"].judged
    assert not got["prints-hello"].passed and not got["prints-hello"].judged
    assert got["prints-hello"].feedback == "not checked: the program stopped before it got this far"
    assert result.summary == (
        "1 of 2 requirements met, 1 not checked; the program raised NameError at "
        "line 4: name 'undefined_name' is not defined"
    )
    assert result.hint == "Fix this first: " + result.sandbox.problem() + "."


def test_a_crash_blames_the_source_mistake_not_the_missing_outcomes(lesson, tmp_path):
    step = lesson.step("hello")
    code = "def greeting(n):\n    return n\n\nprint(greet(3))\n"  # greet was renamed: the call fails
    result = grade_exercise(step, code, tmp_path)
    got = by_id(result)
    assert not got["defines-greet"].passed and got["defines-greet"].judged
    assert not got["prints-hello"].judged
    assert result.summary.startswith("0 of 2 requirements met, “defines greet” not yet, 1 not checked; ")
    assert result.hint == got["defines-greet"].feedback  # the real mistake, not the crash's consequence


def test_source_check_ignores_comments():
    code = "x = 1  # model.to(device)\n# torch.cuda.synchronize()\ns = '# kept'\n"
    stripped = strip_comments(code)
    assert "to(device)" not in stripped and "synchronize" not in stripped and "'# kept'" in stripped
    assert "#" not in strip_comments("def f(:\n  # unfinished\n")  # code that does not tokenize


def test_report_bounds_and_equals(tmp_path):
    step = step_with(
        requirements=[
            {"type": "report", "id": "speedup", "name": "speedup", "min": 1.5, "feedback": "Too slow."},
            {"type": "report", "id": "synced", "name": "synced", "equals": True, "feedback": "Synchronise."},
            {"type": "report", "id": "dev", "name": "device", "equals": "cpu", "feedback": "Report the device."},
        ]
    )
    code = "from tutor.lab import report\nreport(speedup=1.2, synced=False, device='cpu')\n"
    got = by_id(grade_exercise(step, code, tmp_path))
    assert not got["speedup"].passed and "speedup=1.2" in got["speedup"].feedback
    assert not got["synced"].passed and "synced=False" in got["synced"].feedback
    assert got["dev"].passed


def test_report_equals_a_number_matches_int_and_float_but_not_text_or_bool(tmp_path):
    step = step_with(
        requirements=[
            {"type": "report", "id": f"r{i}", "name": name, "equals": 938, "feedback": "Count the steps."}
            for i, name in enumerate(["as_int", "as_float", "as_text", "as_bool", "wrong"])
        ]
    )
    code = "from tutor.lab import report\nreport(as_int=938, as_float=938.0, as_text='938', as_bool=True, wrong=937)\n"
    got = by_id(grade_exercise(step, code, tmp_path))
    assert [got[f"r{i}"].passed for i in range(5)] == [True, True, False, False, False]
    assert "wrong=937" in got["r4"].feedback


def test_output_absent_and_file_requirements(tmp_path):
    step = step_with(
        requirements=[
            {"type": "output", "id": "no-warning", "pattern": "WARNING", "absent": True, "feedback": "No warnings."},
            {"type": "file", "id": "log", "path": "out/log.txt", "feedback": "Write out/log.txt."},
            {"type": "file", "id": "escape", "path": "../outside.txt", "feedback": "Inside only."},
        ]
    )
    (tmp_path / "outside.txt").write_text("x")
    code = "import os\nos.makedirs('out')\nopen('out/log.txt', 'w').write('x')\nprint('WARNING: slow')\n"
    got = by_id(grade_exercise(step, code, tmp_path / "work"))
    assert not got["no-warning"].passed and got["no-warning"].feedback == "No warnings."
    assert got["log"].passed
    assert not got["escape"].passed  # a path outside the working directory never counts


def test_checkpoint_that_needs_pickle_and_accuracy_bar(tmp_path):
    step = step_with(
        requirements=[
            {"type": "file", "id": "pickled", "path": "a.pth", "checkpoint": True, "feedback": "Save tensors only."},
            {
                "type": "file",
                "id": "untrained",
                "path": "b.pth",
                "checkpoint": True,
                "keys": ["model_state_dict"],
                "min_accuracy": 0.9,
                "min_accuracy_synthetic": 0.9,
                "feedback": "Train it first.",
            },
        ]
    )
    code = (
        "import torch\nfrom tutor.lab import MNISTClassifier\n"
        "class Config:\n    pass\n"
        "torch.save({'cfg': Config()}, 'a.pth')\n"
        "torch.manual_seed(0)\n"
        "torch.save({'model_state_dict': MNISTClassifier().state_dict()}, 'b.pth')\n"
    )
    got = by_id(grade_exercise(step, code, tmp_path))
    assert not got["pickled"].passed and "weights_only=True" in got["pickled"].feedback
    assert not got["untrained"].passed and got["untrained"].feedback.startswith("b.pth reaches 7.00% test accuracy")


def test_function_probe_needs_the_function(tmp_path):
    step = step_with(
        requirements=[
            {
                "type": "function",
                "id": "fn",
                "name": "train_one_epoch",
                "probe": "moves_batch_to_device",
                "feedback": "Define train_one_epoch.",
            },
        ]
    )
    got = by_id(grade_exercise(step, "def other():\n    pass\n", tmp_path))
    assert not got["fn"].passed and "defines no function train_one_epoch" in got["fn"].feedback


def test_lab_report_and_lazy_data(tmp_path, monkeypatch, capsys):
    import tutor.lab as lab

    monkeypatch.setenv("GPUTUTOR_REPORT", str(tmp_path / "r.jsonl"))
    lab.report(speedup=2.0, ok=True)
    assert json.loads((tmp_path / "r.jsonl").read_text()) == {"speedup": 2.0, "ok": True}
    assert capsys.readouterr().out == "reported: speedup=2, ok=True\n"  # one line for one call
    with pytest.raises(TypeError):
        lab.report(bad=[1, 2])
    assert "train_loader" in lab.__all__ and hasattr(lab, "train_one_epoch")


def test_lab_is_lazy_honours_device_and_sample_limits(tmp_path):
    from tutor.exercises.sandbox import run_code

    code = (
        "import tutor.experiments.data\n"
        "from tutor.lab import device\n"
        "print('cached', tutor.experiments.data._uint8_sets.cache_info().currsize)\n"  # no data read by the import
        "from tutor.lab import train_x, test_y, train_loader\n"
        "print('device', device, 'train', tuple(train_x.shape), 'test', tuple(test_y.shape))\n"
        "print('batch', next(iter(train_loader))[0].shape[0])\n"
    )
    r = run_code(code, tmp_path, timeout=120, memory_mb=4096, env={"GPUTUTOR_DEVICE": "cpu"})
    assert r.ok, r.output
    assert "cached 0" in r.output
    assert "device cpu train (2000, 1, 28, 28) test (500,)" in r.output
    assert "batch 64" in r.output


# ---------------------------------------------------------------- CLI


def cli(*args: str) -> int:
    return main(["--lessons-dir", str(FIXTURE), "exercise", "exercise-fixture", *args])


def test_cli_passes_and_fails(tmp_path, capsys):
    good = tmp_path / "good.py"
    good.write_text("def greet(n):\n    return f'hello {n}'\n\nprint(greet(3))\n")
    assert cli("hello", "--file", str(good)) == 0
    out = capsys.readouterr()
    assert "passed" in out.out and "hello 3" in out.err  # the program's output streams to stderr
    assert (Path(os.environ["GPUTUTOR_HOME"]) / "exercises" / "exercise-fixture" / "hello" / "solution.py").is_file()

    bad = tmp_path / "bad.py"
    bad.write_text("print('hi')\n")
    assert cli("hello", "--file", str(bad), "--json") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and data["output"] == "hi\n"
    assert [r["id"] for r in data["requirements"] if not r["passed"]] == ["defines-greet", "prints-hello"]


def test_cli_bad_input_exits_2(tmp_path, capsys):
    f = tmp_path / "x.py"
    f.write_text("print(1)\n")
    assert main(["--lessons-dir", str(FIXTURE), "exercise", "nope", "hello", "--file", str(f)]) == 2
    assert cli("intro", "--file", str(f)) == 2
    assert "not an exercise" in capsys.readouterr().err
    assert cli("missing-step", "--file", str(f), "--json") == 2
    assert "error" in json.loads(capsys.readouterr().out)
    assert cli("hello", "--file", str(tmp_path / "absent.py")) == 2


def test_probe_catches_a_dropped_to_result_even_on_the_cpu(tmp_path):
    # On the CPU .to("cpu") returns the same tensor; a dropped result must still count as not moved.
    from tutor.course.lesson import ExerciseStep
    from tutor.exercises.grader import grade_exercise

    step = ExerciseStep.model_validate(
        {
            "id": "probe",
            "kind": "exercise",
            "starter": "",
            "solution": "",
            "timeout": 60,
            "memory_mb": 2048,
            "requirements": [
                {
                    "type": "function",
                    "id": "moved",
                    "name": "train_batches",
                    "probe": "moves_batch_to_device",
                    "feedback": "Move each batch to the device.",
                }
            ],
        }
    )
    loop = (
        "def train_batches(model, loader, optimizer, criterion, device):\n"
        "    for inputs, labels in loader:\n"
        "        {move}\n"
        "        optimizer.zero_grad()\n"
        "        criterion(model(inputs), labels).backward()\n"
        "        optimizer.step()\n"
    )
    right = grade_exercise(
        step, loop.format(move="inputs, labels = inputs.to(device), labels.to(device)"), tmp_path / "right"
    )
    assert right.passed, right.summary
    dropped = grade_exercise(step, loop.format(move="inputs.to(device); labels.to(device)"), tmp_path / "dropped")
    assert not dropped.passed and "Move each batch" in dropped.requirements[0].feedback


def test_error_requirement_wants_the_named_exception(tmp_path):
    """A "break it on purpose" exercise: the exception it names is success, anything else says what happened."""
    step = step_with(
        requirements=[
            {
                "type": "error",
                "id": "broke",
                "error": "RuntimeError",
                "pattern": "shapes cannot be multiplied",
                "feedback": "Make it raise the shape error.",
            },
        ]
    )
    broken = "import torch\ntorch.nn.Linear(784, 10)(torch.zeros(2, 28))\n"
    result = grade_exercise(step, broken, tmp_path / "a")
    assert result.passed, result.summary
    assert result.summary == "the requirement is met" and result.hint is None
    assert result.sandbox.error_type == "RuntimeError" and "2x28 and 784x10" in result.traceback

    ran = grade_exercise(step, "print('fine')\n", tmp_path / "b")
    assert not ran.passed
    assert ran.requirements[0].feedback == (
        "Make it raise the shape error. (This time the program ran to the end without an error.)"
    )

    other = grade_exercise(step, "raise ValueError('nope')\n", tmp_path / "c")
    assert not other.passed and "it raised ValueError, not RuntimeError: nope" in other.requirements[0].feedback

    message = grade_exercise(step, "raise RuntimeError('something else')\n", tmp_path / "d")
    assert not message.passed and "but with another message: something else" in message.requirements[0].feedback


def test_an_expected_error_does_not_excuse_a_timeout(tmp_path):
    step = step_with(
        timeout=2,
        requirements=[
            {"type": "error", "id": "broke", "error": "RuntimeError", "feedback": "Raise it."},
        ],
    )
    result = grade_exercise(step, "import time\ntime.sleep(30)\n", tmp_path)
    assert not result.passed and result.sandbox.timed_out


def test_cli_without_file_grades_the_learners_own_file_and_records_it(tmp_path, capsys, monkeypatch):
    """The file the tutor's editor keeps, created from the starter on first use; the run counts."""
    from tutor.course.progress import Progress

    monkeypatch.setenv("GPUTUTOR_HOME", str(tmp_path))
    assert cli("hello", "--json") == 1  # the starter does not pass yet
    own = tmp_path / "code" / "exercise-fixture" / "hello.py"
    assert own.is_file()
    own.write_text("def greet(n):\n    return f'hello {n}'\n\nprint(greet(3))\n")
    capsys.readouterr()
    assert cli("hello") == 0
    assert "code/exercise-fixture/hello.py" in capsys.readouterr().err
    with Progress(tmp_path / "progress.db") as progress:
        assert [a.correct for a in progress.answers("exercise-fixture", "hello")] == [False, True]
        assert "hello" in progress.completed_steps("exercise-fixture")
    assert cli("hello", "--watch", "--json") == 2


@pytest.mark.long
def test_cli_watch_grades_again_on_every_save_until_ctrl_c(tmp_path):
    """rustlings-style: a save by rename (as vim does) runs it again; ctrl+c ends the watch, and the
    exit code is the last run's."""
    import signal
    import subprocess
    import sys
    import time

    env = {**os.environ, "GPUTUTOR_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tutor",
            "--lessons-dir",
            str(FIXTURE),
            "exercise",
            "exercise-fixture",
            "hello",
            "--watch",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines: list[str] = []

    def wait_for(text: str, within: float = 90) -> None:
        until = time.monotonic() + within
        while not any(text in line for line in lines):
            assert time.monotonic() < until and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())

    try:
        wait_for("Watching")
        assert any("not yet" in line for line in lines)
        own = tmp_path / "code" / "exercise-fixture" / "hello.py"
        new = own.with_name("hello.py.new")
        new.write_text("def greet(n):\n    return f'hello {n}'\n\nprint(greet(3))\n")
        new.replace(own)
        wait_for("Watching: save again")
        assert any(line.startswith("passed") for line in lines), "".join(lines)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=30)
        assert "Stopped watching. It passed." in rest and proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_best_epoch_check_takes_a_near_tie_for_a_tie():
    """The program picks its best epoch by its own (GPU) evaluation, the checker rescores each epoch
    on the CPU: one flipped image on near-tied epochs is not "a later, worse epoch"."""
    from tutor.course.lesson import FileRequirement
    from tutor.exercises.grader import _best_verdict

    req = FileRequirement(
        type="file", id="best", path="best.pth", checkpoint=True, best=True, feedback="Keep the best."
    )
    near = {"saved_epoch": 3, "epoch_accuracies": "0.970000,0.980100,0.980000", "test_images": 10_000}
    notes: list[str] = []
    assert _best_verdict(req, near, notes) is None
    assert "a tie" in notes[-1]
    worse = {**near, "epoch_accuracies": "0.970000,0.981000,0.980000"}  # ten images apart: worse
    verdict = _best_verdict(req, worse, [])
    assert verdict is not None and "kept a later, worse epoch" in verdict
    small = {**near, "test_images": 1_000}  # a data slice: three images are 0.3%
    assert _best_verdict(req, {**small, "epoch_accuracies": "0.970000,0.982000,0.980000"}, []) is None
    # On a CPU the program's evaluation and the checker's are the same computation: no tie
    assert _best_verdict(req, near, [], on_accelerator=False) is not None
    early = _best_verdict(req, {**near, "saved_epoch": 1}, [])  # the file stopped at epoch 1 of 3
    assert early is not None and "kept an earlier, worse epoch" in early


def test_the_summary_and_the_cli_name_requirements_by_title_not_id():
    """Was: "1 of 3 requirements met, process-group, each-rank-its-share not yet" and "FAIL process-group"."""
    import io

    from rich.console import Console

    from tutor.cli.learner import _print_exercise_result
    from tutor.exercises.grader import ExerciseResult, RequirementResult, _summary
    from tutor.exercises.sandbox import SandboxResult

    results = [
        RequirementResult("process-group", "behaviour", False, "Join the group."),
        RequirementResult(
            "each-rank-its-share", "behaviour", False, "Split the data.", title="Each rank trains on its own share"
        ),
        RequirementResult("trains", "behaviour", True, ""),
    ]
    summary = _summary(results, None)
    assert summary == "1 of 3 requirements met, “process group” and “Each rank trains on its own share” not yet"
    out = io.StringIO()
    _print_exercise_result(
        Console(file=out, width=200), ExerciseResult(False, results, SandboxResult(exit_code=1), summary)
    )
    printed = out.getvalue()
    assert "FAIL process group: Join the group." in printed and "ok   trains" in printed
    assert "FAIL Each rank trains on its own share: Split the data." in printed
    assert "process-group" not in printed and "each-rank-its-share" not in printed


def test_cli_results_wrap_at_words_in_an_80_column_terminal(tmp_path, monkeypatch):
    """Was: `exercise --watch` in a terminal left the wrapping to it: "…trained a mode|l" at 80 columns."""
    import io

    from rich.console import Console

    from tutor.cli import learner

    shown = io.StringIO()
    terminal = Console(file=shown, force_terminal=True, color_system=None, width=80, highlight=False, soft_wrap=True)
    monkeypatch.setattr(learner, "rich_console", lambda stderr=False: terminal)  # as in a real 80-column terminal
    code = tmp_path / "renamed.py"
    code.write_text("def greeting(n):\n    return n\n\nprint(greet(3))\n")
    assert cli("hello", "--file", str(code)) == 1
    lines = shown.getvalue().splitlines()
    assert lines and all(len(line) <= 80 for line in lines), lines
    words = " ".join(line.strip() for line in lines)
    assert "the program raised NameError at line 4: name 'greet' is not defined" in words, lines
