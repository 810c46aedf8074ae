"""`gpututor inspect SCRIPT`: the tutor's instruments pointed at the learner's own training script.

`hooks.py` watches the script from inside its own process (`watched_main.py` runs it as `python
SCRIPT` would); `launch.py` starts that process under the sandbox's limits; `findings.py` turns
what was watched into the report (plain data, with the findings and their lesson steps);
`show.py` draws it with Rich.
"""
