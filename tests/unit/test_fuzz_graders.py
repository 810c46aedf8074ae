"""Property-based fuzzing of everything that grades or interprets learner-typed or learner-supplied input.

The hardening rule: arbitrary input (huge, unicode, control characters, NUL, terminal escapes,
"nan"/"inf"/"1e999", long digit strings) never raises, gives the documented type, and keeps the
feedback a sane size. The checks.* graders already have basic never-raises properties in
tests/test_checks_*.py and the lesson loader in tests/unit/test_lesson_loader.py; this file covers the
rest (and the gaps in those: huge text for every answer kind, metric dicts, huge predictions).

Regression examples for the bugs this fuzzing found sit beside the properties that found them (at the
end of each section), each saying what used to go wrong; the properties take the full input range,
those inputs included.

Pure Python, in this process: the learner programs that start the real sandbox are
tests/exercises/test_fuzz_sandbox.py, the loader in a fresh interpreter tests/system/test_lesson_nesting.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
import tokenize
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tutor.checks import (
    describe_spec,
    explain_matches,
    format_number,
    grade,
    parse_number,
    score_prediction,
)
from tutor.checks.answers import (
    ChoiceAnswer,
    Concept,
    Misconception,
    NumberAnswer,
    NumberRange,
    PredictionScore,
    Rubric,
    TextAnswer,
    Verdict,
)
from tutor.checks.number import grade_number, read_quantity

DATA = Path(__file__).parents[1] / "data"
FIXTURE_LESSON = "fixture-valid"

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEEDBACK_LIMIT = 1_000  # no grader here echoes more than this much of a learner's text back

# ----------------------------------------------------------------------------- input strategies

NASTY = [
    "",
    " ",
    "\n",
    "\t",
    "\x00",
    "a\x00b",
    "\x00" * 50,
    "\x1b[31mred\x1b[0m",
    "\x1b]0;title\x07",
    "\x1b[2J",
    "\u202e3x\u202c",
    "\u200f12 GB\u200e",
    "\u200b\u200b",
    "\ufeff",
    "\u2028",
    "\u2029",
    "\x0c",
    "\x0b",
    "\x85",
    "\r",
    "\r\n",
    "nan",
    "NaN",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "1e999",
    "-1e999",
    "1e-999",
    "-0",
    "+0",
    "0",
    "-0.0",
    "0x10",
    "1_000",
    "9" * 4300,
    "1" + "0" * 400,
    "0." + "0" * 400 + "1",
    "-" + "9" * 1000,
    "²",
    "٣",
    "１２",
    "Ⅻ",
    "1,5",
    "12,000",
    "1,000,000,000,000,000,000",
    "2^99999",
    "10^-99999",
    "2**1024",
    "1.5 x 10^308",
    "1.5 x 10^-400",
    "between 1e308 and 1e308",
    "3 to 1e999x",
    "x9999",
    "9999x" * 3,
    "é" * 10,
    "🙂" * 50,
    "\U0010ffff",
    "\ud7ff",
    "-" * 100,
    "(" * 100,
    "[" * 100,
    "re:(",
    "'\"\\",
    "None",
    "null",
    "true",
    "yes",
    "1)",
    "option 3",
    "(a)",
    "z",
    "#1",
    "no. 2",
    "twice",
    "half",
    "a thousand",
    "twelve GiB",
    "12 ms",
    "35%",
    "0.35",
    "3 times",
    "3-fold",
    "x3",
    "3×",
]
WORDS = [
    "the",
    "not",
    "no",
    "gpu",
    "gradients",
    "underflow",
    "float16",
    "loss",
    "scale",
    "faster",
    "2x",
    "GB",
    "because",
    ",",
    ".",
    ";",
    "\n",
    "doesn't",
    "never",
    "is",
    "a",
    "myth",
]

NASTY_SHORT = [n for n in NASTY if len(n) <= 100]  # for joining and repeating (long digit runs parse slowly)

TEXT = st.text(max_size=400)  # every code point but surrogates: control characters, NUL, RTL marks, emoji
ANSWERS = st.one_of(
    TEXT,
    st.sampled_from(NASTY),
    st.lists(st.sampled_from(NASTY_SHORT + WORDS), min_size=1, max_size=10).map(" ".join),
)
# Huge: 100k+ characters, from a repeated chunk (a random one or a nasty one).
HUGE = st.one_of(
    st.text(min_size=1, max_size=12),
    st.sampled_from([n for n in NASTY_SHORT if n]),
).map(lambda chunk: chunk * (100_000 // len(chunk) + 1))

# Past float range too (10**400): what a JSON report or a stored run can hold (json reads up to 4300 digits).
INTS = st.one_of(st.integers(), st.integers(min_value=-(10**400), max_value=10**400))
METRIC_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    INTS,
    st.sampled_from(NASTY),
    TEXT,
    st.lists(st.floats(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)

# ----------------------------------------------------------------------------- answer specs

CHOICE = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "slower", "feedback": "no"},
        {"text": "about 2x", "correct": True},
        {"text": "2"},
        {"text": "a"},
    ],
)
RANGED = ChoiceAnswer(
    type="choice",
    options=[
        {"text": "slower", "max": 1},
        {"text": "about 2x", "min": 1, "max": 3.5},
        {"text": "about 5x", "min": 3.5, "max": 10},
        {"text": "10x or more", "min": 10},
    ],
)
YES_NO = ChoiceAnswer(type="choice", options=["yes", "no"])
MANY = ChoiceAnswer(type="choice", options=[f"option {i}" for i in range(30)])
NUMBER_GB = NumberAnswer(type="number", unit="GB", value=12, ranges=[NumberRange(max=1, feedback="tiny")])
NUMBER_PCT = NumberAnswer(
    type="number", unit="%", value=35, abs_tolerance=5, ranges=[NumberRange(min=90, correct=True, feedback="fine")]
)
NUMBER_TIME = NumberAnswer(type="number", unit="ms", value=0.0, abs_tolerance=0.0)
NUMBER_PLAIN = NumberAnswer(type="number", value=-3e-8, tolerance=0.0)
NUMBER_NOVALUE = NumberAnswer(type="number", unit="params")
FROM_METRIC = NumberAnswer(type="number", unit="x", from_metric="speedup", tolerance=0.1)
FROM_METRIC_RANGED = NumberAnswer(
    type="number", unit="GiB", from_metric="peak", ranges=[NumberRange(min=100, feedback="way too high")]
)
RUBRIC = TextAnswer(
    type="text",
    max_length=2000,
    rubric=Rubric(
        require=[
            Concept(
                name="underflow",
                any=["small gradients underflow", "flush* to zero", "re:under-?flow"],
                missing="Say what happens to small gradients.",
            ),
            Concept(name="scale", any=["scale the loss", "loss.scale()", "re:(?i)scal(e|ing)"]),
        ],
        misconceptions=[Misconception(name="faster", any=["gpu always faster", "re:\\bspeed"], feedback="Not speed.")],
        bonus=[Concept(name="unscale", any=["unscale before step"])],
        min_concepts=1,
    ),
)
FREE_TEXT = TextAnswer(type="text")  # predict steps: saved, not graded
TINY_TEXT = TextAnswer(type="text", max_length=0, rubric=Rubric(require=[Concept(name="c", any=["x"])]))

SPECS = [
    CHOICE,
    RANGED,
    YES_NO,
    MANY,
    NUMBER_GB,
    NUMBER_PCT,
    NUMBER_TIME,
    NUMBER_PLAIN,
    NUMBER_NOVALUE,
    FROM_METRIC,
    FROM_METRIC_RANGED,
    RUBRIC,
    FREE_TEXT,
    TINY_TEXT,
]
SPEC_IDS = [
    "choice",
    "ranged",
    "yes-no",
    "30-options",
    "GB",
    "%",
    "ms-zero",
    "plain",
    "no-value",
    "from-metric",
    "from-metric-ranged",
    "rubric",
    "free-text",
    "max-length-0",
]
UNCAUGHT = "could not be graded"  # grade()'s catch-all: an exception inside a grader, masked


def assert_verdict(v: Verdict) -> None:
    assert isinstance(v, Verdict)
    assert isinstance(v.correct, bool) and isinstance(v.judged, bool)
    assert isinstance(v.feedback, str) and v.feedback.strip()
    assert len(v.feedback) <= FEEDBACK_LIMIT, f"feedback of {len(v.feedback)} characters"
    assert UNCAUGHT not in v.feedback, v.feedback  # an exception inside the grader, caught by grade()
    assert isinstance(v.missing, list) and all(isinstance(m, str) for m in v.missing)
    assert v.matched_misconception is None or isinstance(v.matched_misconception, str)
    assert 0.0 <= v.score <= 1.0
    json.dumps(v.as_dict(), allow_nan=False)  # `gpututor check --json` prints it


# ============================================================================= checks: grade()


@pytest.mark.parametrize("spec", SPECS, ids=SPEC_IDS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=ANSWERS)
def test_grade_every_answer_kind_on_arbitrary_text(spec, answer):
    v = grade(answer, spec, {"speedup": 3.2, "peak": 12.5})
    assert_verdict(v)
    if not answer.strip():
        assert not v.correct


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=HUGE, spec=st.sampled_from(SPECS))
def test_grade_every_answer_kind_on_huge_text(answer, spec):
    assert_verdict(grade(answer, spec, {"speedup": 3.2, "peak": 12.5}))


@pytest.mark.parametrize("spec", [FROM_METRIC, FROM_METRIC_RANGED], ids=["from-metric", "from-metric-ranged"])
@FAST
@given(
    answer=ANSWERS,
    metrics=st.one_of(
        st.dictionaries(st.sampled_from(["speedup", "peak", "other", ""]), METRIC_VALUES, max_size=3),
        st.none(),
        st.lists(st.integers(), max_size=2),
        st.text(max_size=5),
        st.integers(),
    ),
)
def test_grade_number_from_metric_with_arbitrary_metrics(spec, answer, metrics):
    v = grade(answer, spec, metrics)
    assert_verdict(v)
    measured = metrics.get(spec.from_metric) if isinstance(metrics, dict) else None
    if v.correct and not spec.ranges:
        assert isinstance(measured, (int, float, str)) and not isinstance(measured, bool)
    # grade_number itself (no catch-all around it) holds the same contract
    assert_verdict(grade_number(answer, spec, metrics))


@FAST
@given(
    text=ANSWERS,
    unit=st.sampled_from(
        ["", "x", "%", "GB", "GiB", "MiB", "B", "s", "ms", "us", "h", "params", "\x00", "\u202e", "GB\x1b[0m"]
    ),
)
def test_parse_number_and_read_quantity_on_nasty_numbers(text, unit):
    value = parse_number(text, unit)
    assert value is None or (isinstance(value, float) and math.isfinite(value))
    q = read_quantity(text)
    assert q is None or (math.isfinite(q.value) and isinstance(q.unit, str) and isinstance(q.text, str))
    if value is not None:
        shown = format_number(value, unit)
        assert isinstance(shown, str) and len(shown) < 200


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=HUGE, unit=st.sampled_from(["", "x", "%", "GB", "ms"]))
def test_read_quantity_on_huge_text(text, unit):
    value = parse_number(text, unit)
    assert value is None or math.isfinite(value)


@FAST
@given(
    answer=ANSWERS,
    phrase_words=st.lists(st.sampled_from([*WORDS, "re:(", "re:a{99999}", "x*", "to(device)"]), min_size=1, max_size=4),
)
def test_explain_matches_and_describe_spec_on_arbitrary_text(answer, phrase_words):
    rubric = Rubric(
        require=[Concept(name="c", any=[" ".join(phrase_words)])],
        misconceptions=[Misconception(name="m", any=phrase_words, feedback="f")],
    )
    out = explain_matches(answer, rubric, max_length=2000)
    assert set(out) == {"c", "!m"} and all(v is None or isinstance(v, str) for v in out.values())
    for spec in SPECS:
        assert isinstance(describe_spec(spec), str)


# ============================================================================= checks: score_prediction()

PREDICT_SPECS = [
    NumberAnswer(type="number", unit="x"),
    NumberAnswer(type="number", unit="GB", abs_tolerance=1),
    NumberAnswer(type="number", unit="%"),
    NumberAnswer(type="number"),
    RANGED,
    YES_NO,
    CHOICE,
    MANY,
    FREE_TEXT,
]
MEASURED = st.one_of(
    METRIC_VALUES, st.sampled_from([0, -0.0, 5e-324, 1.7976931348623157e308, -1e308, 10**300, 10**400, -(10**400)])
)


def assert_score(s: PredictionScore) -> None:
    assert isinstance(s, PredictionScore)
    assert isinstance(s.summary, str) and s.summary
    assert len(s.summary) <= FEEDBACK_LIMIT, f"summary of {len(s.summary)} characters"
    assert s.ratio is None or math.isfinite(s.ratio)
    assert isinstance(s.hit, bool)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=ANSWERS,
    spec=st.sampled_from(PREDICT_SPECS),
    measured=MEASURED,
    unit=st.sampled_from(["", "x", "GB", "GiB", "MB", "s", "ms", "%", "params", "\x1b[31m"]),
)
def test_score_prediction_on_arbitrary_answers_and_measurements(answer, spec, measured, unit):
    assert_score(score_prediction(answer, spec, measured, unit))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=HUGE, spec=st.sampled_from(PREDICT_SPECS), measured=st.one_of(MEASURED, HUGE))
def test_score_prediction_on_huge_answers_and_measurements(answer, spec, measured):
    assert_score(score_prediction(answer, spec, measured, ""))


# ----------------------------------------------------------------------------- checks: regressions


@pytest.mark.parametrize(
    "spec", [NumberAnswer(type="number", unit="x"), YES_NO, FREE_TEXT], ids=["number", "choice", "text"]
)
def test_score_prediction_with_an_int_metric_beyond_float_range_is_scored_not_raised(spec):
    """Was: tutor/checks/predict.py:_number raised OverflowError (math.isfinite(10**400)), even from
    score_prediction's own except-handler."""
    s = score_prediction("3x", spec, 10**400, "x")
    assert_score(s)
    assert not s.hit


def test_grade_from_metric_with_an_int_beyond_float_range_says_the_measurement_is_unusable():
    """Was: tutor/checks/number.py:_target let float(10**400)'s OverflowError out; grade()'s catch-all then
    asked the learner to rephrase a fine answer ("3x", metrics {"speedup": 10**400})."""
    for v in (grade("3x", FROM_METRIC, {"speedup": 10**400}), grade_number("3x", FROM_METRIC, {"speedup": 10**400})):
        assert_verdict(v)
        assert not v.correct and not v.judged
        assert "speedup" in v.feedback and "not a finite number" in v.feedback


# ============================================================================= review / check steps: session.grade


def grade_check(spec, answer: str, metrics: dict):
    """(the answer as shown, the verdict), as a check step, review or `gpututor check` grades it."""
    from tutor.course.session import Evidence, grade

    graded = grade(SimpleNamespace(answer=spec), answer, Evidence(metrics))
    return graded.answer, graded.verdict


@FAST
@given(answer=ANSWERS, spec=st.sampled_from([s for s in SPECS if not isinstance(s, ChoiceAnswer)]))
def test_grade_check_on_typed_answers(answer, spec):
    from tutor.ui.widgets.answer_box import MAX_CHARS

    shown, verdict = grade_check(spec, answer, {"speedup": 3.2, "peak": 1.0})
    assert shown == answer
    assert_verdict(verdict)
    assert 0 <= min(getattr(spec, "max_length", MAX_CHARS), MAX_CHARS) <= 2000


@pytest.mark.parametrize("spec", [CHOICE, RANGED, YES_NO, MANY], ids=["choice", "ranged", "yes-no", "30-options"])
def test_grade_check_on_every_option_number_the_option_list_submits(spec):
    for i, option in enumerate(spec.options):
        shown, verdict = grade_check(spec, str(i + 1), {})
        assert shown == option.text
        assert_verdict(verdict)
        assert verdict.judged


@FAST
@given(answer=ANSWERS)
def test_grade_check_on_typed_choice_answers(answer):
    shown, verdict = grade_check(CHOICE, answer, {})
    number = int(answer) if answer.isascii() and answer.isdigit() and len(answer) <= 4300 else 0
    assert shown == (CHOICE.options[number - 1].text if 1 <= number <= len(CHOICE.options) else answer)
    assert_verdict(verdict)


@pytest.mark.parametrize(
    "answer",
    [
        "9",
        "²",
        "0",
        "-1",
        "1" * 5000,
        "0000010",
    ],
)
def test_grade_check_shows_a_choice_number_beyond_the_options_as_typed(answer):
    """Was: the check step's grade_check indexed options[int(answer) - 1] for any isdigit() answer:
    '9' (of 4) raised IndexError, '²' ValueError, '0' showed the last option; then '0000010' (read as 1 for
    the range check, 10 for the index) raised IndexError."""
    shown, verdict = grade_check(CHOICE, answer, {})
    assert shown == answer
    assert_verdict(verdict)


# ============================================================================= progress store: learner text kept


@pytest.fixture(scope="module")
def progress_db():
    from tutor.course.progress import Progress

    with tempfile.TemporaryDirectory() as d, Progress(Path(d) / "progress.db") as progress:
        yield progress


@FEW
@given(text=st.one_of(ANSWERS, HUGE))
def test_learner_text_round_trips_through_the_progress_store(progress_db, text):
    p = progress_db
    p.record_answer("fuzz", "check", text, False, text[:100])
    p.record_review("fuzz", "check", text, True, "")
    p.save_draft("fuzz", "exercise", text)
    assert p.answers("fuzz", "check")[-1].answer == text
    assert p.reviews("fuzz", "check")[-1].answer == text
    assert p.draft("fuzz", "exercise") == text
    locked = p.lock_prediction("fuzz", f"predict-{len(p.predictions('fuzz'))}", text, parse_number(text, "x"))
    assert locked.answer == text and (locked.value is None or math.isfinite(locked.value))
    assert p.warning is None


# ============================================================================= exercises: judging the learner's code


@FAST
@given(code=st.one_of(ANSWERS, st.text(alphabet=st.sampled_from(list("ab =()#'\"\\\n\t:x1.")), max_size=200)))
@example(code="x = 1  # model.cuda()\n")
@example(code="s = '''\n# not a comment\n'''  # a comment\n")
@example(code="if x:\n  y  # c\n z\n")  # unindent error: the fallback path
def test_strip_comments_never_raises_and_only_removes(code):
    from tutor.exercises.grader import strip_comments

    out = strip_comments(code)
    assert isinstance(out, str) and len(out) <= len(code)


@FAST
@given(
    code=st.text(
        alphabet=st.sampled_from([*list("ab =()#'\"\n\t:x1.é"), "\x00", "\x1b", "\r", "\x0c", "\x85", "\u2028"]),
        max_size=200,
    )
)
@example(code="model.to(device)  # model.cuda()\n")
def test_strip_comments_leaves_no_comment_in_code_that_tokenizes(code):
    from tutor.exercises.grader import strip_comments

    try:
        list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        assume(False)
    out = strip_comments(code)
    tokens = list(tokenize.generate_tokens(io.StringIO(out).readline))
    assert not [t for t in tokens if t.type == tokenize.COMMENT]


@pytest.mark.parametrize(
    "code", ["x = 1 \x0c # model.cuda()\n", "s = '\u2028'  # model.cuda()\n", "a = 1\r# model.cuda()\n"]
)
def test_strip_comments_removes_a_comment_after_a_splitlines_only_line_break(code):
    """Was: tutor/exercises/grader.py:strip_comments split lines with str.splitlines() (also at \\r, \\x0c, \\u2028, ...)
    but took positions from tokenize (rows at \\n only): the comment stayed, or other characters were blanked."""
    from tutor.exercises.grader import strip_comments

    out = strip_comments(code)
    assert "cuda" not in out
    assert out.startswith(code.split("#")[0])  # the code before the comment is kept as it was


@FAST
@given(
    code=st.one_of(ANSWERS, HUGE.map(lambda s: s[:5_000])),
    pattern=st.sampled_from([r"\.to\(device\)", r"(?m)^\s*print", "(", "[", r"a{1,99999}", "", "\x00", "é+"]),
    absent=st.booleans(),
)
def test_source_requirement_met(code, pattern, absent):
    from tutor.course.lesson import SourceRequirement
    from tutor.exercises.grader import source_requirement_met

    req = SourceRequirement(type="source", id="src", pattern=pattern, absent=absent, feedback="f")
    assert source_requirement_met(req, code) in (True, False, None)


REPORT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    INTS,
    st.sampled_from(NASTY),
    TEXT,
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _report_req(kind: str, target):
    from tutor.course.lesson import ReportRequirement

    fields = {
        "equals": {"equals": target},
        "min": {"min": target},
        "max": {"max": target},
        "range": {"min": -1.0, "max": target},
        "present": {},
    }[kind]
    return ReportRequirement(type="report", id="rep", name="speedup", feedback="Report the speedup.", **fields)


@FAST
@given(
    kind=st.sampled_from(["equals", "min", "max", "range", "present"]),
    target=st.one_of(st.booleans(), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(NASTY)),
    reports=st.one_of(
        st.dictionaries(st.sampled_from(["speedup", "other"]), REPORT_VALUES, max_size=2),
        st.builds(lambda v: {"speedup": v}, REPORT_VALUES),
    ),
)
def test_check_report_on_arbitrary_reported_values(kind, target, reports):
    from tutor.exercises.grader import _check_report

    if kind != "equals" and not isinstance(target, float):
        target = 1.5
    ok, feedback = _check_report(_report_req(kind, target), reports)
    assert isinstance(ok, bool) and isinstance(feedback, str)
    assert ok == (feedback == "")
    if "speedup" not in reports:
        assert not ok
    assert len(feedback) <= FEEDBACK_LIMIT  # the reported value is quoted cut short


@pytest.mark.parametrize("kind", ["equals", "max", "range"])
def test_check_report_with_an_int_beyond_float_range_fails_with_feedback(kind):
    """Was: tutor/exercises/grader.py:_check_report raised OverflowError for report(speedup=10**400) (math.isclose for
    equals, f'{value:.4g}' for min/max), so grade_exercise raised."""
    from tutor.exercises.grader import _check_report

    ok, feedback = _check_report(_report_req(kind, 3.0), {"speedup": 10**400})
    assert not ok
    assert (
        feedback.startswith("You reported speedup=")
        and "Report the speedup." in feedback
        and len(feedback) <= FEEDBACK_LIMIT
    )


@FAST
@given(
    error_type=st.one_of(st.none(), st.sampled_from(["RuntimeError", "ValueError", "", "\x00", "é"]), TEXT),
    message=st.one_of(st.none(), ANSWERS),
    pattern=st.sampled_from(["", "CUDA", "(", r"\d+", "\x1b"]),
    fields=st.fixed_dictionaries(
        {
            "exit_code": st.one_of(st.none(), st.integers(-300, 300)),
            "signal": st.one_of(st.none(), TEXT),
            "timed_out": st.booleans(),
            "cancelled": st.booleans(),
            "memory_error": st.booleans(),
            "error_line": st.one_of(st.none(), st.integers()),
        }
    ),
)
def test_expected_error_requirements_and_problem_sentence(error_type, message, pattern, fields):
    from tutor.course.lesson import ErrorRequirement
    from tutor.exercises.grader import _error_feedback, _error_matches, _summary
    from tutor.exercises.sandbox import SandboxResult

    run = SandboxResult(error_type=error_type, error_message=None if message is None else message[:2000], **fields)
    req = ErrorRequirement(type="error", id="err", error="RuntimeError", pattern=pattern, feedback="Break it.")
    matched = _error_matches(req, run)
    assert matched in (True, False)
    assert isinstance(_error_feedback(req, run), str)
    problem = run.problem()
    assert problem is None or (isinstance(problem, str) and problem)
    assert isinstance(_summary([], problem), str)


# ----------------------------------------------------------------------------- the sandbox's bounded capture

OUTPUT_CHUNKS = st.lists(st.one_of(TEXT, st.sampled_from(NASTY), HUGE.map(lambda s: s[:65_536])), max_size=12)


@FEW
@given(chunks=OUTPUT_CHUNKS)
def test_sandbox_output_capture_stays_bounded(chunks):
    from tutor.exercises import sandbox

    capture, seen = sandbox._Capture(), []
    flusher = sandbox._Flusher(seen.append)
    for chunk in chunks:  # run_code adds at most 64 KiB decoded per read
        capture.add(chunk)
        flusher.add(chunk)
        flusher.flush(force=True)
    text, dropped = capture.result()
    assert dropped >= 0
    # head (200 lines / 64 KiB, plus the rest of the read that filled it) + tail + the "not kept" line
    assert len(text) <= sandbox.HEAD_BYTES + 65_536 + sandbox.TAIL_BYTES + 100
    if not dropped:
        assert text == "".join(chunks)
    assert all(len(s) <= sandbox.CHUNK_BYTES + 100 for s in seen)


@FAST
@given(
    content=st.one_of(
        st.binary(max_size=300),
        st.lists(
            st.one_of(
                st.dictionaries(st.text(max_size=8), REPORT_VALUES, max_size=3).map(json.dumps),
                st.sampled_from(
                    [
                        "NaN",
                        "[1e999]",
                        '{"a": Infinity}',
                        "{",
                        "\x00",
                        '"\\ud800"',
                        "9" * 5000,
                        "",
                        "[" * 100_000,
                        '{"a": ' * 5000,
                    ]
                ),
                TEXT,
            ),
            max_size=6,
        ).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
    )
)
def test_reading_the_files_a_learner_program_may_write(content):
    from tutor.exercises.sandbox import _read_error, _read_reports

    # a learner's program can write .reports.jsonl and .error.json itself (they are in its working directory)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "f.json"
        path.write_bytes(content)
        reports = _read_reports(path)
        # Only JSON objects on their own line count, and nothing else: every key came from one.
        objects = []
        for line in content.decode("utf-8", "replace").splitlines():
            try:
                item = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(item, dict):
                objects.append(item)
        assert set(reports) <= {k for item in objects for k in item}
        error = _read_error(path)
        assert isinstance(error, dict) and (not error or content.strip().startswith(b"{"))


# ============================================================================= instruments: --set values and controls


def _instruments():
    from tutor.instruments import REGISTRY

    return REGISTRY


RAW_SETTINGS = st.one_of(
    ANSWERS,
    st.booleans(),
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.sampled_from(["on", "OFF", " adam ", "1,024", "1_0", "65536", "0", "-1", "²", "٣"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), raw=RAW_SETTINGS)
def test_control_parse_gives_an_option_or_a_settings_error(data, raw):
    from tutor.instruments import SettingsError

    inst = data.draw(st.sampled_from(sorted(_instruments().values(), key=lambda i: i.name)))
    control = data.draw(st.sampled_from(inst.controls))
    try:
        value = control.parse(raw)
    except SettingsError as e:
        assert str(e).startswith(control.name)
        assert len(str(e)) <= FEEDBACK_LIMIT  # `--set batch=<100k chars>` is quoted cut short
        return
    if control.kind == "stepper":  # a whole number, or a float for a decimal stepper (a price)
        assert isinstance(value, float if control.decimal else int) and not isinstance(value, bool)
        assert control.options[0] <= value <= control.options[-1]
    else:
        assert value in control.options
    assert isinstance(control.label_of(value), str)
    assert control.step(value, 1) is not None and control.step(value, -1) is not None


@FAST
@given(data=st.data())
def test_instrument_settings_compute_and_render_for_any_given_values(data):
    from rich.console import Console

    from tutor.instruments import Context, SettingsError
    from tutor.instruments.render import reading

    inst = data.draw(st.sampled_from(sorted(_instruments().values(), key=lambda i: i.name)))
    names = [c.name for c in inst.controls] + ["", "nope", "\x00"]
    given_ = data.draw(
        st.dictionaries(
            st.sampled_from(names),
            st.one_of(RAW_SETTINGS, st.sampled_from([o for c in inst.controls for o in c.options])),
            max_size=4,
        )
    )
    try:
        chosen = inst.settings(given_)
    except SettingsError:
        return
    ctx = Context(
        device_name=data.draw(st.one_of(st.none(), TEXT)),
        device_memory=data.draw(st.one_of(st.none(), st.integers(0, 2**50))),
    )
    r = inst.compute(chosen, ctx)
    assert r.level in ("ok", "warning", "error") and isinstance(r.verdict, str)
    json.dumps(r.outputs)
    assert isinstance(inst.describe(chosen), str)
    Console(file=io.StringIO(), width=100).print(reading(r, 98, math=True))


# Any value: nan, inf, 1e999 as text, ints past float range; shares and MFU also small ones (the usual case).
_MEASURED_METRICS = st.one_of(
    st.none(), st.booleans(), INTS, st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(NASTY), TEXT
)
_SHARES = st.one_of(_MEASURED_METRICS, st.integers(-10, 10), st.floats(min_value=-10, max_value=10))
_PIPELINE_KEYS = ["mfu", "data_wait_share", "copy_share", "forward_share", "backward_share", "optimizer_share"]


@FAST
@given(
    ledger_metrics=st.dictionaries(
        st.sampled_from(["parameters", "activation_bytes", "x"]), _MEASURED_METRICS, max_size=3
    ),
    pipeline_metrics=st.dictionaries(st.sampled_from(_PIPELINE_KEYS), _SHARES, max_size=6),
    pipeline_text=st.dictionaries(
        st.sampled_from(
            [
                "peak_tflops",
                "achieved_tflops",
                "model",
                "batch_size",
                "dtype",
                "data_path",
                "peak_source",
                "device_name",
            ]
        ),
        _MEASURED_METRICS,
        max_size=4,
    ),
    params=st.dictionaries(
        st.sampled_from(["width", "layers", "batch_size", "seed"]),
        st.one_of(st.integers(-5, 10**6), st.sampled_from(NASTY), st.none()),
        max_size=3,
    ),
    device=st.one_of(st.none(), st.dictionaries(st.sampled_from(["name", "kind"]), st.one_of(TEXT, st.integers()))),
)
def test_instruments_on_stored_runs_of_any_shape(
    progress_db, ledger_metrics, pipeline_metrics, pipeline_text, params, device
):
    """instrument_context: 'a stored run that does not make sense (an old or hand-edited database) is left out:
    the instrument then says there is no measurement yet, never shows a traceback'."""
    from rich.console import Console

    from tutor.course.ledger import instrument_context
    from tutor.instruments.render import reading

    progress_db.record_run(
        experiment="memory-ledger", params=params, device=device or {}, metrics=ledger_metrics, status="finished"
    )
    progress_db.record_run(
        experiment="pipeline-breakdown",
        params=params,
        device=device or {},
        metrics={**pipeline_text, **pipeline_metrics},
        status="finished",
    )
    ctx = instrument_context(progress_db)
    for name, settings_ in (("memory-ledger", {"model": "mine"}), ("pipeline", {"profile": "measured"})):
        inst = _instruments()[name]
        r = inst.compute(inst.settings(settings_), ctx)
        out = io.StringIO()
        Console(file=out, width=100).print(reading(r, 98, math=True))
        assert len(out.getvalue()) <= _READING_LIMIT, f"a reading of {len(out.getvalue())} characters"


_READING_LIMIT = 20_000  # an instrument's reading drawn 100 columns wide, whatever a stored run holds


def _reading_of_a_stored_run(progress, experiment: str, metrics: dict):
    """(the context instruments see, the reading drawn) after one stored run of `experiment`."""
    from rich.console import Console

    from tutor.course.ledger import instrument_context
    from tutor.instruments.render import reading

    progress.record_run(experiment=experiment, params={}, device={}, metrics=metrics, status="finished")
    name, settings_ = {
        "memory-ledger": ("memory-ledger", {"model": "mine"}),
        "pipeline-breakdown": ("pipeline", {"profile": "measured"}),
    }[experiment]
    inst = _instruments()[name]
    ctx = instrument_context(progress)
    r = inst.compute(inst.settings(settings_), ctx)
    out = io.StringIO()
    Console(file=out, width=100).print(reading(r, 98, math=True))
    return ctx, out.getvalue()


@pytest.mark.parametrize(
    "experiment, metrics",
    [
        ("memory-ledger", {"parameters": 100, "activation_bytes": math.inf}),
        ("memory-ledger", {"parameters": 10**400, "activation_bytes": 5}),
        ("pipeline-breakdown", {"mfu": 0.5, "data_wait_share": math.nan}),
        ("pipeline-breakdown", {"mfu": 0.5, "forward_share": math.inf}),
        ("pipeline-breakdown", {"mfu": 10**400}),
    ],
    ids=["activation-inf", "parameters-huge-int", "share-nan", "share-inf", "mfu-huge-int"],
)
def test_instruments_leave_out_a_stored_run_with_non_finite_or_huge_metrics(progress_db, experiment, metrics):
    """Was: inf/nan or 10**400 in a stored run raised OverflowError/ValueError (memory_ledger.compute -> base.gb
    -> _sig3 log10(inf); float(10**400) in memory_ledger/pipeline._num; render._bar_line round(nan))."""
    ctx, shown = _reading_of_a_stored_run(progress_db, experiment, metrics)
    if experiment == "memory-ledger":
        assert ctx.my_model is None
    else:
        bad = {k for k, v in metrics.items() if not (isinstance(v, float) and math.isfinite(v))}
        assert ctx.my_pipeline is not None and not bad & set(ctx.my_pipeline)
    assert len(shown) <= _READING_LIMIT


@pytest.mark.parametrize(
    "metrics",
    [{"mfu": -1e15}, {"mfu": 0.5, "data_wait_share": -1e15, "copy_share": 2e15}, {"mfu": -3.7e9}],
    ids=["negative-mfu", "huge-shares", "found-by-fuzzing"],
)
def test_instruments_draw_a_stored_run_with_out_of_range_shares_within_the_bar(progress_db, metrics):
    """Was: tutor/instruments/render.py gauge()/_bar_line() drew cells in proportion to an unclamped value:
    a stored mfu of -1e15 raised MemoryError, -3.7e9 hung the process until the OOM killer."""
    _, shown = _reading_of_a_stored_run(progress_db, "pipeline-breakdown", metrics)
    assert len(shown) <= _READING_LIMIT


# ============================================================================= command line: --set, --answer, --device


@settings(max_examples=200, deadline=None)
@given(
    text=st.one_of(
        ANSWERS,
        st.sampled_from(
            ["0x" + "f" * 5000, "0b2", "0o9", "'", "''", '"x"', ".NaN", "+.inf", "~", "1" * 4301, "1e309", "0_1"]
        ),
    )
)
def test_parse_value(text):
    from tutor.cli.run import parse_value

    value = parse_value(text)
    assert value is None or isinstance(value, (bool, int, float, str))


@FAST
@given(
    items=st.lists(
        st.one_of(
            ANSWERS,
            st.tuples(
                st.sampled_from(
                    ["epochs", "batch-size", "lr", "seed", "device", "amp", "", "nope", "__class__", "model_config"]
                ),
                ANSWERS,
            ).map("=".join),
        ),
        max_size=4,
    ),
    name=st.sampled_from(["train", "memory-ledger", "grad-accum", "crossover", "fp16-underflow", "batch-sweep"]),
)
def test_parse_sets_and_experiment_params(items, name):
    from pydantic import ValidationError

    from tutor import experiments
    from tutor.cli.context import UsageError
    from tutor.cli.run import _params_problem, parse_sets

    try:
        values = parse_sets(items)
    except UsageError as e:
        assert "--set expects KEY=VALUE" in str(e)
        return
    exp = experiments.get(name)
    try:
        exp.make_params(values)
    except ValidationError as e:
        assert isinstance(_params_problem(exp, e), str)


def _cli(*argv: str) -> tuple[int, str, str]:
    from tutor.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=st.one_of(ANSWERS, HUGE).filter(lambda a: a != "-"),  # "-" reads stdin
    step=st.sampled_from(["why-scale", "smallest", "guess"]),
)
def test_cli_check_answer(answer, step):
    code, out, err = _cli("--lessons-dir", str(DATA), "check", FIXTURE_LESSON, step, "--json", f"--answer={answer}")
    if not answer.strip():
        assert code == 2 and "empty" in json.loads(out)["error"], err  # bad input, said so
        return
    assert code == 0, err
    verdict = json.loads(out)
    assert isinstance(verdict["correct"], bool) and isinstance(verdict["feedback"], str)
    assert len(verdict["feedback"]) <= FEEDBACK_LIMIT


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    answer=ANSWERS.filter(lambda a: a != "-"),
    step=st.sampled_from(["smallest", "guess"]),
    metrics=st.dictionaries(
        st.sampled_from(["fp16_smallest_subnormal", "flushed_to_zero"]), MEASURED, min_size=1, max_size=2
    ),
)
def test_cli_check_against_a_recorded_run_with_any_metrics(answer, step, metrics):
    from tutor.course.progress import Progress

    with Progress() as progress:  # GPUTUTOR_HOME is this test's tmp dir (conftest)
        progress.record_run(experiment="fp16-underflow", params={}, device={}, metrics=metrics, status="finished")
    code, out, err = _cli("--lessons-dir", str(DATA), "check", FIXTURE_LESSON, step, "--json", f"--answer={answer}")
    assert code == (0 if answer.strip() else 2), err
    verdict = json.loads(out)
    if code == 2:
        return
    assert isinstance(verdict["feedback"], str) and len(verdict["feedback"]) <= FEEDBACK_LIMIT
    assert UNCAUGHT not in verdict["feedback"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(["memory-ledger", "pipeline"]),
    items=st.lists(
        st.one_of(
            ANSWERS,
            st.tuples(
                st.sampled_from(
                    [
                        "model",
                        "optimizer",
                        "precision",
                        "batch",
                        "checkpointing",
                        "budget",
                        "prefetch",
                        "profile",
                        " batch ",
                        "",
                        "nope",
                    ]
                ),
                RAW_SETTINGS.map(str),
            ).map("=".join),
        ),
        max_size=4,
    ),
)
def test_cli_instrument_set(name, items):
    assume(not any(re.search(r"budget\s*=\s*this\s*$", i.strip().lower()) for i in items))  # loads torch: slow
    code, out, err = _cli("instrument", name, "--json", *[f"--set={i}" for i in items])
    assert code in (0, 2), err
    shown = json.loads(out)
    if code == 0:
        assert shown["instrument"] == name and isinstance(shown["verdict"], str)
    else:
        assert isinstance(shown["error"], str)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    requested=st.one_of(
        st.none(),
        ANSWERS,
        st.sampled_from(
            ["cpu", "CUDA", "cuda:1", "cuda:", "mps", "auto", "cuda:99999999999999999999", " cpu ", "cpu:0"]
        ),
    )
)
def test_device_resolve(requested, monkeypatch_available):
    from tutor.experiments import devices

    try:
        d = devices.resolve(requested)
    except devices.DeviceError as e:
        assert str(e)
        return
    assert d in devices.available()


@pytest.fixture
def monkeypatch_available(monkeypatch):
    """resolve() without importing torch: this machine as one CPU and one CUDA GPU."""
    from tutor.experiments import devices

    found = (devices.Device("cuda", 0, "GPU"), devices.Device("cpu", None, "CPU"))
    monkeypatch.setattr(devices, "available", lambda: found)
    monkeypatch.setattr(devices, "with_free_memory", lambda dev: dev)  # it asks torch.cuda what the card has free


@FAST
@given(
    value=st.one_of(
        ANSWERS.filter(lambda s: "\x00" not in s),  # the environment cannot hold NUL
        st.sampled_from(["2048", " 512 ", "0", "٣", "²", "1" * 4301]),
    )
)
def test_engine_memory_budget_from_the_environment(value):
    from tutor.experiments import engine

    with _env(engine.MEMORY_ENV, value):
        budget = engine._run_budget()
    assert budget is None or (isinstance(budget, int) and budget > 0)


@contextlib.contextmanager
def _env(name: str, value: str):
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


@pytest.mark.parametrize("value", ["²", "1" * 4301], ids=["superscript-two", "4301-digits"])
def test_engine_memory_budget_ignores_a_digit_string_int_cannot_read(value):
    """Was: tutor/experiments/engine.py:_run_budget did int(value) after value.isdigit(): '²' or 4301 digits raised
    ValueError outside the run's try in _serve, so the experiment process died."""
    from tutor.experiments import engine

    with _env(engine.MEMORY_ENV, value):
        assert engine._run_budget() is None


# ============================================================================= settings.toml


def _load_settings(content: bytes):
    from tutor import settings as user_settings

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "settings.toml"
        path.write_bytes(content)
        return user_settings.load(path)


SETTINGS_DIRS = st.lists(
    st.one_of(TEXT, st.sampled_from([*NASTY, "~nosuchuser-gpututor/x", "~", "a" * 300])), max_size=3
)


@FAST
@given(
    content=st.one_of(
        st.binary(max_size=300),
        TEXT.map(lambda s: s.encode("utf-8")),
        SETTINGS_DIRS.map(lambda dirs: f"lessons_dirs = {json.dumps(dirs, ensure_ascii=False)}\n".encode()),
        st.tuples(
            st.sampled_from(["lessons_dirs", "lessons_dir", "x", '"\\u0000"']),
            st.sampled_from(
                [
                    "1",
                    "[1]",
                    "nan",
                    "inf",
                    "1e999",
                    "'a'",
                    "{a = 1}",
                    "true",
                    "1979-05-27",
                    "[" * 50 + "]" * 50,
                    "[" * 1000,
                    "9" * 4000,
                    "9" * 4301,
                ]
            ),
        ).map(lambda kv: f"{kv[0]} = {kv[1]}".encode()),
    )
)
def test_settings_file_of_any_content(content):
    s = _load_settings(content)
    # a broken file is ignored whole; a directory that is no usable path is skipped alone
    assert s.problem is None or (isinstance(s.problem, str) and s.problem.endswith(("settings ignored", "skipped")))
    assert all(isinstance(d, Path) for d in s.lessons_dirs)
    if s.problem and s.problem.endswith("settings ignored"):
        assert s.lessons_dirs == []


@pytest.mark.parametrize(
    "content, problem",
    [
        ('lessons_dirs = ["a\\u0000b"]', "not a usable path"),
        ('lessons_dirs = ["~nosuchuser-gpututor/x"]', "not a usable path"),
        ("a = " + "[" * 1000, "not valid TOML"),
        ("a = " + "9" * 4301, "not valid TOML"),
    ],
    ids=["nul", "tilde-user", "deep", "long-int"],
)
def test_settings_file_that_used_to_escape_the_error_handling_is_reported(content, problem):
    """Was: tutor/settings.py:load caught only TOMLDecodeError/ValidationError; a NUL or '~nosuchuser' in a
    directory, '[' * 1000 or a 4301-digit int raised, and every gpututor command stopped 'unexpected error'."""
    s = _load_settings(content.encode())
    assert s.problem and problem in s.problem
    assert s.lessons_dirs == []


def test_a_settings_dir_name_too_long_for_the_filesystem_is_skipped_with_a_warning():
    """Was: tutor/cli.py:_context called Path.is_dir() on each lessons_dirs entry; a 300-character name
    raised OSError (ENAMETOOLONG) and every command failed 'unexpected error'."""
    home = Path(os.environ["GPUTUTOR_HOME"])
    (home / "settings.toml").write_text(f'lessons_dirs = ["{"a" * 300}"]\n', encoding="utf-8")
    code, _, err = _cli("schema")
    assert code == 0, err
    assert "lessons_dirs" in err and "(skipped)" in err and "unexpected error" not in err


# ============================================================================= lesson loader: huge and hostile files


def _loads_or_positioned_error(text: str, path: str = "fuzz.yaml") -> None:
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_text

    try:
        load_text(text, path)
    except LessonError as e:
        assert e.issues
        for issue in e.issues:
            assert issue.line >= 1 and issue.col >= 1 and issue.message


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    chunk=st.one_of(
        st.text(min_size=1, max_size=12), st.sampled_from([n for n in NASTY if n] + ["[", "- ", "? ", "{a: ", "1_000"])
    )
)
def test_lesson_loader_on_huge_text(chunk):
    _loads_or_positioned_error(chunk * (100_000 // len(chunk) + 1))


_VALID = (DATA / "valid.yaml").read_text(encoding="utf-8")
_SCALARS = re.compile(r"(?m)(?<=: )[^\n\[{]+$")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_lesson_loader_with_hostile_values_in_a_valid_lesson(data):
    spots = _SCALARS.findall(_VALID)
    i = data.draw(st.integers(0, len(spots) - 1))
    value = data.draw(st.one_of(st.sampled_from(NASTY), TEXT))
    quoted = data.draw(st.booleans())
    new = json.dumps(value) if quoted else value
    matches = list(_SCALARS.finditer(_VALID))
    m = matches[i]
    _loads_or_positioned_error(_VALID[: m.start()] + new + _VALID[m.end() :])


@FAST
@given(
    content=st.one_of(
        st.binary(max_size=400),
        st.sampled_from(
            [
                b"\xef\xbb\xbf" + _VALID.encode(),
                b"\xff\xfe" + _VALID.encode("utf-16-le"),
                _VALID.encode("utf-16"),
                _VALID.encode().replace(b"fixture", b"fix\xffture"),
                _VALID.encode().replace(b"intro", b"in\x00tro"),
                b"\x00" * 1000,
                b"",
            ]
        ),
    )
)
@example(content=b"[" * 30_000)  # nested deep: once each (a second apiece), not drawn again and again
@example(content=b"- " * 30_000)
def test_lesson_loader_on_arbitrary_file_bytes(content):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_file

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "lesson.yaml"
        path.write_bytes(content)
        try:
            load_file(path)
        except LessonError as e:
            assert e.issues and all(i.line >= 1 and i.col >= 1 and i.message for i in e.issues)


@pytest.mark.parametrize("value", ["9" * 4301, "1_000" * 20_000], ids=["4301-digits", "underscored"])
def test_lesson_with_an_integer_of_more_than_4300_digits_loads_or_gives_a_positioned_error(value):
    """Was: tutor/course/lesson.py:_scalar caught only YAMLError; PyYAML's int constructor raises ValueError past
    4300 digits ('x: 999...9', or '1_000' * 20000), so load_text raised instead of a LessonError."""
    _loads_or_positioned_error(f"x: {value}")


# ---------------------------------------------------------------- behaviour judges
# The summary they read is a file in the learner's working directory: a program can write
# anything there. Every judge and the function check take whatever JSON it holds.

JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), INTS, st.floats(allow_nan=True, allow_infinity=True), TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "models",
                    "devices",
                    "timings",
                    "saves",
                    "loads",
                    "probes",
                    "answers",
                    "train_calls",
                    "autocast",
                    "start_line",
                    "stop_line",
                    "with_work",
                    "unsynced_stops",
                    "scalers",
                    "optimizers",
                    "criteria",
                    "backward",
                    "comparisons",
                    "cuda_asked",
                    "x",
                ]
            ),
            children,
            max_size=4,
        ),
    ),
    max_leaves=12,
)


@FAST
@given(
    observed=st.dictionaries(
        st.sampled_from(
            [
                "models",
                "timings",
                "saves",
                "loads",
                "scalers",
                "optimizers",
                "criteria",
                "backward",
                "comparisons",
                "autocast_blocks",
                "cuda_asked",
                "mps_asked",
                "tensor_moves",
                "probes",
            ]
        ),
        JSONISH,
        max_size=6,
    ),
    stopped=st.booleans(),
    message=st.one_of(st.none(), TEXT),
)
def test_behaviour_judges_take_any_summary(observed, stopped, message):
    from tutor.exercises.behaviour import BEHAVIOUR_JUDGES, Context, judge

    ctx = Context(observed, "x = 1\n", "RuntimeError" if message else None, message, stopped)
    for name in BEHAVIOUR_JUDGES:
        verdict = judge(name, ctx)
        assert isinstance(verdict.passed, bool) and isinstance(verdict.cause, str)


@FAST
@given(probes=JSONISH)
def test_function_check_takes_any_probe_result(probes):
    from tutor.course.lesson import FunctionRequirement
    from tutor.exercises.grader import _check_function
    from tutor.exercises.sandbox import SandboxResult

    for probe in ("moves_batch_to_device", "picks_device"):
        req = FunctionRequirement(type="function", id="fn", name="f", probe=probe, feedback="Define f.")
        ok, feedback = _check_function(req, {"probes": probes}, SandboxResult(exit_code=0))
        assert isinstance(ok, bool) and isinstance(feedback, str)
