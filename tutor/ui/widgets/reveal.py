"""The reveal: a locked prediction beside the measurement it predicted."""

from __future__ import annotations

import re
import time

from rich.text import Text

from tutor import experiments
from tutor.checks.answers import TextAnswer
from tutor.course.session import Pending, Reveal
from tutor.experiments.spec import Metric
from tutor.present import metric as fmt
from tutor.present import metric_value


def reveal_text(reveal: Reveal | Pending, named: bool = False) -> Text:
    """'You predicted X · measured Y · off by 3.1x' for a locked prediction and its evidence (a
    run's metrics, or an instrument's outputs: "computed"), or what to do to get the evidence.
    `named`: one of several on a step, so each says which prediction it is."""
    if isinstance(reveal, Pending):
        said = f"{reveal.step.title or reveal.step.id}: {reveal.text}" if named and reveal.step else reveal.text
        return Text(said, style="dim")
    step, answer, evidence = reveal.step, reveal.answer, reveal.evidence
    source = evidence.source or "measured"
    metric = step.compare or ""
    measured = evidence.metrics.get(metric)
    judged = reveal.judge()
    score = judged.score
    where = ""
    if reveal.device:
        where = f" on {reveal.device.get('name') or reveal.device.get('device') or '?'}"
    if evidence.setting:
        where += f" ({evidence.setting})"
    if reveal.at and time.time() - reveal.at > 600:
        where += time.strftime(" (measured %Y-%m-%d %H:%M)", time.localtime(reveal.at))
    mark = ("✓ ", "bold green") if score.hit else ("~ ", "bold yellow") if score.undecided else ("• ", "bold yellow")
    summary = score.summary
    if source != "measured":
        summary = summary.replace("measured ", f"{source} ")
    if judged.not_scored and not score.undecided:  # an undecided verdict's summary says why itself
        mark = ("· ", "bold yellow")
        summary = f"Not scored: {judged.not_scored}."
    if isinstance(step.answer, TextAnswer) and measured is not None:
        # Words are not scored, and both are already on the two lines above: say so, not them again.
        summary = "Not scored: set your words beside what was measured."
    header = "Prediction vs measurement" if source == "measured" else f"Prediction vs {source} value"
    return Text.assemble(
        (header, "bold underline"),
        (f" · {step.title or step.id}" if named else "", "bold"),
        "\n",
        ("  you predicted: ", "bold"),
        (answer, "cyan"),
        "\n",
        (f"  {source + ':':<15}", "bold"),
        (f"{_label(reveal)}: {_value(reveal, measured)}", "bold"),
        (where, "dim"),
        "\n",
        mark,
        summary,
    )


def _declared(reveal: Reveal) -> Metric | None:
    """The compared metric as its experiment declares it; None for an instrument's output."""
    run = reveal.evidence.run
    spec = experiments.REGISTRY.get(run.experiment) if run is not None else None
    return spec.metric(reveal.step.compare or "") if spec is not None else None


def _label(reveal: Reveal) -> str:
    """What was measured, in words: the metric's label (an instrument's output by its name,
    without the unit suffix the value already shows)."""
    declared = _declared(reveal)
    if declared is not None:
        label = declared.label
    else:
        label = re.sub(r"_(gb|gib|mb|mib|bytes|s|x)$", "", reveal.step.compare or "").replace("_", " ")
    return f"{label} ratio" if reveal.evidence.ratio else label


def _value(reveal: Reveal, measured: object) -> str:
    """The value in the step's unit, which the prediction was made and scored in; without one,
    in the metric's declared unit. Not measured: the metric's own words ("n/a off CUDA")."""
    declared = None if reveal.evidence.ratio else _declared(reveal)  # a ratio is in x, not the metric's unit
    if declared is not None and (measured is None or not reveal.step.unit):
        return metric_value(declared, measured)
    return fmt(measured, reveal.step.unit)
