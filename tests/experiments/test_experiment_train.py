"""The `train` experiment on small data: real outcomes, not timings."""

from __future__ import annotations

import math
import types
from pathlib import Path

import pytest
import torch

from tutor import errors, experiments
from tutor.experiments import train as train_module
from tutor.experiments import training
from tutor.experiments.events import Epoch, Finished, Note, Started, Step
from tutor.experiments.model import MNISTClassifier
from tutor.experiments.training import report_interval
from tutor.measurement.warmup import WarmUp

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_mnist = pytest.mark.skipif(
    not (SHARED_DATA / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file(), reason="real MNIST not present"
)
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
SMALL = {"epochs": 1, "train_samples": 2048, "test_samples": 512, "batch_size": 128}


def run(values: dict, device: str = "cpu") -> list:
    return list(experiments.start("train", values, device=device))


def run_lazily(values: dict, device: str = "cpu"):
    return experiments.start("train", values, device=device)


def finished(events: list) -> dict:
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Finished)
    return events[-1].metrics


def check_declared(metrics: dict) -> None:
    declared = experiments.get("train").metrics
    assert set(declared) <= set(metrics)
    for v in metrics.values():
        assert v is None or isinstance(v, (float, int, str, bool))


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> list:
    # Module-scoped, so it runs before conftest's function-scoped data-dir fixture: set it the same way.
    data_dir = SHARED_DATA if SHARED_DATA.is_dir() else tmp_path_factory.mktemp("no-mnist")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPUTUTOR_DATA_DIR", str(data_dir))
        return run(SMALL)


@needs_mnist
def test_learns_mnist(small_run):
    m = finished(small_run)
    check_declared(m)
    steps = [e for e in small_run if isinstance(e, Step)]
    assert steps[0].loss > steps[-1].loss
    assert m["accuracy"] > 0.5  # chance is 0.1
    assert m["best_accuracy"] == m["accuracy"]
    assert m["steps"] == math.ceil(2048 / 128)
    assert steps[-1].step == m["steps"] and steps[-1].total == m["steps"]
    assert m["device"] == "cpu" and m["data_source"] == "MNIST" and m["data_path"] == "resident"
    assert m["amp_dtype"] == "off" and m["checkpoint"] is None
    assert m["seconds_per_epoch"] > 0 and m["samples_per_s"] > 0 and m["total_seconds"] > 0
    epochs = [e for e in small_run if isinstance(e, Epoch)]
    assert len(epochs) == 1 and epochs[0].test_acc == m["accuracy"]
    assert epochs[0].train_loss == pytest.approx(m["final_loss"])
    notes = " ".join(e.text for e in small_run if isinstance(e, Note))
    assert "cpu" in notes and "MNIST" in notes and "resident" in notes


def test_loss_is_reported_in_batches_not_every_step():
    # A full MNIST epoch at batch 64 is 938 steps: 50-100 Step events, not 938.
    every = report_interval(938)
    assert 50 <= math.ceil(938 / every) <= 100


def test_train_epoch_reports_every_n_steps_and_marks_the_last():
    from tutor.experiments.training import train_epoch

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(8, 4), torch.randint(3, (8,))) for _ in range(10)]
    reports = list(train_epoch(model, opt, batches, "cpu", report_every=3))
    assert [r.steps for r in reports] == [3, 6, 9, 10]
    assert [r.done for r in reports] == [False, False, False, True]
    assert reports[-1].samples == 80
    capped = list(train_epoch(model, opt, batches, "cpu", report_every=3, max_steps=4))
    assert [r.steps for r in capped] == [3, 4] and capped[-1].done


@needs_mnist
def test_checkpoint_loads_with_weights_only(tmp_path):
    path = tmp_path / "sub" / "best.pt"
    events = run({**SMALL, "epochs": 2, "train_samples": 1024, "checkpoint": str(path)})
    m = finished(events)
    assert m["checkpoint"] == str(path) and path.is_file()
    ck = torch.load(path, map_location="cpu", weights_only=True)
    assert set(ck) == {"model_state_dict", "optimizer_state_dict", "epoch", "loss", "accuracy"}
    assert {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"} == set(ck["model_state_dict"])
    assert ck["accuracy"] == pytest.approx(m["best_accuracy"])
    best_epoch = max((e for e in events if isinstance(e, Epoch)), key=lambda e: e.test_acc)
    assert ck["epoch"] == best_epoch.epoch
    # The saved weights reproduce the accuracy in the learner's own code.
    from tutor.experiments import data

    model = MNISTClassifier()
    model.load_state_dict(ck["model_state_dict"])
    d = data.load("cpu", test_samples=512)
    with torch.no_grad():
        acc = (model(d.test_x).argmax(1) == d.test_y).float().mean().item()
    assert acc == pytest.approx(ck["accuracy"], abs=1e-6)
    opt = torch.optim.Adam(model.parameters())
    opt.load_state_dict(ck["optimizer_state_dict"])


def test_max_steps_stops_early():
    events = run({**SMALL, "epochs": 3, "max_steps": 5})
    m = finished(events)
    check_declared(m)
    assert m["steps"] == 5
    assert max(e.step for e in events if isinstance(e, Step)) == 5
    assert len([e for e in events if isinstance(e, Epoch)]) == 1
    assert any("max_steps=5" in e.text for e in events if isinstance(e, Note))
    assert math.isfinite(m["seconds_per_epoch"])


@needs_mnist
def test_loader_path_matches_resident(small_run):
    resident = finished(small_run)
    events = run({**SMALL, "data_path": "loader"})
    m = finished(events)
    check_declared(m)
    assert m["data_path"] == "loader" and m["data_source"] == "MNIST"
    assert m["steps"] == resident["steps"]
    assert m["accuracy"] > 0.5
    assert abs(m["accuracy"] - resident["accuracy"]) < 0.1
    assert any("DataLoader" in e.text for e in events if isinstance(e, Note))


def test_bf16_autocast_on_cpu():
    events = run({**SMALL, "amp": "bf16"})
    m = finished(events)
    check_declared(m)
    assert m["amp_dtype"] == "bfloat16"
    assert m["accuracy"] > 0.5
    assert any("bfloat16" in e.text for e in events if isinstance(e, Note))


def test_synthetic_fallback_is_named_and_learnable(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUTUTOR_DATA_DIR", str(tmp_path))
    events = run({**SMALL, "train_samples": 4096})
    m = finished(events)
    check_declared(m)
    assert m["data_source"] == "synthetic digits"
    started = events[0]
    assert "synthetic digits" in started.dataset and "not found" in started.dataset
    assert any(e.level == "warning" and "synthetic" in e.text for e in events if isinstance(e, Note))
    assert m["accuracy"] > 0.5


@pytest.mark.parametrize("data_path", ["resident", "loader"])
def test_warm_up_changes_neither_the_model_nor_the_batch_order(monkeypatch, tmp_path, data_path):
    values = {"epochs": 2, "train_samples": 384, "test_samples": 256, "batch_size": 64, "data_path": data_path}
    calls: list[int] = []

    def counting_warm_up(*args, **kwargs):
        calls.append(1)
        return training.warm_up(*args, **kwargs)

    monkeypatch.setattr(train_module, "warm_up", counting_warm_up)
    warm = run({**values, "checkpoint": str(tmp_path / "warm.pt")})
    assert calls == [1]
    assert any("untimed steps" in e.text and "throwaway copy" in e.text for e in warm if isinstance(e, Note))
    monkeypatch.setattr(train_module, "warm_up", lambda *args, **kwargs: WarmUp((), False))
    cold = run({**values, "checkpoint": str(tmp_path / "cold.pt")})

    def losses(events):
        return [(e.step, e.loss) for e in events if isinstance(e, Step)]

    assert losses(warm) == losses(cold)  # same batches in the same order, same updates
    mw, mc = finished(warm), finished(cold)
    assert (mw["accuracy"], mw["final_loss"]) == (mc["accuracy"], mc["final_loss"])
    a = torch.load(tmp_path / "warm.pt", weights_only=True)["model_state_dict"]
    b = torch.load(tmp_path / "cold.pt", weights_only=True)["model_state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_warm_up_trains_a_copy_and_restores_the_rng():
    model = MNISTClassifier()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = [(torch.randn(16, 1, 28, 28), torch.randint(10, (16,))) for _ in range(8)]
    rng = torch.get_rng_state()
    warmed = training.warm_up(model, batches, "cpu")
    assert training.WARMUP_STEPS <= len(warmed.times) <= len(batches) and all(t > 0 for t in warmed.times)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)
    assert len(training.warm_up(model, batches[:2], "cpu").times) == 2  # fewer batches than steps: what there is


def test_warm_up_goes_on_while_step_times_still_fall(monkeypatch):
    """Issue 37 item 4: not a fixed count. Steps whose times keep falling are warmed up past the
    minimum, up to the cap; the first step's cost (a GPU's start-up) is kept to be shown."""
    now, taken = [0.0], [0]

    def step_faster_each_time(model, opt, batches, device, **kwargs):
        for _ in batches:  # the k-th step takes 1/k s of the stand-in clock
            taken[0] += 1
            now[0] += 1.0 / taken[0]
            yield types.SimpleNamespace(steps=1)

    monkeypatch.setattr(training, "train_epoch", step_faster_each_time)
    monkeypatch.setattr(training.time, "perf_counter", lambda: now[0])
    batches = [(torch.randn(4, 1, 28, 28), torch.randint(10, (4,))) for _ in range(40)]
    warmed = training.warm_up(MNISTClassifier(), batches, "cpu", budget_s=1e9)
    assert len(warmed.times) == training.WARMUP_MOST_STEPS and not warmed.settled
    assert warmed.first == 1.0 and warmed.first > warmed.last


def test_folder_as_checkpoint_fails_before_training(tmp_path, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking the checkpoint path")

    monkeypatch.setattr(train_module, "train_epoch", no_training)
    stream = run_lazily({**SMALL, "checkpoint": str(tmp_path)})
    with pytest.raises(ValueError) as info:
        next(stream)  # nothing is yielded, not even Started
    message = errors.describe(info.value)
    assert message.startswith("The experiment failed with ValueError: checkpoint=")
    assert "is a folder, not a file" in message and str(tmp_path / "mnist.pt") in message
    assert list(tmp_path.iterdir()) == []
    assert not tmp_path.with_name(tmp_path.name + ".tmp").exists()


def test_checkpoint_under_a_file_fails_before_training(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"cannot be written: .*afile is a file, not a folder"):
        next(run_lazily({**SMALL, "checkpoint": str(tmp_path / "afile" / "best.pt")}))


def test_failed_checkpoint_save_leaves_no_tmp_file(tmp_path, monkeypatch):
    def failing_save(obj, f):
        Path(f).write_bytes(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos")

    monkeypatch.setattr(training.torch, "save", failing_save)
    with pytest.raises(RuntimeError, match="enforce fail"):
        run({**SMALL, "train_samples": 256, "checkpoint": str(tmp_path / "best.pt")})
    assert list(tmp_path.iterdir()) == []


def test_params_are_validated():
    import pydantic

    with pytest.raises(pydantic.ValidationError):
        experiments.start("train", {"amp": "fp8"})
    with pytest.raises(pydantic.ValidationError):
        experiments.start("train", {"epochs": 0})


@cuda
@pytest.mark.gpu
def test_train_on_cuda_with_amp(tmp_path):
    path = tmp_path / "gpu.pt"
    events = run({**SMALL, "amp": "auto", "checkpoint": str(path)}, device="cuda")
    m = finished(events)
    check_declared(m)
    assert m["device"].startswith("cuda") and m["amp_dtype"] == "float16"
    assert m["accuracy"] > 0.5
    ck = torch.load(path, map_location="cpu", weights_only=True)
    assert ck["model_state_dict"]["fc1.weight"].device.type == "cpu"


@cuda
@pytest.mark.gpu
def test_loader_path_on_cuda():
    m = finished(run({**SMALL, "data_path": "loader"}, device="cuda"))
    assert m["device"].startswith("cuda") and m["accuracy"] > 0.5


class _CopySpy(torch.Tensor):
    """A CPU batch that records each .to(...) call's non_blocking and stays on the CPU (so the
    choice for an MPS or CUDA target can be read here, without one)."""

    calls: list[bool] = []

    def to(self, *args, **kwargs):
        _CopySpy.calls.append(kwargs.get("non_blocking", False))
        return self.as_subclass(torch.Tensor)


def test_to_device_copies_asynchronously_only_into_cuda():
    # On MPS a non_blocking copy from pageable memory can read the batch after it is freed.
    _CopySpy.calls = []
    batch = torch.zeros(2, 3).as_subclass(_CopySpy)
    for target in ("mps", "cpu", "cuda", "cuda:1"):
        training.to_device(batch, target)
    assert _CopySpy.calls == [False, False, True, True]


def test_training_and_evaluation_copy_batches_through_to_device():
    """Both loops move each batch with to_device: nothing asks a non-CUDA target for non_blocking."""
    _CopySpy.calls = []
    torch.manual_seed(0)
    model = MNISTClassifier()
    x, y = torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))
    batches = [(x.as_subclass(_CopySpy), y.as_subclass(_CopySpy))] * 2
    list(training.train_epoch(model, torch.optim.SGD(model.parameters(), lr=0.1), batches, "cpu"))
    training.evaluate_batches(model, batches, "cpu")
    assert _CopySpy.calls == [False] * 8


@pytest.mark.gpu
def test_batches_copied_from_pageable_memory_arrive_intact(accelerator):
    """Many freshly made (and at once freed) host batches evaluated on the accelerator give the
    CPU's counts: no batch was read after its host memory was reused."""
    torch.manual_seed(0)
    model = MNISTClassifier()
    batches = [(torch.randn(256, 1, 28, 28), torch.randint(0, 10, (256,))) for _ in range(64)]
    on_cpu = training.evaluate_batches(model, batches, "cpu")
    gpu_model = model.to(accelerator)
    fresh = ((x.clone(), y.clone()) for x, y in batches)  # each host copy dropped after its .to()
    # one corrupt batch would move the accuracy by ~0.01; rounding may flip a near-tie or two
    assert training.evaluate_batches(gpu_model, fresh, accelerator) == pytest.approx(on_cpu, abs=1e-3)
