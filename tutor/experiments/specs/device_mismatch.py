"""The spec of `device-mismatch`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/device_mismatch.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class DeviceMismatchParams(Params):
    reverse: bool = Field(False, description="the reverse mistake: batches moved, the model left on the CPU")


SPEC = Experiment(
    name="device-mismatch",
    title="Model on one device, data on another",
    module="device_mismatch",
    params=DeviceMismatchParams,
    metrics={
        "error_type": Metric("error type", "text", "the exception's type, e.g. RuntimeError", none="no error"),
        "error_message": Metric("error message", "text", "the exception's message", none="no error"),
        "error_line": Metric("line that raised it", "text", "the source line that raised it"),
        "model_device": Metric("model's device", "text", "where the model's parameters were"),
        "input_device": Metric("batch's device", "text", "where the batch was"),
        "batch_to_error": Metric(
            "the lab's batch.to(device)", "text", "what batch.to(device) on a loader's batch raised", none="no error"
        ),
        "method": Metric(
            "how the mismatch was made", "text", "cuda/mps (real accelerator) or meta (stand-in without one)"
        ),
    },
    quick={},
)
