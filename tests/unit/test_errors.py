"""tutor/errors.py: a run's exception as a sentence; out-of-memory in each allocator's words."""

from __future__ import annotations

import pytest

from tutor import errors


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError (errors.py matches by name: it imports no torch)."""


CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which "
            "1.20 GiB is free. Including non-PyTorch memory, this process has 77.80 GiB memory in use.")
MPS_OOM = ("MPS backend out of memory (MPS allocated: 17.50 GB, other allocations: 0.60 GB, max allowed: 18.13 GB). "
           "Tried to allocate 256.00 MB on private pool.")
CPU_OOM = ("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to "
           "allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)")


def test_cuda_out_of_memory_names_the_allocation_and_what_the_card_had_free():
    said = errors.describe(OutOfMemoryError(CUDA_OOM))
    assert said.startswith("Out of GPU memory: an allocation of 2,048 MiB failed with 1.20 GiB free on the GPU")
    assert errors.is_device_out_of_memory(OutOfMemoryError(CUDA_OOM))


def test_mps_out_of_memory_reads_its_mb_as_mib():
    said = errors.describe(RuntimeError(MPS_OOM))
    assert said.startswith("Out of GPU memory: an allocation of 256 MiB failed")


def test_host_out_of_memory_is_not_blamed_on_the_gpu():
    exc = RuntimeError(CPU_OOM)
    assert errors.describe(exc).startswith("Out of memory: an allocation of 1,024 MiB failed")
    assert errors.is_out_of_memory(exc) and not errors.is_device_out_of_memory(exc)


@pytest.mark.parametrize("exc", [MemoryError(), RuntimeError("out of memory")])
def test_an_out_of_memory_without_a_size_still_says_what_to_try(exc):
    assert "Try a smaller batch_size" in errors.describe(exc)
