"""The lesson loader's error reporting: every problem as path:line:col: message, in file order."""

from __future__ import annotations

from pathlib import Path

import pytest

from tutor.course.catalog import builtin_lessons_dir, discover
from tutor.course.lesson import CheckStep, Lesson, LessonError, PredictStep, RunStep
from tutor.course.loader import load_file, load_text

DATA = Path(__file__).parents[1] / "data"
LINT = DATA / "lint"


def expected_lint() -> dict[str, list[str]]:
    """tests/data/lint/expected.txt: 'file.yaml:line:col: message' per line -> {file: ['line:col: message']}."""
    out: dict[str, list[str]] = {}
    for line in (LINT / "expected.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, rest = line.partition(":")
            out.setdefault(name, []).append(rest)
    return out


EXPECTED = expected_lint()


def issues_of(path: Path) -> list[str]:
    with pytest.raises(LessonError) as info:
        load_file(path)
    return [str(i) for i in info.value.issues]


def test_every_lint_fixture_is_covered():
    assert sorted(p.name for p in LINT.glob("*.yaml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_errors_exact(name: str):
    path = LINT / name
    assert issues_of(path) == [f"{path}:{e}" for e in EXPECTED[name]]


def test_valid_fixture_loads():
    lesson = load_file(DATA / "valid.yaml")
    assert lesson.id == "fixture-valid"
    assert [s.kind for s in lesson.steps] == ["read", "predict", "run", "check", "check"]
    assert isinstance(lesson.steps[1], PredictStep) and lesson.run_after(1).id == "underflow"


def test_builtin_lessons_load():
    files = sorted(builtin_lessons_dir().glob("*.yaml"))
    assert len(files) >= 6, "the built-in lessons are missing"
    for path in files:
        lesson = load_file(path)
        assert isinstance(lesson, Lesson) and lesson.steps


def test_every_builtin_exercise_requirement_has_a_title():
    """The learner reads each requirement by its title in the results ("Each rank trains on its
    own share of the data"), not by its id ("each-rank-its-share")."""
    from tutor.course.lesson import ExerciseStep

    untitled = [
        (path.name, step.id, req.id)
        for path in sorted(builtin_lessons_dir().glob("*.yaml"))
        for step in load_file(path).steps
        if isinstance(step, ExerciseStep)
        for req in step.requirements
        if not req.title.strip()
    ]
    assert untitled == []


def test_binary_file(tmp_path: Path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert issues_of(path) == [f"{path}:1:1: binary file: a lesson must be UTF-8 YAML text"]


def test_non_utf8_points_at_the_byte(tmp_path: Path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("id: x\ntitle: T\nsteps:\n  - id: a\n    kind: read\n    body: café\n".encode("latin-1"))
    assert issues_of(path) == [f"{path}:6:14: not UTF-8 text (byte 0xe9): save the lesson file as UTF-8"]


def test_utf8_bom_is_accepted(tmp_path: Path):
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + (DATA / "valid.yaml").read_bytes())
    assert load_file(path).id == "fixture-valid"


def test_missing_file_and_directory(tmp_path: Path):
    missing = tmp_path / "nope.yaml"
    assert issues_of(missing) == [f"{missing}:1:1: cannot read file: No such file or directory"]
    assert issues_of(tmp_path) == [f"{tmp_path}:1:1: is a directory, not a lesson file"]


def test_tabs_unterminated_quote_and_top_level_list():
    def only(text: str) -> str:
        with pytest.raises(LessonError) as info:
            load_text(text, "t.yaml")
        assert len(info.value.issues) == 1
        return str(info.value.issues[0])

    assert only("id: t\ntitle: T\nsteps:\n\t- id: a\n").startswith("t.yaml:4:1: YAML syntax:")
    assert "tabs cannot indent YAML" in only("id: t\ntitle: T\nsteps:\n\t- id: a\n")
    # the mistake is where the quote opens, not at the end of the file
    assert (
        only('id: x\ntitle: "unterminated\nsteps:\n') == "t.yaml:2:8: YAML syntax: this quoted string is never closed"
    )
    assert only("- a\n- b\n") == "t.yaml:1:1: a lesson file must be a mapping with id, title and steps"


def _only_issue(text: str) -> str:
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert len(info.value.issues) == 1, info.value.issues
    return str(info.value.issues[0])


CHECK_STEP = "id: t\ntitle: T\nsteps:\n  - id: q\n    kind: check\n    prompt: Why?\n"


def test_a_misaligned_line_is_said_in_plain_words_with_the_columns_it_could_start_at():
    # PyYAML: "while parsing a block collection expected <block end>, but found '?'"
    said = _only_issue(CHECK_STEP + "  hint: this\n    answer: {type: text}\n")
    assert said == (
        "t.yaml:7:3: YAML syntax: bad indentation: this line starts at column 3, where the '- ' items of "
        "a list start: begin a new item with '- ', or line it up with the keys above it (columns 1 or 5)"
    )
    # "... but found '<block mapping start>'"
    said = _only_issue(CHECK_STEP + "   hint: this\n    answer: {type: text}\n")
    assert said == (
        "t.yaml:7:4: YAML syntax: bad indentation: this line starts at column 4, which lines up with no "
        "line above it (they start at columns 1, 3 or 5): line it up with the keys of the mapping it "
        "belongs to, or with the '- ' of its list"
    )
    # "mapping values are not allowed here": a key indented under the text of the key above
    said = _only_issue(CHECK_STEP + "      hint: this\n    answer: {type: text}\n")
    assert said.startswith(
        "t.yaml:7:7: YAML syntax: bad indentation: this line starts at column 7, deeper than the "
        "key above it (column 5)"
    )
    for text in (CHECK_STEP + "  hint: this\n", CHECK_STEP + "   hint: this\n", CHECK_STEP + "      hint: this\n"):
        assert "found" not in _only_issue(text) and "block" not in _only_issue(text)
    # a ': ' in a value on its own line is not an indentation problem
    assert "put a value that contains ': ' in quotes" in _only_issue(CHECK_STEP + "    hint: Note: this\n")


def test_a_list_under_hint_asks_whether_hints_was_meant():
    said = _only_issue(
        CHECK_STEP + "    hint:\n      - Look at the dtype.\n      - Then the scale.\n"
        "    answer: {type: number, value: 1, abs_tolerance: 0}\n"
    )
    assert said == (
        "t.yaml:7:5: step 'q': hint is one text, and this is a list (did you mean hints: "
        "['Look at the dtype.', 'Then the scale.']? a learner sees them one at a time)"
    )
    said = _only_issue(
        CHECK_STEP + "    hints: Look at the dtype.\n    answer: {type: number, value: 1, abs_tolerance: 0}\n"
    )
    assert said == (
        "t.yaml:7:5: step 'q': hints is a list, shown one at a time: write hints: [...] with each hint "
        "an item (or hint: for one)"
    )


def test_duplicate_yaml_keys_are_reported():
    text = "id: d\ntitle: D\nsteps:\n  - id: a\n    kind: read\n    body: one\n    body: two\n"
    with pytest.raises(LessonError) as info:
        load_text(text, "d.yaml")
    assert [str(i) for i in info.value.issues] == [
        "d.yaml:7:5: duplicate key 'body' (first at line 6); YAML keeps only the last"
    ]


def test_unknown_kinds_and_types_suggest_and_point_at_the_value():
    text = """id: k
title: K
steps:
  - id: a
    kind: reed
  - id: b
    kind: predict
    prompt: p
    answer: {type: nmber}
  - body: no kind
"""
    with pytest.raises(LessonError) as info:
        load_text(text, "k.yaml")
    assert [str(i) for i in info.value.issues] == [
        "k.yaml:5:11: step 'a': unknown step kind 'reed' (did you mean 'read'?); "
        "expected one of read, predict, run, check, exercise, instrument",
        "k.yaml:9:20: step 'b' answer: unknown answer type 'nmber' (did you mean 'number'?); "
        "expected one of choice, number, text",
        "k.yaml:10:5: steps[2]: missing key 'kind' (one of read, predict, run, check, exercise, instrument)",
    ]


def test_value_errors_point_at_values_and_name_the_step():
    text = """id: Bad_Id
title: T
order: first
steps:
  - id: c
    kind: check
    prompt: p
    answer:
      type: choice
      options: ["only one"]
    verify: {experiment: crossover, params: {model: huge}}
"""
    with pytest.raises(LessonError) as info:
        load_text(text, "v.yaml")
    assert [str(i) for i in info.value.issues] == [
        "v.yaml:1:5: id: ids use lowercase letters, digits and dashes, like 'check-1' (got 'Bad_Id')",
        "v.yaml:3:8: order: Input should be a valid integer, unable to parse string as an integer (got 'first')",
        "v.yaml:10:16: step 'c' answer.options: List should have at least 2 items, not 1",
        "v.yaml:11:53: experiment 'crossover' parameter 'model': Input should be 'tiny', 'mlp' or 'both' (got 'huge')",
    ]


def test_schema_and_experiment_errors_reported_together_in_file_order():
    text = """id: t
title: T
steps:
  - id: a
    kind: run
    experiment: trian
  - id: b
    kind: read
    bdy: x
"""
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    lines = [(i.line, i.col) for i in info.value.issues]
    assert lines == [(6, 17), (9, 5)]
    assert "did you mean 'train'" in info.value.issues[0].message
    assert info.value.issues[1].message == "step 'b': unknown key 'bdy' (did you mean 'body'?)"


ONLY_ON = """id: t
title: T
steps:
  - id: ex
    kind: exercise
    starter: s
    solution: s
    requirements:
      - {type: output, id: o, pattern: a, feedback: f}
    mistakes:
      - name: m
        fails: o
        code: x
        only_on: %s
"""


def test_a_mistake_names_the_device_kinds_where_it_is_one():
    mistake = load_text(ONLY_ON % "[cpu, mps]", "t.yaml").steps[0].mistakes[0]
    assert mistake.only_on == ["cpu", "mps"]
    assert mistake.skipped_on("cpu") is None
    assert mistake.skipped_on("cuda") == "not a mistake on cuda (only_on: cpu, mps): not run"
    with pytest.raises(LessonError) as info:
        load_text(ONLY_ON % "[cpu, gpu]", "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        "t.yaml:14:24: step 'ex' mistakes[0].only_on[1]: Input should be 'cuda', 'mps' or 'cpu' (got 'gpu')"
    ]


def test_alias_bomb_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for n in "bcdefgh":
        prev = chr(ord(n) - 1)
        bomb += f"{n}: &{n} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    with pytest.raises(LessonError) as info:
        load_text(bomb, "bomb.yaml")
    assert "too large" in info.value.issues[0].message


def test_steps_and_models_from_a_valid_lesson():
    lesson = load_file(DATA / "valid.yaml")
    run = lesson.step("underflow")
    assert isinstance(run, RunStep) and run.params == {"gradient": 1e-8}
    check = lesson.step("why-scale")
    assert isinstance(check, CheckStep) and check.verify is not None
    assert check.verify.experiment == "fp16-underflow"


def test_discover_lists_broken_files_and_overrides(tmp_path: Path):
    extra = tmp_path / "lessons"
    extra.mkdir()
    (extra / "good.yaml").write_text((DATA / "valid.yaml").read_text())
    (extra / "broken.yml").write_text((LINT / "unknown_key.yaml").read_text())
    catalog = discover([extra])
    assert "fixture-valid" in [x.lesson.id for x in catalog.lessons]
    assert [p.name for p, _ in catalog.broken] == ["broken.yml"]
    assert "unknown key 'promt'" in str(catalog.broken[0][1])
    with pytest.raises(KeyError):
        catalog.get("no-such-lesson")


def test_two_files_of_one_folder_with_one_id_keep_the_first_and_say_so(tmp_path: Path):
    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir(), two.mkdir()
    (one / "x.yaml").write_text((DATA / "valid.yaml").read_text())
    (one / "y.yaml").write_text((DATA / "valid.yaml").read_text().replace("A valid fixture lesson", "Second"))
    catalog = discover([one])
    assert catalog.get("fixture-valid").lesson.title == "A valid fixture lesson"
    assert [p for p, _ in catalog.broken] == [one / "y.yaml"]
    assert f"duplicate lesson id 'fixture-valid' (also in {one / 'x.yaml'})" in str(catalog.broken[0][1])
    # a later folder overrides an earlier one (settings' dirs, then --lessons-dir), and a built-in lesson
    (one / "y.yaml").unlink()
    (two / "z.yaml").write_text((DATA / "valid.yaml").read_text().replace("A valid fixture lesson", "Later"))
    catalog = discover([one, two])
    assert catalog.get("fixture-valid").lesson.title == "Later" and not catalog.broken
    (one / "x.yaml").write_text(
        (builtin_lessons_dir() / "devices.yaml").read_text().replace("title:", "title: Mine", 1)
    )
    assert discover([one]).get("devices").path == one / "x.yaml"


def test_lint_reports_a_rubric_regex_that_cannot_compile(tmp_path):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_file

    path = tmp_path / "bad-rubric.yaml"
    path.write_text(
        "id: bad-rubric\ntitle: Bad rubric\nsteps:\n  - id: c\n    kind: check\n    prompt: Why?\n"
        "    answer:\n      type: text\n      rubric:\n        require:\n          - name: x\n"
        '            any: ["re:(unclosed"]\n',
        encoding="utf-8",
    )
    with pytest.raises(LessonError) as info:
        load_file(path)
    (issue,) = info.value.issues
    assert (issue.line, issue.col) == (10, 9)
    assert "invalid regex" in issue.message and "'c'" in issue.message


# Whatever an instructor's file holds, loading it gives LessonError issues with positions, never a crash.
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_YAMLISH = st.text(alphabet=st.sampled_from(list("abc:- \n\t[]{}'\"&*!|>#%@`,?0123456789")), max_size=300)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=300), _YAMLISH))
def test_any_text_loads_or_fails_with_positioned_issues(text):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_text

    try:
        load_text(text, "fuzz.yaml")
    except LessonError as e:
        assert e.issues
        for issue in e.issues:
            assert issue.path == "fuzz.yaml" and issue.line >= 1 and issue.col >= 1 and issue.message


def test_lint_reports_exercise_requirements_the_checker_cannot_run(tmp_path):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_file

    path = tmp_path / "bad-ex.yaml"
    path.write_text(
        "id: bad-ex\ntitle: Bad exercise\nsteps:\n  - id: ex\n    kind: exercise\n"
        '    starter: "x = 1"\n    solution: "x = 1"\n    requirements:\n'
        "      - {type: function, id: f, name: g, probe: nope, feedback: x}\n"
        '      - {type: source, id: s, pattern: "(unclosed", feedback: x}\n'
        '    mistakes:\n      - {name: m, code: "x", fails: missing}\n',
        encoding="utf-8",
    )
    with pytest.raises(LessonError) as info:
        load_file(path)
    found = [(i.line, i.col, i.message) for i in info.value.issues]
    # at the value that is wrong, not the start of its requirement
    assert found[0][:2] == (9, 49) and "unknown probe 'nope'; available: " in found[0][2]
    assert found[1][:2] == (10, 40) and "does not compile" in found[1][2]
    assert found[2][0] == 12 and "'missing'" in found[2][2]


def test_a_misspelt_behaviour_check_or_probe_gets_a_suggestion_at_its_value():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: ex\n    kind: exercise\n    starter: x = 1\n    solution: x = 1\n"
        "    requirements:\n      - type: behaviour\n        id: b\n        check: device_fallbak\n"
        "        feedback: f\n      - {type: function, id: p, name: g, probe: picks_devic, feedback: f}\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        "t.yaml:11:16: step 'ex' requirement 'b': unknown behaviour check 'device_fallbak' (did you mean "
        "'device_fallback'?)",
        "t.yaml:13:49: step 'ex' requirement 'p': unknown probe 'picks_devic' (did you mean 'picks_device'?)",
    ]


@pytest.mark.parametrize(
    "name, expected",
    [
        ("trian", "unknown experiment 'trian' (did you mean 'train'?)"),  # the likely fix, no list
        ("zzzz", "unknown experiment 'zzzz'; available: amp-benchmark, amp-compare, "),  # no close match: all
    ],
)
def test_unknown_experiment_names_the_fix(name, expected):
    text = f"id: x\ntitle: T\nsteps:\n  - id: r\n    kind: run\n    experiment: {name}\n"
    with pytest.raises(LessonError) as info:
        load_text(text, "u.yaml")
    message = str(info.value.issues[0])
    assert message.startswith(f"u.yaml:6:17: step 'r' {expected}") or expected in message
    assert ("available:" in message) is (name == "zzzz")


def test_lint_reports_an_error_requirement_pattern_that_cannot_compile(tmp_path):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_file

    head = (
        "id: bad-error\ntitle: Break it\nsteps:\n  - id: ex\n    kind: exercise\n"
        '    starter: "x = 1"\n    solution: "raise RuntimeError(\'boom\')"\n    requirements:\n'
    )
    path = tmp_path / "bad-error.yaml"
    path.write_text(
        head + '      - {type: error, id: e, error: RuntimeError, pattern: "(boom", feedback: x}\n', encoding="utf-8"
    )
    with pytest.raises(LessonError) as info:
        load_file(path)
    [issue] = info.value.issues
    assert issue.line == 9 and "does not compile" in issue.message

    path.write_text(head + "      - {type: eror, id: f, error: RuntimeError, feedback: x}\n", encoding="utf-8")
    with pytest.raises(LessonError) as info:
        load_file(path)
    [issue] = info.value.issues
    assert issue.line == 9 and "unknown requirement type 'eror' (did you mean 'error'?)" in issue.message
    assert issue.message.endswith(
        "expected one of output, source, report, file, function, behaviour, error, python, inspect"
    )


def test_an_error_requirement_may_accept_several_types(tmp_path):
    """CUDA asked for where there is none raises AssertionError or RuntimeError, by PyTorch build."""
    from tutor.course.lesson import ErrorRequirement, LessonError
    from tutor.course.loader import load_file

    head = (
        "id: either\ntitle: Break it\nsteps:\n  - id: ex\n    kind: exercise\n"
        '    starter: "x = 1"\n    solution: "raise RuntimeError(\'boom\')"\n    requirements:\n'
    )
    path = tmp_path / "either.yaml"
    path.write_text(head + "      - {type: error, id: e, error: [RuntimeError, AssertionError], feedback: x}\n")
    [req] = load_file(path).steps[0].requirements
    assert isinstance(req, ErrorRequirement) and req.errors == ("RuntimeError", "AssertionError")
    path.write_text(head + "      - {type: error, id: e, error: RuntimeError, feedback: x}\n")
    assert load_file(path).steps[0].requirements[0].errors == ("RuntimeError",)
    path.write_text(head + "      - {type: error, id: e, error: [], feedback: x}\n")
    with pytest.raises(LessonError):  # no type at all would accept nothing
        load_file(path)


def test_lint_reports_a_reference_or_example_its_own_rubric_grades_the_other_way(tmp_path):
    from tutor.course.lesson import LessonError
    from tutor.course.loader import load_file

    path = tmp_path / "self-contradicting.yaml"
    path.write_text(
        "id: sc\ntitle: Self-contradicting\nsteps:\n  - id: c\n    kind: check\n    prompt: Why scale?\n"
        "    answer:\n      type: text\n      reference: It makes training faster.\n      rubric:\n"
        "        require:\n          - {name: u, any: [underflow], missing: Say what happens to small values.}\n"
        '    examples:\n      right: ["small gradients underflow", "it is quicker"]\n'
        '      wrong: ["fp16 gradients underflow to zero"]\n',
        encoding="utf-8",
    )
    with pytest.raises(LessonError) as info:
        load_file(path)  # the TUI's load: the reference only
    assert [i.line for i in info.value.issues] == [9]
    with pytest.raises(LessonError) as info:
        load_file(path, grade_examples=True)  # lint's
    found = [(i.line, i.message) for i in info.value.issues]
    assert found == [
        (9, "step 'c': its reference answer fails its own rubric (Say what happens to small values.)"),
        (
            14,
            "step 'c': example right[1] 'it is quicker' is listed as right, but the rubric rejects it "
            "(Say what happens to small values.)",
        ),
        (
            15,
            "step 'c': example wrong[0] 'fp16 gradients underflow to zero' is listed as wrong, but the rubric "
            "accepts it",
        ),
    ]


def test_yaml_tags_are_refused_where_they_are_written():
    text = (
        "id: !!python/object:os.system x\ntitle: !custom T\nsummary: !!binary aGVsbG8=\n"
        "steps:\n  - {id: r, kind: read, body: hi}\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        f"t.yaml:{line}:{col}: YAML tag '{tag}' is not allowed: a lesson holds plain text, numbers, lists and mappings"
        for line, col, tag in [(1, 5, "!!python/object:os.system"), (2, 8, "!custom"), (3, 10, "!!binary")]
    ]


def test_a_date_or_yes_where_text_belongs_asks_for_quotes():
    text = "id: t\ntitle: T\nsteps:\n  - id: r\n    kind: read\n    title: yes\n    body: 2026-11-23\n"
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        "t.yaml:6:12: step 'r' title: this reads as true or false, not text: put it in quotes",
        "t.yaml:7:11: step 'r' body: this reads as a date, not text: put it in quotes",
    ]


def test_an_unquoted_off_where_a_parameter_wants_the_word_says_to_quote_it():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: r\n    kind: run\n    experiment: train\n    params: {amp: off}\n"
        "    tweak:\n      amp: [off, auto]\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    said = [str(i) for i in info.value.issues]
    assert said[0].startswith("t.yaml:7:19: experiment 'train' parameter 'amp': Input should be 'off'")
    assert said[1].startswith("t.yaml:9:13: step 'r' tweak 'amp': False: Input should be 'off'")
    assert all(line.endswith('YAML reads an unquoted off as false: write "off"') for line in said[:2])


def test_an_unknown_key_is_matched_against_the_keys_of_its_own_mapping():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: q\n    kind: check\n    prompt: Which?\n    answer:\n"
        "      type: choice\n      options:\n        - {text: a, corect: true}\n        - {text: b, colour: red}\n"
        "  - id: w\n    kind: check\n    prompt: Why?\n    answer:\n      type: text\n"
        "      reference: the gradients underflow\n      rubric:\n"
        "        require:\n          - {name: u, any: [underflow], mising: say underflow}\n"
        "        misconception:\n          - {name: m, any: [faster]}\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        # the typo is the error; that no option is correct follows from it and is not said again
        "t.yaml:10:21: step 'q' answer.options[0]: unknown key 'corect' (did you mean 'correct'?)",
        "t.yaml:11:21: step 'q' answer.options[1]: unknown key 'colour'; it takes: text, correct, feedback, min, max",
        "t.yaml:20:41: step 'w' answer.rubric.require[0]: unknown key 'mising' (did you mean 'missing'?)",
        # a key of the rubric, not 'concept', a key of steps
        "t.yaml:21:9: step 'w' answer.rubric: unknown key 'misconception' (did you mean 'misconceptions'?)",
    ]


def test_a_valid_step_s_requirements_are_checked_while_another_step_is_broken():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: r\n    kind: run\n    experiment: train\n    parms: {epochs: 1}\n"
        "  - id: ex\n    kind: exercise\n    starter: x = 1\n    solution: x = 1\n    requirements:\n"
        '      - {type: source, id: s, pattern: "(unclosed", feedback: f}\n'
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    said = [str(i) for i in info.value.issues]
    assert said[0].startswith("t.yaml:7:5: step 'r': unknown key 'parms' (did you mean 'params'?)")
    assert said[1].startswith("t.yaml:13:40: step 'ex' requirement 's': pattern does not compile")
    assert len(said) == 2


def test_a_number_predicted_with_options_that_have_no_range_is_an_error():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: guess\n    kind: predict\n    prompt: How many steps?\n"
        "    answer:\n      type: choice\n      options: [about 100, about 1000]\n    compare: steps\n"
        "  - id: r\n    kind: run\n    experiment: train\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        "t.yaml:9:7: step 'guess' compares the number 'steps' with options that have no `min`/`max`, so no "
        "measurement can land in one: give each option the range it stands for"
    ]
    # a text metric is matched by an option's text: no range needed
    load_text(text.replace("compare: steps", "compare: device").replace("[about 100, about 1000]", "[cpu, cuda]"))


UNIT_STEP = (
    "id: t\ntitle: T\nsteps:\n  - id: guess\n    kind: predict\n    prompt: P\n    compare: METRIC\n"
    "    unit: UNIT\n    answer: ANSWER\n  - {id: r, kind: run, experiment: data-bottleneck}\n"
)


def _unit_lesson(metric: str, unit: str, answer: str) -> str:
    return UNIT_STEP.replace("METRIC", metric).replace("UNIT", f'"{unit}"').replace("ANSWER", answer)


PERCENT_RANGES = "{type: choice, options: [{text: under 20%, min: 0, max: 20}, {text: 20% or more, min: 20}]}"


def test_a_predict_unit_that_reads_the_metric_as_the_registry_declares_it_loads():
    load_text(_unit_lesson("loader_wait_share", "%", PERCENT_RANGES))  # a share, read in percent
    load_text(_unit_lesson("loader_epoch_seconds", "s", "{type: number, unit: ms}"))  # converted s -> ms
    load_text(_unit_lesson("loader_epoch_seconds", "seconds", "{type: number, unit: s}"))  # the same unit's word
    load_text(
        _unit_lesson("resident_speedup", "", "{type: choice, options: [{text: a, min: 0, max: 1}, {text: b, min: 1}]}")
    )  # read as measured: no scale changes
    load_text(_unit_lesson("loader_wait_share", "", "{type: text}"))  # words: no number is read in a unit


def test_a_predict_unit_that_misreads_the_metric_is_an_error():
    def issue(metric: str, unit: str, answer: str) -> str:
        with pytest.raises(LessonError) as info:
            load_text(_unit_lesson(metric, unit, answer), "t.yaml")
        [found] = info.value.issues
        return str(found)

    assert issue("loader_wait_share", "", PERCENT_RANGES).startswith(
        "t.yaml:8:11: step 'guess': 'loader_wait_share' of experiment 'data-bottleneck' is a share from 0 to 1, "
        "shown in percent; with no unit"
    )
    assert issue("loader_epoch_seconds", "ms", "{type: number, unit: ms}") == (
        "t.yaml:8:11: step 'guess': 'loader_epoch_seconds' of experiment 'data-bottleneck' is measured in \"s\" "
        '(a duration in seconds, shown in ms below one second), and this step has unit "ms": write unit: "s", '
        "the unit the measurement is read in (the answer may use another of the same kind)"
    )
    assert issue("loader_epoch_seconds", "s", "{type: number, unit: GB}").endswith(
        'is read in "s", and the answer\'s unit "GB" is not one it converts to: give the answer a unit of the '
        "same kind (time)"
    )


def test_a_rule_across_keys_points_at_the_later_key_it_names():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: q\n    kind: check\n    prompt: P\n    hint: a\n    hints: [b, c]\n"
        "    answer: {type: number, value: 1}\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    assert [str(i) for i in info.value.issues] == [
        "t.yaml:8:5: step 'q': give `hints` (a list, shown one at a time) or `hint`, not both"
    ]


def test_utf16_is_named(tmp_path: Path):
    path = tmp_path / "u.yaml"
    path.write_bytes("id: x\n".encode("utf-16"))
    assert issues_of(path) == [f"{path}:1:1: UTF-16 text: save the lesson file as UTF-8"]


# ------------------------------------------------------------------ warnings: the lesson loads

NUMBER_CHECK = """\
id: counting
title: Counting
steps:
  - id: steps
    kind: check
    prompt: How many optimizer steps?
    answer:
      type: number
      value: 235
      ranges:
        - min: 234
          max: 234
          feedback: Off by one.
        - min: 400
          feedback: That counts micro-batches.
"""


def test_a_default_tolerance_on_a_count_is_a_warning_with_the_accepted_interval():
    from tutor.course.loader import lint_text

    lesson, warnings = lint_text(NUMBER_CHECK, "count.yaml")
    assert lesson.id == "counting"  # a warning does not stop the lesson loading
    assert all(w.severity == "warning" for w in warnings)
    said = [str(w) for w in warnings]
    assert said[0].startswith("count.yaml:9:14: warning: step 'steps': no tolerance given")
    assert "211.5 to 258.5" in said[0] and "abs_tolerance: 0" in said[0]
    assert said[1].startswith("count.yaml:11:11: warning: step 'steps': range 1 (234..234) is never reached")
    assert len(said) == 2  # the band at 400 and above is reached


def test_an_exact_count_lints_clean():
    from tutor.course.loader import lint_text

    _, warnings = lint_text(NUMBER_CHECK.replace("      value: 235\n", "      value: 235\n      abs_tolerance: 0\n"))
    assert warnings == []


def test_a_band_the_tolerance_partly_swallows_is_a_warning():
    from tutor.course.loader import lint_text

    text = (
        NUMBER_CHECK.replace("value: 235", "value: 2.5\n      tolerance: 0.2")
        .replace("min: 234", "min: 1.5")
        .replace("max: 234", "max: 2.1")
    )
    _, warnings = lint_text(text)
    (warning,) = warnings
    assert (
        "range 1 (1.5..2.1) overlaps the answers graded right (2 to 3, tolerance 0.2 (20% relative) of 2.5): "
        "from 2 to 2.1 its feedback is never shown" in warning.message
    )


def test_every_builtin_lesson_lints_without_warnings():
    from tutor.course.loader import lint_file

    for path in sorted(builtin_lessons_dir().glob("*.yaml")):
        assert lint_file(path)[1] == [], path


def test_a_right_example_a_negation_rejects_is_explained():
    text = """\
id: why
title: Why
steps:
  - id: q
    kind: check
    prompt: Why is the loader slow here?
    answer:
      type: text
      rubric:
        require:
          - name: cores
            any: ["core*"]
    examples:
      right: ["Not enough cores.", "No spare cores for the workers."]
"""
    with pytest.raises(LessonError) as info:
        load_text(text, "why.yaml", grade_examples=True)
    (issue,) = info.value.issues  # "Not enough cores." passes: it says too few cores
    assert issue.line == 14
    assert (
        "example right[1] 'No spare cores for the workers.' is listed as right, but the rubric rejects it"
        in issue.message
    )
    assert "concept 'cores': 'core*' matched 'cores', but 'no' negates it there" in issue.message


def test_an_inspect_requirement_names_a_known_finding_and_something_to_judge():
    text = (
        "id: t\ntitle: T\nsteps:\n  - id: ex\n    kind: exercise\n    starter: x = 1\n    solution: x = 1\n"
        "    requirements:\n      - {type: inspect, id: a, finding: data-wiat, feedback: f}\n"
        "      - {type: inspect, id: b, feedback: f}\n"
        "      - {type: inspect, id: c, finding: data-wait, min_speedup: 1.5, feedback: f}\n"
    )
    with pytest.raises(LessonError) as info:
        load_text(text, "t.yaml")
    messages = [str(i) for i in info.value.issues]
    assert len(messages) == 2, messages
    assert messages[0].startswith("t.yaml:9:41: step 'ex' requirement 'a': unknown finding 'data-wiat'")
    assert "did you mean 'data-wait'" in messages[0]
    assert "requirement 'b': an inspect requirement needs a finding" in messages[1]
