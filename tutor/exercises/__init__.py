"""Code exercises: the sandbox that runs a learner's program in its own process (`child.py`),
what is watched inside it (`observe.py`, `probes.py`), and the grader that judges what the run
did (`grader.py`, `behaviour.py`). `names.py` lists the checks a lesson may name, for lint."""
