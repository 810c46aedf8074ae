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
        held: list[slots.Turn] = []
        try:
            # each device the run times, in index order: two runs wanting cuda:0 and cuda:1 never
            # hold one each while waiting for the other
            for key in slot_keys(params, dev):
                held.append((yield from turns.wait_turn(key, name)))
            turn = slots.Turn(shared=any(t.shared for t in held))
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
            for taken in held:
                taken.release()
            slots.choose_run_now(False)  # a choice is for one run


def slot_keys(params: Params, dev: Any) -> list[str]:
    """The class-queue slots a run holds: its device's; a distributed run's (world_size ranks)
    one per GPU where NCCL gives each rank its own (cuda:0 ... cuda:N-1), else the CPU's, where
    its gloo processes run whatever device was asked for."""
    from tutor.measurement import slots

    world_size = getattr(params, "world_size", None)
    if not isinstance(world_size, int):
        return [slots.device_key(dev.kind, dev.index)]
    if dev.kind == "cuda" and gpu_count() >= world_size:  # distributed.choose's rule for NCCL
        return [slots.device_key("cuda", rank) for rank in range(world_size)]
    return [slots.device_key("cpu")]


def gpu_count() -> int:
    import torch  # only for a CUDA run, in the engine, where torch is loaded already

    return torch.cuda.device_count()


def _has_interval(metrics: dict[str, Any]) -> bool:
    return any(name.endswith("_low") and name[:-4] in metrics and metrics.get(name) is not None for name in metrics)
