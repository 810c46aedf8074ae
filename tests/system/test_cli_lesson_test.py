"""`gpututor lesson test`: a lesson played headlessly, as an instructor's CI would."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tutor.cli import main

pytestmark = pytest.mark.skipif(os.name != "posix", reason="exercises run in the POSIX sandbox")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def scaffold(capsys, tmp_path) -> Path:
    path = tmp_path / "lessons" / "demo.yaml"
    path.parent.mkdir()
    assert run_cli(capsys, "new", "demo", "-o", str(path))[0] == 0
    return path


def test_the_scaffold_passes_with_a_table(capsys, scaffold, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    code, out, err = run_cli(capsys, "lesson", "test", str(scaffold.parent))
    assert code == 0, out + err
    assert "✓ demo · look · run: runs device-basics (quick)" in out
    assert "✓ demo · why-move · check: grades 5 answers as listed" in out
    assert "✓ demo · practice · exercise: solution passes" in out
    assert "✓ demo · practice · exercise: mistake 'hard-coded' fails checks-cuda" in out
    assert "✓ demo · memory · instrument: computes at set and scenario" in out
    assert "✓ demo · guess · predict: cuda_available can be judged against the prediction" in out
    assert "✓ demo · practice · exercise: starter does not pass yet" in out
    assert "lesson test" in out and "8 passed, 0 failed" in out


def test_a_solution_graded_beside_other_programs_that_could_not_tell_is_graded_again_alone(
    capsys, scaffold, monkeypatch
):
    """lesson test grades a step's programs side by side; a speed-up judged under that load may be
    "can't tell yet": the solution is then graded once more, alone, and passes on that grading."""
    import dataclasses

    from tutor.exercises import grader

    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    real, calls = grader.grade_exercise, []

    def grade(step, code, workdir, **kw):
        result = real(step, code, workdir, **kw)
        calls.append(workdir.name)
        if workdir.name == "solution":  # the first, side-by-side grading: undecided
            undecided = [dataclasses.replace(r, passed=False, judged=False) for r in result.requirements]
            return dataclasses.replace(result, passed=False, requirements=undecided)
        return result

    from tutor.exercises import inspected

    monkeypatch.setattr(grader, "grade_exercise", grade)
    monkeypatch.setitem(inspected._starters, "kept beside the others", None)
    code, out, err = run_cli(capsys, "lesson", "test", str(scaffold.parent))
    assert code == 0, out + err
    assert inspected._starters == {}  # the starter is watched again, alone, for the second grading
    assert "solution-alone" in calls and calls.index("solution-alone") == len(calls) - 1
    assert "✓ demo · practice · exercise: solution passes" in out and "graded again alone" in out


def test_a_mistake_not_for_this_machine_is_counted_as_skipped(capsys, scaffold, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    text = scaffold.read_text(encoding="utf-8")
    scaffold.write_text(
        text.replace("        fails: checks-cuda\n", "        fails: checks-cuda\n        only_on: [mps]\n"),
        encoding="utf-8",
    )
    code, out, err = run_cli(capsys, "lesson", "test", str(scaffold.parent))
    assert code == 0, out + err
    assert "- demo · practice · exercise: mistake 'hard-coded' fails checks-cuda" in out
    assert "not a mistake on cpu (only_on: mps): not run" in out
    assert "7 passed, 1 skipped (not for this machine), 0 failed" in out


def test_a_mistake_that_passes_fails_the_test(capsys, scaffold):
    text = scaffold.read_text(encoding="utf-8")
    # The "hard-coded" mistake now asks torch.cuda.is_available(): run, it meets the requirement it should fail.
    broken = text.replace(
        '          report(device="cpu")',
        '          import torch\n          torch.cuda.is_available()\n          report(device="cpu")',
    )
    assert broken != text
    scaffold.write_text(broken, encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold), "--json")
    assert code == 1
    results = [json.loads(line) for line in out.splitlines()]
    bad = [r for r in results[:-1] if not r["ok"]]
    assert [(r["step"], r["kind"]) for r in bad] == [("practice", "exercise")]
    assert "mistake 'hard-coded' fails checks-cuda" in bad[0]["what"]
    assert bad[0]["detail"] == "it passed: all 2 requirements met"
    assert results[-1]["failed"] == 1


def test_a_lesson_that_does_not_lint_fails_with_its_lines(capsys, scaffold):
    text = scaffold.read_text(encoding="utf-8")
    accepted = "        - Move it with .to(device) since inputs must share one device.\n"
    scaffold.write_text(text.replace("        - Move it.\n", accepted), encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold))
    assert code == 1
    assert (
        "✗" in out and "lint: loads and lints clean" in out and "is listed as wrong, but the rubric accepts it" in out
    )


def test_bad_input_exits_2(capsys, tmp_path):
    code, _, err = run_cli(capsys, "lesson", "test", str(tmp_path / "nope.yaml"))
    assert code == 2 and "no such file" in err
    code, _, err = run_cli(capsys, "lesson", "test", str(tmp_path))
    assert code == 2 and "no lesson files" in err


# The exercise lessons first: their sandboxed programs (21; 6 torchrun jobs) make them the longest tests.
BUILT_IN = sorted(
    (Path(__file__).resolve().parents[2] / "lessons").glob("*.yaml"),
    key=lambda p: (p.stem not in ("gpu-training-practice", "beyond-one-gpu"), p.stem),
)


@pytest.mark.long
@pytest.mark.parametrize("path", BUILT_IN, ids=lambda p: p.stem)
def test_every_built_in_lesson_passes(capsys, monkeypatch, path, shared_gradings):
    """What an instructor's CI runs, on ours: every built-in lesson, played headlessly (one
    lesson per test, so parallel workers can share them out). A program the exercise tests grade
    alike (tests/exercises/test_lesson_practice.py) is graded once for both (shared_gradings)."""
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    code, out, err = run_cli(capsys, "lesson", "test", str(path))
    failures = [line for line in out.splitlines() if line.startswith("✗")]
    assert code == 0 and not failures, "\n".join(failures) or err
    assert f"✓ {path.stem} · - · lint" in out
    if path.stem == "gpu-training-practice":
        # Quick mode: a checkpoint's accuracy is measured on a slice and shown, its bar left to --full.
        assert "bar is not applied on a data slice" in out


def test_the_built_in_lessons_are_the_course_s_the_steps_beyond_and_the_capstone():
    assert sorted(p.stem for p in BUILT_IN) == [
        "beyond-one-gpu",
        "cpu-vs-gpu",
        "devices",
        "gpu-lab",
        "gpu-lab-practice",
        "gpu-training",
        "gpu-training-practice",
        "training-iron-law",
        "your-own-loop",
    ]


def test_a_prediction_no_measurement_can_match_fails_the_test(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    path = tmp_path / "predictions.yaml"
    path.write_text(
        "id: predictions\ntitle: Predictions\nsteps:\n"
        "  - {id: error, kind: predict, prompt: Which error?, compare: error_type,\n"
        "     answer: {type: choice, options: [ValueError, TypeError]}}\n"  # the run raises a RuntimeError
        "  - {id: mismatch, kind: run, experiment: device-mismatch}\n"
        "  - {id: cuda, kind: predict, prompt: A CUDA GPU here?, compare: cuda_available,\n"
        "     answer: {type: choice, options: ['yes', 'no']}}\n"  # a true/false metric: yes or no matches
        "  - {id: basics, kind: run, experiment: device-basics}\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "lesson", "test", str(path), "--json")
    results = {r["step"]: r for r in map(json.loads, out.splitlines()[:-1]) if r["kind"] == "predict"}
    assert code == 1
    assert not results["error"]["ok"] and "measured RuntimeError, which no option matches" in results["error"]["detail"]
    assert results["cuda"]["ok"] and results["cuda"]["detail"] == "measured False: 'no' is right here"


def test_exercise_programs_run_side_by_side_and_report_in_the_lessons_order(monkeypatch, tmp_path):
    """The solution and the mistakes that must run are graded concurrently (one per core), and
    their outcomes still come out solution first, then each mistake as the lesson lists them."""
    import threading

    from tutor.authoring import lesson_test
    from tutor.course.lesson import ExerciseStep, Lesson
    from tutor.course.loader import load_text
    from tutor.exercises import grader

    lesson: Lesson = load_text(
        (Path(__file__).resolve().parents[2] / "tutor" / "authoring" / "templates" / "new-lesson.yaml")
        .read_text(encoding="utf-8")
        .replace("LESSON_ID", "demo")
        .replace("LESSON_TITLE", "Demo"),
        "demo.yaml",
    )
    step = next(s for s in lesson.steps if isinstance(s, ExerciseStep))
    mistakes = [step.mistakes[0].model_copy(update={"name": f"m{i}"}) for i in range(3)]
    step = step.model_copy(update={"mistakes": mistakes})
    running, most = [0], [0]
    lock = threading.Lock()
    order = {step.solution: 3.0, **{m.code: 0.0 for m in mistakes}}  # the solution finishes last

    def fake_grade(step_, code, workdir, **_):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        import time

        time.sleep(0.2 + 0.1 * order.get(code, 0))
        with lock:
            running[0] -= 1
        passed = code == step.solution
        reqs = [
            grader.RequirementResult(r.id, r.type, passed, "" if passed else f"Cause. {r.feedback}")
            for r in step.requirements
        ]  # as the grader words a failure: the cause, then the advice
        return grader.ExerciseResult(passed, reqs, None, "ok" if passed else "not yet")

    monkeypatch.setattr(grader, "grade_exercise", fake_grade)
    monkeypatch.setattr(lesson_test, "exercise_workers", lambda: 2)
    player = lesson_test.Player("cpu", full=True)  # full: every mistake runs, none is read
    outcomes = list(player._exercise_outcomes(lesson, step))
    assert [o.what for o in outcomes] == ["solution passes", "starter does not pass yet"] + [
        f"mistake 'm{i}' fails {mistakes[0].fails}" for i in range(3)
    ]
    assert all(o.ok for o in outcomes)
    assert most[0] == 2


def test_every_tweak_value_is_run_and_judged(tmp_path):
    """A learner may switch a run step's settings before running: each value offered is run (one
    setting at a time, the others as the step sets them) and its prediction judged."""
    from tutor import experiments
    from tutor.authoring import lesson_test
    from tutor.course.loader import load_text

    lesson = load_text(
        "id: tweaks\ntitle: Tweaks\nsteps:\n"
        "  - {id: guess, kind: predict, prompt: How fast?, compare: resident_speedup,\n"
        "     answer: {type: choice, options: [{text: slower, min: 0, max: 1}, {text: faster, min: 1}]}}\n"
        "  - id: run\n    kind: run\n    experiment: data-bottleneck\n    params: {batch_size: 256}\n"
        "    tweak: {batch_size: [64, 256], workers: [1, 2]}\n",
        "tweaks.yaml",
    )
    asked = []

    def fake_run(experiment, params, keep=None):
        asked.append((params, keep))
        # every metric 1.0, but no interval: none was measured
        reported = {m: None if m.endswith(("_low", "_high")) else 1.0 for m in experiments.get(experiment).metrics}
        return {**reported, "resident_speedup": 0.5 if params.get("workers") == 1 else 3.0}, ""

    player = lesson_test.Player("cpu")
    player.run = fake_run  # what is asked for, not the training, is under test here
    outcomes = list(player.play(lesson))
    # The first run is the screen's start: batch 256 from params, workers at its first offered value.
    start = {"batch_size": 256, "workers": 1}
    assert asked == [
        (start, start),
        ({**start, "batch_size": 64}, {**start, "batch_size": 64}),
        ({**start, "workers": 2}, {**start, "workers": 2}),
    ]
    said = [(o.what, o.detail) for o in outcomes if o.kind == "predict"]
    assert said[0] == ("resident_speedup can be judged against the prediction", "measured 0.5: 'slower' is right here")
    assert said[2] == (
        "resident_speedup can be judged against the prediction with workers=2",
        "measured 3: 'faster' is right here",
    )
    assert [o.what for o in outcomes if o.kind == "run"][1] == "runs data-bottleneck with batch_size=64 (quick)"


def test_a_tweak_value_is_run_as_offered_not_cut_to_the_quick_settings(monkeypatch):
    from tutor import experiments
    from tutor.authoring import lesson_test

    seen = []

    def fake_start(name, values, device=None):
        seen.append(values)
        return iter(())

    monkeypatch.setattr(experiments, "start", fake_start)
    player = lesson_test.Player("cpu")
    quick = experiments.get("data-bottleneck").quick  # {"batches": 20}
    player.run("data-bottleneck", {"batches": 500}, keep={"batches": 500})
    player.run("data-bottleneck", {"batches": 400})
    assert seen == [{"batches": 500}, {"batches": quick["batches"]}]


def test_a_band_no_answer_can_reach_and_an_unreachable_goal_fail_the_test(capsys, tmp_path):
    path = tmp_path / "bands.yaml"
    path.write_text(
        "id: bands\ntitle: Bands\nsteps:\n"
        "  - id: count\n    kind: check\n    prompt: How many steps?\n"
        "    answer:\n      type: number\n      value: 235\n      ranges:\n"
        "        - {min: 234, max: 234, feedback: Off by one.}\n"  # inside 211.5..258.5: never shown
        "        - {min: 400, feedback: Micro-batches.}\n"
        "  - id: impossible\n    kind: instrument\n    instrument: memory-ledger\n"
        # Proving no setting reaches a goal tries every one: 599,760 with every control free (11 s).
        "    fixed: [model, batch, parallel, gpus, budget, switch_off]\n"
        "    goal: {output: total_gb, max: -1}\n"
        "  - id: done-already\n    kind: instrument\n    instrument: memory-ledger\n"
        "    goal: {output: total_gb, min: 1}\n"
        "  - id: reachable\n    kind: instrument\n    instrument: memory-ledger\n    fixed: [model]\n"
        "    goal: {output: fits, equals: true}\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "lesson", "test", str(path), "--json")
    assert code == 1
    results = {(r["step"], r["what"]): r for r in map(json.loads, out.splitlines()[:-1])}
    bands = results[("count", "each of 2 ranges is reached")]
    assert not bands["ok"]
    assert bands["detail"] == (
        "range 1 (234..234) can never be reached: answers from 211.5 to 258.5 are graded "
        "right (the default tolerance 0.1 (10% relative) of 235)"
    )
    impossible = results[("impossible", "goal total_gb <= -1 can be met")]
    assert not impossible["ok"] and "no setting reaches it" in impossible["detail"]
    assert "a learner may move: optimizer, precision, checkpointing)" in impossible["detail"]  # the fixed ones are not
    already = results[("done-already", "goal total_gb >= 1 can be met")]
    assert not already["ok"] and "met at the step's starting settings" in already["detail"]
    reachable = results[("reachable", "goal fits = True can be met")]
    assert reachable["ok"] and reachable["detail"].startswith("e.g. ")


def test_a_mistake_whose_pack_grader_crashed_is_not_counted_as_failing_it(monkeypatch):
    """A lesson's own grader that raises on a mistake's run judged nothing: the mistake must not
    go green as 'fails the requirement'."""
    from tutor.authoring import lesson_test
    from tutor.course.lesson import ExerciseStep, Lesson
    from tutor.course.loader import load_text
    from tutor.exercises import grader

    lesson: Lesson = load_text(
        (Path(__file__).resolve().parents[2] / "tutor" / "authoring" / "templates" / "new-lesson.yaml")
        .read_text(encoding="utf-8")
        .replace("LESSON_ID", "demo")
        .replace("LESSON_TITLE", "Demo"),
        "demo.yaml",
    )
    step = next(s for s in lesson.steps if isinstance(s, ExerciseStep))

    def fake_grade(step_, code, workdir, **_):
        passed = code == step.solution
        crash = "" if passed else "Traceback (most recent call last):\n  ...\nKeyError: 'loss'"
        reqs = [
            grader.RequirementResult(r.id, r.type, passed, "" if passed else "checker failed", not crash, crash)
            for r in step.requirements
        ]
        return grader.ExerciseResult(passed, reqs, None, "ok" if passed else "not checked")

    monkeypatch.setattr(grader, "grade_exercise", fake_grade)
    outcomes = list(lesson_test.Player("cpu", full=True)._exercise_outcomes(lesson, step))
    mistake = outcomes[2]
    assert not mistake.ok
    assert mistake.detail == "its checker failed instead of judging it: KeyError: 'loss'"


def test_a_mistake_is_run_only_on_the_devices_where_it_is_one(monkeypatch):
    """Float16 autocast is a mistake on a CPU and what a CUDA GPU should do: a mistake with
    `only_on: [cpu, mps]` is not run on a CUDA box (it would pass there), and says why."""
    from tutor.authoring import lesson_test
    from tutor.course.lesson import ExerciseStep, Lesson
    from tutor.course.loader import load_text
    from tutor.exercises import grader

    lesson: Lesson = load_text(
        (Path(__file__).resolve().parents[2] / "tutor" / "authoring" / "templates" / "new-lesson.yaml")
        .read_text(encoding="utf-8")
        .replace("LESSON_ID", "demo")
        .replace("LESSON_TITLE", "Demo"),
        "demo.yaml",
    )
    step = next(s for s in lesson.steps if isinstance(s, ExerciseStep))
    step.mistakes[0] = step.mistakes[0].model_copy(update={"only_on": ["cpu", "mps"]})
    graded = []

    def fake_grade(step_, code, workdir, **_):  # as on a CUDA box: the mistake's code passes there
        graded.append(code)
        reqs = [grader.RequirementResult(r.id, r.type, True, "") for r in step.requirements]
        return grader.ExerciseResult(True, reqs, None, "ok")

    monkeypatch.setattr(grader, "grade_exercise", fake_grade)
    monkeypatch.setattr(lesson_test, "program_device", lambda: "cuda")
    outcomes = list(lesson_test.Player("cpu", full=True)._exercise_outcomes(lesson, step))
    mistake = outcomes[2]
    assert mistake.ok and mistake.skipped and mistake.detail == "not a mistake on cuda (only_on: cpu, mps): not run"
    assert sorted(graded) == sorted([step.solution, step.starter])  # the starter runs too; the mistake not
    monkeypatch.setattr(lesson_test, "program_device", lambda: "cpu")  # a mistake here: run, and it passed
    assert not list(lesson_test.Player("cpu", full=True)._exercise_outcomes(lesson, step))[2].ok


def test_lesson_test_shows_the_interval_it_graded_against_and_an_undecided_boundary():
    """The learner's verdict decides the instructor's: an interval inside 'below 2x' names it right
    here; one across the 2x edge names both options undecided (still passing: a re-run is offered);
    one no option holds fails, so a lesson error cannot hide behind the noise."""
    from tutor.authoring import lesson_test
    from tutor.course.loader import load_file

    lesson = load_file(Path(__file__).resolve().parents[2] / "lessons" / "gpu-lab.yaml")
    step = lesson.step("sync-predict")
    player = lesson_test.Player("cpu")
    wide = player._predict_outcome(lesson, step, {"ratio": 1.02, "ratio_low": 0.4, "ratio_high": 1.3})
    assert wide.ok and wide.detail == "measured 1.02, interval 0.4 to 1.3: 'About the same (below 2x)' is right here"
    torn = player._predict_outcome(lesson, step, {"ratio": 1.9, "ratio_low": 1.7, "ratio_high": 2.3})
    assert torn.ok and "this machine can't tell yet between 'About the same (below 2x)' and '2x to 10x'" in torn.detail
    broken = player._predict_outcome(lesson, step, {"ratio": -5.0, "ratio_low": -9.0, "ratio_high": -1.0})
    assert not broken.ok


def _played_with(text: str, measured: dict) -> list:
    """The outcomes of a lesson played on a fake run that reports `measured` (every other metric 1.0)."""
    from tutor import experiments
    from tutor.authoring import lesson_test
    from tutor.course.loader import load_text

    def fake_run(experiment, params, keep=None):
        reported = {m: None if m.endswith(("_low", "_high")) else 1.0 for m in experiments.get(experiment).metrics}
        return {**reported, **measured}, ""

    player = lesson_test.Player("cpu")
    player.run = fake_run
    return list(player.play(load_text(text, "number.yaml")))


NUMBER_PREDICTION = (
    "id: number\ntitle: Number\nsteps:\n"
    "  - {id: guess, kind: predict, prompt: How much?, compare: METRIC, unit: UNIT,\n"
    "     answer: {type: number, unit: UNIT, min: LOW, max: HIGH}}\n"
    "  - {id: run, kind: run, experiment: data-bottleneck}\n"
)


def _number_prediction(metric: str, unit: str, low: float, high: float) -> str:
    return (
        NUMBER_PREDICTION.replace("METRIC", metric)
        .replace("UNIT", f'"{unit}"')
        .replace("LOW", str(low))
        .replace("HIGH", str(high))
    )


def test_a_number_prediction_whose_range_excludes_the_measurement_fails():
    # 50x to 500x for a 3-9x speed-up: the learner who types what was measured would be refused.
    outcomes = _played_with(_number_prediction("resident_speedup", "x", 50, 500), {"resident_speedup": 5.3})
    predict = next(o for o in outcomes if o.kind == "predict")
    assert not predict.ok
    assert predict.detail.startswith("measured 5.3x, outside the answers this prediction allows (50x to 500x)")


def test_a_number_prediction_that_allows_the_measurement_passes_in_its_own_unit():
    outcomes = _played_with(_number_prediction("resident_speedup", "x", 1, 500), {"resident_speedup": 5.3})
    assert next(o for o in outcomes if o.kind == "predict").ok
    # a share measured 0..1 is typed in percent: 70.4 lies in 0..100, 0.704 would not be the question
    outcomes = _played_with(_number_prediction("loader_wait_share", "%", 50, 100), {"loader_wait_share": 0.704})
    predict = next(o for o in outcomes if o.kind == "predict")
    assert predict.ok and predict.detail == "measured 70.4%, within its min..max"


def test_a_failure_says_the_path_and_line_of_its_step(capsys, tmp_path):
    path = tmp_path / "bands.yaml"
    path.write_text(
        "id: bands\ntitle: Bands\nsteps:\n"
        "  - id: intro\n    kind: read\n    body: Count the steps.\n"
        "  - id: count\n    kind: check\n    prompt: How many steps?\n"
        "    answer:\n      type: number\n      value: 235\n      ranges:\n"
        "        - {min: 234, max: 234, feedback: Off by one.}\n",  # inside 211.5..258.5: never shown
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "lesson", "test", str(path))
    assert code == 1
    assert f"\n    {path}:7: range 1 (234..234) can never be reached" in out
    code, out, _ = run_cli(capsys, "lesson", "test", str(path), "--json")
    failed = [r for r in map(json.loads, out.splitlines()[:-1]) if not r["ok"]]
    assert [r["where"] for r in failed] == [f"{path}:7"]


def test_a_pack_whose_experiments_do_not_import_is_one_failure_at_its_line(capsys, tmp_path):
    pack = _broken_pack(tmp_path)
    code, out, _ = run_cli(capsys, "lesson", "test", str(pack), "--json")
    assert code == 1
    results = [json.loads(line) for line in out.splitlines()]
    assert [(r["where"], r["detail"]) for r in results[:-1]] == [
        (f"{pack / 'experiments.py'}:3", "ModuleNotFoundError: No module named 'no_such_module_here'")
    ]
    assert results[-1]["failed"] == 1


def _broken_pack(tmp_path: Path) -> Path:
    """A folder pack whose experiments.py fails on its third line, and a lesson that runs its experiment."""
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "experiments.py").write_text(
        "from tutor.experiments import Experiment\n\nimport no_such_module_here\nEXPERIMENTS = []\n", encoding="utf-8"
    )
    (pack / "lesson.yaml").write_text(
        "id: pack-lesson\ntitle: Pack lesson\nsteps:\n  - {id: r, kind: run, experiment: my-exp}\n", encoding="utf-8"
    )
    return pack


def test_programs_at_once_follow_the_share_a_test_runner_gives(monkeypatch):
    """Issue 36: under pytest-xdist each worker's lesson test ran a program per core, so CI put up
    to twice the cores' programs on the machine; the runner's share is taken when given."""
    from tutor.authoring import lesson_test

    monkeypatch.setenv("GPUTUTOR_PROGRAMS_AT_ONCE", "1")
    assert lesson_test.exercise_workers() == 1
    monkeypatch.setenv("GPUTUTOR_PROGRAMS_AT_ONCE", "nonsense")
    assert lesson_test.exercise_workers() >= 1
    monkeypatch.delenv("GPUTUTOR_PROGRAMS_AT_ONCE")
    assert lesson_test.exercise_workers() == len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else True


def test_programs_side_by_side_share_the_cores_threads(monkeypatch, tmp_path):
    """Two programs at once on a machine that looked idle would each take every core's thread,
    and OpenMP's waiting threads then slow both several times over: each gets its share."""
    from tutor.authoring import lesson_test
    from tutor.course.loader import load_file
    from tutor.exercises import grader

    seen = []

    def fake_grade(step, code, where, **_):
        seen.append((os.environ.get("GPUTUTOR_THREADS"), os.environ.get("GPUTUTOR_LAB_TRAIN_SAMPLES")))
        raise RuntimeError("not run here")

    monkeypatch.setattr(grader, "grade_exercise", fake_grade)
    monkeypatch.setattr(lesson_test, "usable_cores", lambda: 4)
    monkeypatch.setenv("GPUTUTOR_PROGRAMS_AT_ONCE", "2")
    monkeypatch.delenv("GPUTUTOR_THREADS")
    monkeypatch.delenv("GPUTUTOR_LAB_TRAIN_SAMPLES", raising=False)
    step = next(s for s in load_file(BUILT_IN[0]).steps if s.kind == "exercise")
    with pytest.raises(RuntimeError):
        list(lesson_test.Player(device="cpu")._exercise_step(load_file(BUILT_IN[0]), step))
    assert seen and set(seen) == {("2", "4800")}  # 4 cores, 2 programs: 2 threads each; quick mode's slice
    assert "GPUTUTOR_THREADS" not in os.environ  # only while the step's programs run
    monkeypatch.setenv("GPUTUTOR_THREADS", "3")  # a count the user set stays theirs
    seen.clear()
    with pytest.raises(RuntimeError):
        list(lesson_test.Player(device="cpu")._exercise_step(load_file(BUILT_IN[0]), step))
    assert {t for t, _ in seen} == {"3"}


def test_a_mistake_must_be_told_its_cause_and_the_requirements_advice(capsys, scaffold, monkeypatch):
    """A mistake passes lesson test only when it fails the requirement it names, and the learner
    reads that requirement's feedback and what the mistake `says` (the cause its run shows)."""
    monkeypatch.setenv("GPUTUTOR_DEVICE", "cpu")
    text = scaffold.read_text(encoding="utf-8")
    told = text.replace("        fails: checks-cuda\n", "        fails: checks-cuda\n        says: never asked\n")
    assert told != text
    scaffold.write_text(told, encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold), "--json")
    results = [json.loads(line) for line in out.splitlines()]
    mistake = next(r for r in results[:-1] if "mistake 'hard-coded'" in r["what"])
    assert code == 0 and mistake["ok"], mistake  # its feedback says it never asked torch.cuda.is_available()

    scaffold.write_text(told.replace("says: never asked", "says: out of memory"), encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold), "--json")
    mistake = next(json.loads(line) for line in out.splitlines() if "mistake 'hard-coded'" in line)
    assert code == 1 and not mistake["ok"] and "which does not say 'out of memory'" in mistake["detail"]


NOISY_PACK = '''\
"""A seeded stand-in for a timed experiment: 9 repeats of a ratio about `center`, 10% noise."""
import itertools
import random

from tutor.experiments import Experiment, Params
from tutor.experiments.events import Finished, Started
from tutor.measurement.intervals import bounds, median_interval

RUNS = itertools.count()  # each run its own draws, the same sequence in every test process


class NoisyParams(Params):
    center: float = 4.0


def run(p, dev):
    yield Started("noisy-ratio", "cpu", "seeded", "no data", "")
    rng = random.Random(1000 + next(RUNS))
    interval = median_interval([p.center * rng.uniform(0.9, 1.1) for _ in range(9)])
    low, high = bounds(interval)
    yield Finished({"ratio": interval.median, "ratio_low": low, "ratio_high": high})


EXPERIMENTS = [Experiment("noisy-ratio", "A seeded noisy ratio", "", NoisyParams,
                          {"ratio": "the ratio", "ratio_low": "its interval's low end",
                           "ratio_high": "its interval's high end"}, {}, run=run)]
'''


def _noisy_lesson(pack: Path, edge: float, center: float) -> Path:
    (pack / "lesson.yaml").write_text(
        "id: noisy\ntitle: Noisy\nsteps:\n"
        "  - id: guess\n    kind: predict\n    prompt: How many times?\n    compare: ratio\n    unit: x\n"
        f"    answer:\n      type: choice\n      options:\n        - {{text: 'below {edge:g}x', min: 0, max: {edge}}}\n"
        f"        - {{text: '{edge:g}x or more', min: {edge}}}\n"
        f"  - {{id: measure, kind: run, experiment: noisy-ratio, params: {{center: {center}}}}}\n",
        encoding="utf-8",
    )
    return pack


def test_repeats_fail_a_boundary_that_sits_in_the_noise_and_name_it(capsys, tmp_path):
    """Issue 37: a boundary at this machine's typical value (4x, measured 4x +- 10%) flips or stays
    undecided over 5 runs: the step fails, naming the edge; at 2x every run calls '2x or more' a hit."""
    pack = tmp_path / "pack"
    pack.mkdir()
    (pack / "experiments.py").write_text(NOISY_PACK, encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(_noisy_lesson(pack, 4, 4.0)), "--repeats", "5", "--json")
    results = [json.loads(line) for line in out.splitlines()[:-1]]
    noise = next(r for r in results if r["what"] == "ratio: verdicts over 5 runs")
    assert code == 1 and not noise["ok"]
    assert noise["detail"].startswith("the measurement falls either side of 4x on this machine")
    assert "move the boundary or widen the option" in noise["detail"]
    assert sum(noise["verdicts"]["below 4x"].values()) == 5 and len(noise["measured"]) == 5
    assert all(low <= median <= high for median, low, high in noise["measured"])

    code, out, _ = run_cli(capsys, "lesson", "test", str(_noisy_lesson(pack, 2, 4.0)), "--repeats", "5", "--json")
    results = [json.loads(line) for line in out.splitlines()[:-1]]
    noise = next(r for r in results if r["what"] == "ratio: verdicts over 5 runs")
    assert code == 0 and noise["ok"]
    assert noise["verdicts"] == {"below 2x": {"miss": 5}, "2x or more": {"hit": 5}}


def test_repeats_must_be_a_count(capsys, tmp_path):
    code, _, err = run_cli(capsys, "lesson", "test", str(tmp_path), "--repeats", "0")
    assert code == 2 and "0 is not 1 or more" in err


def test_a_passing_result_without_words_prints_no_bare_path(capsys, tmp_path, monkeypatch):
    """A check whose answers grade as listed passes with nothing to add: its line ends there, not
    with an empty 'path:line:' line under it, which reads like a failure."""
    path = tmp_path / "plain.yaml"
    path.write_text(
        "id: plain\ntitle: Plain\nsteps:\n"
        "  - {id: ask, kind: check, prompt: Which?, answer: {type: choice, options: [{text: a, correct: true}, b]}}\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "lesson", "test", str(path))
    assert code == 0 and "grades 2 answers as listed" in out
    assert f"{path}:4:" not in out


def test_a_starter_that_already_passes_fails_the_test(capsys, scaffold):
    """Issue 41 item 6 (rustlings' dev check): an exercise whose starter passes as given leaves the
    learner nothing to do; lesson test runs the starter and says so."""
    from tutor.course.loader import load_file

    step = next(s for s in load_file(scaffold).steps if s.kind == "exercise")
    text = scaffold.read_text(encoding="utf-8")
    indent = "\n".join("      " + line if line else "" for line in step.solution.splitlines())
    start = text.index("    starter: |")
    end = text.index("    solution: |")
    scaffold.write_text(text[:start] + "    starter: |\n" + indent + "\n" + text[end:], encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold), "--json")
    assert code == 1
    bad = [r for r in map(json.loads, out.splitlines()[:-1]) if not r["ok"]]
    assert [r["what"] for r in bad] == ["starter does not pass yet"]
    assert "the starter already passes every requirement" in bad[0]["detail"]
    # a cell meant to be run as it is says so, and is then held to passing
    marked = scaffold.read_text(encoding="utf-8").replace("    starter: |", "    complete: true\n    starter: |", 1)
    scaffold.write_text(marked, encoding="utf-8")
    code, out, _ = run_cli(capsys, "lesson", "test", str(scaffold))
    assert code == 0 and "✓ demo · practice · exercise: starter passes as given (complete: true)" in out
