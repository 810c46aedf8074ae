"""tutor/errors.py: a run's exception as a sentence; out-of-memory in each allocator's words."""

from __future__ import annotations

import pytest

from tutor import errors


class OutOfMemoryError(RuntimeError):
    """Named like torch.cuda.OutOfMemoryError (errors.py matches by name: it imports no torch)."""


CUDA_OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of which "
    "1.20 GiB is free. Including non-PyTorch memory, this process has 77.80 GiB memory in use."
)
# Under torch.cuda.set_per_process_memory_fraction the message says what is allowed (c10's
# CUDACachingAllocator.cpp), here a class cap of 256 MiB on an H100 with room to spare.
CUDA_CAPPED_OOM = (
    "CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 79.19 GiB of "
    "which 61.40 GiB is free. Process 40211 has 17.20 GiB memory in use. Including non-PyTorch "
    "memory, this process has 580.00 MiB memory in use. 256.00 MiB allowed; Of the allocated memory "
    "40.00 MiB is allocated by PyTorch, and 20.00 MiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:"
    "True to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
MPS_OOM = (
    "MPS backend out of memory (MPS allocated: 17.50 GB, other allocations: 0.60 GB, max allowed: 18.13 GB). "
    "Tried to allocate 256.00 MB on private pool."
)
CPU_OOM = (
    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)"
)


def test_cuda_out_of_memory_names_the_allocation_and_what_the_card_had_free():
    said = errors.describe(OutOfMemoryError(CUDA_OOM))
    assert said.startswith("Out of GPU memory: an allocation of 2,048 MiB failed with 1.20 GiB free on the GPU")
    assert errors.is_device_out_of_memory(OutOfMemoryError(CUDA_OOM))


def test_cuda_out_of_memory_past_the_process_limit_names_the_limit_not_other_processes():
    said = errors.describe(OutOfMemoryError(CUDA_CAPPED_OOM))
    assert said.startswith(
        "Out of GPU memory: an allocation of 512 MiB failed: it would take this process over its limit of 256.00 MiB."
    )
    assert "other processes" not in said


def test_cuda_out_of_memory_within_the_limit_is_still_a_full_card():
    # The "allowed" clause stays once any fraction was set, 1.0 included: here the card was full.
    full = CUDA_OOM.replace(
        "77.80 GiB memory in use.",
        "74.00 GiB memory in use. 79.11 GiB allowed; Of the "
        "allocated memory 72.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by "
        "PyTorch but unallocated.",
    )
    said = errors.describe(OutOfMemoryError(full))
    assert said.startswith(
        "Out of GPU memory: an allocation of 2,048 MiB failed with 1.20 GiB free on the GPU "
        "(other processes may hold the rest)"
    )


def test_mps_out_of_memory_reads_its_mb_as_mib():
    said = errors.describe(RuntimeError(MPS_OOM))
    assert said.startswith("Out of GPU memory: an allocation of 256 MiB failed")


def test_host_out_of_memory_is_not_blamed_on_the_gpu():
    exc = RuntimeError(CPU_OOM)
    assert errors.describe(exc).startswith("Out of memory: an allocation of 1,024 MiB failed")
    assert errors.is_out_of_memory(exc) and not errors.is_device_out_of_memory(exc)


@pytest.mark.parametrize(
    "type_name, message, gpu",
    [
        ("OutOfMemoryError", CUDA_OOM, True),
        ("RuntimeError", MPS_OOM, True),  # MPS raises a plain RuntimeError
        ("RuntimeError", CUDA_OOM, True),  # an older torch, before OutOfMemoryError
        ("RuntimeError", CPU_OOM, False),
        ("MemoryError", "", False),
        (None, CUDA_OOM, False),  # the words printed by a program that raised nothing
    ],
)
def test_another_process_s_error_is_read_as_gpu_memory_by_its_type_and_message(type_name, message, gpu):
    assert errors.reports_device_out_of_memory(type_name, message) is gpu


@pytest.mark.parametrize("exc", [MemoryError(), RuntimeError("out of memory")])
def test_an_out_of_memory_without_a_size_still_says_what_to_try(exc):
    assert "Try a smaller batch_size" in errors.describe(exc)
