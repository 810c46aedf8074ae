"""Answer grading for gpututor: pure Python (no Textual, no torch).

grade(answer, spec, metrics=None) -> Verdict
parse_number(text, unit="") -> float | None
ambiguity(text, unit) -> str | None   (a question back: "0.5% or 50%?")
score_prediction(answer, spec, measured, unit="") -> PredictionScore
describe_spec(spec) -> str
"""

from tutor.checks.answers import AnswerSpec, PredictionScore, Verdict
from tutor.checks.grade import describe_spec, grade
from tutor.checks.number import ambiguity, format_number, parse_number
from tutor.checks.predict import interval_of, judged_edges, score_prediction
from tutor.checks.text import explain_matches

__all__ = [
    "AnswerSpec",
    "PredictionScore",
    "Verdict",
    "ambiguity",
    "describe_spec",
    "explain_matches",
    "format_number",
    "grade",
    "interval_of",
    "judged_edges",
    "parse_number",
    "score_prediction",
]
