"""The spec of `conv-activations`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/conv_activations.py."""

from __future__ import annotations

from pydantic import Field

from tutor.experiments.spec import Experiment, Metric, Params


class ConvActivationsParams(Params):
    # 224: ImageNet's crop, the lab's example. ResNet-50 halves it five times, so a multiple of 32
    # keeps every stage's size exact; 64 is the smallest whose last stage (2 x 2) BatchNorm can
    # still train on at batch 1.
    image_size: int = Field(
        224, ge=64, le=224, multiple_of=32, description="height and width of the random images (64 to 224, by 32)"
    )
    # ResNet-50's forward and backward at batch 2, 224 x 224: about half a second on a 2-core CPU.
    batch: int = Field(2, ge=2, le=8, description="the larger batch measured; batch 1 is measured too (2 to 8)")
    target_batch: int = Field(32, ge=1, le=4096, description="the batch the worked example scales to (1 to 4096)")
    stack_layers: int = Field(4, ge=1, le=16, description="Conv2d layers in the small conv stack (1 to 16)")


SPEC = Experiment(
    name="conv-activations",
    title="Activation memory of conv nets, measured: a conv stack and ResNet-50",
    module="conv_activations",
    params=ConvActivationsParams,
    metrics={
        "stack_over_formula": Metric(
            "Conv+ReLU stack: saved over formula",
            "x",
            "bytes a Conv2d + ReLU stack saved for backward, over B x C x H x W x 4 summed over its conv outputs",
        ),
        "bn_stack_over_formula": Metric(
            "Conv+BN+ReLU stack: saved over formula", "x", "the same with BatchNorm after each conv"
        ),
        "parameters": Metric("ResNet-50 parameters", "", "parameter count of torchvision's resnet50"),
        "param_bytes": Metric("ResNet-50 weights", "B", "bytes of its float32 parameters"),
        "grad_bytes": Metric("its gradients", "B", "bytes of .grad after backward"),
        "adam_state_bytes": Metric("its Adam state", "B", "exp_avg + exp_avg_sq (+ step counters) after one step"),
        "activation_bytes": Metric(
            "saved for backward at the run's batch",
            "B",
            "distinct storages autograd saved for backward in float32 at `batch`, weights and buffers left out",
        ),
        "per_save_bytes": Metric(
            "saved, each save counted", "B", "the same, a storage counted at every save that keeps it"
        ),
        "formula_bytes": Metric(
            "B x C x H x W x 4 over conv outputs", "B", "the formula summed over ResNet-50's conv outputs at `batch`"
        ),
        "saved_over_formula": Metric("saved over the B x C x H x W sum", "x", "activation_bytes over formula_bytes"),
        "activation_bytes_per_image": Metric(
            "activations per 224 x 224 image",
            "B",
            "float32 bytes saved per image (batch `batch` less batch 1), scaled by area if image_size < 224",
        ),
        "amp_activation_bytes_per_image": Metric(
            "per image under autocast", "B", "the same under autocast (bfloat16 on a CPU, float16 on a GPU)"
        ),
        "weight_copy_bytes": Metric(
            "16-bit weight copies under autocast", "B", "casts of the weights autograd holds until backward"
        ),
        "autocast_shrink": Metric(
            "float32 over autocast activations", "x", "activations per image, float32 over autocast"
        ),
        "target_activation_bytes": Metric(
            "activations at the target batch", "B", "float32 activations at target_batch, from the per-image figure"
        ),
        "activation_bytes_256": Metric("activations at batch 256", "B", "the same at batch 256"),
        "activations_over_weights": Metric(
            "target-batch activations over weights", "x", "target_activation_bytes over param_bytes"
        ),
        "fp32_total_bytes": Metric(
            "float32 total at the target batch", "B", "weights + gradients + Adam state + activations"
        ),
        "amp_total_bytes": Metric(
            "torch.amp total at the target batch",
            "B",
            "float32 weights, gradients and Adam state + 16-bit weight copies + autocast activations",
        ),
        "transformer_ratio": Metric(
            "Korthikanti's figure over 2BLH",
            "x",
            "a GPT-2 layer's activations by Korthikanti et al. 2022 over 2 x b x s x h bytes (a formula)",
        ),
        "peak_step_bytes": Metric(
            "peak allocated in forward+backward",
            "B",
            "torch.cuda.max_memory_allocated above the model, float32 at `batch` (CUDA; None elsewhere)",
            none="n/a off CUDA",
        ),
        "autocast_dtype": Metric("autocast dtype", "text", "the 16-bit dtype autocast used here"),
        "device": Metric("device", "text", "torch device used"),
    },
    quick={"image_size": 64, "stack_layers": 2},  # a fraction of a second of torch work
)
