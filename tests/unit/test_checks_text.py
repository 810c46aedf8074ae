"""Free-text grading: normalisation, stemming, phrase matching, negation, verdicts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.checks import describe_spec, grade
from tutor.checks.answers import Concept, Misconception, Rubric, TextAnswer
from tutor.checks.text import Answer, lint_rubric, normalise, stem


def spec(require=(), misconceptions=(), min_concepts=None, bonus=(), max_length=2000) -> TextAnswer:
    return TextAnswer(
        type="text",
        rubric=Rubric(
            require=[Concept(name=n, any=list(p), missing=f"missing {n}") for n, p in require],
            misconceptions=[Misconception(name=n, any=list(p), feedback=f"feedback {n}") for n, p in misconceptions],
            min_concepts=min_concepts,
            bonus=[Concept(name=n, any=list(p), missing=f"bonus {n}") for n, p in bonus],
        ),
        reference="the reference answer",
        max_length=max_length,
    )


def matches(answer: str, phrase: str) -> bool:
    return Answer(answer).find(phrase) is not None


# ----------------------------------------------------------------------------- normalise / stem


def test_normalise_plain_quotes_dashes_and_contractions():
    text = normalise("It doesn\u2019t \u2014 \u201cwon\u2019t\u201d; CAN'T, isnt, cannot")
    assert text == 'it does not - "will not"; can not, is not, can not'


def test_normalise_drops_control_and_zero_width_characters():
    assert normalise("under\u200bflow\x00\x07 to zero") == "underflow to zero"


@pytest.mark.parametrize(
    "words,same",
    [
        (["underflows", "underflowing", "underflowed", "underflow"], "underflow"),
        (["gradients", "gradient"], "gradient"),
        (["moving", "moves", "moved", "move"], None),
        (["scaling", "scaled", "scales", "scale"], None),
        (["batches", "batch"], "batch"),
        (["copies", "copied", "copy"], "copy"),
        (["running", "runs", "ran", "run"], "run"),
        (["using", "used", "uses", "use"], "use"),
        (["losses", "loss"], "loss"),
        (["speeding", "speeds", "speed"], "speed"),
    ],
)
def test_stemming_merges_inflections(words, same):
    stems = {stem(w) for w in words}
    assert len(stems) == 1, stems
    if same:
        assert stems == {same}


def test_stemming_keeps_distinct_words_apart():
    assert stem("underflow") != stem("overflow")
    assert stem("string") == "string"  # not "str": -ing is only stripped from a real stem
    assert stem("float16") == "float16" and stem("bf16") == "bf16"


# ----------------------------------------------------------------------------- matching


def test_prose_phrases_ignore_case_punctuation_plurals_and_order():
    assert matches("Small GRADIENTS... underflowed!", "small gradient underflow")
    assert matches("the gradients that are small can underflow", "small gradient underflow")
    assert matches("underflow of small gradients", "small gradient underflow")  # any order


def test_prose_phrases_need_their_words_close_together_in_one_sentence():
    far = "small numbers are fine in float32 and the loss value is large while many gradients underflow"
    assert not matches(far, "small gradient underflow")
    assert not matches("The model is small. Gradients underflow.", "small gradient underflow")


def test_wildcard_matches_word_beginnings():
    assert matches("PyTorch moves it automatically", "automat* mov*")
    assert not matches("PyTorch moves it by hand", "automat* mov*")


@pytest.mark.parametrize(
    "answer",
    ["x = inputs.to(device)", "inputs.to(device)", "inputs = inputs.to( device )", "batch.to(device) first"],
)
def test_code_phrases_match_inside_code(answer):
    assert matches(answer, "to(device)")


def test_code_phrases_keep_their_order_and_adjacency():
    assert matches("outputs = model(inputs)", "model(inputs)")
    assert matches("outputs = model(inputs.to(device))", "model(inputs)")
    assert not matches("I moved it to the device", "to(device)")
    assert not matches("inputs for the model", "model(inputs)")


def test_regex_phrases_run_on_the_normalised_text():
    assert matches("It doesn\u2019t fit", r"re:\bdoes not fit\b")
    assert matches("Model(X)", r"re:\bmodel\s*\(")


def test_invalid_regex_never_matches_and_never_raises():
    assert not matches("anything at all (", "re:([unclosed")
    verdict = grade("anything", spec(require=[("c", ["re:([unclosed"])]))
    assert not verdict.correct


def test_typos_in_long_words_are_tolerated_but_not_in_short_or_numeric_ones():
    assert matches("the forwrad pass", "forward pass")
    assert matches("tensors on diffrent devices", "different device")
    assert not matches("bf16 weights", "fp16")
    assert not matches("bfloat16 weights", "float16")


# ----------------------------------------------------------------------------- negation


@pytest.mark.parametrize(
    "answer",
    [
        "The GPU is NOT always faster.",
        "the gpu isn't always faster",
        "the GPU is never always faster",  # clumsy, still a negation
        "No, the GPU is not always faster: overhead matters.",
    ],
)
def test_negated_misconception_does_not_trigger(answer):
    assert not matches(answer, "gpu always faster")


def test_negation_stops_at_a_clause_boundary():
    assert matches("No, the GPU is always faster", "gpu always faster")
    assert matches("It is not the data, the GPU is always faster", "gpu always faster")


def test_negated_concept_does_not_count():
    assert not matches("it does not underflow", "underflow")
    assert not matches("there is no underflow in float32", "underflow")
    assert matches("small values underflow, not overflow", "underflow")
    assert not matches("small values underflow, not overflow", "overflow")


def test_not_only_is_not_a_negation():
    assert matches("it is not only slower, it crashes", "slower crash")
    assert matches("not just the gpu is always faster", "gpu always faster")


def test_a_dismissal_after_the_statement_negates_it():
    assert not matches("More epochs will not help here.", "more epochs")
    assert not matches("The idea that a GPU is always faster is a myth.", "gpu always faster")
    assert matches("More epochs, because it will not help otherwise", "more epochs")  # another clause


def test_a_phrase_may_contain_its_own_negator():
    assert matches("gradients don't underflow after scaling", "not underflow")
    assert not matches("gradients underflow", "not underflow")


def test_regex_negators_count_unless_the_pattern_spells_them():
    assert matches("There is no error at all", r"re:\bno error")
    assert not matches("it does not crash at backward", r"re:\bcrash\w* at backward")


# ----------------------------------------------------------------------------- verdicts

RUBRIC = spec(
    require=[("underflow", ["underflow*", "flush* zero"]), ("chain rule", ["chain rule", "scal* gradient*"])],
    misconceptions=[("overflow", ["prevent* overflow"]), ("speed", ["train* faster"])],
)


def test_all_concepts_met_is_correct_with_full_score():
    v = grade("Small gradients underflow in fp16; by the chain rule scaling the loss scales every gradient.", RUBRIC)
    assert v.correct and v.score == 1.0 and v.missing == [] and v.matched_misconception is None


def test_missing_concept_feedback_names_it():
    v = grade("Small gradients flush to zero in float16.", RUBRIC)
    assert not v.correct
    assert v.missing == ["chain rule"]
    assert v.feedback == "missing chain rule"
    assert v.score == 0.5


def test_misconception_wins_and_gives_targeted_feedback():
    v = grade("to prevent overflow, even though small gradients underflow by the chain rule", RUBRIC)
    assert not v.correct
    assert v.matched_misconception == "overflow"
    assert v.feedback == "feedback overflow"


def test_first_misconception_in_rubric_order_is_reported():
    v = grade("to prevent overflow and train faster", RUBRIC)
    assert v.matched_misconception == "overflow"


def test_min_concepts_accepts_a_partial_answer_and_suggests_the_rest():
    s = spec(require=[("a", ["alpha"]), ("b", ["beta"]), ("c", ["gamma"])], min_concepts=2)
    v = grade("alpha and beta are here", s)
    assert v.correct and v.missing == ["c"]
    assert v.feedback.startswith("Right. To go further:") and "missing c" in v.feedback
    assert not grade("only alpha is here", s).correct


def test_bonus_concepts_raise_the_score_but_are_not_needed():
    s = spec(require=[("a", ["alpha"])], bonus=[("b", ["beta"])])
    v = grade("alpha alone here", s)
    assert v.correct and v.score == 0.5 and "bonus b" in v.feedback
    v = grade("alpha and beta here", s)
    assert v.correct and v.score == 1.0 and v.feedback == "Right: that covers it."


@pytest.mark.parametrize("answer", ["", "   ", "\n\t", "?!?", "\u200b\u200b", "...", "\x00"])
def test_blank_answers_get_a_kind_prompt(answer):
    v = grade(answer, RUBRIC)
    assert not v.correct
    assert v.feedback.startswith("Write a sentence or two")


@pytest.mark.parametrize("answer", ["idk", "asdf qwer", "no"])
def test_too_short_nonsense_gets_a_kind_prompt(answer):
    v = grade(answer, RUBRIC)
    assert not v.correct
    assert v.feedback.startswith("Write a sentence or two")


def test_long_answers_are_truncated_not_rejected():
    s = spec(require=[("u", ["underflow"])], max_length=100)
    assert grade("gradients underflow. " + "blah " * 5000, s).correct
    assert not grade("blah " * 50 + "gradients underflow", s).correct  # past max_length: not read


def test_text_without_rubric_is_not_graded():
    s = TextAnswer(type="text")
    assert grade("my guess is that it is faster", s).correct
    assert not grade("  ", s).correct
    assert describe_spec(s) == "a short answer in your own words"
    assert describe_spec(RUBRIC) == "a sentence or two"


def test_grade_accepts_a_plain_dict_spec():
    v = grade("it underflows", {"type": "text", "rubric": {"require": [{"name": "u", "any": ["underflow"]}]}})
    assert v.correct


def test_lint_flags_phrases_that_lose_words_and_bad_regexes():
    bad = Rubric(
        require=[Concept(name="c", any=["it is fine", "re:(", "fine"])],
        misconceptions=[],
        min_concepts=3,
    )
    problems = lint_rubric(bad)
    assert any("'it is fine'" in p for p in problems)
    assert any("invalid regex" in p for p in problems)
    assert any("min_concepts" in p for p in problems)
    assert lint_rubric(RUBRIC.rubric) == []


# ----------------------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=3000))
def test_grade_never_raises_on_arbitrary_text(answer):
    _holds_to_the_rubric(grade(answer, RUBRIC))


def _holds_to_the_rubric(v) -> None:
    """RUBRIC requires two concepts (no bonus, no min_concepts): the score is the share met, and an
    answer is right exactly when it meets both and names no misconception."""
    assert v.score in (0.0, 0.5, 1.0) and len(v.missing) == round(2 * (1 - v.score))
    assert v.correct is (v.score == 1.0 and v.matched_misconception is None)
    assert v.feedback and len(v.feedback) < 1_000


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_grade_never_raises_on_huge_text(chunk):
    _holds_to_the_rubric(grade(chunk * (200_000 // len(chunk) + 1), RUBRIC))


# ------------------------------------------------------------------ "not enough" and why a negation removed a match


def _cores_rubric():
    from tutor.checks.answers import Rubric

    return Rubric(
        require=[{"name": "few-cores", "any": ["core*"]}],
        misconceptions=[{"name": "too-few", "any": ["too few worker*"], "feedback": "Workers are not it."}],
    )


def test_not_enough_x_says_too_few_x_and_is_not_a_negation():
    from tutor.checks.answers import TextAnswer
    from tutor.checks.text import grade_text

    spec = TextAnswer(type="text", rubric=_cores_rubric())
    assert grade_text("Not enough cores for the loader's work.", spec).correct
    assert grade_text("There is too little CPU: not enough cores.", spec).correct
    # and a phrase written "too few X" meets "not enough X"
    verdict = grade_text("The cores are fine, there are not enough workers.", spec)
    assert not verdict.correct and verdict.matched_misconception == "too-few"
    assert not grade_text("It has nothing to do with cores.", spec).correct  # a real negation still is one


def test_explain_negations_names_the_phrase_and_the_words_that_removed_it():
    from tutor.checks.text import explain_negations

    rubric = _cores_rubric()
    assert explain_negations("The GPU has no cores free.", rubric, ["few-cores"]) == [
        "concept 'few-cores': 'core*' matched 'cores', but 'no' negates it there"
    ]
    assert explain_negations("More cores will not help.", rubric, ["few-cores"]) == [
        "concept 'few-cores': 'core*' matched 'cores', but 'not help' negates it there"
    ]
    assert explain_negations("Cores are plenty.", rubric, ["few-cores"]) == []  # it matched: nothing to explain
    assert explain_negations("The disk is slow.", rubric, ["few-cores"]) == []  # no match even without negation
