"""The spec of `checkpoint-roundtrip`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/checkpoint_roundtrip.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import WRITES_FILE, Experiment, Params


class CheckpointParams(Params):
    steps: int = Field(200, ge=1, le=100000, description="training steps before saving")
    batch_size: int = Field(64, ge=1)
    path: str | None = Field(None, description="where to write the checkpoint (default: a scratch file in the "
                             "cache dir, removed after)", json_schema_extra=WRITES_FILE)


SPEC = Experiment(
    name='checkpoint-roundtrip',
    title='Save on the training device, load on the CPU',
    module='checkpoint_roundtrip',
    params=CheckpointParams,
    metrics={
        "allclose": "torch.allclose(predictions before saving, after loading on the CPU)",
        "max_abs_diff": "largest absolute difference between the two predictions",
        "file_bytes": "checkpoint size in bytes",
        "saved_on": "device the model trained and was saved on",
        "loaded_on": "device the checkpoint was loaded onto (cpu)",
        "epoch": "epoch stored in the checkpoint",
        "loss": "loss stored in the checkpoint",
    },
    quick={"steps": 20},
)
