"""One widget per step kind, plus the live run panel."""
