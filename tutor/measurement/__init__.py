"""The measurement discipline (issue 37), apart from the experiments that use it: how repeats
become an interval, and how an interval decides a verdict. Pure Python, no torch: the verdict a
learner reads must be checkable by hand."""
