"""The built-in lesson `gpu-training` and its reference, docs/LESSON_FORMAT.md.

The lesson is the product's main text: these tests pin its structure (outline order,
check ids, predict -> run pairs), keep its numbers tied to the code that produces them,
and keep the instructor's reference in step with the models and the experiment registry.
"""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import pytest
from lesson_text import AUTHOR_DOCS, DOC, MAX_CODE, all_text, code_blocks, fenced

from tutor import experiments
from tutor.checks import grade
from tutor.checks.answers import ChoiceAnswer, TextAnswer
from tutor.course.lesson import (
    CheckStep,
    CodeCompare,
    Lesson,
    PredictStep,
    ReadStep,
    RunStep,
    Verify,
)
from tutor.course.loader import load_file, load_text

ROOT = Path(__file__).resolve().parents[2]
LESSON = ROOT / "lessons" / "gpu-training.yaml"

CHECK_IDS = ["check-1-error", "check-1-loop", "check-2", "check-3"]


@pytest.fixture(scope="module")
def lesson() -> Lesson:
    return load_file(LESSON)


@pytest.fixture(scope="module")
def doc() -> str:
    return DOC.read_text(encoding="utf-8")


# ------------------------------------------------------------------ identity and shape


def test_lesson_loads_with_its_identity(lesson):
    assert lesson.id == "gpu-training"
    assert lesson.title == "GPU Training"
    assert lesson.order == 10
    assert lesson.next == "gpu-training-practice"
    assert 25 <= len(lesson.steps) <= 35
    assert lesson.summary


def test_every_step_has_a_title_and_text(lesson):
    for s in lesson.steps:
        assert s.title.strip(), s.id
        if isinstance(s, (ReadStep, RunStep)):
            assert s.body.strip(), s.id


def test_placeholder_is_gone():
    assert not (ROOT / "lessons" / ".keep").exists()


# ------------------------------------------------------------------ outline order


def test_sections_follow_the_outline(lesson):
    order = [
        "context",
        "hook-predict",
        "hook-run",
        "device-basics",
        "mismatch-predict",
        "mismatch-run",
        "device-aware-loop",
        "check-1-error",
        "check-1-loop",
        "when-gpu-helps",
        "checkpoint-run",
        "practice-predict",
        "practice-run",
        "check-2",
        "fp16-range",
        "underflow-predict",
        "underflow-run",
        "autocast-and-scaler",
        "amp-predict",
        "amp-run",
        "amp-when",
        "check-3",
        "summary",
        "whats-next",
    ]
    positions = [lesson.index(sid) for sid in order]
    assert positions == sorted(positions), list(zip(order, positions))
    assert lesson.steps[0].id == "context" and lesson.steps[-1].id == "whats-next"


def test_runs_use_the_outline_experiments_in_order(lesson):
    runs = [s.experiment for s in lesson.steps if isinstance(s, RunStep)]
    assert runs == ["crossover", "device-mismatch", "checkpoint-roundtrip", "train", "fp16-underflow", "amp-compare"]


def test_every_run_is_predicted_just_before(lesson):
    for i, s in enumerate(lesson.steps):
        if isinstance(s, RunStep):
            assert isinstance(lesson.steps[i - 1], PredictStep), f"{s.id} has no prediction before it"
        if isinstance(s, PredictStep):  # its run next, or after the other predictions of that run
            after = next(t for t in lesson.steps[i + 1 :] if not isinstance(t, PredictStep))
            assert isinstance(after, RunStep), f"{s.id} is not followed by its run"


# ------------------------------------------------------------------ predictions


def test_predict_compare_metrics_exist(lesson):
    for i, s in enumerate(lesson.steps):
        if isinstance(s, PredictStep):
            assert s.compare, s.id
            run = lesson.run_after(i)
            assert run is not None
            assert s.compare in experiments.get(run.experiment).metrics, (s.id, s.compare)


def test_ranged_options_cover_the_line_without_gaps(lesson):
    """Options with min/max partition [0, inf): every measurement lands in exactly one."""
    ranged_steps = 0
    for s in lesson.steps:
        if not (isinstance(s, PredictStep) and isinstance(s.answer, ChoiceAnswer)):
            continue
        opts = s.answer.options
        if not any(o.min is not None or o.max is not None for o in opts):
            continue
        ranged_steps += 1
        assert all(o.min is not None for o in opts), s.id
        bands = sorted((o.min, math.inf if o.max is None else o.max) for o in opts)
        assert bands[0][0] == 0, s.id
        for (_lo1, hi1), (lo2, _) in itertools.pairwise(bands):
            assert hi1 == lo2, (s.id, hi1, lo2)
        assert bands[-1][1] == math.inf, s.id
    assert ranged_steps >= 4


def test_hook_prediction_is_the_crossover_speedup(lesson):
    step = lesson.step("hook-predict")
    assert step.compare == "speedup" and step.unit == "x"
    assert lesson.run_after(lesson.index("hook-predict")).experiment == "crossover"


def test_mismatch_prediction_can_match_the_measured_error_type(lesson):
    """The compared metric is a string: the right option is literally what the run reports."""
    step = lesson.step("mismatch-predict")
    assert step.compare == "error_type"
    right = [o.text for o in step.answer.options if o.correct]
    assert right == ["RuntimeError"]


# ------------------------------------------------------------------ the device-aware loop


def test_device_aware_loop_marks_exactly_the_three_changes(lesson):
    step = lesson.step("device-aware-loop")
    assert isinstance(step, ReadStep) and step.compare is not None
    left, right = step.compare.changed_lines()
    rows = step.compare.right.splitlines()
    changed = [rows[i].strip() for i in sorted(right)]
    assert changed == [
        'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "model = MNISTClassifier().to(device)",
        "inputs, labels = inputs.to(device), labels.to(device)",
    ]
    # the batch is moved inside the loop body, not before it
    move = rows[sorted(right)[-1]]
    loop = next(r for r in rows if r.strip().startswith("for inputs, labels in"))
    assert len(move) - len(move.lstrip()) > len(loop) - len(loop.lstrip())
    assert [step.compare.left.splitlines()[i].strip() for i in left] == ["model = MNISTClassifier()"]


def test_amp_compare_changes_only_the_amp_lines(lesson):
    step = lesson.step("autocast-and-scaler")
    assert step.compare is not None
    _, right = step.compare.changed_lines()
    rows = step.compare.right.splitlines()
    changed = "\n".join(rows[i] for i in right)
    for needed in (
        "GradScaler",
        "torch.autocast",
        "scaler.scale(loss).backward()",
        "scaler.step(optimizer)",
        "scaler.update()",
    ):
        assert needed in changed
    assert "half()" not in step.compare.right  # no manual casting
    # backward() is outside the autocast block (less indented than the forward pass)
    fwd = next(r for r in rows if "outputs = model(inputs)" in r)
    bwd = next(r for r in rows if ".backward()" in r)
    assert len(bwd) - len(bwd.lstrip()) < len(fwd) - len(fwd.lstrip())


# ------------------------------------------------------------------ checks


def test_required_checks_exist_with_full_drafts(lesson):
    for cid in CHECK_IDS:
        step = lesson.step(cid)
        assert isinstance(step, CheckStep), cid
        assert isinstance(step.answer, TextAnswer), cid
        assert step.answer.rubric is not None and step.answer.rubric.require, cid
        assert step.answer.rubric.misconceptions, cid
        assert step.answer.reference.strip(), cid
        assert step.hint.strip() and step.explanation.strip(), cid
        assert len(step.examples.right) >= 3 and len(step.examples.wrong) >= 3, cid
    checks = [s.id for s in lesson.steps if isinstance(s, CheckStep)]
    # the plan's checks in its order, and the check on the course material's "robust" save
    assert [c for c in checks if c != "check-cpu-save"] == CHECK_IDS
    assert (
        checks.index("check-1-loop") < checks.index("check-cpu-save") < checks.index("check-2")
    )  # after the checkpoint run


def test_check_prompts_are_the_issue_questions(lesson):
    assert "forget to move the data" in lesson.step("check-1-error").prompt
    assert "outside the training loop" in lesson.step("check-1-loop").prompt
    assert "500 parameters" in lesson.step("check-2").prompt
    assert "GradScaler" in lesson.step("check-3").prompt


def test_checks_verify_with_the_right_runs(lesson):
    v1 = lesson.step("check-1-error").verify
    v2 = lesson.step("check-2").verify
    v3 = lesson.step("check-3").verify
    assert v1 is not None and v1.experiment == "device-mismatch"
    assert v2 is not None and v2.experiment == "crossover"
    assert v2.params == {"model": "tiny", "tiny_samples": 200, "tiny_batch_size": 32}
    assert v3 is not None and v3.experiment == "fp16-underflow"


@pytest.mark.parametrize("check_id", CHECK_IDS)
def test_examples_grade_as_declared(lesson, check_id):
    step = lesson.step(check_id)
    for answer in step.examples.right:
        verdict = grade(answer, step.answer)
        assert verdict.correct, (answer, verdict.feedback)
    for answer in step.examples.wrong:
        verdict = grade(answer, step.answer)
        assert not verdict.correct, answer


def test_reference_answers_pass_their_own_rubric(lesson):
    for cid in CHECK_IDS:
        step = lesson.step(cid)
        assert grade(step.answer.reference, step.answer).correct, cid


# ------------------------------------------------------------------ misconceptions met


@pytest.mark.parametrize(
    "pattern",
    [
        r"not always faster",  # GPU is always faster
        r"not just `model\.to\(device\)`",  # moving is just model.to(device)
        r"do \*\*not\*\* rewrite your loop",  # I must rewrite my loop
        r"not float16 everywhere",  # mixed precision means float16 everywhere
        r"no manual casting",  # mixed precision needs manual casting
        r"weights stay float32",
        r"weights_only=True",
        r"map_location",
        r"total_memory",
        r'autocast\("cpu", dtype=torch\.bfloat16\)',
    ],
)
def test_misconceptions_and_corrections_are_taught(lesson, pattern):
    assert re.search(pattern, all_text(lesson), re.IGNORECASE), pattern


# ------------------------------------------------------------------ numbers come from formulas
# (they need torch's models and dtypes: tests/experiments/test_lesson_numbers.py)


# ------------------------------------------------------------------ 80-column terminal


def test_code_lines_fit_the_terminal(lesson):
    too_long = []
    for s in lesson.steps:
        texts = [s.body] + ([s.explanation] if isinstance(s, CheckStep) else [])
        for text in texts:
            for block in code_blocks(text):
                too_long += [(s.id, line) for line in block if len(line) > MAX_CODE]
        if isinstance(s, ReadStep) and s.compare is not None:
            for line in s.compare.left.splitlines() + s.compare.right.splitlines():
                if len(line) > MAX_CODE:
                    too_long.append((s.id, line))
    assert not too_long


def test_run_params_are_sized_for_a_laptop(lesson):
    amp = next(s for s in lesson.steps if isinstance(s, RunStep) and s.experiment == "amp-compare")
    assert amp.params.get("train_samples") and amp.params["train_samples"] <= 30000
    train = next(s for s in lesson.steps if isinstance(s, RunStep) and s.experiment == "train")
    assert experiments.get("train").make_params(train.params).epochs <= 3


# ------------------------------------------------------------------ docs/LESSON_FORMAT.md


def test_doc_names_every_experiment_param_and_metric(doc):
    for name, exp in experiments.REGISTRY.items():
        assert f"`{name}`" in doc, name
        for param in exp.params.model_fields:
            assert f"`{param}`" in doc, (name, param)
        for metric in exp.metrics:
            assert f"`{metric}`" in doc, (name, metric)


def test_doc_names_every_key_of_the_format(doc):
    from tutor.checks import answers

    models = [
        Lesson,
        ReadStep,
        PredictStep,
        RunStep,
        CheckStep,
        CodeCompare,
        Verify,
        answers.ChoiceAnswer,
        answers.ChoiceOption,
        answers.NumberAnswer,
        answers.NumberRange,
        answers.TextAnswer,
        answers.Rubric,
        answers.Concept,
        answers.Misconception,
        answers.Examples,
    ]
    for model in models:
        for key in model.model_fields:
            assert f"`{key}`" in doc or f"`{key}:" in doc, (model.__name__, key)


def _doc_yaml_block(doc: str, marker: str) -> str:
    found = [lines for lang, lines in fenced(doc) if lang == "yaml" and lines[:1] == [f"# {marker}"]]
    assert len(found) == 1, f"expected one yaml block starting with '# {marker}' in {DOC.name}"
    return "\n".join(found[0]) + "\n"


@pytest.mark.parametrize("path", AUTHOR_DOCS, ids=lambda p: p.name)
def test_doc_step_examples_load(path):
    """Each step example in the reference and the tutorial is valid when put in a lesson."""
    fragments = [
        lines
        for lang, lines in fenced(path.read_text(encoding="utf-8"))
        if lang == "yaml" and lines[:1] and lines[0].startswith("  - id:")
    ]
    assert len(fragments) >= 3
    for lines in fragments:
        text = (
            "id: t\ntitle: T\nsteps:\n"
            + "\n".join(lines)
            + "\n  - id: zz-run\n    kind: run\n    experiment: crossover\n"
        )
        step = load_text(text, "fragment.yaml").steps[0]
        if isinstance(step, CheckStep):
            assert all(grade(a, step.answer).correct for a in step.examples.right)
            assert not any(grade(a, step.answer).correct for a in step.examples.wrong)


def test_doc_predict_answer_examples_lint_clean():
    """A prediction's `answer:` shown on its own (in either doc) is valid in a predict step before a run of train."""
    fragments = [
        lines
        for path in AUTHOR_DOCS
        for lang, lines in fenced(path.read_text(encoding="utf-8"))
        if lang == "yaml" and lines[:1] == ["    answer:"]
    ]
    assert fragments
    for lines in fragments:
        text = (
            "id: t\ntitle: T\nsteps:\n  - id: guess\n    kind: predict\n    prompt: P\n"
            + "\n".join(lines)
            + "\n  - id: zz-run\n    kind: run\n    experiment: train\n"
        )
        assert isinstance(load_text(text, "fragment.yaml").steps[0], PredictStep)


def test_doc_lint_example_matches_the_loader(doc):
    """The doc shows a broken lesson and the error it gets: keep that output real."""
    from tutor.course.lesson import LessonError

    text = _doc_yaml_block(doc, "broken.yaml")
    outputs = [lines for lang, lines in fenced(doc) if lang == "text" and lines[:1] == ["$ gpututor lint broken.yaml"]]
    assert len(outputs) == 1, "no lint output example in the doc"
    shown = [line for line in outputs[0] if line.startswith("broken.yaml:")]
    assert shown
    with pytest.raises(LessonError) as err:
        load_text(text, "broken.yaml")
    assert shown == [str(i) for i in err.value.issues]


@pytest.mark.parametrize("path", AUTHOR_DOCS, ids=lambda p: p.name)
def test_doc_code_lines_fit_the_terminal(path):
    """Instructors read the reference and the tutorial in a terminal too: keep their YAML and Python
    narrow. (Tool output is shown as printed, however long.)"""
    too_long = [
        line
        for lang, lines in fenced(path.read_text(encoding="utf-8"))
        if lang in ("yaml", "python")
        for line in lines
        if len(line) > 100
    ]
    assert not too_long


def test_readme_names_every_experiment() -> None:
    from tutor.experiments import REGISTRY

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [name for name in REGISTRY if name not in readme] == []


def test_readme_lists_every_built_in_lesson() -> None:
    """Each lesson's title starts with a name in bold in the README's list (the longest that fits)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"\*\*([^*]+)\*\*", readme.split("The lessons, in order:", 1)[1].split("\n| key", 1)[0])
    titles = [load_file(path).title for path in sorted((ROOT / "lessons").glob("*.yaml"))]
    named = {
        title: max((name for name in listed if title == name or title.startswith(name + ":")), key=len, default=None)
        for title in titles
    }
    assert [title for title, name in named.items() if name is None] == []
    assert len(set(named.values())) == len(titles)


def test_help_names_every_environment_variable_the_readme_does() -> None:
    from tutor.cli import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    in_readme = set(re.findall(r"`(GPUTUTOR_[A-Z_]+)`", readme.split("Global options:", 1)[1].split("\n## ", 1)[0]))
    assert len(in_readme) >= 8
    epilog = build_parser().epilog
    assert sorted(name for name in in_readme if name not in epilog) == []


def test_readme_installs_pytorchs_cpu_build_before_the_tutor() -> None:
    """A CPU-only box takes torch and torchvision from PyTorch's CPU index, then `pip install .`, which
    keeps them: torchvision from PyPI alone would pin, and so pull, PyPI's CUDA torch."""
    import tomllib

    from packaging.requirements import Requirement

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    cpu = "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"
    assert cpu in install
    assert "pip install ." in install[install.index(cpu) :]
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    torch = next(Requirement(d) for d in deps if Requirement(d).name == "torch")
    assert torch.specifier.contains("2.14.1") and torch.specifier.contains("2.14.1+cpu")
