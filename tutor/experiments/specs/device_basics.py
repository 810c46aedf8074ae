"""The spec of `device-basics`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/device_basics.py."""

from __future__ import annotations

from tutor.experiments.spec import Experiment, Metric, Params


class DeviceBasicsParams(Params):
    pass


SPEC = Experiment(
    name="device-basics",
    title="What this machine has, and where a model lives",
    module="device_basics",
    params=DeviceBasicsParams,
    metrics={
        "device": Metric("device", "text", "the torch device the model was moved to"),
        "device_name": Metric("device name", "text", "its name"),
        "devices": Metric("devices PyTorch can use", "text", "every device PyTorch can use here, best first"),
        "cuda_available": Metric("CUDA available", "bool", "torch.cuda.is_available()"),
        "mps_available": Metric("Apple MPS available", "bool", "torch.backends.mps.is_available()"),
        "cuda_device_count": Metric("CUDA GPUs", "", "number of CUDA GPUs visible (0 without CUDA)"),
        "total_memory_gib": Metric(
            "device memory",
            "GiB",
            "the device's memory in GiB (None for the CPU: it shares system RAM)",
            none="n/a: the CPU shares system RAM",
        ),
        "compute_capability": Metric(
            "compute capability", "text", "CUDA compute capability, e.g. 8.0 (None off CUDA)", none="n/a off CUDA"
        ),
        "bf16_native": Metric(
            "bfloat16 native",
            "bool",
            "True if bfloat16 runs natively (an NVIDIA GPU of compute capability 8.0+, or a CPU with AVX512-BF16/AMX)",
        ),
        "fp16_fast": Metric("float16 fast", "bool", "True if float16 is fast here (CUDA tensor cores, MPS)"),
        "tensor_cores": Metric("tensor cores", "bool", "True on NVIDIA GPUs of compute capability 7.0 and newer"),
        "tf32_matmul": Metric("TF32 allowed for matmuls", "bool", "torch.backends.cuda.matmul.allow_tf32"),
        "tf32_active": Metric(
            "TF32 in use",
            "bool",
            "True if float32 matmuls really run in TF32 here (the setting on an NVIDIA GPU of compute capability 8.0+)",
        ),
        "float32_matmul_precision": Metric(
            "float32 matmul precision", "text", "torch.get_float32_matmul_precision(): highest, high or medium"
        ),
        "parameters": Metric("MNISTClassifier parameters", "", "MNISTClassifier's parameter count"),
        "parameter_bytes": Metric("parameter size", "B", "their size in bytes (4 per float32 parameter)"),
        "parameter_devices": Metric("parameters are on", "text", "the devices the parameters ended up on"),
        "all_on_device": Metric(
            "every parameter on the device", "bool", "True if every parameter is on the chosen device"
        ),
        "torch_version": Metric("PyTorch version", "text", "torch.__version__"),
    },
    quick={},
)
