"""The reveal: a locked prediction beside the measurement it predicted."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text

import checks
from checks.spec import TextAnswer
from tutor.lesson import PredictStep
from tutor.widgets.run_panel import fmt


def reveal_text(step: PredictStep, answer: str, metrics: dict[str, Any], device: dict[str, Any] | None = None,
                at: float | None = None, source: str = "measured", setting: str = "") -> Text:
    """'You predicted X · measured Y · off by 3.1x' for a predict step and a run's metrics
    (or an instrument's outputs, with source="computed")."""
    metric = step.compare or ""
    measured = metrics.get(metric)
    score = checks.score_prediction(answer, step.answer, measured, step.unit)
    where = ""
    if device:
        where = f" on {device.get('name') or device.get('device') or '?'}"
    if setting:
        where += f" ({setting})"
    if at is not None and time.time() - at > 600:
        where += time.strftime(" (measured %Y-%m-%d %H:%M)", time.localtime(at))
    mark = ("✓ ", "bold green") if score.hit else ("• ", "bold yellow")
    summary = score.summary
    if source != "measured":
        summary = summary.replace("measured ", f"{source} ")
    if isinstance(step.answer, TextAnswer) and measured is not None:
        # Words are not scored, and both are already on the two lines above: say so, not them again.
        summary = "Not scored: set your words beside what was measured."
    return Text.assemble(
        ("Prediction vs measurement" if source == "measured" else f"Prediction vs {source} value",
         "bold underline"), "\n",
        ("  you predicted: ", "bold"), (answer, "cyan"), "\n",
        (f"  {source + ':':<15}", "bold"), (f"{metric} = {fmt(measured, step.unit)}", "bold"), (where, "dim"), "\n",
        mark, summary,
    )
