"""`gpututor class`: a folder of bundles (made with the bundle model, sealed, written to a tmp dir)
read into the class report, the gradebook CSVs checked cell by cell against values worked out by
hand, the class's prediction bias against a hand computation, flags, bad files, a learner's two
bundles, and the terminal report at 80 columns."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path

import pytest
from rich.console import Console

from tutor.classroom import gradebook, report
from tutor.classroom.bundle import (
    Attempt,
    Bundle,
    CheckRecord,
    ExerciseRecord,
    Grading,
    LessonRecord,
    MachineRecord,
    Measured,
    PredictionRecord,
    RequirementVerdict,
    content_hash,
    dumps,
)
from tutor.classroom.terminal import render
from tutor.cli import main
from tutor.course.catalog import discover
from tutor.measurement.method import METHOD

LESSON = "cpu-vs-gpu"  # 23 steps; checks and exercises listed in CHECKS, EXERCISES
CHECKS = ["intermediate-check", "interview-cpu-gpu", "interview-bug", "advanced-explain"]
EXERCISES = ["practice-basic", "practice-intermediate", "practice-advanced"]


@pytest.fixture(scope="module")
def lessons():
    catalog = discover()
    return [(item.lesson, item.path) for item in catalog.lessons]


@pytest.fixture(scope="module")
def cpu_hash(lessons) -> str:
    return next(content_hash(path) for lesson, path in lessons if lesson.id == LESSON)


def machine(method: int = METHOD, device: str = "cuda:0: Test GPU (80.0 GiB, sm_90)") -> MachineRecord:
    return MachineRecord(
        host="box", device=device, device_kind="cuda", torch="2.5.1", cuda="12.4", driver="550", method=method
    )


def attempt(correct: bool, misconception: str | None = None) -> Attempt:
    return Attempt(
        answer="x", correct=correct, feedback="", at="2026-11-28T10:00:00+00:00", misconception=misconception
    )


def grading(passed: bool, **requirements: bool) -> Grading:
    reqs = [RequirementVerdict(id=r, title=r.replace("_", " "), passed=p) for r, p in requirements.items()]
    return Grading(at="2026-11-28T10:00:00+00:00", passed=passed, requirements=reqs)


def prediction(step: str, log_error: float | None, verdict: str = "miss", concept: str = "gpu-speedup"):
    return PredictionRecord(
        step=step,
        concept=concept,
        answer="?",
        locked_at="2026-11-28T10:00:00+00:00",
        verdict=verdict,  # type: ignore[arg-type]
        log_error=log_error,
    )


def lesson_record(content: str, completed: int, **records) -> LessonRecord:
    steps = [f"s{i}" for i in range(completed)]
    return LessonRecord(id=LESSON, title="CPU vs GPU", content_hash=content, steps=23, completed=steps, **records)


def bundle(learner: str, lessons: list[LessonRecord], at: str = "2026-11-28T12:00:00+00:00", **kw) -> Bundle:
    return Bundle(gpututor="0.test", learner=learner, submitted_at=at, machine=kw.pop("m", machine()), lessons=lessons)


def write(folder: Path, name: str, b: Bundle, *, seal: bool = True) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(b.sealed() if seal else b), encoding="utf-8")
    return path


def class_of_three(folder: Path, cpu_hash: str) -> None:
    """Ada: 10 of 23 steps; intermediate-check wrong (matching "grads-reset") then right;
    practice-basic failed (moves_model failed, times_it passed) then passed; predicted 2x the
    measured GPU speed-up. Bob: every step; intermediate-check right at once, interview-bug wrong
    (matching "grads-reset") and never right; practice-basic passed first time; predicted 8x.
    Cy: a bundle without this lesson (an empty devices lesson)."""
    ada = lesson_record(
        cpu_hash,
        10,
        checks=[
            CheckRecord(
                step="intermediate-check",
                attempts=[attempt(False, "grads-reset"), attempt(True)],
                correct=True,
                first_try=False,
            )
        ],
        exercises=[
            ExerciseRecord(
                step="practice-basic",
                gradings=[
                    grading(False, moves_model=False, times_it=True),
                    grading(True, moves_model=True, times_it=True),
                ],
                passed=True,
            )
        ],
        predictions=[prediction("crossover-predict", math.log(2))],
    )
    bob = lesson_record(
        cpu_hash,
        23,
        checks=[
            CheckRecord(step="intermediate-check", attempts=[attempt(True)], correct=True, first_try=True),
            CheckRecord(step="interview-bug", attempts=[attempt(False, "grads-reset")], correct=False, first_try=False),
        ],
        exercises=[
            ExerciseRecord(
                step="practice-basic", gradings=[grading(True, moves_model=True, times_it=True)], passed=True
            )
        ],
        predictions=[prediction("crossover-predict", math.log(8)), prediction("size-predict", 0.1, "undecided")],
    )
    devices = LessonRecord(id="devices", title="Devices", content_hash="sha256:x", steps=18, completed=[])
    write(folder, "ada.json", bundle("Ada", [ada]))
    write(folder / "sub", "bob.json", bundle("Bob", [bob]))
    write(folder, "cy.json", bundle("Cy", [devices]))


def test_gradebook_csv_cell_by_cell(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    built = report.build(report.load_dir(tmp_path), [(lesson, path) for lesson, path in lessons if lesson.id == LESSON])
    rows = list(csv.reader(io.StringIO(gradebook.gradebook_csv(built))))
    header = rows[0]
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    # one column per lesson's completion, then its checks and exercises in the lesson's order
    keys = [LESSON, *(f"{LESSON}/{s}" for s in CHECKS), *(f"{LESSON}/{s}" for s in EXERCISES), "devices"]
    assert [h.split(":")[0] for h in header[5:]] == keys
    assert rows[1] == ["    Points Possible", "", "", "", "", "100", *["1"] * 7, "100"]
    by_name = {row[0]: row for row in rows[2:]}
    assert sorted(by_name) == ["Ada", "Bob", "Cy"]
    # by hand: Ada 10/23 = 43.478% -> 43.5; her check right on the 2nd try scores 1; the others 0
    assert by_name["Ada"] == ["Ada", "", "", "Ada", "", "43.5", "1", "0", "0", "0", "1", "0", "0", ""]
    assert by_name["Bob"] == ["Bob", "", "", "Bob", "", "100", "1", "0", "0", "0", "1", "0", "0", ""]
    # Cy's bundle does not hold cpu-vs-gpu: blank (ungraded), and devices 0 of 18 steps
    assert by_name["Cy"] == ["Cy", "", "", "Cy", "", *[""] * 8, "0"]


def test_long_csv_rows(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    built = report.build(report.load_dir(tmp_path), lessons)
    rows = list(csv.DictReader(io.StringIO(gradebook.long_csv(built))))
    assert list(rows[0]) == ["learner", "lesson", "step", "kind", "verdict", "score"]
    ada = {r["step"]: r for r in rows if r["learner"] == "Ada"}
    assert ada[""] == {
        "learner": "Ada",
        "lesson": LESSON,
        "step": "",
        "kind": "lesson",
        "verdict": "10/23 steps",
        "score": "43.5",
    }
    assert (ada["intermediate-check"]["verdict"], ada["intermediate-check"]["score"]) == ("right", "1")
    assert (ada["interview-bug"]["verdict"], ada["interview-bug"]["score"]) == ("not tried", "0")
    assert (ada["practice-basic"]["kind"], ada["practice-basic"]["verdict"], ada["practice-basic"]["score"]) == (
        "exercise",
        "passed",
        "1",
    )
    assert (ada["crossover-predict"]["verdict"], ada["crossover-predict"]["score"]) == ("miss", "0")
    assert ada["why"]["kind"] == "read" and ada["why"]["score"] == ""
    assert len(ada) == 1 + 23  # the completion row and one per step of the lesson
    bob = {r["step"]: r for r in rows if r["learner"] == "Bob"}
    assert (bob["intermediate-check"]["verdict"], bob["interview-bug"]["verdict"]) == ("right first try", "wrong")
    assert (bob["size-predict"]["verdict"], bob["size-predict"]["score"]) == ("undecided", "")


def test_class_bias_is_the_geometric_mean_over_every_prediction(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    built = report.build(report.load_dir(tmp_path), lessons)
    (speedup,) = built.concepts
    # by hand: Ada predicted 2x what was measured, Bob 8x -> sqrt(2 * 8) = 4; Bob's undecided one is
    # in no factor (as in profile.py), but counted
    assert speedup.bias == pytest.approx(4.0)
    assert speedup.learner_biases == pytest.approx((2.0, 8.0))
    assert speedup.spread == pytest.approx((2.0, 8.0))
    assert (speedup.learners, speedup.predictions, speedup.scored) == (2, 3, 2)
    assert (speedup.hits, speedup.misses, speedup.undecided) == (0, 2, 1)
    assert speedup.verdict == "over"
    assert speedup.sentence.startswith("The class over-predicts GPU speed-ups x4 ")


def test_an_under_predicting_class_reads_as_one(tmp_path):
    preds = [[prediction("a", -math.log(2))], [prediction("a", -math.log(4)), prediction("b", -math.log(4))]]
    for i, ps in enumerate(preds):
        write(tmp_path, f"{i}.json", bundle(f"L{i}", [lesson_record("sha256:h", 1, predictions=ps)]))
    (c,) = report.build(report.load_dir(tmp_path)).concepts
    # by hand: exp(mean(-ln2, -ln4, -ln4)) = 1 / 2^(5/3) = 1 / 3.17; learner biases 1/2 and 1/4
    assert c.bias == pytest.approx(2 ** (-5 / 3))
    assert c.learner_biases == pytest.approx((0.25, 0.5))
    assert c.sentence.startswith("The class under-predicts GPU speed-ups x3.2 ")


def test_checks_and_exercises_summed_up(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    built = report.build(report.load_dir(tmp_path), lessons)
    first = built.checks[0]  # interview-bug: 1 of 1 wrong first (100%) before intermediate-check's 1 of 2
    assert (first.step, first.wrong_first, first.answered, first.right_eventually) == ("interview-bug", 1, 1, 0)
    assert first.misconceptions == (("grads-reset", 1),)
    second = built.checks[1]
    assert (second.step, second.wrong_first, second.answered, second.mean_attempts) == ("intermediate-check", 1, 2, 1.5)
    (ex,) = built.exercises
    assert (ex.attempted, ex.passed, ex.passed_first, ex.mean_tries_to_pass) == (2, 2, 1, 1.5)
    (req,) = ex.requirements
    assert (req.id, req.failed_first, req.passed_later, req.mean_tries_to_pass) == ("moves_model", 1, 1, 2.0)
    completion = {row.lesson: row for row in built.lessons}
    assert (completion[LESSON].learners, completion[LESSON].finished) == (2, 1)
    assert completion[LESSON].mean_share == pytest.approx((10 / 23 + 1) / 2)


def test_flags_edited_other_version_and_older_method(tmp_path, lessons, cpu_hash):
    write(tmp_path, "ok.json", bundle("Ok", [lesson_record(cpu_hash, 3)]))
    edited = write(tmp_path, "edited.json", bundle("Ed", [lesson_record(cpu_hash, 3)]))
    data = json.loads(edited.read_text())
    data["lessons"][0]["completed"].append("s99")  # a hand edit: one more step "done"
    edited.write_text(json.dumps(data))
    write(tmp_path, "old.json", bundle("Old", [lesson_record(cpu_hash, 3)], m=machine(method=METHOD - 1)))
    write(tmp_path, "other.json", bundle("Vi", [lesson_record("sha256:an-older-file", 3)]))
    built = report.build(report.load_dir(tmp_path), lessons)
    assert {(f.learner, f.kind) for f in built.flags} == {
        ("Ed", "edited"),
        ("Old", "older-method"),
        ("Vi", "lesson-version"),
    }
    assert {learner.learner: learner.flags for learner in built.learners}["Ok"] == ()
    # without the lesson files, the version most bundles hold is the lesson's
    alone = report.build(report.load_dir(tmp_path))
    assert [f.learner for f in alone.flagged("lesson-version")] == ["Vi"]


def test_bad_files_are_named_and_skipped(tmp_path, cpu_hash):
    good = write(tmp_path, "good.json", bundle("Ada", [lesson_record(cpu_hash, 2)]))
    text = good.read_text()
    (tmp_path / "truncated.json").write_text(text[: len(text) // 2])
    (tmp_path / "foreign.json").write_text('{"name": "package.json of something else"}')
    future = json.loads(text)
    future["version"] = 99
    (tmp_path / "future.json").write_text(json.dumps(future))
    (tmp_path / "latin1.json").write_bytes('{"learner": "Zoë"}'.encode("latin-1"))
    (tmp_path / "notes.txt").write_text("not read: not .json")
    loaded = report.load_dir(tmp_path)
    skipped = {Path(s.path).name: s.reason for s in loaded.skipped}
    assert set(skipped) == {"truncated.json", "foreign.json", "future.json", "latin1.json"}
    assert "not JSON" in skipped["truncated.json"]
    assert "not a gpututor bundle" in skipped["foreign.json"]
    assert "newer" in skipped["future.json"]
    assert "cannot read" in skipped["latin1.json"]
    built = report.build(loaded)
    assert [learner.learner for learner in built.learners] == ["Ada"]
    assert built.files == 5


def test_a_learners_later_bundle_is_kept(tmp_path, cpu_hash):
    # the later one sorts first by name, so the order files are read in does not decide
    write(tmp_path, "a-later.json", bundle("Ada", [lesson_record(cpu_hash, 9)], at="2026-11-28T12:00:00+01:00"))
    write(tmp_path, "b-earlier.json", bundle("Ada", [lesson_record(cpu_hash, 2)], at="2026-11-28T11:30:00+00:00"))
    built = report.build(report.load_dir(tmp_path))
    (ada,) = built.learners
    # 12:00+01:00 is 11:00 UTC: earlier than 11:30 UTC, whatever the clock text says
    assert Path(ada.path).name == "b-earlier.json"
    (dropped,) = built.superseded
    assert Path(dropped.path).name == "a-later.json" and dropped.kept == ada.path
    assert built.bundles_read == 2


def test_cli_exit_codes_and_outputs(tmp_path, capsys, cpu_hash):
    assert main(["class", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "x.json").write_text("{}")
    assert main(["class", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no learner's bundle" in err and "x.json" in err
    folder = tmp_path / "class"
    class_of_three(folder, cpu_hash)
    out_csv, long_csv = tmp_path / "g.csv", tmp_path / "long.csv"
    assert main(["class", str(folder), "--csv", str(out_csv), "--long-csv", str(long_csv)]) == 0
    out = capsys.readouterr().out
    assert "The class over-predicts GPU speed-ups x4" in out
    assert out_csv.read_text().startswith("Student,ID,SIS User ID,SIS Login ID,Section,")
    assert long_csv.read_text().startswith("learner,lesson,step,kind,verdict,score\n")
    assert main(["class", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [learner["learner"] for learner in data["learners"]] == ["Ada", "Bob", "Cy"]
    assert data["concepts"][0]["bias"] == pytest.approx(4.0)


def test_the_terminal_report_reads_at_80_columns(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    long_name = "Maximiliana Wolfeschlegelsteinhausenbergerdorff-Fitzgerald"
    write(tmp_path, "long.json", bundle(long_name, [lesson_record("sha256:other", 5)], m=machine(method=METHOD - 1)))
    (tmp_path / "broken.json").write_text("{")
    built = report.build(report.load_dir(tmp_path), lessons)
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(render(built))
    text = console.export_text()
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in text  # folded, never cut with an ellipsis
    # A cell folds over lines beside its neighbours: each thing said must still be there whole, its
    # characters in order (a cut one loses some)
    flat = re.sub(r"\s+", "", text)
    for must in [
        long_name,
        "broken.json",
        "Three backward() calls, no zeroing",
        "grads-reset",
        "moves model",
        "Test GPU",
        *(c.sentence for c in built.concepts),
        *(f.reason for f in built.flags),
    ]:
        assert _in_order(re.sub(r"\s+", "", must), flat), must


def _in_order(needle: str, haystack: str) -> bool:
    rest = iter(haystack)
    return all(ch in rest for ch in needle)


def test_the_cli_report_folds_at_80_columns_never_crops(tmp_path, capsys, monkeypatch, cpu_hash):
    """As `gpututor class` prints it (rich_console, not a test console): a sentence longer than the
    screen folds onto the next line, whole."""
    monkeypatch.setenv("COLUMNS", "80")
    class_of_three(tmp_path, cpu_hash)
    assert main(["class", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    sentence = "The class over-predicts GPU speed-ups x4 (2 predictions by 2 learners, 0 on target)"
    assert re.sub(r"\s+", "", sentence) in re.sub(r"\s+", "", out)


@pytest.mark.parametrize("bad_error", [math.nan, math.inf, -math.inf, 800.0])
def test_a_hand_edited_error_without_a_ratio_is_left_out_not_a_traceback(tmp_path, bad_error):
    """JSON takes NaN and Infinity, and a learner may forge a digest: such an error has no ratio (as
    profile.py gives none past a float's range), so the bias is the other learner's alone."""
    write(tmp_path, "a.json", bundle("A", [lesson_record("sha256:h", 1, predictions=[prediction("p", bad_error)])]))
    write(tmp_path, "b.json", bundle("B", [lesson_record("sha256:h", 1, predictions=[prediction("p", math.log(3))])]))
    built = report.build(report.load_dir(tmp_path))
    (c,) = built.concepts
    assert c.bias == pytest.approx(3.0)
    assert (c.predictions, c.with_ratio, c.learner_biases) == (2, 1, pytest.approx((3.0,)))
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(render(built))
    assert "GPU speed-ups" in console.export_text()
    assert json.dumps(built.as_dict(), allow_nan=False)


def test_a_learner_name_that_is_a_formula_is_inert_in_both_csvs(tmp_path, cpu_hash):
    write(tmp_path, "f.json", bundle('=HYPERLINK("http://x","y")', [lesson_record(cpu_hash, 1)]))
    write(tmp_path, "z.json", bundle("Zoë", [lesson_record(cpu_hash, 1)]))
    built = report.build(report.load_dir(tmp_path))
    rows = list(csv.reader(io.StringIO(gradebook.gradebook_csv(built))))[2:]
    assert [(r[0], r[3]) for r in rows] == [('\'=HYPERLINK("http://x","y")',) * 2, ("Zoë", "Zoë")]
    long_rows = list(csv.DictReader(io.StringIO(gradebook.long_csv(built))))
    assert {r["learner"] for r in long_rows} == {'\'=HYPERLINK("http://x","y")', "Zoë"}


def test_a_wrong_choice_is_told_by_the_option_it_chose(tmp_path, lessons, cpu_hash):
    """A choice check's wrong answers matched no rubric misconception: the report names the options
    they chose, read as the check read them (its number, a letter or its text), most chosen first."""

    def chose(*answers: str) -> CheckRecord:
        tries = [Attempt(answer=a, correct=False, feedback="", at="2026-11-28T10:00:00+00:00") for a in answers]
        tries.append(attempt(True))
        return CheckRecord(step="intermediate-check", attempts=tries, correct=True, first_try=False)

    learners = [("ada", chose("1")), ("bo", chose("about the same", "c", "a")), ("cy", chose("a")), ("di", chose())]
    for name, record in learners:
        write(tmp_path, f"{name}.json", bundle(name, [lesson_record(cpu_hash, 3, checks=[record])]))
    (check,) = report.build(report.load_dir(tmp_path), lessons).checks
    assert check.misconceptions == ()
    assert check.wrong_options == (("about the same", 3), ("about nine times as big", 1))
    assert check.wrong_answers_in_words() == '"about the same" (3 of 4)'
    assert report.build(report.load_dir(tmp_path), lessons).as_dict()["checks"][0]["wrong_options"][0] == {
        "option": "about the same",
        "count": 3,
    }


def test_one_learner_however_the_name_is_spelt(tmp_path, cpu_hash):
    """ "Ada", "ada " and a fullwidth "ＡＤＡ" are one learner; the later bundle's spelling is shown."""
    write(tmp_path, "1.json", bundle("Ada", [lesson_record(cpu_hash, 2)], at="2026-11-28T10:00:00+00:00"))
    write(tmp_path, "2.json", bundle(" ada  ", [lesson_record(cpu_hash, 4)], at="2026-11-28T11:00:00+00:00"))
    write(tmp_path, "3.json", bundle("ＡＤＡ", [lesson_record(cpu_hash, 9)], at="2026-11-28T12:00:00+00:00"))
    write(tmp_path, "4.json", bundle("Ada Lovelace", [lesson_record(cpu_hash, 1)]))
    built = report.build(report.load_dir(tmp_path))
    assert sorted(learner.learner for learner in built.learners) == ["Ada Lovelace", "ＡＤＡ"]
    assert sorted(Path(d.path).name for d in built.superseded) == ["1.json", "2.json"]


def test_a_prediction_judged_on_an_older_method_s_run_flags_the_bundle(tmp_path, cpu_hash):
    """The machine is up to date, but a run stored before the update judged two predictions."""
    judged = [
        prediction("p1", 0.5).model_copy(update={"measured": Measured(value=2.0, method=METHOD - 1)}),
        prediction("p2", 0.5).model_copy(update={"measured": Measured(value=2.0, method=METHOD - 1)}),
        prediction("p3", 0.5).model_copy(update={"measured": Measured(value=2.0, method=METHOD)}),
    ]
    write(tmp_path, "old-runs.json", bundle("Ru", [lesson_record(cpu_hash, 3, predictions=judged)]))
    (flag,) = report.build(report.load_dir(tmp_path)).flags
    assert (flag.learner, flag.kind) == ("Ru", "older-method")
    assert flag.reason.startswith(
        f"2 predictions judged on runs of method {METHOD - 1}, older than this tutor's {METHOD}"
    )
