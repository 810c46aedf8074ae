"""The spec of `ddp-checkpoint`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` (and each rank's `rank_main`) in
tutor/experiments/ddp_checkpoint.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class DdpCheckpointParams(Params):
    world_size: int = Field(2, ge=2, le=4, description="processes torchrun starts (ranks)")
    batch_size: int = Field(64, ge=2, le=8192, description="the global batch: each rank trains batch_size / world_size")
    steps: int = Field(20, ge=1, le=500, description="DDP training steps before the checkpoints are saved")
    lr: float = Field(0.1, gt=0, le=10, description="SGD's learning rate")
    test_samples: int = Field(
        1000, ge=10, le=10000, description="the first N MNIST test images the models are scored on"
    )

    @model_validator(mode="after")
    def _divisible(self) -> DdpCheckpointParams:
        if self.batch_size % self.world_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be a multiple of world_size ({self.world_size})")
        return self


SPEC = Experiment(
    name="ddp-checkpoint",
    title="Checkpoints under DDP: who saves, and the module. prefix",
    module="ddp_checkpoint",
    params=DdpCheckpointParams,
    metrics={
        "world_size": Metric("processes (world size)", "", "ranks torchrun started"),
        "backend": Metric("backend", "text", "gloo (CPU processes) or nccl (one GPU per rank)"),
        "checkpoint_bytes": Metric("one checkpoint file", "B", "the size of model.module.state_dict() saved"),
        # every rank saves against rank 0 saves
        "every_rank_writes": Metric(
            "every rank saves: torch.save calls",
            "",
            "calls to torch.save on the same path, counted on every rank and summed",
        ),
        "every_rank_written_bytes": Metric(
            "every rank saves: bytes written", "B", "the same file written once per rank"
        ),
        "every_rank_save_seconds": Metric(
            "every rank saves: slowest torch.save",
            "s",
            "the slowest rank's torch.save, all ranks writing one path at once",
        ),
        "every_rank_file_intact": Metric(
            "every rank saves: file loads whole",
            "bool",
            "True if the file all ranks wrote loaded afterwards and held the model's "
            "weights (one local disk; a shared filesystem may tear it)",
        ),
        "rank0_writes": Metric("rank 0 saves: torch.save calls", "", "calls to torch.save, summed over the ranks"),
        "rank0_written_bytes": Metric("rank 0 saves: bytes written", "B", "one file, written once"),
        "rank0_save_seconds": Metric("rank 0 saves: torch.save", "s", "rank 0's torch.save, alone"),
        "early_read": Metric(
            "reading before the barrier",
            "text",
            "what rank 1 got from torch.load of rank 0's file while rank 0 was saving it "
            "(no barrier): varies from run to run",
        ),
        "loaded_on_every_rank": Metric(
            "every rank loaded rank 0's file",
            "bool",
            "True if after dist.barrier() every rank loaded the file (map_location, "
            "weights_only=True) and its weights equal the rank's own",
        ),
        # the module. prefix
        "prefixed_key_share": Metric(
            "DDP's keys with module. prefix",
            "%",
            "share of the DDP model's state_dict() keys that begin with 'module.'",
        ),
        "ddp_first_key": Metric("DDP's first state_dict key", "text", "the first key of ddp_model.state_dict()"),
        "plain_load_error": Metric(
            "plain model's load_state_dict error",
            "text",
            "the first lines of the RuntimeError load_state_dict raised on DDP's state_dict",
        ),
        "ddp_accuracy": Metric("DDP model: test accuracy", "%", "the DDP model's module scored on the test slice"),
        "unwrapped_accuracy": Metric(
            "saved model.module: test accuracy",
            "%",
            "a plain MNISTClassifier loaded from model.module.state_dict()'s file",
        ),
        "stripped_accuracy": Metric(
            "prefix stripped: test accuracy",
            "%",
            "a plain MNISTClassifier loaded from DDP's state_dict after "
            "consume_prefix_in_state_dict_if_present(sd, 'module.')",
        ),
        "fixes_identical": Metric(
            "both fixes give DDP's exact weights",
            "bool",
            "True if both plain models' weights equal the DDP model's, bit for bit",
        ),
        "folder_removed": Metric(
            "run's folder removed", "bool", "True if the temporary folder the job wrote in is gone after the run"
        ),
        "launch_seconds": Metric(
            "launch: until every rank joined",
            "s",
            "torchrun started to every rank in the process group (python, torch, rendezvous)",
        ),
        "job_seconds": Metric("whole job", "s", "torchrun started to all processes ended"),
        "attempts": Metric("launches", "", "torchrun launches it took (a failed start is tried once more)"),
    },
    quick={"steps": 4, "test_samples": 200},
)
