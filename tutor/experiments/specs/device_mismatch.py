"""The spec of `device-mismatch`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/device_mismatch.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Params


class DeviceMismatchParams(Params):
    reverse: bool = Field(False, description="the reverse mistake: batches moved, the model left on the CPU")


SPEC = Experiment(
    name='device-mismatch',
    title='Model on one device, data on another',
    module='device_mismatch',
    params=DeviceMismatchParams,
    metrics={
        "error_type": "the exception's type, e.g. RuntimeError",
        "error_message": "the exception's message",
        "error_line": "the source line that raised it",
        "model_device": "where the model's parameters were",
        "input_device": "where the batch was",
        "method": "cuda/mps (real accelerator) or meta (stand-in without one)",
    },
    quick={},
)
