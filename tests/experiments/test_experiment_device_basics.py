"""device-basics: the machine's devices as PyTorch reports them, and a model's parameters placed."""

from __future__ import annotations

import pytest
import torch
from experiment_runs import run_experiment

from tutor import experiments
from tutor.experiments import devices
from tutor.experiments.events import Note, Table
from tutor.experiments.model import MNISTClassifier


def run(device):
    return run_experiment("device-basics", {}, device)


def test_cpu_run_reports_what_pytorch_sees_and_says_there_is_no_gpu():
    events, m = run("cpu")
    assert set(experiments.get("device-basics").metrics) == set(m)
    assert m["device"] == "cpu" and m["all_on_device"] is True and m["parameter_devices"] == "cpu"
    assert m["cuda_available"] is torch.cuda.is_available()
    assert m["devices"].endswith("cpu")
    assert m["total_memory_gib"] is None and m["compute_capability"] is None
    assert m["tf32_active"] is False  # TF32 is a CUDA 8.0+ matter, whatever the flag says
    assert m["tf32_matmul"] is torch.backends.cuda.matmul.allow_tf32
    assert m["float32_matmul_precision"] == torch.get_float32_matmul_precision()
    expected = sum(t.numel() for t in MNISTClassifier().parameters())
    assert m["parameters"] == expected == 235_146 and m["parameter_bytes"] == 4 * expected
    tables = {e.title: e for e in events if isinstance(e, Table)}
    placed = tables["MNISTClassifier().to(device): every parameter"]
    assert [row[0] for row in placed.rows] == [name for name, _ in MNISTClassifier().named_parameters()]
    assert all(row[3] == "cpu" for row in placed.rows)
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "235,146 parameters" in notes and "940,584 bytes" in notes
    if not torch.cuda.is_available():
        assert "No GPU here" in notes


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_run_places_every_parameter_on_the_gpu():
    events, m = run("cuda")
    props = torch.cuda.get_device_properties(0)
    assert m["device"].startswith("cuda") and m["all_on_device"] is True
    assert m["parameter_devices"].startswith("cuda")
    assert m["compute_capability"] == f"{props.major}.{props.minor}"
    assert m["total_memory_gib"] == pytest.approx(props.total_memory / 2**30, abs=0.01)
    assert m["tensor_cores"] is (props.major >= 7)
    assert m["tf32_active"] is (props.major >= 8 and torch.backends.cuda.matmul.allow_tf32)
    notes = " ".join(e.text for e in events if isinstance(e, Note))
    assert "GiB free right now" in notes


@pytest.mark.parametrize(
    "brand,name",
    [
        ("Apple M2", "Apple M2 GPU (MPS)"),  # sysctl's brand string already says Apple
        ("Apple M3 Max", "Apple M3 Max GPU (MPS)"),
        ("M1", "Apple M1 GPU (MPS)"),
    ],
)
def test_the_mac_gpu_is_named_by_its_chip_once(brand, name):
    from tutor.experiments import devices

    assert devices.mps_name(brand) == name


@pytest.mark.gpu
def test_any_accelerator_gets_every_parameter(accelerator):
    _events, m = run(accelerator)
    assert m["device"].startswith(accelerator) and m["all_on_device"] is True
    assert m["parameter_devices"].startswith(accelerator)


@pytest.mark.parametrize(
    "machine, cpuinfo, native",
    [
        ("aarch64", "processor\t: 0\nFeatures\t: fp asimd evtstrm aes sve bf16 i8mm\n", True),  # Graviton 3
        ("aarch64", "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32\n", False),  # Graviton 2
        ("x86_64", "flags\t\t: fpu sse avx2 avx512f avx512_bf16\n", False),  # x86 is read from its flags instead
    ],
)
def test_arm_bfloat16_is_detected_from_its_features(monkeypatch, machine, cpuinfo, native):
    """Native bfloat16 is not x86-only (AVX512-BF16/AMX): ARM has a BF16 extension (issue 25)."""
    import io

    from tutor.experiments import devices

    monkeypatch.setattr(devices.platform, "machine", lambda: machine)
    monkeypatch.setattr(devices.platform, "system", lambda: "Linux")
    monkeypatch.setattr(devices, "open", lambda *a, **k: io.StringIO(cpuinfo), raising=False)
    assert devices._arm_bf16() is native
    assert devices._cpu_flag("avx512_bf16") is ("avx512_bf16" in cpuinfo)


def test_free_memory_is_read_for_the_chosen_gpu_only(monkeypatch):
    """torch.cuda.mem_get_info(i) creates a context on card i: on a shared 8-GPU box, detection
    asking every card would leave each tutor and exercise holding hundreds of MiB on all 8."""
    import types

    import torch

    asked = []

    def mem_get_info(index):
        asked.append(index)
        return (30 << 30, 80 << 30)

    props = types.SimpleNamespace(name="NVIDIA H100 80GB HBM3", major=9, minor=0, total_memory=80 << 30)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    devices.available.cache_clear()
    try:
        assert [d.torch_device for d in devices.available()][:4] == ["cuda:0", "cuda:1", "cuda:2", "cuda:3"]
        chosen = devices.resolve("cuda:2")
        assert devices.resolve("cuda:3", free_memory=False).free_memory is None  # a gloo rank's lab: no context
    finally:
        devices.available.cache_clear()
    assert asked == [2] and chosen.free_memory == 30 << 30
    assert "30.0 of 80.0 GiB free (50.0 GiB held by other processes" in chosen.sharing()
