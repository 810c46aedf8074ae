"""A lesson's own grader (`type: python`, tutor/exercises/pack_grader.py): the example pack's
exercise through the sandbox and `lesson test`, graders that fail (blamed on the checker, never
the learner), what a grader may read, and lint's checks of the grader file."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
import time
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.course.lesson import LessonError, PythonRequirement
from tutor.course.loader import load_file, load_text
from tutor.exercises import pack_grader
from tutor.exercises.grader import grade_exercise
from tutor.exercises.pack_grader import Files, run_grader, snapshot, written_since
from tutor.exercises.sandbox import SandboxResult

PACK = Path(__file__).parents[1] / "experiments" / "packs" / "grader-pack"
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the sandbox needs POSIX process groups")


@pytest.fixture(autouse=True)
def on_the_cpu(monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")


def example_step():
    return load_file(PACK / "losses.yaml").step("keep-losses")


def lesson_with(folder: Path, grader: str, source: str, *, timeout: float = 10, program: str = "x = 1") -> Path:
    """A one-exercise lesson in `folder` whose requirement is graded by `grader` in grading.py."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "grading.py").write_text(textwrap.dedent(source), encoding="utf-8")
    path = folder / "lesson.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        id: graded
        title: A lesson with its own grader
        steps:
          - id: ex
            kind: exercise
            starter: "{program}"
            solution: "{program}"
            requirements:
              - type: python
                id: judged
                grader: "{grader}"
                timeout: {timeout}
                feedback: The lesson's advice.
        """),
        encoding="utf-8",
    )
    return path


def requirement(path: Path) -> PythonRequirement:
    req = load_file(path).step("ex").requirements[0]
    assert isinstance(req, PythonRequirement)
    return req


def finished_run(**kw) -> SandboxResult:
    return SandboxResult(exit_code=0, output=kw.pop("output", "hello\n"), reports=kw.pop("reports", {}), **kw)


def grade(req: PythonRequirement, workdir: Path, run: SandboxResult | None = None, written=(), **kw):
    workdir.mkdir(parents=True, exist_ok=True)
    return run_grader(
        req, step_id="ex", code="x = 1", run=run or finished_run(), workdir=workdir, written=list(written), **kw
    )


# ---------------------------------------------------------------- the example pack, run for real


@pytest.mark.long
def test_the_example_solution_passes_and_a_mistake_gets_the_graders_own_words(tmp_path):
    step = example_step()
    passed = grade_exercise(step, step.solution, tmp_path / "solution")
    assert passed.passed, [r.feedback for r in passed.requirements]
    assert passed.summary == "the requirement is met"

    mistake = next(m for m in step.mistakes if m.name == "the tensor, not its value")
    failed = grade_exercise(step, mistake.code, tmp_path / "mistake")
    [verdict] = failed.requirements
    assert not failed.passed and verdict.judged and not verdict.checker_error
    assert verdict.feedback.startswith("Line 1 of losses.csv is 'tensor(")
    assert "append loss.item()" in verdict.feedback and failed.hint == verdict.feedback


@pytest.mark.long
def test_lesson_test_runs_the_packs_grader_on_the_solution_and_each_mistake(capsys):
    assert main(["lint", str(PACK)]) == 0
    capsys.readouterr()
    code = main(["lesson", "test", str(PACK / "losses.yaml")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "✓ losses-to-file · keep-losses · exercise: solution passes" in out
    assert "mistake 'the tensor, not its value' fails losses-fall" in out
    assert "mistake 'no optimizer step' fails losses-fall" in out


def test_a_file_an_earlier_run_left_is_not_this_runs(tmp_path):
    step = example_step()
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "losses.csv").write_text("".join(f"{1 / (i + 1)}\n" for i in range(20)), encoding="utf-8")
    result = grade_exercise(step, "from tutor.lab import report\nreport(final_loss=0.05)\n", workdir)
    [verdict] = result.requirements
    assert not verdict.passed and verdict.judged
    assert verdict.feedback.startswith("Your program did not write losses.csv in this run.")
    assert step.requirements[0].feedback in verdict.feedback  # then the lesson's advice


def test_a_grader_that_raises_is_the_checkers_fault_and_its_traceback_is_kept_for_the_author(tmp_path):
    from tutor.ui.widgets.exercise_step import _results_text

    path = lesson_with(
        tmp_path / "pack",
        "grading.py:check",
        """\
        def check(run):
            return run.output.split()[5] == "ok"
        """,
        program="print(1)",
    )
    step = load_file(path).step("ex")
    result = grade_exercise(step, step.solution, tmp_path / "work")
    [verdict] = result.requirements
    assert not result.passed and not verdict.passed and not verdict.judged  # not held against the learner
    assert verdict.feedback.startswith(
        "This exercise's checker failed, so this was not checked: check() in "
        "grading.py raised IndexError at grading.py line 2: list index out of range."
    )
    assert "not in your program" in verdict.feedback and result.hint == verdict.feedback
    assert "Traceback" in verdict.checker_error and 'grading.py", line 2, in check' in verdict.checker_error
    assert result.as_dict()["requirements"][0]["checker_error"] == verdict.checker_error
    shown = _results_text(result).plain  # what the exercise step puts on screen
    assert "checker failed" in shown and "Traceback" not in shown


# ---------------------------------------------------------------- graders that fail, without a sandbox run


@pytest.mark.parametrize(
    "body, cause",
    [
        (
            "return 'yes'",
            "check() in grading.py returned 'yes' (str); a grader returns True, False or (passed, feedback)",
        ),
        ("pass", "check() in grading.py returned None (no return reached?)"),
        ("return (1, 'close')", "returned (1, 'close') (tuple)"),
        ("raise SystemExit(3)", "check() in grading.py called sys.exit(3)"),
        ("import os; os._exit(1)", "check() in grading.py ended without a verdict (exit code 1)"),
        ("return {}['x']", "check() in grading.py raised KeyError at grading.py line 2: 'x'"),
    ],
)
def test_a_grader_that_misbehaves_gets_the_checker_failed_message(tmp_path, body, cause):
    req = requirement(lesson_with(tmp_path / "pack", "grading.py:check", f"def check(run):\n    {body}\n"))
    verdict = grade(req, tmp_path / "work")
    assert not verdict.passed and verdict.failure is not None
    assert verdict.failure.startswith("This exercise's checker failed, so this was not checked: ")
    assert cause in verdict.failure and "Traceback" not in verdict.failure


def test_a_grader_past_its_time_limit_is_stopped_with_what_it_started(tmp_path, limit_clock):
    req = requirement(
        lesson_with(
            tmp_path / "pack",
            "grading.py:check",
            """\
        import subprocess, sys

        def check(run):
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            print("looking", child.pid, flush=True)
            while True:
                pass
        """,
            timeout=60,
        )
    )
    # The limit passes once check() is in its loop (it has printed): never during Python's start-up,
    # which the limit includes and a loaded machine stretches.
    log = tmp_path / "work" / pack_grader.CHECKER_DIR / req.id / pack_grader.JOB_LOG
    clock = limit_clock(pack_grader)
    verdict = grade(
        req,
        tmp_path / "work",
        cancelled=clock.run_out_when(lambda: log.is_file() and "looking" in log.read_text(errors="replace")),
    )
    assert verdict.failure is not None and not verdict.cancelled
    assert "check() in grading.py ran past its 60 s time limit and was stopped" in verdict.failure
    assert "looking" in verdict.detail  # what it printed, for the author
    started = int(re.search(r"looking (\d+)", verdict.detail).group(1))
    assert _ended(started), "the process check() started outlived it"


def _ended(pid: int, within: float = 10.0) -> bool:
    """Whether `pid` is gone (or a zombie waiting to be reaped) within `within` seconds of the kill."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if ") Z " in f.read():
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_run_stopped_by_the_learner_gets_no_verdict(tmp_path):
    req = requirement(lesson_with(tmp_path / "pack", "grading.py:check", "def check(run):\n    return True\n"))
    verdict = grade(req, tmp_path / "work", cancelled=lambda: True)
    assert verdict.cancelled and not verdict.passed and verdict.failure is None


def test_what_the_grader_receives(tmp_path):
    req = requirement(
        lesson_with(
            tmp_path / "pack",
            "grading.py:check",
            """\
        from tutor.exercises.pack_grader import LearnerRun

        def check(run):
            assert isinstance(run, LearnerRun)
            assert (run.step, run.requirement, run.code) == ("ex", "judged", "x = 1")
            assert run.output == "hello\\n" and run.reports["loss"] == 0.25 and dict(run.reports) == {"loss": 0.25}
            assert run.finished and run.stopped is None and run.exit_code == 0 and run.error_type is None
            assert run.files.names() == ["out/losses.csv"] and "out/losses.csv" in run.files
            assert run.files.read_text("out/losses.csv") == "0.5\\n" and run.files.open("out/losses.csv").read() == b"0.5\\n"
            assert "solution.py" not in run.files and "stale.txt" not in run.files
            return False, "read it all"
        """,
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "stale.txt").write_text("from an earlier run", encoding="utf-8")
    before = snapshot(work)
    (work / "solution.py").write_text("x = 1", encoding="utf-8")
    (work / "out").mkdir()
    (work / "out" / "losses.csv").write_text("0.5\n", encoding="utf-8")
    verdict = grade(req, work, finished_run(reports={"loss": 0.25}), written_since(work, before))
    assert (verdict.passed, verdict.feedback, verdict.failure) == (False, "read it all", None), verdict.detail


def test_the_grader_sees_no_gpu(tmp_path, monkeypatch):
    """A checkpoint saved on CUDA must not load onto the class's card (a context, memory, an OOM)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    req = requirement(
        lesson_with(
            tmp_path / "pack",
            "grading.py:check",
            """\
        import os

        def check(run):
            return False, repr(os.environ.get("CUDA_VISIBLE_DEVICES"))
        """,
        )
    )
    verdict = grade(req, tmp_path / "work")
    assert (verdict.passed, verdict.feedback, verdict.failure) == (False, "''", None), verdict.detail


def test_the_grader_runs_float32_at_the_default_precision_in_nvidia_containers(tmp_path, monkeypatch):
    """TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1 (NVIDIA's containers) would make the grader's matmuls TF32."""
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    req = requirement(
        lesson_with(
            tmp_path / "pack",
            "grading.py:check",
            """\
        import torch

        def check(run):
            return False, torch.get_float32_matmul_precision()
        """,
            timeout=60,
        )
    )
    verdict = grade(req, tmp_path / "work")
    assert (verdict.passed, verdict.feedback, verdict.failure) == (False, "highest", None), verdict.detail


@pytest.mark.gpu
def test_a_checkpoint_saved_on_cuda_loads_in_the_grader_as_the_docs_show(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    req = requirement(
        lesson_with(
            tmp_path / "pack",
            "grading.py:check",
            """\
        import torch

        def check(run):
            state = torch.load(run.files.open("model.pt"), map_location="cpu", weights_only=True)
            return False, f"{state['w'].device} {torch.cuda.is_available()}"
        """,
            timeout=120,
        )
    )
    work = tmp_path / "work"
    work.mkdir()
    torch.save({"w": torch.ones(2, device="cuda")}, work / "model.pt")
    verdict = grade(req, work, written=["model.pt"])
    assert (verdict.passed, verdict.feedback, verdict.failure) == (False, "cpu False", None), verdict.detail


def test_a_report_the_program_did_not_make_is_the_learners_miss(tmp_path):
    req = requirement(
        lesson_with(tmp_path / "pack", "grading.py:check", "def check(run):\n    return run.reports['loss'] < 0.5\n")
    )
    verdict = grade(req, tmp_path / "work")
    assert verdict.failure is None and not verdict.passed
    assert verdict.feedback == (
        "Your program did not report loss: call report(loss=...) once it has the value. The lesson's advice."
    )


def test_a_file_the_program_wrote_cannot_stand_in_for_the_graders_modules(tmp_path):
    """The grader's folder is on its import path; the learner's folder (and the checker's scratch
    folder inside it) is not, so a program cannot plant a module the grader imports."""
    pack = tmp_path / "pack"
    req = requirement(
        lesson_with(
            pack,
            "grading.py:check",
            "import helpers\n\ndef check(run):\n    return helpers.WHO == 'pack', helpers.WHO\n",
        )
    )
    (pack / "helpers.py").write_text("WHO = 'pack'\n", encoding="utf-8")
    work = tmp_path / "work"
    for planted in (work, work / ".checker" / "judged"):
        planted.mkdir(parents=True, exist_ok=True)
        (planted / "helpers.py").write_text("WHO = 'learner'\n", encoding="utf-8")
    verdict = grade(req, work, written=["helpers.py"])
    assert verdict.passed, (verdict.feedback, verdict.failure, verdict.detail)


def test_files_are_the_programs_only_inside_its_folder(tmp_path):
    (tmp_path / "secret.txt").write_text("outside", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(work)
    (work / "link.txt").symlink_to(tmp_path / "secret.txt")
    (work / "out.txt").write_text("mine", encoding="utf-8")
    (work / ".checker").mkdir()
    (work / ".checker" / "x.txt").write_text("the checker's", encoding="utf-8")
    written = written_since(work, before)
    assert sorted(written) == ["link.txt", "out.txt"]
    files = Files(work, written)
    assert "out.txt" in files and "./out.txt" in files and "link.txt" not in files
    with pytest.raises(FileNotFoundError):
        files.read_text("link.txt")
    with pytest.raises(FileNotFoundError):
        files.read_text("../secret.txt")


# ---------------------------------------------------------------- lint reads the grader, never runs it


def lint_messages(path: Path) -> list[str]:
    with pytest.raises(LessonError) as e:
        load_file(path)
    return [str(i) for i in e.value.issues]


@pytest.mark.parametrize(
    "grader, message",
    [
        ("missing.py:check", "requirement 'judged': grader file 'missing.py' not found beside the lesson"),
        ("grading.py:chek", "requirement 'judged': grading.py defines no function 'chek' (did you mean 'check'?)"),
        (
            "grading.py:two",
            "requirement 'judged': two in grading.py (line 4) must take one argument, the learner's run: def two(run):",
        ),
        ("grading.py:waits", "requirement 'judged': waits in grading.py is async; a grader is a plain function"),
    ],
)
def test_lint_checks_the_grader_file_and_function_at_the_grader_key(tmp_path, grader, message):
    path = lesson_with(
        tmp_path,
        grader,
        """\
        def check(run):
            raise RuntimeError("lint never runs it")

        def two(run, other):
            return True

        async def waits(run):
            return True
        """,
    )
    [issue] = lint_messages(path)
    assert issue.startswith(f"{path}:11:17: step 'ex' {message}"), issue


def test_lint_points_into_a_grader_file_that_does_not_parse(tmp_path):
    path = lesson_with(tmp_path, "grading.py:check", "def check(run)\n    return True\n")
    [issue] = lint_messages(path)
    assert issue.startswith(f"{tmp_path / 'grading.py'}:1:15: SyntaxError: ")


@pytest.mark.parametrize(
    "grader, message",
    [
        ("grading.py", "write FILE.py:FUNCTION"),
        ("../grading.py:check", "the grader file must be in the lesson's folder or below it"),
        ("/abs/grading.py:check", "the grader file must be in the lesson's folder or below it"),
    ],
)
def test_lint_says_how_to_write_the_grader(tmp_path, grader, message):
    [issue] = lint_messages(lesson_with(tmp_path, grader, "def check(run):\n    return True\n"))
    assert f":11:17: step 'ex' requirements[0].grader: {message}" in issue


def test_a_lesson_from_text_has_no_folder_to_find_a_grader_in(tmp_path):
    text = lesson_with(tmp_path, "grading.py:check", "def check(run):\n    return True\n").read_text()
    with pytest.raises(LessonError) as e:
        load_text(text)
    assert "this lesson was not loaded from one" in str(e.value)


def test_the_docs_worked_example_is_the_example_pack():
    """docs/LESSON_FORMAT.md shows the pack the tests above run, word for word."""
    from lesson_text import DOC, fenced

    blocks = {lines[0]: lines[1:] for _, lines in fenced(DOC.read_text(encoding="utf-8")) if lines}
    for name in ("losses.yaml", "grading.py"):
        assert blocks[f"# my-pack/{name}"] == (PACK / name).read_text(encoding="utf-8").splitlines(), name


def test_the_schema_has_the_python_requirement():
    from tutor.cli.instructor import lesson_schema

    schema = lesson_schema()["$defs"]["PythonRequirement"]
    assert schema["properties"]["type"]["const"] == "python"
    assert set(schema["required"]) == {"type", "id", "grader", "feedback"}
    assert schema["properties"]["timeout"]["default"] == 10


def test_the_example_pack_copies_and_grades_from_its_new_place(tmp_path):
    """The grader is found beside the lesson file wherever the pack lies."""
    copy = tmp_path / "elsewhere"
    shutil.copytree(PACK, copy)
    req = load_file(copy / "losses.yaml").step("keep-losses").requirements[0]
    assert isinstance(req, PythonRequirement) and req.grader_path().resolve() == (copy / "grading.py").resolve()
