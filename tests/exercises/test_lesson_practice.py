"""The lesson `gpu-training-practice`: its exercises and the checks they declare.

Static tests: the lesson's structure and its code. Its requirements judge what a program
does (behaviour, function, report, file), so every verdict is tested through the grader, which
runs the code; tests/exercises/test_exercise_behaviour.py holds programs written in other styles.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tutor.course.lesson import (
    ExerciseStep,
    Lesson,
    OutputRequirement,
    ReadStep,
    SourceRequirement,
)
from tutor.course.loader import load_file

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "gpu-training-practice.yaml"
MAX_CODE = 76  # an 80-column terminal, less the panel's border and padding
EDITOR_COLUMNS = 69  # what the editor shows at 80 wide (tests/tui/test_tui_exercise.py)
EXERCISE_IDS = [
    "ex1-move-and-time",
    "ex2-checkpoint",
    "ex3-mixed-precision",
    "ex4-portable-script",
    "ex4-profile",  # exercise 4's memory profiling (the lab's task 4)
]

# The mistakes the issue lists, by the exercise and requirement that must catch each.
ISSUE_MISTAKES = {
    ("ex1-move-and-time", "batches-moved"),  # data not moved
    ("ex1-move-and-time", "synchronized-timing"),  # no synchronize before timing
    ("ex2-checkpoint", "map-location"),  # load without map_location
    ("ex3-mixed-precision", "backward-outside-autocast"),  # autocast around backward
    ("ex3-mixed-precision", "autocast-used"),  # GradScaler without autocast
    ("ex4-portable-script", "best-accuracy-kept"),  # best_accuracy never updated: every epoch saved
    # Lab 5's exercise 4, "add memory profiling" (coverage 002-40):
    ("ex4-profile", "profiled-steps"),  # profiling zero steps, or the wrong region
    ("ex4-profile", "peak-memory"),  # a made-up peak, tracemalloc's, CUDA's never reset
    ("ex4-profile", "synchronized-timing"),  # no synchronize around the clock
}


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(LESSON)


def _exercises(lesson: Lesson) -> list[ExerciseStep]:
    return [s for s in lesson.steps if isinstance(s, ExerciseStep)]


def _code_blocks(step: ExerciseStep) -> list[tuple[str, str]]:
    blocks = [("starter", step.starter), ("solution", step.solution)]
    blocks += [(f"mistake {m.name!r}", m.code) for m in step.mistakes]
    return blocks


# ---------------------------------------------------------------- structure


def test_lesson_identity(lesson: Lesson) -> None:
    assert lesson.id == "gpu-training-practice"
    assert lesson.title == "GPU Training: Practice"
    assert lesson.order == 20


def test_opens_and_closes_with_read_steps(lesson: Lesson) -> None:
    assert isinstance(lesson.steps[0], ReadStep)
    assert isinstance(lesson.steps[-1], ReadStep)


def test_the_exercises_in_order(lesson: Lesson) -> None:
    assert [s.id for s in _exercises(lesson)] == EXERCISE_IDS


def test_previous_lesson_points_here(lesson: Lesson) -> None:
    assert load_file(ROOT / "lessons" / "gpu-training.yaml").next == lesson.id


def test_every_step_has_a_title(lesson: Lesson) -> None:
    assert all(s.title for s in lesson.steps)


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_exercise_has_hint_and_mistakes(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    assert len(step.tiered_hints) >= 2 and step.body  # hints in tiers (issue 26)
    assert step.mistakes, f"{step.id}: no typical mistakes to test the feedback with"


# ---------------------------------------------------------------- code


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_code_is_valid_python(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    for name, code in _code_blocks(step):
        ast.parse(code, filename=f"{step.id} {name}")


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_code_lines_fit_the_terminal(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    too_long = [
        (name, line)
        for name, code in [*_code_blocks(step), ("body", step.body)]
        for line in code.splitlines()
        if len(line) > (MAX_CODE if name == "body" else EDITOR_COLUMNS)
    ]
    assert not too_long, too_long


def test_read_step_code_fits_the_terminal(lesson: Lesson) -> None:
    for step in lesson.steps:
        if isinstance(step, ReadStep):
            assert all(len(line) <= MAX_CODE for line in step.body.splitlines()), step.id


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_starter_and_solution_import_the_lab_in_one_statement(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    for code in (step.starter, step.solution):
        imports = [n for n in ast.parse(code).body if isinstance(n, ast.ImportFrom) and n.module == "tutor.lab"]
        assert len(imports) == 1


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_starter_has_blanks_and_solution_none(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    assert "____" in step.starter
    assert "____" not in step.solution and "TODO" not in step.solution


# ---------------------------------------------------------------- requirements


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_requirement_ids_unique_and_regexes_compile(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    ids = [r.id for r in step.requirements]
    assert len(ids) == len(set(ids))
    for req in step.requirements:
        if isinstance(req, (SourceRequirement, OutputRequirement)):
            re.compile(req.pattern)
        assert len(req.feedback) > 40, f"{step.id}/{req.id}: feedback too thin to be a hint"


@pytest.mark.parametrize("index", range(len(EXERCISE_IDS)))
def test_every_mistake_names_a_requirement_of_its_step(lesson: Lesson, index: int) -> None:
    step = _exercises(lesson)[index]
    ids = {r.id for r in step.requirements}
    for mistake in step.mistakes:
        assert mistake.fails in ids, f"{step.id}: mistake {mistake.name!r} fails unknown {mistake.fails!r}"


def test_no_requirement_reads_spelling(lesson: Lesson) -> None:
    # Correct code passes whatever it is called: the practice exercises judge what the program
    # does, never a pattern in its source.
    for step in _exercises(lesson):
        assert not [r.id for r in step.requirements if isinstance(r, SourceRequirement)], step.id


def test_issue_mistakes_are_all_covered(lesson: Lesson) -> None:
    covered = {(s.id, m.fails) for s in _exercises(lesson) for m in s.mistakes}
    assert covered >= ISSUE_MISTAKES


# ---------------------------------------------------------------- specific checks


def test_ex1_probed_function_is_top_level_and_main_is_guarded(lesson: Lesson) -> None:
    step = lesson.step("ex1-move-and-time")
    tree = ast.parse(step.solution)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    probes = [r for r in step.requirements if r.type == "function"]
    assert [(p.name, p.probe) for p in probes] == [("train_batches", "moves_batch_to_device")]
    # The probe calls it as the notebook's train_one_epoch: (model, loader, optimizer, criterion, device).
    assert [a.arg for a in funcs["train_batches"].args.args] == ["model", "loader", "optimizer", "criterion", "device"]
    guarded = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert guarded, "the program must run only under if __name__ == '__main__'"
    # Nothing but imports, constants and definitions at the top level, so importing the
    # file to probe move_batch does not train.
    for node in tree.body:
        assert isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.Assign, ast.If)), ast.unparse(node)


def test_ex4_checkpoint_requirement(lesson: Lesson) -> None:
    step = lesson.step("ex4-portable-script")
    files = [r for r in step.requirements if r.type == "file"]
    assert len(files) == 1
    req = files[0]
    assert req.path == "saved_models/portable_best.pth" and req.checkpoint
    assert req.min_accuracy == 0.97 and req.min_accuracy_synthetic is not None and req.best
    assert {"model_state_dict", "accuracy"} <= set(req.keys)
    assert 'os.path.join("saved_models", "portable_best.pth")' in step.solution
    assert step.timeout >= 180  # 3 epochs through the DataLoader on a busy 2-core CPU, with margin


def test_ex4_autocast_always_on_is_a_mistake_off_cuda_only(lesson: Lesson) -> None:
    # float16 autocast on CUDA is what amp-where-it-helps asks for: there the mistake passes.
    mistake = next(m for m in lesson.step("ex4-portable-script").mistakes if m.name == "autocast always on")
    assert mistake.fails == "amp-where-it-helps" and mistake.only_on == ["cpu", "mps"]


def _epochs(code: str, kind: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """How many epochs `for epoch in range(...)` runs where tutor.lab's device is `kind`."""
    import torch

    from tutor import lab

    monkeypatch.setattr(lab, "device", torch.device(kind))
    tree = ast.parse(code)
    names = {
        t.id: n.value for n in ast.walk(tree) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    loop = next(n for n in ast.walk(tree) if isinstance(n, ast.For) and getattr(n.target, "id", "") == "epoch")
    count = loop.iter.args[0]
    count = names.get(getattr(count, "id", ""), count)
    return eval(compile(ast.Expression(count), "<epochs>", "eval"), {"epochs_here": lab.epochs_here})


def test_ex4_trains_no_more_epochs_on_a_gpu_than_fit_in_a_minute(lesson: Lesson, monkeypatch) -> None:
    # Each epoch goes through the notebook's DataLoader, whose per-image ToTensor and Normalize
    # run on the CPU whatever trains: one pass over the train set took 10.8 s on a 2-core CPU
    # (the test set ~1 s more), so a GPU epoch costs seconds too and 10 of them (> 2 min) break
    # the one-minute rule. 4 at most (~50 s with start-up); as many as on the CPU.
    for name, code in _code_blocks(lesson.step("ex4-portable-script")):
        gpu, cpu = _epochs(code, "cuda", monkeypatch), _epochs(code, "cpu", monkeypatch)
        assert gpu == cpu <= 4, f"{name}: {gpu} epochs on a GPU, {cpu} on a CPU"


def test_ex2_checkpoint_keys_are_the_ones_saved(lesson: Lesson) -> None:
    step = lesson.step("ex2-checkpoint")
    req = next(r for r in step.requirements if r.type == "file")
    for key in req.keys:
        assert f'"{key}":' in step.solution


# ---------------------------------------------------------------- through the grader
# The runner (tutor/exercises/grader.py) runs the code in a sandbox process; a slice of the data
# keeps these to seconds (tutor.lab reads GPUTUTOR_LAB_*_SAMPLES). That each solution passes and
# each mistake fails the requirement it names is `lesson test`'s job (tests/system): these hold
# what it does not check, the words a learner reads and the figures a run reports. Where they
# grade one of the lesson's own programs, they grade it as `lesson test` does (its slice, no
# accuracy bar: tests/exercises/conftest.py's `as_lesson_test`), and that grading is made once for
# both (shared_gradings). ex3's loops of 150 batches end after the 75 that slice's 4,800 images
# hold, near 90%: over its 80% bars, which are on reported accuracies and apply either way.


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "1500")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")


def test_ex2_load_without_map_location_gets_its_feedback(lesson: Lesson, as_lesson_test: None, tmp_path: Path) -> None:
    step = lesson.step("ex2-checkpoint")
    mistake = next(m for m in step.mistakes if m.name == "load without map_location")
    result = _grade(lesson, "ex2-checkpoint", mistake.code, tmp_path / "ex2", accuracy_bars=False)
    assert not result.passed
    assert [r.id for r in result.requirements if not r.passed] == ["map-location"]
    # The cause the run showed first, then the lesson's advice.
    assert result.hint.startswith("torch.load on line 25 has no map_location")
    assert result.hint.endswith(step.requirements[[r.id for r in step.requirements].index("map-location")].feedback)


@pytest.mark.parametrize("step_id", EXERCISE_IDS)
def test_starter_does_not_pass_as_it_is(lesson: Lesson, as_lesson_test: None, tmp_path: Path, step_id: str) -> None:
    """Run as it is, the starter stops at its first blank (a NameError naming ____) and fails."""
    result = _grade(lesson, step_id, lesson.step(step_id).starter, tmp_path / step_id, accuracy_bars=False)
    assert not result.passed
    assert result.sandbox.error_type == "NameError" and "____" in result.sandbox.error_message, result.sandbox.output


def _grade(lesson: Lesson, step_id: str, code: str, workdir: Path, accuracy_bars: bool = True):
    from tutor.exercises import grader  # its grade_exercise, shared where a test asks for shared_gradings

    return grader.grade_exercise(lesson.step(step_id), code, workdir, accuracy_bars=accuracy_bars)


def _mistake(lesson: Lesson, step_id: str, name: str) -> str:
    return next(m.code for m in lesson.step(step_id).mistakes if m.name == name)


def _feedback(lesson: Lesson, step_id: str, req_id: str) -> str:
    return next(r.feedback for r in lesson.step(step_id).requirements if r.id == req_id)


def _failed(result) -> list[str]:
    return [r.id for r in result.requirements if not r.passed]


@pytest.mark.parametrize("name", ["data not moved", "batch moved but the result dropped"])
def test_ex1_batches_left_behind_are_caught_by_running_the_learners_loop(
    lesson: Lesson, as_lesson_test: None, tmp_path: Path, name: str
) -> None:
    # On the CPU nothing crashes: only the checker's probe, which calls train_batches with a
    # device of its own once the program has finished, sees where the batches are when they
    # reach the model.
    code = _mistake(lesson, "ex1-move-and-time", name)
    result = _grade(lesson, "ex1-move-and-time", code, tmp_path, accuracy_bars=False)
    assert not result.passed and result.sandbox.ok
    feedback = {r.id: r.feedback for r in result.requirements}
    assert _failed(result) == ["batches-moved"]
    assert "images that did not come out of .to(device)" in feedback["batches-moved"]
    assert result.hint == feedback["batches-moved"]


def test_ex1_hard_coded_cuda_is_named_whatever_the_machine(
    lesson: Lesson, as_lesson_test: None, tmp_path: Path
) -> None:
    # Without a GPU the program crashes at .to("cuda"), and that crash is the mistake, named
    # first; with one, the run shows that the program never asked whether CUDA is there. The
    # speedup it never reported is "not checked" rather than blamed.
    code = _mistake(lesson, "ex1-move-and-time", "device hard-coded to cuda")
    result = _grade(lesson, "ex1-move-and-time", code, tmp_path, accuracy_bars=False)
    assert not result.passed
    assert result.hint.endswith(_feedback(lesson, "ex1-move-and-time", "device-fallback"))
    assert result.hint.startswith(
        (
            "Your program asked for CUDA on this machine, which has none",
            "Your program never asked torch.cuda.is_available()",
        )
    )
    judged_failures = [r.id for r in result.requirements if not r.passed and r.judged]
    assert judged_failures == ["device-fallback"]


def test_ex3_solution_passes_with_both_accuracies_over_the_bar(
    lesson: Lesson, as_lesson_test: None, tmp_path: Path
) -> None:
    code = lesson.step("ex3-mixed-precision").solution
    result = _grade(lesson, "ex3-mixed-precision", code, tmp_path, accuracy_bars=False)  # ex3's bars: on reports
    assert result.passed, result.summary
    reports = result.sandbox.reports
    assert reports["amp_dtype"] in ("torch.float16", "torch.bfloat16")
    assert abs(reports["amp_accuracy"] - reports["fp32_accuracy"]) < 0.05  # mixed precision costs no accuracy
    assert reports["speedup"] == pytest.approx(reports["fp32_seconds"] / reports["amp_seconds"])


def test_ex3_gradscaler_without_autocast_runs_but_is_not_mixed_precision(
    lesson: Lesson, as_lesson_test: None, tmp_path: Path
) -> None:
    code = _mistake(lesson, "ex3-mixed-precision", "GradScaler used without autocast")
    result = _grade(lesson, "ex3-mixed-precision", code, tmp_path, accuracy_bars=False)
    assert result.sandbox.ok and _failed(result) == ["autocast-used"]
    assert result.hint == (
        "No forward pass ran under torch.autocast: every operation ran in float32. "
        + _feedback(lesson, "ex3-mixed-precision", "autocast-used")
    )


def test_ex3_model_cast_to_half_is_named_not_its_missing_reports(
    lesson: Lesson, as_lesson_test: None, tmp_path: Path
) -> None:
    code = _mistake(lesson, "ex3-mixed-precision", "model cast to half by hand")
    result = _grade(lesson, "ex3-mixed-precision", code, tmp_path, accuracy_bars=False)
    assert not result.passed
    assert result.hint.endswith(_feedback(lesson, "ex3-mixed-precision", "no-manual-half"))
    assert "had float16 weights" in result.hint
    judged_failures = [r.id for r in result.requirements if not r.passed and r.judged]
    assert judged_failures == ["no-manual-half"]
    if not result.sandbox.ok:  # float16 weights meet float32 inputs: a dtype error on most devices
        assert result.traceback and ">>" in result.traceback


def test_ex4_on_a_small_slice_everything_but_the_accuracy_bar_is_met(
    lesson: Lesson, small_lab: None, tmp_path: Path
) -> None:
    # 1,500 images for 3 epochs cannot reach 97%: the checkpoint is still written, loaded on
    # the CPU with weights_only=True and evaluated, and the feedback gives the accuracy it got.
    result = _grade(lesson, "ex4-portable-script", lesson.step("ex4-portable-script").solution, tmp_path)
    assert result.sandbox.ok, result.summary
    assert _failed(result) == ["best-checkpoint"]
    feedback = next(r.feedback for r in result.requirements if r.id == "best-checkpoint")
    assert feedback.startswith("saved_models/portable_best.pth reaches ") and "at least 97% is needed" in feedback
    assert (tmp_path / "saved_models" / "portable_best.pth").is_file()
    assert any("portable_best.pth: test accuracy" in note for note in result.checker_notes)
    assert any("portable_best.pth: the weights of epoch" in note for note in result.checker_notes), result.checker_notes


@pytest.mark.slow
def test_ex4_solution_reaches_97_percent_on_the_full_set(lesson: Lesson, tmp_path: Path) -> None:
    # The exercise as a learner runs it: 3 epochs over all 60,000 images (about 24 s on 2 CPU cores).
    result = _grade(lesson, "ex4-portable-script", lesson.step("ex4-portable-script").solution, tmp_path)
    assert result.passed, result.summary
    assert result.sandbox.reports["best_accuracy"] >= 0.97
