"""The class report's one-page HTML: self-contained (opens with no network), every learner's
string escaped, each section with the class's numbers."""

from __future__ import annotations

import math
import re
from html import escape

from tests.unit.test_class_report import bundle, class_of_three, cpu_hash, lesson_record, lessons, prediction, write
from tutor.classroom import html, report

__all__ = ["cpu_hash", "lessons"]  # the fixtures, used by name


def test_the_page_is_self_contained_escaped_and_says_what_the_class_did(tmp_path, lessons, cpu_hash):
    class_of_three(tmp_path, cpu_hash)
    hostile = "<script>alert(1)</script>"
    mine = bundle(hostile, [lesson_record(cpu_hash, 1, predictions=[prediction("p", math.log(3))])])
    write(tmp_path, "x.json", mine, seal=False)  # unsealed: flagged as edited, so the name is on the page
    built = report.build(report.load_dir(tmp_path), lessons)
    page = html.render(built)

    assert "<script" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert page.count("<svg") == 2  # completion and the prediction profile, drawn inline
    for section in ("Completion per lesson", "prediction profile", "Checks most missed", "requirements failed first"):
        assert section in page
    (concept,) = [c for c in built.concepts if c.bias is not None]
    assert escape(concept.sentence) in page
    # one dot per learner's own bias
    assert page.count("<circle") == len(concept.learner_biases)
