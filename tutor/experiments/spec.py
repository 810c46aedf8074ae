"""What an experiment is, without torch: its parameters (a pydantic model), the metrics it
reports, the small settings tests and `lesson test` use, and where its measurement lives.

Each built-in experiment has a spec module, `tutor/experiments/specs/<module>.py`, defining
`SPEC = Experiment(...)` and its `Params` subclass, and a measurement module,
`tutor/experiments/<module>.py`, with

    def measure(p: <Params>, dev: Device) -> Iterator[Event]

which imports torch, never Textual, and yields `tutor.experiments.events`; its last event is
`Finished(metrics)` with (at least) the metrics the spec declares. A lesson pack's experiment
brings its generator function itself (`run=`, module "").

Each metric is declared as a `Metric` (label, unit, description, what None means), so every
screen shows it in words and in its unit; a plain description string is still accepted (a
lesson pack's older form): its label is the description's first clause, its unit read from
the metric's name (`present.unit_from_name`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tutor import present
from tutor.experiments.events import Event
from tutor.measurement.noise import NOISE_GATE, NOISE_WHY  # named where they are measured
from tutor.measurement.slots import TIMING_SHARED

# Marks a parameter that names a file the run writes. The learner may set it (`gpututor run
# --set`); a lesson may not, or opening a lesson could overwrite any file of theirs.
WRITES_FILE: dict[str, Any] = {"writes_file": True}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str | None = Field(None, description="cpu, cuda, cuda:1, mps; default: the best device here")
    seed: int = Field(0, description="random seed for weights, shuffling and data")


DECIDE = "decide"  # DecidedParams' field: the edges a lesson passes, not a setting shown as one


class DecidedParams(Params):
    """The parameters of a run that repeats until the predictions judged against it are decided
    (its Experiment names the metric: `decides`)."""

    decide: tuple[float, ...] = Field(
        (),
        description="where the verdicts on its headline turn (a lesson passes "
        "its options' ends): repeats go on until the interval is clear of them all, "
        "or the time is spent; none given: until the interval is precise",
    )

    @field_validator(DECIDE, mode="before")
    @classmethod
    def _listed(cls, value: Any) -> Any:
        """One edge or several, as `--set decide=2,10` writes them."""
        if isinstance(value, (int, float)):
            return (value,)
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value


@dataclass(frozen=True)
class Metric:
    """One metric as a learner reads it: "parameters: 419.9 KiB", "peak memory: n/a off CUDA".

    unit is one of `present.METRIC_UNITS`: "B" (bytes, shown in KiB/MiB/GiB), "MB" (1e6 bytes),
    "GiB", "s", "%" (a fraction 0..1 shown in percent), "x" (times), "/s" (a rate), "TFLOP/s",
    "" (a plain count or number), "bool" (yes/no), "text". `none` is what the screen says when
    the run reports None: why it was not measured ("n/a off CUDA", "never").
    """

    label: str  # a few words, no unit: the value carries it
    unit: str = ""
    description: str = ""  # the long text: how it was measured (docs, lint's hints)
    none: str = "n/a"
    # A metric reported with an interval (NAME_low, NAME_high): how far separate runs' typical
    # values land beyond one run's interval, as a share of its ends; a verdict widens the interval
    # by it before deciding. Measured (bench/verdict_study.py); None: measurement.intervals.GUARD.
    guard: float | None = None
    # What NAME_low..NAME_high are, said in a verdict, where they are not the interval of a
    # typical value: "the batch sizes tied with it" (a set of settings no run could tell apart).
    interval_words: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label.strip():
            raise ValueError("a Metric needs a label: a few words saying what was measured")
        if self.unit not in present.METRIC_UNITS:
            raise ValueError(
                f"Metric {self.label!r}: unknown unit {self.unit!r}; "
                f"use one of {', '.join(repr(u) for u in present.METRIC_UNITS)}"
            )

    @classmethod
    def from_text(cls, name: str, description: str = "") -> Metric:
        """The older form, a description string: its first clause as the label (the name in
        words if there is none), the unit by the naming rules."""
        label = present.metric_label(description) if description.strip() else name.replace("_", " ")
        return cls(label or name.replace("_", " "), present.unit_from_name(name), description)


# Metrics the tutor adds to a run, whatever the experiment: experiments.start reports what else
# the machine was doing beside any run that reports an interval (NAME_low, NAME_high; noise.py).
COMMON_METRICS: dict[str, Metric] = {
    NOISE_WHY: Metric(
        "what else the machine did",
        "text",
        "what else used the CPU or the GPU while the run measured (other programs' share of the "
        "cores, a VM host's steal, other GPU processes, clocks held down): why repeats spread",
    ),
    NOISE_GATE: Metric(
        "why no verdict can be decided",
        "text",
        "set when a GPU run's timings are not the card's own (it slowed its clocks for heat or a "
        "hardware limit, or another program's kernels had it busy as the run began): every "
        "prediction of its timed metrics is then undecided. None on a CPU, or when neither was seen",
        none="nothing held the GPU back",
    ),
    TIMING_SHARED: Metric(
        "timed beside another run",
        "bool",
        "set when, on a machine a class shares, the learner chose to run now rather than wait for "
        "the device another run held (measurement/slots.py): no prediction is graded on this run",
    ),
}


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    module: str  # tutor/experiments/<module>.py has its measure(); specs/<module>.py this spec
    params: type[Params]
    # metric name -> its Metric (a description string is accepted and made one: __post_init__)
    metrics: Mapping[str, Metric | str]
    quick: dict[str, Any] = field(default_factory=dict)  # small params for tests and `lesson test`
    # A lesson pack's experiment brings its generator function itself (module is then "").
    run: Callable[[Any, Any], Iterator[Event]] | None = field(default=None, compare=False)
    # The metric whose interval the run's repeats aim at: a lesson passes the edges of the
    # predictions of it as `decide` (its params are DecidedParams). None: a fixed number of repeats.
    decides: str | None = None

    def __post_init__(self) -> None:
        # One place turns the string form into Metrics, so every reader gets a Metric.
        metrics = {}
        for name, declared in dict(self.metrics).items():
            if isinstance(declared, str):
                declared = Metric.from_text(name, declared)
            elif not isinstance(declared, Metric):
                raise TypeError(
                    f"experiment {self.name!r}: metric {name!r} must be a Metric or a description "
                    f"string, not {type(declared).__name__}"
                )
            metrics[name] = declared
        object.__setattr__(self, "metrics", metrics)
        if self.decides is not None and (self.decides not in metrics or not issubclass(self.params, DecidedParams)):
            raise ValueError(
                f"experiment {self.name!r} decides {self.decides!r}: it must be one of its metrics, "
                "and its params a DecidedParams"
            )

    def metric(self, name: str) -> Metric:
        """The declared Metric; a metric a run reports without declaring it, by its name's rules."""
        declared = self.metrics.get(name) or COMMON_METRICS.get(name)
        return declared if isinstance(declared, Metric) else Metric.from_text(name)

    def load(self) -> Callable[[Params, Any], Iterator[Event]]:
        """The measurement: `measure` of tutor/experiments/<module>.py (importing it imports torch)."""
        if self.run is not None:
            return self.run
        return importlib.import_module(f"tutor.experiments.{self.module}").measure

    def make_params(self, values: dict[str, Any] | None = None) -> Params:
        return self.params(**(values or {}))

    def file_params(self) -> list[str]:
        """Parameters that name a file the run writes (marked WRITES_FILE)."""
        return [
            name
            for name, f in self.params.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("writes_file")
        ]
