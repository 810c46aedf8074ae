"""The checker of losses.yaml: losses.csv holds one loss per training step, as
numbers, they fall, and the reported final loss is the file's last line."""

import math

STEPS = 20


def check_losses(run):
    # A missing file or report is the learner's miss: the tutor says so itself.
    lines = run.files.read_text("losses.csv").splitlines()
    if len(lines) != STEPS:
        return False, (f"losses.csv has {len(lines)} lines; it needs one per step, "
                       f"{STEPS} (end each with \\n).")
    values = []
    for number, line in enumerate(lines, 1):
        try:
            values.append(float(line))
        except ValueError:
            return False, (f"Line {number} of losses.csv is {line[:60]!r}, not a "
                           "number: append loss.item(), the loss as a Python float.")
    if not all(math.isfinite(v) for v in values):
        return False, "losses.csv holds nan or inf: the training diverged."
    if not values[-1] < values[0] / 2:
        return False, (f"The loss went from {values[0]:.4g} to {values[-1]:.4g}; "
                       "it should fall by half or more.")
    if not math.isclose(run.reports["final_loss"], values[-1], rel_tol=1e-6):
        return False, "final_loss is not the last line of losses.csv."
    return True
