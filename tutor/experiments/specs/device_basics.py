"""The spec of `device-basics`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/device_basics.py."""

from __future__ import annotations

from tutor.experiments.spec import Experiment, Params


class DeviceBasicsParams(Params):
    pass


SPEC = Experiment(
    name='device-basics',
    title='What this machine has, and where a model lives',
    module='device_basics',
    params=DeviceBasicsParams,
    metrics={
        "device": "the torch device the model was moved to",
        "device_name": "its name",
        "devices": "every device PyTorch can use here, best first",
        "cuda_available": "torch.cuda.is_available()",
        "mps_available": "torch.backends.mps.is_available()",
        "cuda_device_count": "number of CUDA GPUs visible (0 without CUDA)",
        "total_memory_gib": "the device's memory in GiB (None for the CPU: it shares system RAM)",
        "compute_capability": "CUDA compute capability, e.g. 8.0 (None off CUDA)",
        "bf16_native": "True if bfloat16 runs natively (CUDA 8.0+, or a CPU with AVX512-BF16/AMX)",
        "fp16_fast": "True if float16 is fast here (CUDA tensor cores, MPS)",
        "tensor_cores": "True on NVIDIA GPUs of compute capability 7.0 and newer",
        "tf32_matmul": "torch.backends.cuda.matmul.allow_tf32",
        "tf32_active": "True if float32 matmuls really run in TF32 here (the setting on a CUDA 8.0+ GPU)",
        "float32_matmul_precision": "torch.get_float32_matmul_precision(): highest, high or medium",
        "parameters": "MNISTClassifier's parameter count",
        "parameter_bytes": "their size in bytes (4 per float32 parameter)",
        "parameter_devices": "the devices the parameters ended up on",
        "all_on_device": "True if every parameter is on the chosen device",
        "torch_version": "torch.__version__",
    },
    quick={},
)
