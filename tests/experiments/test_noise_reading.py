"""noise.py reads the machine for real: another program's work beside a measurement is counted,
and on a CUDA GPU NVML is read (other processes, utilisation, clock reasons)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types

import pytest
import torch

from tutor.experiments import devices
from tutor.measurement import noise


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="no /proc/stat (macOS): the load average stands in")
def test_a_busy_process_beside_a_measurement_is_seen_for_real():
    before = noise.read()
    assert before.busy_s is not None  # read from /proc/stat
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        _wait_until_it_has_burned(burner.pid, cpu_seconds=1.0)
        after = noise.read()  # read while it burns: a process not yet waited for is not this one's own
    finally:
        burner.kill()
        burner.wait()
    # One core's worth of another program's work over the interval: counted against one core.
    assert noise.others_cpu_share(before, after, cores=1) >= 0.5


def _wait_until_it_has_burned(pid: int, cpu_seconds: float, within: float = 60.0) -> None:
    """Until process `pid` has used `cpu_seconds` of CPU (utime + stime in /proc/PID/stat): on a
    loaded machine that takes longer than the same wall time."""
    tick = os.sysconf("SC_CLK_TCK")
    until = time.monotonic() + within
    while time.monotonic() < until:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        if (int(fields[11]) + int(fields[12])) / tick >= cpu_seconds:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} did not get {cpu_seconds:g} s of CPU within {within:g} s")


# ---------------------------------------------------------------- NVML, stood in for (no GPU needed)

GIB = 2**30
CARD_UUID = "GPU-11111111-2222-3333-4444-555555555555"
SLICE_UUIDS = ["MIG-aaaaaaaa-0000-0000-0000-000000000000", "MIG-bbbbbbbb-0000-0000-0000-000000000001"]
POWER_CAP = 0x4


def fake_nvml(monkeypatch, *, mig=False, processes=None, event_reasons=True, torch_uuid=None, context=True, reserved=0):
    """A pynvml in sys.modules and the torch.cuda calls noise.py makes: a card (with MIG, two
    slices, the second torch's), each handle's processes, held to its power limit."""

    class Error(Exception):
        pass

    procs = processes or {}

    def listed(handle):
        if handle not in procs:
            raise Error("Insufficient Permissions")
        return [types.SimpleNamespace(pid=pid, usedGpuMemory=mib * 2**20) for pid, mib in procs[handle]]

    def utilization(handle):
        if mig:
            raise Error("Not Supported")
        return types.SimpleNamespace(gpu=42)

    def event_reasons_(handle):
        if not event_reasons:
            raise Error("Function Not Found")  # an R470 driver under a recent binding
        return POWER_CAP

    nvml = types.ModuleType("pynvml")
    nvml.NVML_DEVICE_MIG_ENABLE = 1
    nvml.nvmlClocksEventReasonSwPowerCap = nvml.nvmlClocksThrottleReasonSwPowerCap = POWER_CAP
    nvml.nvmlInit = nvml.nvmlShutdown = lambda: None
    nvml.nvmlDeviceGetHandleByPciBusId = lambda bus: "card"
    nvml.nvmlDeviceGetMigMode = lambda h: [1, 1] if mig else [0, 0]
    nvml.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7
    nvml.nvmlDeviceGetMigDeviceHandleByIndex = lambda h, i: f"slice{i}" if i < 2 else (_ for _ in ()).throw(Error())
    nvml.nvmlDeviceGetUUID = lambda h: CARD_UUID if h == "card" else SLICE_UUIDS[int(h[-1])]
    nvml.nvmlDeviceGetComputeRunningProcesses = listed
    nvml.nvmlDeviceGetUtilizationRates = utilization
    nvml.nvmlDeviceGetCurrentClocksEventReasons = event_reasons_
    nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda h: POWER_CAP
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    # torch prints its CUDA UUID bare, without NVML's "GPU-" / "MIG-"
    props = types.SimpleNamespace(
        pci_domain_id=0, pci_bus_id=0x1B, pci_device_id=0, uuid=torch_uuid or SLICE_UUIDS[1].removeprefix("MIG-")
    )
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: props)
    monkeypatch.setattr(torch._C, "_cuda_hasPrimaryContext", lambda index: context, raising=False)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda index=0: reserved)
    return types.SimpleNamespace(kind="cuda", index=0)


def test_on_a_mig_slice_its_own_processes_are_read_not_the_refused_cards(monkeypatch):
    dev = fake_nvml(
        monkeypatch, mig=True, processes={"slice0": [(700, 9000)], "slice1": [(os.getpid(), 900), (800, 2048)]}
    )
    gpu = noise.read(dev).gpu
    assert gpu is not None, "the card's refused process list took every reading with it"
    assert (gpu.others, gpu.others_mib) == (1, 2048)  # the stranger on this slice, not the other slice's
    assert gpu.utilization is None  # not supported on MIG: left out, not guessed
    assert gpu.throttle == ("held to its power limit",)  # the clocks are the card's


def test_a_mig_slice_not_found_by_its_uuid_says_nothing_of_processes(monkeypatch):
    dev = fake_nvml(monkeypatch, mig=True, processes={"card": [(700, 9000)]}, torch_uuid="0" * 32)
    gpu = noise.read(dev).gpu
    assert gpu is not None and gpu.others is None and gpu.utilization is None
    quiet = noise.Reading(0.0, 0.0, 0.0, 0.0, None, gpu)
    assert "no other process was on the GPU" not in noise.why(quiet, quiet, cores=1)


def test_in_a_container_this_run_under_its_host_pid_is_not_another_process(monkeypatch):
    # The driver lists host PIDs: neither is os.getpid(); the 1.5 GiB one holds what torch reserved.
    dev = fake_nvml(monkeypatch, processes={"card": [(91234, 1536), (91240, 10240)]}, reserved=1 * GIB)
    gpu = noise.read(dev).gpu
    assert (gpu.others, gpu.others_mib) == (1, 10240)
    # Without a CUDA context of its own this process is in no list: both are others.
    dev = fake_nvml(monkeypatch, processes={"card": [(91234, 1536), (91240, 10240)]}, context=False)
    assert noise.read(dev).gpu.others == 2


def test_a_driver_without_clocks_event_reasons_is_read_by_the_older_call(monkeypatch):
    dev = fake_nvml(monkeypatch, processes={"card": []}, event_reasons=False)
    gpu = noise.read(dev).gpu
    assert gpu.throttle == ("held to its power limit",) and gpu.others == 0 and gpu.utilization == 42


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NVML)")
def test_nvml_reads_this_gpu():
    dev = devices.resolve("cuda")
    torch.ones(1, device=dev.torch_device)  # a context of its own: this process is never "another"
    reading = noise.read(dev)
    assert reading.gpu is not None, "nvidia-ml-py is a dependency on Linux: NVML should answer on a CUDA box"
    import pynvml

    pynvml.nvmlInit()
    try:
        card = noise._nvml_handle(pynvml, dev.index or 0)
        try:
            mig = pynvml.nvmlDeviceGetMigMode(card)[0] == pynvml.NVML_DEVICE_MIG_ENABLE
        except pynvml.NVMLError:
            mig = False
        if mig:  # the slice's own handle, found by torch's UUID; MIG reports no utilisation
            assert noise._slice_handle(pynvml, card, dev.index or 0) not in (None, card)
        else:  # others may share the card: any count
            assert reading.gpu.others is not None and reading.gpu.others >= 0
            assert reading.gpu.utilization is not None
    finally:
        pynvml.nvmlShutdown()
    assert reading.gpu.throttle is not None
    assert isinstance(noise.why(reading, noise.read(dev), cores=1), str)


def test_doctor_reads_a_mig_slice_and_the_other_processes_on_it(monkeypatch):
    """`doctor`'s sharing line, through the same NVML session the noise reading opens."""
    dev = fake_nvml(monkeypatch, mig=True, processes={"slice1": [(os.getpid(), 900), (800, 2048)]})
    assert noise.sharing(dev) == noise.Sharing(mig=True, others=1, others_mib=2048)
    whole = fake_nvml(monkeypatch, processes={"card": [(91240, 10240)]}, context=False)
    assert noise.sharing(whole) == noise.Sharing(mig=False, others=1, others_mib=10240)
    assert noise.sharing(types.SimpleNamespace(kind="cpu", index=None)) is None
