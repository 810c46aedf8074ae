"""The reveal: a locked prediction beside the measurement it predicted."""

from __future__ import annotations

import re
import time

from rich.text import Text

import checks
from checks.spec import TextAnswer
from tutor import experiments
from tutor.course.session import Pending, Reveal
from tutor.present import metric as fmt
from tutor.present import metric_label


def reveal_text(reveal: Reveal | Pending) -> Text:
    """'You predicted X · measured Y · off by 3.1x' for a locked prediction and its evidence (a
    run's metrics, or an instrument's outputs: "computed"), or what to do to get the evidence."""
    if isinstance(reveal, Pending):
        return Text(reveal.text, style="dim")
    step, answer, evidence = reveal.step, reveal.answer, reveal.evidence
    source = evidence.source or "measured"
    metric = step.compare or ""
    measured = evidence.metrics.get(metric)
    score = checks.score_prediction(answer, step.answer, measured, step.unit)
    where = ""
    if reveal.device:
        where = f" on {reveal.device.get('name') or reveal.device.get('device') or '?'}"
    if evidence.setting:
        where += f" ({evidence.setting})"
    if reveal.at and time.time() - reveal.at > 600:
        where += time.strftime(" (measured %Y-%m-%d %H:%M)", time.localtime(reveal.at))
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
        (f"  {source + ':':<15}", "bold"), (f"{_label(reveal)}: {fmt(measured, step.unit)}", "bold"), (where, "dim"),
        "\n",
        mark, summary,
    )


def _label(reveal: Reveal) -> str:
    """What was measured, in words: the experiment's description of the metric (an instrument's
    output, or a metric a pack does not describe, by its name with spaces)."""
    name = reveal.step.compare or ""
    run = reveal.evidence.run
    spec = experiments.REGISTRY.get(run.experiment) if run is not None else None
    described = spec.metrics.get(name) if spec is not None else None
    if described:
        return metric_label(described)
    # An instrument's output: its name without the unit suffix the value already shows.
    return re.sub(r"_(gb|gib|mb|mib|bytes|s|x)$", "", name).replace("_", " ")
