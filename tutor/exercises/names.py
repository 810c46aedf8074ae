"""Names a lesson's exercise requirements may use, for lint: the function probes
(tutor/exercises/probes.py) and the behaviour checks (tutor/exercises/behaviour.py).

Kept apart so that validating a lesson does not import the exercise runner.
"""

PROBES = frozenset(
    {
        "moves_batch_to_device",
        "picks_device",
        # the memory techniques (gradient accumulation, activation checkpointing, a batch-size search)
        "steps_once_per_k",
        "zero_grad_once_per_k",
        "accumulates_full_batch_gradient",
        "checkpoint_saves_activations",
        "checkpoints_each_block",
        "checkpoint_same_results",
        "finds_largest_batch",
        "retries_outside_except",
        "frees_memory_after_oom",
        "catches_only_oom",
    }
)

# Checks that compare the ranks of a torchrun launch: only on a step with `launch`.
DISTRIBUTED = frozenset(
    {
        "joins_process_group",
        "ranks_split_data",
        "reshuffles_each_epoch",
        "gradients_synchronized",
        "saves_on_rank_zero",
    }
)

BEHAVIOURS = (
    frozenset(
        {
            "device_fallback",
            "asks_mps",
            "moves_a_tensor",
            "model_on_device",
            "batches_on_device",
            "timing_synchronized",
            "autocast_forward",
            "float32_baseline",
            "backward_outside_autocast",
            "steps_through_scaler",
            "weights_float32",
            "amp_only_on_cuda",
            "saves_during_training",
            "loads_to_cpu",
            "compares_with_tolerance",
            "compares_outputs_and_gradients",
            "profiles_training_steps",
            "peak_memory_measured",
        }
    )
    | DISTRIBUTED
)

# The findings of `gpututor inspect` (tutor/inspect/findings.py `judge`) an `inspect` requirement may
# name as gone; tests/inspect checks that this list and the judges agree.
INSPECT_FINDINGS = frozenset(
    {
        "model-on-cpu",
        "batch-device",
        "sync-per-step",
        "data-wait",
        "losses-kept",
        "no-zero-grad",
        "no-autocast",
        "autocast-backward",
        "scaler-bf16",
        "timing-no-sync",
        "checkpoint-on-device",
    }
)
