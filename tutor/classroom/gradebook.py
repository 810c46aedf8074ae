"""The class's grades as CSV: a gradebook in the form Canvas's Gradebook Import takes, and a long
table (one row per learner and step) for any other LMS or a spreadsheet.

The gradebook: columns Student, ID, SIS User ID, SIS Login ID, Section, then one per graded item;
a second row "Points Possible" gives each item's points, as Canvas's own export does. A column
Canvas does not know becomes a new assignment on import. The learner's name (`learner = "..."` in
their settings) fills Student and SIS Login ID: name learners by their campus login and Canvas
matches the rows; ID, SIS User ID and Section are left for Canvas to fill.

The scoring rule (`SCORING`, said in `gpututor class --help`) is the report's: a lesson's
completion is the percentage of its steps done (of 100); a check scores 1 if any attempt was right;
an exercise 1 if its last graded run passed. A lesson the learner's bundle does not hold is left
blank (ungraded), a step of a lesson it holds but never tried scores 0.
"""

from __future__ import annotations

import csv
import io

from tutor.classroom.report import ClassReport
from tutor.present import number

SCORING = (
    "completion per lesson: % of its steps done (points 100); a check: 1 if any attempt was right; "
    "an exercise: 1 if its last graded run passed; a lesson not in a learner's bundle is blank, a step "
    "not tried in a lesson it holds is 0"
)
IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
LONG_COLUMNS = ("learner", "lesson", "step", "kind", "verdict", "score")


def _cell(value: float | None) -> str:
    """A score as a spreadsheet reads it: 1, 0, 62.5; blank for none."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else number(value)


def _text(typed: str) -> str:
    """A learner's name as they typed it, made inert for a spreadsheet: a cell starting with = + - @
    (or a tab or return) is a formula to Excel and LibreOffice, so it gets a leading apostrophe
    (OWASP's advice for CSV injection); any other name is left exactly as typed, for Canvas to match."""
    return "'" + typed if typed.startswith(("=", "+", "-", "@", "\t", "\r")) else typed


def gradebook_csv(report: ClassReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*IDENTITY, *(_column(item.kind, item.lesson, item.step, item.title) for item in report.items)])
    writer.writerow(["    Points Possible", "", "", "", "", *(_cell(item.points) for item in report.items)])
    for learner in report.learners:
        scores = [_cell(learner.scores.get(item.key)) for item in report.items]
        name = _text(learner.learner)
        writer.writerow([name, "", "", name, "", *scores])
    return out.getvalue()


def _column(kind: str, lesson: str, step: str, title: str) -> str:
    """A column's name: unique (lesson and step ids), readable (the title)."""
    if kind == "completion":
        return f"{lesson}: completion %"
    return f"{lesson}/{step}: {title}" if title and title != step else f"{lesson}/{step}"


def long_csv(report: ClassReport) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(LONG_COLUMNS)
    for learner in report.learners:
        for r in learner.results:
            writer.writerow([_text(learner.learner), r.lesson, r.step, r.kind, r.verdict, _cell(r.score)])
    return out.getvalue()
