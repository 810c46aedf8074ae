"""gpututor: a terminal tutor that teaches PyTorch GPU training by predict-then-run."""

__version__ = "0.1.0"
