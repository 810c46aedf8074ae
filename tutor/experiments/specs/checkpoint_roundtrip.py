"""The spec of `checkpoint-roundtrip`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/checkpoint_roundtrip.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import WRITES_FILE, Experiment, Metric, Params


class CheckpointParams(Params):
    steps: int = Field(200, ge=1, le=100000, description="training steps before saving")
    batch_size: int = Field(64, ge=1)
    path: str | None = Field(
        None,
        description="where to write the checkpoint (default: a scratch file in the cache dir, removed after)",
        json_schema_extra=WRITES_FILE,
    )


SPEC = Experiment(
    name="checkpoint-roundtrip",
    title="Save on the training device, load on the CPU",
    module="checkpoint_roundtrip",
    params=CheckpointParams,
    metrics={
        "allclose": Metric(
            "predictions match after loading",
            "bool",
            "torch.allclose(predictions before saving, after loading on the CPU)",
        ),
        "max_abs_diff": Metric(
            "largest prediction difference", "", "largest absolute difference between the two predictions"
        ),
        "file_bytes": Metric("checkpoint size", "B", "checkpoint size in bytes"),
        "saved_on": Metric("trained and saved on", "text", "device the model trained and was saved on"),
        "cpu_only_load_error": Metric(
            "error without map_location",
            "text",
            "the error of a GPU-saved checkpoint loaded with plain torch.load where no GPU is visible",
            none="could not be tried",
        ),
        "loads_without_map_location": Metric(
            "GPU file loads, no map_location",
            "bool",
            "False when plain torch.load of a GPU-saved checkpoint failed where no GPU is visible",
            none="could not be tried",
        ),
        "loaded_on": Metric("loaded onto", "text", "device the checkpoint was loaded onto (cpu)"),
        "epoch": Metric("epoch in the checkpoint", "", "epoch stored in the checkpoint"),
        "loss": Metric("loss in the checkpoint", "", "loss stored in the checkpoint"),
        "cpu_call_moves_model": Metric(
            "model.cpu() moved the model itself", "bool", "True if model.cpu() returned the same module, moved in place"
        ),
        "params_after_cpu_call": Metric(
            "parameters after model.cpu()",
            "text",
            "device of the live model's parameters after model.cpu().state_dict()",
        ),
    },
    quick={"steps": 20},
)
