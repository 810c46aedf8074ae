"""A class of three learners, each in a GPUTUTOR_HOME of their own, made with the headless verbs that
record (`check --record`, `run --record`, `exercise`), then `gpututor submit`: the bundles read
back with every answer, verdict and requirement where the learner left it, the digest valid, and a
copy edited by hand flagged. In process (main()), so the whole class takes seconds."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tutor import settings as user_settings
from tutor.classroom import bundle as bundles
from tutor.cli import main
from tutor.course import workspace
from tutor.course.catalog import discover
from tutor.course.progress import Progress

LESSON = "cpu-vs-gpu"
# The lesson's solution without the Apple Silicon branch: fails `checks-mps` alone.
NO_MPS = """import torch

if torch.cuda.is_available():
    device = torch.device("cuda")
else:
    device = torch.device("cpu")

print("device:", device)

x = torch.ones(3).to(device)
print("x is on", x.device)
"""


def cli(capsys, home: Path, *argv: str) -> tuple[int, str, str]:
    os.environ["GPUTUTOR_HOME"] = str(home)
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def class_dir(tmp_path, monkeypatch):
    folder = tmp_path / "class"
    folder.mkdir()
    monkeypatch.setenv(user_settings.CLASS_DIR_ENV, str(folder))
    return folder


def test_three_learners_submit_bundles_that_say_what_they_did(tmp_path, capsys, class_dir):
    homes = {name: tmp_path / name for name in ("ada", "grace", "alan")}
    for name, home in homes.items():
        home.mkdir()
        (home / "settings.toml").write_text(f'learner = "{name.title()}"\n', encoding="utf-8")

    # Ada: predicts no GPU, runs the step (recorded against it), one check right first try,
    # and an exercise that fails one requirement
    ada = homes["ada"]
    assert cli(capsys, ada, "check", LESSON, "devices-predict", "--answer", "no", "--record")[0] == 0
    code, out, _ = cli(capsys, ada, "run", "device-basics", "--record", f"{LESSON}:devices-run")
    assert code == 0 and "recorded as step 'devices-run'" in out and "devices-predict" in out
    code, out, _ = cli(capsys, ada, "check", LESSON, "intermediate-check", "--answer", "2", "--record")
    assert code == 0 and "correct" in out
    code_file = workspace.exercise_file(ada, LESSON, "practice-basic")
    workspace.write_code(code_file, NO_MPS)
    assert cli(capsys, ada, "exercise", LESSON, "practice-basic")[0] == 1  # not yet: one requirement fails

    # Grace: predicts a GPU, a wrong then a right check, a text answer that matches a misconception
    grace = homes["grace"]
    assert cli(capsys, grace, "check", LESSON, "devices-predict", "--answer", "yes", "--record")[0] == 0
    code, _, err = cli(capsys, grace, "check", LESSON, "devices-predict", "--answer", "no", "--record")
    assert code == 2 and "already locked" in err  # once locked, locked
    assert cli(capsys, grace, "run", "--record", f"{LESSON}:devices-run", "--json")[0] == 0
    assert cli(capsys, grace, "check", LESSON, "intermediate-check", "--answer", "1", "--record")[0] == 0
    assert cli(capsys, grace, "check", LESSON, "intermediate-check", "--answer", "2", "--record")[0] == 0
    answer = "GPUs are always faster for everything"
    assert cli(capsys, grace, "check", LESSON, "interview-cpu-gpu", "--answer", answer, "--record")[0] == 0

    # Alan: a prediction no run measured yet, and an unreadable answer that records nothing
    alan = homes["alan"]
    code, out, _ = cli(capsys, alan, "check", LESSON, "crossover-predict", "--answer", "3x", "--record")
    assert code == 0 and f"gpututor run crossover --record {LESSON}:crossover-run" in out
    code, _, err = cli(capsys, alan, "check", LESSON, "intermediate-check", "--answer", "9", "--record")
    assert code == 2 and "nothing was recorded" in err
    with Progress(alan / "progress.db") as progress:
        assert progress.answers(LESSON, "intermediate-check") == []

    read: dict[str, bundles.Bundle] = {}
    for name, home in homes.items():
        code, out, _ = cli(capsys, home, "submit", LESSON, "--json")
        assert code == 0, out
        summary = json.loads(out)
        path = Path(summary["file"])
        assert path.parent == class_dir / "submissions" and path.name.startswith(f"{name}-")
        read[name] = bundles.read(path)
        assert not read[name].edited and read[name].learner == name.title()
        assert [lesson.id for lesson in read[name].lessons] == [LESSON]

    lesson_file = discover().get(LESSON).path
    ada_lesson, grace_lesson, alan_lesson = (read[n].lessons[0] for n in ("ada", "grace", "alan"))
    assert ada_lesson.content_hash == bundles.content_hash(lesson_file)

    # the prediction, verdict by what the learner's own run measured
    (ada_p,) = ada_lesson.predictions
    (grace_p,) = grace_lesson.predictions
    assert ada_p.measured is not None and grace_p.measured is not None
    gpu = ada_p.measured.value
    assert isinstance(gpu, bool)
    assert (ada_p.answer, ada_p.verdict) == ("no", "miss" if gpu else "hit")
    assert (grace_p.answer, grace_p.verdict) == ("yes", "hit" if gpu else "miss")
    assert {"devices-predict", "devices-run"} <= set(ada_lesson.completed)
    (alan_p,) = alan_lesson.predictions
    assert (alan_p.answer, alan_p.value, alan_p.verdict, alan_p.measured) == ("3x", 3.0, "unmeasured", None)

    # checks: attempts in order, the misconception a wrong text answer matched
    (ada_c,) = ada_lesson.checks
    assert (ada_c.first_try, ada_c.correct, len(ada_c.attempts)) == (True, True, 1)
    grace_checks = {c.step: c for c in grace_lesson.checks}
    tries = grace_checks["intermediate-check"]
    assert [a.correct for a in tries.attempts] == [False, True] and not tries.first_try
    assert tries.attempts[0].answer == "about the same"
    text = grace_checks["interview-cpu-gpu"]
    assert not text.correct and text.attempts[0].misconception == "always-faster"
    assert alan_lesson.checks == []

    # the exercise: the code graded, and the one requirement it failed
    (ex,) = ada_lesson.exercises
    assert not ex.passed and ex.code == NO_MPS
    failed = [r.id for r in ex.gradings[-1].requirements if not r.passed]
    assert failed == ["checks-mps"]

    # the machine the runs measured on
    machine = read["ada"].machine
    assert machine.device_kind in ("cpu", "cuda", "mps") and machine.method >= 3 and machine.torch

    # a copy edited by hand is flagged
    edited = tmp_path / "edited.gpututor.json"
    data = json.loads(bundles.dumps(read["alan"]))
    data["lessons"][0]["predictions"][0]["verdict"] = "hit"
    edited.write_text(json.dumps(data), encoding="utf-8")
    assert bundles.read(edited).edited


def test_submit_asks_for_the_name_once_in_a_terminal_and_refuses_without_one(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(user_settings.CLASS_DIR_ENV, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.toml").write_text("gpu_memory_mb = 2048\n", encoding="utf-8")
    out_file = tmp_path / "mine.json"
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    code, _, err = cli(capsys, home, "submit", LESSON, "-o", str(out_file))
    assert code == 2 and 'learner = "Your Name"' in err and not out_file.exists()

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "Barbara Liskov")
    code, out, _ = cli(capsys, home, "submit", LESSON, "-o", str(out_file))
    assert code == 0 and "Bundle for Barbara Liskov" in out and str(out_file) in out
    saved = user_settings.load(home / "settings.toml")
    assert saved.learner == "Barbara Liskov" and saved.gpu_memory_mb == 2048
    assert bundles.read(out_file).learner == "Barbara Liskov"

    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail("asked twice"))
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli(capsys, home, "submit", LESSON)  # the default name, here
    assert code == 0 and list(tmp_path.glob("barbara-liskov-*.gpututor.json"))


# gpu-lab's basics-predict: MNISTClassifier's parameters in float32, worked out by hand
# (fc1 784x256+256, fc2 256x128+128, fc3 128x10+10) = 235,146 parameters x 4 bytes.
PARAMETER_BYTES = (784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10) * 4


def test_a_class_report_from_real_runs_graded_cell_by_cell(tmp_path, capsys, class_dir):
    """Two learners measure the same model with a real run and predict 2x and 8x what it holds: the
    class over-predicts memory x4 (the geometric mean). The gradebook's cells are worked out by hand
    from what each learner did; a truncated file in the folder is named and skipped."""
    lab = "gpu-lab"
    did = {"ada": (2, ["2", "1"]), "grace": (8, ["2"])}  # factor predicted, check-tf32 answers in order
    for name, (factor, answers) in did.items():
        home = tmp_path / name
        home.mkdir()
        (home / "settings.toml").write_text(f'learner = "{name.title()}"\n', encoding="utf-8")
        guess = str(factor * PARAMETER_BYTES)
        assert cli(capsys, home, "check", lab, "basics-predict", "--answer", guess, "--record")[0] == 0
        assert cli(capsys, home, "run", "--record", f"{lab}:basics-run", "--json")[0] == 0
        for answer in answers:
            assert cli(capsys, home, "check", lab, "check-tf32", "--answer", answer, "--record")[0] == 0
        assert cli(capsys, home, "submit", lab, "--json")[0] == 0
    (class_dir / "submissions" / "cut.gpututor.json").write_text('{"format": "gpututor-bundle", "vers', "utf-8")

    gradebook, long_csv = tmp_path / "grades.csv", tmp_path / "long.csv"
    code, out, err = cli(capsys, tmp_path, "class", str(class_dir), "--csv", str(gradebook),
                         "--long-csv", str(long_csv), "--json")  # fmt: skip
    assert code == 0, err
    report = json.loads(out)

    # the gradebook: one row per learner, a column per graded item (Canvas's form)
    import csv

    rows = list(csv.DictReader(gradebook.open(encoding="utf-8")))
    learners = {r["Student"]: r for r in rows if r["Student"].strip() != "Points Possible"}
    assert sorted(learners) == ["Ada", "Grace"]
    check_column = next(c for c in rows[0] if "check-tf32" in c)
    # ada answered option 2 (wrong: "float32 matmuls run in TF32"), then 1 (right); grace only 2
    assert (learners["Ada"][check_column], learners["Grace"][check_column]) == ("1", "0")
    # completion: both did basics-predict, basics-run and (ada) check-tf32, of gpu-lab's steps
    steps = len(discover().get(lab).lesson.steps)
    completion = next(c for c in rows[0] if lab in c and "complet" in c.lower())
    assert float(learners["Ada"][completion]) == round(100 * 3 / steps, 1)  # one decimal
    assert float(learners["Grace"][completion]) == round(100 * 2 / steps, 1)

    # the long CSV: each prediction a miss (x2 and x8 off), measured by each learner's own run
    long_rows = list(csv.DictReader(long_csv.open(encoding="utf-8")))
    predicted = {(r["learner"], r["verdict"]) for r in long_rows if r["step"] == "basics-predict"}
    assert predicted == {("Ada", "miss"), ("Grace", "miss")}

    # the class's prediction profile: bias = exp(mean(log 2, log 8)) = 4, learners at 2 and 8
    (memory,) = [c for c in report["concepts"] if c["concept"] == "memory"]
    assert memory["bias"] == pytest.approx(4.0, rel=1e-6)
    assert "over" in memory["sentence"] and "memory" in memory["sentence"]
    # the truncated file, named
    assert any("cut.gpututor.json" in s["path"] for s in report["skipped"])
