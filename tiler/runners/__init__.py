"""Measuring a tiling outside the model: the external-command runner of `--measure CMD` (external.py)."""
