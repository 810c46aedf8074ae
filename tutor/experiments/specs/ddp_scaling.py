"""The spec of `ddp-scaling`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` (and each rank's `rank_main`) in
tutor/experiments/ddp_scaling.py."""

from __future__ import annotations

from pydantic import Field, field_validator

from tutor.experiments.spec import Experiment, Metric, Params

MAX_SWEEP = 6  # per-rank batch sizes in the sweep


def sweep_sizes(text: str) -> list[int]:
    """The per-rank batch sizes of the crossover sweep: "4,16,64,256" -> [4, 16, 64, 256]."""
    sizes = sorted({int(part) for part in text.replace(" ", "").split(",") if part})
    if not sizes:
        raise ValueError("sweep needs at least one per-rank batch size, e.g. 4,16,64,256")
    if len(sizes) > MAX_SWEEP:
        raise ValueError(f"sweep takes at most {MAX_SWEEP} batch sizes, got {len(sizes)}")
    if sizes[0] < 1 or sizes[-1] > 1024:
        raise ValueError("each batch size in sweep must be 1 to 1024")
    return sizes


class DdpScalingParams(Params):
    world_size: int = Field(2, ge=2, le=8, description="processes torchrun starts (ranks): N")
    batch_size: int = Field(64, ge=1, le=1024, description="samples per rank per step, the same at world size 1 and N")
    steps: int = Field(30, ge=5, le=500, description="timed steps per measurement, after the warm-up")
    warmup: int = Field(5, ge=1, le=100, description="untimed steps before each measurement")
    rounds: int = Field(
        5, ge=1, le=10, description="world size 1 and N are timed in turns this many times; the medians are kept"
    )
    sweep: str = Field("4,16,64,256", description="per-rank batch sizes for the compute against all-reduce table")
    bucket_cap_mb: float = Field(
        25.0, gt=0, le=1024, description="DistributedDataParallel's bucket_cap_mb (25: its default)"
    )
    lr: float = Field(0.01, gt=0, le=10, description="SGD's learning rate")

    @field_validator("sweep")
    @classmethod
    def _sweep(cls, value: str) -> str:
        return ",".join(str(s) for s in sweep_sizes(value))


SPEC = Experiment(
    name="ddp-scaling",
    title="DDP scaling: samples/s at 1 and N processes, and what the all-reduce costs",
    module="ddp_scaling",
    params=DdpScalingParams,
    metrics={
        "world_size": Metric("processes (world size)", "", "N: ranks torchrun started"),
        "backend": Metric("backend", "text", "gloo (CPU processes) or nccl (one GPU per rank)"),
        "cpu_cores": Metric("CPU cores here", "", "os.cpu_count(): the cores the ranks share on a gloo run"),
        "per_rank_batch": Metric("batch per rank", "", "samples each rank computes per step, at 1 and at N"),
        "parameters": Metric("parameters", "", "MNISTClassifier's parameter count"),
        "allreduce_bytes": Metric(
            "gradient bytes all-reduced per step",
            "B",
            "the sizes of DDP's buckets, read by a comm hook: 4 B x parameters",
        ),
        "bucket_count": Metric(
            "DDP buckets (all-reduces per step)",
            "",
            "calls of a DDP communication hook in one step, after DDP rebuilt its buckets",
        ),
        "single_samples_per_s": Metric(
            "samples/s, 1 process",
            "/s",
            "a plain model (no DDP) in rank 0 while the other ranks wait, median of rounds",
        ),
        "ddp_samples_per_s": Metric(
            "samples/s, N processes under DDP",
            "/s",
            "N x batch per rank x steps / the slowest rank's time, median of rounds",
        ),
        "speedup": Metric("speedup, N processes against 1", "x", "ddp_samples_per_s / single_samples_per_s"),
        "scaling_efficiency": Metric(
            "scaling efficiency", "%", "ddp_samples_per_s / (N x single_samples_per_s); 100% is perfect scaling"
        ),
        "compute_seconds": Metric(
            "compute per step", "s", "a DDP step inside no_sync() (no all-reduce), slowest rank, median"
        ),
        "allreduce_seconds": Metric(
            "all-reduce per step",
            "s",
            "blocking dist.all_reduce of DDP's bucket sizes after a barrier, slowest rank, median",
        ),
        "ddp_step_seconds": Metric(
            "DDP step", "s", "forward, backward with DDP's all-reduce, SGD step; slowest rank, median"
        ),
        "exposed_comm_seconds": Metric(
            "time the all-reduce added to a step",
            "s",
            "DDP step - compute per step: communication not hidden behind backward, waits included",
        ),
        "comm_compute_ratio": Metric("all-reduce / compute per step", "x", "allreduce_seconds / compute_seconds"),
        "crossover_batch": Metric(
            "smallest batch where compute won",
            "",
            "the smallest per-rank batch of the sweep whose compute per step exceeded its all-reduce (None: none did)",
            none="none in the sweep",
        ),
        "load_average": Metric("load average when it started", "", "os.getloadavg()[0]: other work on the machine"),
        "launch_seconds": Metric(
            "launch: until every rank joined",
            "s",
            "torchrun started to every rank in the process group (python, torch, rendezvous)",
        ),
        "job_seconds": Metric("whole job", "s", "torchrun started to all processes ended"),
        "attempts": Metric("launches", "", "torchrun launches it took (a failed start is tried once more)"),
    },
    quick={"steps": 5, "warmup": 1, "rounds": 1, "sweep": "4,64"},
)
