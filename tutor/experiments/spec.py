"""What an experiment is, without torch: its parameters (a pydantic model), the metrics it
reports, the small settings tests and `lesson test` use, and where its measurement lives.

Each built-in experiment has a spec module, `tutor/experiments/specs/<module>.py`, defining
`SPEC = Experiment(...)` and its `Params` subclass, and a measurement module,
`tutor/experiments/<module>.py`, with

    def measure(p: <Params>, dev: Device) -> Iterator[Event]

which imports torch, never Textual, and yields `tutor.experiments.events`; its last event is
`Finished(metrics)` with (at least) the metrics the spec declares. A lesson pack's experiment
brings its generator function itself (`run=`, module "").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tutor.experiments.events import Event

# Marks a parameter that names a file the run writes. The learner may set it (`gpututor run
# --set`); a lesson may not, or opening a lesson could overwrite any file of theirs.
WRITES_FILE: dict[str, Any] = {"writes_file": True}


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    device: str | None = Field(None, description="cpu, cuda, cuda:1, mps; default: the best device here")
    seed: int = Field(0, description="random seed for weights, shuffling and data")


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    module: str  # tutor/experiments/<module>.py has its measure(); specs/<module>.py this spec
    params: type[Params]
    metrics: dict[str, str]  # metric name -> what it means (with unit)
    quick: dict[str, Any] = field(default_factory=dict)  # small params for tests and `lesson test`
    # A lesson pack's experiment brings its generator function itself (module is then "").
    run: Callable[[Any, Any], Iterator[Event]] | None = field(default=None, compare=False)

    def load(self) -> Callable[[Params, Any], Iterator[Event]]:
        """The measurement: `measure` of tutor/experiments/<module>.py (importing it imports torch)."""
        if self.run is not None:
            return self.run
        return importlib.import_module(f"tutor.experiments.{self.module}").measure

    def make_params(self, values: dict[str, Any] | None = None) -> Params:
        return self.params(**(values or {}))

    def file_params(self) -> list[str]:
        """Parameters that name a file the run writes (marked WRITES_FILE)."""
        return [name for name, f in self.params.model_fields.items()
                if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("writes_file")]
