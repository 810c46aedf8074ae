"""The spec of `sampler-pitfalls`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` (and each rank's `rank_main`) in
tutor/experiments/sampler_pitfalls.py."""

from __future__ import annotations

from pydantic import Field, model_validator

from tutor.experiments.spec import Experiment, Metric, Params


class SamplerPitfallsParams(Params):
    world_size: int = Field(2, ge=2, le=4, description="processes torchrun starts (ranks)")
    samples: int = Field(
        512, ge=8, le=60000, description="the first N MNIST training images: the dataset fed three ways"
    )
    batch_size: int = Field(32, ge=1, le=1024, description="each rank's DataLoader batch size")
    epochs: int = Field(2, ge=2, le=5, description="epochs per way of feeding (2 or more: epoch orders are compared)")
    lr: float = Field(0.05, gt=0, le=10, description="SGD's learning rate")
    uneven_samples: int = Field(
        515,
        ge=8,
        le=60000,
        description="dataset size of the padding check: not a multiple of world_size x "
        "batch_size, to show DistributedSampler's padding and drop_last",
    )

    @model_validator(mode="after")
    def _enough(self) -> SamplerPitfallsParams:
        if self.samples < self.world_size * self.batch_size:
            raise ValueError(
                f"samples ({self.samples}) must be at least world_size x batch_size "
                f"({self.world_size * self.batch_size}): one full batch per rank"
            )
        return self


SPEC = Experiment(
    name="sampler-pitfalls",
    title="DistributedSampler: who sees which sample, with and without set_epoch",
    module="sampler_pitfalls",
    params=SamplerPitfallsParams,
    metrics={
        "world_size": Metric("processes (world size)", "", "ranks torchrun started"),
        "backend": Metric("backend", "text", "gloo (CPU processes) or nccl (one GPU per rank)"),
        # (a) a plain shuffled DataLoader on every rank, seeded alike
        "plain_overlap": Metric(
            "plain loader: overlap between ranks",
            "%",
            "share of the samples a rank saw in an epoch that another rank also saw that "
            "epoch (mean over ranks and epochs); 0 = disjoint shards",
        ),
        "plain_distinct_per_epoch": Metric(
            "plain loader: distinct samples/epoch",
            "",
            "different samples all ranks together saw in an epoch (the fewest of any epoch)",
        ),
        "plain_trained_per_epoch": Metric(
            "plain loader: samples trained/epoch",
            "",
            "samples all ranks together ran forward and backward in an epoch, repeats counted",
        ),
        "plain_distinct_per_step": Metric(
            "plain loader: distinct samples/step",
            "",
            "different samples in one DDP step's batches over all ranks (mean "
            "over steps): the data one update learns from",
        ),
        "plain_same_order": Metric(
            "plain loader: epoch 2 repeats epoch 1",
            "bool",
            "True if on every rank each later epoch gave the samples in epoch 1's order",
        ),
        "plain_steps_per_epoch": Metric(
            "plain loader: steps per epoch",
            "",
            "DDP steps each rank took in an epoch: its loader walks the whole dataset",
        ),
        # (a') the same loaders seeded seed + rank: order only, not trained
        "rank_seeds_step_overlap": Metric(
            "seed + rank: overlap within a step",
            "%",
            "plain loaders seeded differently per rank (order only, not trained): "
            "share of a step's samples another rank also had that step",
        ),
        "rank_seeds_overlap": Metric(
            "seed + rank: overlap between ranks",
            "%",
            "the same loaders over a whole epoch: share of the samples a rank saw "
            "that another rank also saw that epoch",
        ),
        # (b) DistributedSampler, set_epoch(epoch) every epoch
        "set_epoch_overlap": Metric(
            "set_epoch: overlap between ranks", "%", "DistributedSampler with set_epoch: as plain_overlap"
        ),
        "set_epoch_distinct_per_epoch": Metric(
            "set_epoch: distinct samples/epoch", "", "DistributedSampler with set_epoch: as plain_distinct_per_epoch"
        ),
        "set_epoch_trained_per_epoch": Metric(
            "set_epoch: samples trained/epoch", "", "DistributedSampler with set_epoch: as plain_trained_per_epoch"
        ),
        "set_epoch_distinct_per_step": Metric(
            "set_epoch: distinct samples/step", "", "DistributedSampler with set_epoch: as plain_distinct_per_step"
        ),
        "set_epoch_same_order": Metric(
            "set_epoch: epoch 2 repeats epoch 1",
            "bool",
            "True if on every rank each later epoch gave epoch 1's order (it should not)",
        ),
        "set_epoch_steps_per_epoch": Metric(
            "set_epoch: steps per epoch",
            "",
            "DDP steps each rank took in an epoch: its shard, 1/world_size of the dataset",
        ),
        # (c) DistributedSampler, set_epoch forgotten
        "no_set_epoch_overlap": Metric(
            "no set_epoch: overlap between ranks", "%", "DistributedSampler without set_epoch: as plain_overlap"
        ),
        "no_set_epoch_distinct_per_epoch": Metric(
            "no set_epoch: distinct samples/epoch",
            "",
            "DistributedSampler without set_epoch: as plain_distinct_per_epoch",
        ),
        "no_set_epoch_trained_per_epoch": Metric(
            "no set_epoch: samples trained/epoch",
            "",
            "DistributedSampler without set_epoch: as plain_trained_per_epoch",
        ),
        "no_set_epoch_same_order": Metric(
            "no set_epoch: epoch 2 repeats epoch 1",
            "bool",
            "True if on every rank each later epoch gave epoch 1's order",
        ),
        # a dataset that does not split evenly: uneven_samples
        "padded_total": Metric(
            "padding: samples given per epoch",
            "",
            "DistributedSampler (drop_last=False) over uneven_samples: indices all ranks got, "
            "padded up to a multiple of world_size",
        ),
        "padded_repeats": Metric(
            "padding: samples given twice",
            "",
            "padded_total minus distinct samples: repeated from the start of the shuffled list",
        ),
        "drop_last_total": Metric(
            "sampler drop_last: samples per epoch",
            "",
            "DistributedSampler(drop_last=True) over uneven_samples: indices all ranks got",
        ),
        "drop_last_unseen": Metric(
            "sampler drop_last: samples left out", "", "samples of uneven_samples no rank got that epoch"
        ),
        "loader_drop_last_cut": Metric(
            "loader drop_last: samples cut/epoch",
            "",
            "DataLoader(drop_last=True) on each rank's padded shard: every rank's last, short batch, summed",
        ),
        "launch_seconds": Metric(
            "launch: until every rank joined",
            "s",
            "torchrun started to every rank in the process group (python, torch, rendezvous)",
        ),
        "job_seconds": Metric("whole job", "s", "torchrun started to all processes ended"),
        "attempts": Metric("launches", "", "torchrun launches it took (a failed start is tried once more)"),
    },
    quick={"samples": 128, "batch_size": 16, "uneven_samples": 131},
)
