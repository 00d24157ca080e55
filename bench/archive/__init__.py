"""Finished experiments, kept runnable as `python -m bench.archive.NAME` but not maintained; LOG.md is the dated log."""
