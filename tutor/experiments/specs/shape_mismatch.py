"""The spec of `shape-mismatch`, torch-free: its parameters, the metrics it reports, its quick
settings. The measurement is `measure` in tutor/experiments/shape_mismatch.py."""

from __future__ import annotations

from tutor.experiments.spec import Experiment, Params


class ShapeMismatchParams(Params):
    pass


SPEC = Experiment(
    name='shape-mismatch',
    title='Three shape mistakes, their real errors and fixes',
    module='shape_mismatch',
    params=ShapeMismatchParams,
    metrics={
        "flatten_error_type": "exception type for images into Linear without flattening",
        "flatten_error": "its message (first line)",
        "flatten_fixed": "the fix ran",
        "channel_error_type": "exception type for a Conv2d batch without its channel dimension",
        "channel_error": "its message (first line)",
        "channel_fixed": "the fix ran",
        "target_error_type": "exception type for labels of shape [B, 1] in cross_entropy",
        "target_error": "its message (first line)",
        "target_fixed": "the fix ran",
        "all_fixed": "every fix ran",
    },
    quick={},
)
