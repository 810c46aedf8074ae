"""The spec of `shape-mismatch`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/shape_mismatch.py."""

from __future__ import annotations

from tutor.experiments.spec import Experiment, Metric, Params


class ShapeMismatchParams(Params):
    pass


SPEC = Experiment(
    name="shape-mismatch",
    title="Three shape mistakes, their real errors and fixes",
    module="shape_mismatch",
    params=ShapeMismatchParams,
    metrics={
        "flatten_error_type": Metric(
            "unflattened images: error type",
            "text",
            "exception type for images into Linear without flattening",
            none="no error",
        ),
        "flatten_error": Metric("unflattened images: error", "text", "its message (first line)", none="no error"),
        "flatten_fixed": Metric("unflattened images: the fix ran", "bool", "the fix ran"),
        "channel_error_type": Metric(
            "no channel dimension: error type",
            "text",
            "exception type for a Conv2d batch without its channel dimension",
            none="no error",
        ),
        "channel_error": Metric("no channel dimension: error", "text", "its message (first line)", none="no error"),
        "channel_fixed": Metric("no channel dimension: the fix ran", "bool", "the fix ran"),
        "target_error_type": Metric(
            "labels of shape [B, 1]: error type",
            "text",
            "exception type for labels of shape [B, 1] in cross_entropy",
            none="no error",
        ),
        "target_error": Metric("labels of shape [B, 1]: error", "text", "its message (first line)", none="no error"),
        "target_fixed": Metric("labels of shape [B, 1]: the fix ran", "bool", "the fix ran"),
        "all_fixed": Metric("every fix ran", "bool", "every fix ran"),
    },
    quick={},
)
