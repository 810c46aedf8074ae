"""Which measurement method produced a stored run or calibration, so runs measured one way are
never graded or plotted beside runs measured another.

Every stored run carries it (tutor/course/machine.py's stamp), and every calibration. A run from
an older method is measured again before its prediction is graded; the roofline leaves it off.

History:
1. (no mark) a timed metric's noise was the range of its repeats (quartiles from 8), and a
   prediction anywhere in it was a hit; calibrate's bfloat16 gain was the best sweep's.
2. the typical value is the median of the repeats (or of paired ratios), with a distribution-
   free interval for it (tutor/measurement/intervals.py); verdicts are hit, miss or undecided.
3. repeats stop when the lesson's edges are decided; the micro-measurements (the matmul peak,
   bandwidth) are timed by torch.utils.benchmark; batch-sweep's fastest batch is the set of
   batches tied with it (best_batch_low .. best_batch_high), not one noisy argmax.
"""

from __future__ import annotations

from typing import Any

METHOD = 3
METHOD_KEY = "method"
# What the latest method changed, in a learner's words: why an older run is measured again.
CHANGED = (
    "before repeats stopped once a lesson's options were decided, PyTorch's own timer timed the "
    "micro-measurements, and the fastest batch came with its ties"
)


def is_current(stamped: dict[str, Any] | None) -> bool:
    """True if a stored run's stamp (its device record) says it was measured by this method. A
    record with no stamp at all (no host: stored before stamps existed) is taken as it is, as
    tutor/course/machine.py takes it; one stamped without a method predates the mark."""
    if not isinstance(stamped, dict) or ("host" not in stamped and METHOD_KEY not in stamped):
        return True
    return stamped.get(METHOD_KEY) == METHOD


def method_of(stamped: dict[str, Any] | None) -> int:
    """The method a stored record was measured by (1: before the mark existed)."""
    value = stamped.get(METHOD_KEY) if isinstance(stamped, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 1
