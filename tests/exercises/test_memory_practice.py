"""The lesson `gpu-lab-practice`: the learner writes gradient accumulation, activation
checkpointing and a batch-size search, and the tutor checks each by calling the learner's
function with its own model, data and memory cap (tutor/exercises/probes.py measures,
tutor/exercises/behaviour.py PROBE_JUDGES judges).

The programs in tests/exercises/exercise_programs/mem*_*.py run in the sandbox as a learner's
program does: the lesson's solution (notebook style), a correct solution written another way,
and each real mistake, which must fail the requirement that names its cause, cause first.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tutor.course.lesson import ExerciseStep, Lesson, ReadStep, SourceRequirement
from tutor.course.loader import load_file
from tutor.exercises.behaviour import PROBE_JUDGES, judge_probe

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "gpu-lab-practice.yaml"
PROGRAMS = Path(__file__).resolve().parent / "exercise_programs"
EDITOR_COLUMNS = 69  # what the exercise editor shows at 80 columns
STEPS = {"mem1": "ex1-accumulate", "mem2": "ex2-checkpoint", "mem3": "ex3-batch-search"}

# The mistakes the issue names, by the exercise and the requirement that must name each.
ISSUE_MISTAKES = {
    ("ex1-accumulate", "gradient-of-the-full-batch"),  # loss not divided by k
    ("ex1-accumulate", "zero-grad-once-per-k"),  # zero_grad every micro-batch
    ("ex1-accumulate", "steps-once-per-k"),  # a step every micro-batch
    ("ex2-checkpoint", "checkpoints-every-block"),  # one checkpoint around the whole stack
    ("ex2-checkpoint", "results-compared"),  # the outputs compared, not the gradients
    ("ex3-batch-search", "retries-outside-except"),  # retrying inside the except block
    ("ex3-batch-search", "frees-memory-after-oom"),  # the failed step's memory kept
    ("ex3-batch-search", "catches-only-oom"),  # every error taken for out of memory
}


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(LESSON)


def _exercises(lesson: Lesson) -> list[ExerciseStep]:
    return [s for s in lesson.steps if isinstance(s, ExerciseStep)]


# ---------------------------------------------------------------- the lesson's shape


def test_lesson_identity_and_place(lesson: Lesson) -> None:
    assert (lesson.id, lesson.title, lesson.order, lesson.next) == (
        "gpu-lab-practice",
        "GPU Lab: Practice",
        35,
        "training-iron-law",
    )
    assert load_file(ROOT / "lessons" / "gpu-lab.yaml").next == lesson.id  # the lab leads here
    assert load_file(ROOT / "lessons" / "gpu-lab.yaml").order < lesson.order
    assert lesson.order < load_file(ROOT / "lessons" / "training-iron-law.yaml").order


def test_each_exercise_follows_a_read_step_that_says_what_it_is_for(lesson: Lesson) -> None:
    steps = lesson.steps
    assert isinstance(steps[0], ReadStep) and isinstance(steps[-1], ReadStep)
    exercises = [i for i, s in enumerate(steps) if isinstance(s, ExerciseStep)]
    assert [steps[i].id for i in exercises] == list(STEPS.values())
    assert all(isinstance(steps[i - 1], ReadStep) and "for" in steps[i - 1].title for i in exercises)


def test_every_exercise_has_a_hint_mistakes_and_valid_code_that_fits(lesson: Lesson) -> None:
    for step in _exercises(lesson):
        assert len(step.tiered_hints) >= 2 and step.mistakes and "____" in step.starter, step.id
        assert "____" not in step.solution and "TODO" not in step.solution
        blocks = [("starter", step.starter), ("solution", step.solution)] + [(m.name, m.code) for m in step.mistakes]
        for name, code in blocks:
            ast.parse(code, filename=f"{step.id} {name}")
            too_wide = [line for line in code.splitlines() if len(line) > EDITOR_COLUMNS]
            assert not too_wide, (step.id, name, too_wide)
        for code in (step.starter, step.solution):
            lab = [n for n in ast.parse(code).body if isinstance(n, ast.ImportFrom) and n.module == "tutor.lab"]
            assert len(lab) == 1, step.id


def test_requirements_judge_behaviour_and_every_mistake_names_one(lesson: Lesson) -> None:
    for step in _exercises(lesson):
        ids = [r.id for r in step.requirements]
        assert len(ids) == len(set(ids))
        assert not [r for r in step.requirements if isinstance(r, SourceRequirement)], step.id
        assert all(len(r.feedback) > 40 and not re.search(r"`|\*\w", r.feedback) for r in step.requirements)
        assert {m.fails for m in step.mistakes} <= set(ids)
    covered = {(s.id, m.fails) for s in _exercises(lesson) for m in s.mistakes}
    assert covered >= ISSUE_MISTAKES


def test_the_probed_functions_are_the_ones_the_solutions_define(lesson: Lesson) -> None:
    for step in _exercises(lesson):
        defined = {n.name for n in ast.parse(step.solution).body if isinstance(n, ast.FunctionDef)}
        probed = {r.name for r in step.requirements if r.type == "function"}
        assert probed and probed <= defined, step.id


@pytest.mark.parametrize("prefix", sorted(STEPS))
def test_the_notebook_style_program_is_the_lessons_solution(lesson: Lesson, prefix: str) -> None:
    # Same code, whatever the import block's layout (the file's is sorted for the linter).
    def functions(code: str) -> list[str]:
        return [ast.dump(n) for n in ast.parse(code).body if not isinstance(n, (ast.Import, ast.ImportFrom))]

    program = (PROGRAMS / f"{prefix}_notebook_style.py").read_text(encoding="utf-8")
    assert functions(program) == functions(lesson.step(STEPS[prefix]).solution)


def test_every_probe_has_a_judge_and_a_name_lint_knows() -> None:
    from tutor.exercises.names import PROBES
    from tutor.exercises.probes import PROBE_FUNCTIONS

    assert set(PROBE_FUNCTIONS) == PROBES
    assert set(PROBE_JUDGES) <= PROBES


# ---------------------------------------------------------------- the judges, on what a probe could return


def _accumulation(steps_at, clears, *, backwards=8, close=True, ratio=1.0, cosine=1.0) -> dict:
    return {
        "k": 4,
        "micro_batches": 8,
        "backwards": backwards,
        "clears": [{"micro_batches": m, "cleared": c} for m, c in clears],
        "steps": [
            {"micro_batches": m, "group": 4, "close": close, "ratio": ratio, "cosine": cosine, "max_diff": 0.1}
            for m in steps_at
        ],
    }


RIGHT_CLEARS = [(m, m in (1, 5)) for m in range(1, 9)]


def test_accumulation_judges_pass_the_right_loop() -> None:
    result = _accumulation([4, 8], RIGHT_CLEARS)
    for probe in ("steps_once_per_k", "zero_grad_once_per_k", "accumulates_full_batch_gradient"):
        assert judge_probe(probe, result, "train_accumulated").passed, probe


def test_accumulation_judges_name_each_cause() -> None:
    every = judge_probe("steps_once_per_k", _accumulation(list(range(1, 9)), RIGHT_CLEARS), "f")
    assert every.cause.startswith("optimizer.step() ran after every micro-batch: 8 steps for 8 micro-batches")
    wiped = judge_probe("zero_grad_once_per_k", _accumulation([4, 8], [(m, True) for m in range(1, 9)]), "f")
    assert wiped.cause.startswith("The gradients were cleared before micro-batch 2's backward")
    kept = judge_probe("zero_grad_once_per_k", _accumulation([4, 8], [(m, m == 1) for m in range(1, 9)]), "f")
    assert "still held the previous group's gradients" in kept.cause
    undivided = judge_probe(
        "accumulates_full_batch_gradient", _accumulation([4, 8], RIGHT_CLEARS, close=False, ratio=4.0), "f"
    )
    assert "was 4.00 times the full batch's" in undivided.cause and "not divided by 4" in undivided.cause
    summed = judge_probe("accumulates_full_batch_gradient", _accumulation([4, 8], RIGHT_CLEARS, backwards=2), "f")
    assert summed.cause.startswith("backward() ran 2 times for 8 micro-batches")


def test_a_gradient_wiped_inside_the_group_is_not_blamed_on_the_loss(lesson: Lesson) -> None:
    # zero_grad every micro-batch, the loss divided by k: the step's gradient is micro-batch 4's alone.
    from tutor.exercises.grader import _check_function
    from tutor.exercises.sandbox import SandboxResult

    wiped = _accumulation([4, 8], [(m, True) for m in range(1, 9)], close=False, ratio=0.3, cosine=0.5)
    verdict = judge_probe("accumulates_full_batch_gradient", wiped, "f")
    assert verdict.cause == (
        "At optimizer step 1, the gradient was not the full batch's (4 micro-batches as one "
        "batch): the gradients were cleared before micro-batch 2's backward, inside the group, "
        "so it held only micro-batch 4's. Clear them once per group, after the step."
    )
    req = next(r for r in lesson.step("ex1-accumulate").requirements if r.id == "gradient-of-the-full-batch")
    ok, feedback = _check_function(req, {"probes": {req.id: wiped}}, SandboxResult.__new__(SandboxResult))
    assert not ok and feedback == verdict.cause  # no advice to divide the loss, which the program did
    assert "divided" not in feedback and "Divide" not in feedback
    every = _accumulation(list(range(1, 9)), RIGHT_CLEARS, close=False, ratio=0.25)
    for entry in every["steps"]:
        entry["group"] = 1
    early = judge_probe("accumulates_full_batch_gradient", every, "f")
    assert (
        early.cause
        == (
            "Optimizer step 1 came after 1 micro-batch, not 4: it stepped before the group was "
            "complete, so its gradient was not the full batch's."
        )
        and not early.advice
    )


def _search(answer, calls) -> dict:
    return {
        "answer": answer,
        "answer_text": repr(answer),
        "fits": 700,
        "cap_bytes": 1,
        "calls": [{"batch": b, "oom": o, "in_except": e, "held": h} for b, o, e, h in calls],
    }


GOOD_CALLS = [(512, False, False, 0), (1024, True, False, 0), (768, True, False, 0), (640, False, False, 0)]


def test_search_judges() -> None:
    assert judge_probe("finds_largest_batch", _search(700, GOOD_CALLS), "s").passed
    too_big = judge_probe("finds_largest_batch", _search(701, GOOD_CALLS), "s")
    assert "but a step of 701 runs out of memory there" in too_big.cause
    assert "not a batch size" in judge_probe("finds_largest_batch", _search(None, GOOD_CALLS), "s").cause
    never = judge_probe("finds_largest_batch", _search(64, [(64, False, False, 0)]), "s")
    assert "without ever running out of memory" in never.cause
    inside = _search(512, [(1024, True, False, 0), (768, True, True, 4096)])
    assert judge_probe("retries_outside_except", inside, "s").cause.startswith(
        "train_step(768) was called inside the except block that caught train_step(1,024)'s"
    )
    assert (
        "4.0 KiB of the failed step's tensors were still alive"
        in judge_probe("frees_memory_after_oom", inside, "s").cause
    )
    assert not judge_probe(
        "catches_only_oom", {"propagated": False, "returned": "0", "bug": "RuntimeError: x"}, "s"
    ).passed


def test_a_result_the_program_overwrote_is_not_held_against_it() -> None:
    verdict = judge_probe("finds_largest_batch", {"calls": "not a list"}, "s")
    assert not verdict.passed and not verdict.judged
    assert not judge_probe("no_such_probe", {}, "s").passed


# ---------------------------------------------------------------- checkpointing: what backward did, in this process


def _per_block_loop(blocks, x):
    from torch.utils.checkpoint import checkpoint

    for b in blocks:
        x = checkpoint(b, x, use_reentrant=False)
    return x


def _per_block_aliased_reduce(stack, hidden):
    from functools import reduce

    from torch.utils.checkpoint import checkpoint as recompute

    return reduce(lambda h, layer: recompute(layer, h, use_reentrant=False), stack, hidden)


def _per_block_indexed_while(seq, inp):
    import torch.utils.checkpoint

    i = 0
    while i < len(seq):
        inp = torch.utils.checkpoint.checkpoint(seq[i], inp, use_reentrant=False)
        i += 1
    return inp


def _per_block_sequential(blocks, x):
    from torch.utils.checkpoint import checkpoint_sequential

    return checkpoint_sequential(blocks, len(blocks), x, use_reentrant=False)  # the last block runs plainly


def _one_checkpoint(blocks, x):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(blocks, x, use_reentrant=False)


def _one_checkpoint_lambda(blocks, x):
    from torch.utils.checkpoint import checkpoint

    def everything(h):
        for b in blocks:
            h = b(h)
        return h

    return checkpoint(everything, x, use_reentrant=False)


def _two_segments(blocks, x):
    from torch.utils.checkpoint import checkpoint_sequential

    return checkpoint_sequential(blocks, 2, x, use_reentrant=False)


def _every_other_block(blocks, x):
    from torch.utils.checkpoint import checkpoint

    for i, b in enumerate(blocks):
        x = checkpoint(b, x, use_reentrant=False) if i % 2 else b(x)
    return x


def _every_layer(blocks, x):
    from torch.utils.checkpoint import checkpoint

    for b in blocks:
        for layer in b:
            x = checkpoint(layer, x, use_reentrant=False)
    return x


def _checkpointed(fn):
    from tutor.exercises import probes

    return probes._checkpointing(fn, "forward_checkpointed")


@pytest.mark.parametrize(
    "fn",
    [_per_block_loop, _per_block_aliased_reduce, _per_block_indexed_while, _per_block_sequential],
    ids=lambda f: f.__name__,
)
def test_each_block_under_its_own_checkpoint_passes_however_it_is_written(fn) -> None:
    result = _checkpointed(fn)
    for probe in ("checkpoints_each_block", "checkpoint_same_results"):
        verdict = judge_probe(probe, result, "forward_checkpointed")
        assert verdict.passed, (probe, verdict.cause)
    assert result["checkpointed_peak_bytes"] < 0.7 * result["plain_peak_bytes"]  # the saving is at the peak


@pytest.mark.parametrize("fn", [_one_checkpoint, _one_checkpoint_lambda], ids=lambda f: f.__name__)
def test_one_checkpoint_around_the_stack_fails_though_it_keeps_little_until_backward(fn) -> None:
    result = _checkpointed(fn)
    assert result["checkpointed_bytes"] < 0.1 * result["plain_bytes"]  # what fooled the old check
    assert result["checkpointed_peak_bytes"] >= 0.99 * result["plain_peak_bytes"]  # the peak is the plain run's
    verdict = judge_probe("checkpoints_each_block", result, "forward_checkpointed")
    assert not verdict.passed
    assert verdict.cause.startswith(
        "Backward ran blocks 1 to 6 again together, before any of them got its gradient: "
        "the whole stack ran under one checkpoint"
    )
    assert "more than the plain forward's" in verdict.cause or "as much as the plain forward" in verdict.cause
    assert judge_probe("checkpoint_same_results", result, "forward_checkpointed").passed  # its results are right


def test_each_partial_checkpointing_names_what_it_did() -> None:
    two = judge_probe("checkpoints_each_block", _checkpointed(_two_segments), "f")
    assert two.cause.startswith("Backward ran blocks 4 to 6 again together") or two.cause.startswith(
        "Backward ran blocks 1 to 3 again together"
    ), two.cause
    assert "they were under one checkpoint" in two.cause
    other = judge_probe("checkpoints_each_block", _checkpointed(_every_other_block), "f")
    assert other.cause.startswith("Backward never ran blocks 1, 3 and 5 again: they did not run under checkpoint")
    layers = judge_probe("checkpoints_each_block", _checkpointed(_every_layer), "f")
    assert layers.cause.startswith("Backward ran blocks 1 to 6 again one layer at a time")
    assert "more than the plain forward's" in layers.cause  # each layer's checkpoint keeps its own input


def _compared(**seen) -> dict:
    return {
        "compared": {
            "calls": 2,
            "outputs": 1,
            "gradients": [],
            "differences": 0,
            "other": 0,
            "weights_with_gradients": 4,
            **seen,
        }
    }


def test_the_comparison_judge() -> None:
    from tutor.exercises.behaviour import Context, judge

    def verdict(observed, stopped=False):
        return judge("compares_outputs_and_gradients", Context(observed, "", stopped=stopped))

    assert verdict(_compared(gradients=[0, 1, 2, 3])).passed
    assert verdict(_compared(gradients=[0], differences=1)).passed  # stopped at a real difference: honest
    outputs_only = verdict(_compared())
    assert outputs_only.cause.startswith(
        "Your program compared the outputs of the two forward passes, but none of the 4 weights' gradients"
    )
    assert "of 2 of the 4 weights" in verdict(_compared(gradients=[0, 1])).cause
    assert "not the outputs" in verdict(_compared(outputs=0, gradients=[0, 1, 2, 3])).cause
    assert verdict({"compared": {"calls": 0}}).cause.startswith("Your program never compares the two runs")
    assert not verdict({}, stopped=True).judged


def test_the_observer_tells_outputs_and_gradients_apart_by_value() -> None:
    # In this process, as the sandbox child watches a program: the calls below are "the learner's"
    # (this file's directory); clones and a concatenation still count as the gradients they hold.
    import torch
    from torch import nn

    from tutor.exercises.behaviour import Context, judge
    from tutor.exercises.observe import Observer

    observer = Observer(__file__)
    observer.install()
    try:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        x = torch.randn(3, 4)
        runs = []
        for _ in range(2):
            model.zero_grad()
            out = model(x)
            out.sum().backward()
            runs.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
        assert torch.allclose(runs[0][0], runs[1][0])
        outputs_only = judge("compares_outputs_and_gradients", Context(observer.summary(), ""))
        assert torch.equal(torch.cat([g.flatten() for g in runs[0][1]]), torch.cat([g.flatten() for g in runs[1][1]]))
        both = judge("compares_outputs_and_gradients", Context(observer.summary(), ""))
        torch.testing.assert_close(model[0].weight, model[0].weight)  # the weights are not their gradients
        seen = observer.summary()["compared"]
    finally:
        observer.uninstall()
    assert outputs_only.cause.startswith(
        "Your program compared the outputs of the two forward passes, but none of the 4 weights' gradients"
    )
    assert both.passed
    assert seen["calls"] == 3 and seen["other"] == 1


# ---------------------------------------------------------------- the probes themselves, in this process


def test_the_search_cap_lets_exactly_700_through_and_sees_what_a_kept_error_holds() -> None:
    import torch

    from tutor.exercises import probes

    def at_the_edge(step):
        step(700)  # fits: an error here would fail the test
        try:
            step(701)
        except torch.OutOfMemoryError:
            return 700
        return 701

    result = probes._search_under_cap(at_the_edge, "at_the_edge")
    assert result["answer"] == 700 and [c["oom"] for c in result["calls"]] == [False, True]
    assert judge_probe("finds_largest_batch", result, "at_the_edge").passed

    kept = []

    def keeps_errors(step):
        for n in (1024, 512):
            try:
                step(n)
            except torch.OutOfMemoryError as error:
                kept.append(error)
        return 512

    held = probes._search_under_cap(keeps_errors, "keeps_errors")["calls"]
    assert held[0]["held"] == 0 and held[1]["held"] > 0 and not held[1]["in_except"]
    kept.clear()


def test_a_search_that_never_ends_is_stopped() -> None:
    from tutor.exercises import probes

    def forever(step):
        while True:
            try:
                step(1)
            except Exception:  # noqa: BLE001 - the stop is a BaseException: it gets past this
                pass

    result = probes._search_under_cap(forever, "forever")
    assert "called train_step 2000 times without returning" in result["error"]


# ---------------------------------------------------------------- the programs, graded in the sandbox


@pytest.fixture
def small_lab(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUTUTOR_LAB_TRAIN_SAMPLES", "4000")
    monkeypatch.setenv("GPUTUTOR_LAB_TEST_SAMPLES", "500")


def _grade(lesson: Lesson, program: str, workdir: Path):
    from tutor.exercises.grader import grade_exercise

    step = lesson.step(STEPS[program.split("_")[0]])
    return grade_exercise(step, (PROGRAMS / program).read_text(encoding="utf-8"), workdir, accuracy_bars=False)


def _failed(result) -> dict[str, str]:
    return {r.id: r.feedback for r in result.requirements if not r.passed}


# The notebook-style programs are the lessons' solutions (test above), which `lesson test` runs on
# every built-in lesson (tests/system/test_cli_lesson_test.py): only the second style runs here.
@pytest.mark.long
@pytest.mark.parametrize(
    "program",
    [
        "mem1_second_style.py",
        "mem2_second_style.py",
        "mem2_reduce_alias.py",
        "mem2_recursive_calls.py",
        "mem3_second_style.py",
    ],
)
def test_correct_code_passes_however_it_is_written(lesson, small_lab, tmp_path, program) -> None:
    result = _grade(lesson, program, tmp_path)
    assert result.sandbox.ok, result.sandbox.output[-2000:]
    assert result.passed, _failed(result)


@pytest.mark.long
def test_the_checkpointing_program_measures_the_peak_and_trains_so_that_the_loss_moves(
    lesson, small_lab, tmp_path
) -> None:
    result = _grade(lesson, "mem2_notebook_style.py", tmp_path)
    assert result.passed, _failed(result)
    output = result.sandbox.output
    assert re.search(r"plain: at most [\d.]+ MiB in backward", output)
    assert 0.3 < result.sandbox.reports["activations_saved"] < 0.6  # at the peak: about 40%, not "81% less kept"
    means = [float(m) for m in re.findall(r"steps \d+-\d+: mean loss ([\d.]+)", output)]
    assert len(means) == 6, output[-1500:]
    assert means[-1] < means[0] - 0.2, means  # it leaves chance (2.30), as the step says it will


# (program, the requirement that names the mistake, the cause it says first, everything that fails)
MISTAKES = [
    (
        "mem1_mistake_loss_not_divided.py",
        "gradient-of-the-full-batch",
        "At optimizer step 1, the gradient was 4.00 times the full batch's (4 micro-batches as one batch): each "
        "micro-batch's loss was not divided by 4",
        {"gradient-of-the-full-batch"},
    ),
    (
        "mem1_mistake_zero_grad_every_micro_batch.py",
        "zero-grad-once-per-k",
        "The gradients were cleared before micro-batch 2's backward, in the middle of a group of 4",
        {"zero-grad-once-per-k", "gradient-of-the-full-batch"},
    ),
    (
        "mem1_mistake_step_every_micro_batch.py",
        "steps-once-per-k",
        "optimizer.step() ran after every micro-batch: 8 steps for 8 micro-batches, where accumulation_steps=4 wants 2",
        {"steps-once-per-k", "gradient-of-the-full-batch"},
    ),
    (
        "mem1_mistake_losses_summed.py",
        "gradient-of-the-full-batch",
        "backward() ran 2 times for 8 micro-batches: the losses were added up",
        {"gradient-of-the-full-batch"},
    ),
    (
        "mem2_mistake_no_checkpoint.py",
        "checkpoints-every-block",
        "Backward ran none of the blocks again, so none ran under checkpoint: forward_checkpointed held 969.2 KiB at "
        "once during backward, as much as the plain forward (969.2 KiB)",
        {"checkpoints-every-block", "saving-measured"},
    ),
    (
        "mem2_mistake_one_checkpoint.py",
        "checkpoints-every-block",
        "Backward ran blocks 1 to 6 again together, before any of them got its gradient: the whole stack ran under one "
        "checkpoint",
        {"checkpoints-every-block", "saving-measured"},
    ),
    # use_reentrant left out: the program's own comparison honestly says False; only the real cause fails
    (
        "mem2_mistake_reentrant.py",
        "same-outputs-and-gradients",
        "checkpoint ran with use_reentrant=True (what checkpoint does when use_reentrant is not passed), and its input "
        "did not require grad, so it built no graph through the blocks: none of the blocks' weights got a gradient",
        {"same-outputs-and-gradients"},
    ),
    (
        "mem2_mistake_no_grad.py",
        "same-outputs-and-gradients",
        "forward_checkpointed's output carries no graph (requires_grad is False)",
        {"same-outputs-and-gradients"},
    ),
    (
        "mem2_mistake_outputs_only.py",
        "results-compared",
        "Your program compared the outputs of the two forward passes, but none of the 26 weights' gradients",
        {"results-compared"},
    ),
    (
        "mem3_mistake_retry_in_except.py",
        "retries-outside-except",
        "train_step(768) was called inside the except block that caught train_step(1,024)'s out-of-memory error",
        {"retries-outside-except", "frees-memory-after-oom", "finds-largest-batch"},
    ),
    (
        "mem3_mistake_error_kept.py",
        "frees-memory-after-oom",
        "When train_step(768) began after train_step(1,024) ran out of memory,",
        {"frees-memory-after-oom", "finds-largest-batch"},
    ),
    (
        "mem3_mistake_catches_everything.py",
        "catches-only-oom",
        "When train_step raised RuntimeError: mat1 and mat2 shapes cannot be multiplied",
        {"catches-only-oom"},
    ),
    (
        "mem3_mistake_powers_of_two.py",
        "finds-largest-batch",
        "Under the checker's cap largest_batch(train_step) returned 512, the largest power of two that fits; 700 "
        "fits too",
        {"finds-largest-batch", "pretend-gpu-limit"},
    ),
]


@pytest.mark.long
@pytest.mark.parametrize("program,req_id,cause,failing", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_each_real_mistake_fails_naming_its_cause_first(
    lesson, small_lab, tmp_path, program, req_id, cause, failing
) -> None:
    result = _grade(lesson, program, tmp_path)
    failed = _failed(result)
    assert result.sandbox.ok, result.sandbox.output[-2000:]  # the run itself finishes: only the checker sees it
    assert set(failed) == failing, failed
    assert failed[req_id].startswith(cause), failed[req_id]
    feedback = next(r.feedback for r in lesson.step(STEPS[program.split("_")[0]]).requirements if r.id == req_id)
    assert failed[req_id].endswith(feedback)  # the cause the run showed, then the lesson's advice
    assert result.hint == failed[req_id]  # and it is what the learner reads first
