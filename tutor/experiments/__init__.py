"""The experiment registry: name -> `Experiment` (parameters, metrics, where its measurement is).

Built from the spec modules in `tutor/experiments/specs/` (one per experiment, each defining
`SPEC`), plus the experiments lesson packs register. Torch-free, so the CLI, the lesson linter
and the TUI can list and validate experiments without importing torch; `start` imports the
measurement (and torch) only when a run begins. See spec.py for what a spec holds.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Generator
from typing import Any

from tutor.experiments import specs
from tutor.experiments.events import Event
from tutor.experiments.spec import WRITES_FILE, Experiment, Params

__all__ = ["REGISTRY", "WRITES_FILE", "Experiment", "Params", "UnknownExperiment", "get", "register", "start"]


def _built_in() -> dict[str, Experiment]:
    found = {}
    for info in sorted(pkgutil.iter_modules(specs.__path__), key=lambda m: m.name):
        spec = importlib.import_module(f"{specs.__name__}.{info.name}").SPEC
        if spec.module != info.name:
            raise RuntimeError(f"specs/{info.name}.py describes module {spec.module!r}: name them alike")
        found[spec.name] = spec
    return found


REGISTRY: dict[str, Experiment] = _built_in()


class UnknownExperiment(KeyError):
    pass


def register(exp: Experiment) -> None:
    """Add a lesson pack's experiment; a name already taken (built-in or another pack's) is refused."""
    taken = REGISTRY.get(exp.name)
    if taken is not None and taken is not exp:
        raise ValueError(f"experiment {exp.name!r} is already defined; choose another name")
    REGISTRY[exp.name] = exp


def get(name: str) -> Experiment:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownExperiment(f"unknown experiment {name!r}; available: {', '.join(sorted(REGISTRY))}") from None


def start(name: str, values: dict[str, Any] | None = None, device: str | None = None) -> Generator[Event, None, None]:
    """Validate params, resolve the device, and return the experiment's event stream.

    `device` (the CLI's --device or the app's setting) is used unless `values` names one.
    Raises UnknownExperiment, pydantic.ValidationError or devices.DeviceError before any
    work starts; errors during the run surface while iterating.
    """
    from tutor.experiments import devices

    exp = get(name)
    params = exp.make_params(values)
    dev = devices.resolve(params.device or device)
    return _within_the_gpu_cap(exp.load(), params, dev, exp.name)


def _within_the_gpu_cap(measure: Any, params: Params, dev: Any, name: str = "") -> Generator[Event, None, None]:
    """The run, under the shared-GPU cap (gpu_share.py) while it runs, whoever iterates it. A run
    that reports an interval beside a metric (NAME_low, NAME_high) also reports what else the
    machine was doing meanwhile (noise.py), so an undecided verdict comes with its reason. On a
    machine a class shares (a class folder), the run first waits its turn for a slot of its
    device and holds it to the end (measurement/slots.py); run now instead, its metrics say
    `timing_shared` and no prediction is graded on them."""
    from tutor import threads
    from tutor.experiments import gpu_share, turns
    from tutor.experiments.events import Finished
    from tutor.measurement import noise, slots

    with gpu_share.capped(dev):
        key = slots.device_key(dev.kind, dev.index)
        turn = yield from turns.wait_turn(key, name)
        try:
            threads.apply()  # decided once for the whole run, in its turn: its timings compare like with like
            before = noise.read(dev)
            for event in measure(params, dev):
                if isinstance(event, Finished) and _has_interval(event.metrics):
                    after = noise.read(dev)
                    event = Finished(
                        {
                            **event.metrics,
                            noise.NOISE_WHY: noise.why(before, after),
                            noise.NOISE_GATE: noise.gate(before, after),
                        }
                    )
                if isinstance(event, Finished) and turn.shared:
                    event = Finished({**event.metrics, slots.TIMING_SHARED: True})
                yield event
        finally:
            turn.release()
            slots.choose_run_now(False)  # a choice is for one run


def _has_interval(metrics: dict[str, Any]) -> bool:
    return any(name.endswith("_low") and name[:-4] in metrics and metrics.get(name) is not None for name in metrics)
