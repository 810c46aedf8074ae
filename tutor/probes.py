"""Names of the probes a lesson's `function` requirement may use (the code lives in tutor/exercise.py).

Kept apart so that validating a lesson does not import the exercise runner.
"""

PROBES = frozenset({"moves_batch_to_device"})
