"""noise.py reads the machine for real: another program's work beside a measurement is counted,
and on a CUDA GPU NVML is read (other processes, utilisation, clock reasons)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch

from tutor.experiments import devices, noise


def test_a_busy_process_beside_a_measurement_is_seen_for_real():
    before = noise.read()
    if before.busy_s is None:  # no /proc/stat (macOS): the load average stands in
        return
    burner = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 3\nwhile time.time() < end: pass"])
    try:
        time.sleep(1.5)
        after = noise.read()  # read while it burns: a process not yet waited for is not this one's own
    finally:
        burner.kill()
        burner.wait()
    # One core's worth of another program's work over the interval: counted against one core.
    assert noise.others_cpu_share(before, after, cores=1) >= 0.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (NVML)")
def test_nvml_reads_this_gpu():
    reading = noise.read(devices.resolve("cuda"))
    assert reading.gpu is not None, "nvidia-ml-py is a dependency on Linux: NVML should answer on a CUDA box"
    assert reading.gpu.others >= 0 and reading.gpu.utilization is not None
    assert isinstance(noise.why(reading, noise.read(devices.resolve("cuda")), cores=1), str)
