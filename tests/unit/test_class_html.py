"""The class report's one-page HTML: self-contained (opens with no network), every learner's
string escaped, each section with the class's numbers, worked out by hand from the bundles."""

from __future__ import annotations

import math
import re
from html import escape, unescape

import pytest

from tests.unit.test_class_report import (
    LESSON,
    bundle,
    class_of_three,
    cpu_hash,
    lesson_record,
    lessons,
    prediction,
    write,
)
from tutor.classroom import html, report
from tutor.cli import main

__all__ = ["cpu_hash", "lessons"]  # the fixtures, used by name

HOSTILE = "<script>alert(1)</script>"


@pytest.fixture
def page_and_report(tmp_path, lessons, cpu_hash):
    """Ada, Bob and Cy (test_class_report.class_of_three), plus a learner named HOSTILE who did 1 of
    23 steps, predicted 3x what was measured, and whose bundle is not sealed (so: flagged edited);
    and one truncated file."""
    class_of_three(tmp_path, cpu_hash)
    mine = bundle(HOSTILE, [lesson_record(cpu_hash, 1, predictions=[prediction("p", math.log(3))])])
    write(tmp_path, "x.json", mine, seal=False)
    (tmp_path / "cut.json").write_text('{"format": "gpututor-bundle", "vers', encoding="utf-8")
    built = report.build(report.load_dir(tmp_path), lessons)
    return html.render(built), built


def sections(page: str) -> dict[str, str]:
    """Each <h2>'s text -> what follows it up to the next <h2>."""
    parts = re.split(r"<h2>(.*?)</h2>", page)
    return {unescape(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def text_of(fragment: str) -> str:
    """The visible text, tags dropped and entities read, spaces folded."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_the_page_is_self_contained_and_escapes_every_learner_string(page_and_report):
    page, _ = page_and_report
    assert "<script" not in page.lower() and escape(HOSTILE) in page
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http://" not in page and "https://" not in page and "@import" not in page
    assert page.count("<svg") == 2  # completion and the prediction profile, drawn inline


def test_completion_per_lesson(page_and_report):
    page, _ = page_and_report
    part = sections(page)["Completion per lesson"]
    # cpu-vs-gpu in 3 bundles: 10 + 23 + 1 of 23 steps each = 34/69 = 49%; Bob finished; Cy's bundle lacks it
    assert "49% of steps · 1/4 finished · 1 without it" in text_of(part)
    assert "0% of steps · 0/4 finished · 3 without it" in text_of(part)  # devices: Cy, 0 of 18
    # the bars: background, mean share, finished share, each row's widths in that proportion
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([\d.]+)"', part)]
    full, share, finished = widths[:3]
    assert share / full == pytest.approx(34 / 69, abs=0.002)
    assert finished / full == pytest.approx(1 / 4, abs=0.002)


def test_prediction_profile_bias_and_spread(page_and_report):
    page, built = page_and_report
    part = sections(page)["The class's prediction profile"]
    # by hand: Ada 2x, Bob 8x, the fourth learner 3x: the class (2 * 8 * 3) ** (1/3) = x3.63, spread x2 to x8
    assert "×3.63 (3: ×2–×8)" in text_of(part)
    (concept,) = [c for c in built.concepts if c.bias is not None]
    assert escape(concept.sentence) in part
    # one dot per learner's own bias, on a log axis centred on x1: log 2 : log 3 : log 8 = 1 : 1.58 : 3
    mid = float(re.search(r'<text x="([\d.]+)"[^>]*>×1</text>', part)[1])  # type: ignore[index]
    dots = sorted(float(x) - mid for x in re.findall(r'<circle cx="([\d.]+)"', part))
    assert len(dots) == 3 and dots[0] > 0
    assert [d / dots[0] for d in dots] == pytest.approx([1, math.log(3) / math.log(2), 3], rel=0.01)


def test_checks_and_exercises_tables(page_and_report):
    page, _ = page_and_report
    checks = sections(page)["Checks most missed first try"]
    rows = [text_of(r) for r in re.findall(r"<tr>(.*?)</tr>", checks)][1:]
    # interview-bug: Bob wrong, never right (100%); intermediate-check: Ada wrong then right, Bob right at once
    assert re.match(r".* cpu-vs-gpu 1/1 \(100%\) 0/1 1 grads-reset ×1$", rows[0])
    assert re.match(r".* cpu-vs-gpu 1/2 \(50%\) 2/2 1\.5 grads-reset ×1$", rows[1])
    assert len(rows) == 2

    exercises = text_of(sections(page)["Exercises: requirements failed first"])
    # practice-basic: Ada failed "moves model" first and passed it on her 2nd grading; Bob passed at once
    assert "1/2 passed first try, 2/2 passed in the end, 1.5 gradings to pass on average" in exercises
    assert "moves model 1/2 1/1 2" in exercises
    assert "times it" not in exercises  # never failed


def test_machines_flags_and_skipped_files(page_and_report, tmp_path):
    page, _ = page_and_report
    found = sections(page)
    machines = text_of(found["Machines seen"])
    assert "cuda:0: Test GPU (80.0 GiB, sm_90) 2.5.1 12.4 550" in machines and machines.endswith(" 4")
    flagged = [text_of(r) for r in re.findall(r"<tr>(.*?)</tr>", found["Flagged bundles and skipped files"])]
    assert any(r.startswith(f"{HOSTILE} edited ") and r.endswith(" x.json") for r in flagged)
    assert any(r.startswith("Cy other lesson version ") and "devices" in r for r in flagged)  # its hash: sha256:x
    assert any(r.startswith("cut.json line 1: not JSON") for r in flagged)
    header = text_of(page.split("<h2>")[0])
    assert "4 learners 4 bundles read 0 earlier bundles dropped 2 bundles flagged 1 files skipped" in header


def test_an_empty_class_still_renders():
    built = report.build([], [])
    page = html.render(built)
    assert "No lesson in any bundle" in page and "No check was answered" in page
    assert page.count("<svg") == 0 and LESSON not in page


def test_gpututor_class_writes_the_page(tmp_path, capsys, cpu_hash):
    class_of_three(tmp_path / "in", cpu_hash)
    out = tmp_path / "class.html"
    assert main(["class", str(tmp_path / "in"), "--html", str(out)]) == 0
    assert f"Wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "×4 (2: ×2–×8)" in text_of(page)  # (2 * 8) ** 0.5
