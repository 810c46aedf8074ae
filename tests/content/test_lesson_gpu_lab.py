"""The built-in lab lesson `gpu-lab` (issue 4).

Pins its outline (every part, every pitfall, predict before every run), grades every
check's examples, and keeps the numbers in its prose tied to the code and formulas that
produce them (the memory arithmetic; the float formats table is checked against torch.finfo
in tests/experiments/test_lesson_numbers.py, the tier that imports torch).
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from lesson_text import MAX_CODE, all_text, code_blocks

from tutor import experiments
from tutor.checks import grade
from tutor.checks.answers import ChoiceAnswer, NumberAnswer, TextAnswer
from tutor.course.lesson import CheckStep, Lesson, PredictStep, ReadStep, RunStep
from tutor.course.loader import load_file

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "gpu-lab.yaml"

# The issue's outline, part by part.
OUTLINE = {
    "basics": ["basics-predict", "basics-run", "basics-read", "check-tf32", "loops-predict", "loops-run"],
    "formats": [
        "formats-read",
        "autocast-read",
        "dtypes-predict",
        "dtypes-run",
        "check-dtypes",
        "formats-predict",
        "formats-run",
        "check-formats",
        "attention-predict",
        "attention-run",
        "attention-read",
    ],
    "memory anatomy": [
        "memory-read",
        "memory-predict",
        "memory-run",
        "memory-reflect",
        "check-memory",
        "conv-predict",
        "conv-run",
        "conv-read",
    ],
    "memory optimisation": [
        "sweep-predict",
        "sweep-run",
        "accum-read",
        "accum-predict",
        "accum-run",
        "lr-predict",
        "lr-run",
        "lr-read",
        "ckpt-read",
        "ckpt-predict",
        "ckpt-run",
        "segments-predict",
        "segments-run",
        "timeline-predict",
        "timeline-run",
        "timeline-read",
        "check-oom-options",
    ],
    "end to end": [
        "data-predict",
        "data-run",
        "roofline-predict",
        "roofline-run",
        "check-roofline",
        "calibrate-predict",
        "calibrate-run",
        "bench-predict",
        "bench-run",
        "bench-reflect",
        "check-bench",
        "profile-predict",
        "profile-run",
        "check-gpu-util",
        "kernel-read",
        "kernel-predict",
        "kernel-run",
    ],
    "pitfalls": [
        "pitfalls-read",
        "mismatch-predict",
        "mismatch-run",
        "oom-predict",
        "oom-run",
        "oom-read",
        "sync-predict",
        "sync-run",
        "check-sync",
        "leak-predict",
        "leak-run",
        "leak-read",
        "autocast-predict",
        "autocast-run",
        "autocast-reflect",
        "check-pitfalls",
    ],
    "tips and ready": ["tips-read", "ready-memory", "ready-timing", "ready-amp", "ready-done"],
}
ISSUE_EXPERIMENTS = [
    "device-basics",
    "data-bottleneck",
    "memory-ledger",
    "batch-sweep",
    "grad-accum",
    "grad-checkpoint",
    "amp-benchmark",
]
PITFALL_RUNS = ["device-mismatch", "oom-recovery", "sync-timing", "graph-leak", "autocast-misuse"]


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(LESSON)


def _checks(lesson: Lesson) -> list[CheckStep]:
    return [s for s in lesson.steps if isinstance(s, CheckStep)]


def test_identity_and_place_after_the_practice(lesson):
    assert lesson.id == "gpu-lab" and lesson.title and lesson.summary
    practice = load_file(ROOT / "lessons" / "gpu-training-practice.yaml")
    assert practice.next == "gpu-lab" and lesson.order > practice.order


def test_steps_follow_the_outline(lesson):
    assert [s.id for s in lesson.steps] == ["welcome", "scale-read"] + [i for part in OUTLINE.values() for i in part]


def test_every_step_has_a_title_and_text(lesson):
    for s in lesson.steps:
        assert s.title.strip(), s.id
        if isinstance(s, (ReadStep, RunStep)):
            assert s.body.strip(), s.id


def test_every_issue_experiment_and_every_pitfall_runs(lesson):
    runs = [s.experiment for s in lesson.steps if isinstance(s, RunStep)]
    for name in ISSUE_EXPERIMENTS + PITFALL_RUNS:
        assert name in runs, name
    pitfalls = OUTLINE["pitfalls"]
    pitfall_runs = [lesson.step(i).experiment for i in pitfalls if isinstance(lesson.step(i), RunStep)]
    assert pitfall_runs == PITFALL_RUNS


def test_every_run_is_predicted_just_before(lesson):
    for i, s in enumerate(lesson.steps):
        if isinstance(s, RunStep):
            assert isinstance(lesson.steps[i - 1], PredictStep), f"{s.id} has no prediction before it"
        if isinstance(s, PredictStep):
            assert isinstance(lesson.steps[i + 1], RunStep), f"{s.id} is not followed by its run"
            assert s.compare in experiments.get(lesson.steps[i + 1].experiment).metrics, s.id


def test_every_part_has_a_graded_check_and_the_end_three(lesson):
    for part, ids in OUTLINE.items():
        assert any(isinstance(lesson.step(i), CheckStep) for i in ids), part
    ready = [s for s in _checks(lesson) if s.id.startswith("ready-")]
    assert len(ready) == 3 and all(s.verify is not None for s in ready)


def test_ranged_options_cover_the_line_without_gaps(lesson):
    for s in lesson.steps:
        if not (isinstance(s, PredictStep) and isinstance(s.answer, ChoiceAnswer)):
            continue
        opts = s.answer.options
        if not any(o.min is not None or o.max is not None for o in opts):
            continue
        bands = sorted((o.min, math.inf if o.max is None else o.max) for o in opts)
        assert bands[0][0] == 0, s.id
        assert all(hi == lo for (_, hi), (lo, _) in itertools.pairwise(bands)), s.id
        assert bands[-1][1] == math.inf, s.id


def test_text_metric_predictions_offer_every_value_the_run_can_report(lesson):
    """A choice compared with a text metric scores only on an exact match."""
    assert {o.text for o in lesson.step("autocast-predict").answer.options} >= {"float32", "float16", "bfloat16"}
    assert "RuntimeError" in {o.text for o in lesson.step("mismatch-predict").answer.options}


# ------------------------------------------------------------------ grading


@pytest.mark.parametrize("check_id", [s.id for s in _checks(load_file(LESSON))])
def test_examples_grade_as_declared(lesson, check_id):
    step = lesson.step(check_id)
    if isinstance(step.answer, ChoiceAnswer):
        right = [str(i) for i, o in enumerate(step.answer.options, 1) if o.correct]
        wrong = [str(i) for i, o in enumerate(step.answer.options, 1) if not o.correct]
        assert len(right) == 1 and len(wrong) >= 2
        assert all(o.feedback for o in step.answer.options), "every option says why"
    else:
        right, wrong = step.examples.right, step.examples.wrong
        assert len(right) >= 3 and len(wrong) >= 3
    for answer in right:
        verdict = grade(answer, step.answer)
        assert verdict.correct, (answer, verdict.feedback)
    for answer in wrong:
        verdict = grade(answer, step.answer)
        assert not verdict.correct, answer
        assert verdict.feedback, answer


def test_reference_answers_pass_their_own_rubric(lesson):
    for step in _checks(lesson):
        if isinstance(step.answer, TextAnswer):
            assert grade(step.answer.reference, step.answer).correct, step.id


def test_targeted_feedback_names_the_misconception(lesson):
    cases = {
        "check-formats": ("bf16 is more precise than fp16, so no scaling", "less"),
        "check-oom-options": ("call torch.cuda.empty_cache()", "live tensors"),
        "check-sync": ("nothing is wrong, the GPU is just that fast", "1,500x"),
        "check-memory": ("5.2 GB", "weights alone"),
        "ready-memory": ("2.8", "Adam"),
    }
    for check_id, (answer, expected) in cases.items():
        verdict = grade(answer, lesson.step(check_id).answer)
        assert not verdict.correct and expected in verdict.feedback, (check_id, verdict.feedback)


# ------------------------------------------------------------------ numbers come from formulas
# (those torch gives, the float formats and the scaler's defaults: tests/experiments/test_lesson_numbers.py)


def test_memory_arithmetic_in_prose(lesson):
    per_param = 4 + 4 + 8  # weights, gradients, Adam's two moments
    assert f"**{per_param} bytes**" in lesson.step("memory-reflect").body
    check = lesson.step("check-memory")
    assert check.answer.value == pytest.approx(1.3e9 * per_param / 1e9)
    assert f"**{1.3e9 * per_param / 1e9:.1f} GB** ({1.3e9 * per_param / 2**30:.1f} GiB)" in check.explanation
    ready = lesson.step("ready-memory")
    assert ready.answer.value == pytest.approx(350e6 * per_param / 1e9)
    assert f"**{350e6 * per_param / 1e9:.1f} GB** ({350e6 * per_param / 2**30:.1f} GiB)" in ready.explanation
    # the feedback bands sit on the partial sums a learner gets by forgetting a part
    for step, params in ((check, 1.3e9), (ready, 350e6)):
        bands = [(r.min, r.max) for r in step.answer.ranges]
        for partial in (4, 8, 12):
            gb = params * partial / 1e9
            assert any(lo <= gb <= hi for lo, hi in bands), (step.id, partial)


def test_conv_worked_example_in_prose(lesson):
    """conv-read's torch.amp layout for ResNet-50 (P = 25.6M), the batch conv-run scales to, and
    Korthikanti et al.'s layer activations over the lab's 2BLH for GPT-2 small."""
    params = 25.6e6
    target = experiments.get("conv-activations").make_params(lesson.step("conv-run").params).target_batch
    predict, read = _flat(lesson.step("conv-predict").body), _flat(lesson.step("conv-read").body)
    assert f"a batch of {target}, beside the weights: 4 x 25.6M = {4 * params / 1e6:.0f} MB" in predict
    for per_param in (4, 8, 2):
        assert f"{per_param}P = {per_param * params / 1e6:.0f} MB" in read
    assert f"batch {target}" in read and f"{target} x the run's per-image figure" in read
    assert f"holds {4 + 4 + 8 + 2} bytes per parameter, not the {4 + 4 + 8} of float32" in read
    s, h, a = 1024, 768, 12
    assert f"(s = {s}, h = {h}, a = {a})" in read
    assert f"is {(34 + 5 * a * s / h) / 2:.0f} times the lab's figure; {34 / 2:.0f} times even without" in read


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_run_descriptions_match_the_run_params(lesson):
    def params(step_id):
        step = lesson.step(step_id)
        return experiments.get(step.experiment).make_params(step.params)

    def says(step_id, phrase):
        step = lesson.step(step_id)
        assert phrase in _flat(step.body + " " + getattr(step, "prompt", "")), (step_id, phrase)

    sweep = params("sweep-run")
    says("sweep-predict", f"{sweep.layers}-layer MLP (width {sweep.width})")
    says("sweep-predict", f"from {sweep.start_batch} up to {sweep.max_batch}")
    accum = params("accum-run")
    says("accum-predict", f"one batch of {accum.batch_size}")
    says("accum-predict", f"{accum.micro_batches} micro-batches of {accum.batch_size // accum.micro_batches}")
    ckpt = params("ckpt-run")
    says("ckpt-read", f"{ckpt.depth} x `Linear({ckpt.width}, {ckpt.width})`")
    says("ckpt-read", f"batch {ckpt.batch_size}, {ckpt.segments} segments")
    says("ckpt-predict", f"{ckpt.segments} segments")
    ledger = params("memory-run")
    says("memory-read", f"{ledger.layers} x `Linear({ledger.width}, {ledger.width})`")
    bench = params("bench-run")
    says("bench-predict", f"{bench.layers} hidden layers of width {bench.width}")
    says("bench-predict", f"batch {bench.batch_size}")
    sync = params("sync-run")
    says("sync-predict", f"range({sync.calls})")
    leak = params("leak-run")
    says("leak-predict", f"# {leak.steps} batches")
    says("leak-predict", f"after {leak.steps} steps of batch {leak.batch_size}")
    underflow = params("formats-run")
    assert underflow.gradient == 1e-6
    says("formats-predict", "exactly 1e-6")


def test_corrections_of_the_course_material_are_taught(lesson):
    text = all_text(lesson)
    for pattern in [
        r"frees the graph's saved tensors",  # a loss list after backward() keeps no activations
        r"\*less\* precise than\s+float16",  # bfloat16 is not the more precise format
        r"cannot free memory that\s+live tensors still hold",  # empty_cache is no fix
        r"autocast is per device type",
        r"Do not `model\.half\(\)` for training",
        r"leave the `except`\s+block before cleaning up",
    ]:
        assert re.search(pattern, text), pattern


def test_no_measured_figure_is_written_into_the_prose(lesson):
    """Truth rule 1: results come from runs. Prose may hold formulas and hardware facts,
    never a speedup, a seconds figure or an accuracy that a run is meant to measure. (Check
    prompts may pose a scenario with figures: "reports 0.02 s per epoch".)"""
    text = "\n".join(s.body for s in lesson.steps if isinstance(s, (ReadStep, RunStep, PredictStep)))
    assert not re.search(r"\b\d+(\.\d+)?\s*(s|ms) per (epoch|step)\b", text)
    assert not re.search(r"\b\d+(\.\d+)?x (faster|slower)\b", text)
    assert not re.search(r"\b\d\d(\.\d+)?% (test )?accuracy\b", text)


# ------------------------------------------------------------------ terminal and laptop


def test_code_lines_fit_the_terminal(lesson):
    too_long = []
    for s in lesson.steps:
        texts = [s.body] + ([s.explanation] if isinstance(s, CheckStep) else [])
        for text in texts:
            too_long += [(s.id, line) for block in code_blocks(text) for line in block if len(line) > MAX_CODE]
    assert not too_long


def test_choice_options_fit_one_line_at_80_columns(lesson):
    for s in lesson.steps:
        if isinstance(s, (PredictStep, CheckStep)) and isinstance(s.answer, ChoiceAnswer):
            for o in s.answer.options:
                assert len(o.text) <= 72, (s.id, o.text)


def test_number_answers_have_units_a_learner_can_type(lesson):
    for s in lesson.steps:
        if isinstance(s, CheckStep) and isinstance(s.answer, NumberAnswer):
            assert s.answer.unit == "GB" and s.answer.value is not None


def _plain_texts(step) -> list[tuple[str, str]]:
    """The texts the tutor shows as plain text (not Markdown): prompts, hints, options, feedback."""
    out = []
    if isinstance(step, (CheckStep, PredictStep)):
        out.append(("prompt", step.prompt))
        answer = step.answer
        if isinstance(answer, ChoiceAnswer):
            out += [("option", o.text) for o in answer.options] + [("feedback", o.feedback) for o in answer.options]
        if isinstance(answer, NumberAnswer):
            out += [("range feedback", r.feedback) for r in answer.ranges]
        if isinstance(answer, TextAnswer) and answer.rubric:
            rubric = answer.rubric
            out += [("missing", c.missing) for c in rubric.require + rubric.bonus]
            out += [("misconception", m.feedback) for m in rubric.misconceptions]
            out.append(("reference", answer.reference))
    if isinstance(step, CheckStep):
        out.append(("hint", step.hint))
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "lessons").glob("*.yaml")), ids=lambda p: p.stem)
def test_plain_text_fields_carry_no_markdown(path):
    """Backticks and asterisks would be shown as typed in feedback, hints and options (every
    built-in lesson)."""
    marked = [
        (s.id, kind, text)
        for s in load_file(path).steps
        for kind, text in _plain_texts(s)
        if text and re.search(r"`|\*\w", text)
    ]
    assert not marked
