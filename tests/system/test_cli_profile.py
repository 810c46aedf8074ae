"""`gpututor profile`: the prediction profile headless, as lines, a chart and JSON, from the
progress store of the built-in lessons."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tutor.cli import main
from tutor.course.catalog import discover
from tutor.course.profile import NOTHING_YET
from tutor.course.progress import Progress
from tutor.course.session import LessonSession, RunOutcome

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def predict_and_run(lesson_id: str, step_id: str, answer: str, metrics: dict | None) -> None:
    """Lock a prediction in the learner's store, then record the run after it (None: no run yet)."""
    lesson = discover([]).get(lesson_id).lesson
    with Progress() as progress:
        session = LessonSession(lesson, progress)
        step = lesson.step(step_id)
        session.lock(step, answer)
        after = lesson.run_after(lesson.index(step_id))
        if metrics is not None:
            session.record_run(after, RunOutcome(after.experiment, after.start_params(), "finished", metrics, {}))


@pytest.fixture
def measured():
    predict_and_run("gpu-training", "hook-predict", "5x or more", {"speedup": 1.25})  # at least x4 too high
    predict_and_run("cpu-vs-gpu", "crossover-predict", "16x", {"speedup_tiny": 1.0})  # x16 too high
    predict_and_run("gpu-training", "practice-predict", "96% to 99%", {"accuracy": 0.975})  # in range
    predict_and_run("gpu-lab", "sweep-predict", "A small one (32 to 128)", None)  # no run yet


def test_nothing_yet_says_how_to_get_a_profile(capsys):
    code, out, err = run_cli(capsys, "profile")
    assert code == 0 and out.strip() == NOTHING_YET and err == ""
    code, out, _ = run_cli(capsys, "profile", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["concepts"] == [] and doc["message"] == NOTHING_YET and doc["worst"] is None


def test_the_profile_as_lines_and_a_chart_that_read_at_80_columns(capsys, measured):
    code, out, err = run_cli(capsys, "profile")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "Your prediction profile: 3 predictions measured, 2 concepts"
    assert "  You overestimate GPU speed-ups x8 (2 predictions, 0 on target)" in lines  # sqrt(4 x 16)
    assert "  You predict accuracy within 15% (1 prediction, 1 on target)" in lines
    chart = [line for line in lines if "|" in line or line.lstrip().startswith("+")]
    assert len(chart) == 8 and all(len(line) <= 80 for line in chart)
    assert any(line.strip().startswith("over x5+") and "G" in line for line in chart)
    assert any(line.strip().startswith("within 15%") and "A" in line for line in chart)  # accuracy's mark
    assert "Worst calibrated: GPU speed-ups (typically off x8). Revisit “CPU vs GPU compute" in out
    assert "1 prediction not in the profile: 1 waiting for a run." in out
    assert "waits for its run step “Run: the batch sweep”" in out


def test_the_profile_as_json(capsys, measured):
    code, out, _ = run_cli(capsys, "profile", "--json")
    assert code == 0
    doc = json.loads(out)
    speed, accuracy = doc["concepts"]
    assert (speed["concept"], speed["count"], speed["hits"], speed["verdict"]) == ("gpu-speedup", 2, 0, "over")
    assert speed["bias"] == pytest.approx(8.0) and speed["typical_factor"] == pytest.approx(8.0)
    errors = {p["step"]: p["log_error"] for p in speed["predictions"]}
    assert errors == {"hook-predict": pytest.approx(math.log(4)), "crossover-predict": pytest.approx(math.log(16))}
    assert [p["step"] for p in speed["predictions"]] == ["hook-predict", "crossover-predict"]  # as locked
    assert accuracy["predictions"][0]["measured"] == 0.975 and accuracy["predictions"][0]["hit"] is True
    assert doc["worst"] == "gpu-speedup"
    [waiting] = doc["unscored"]
    assert (waiting["lesson"], waiting["step"], waiting["waiting"]) == ("gpu-lab", "sweep-predict", True)


def test_profile_is_listed_and_runs_without_torch_or_a_traceback():
    code = (
        "import sys; from tutor.cli import main; rc = main(['profile']); "
        "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH', file=sys.stderr); sys.exit(rc)"
    )
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert done.returncode == 0 and "NO-TORCH" in done.stderr and "Traceback" not in done.stderr
    assert NOTHING_YET in done.stdout
    helped = subprocess.run(
        [sys.executable, "-m", "tutor", "--help"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )
    assert "profile" in helped.stdout
