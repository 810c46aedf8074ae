"""The measurement discipline (issue 37), apart from the experiments that use it: how repeats
become an interval, and how an interval decides a verdict. The statistics (intervals, repeats,
warmup, method) are pure Python, so the verdict a learner reads can be checked by hand; the
instruments that measure (timing, noise, peak, calibration) import torch inside what measures."""
