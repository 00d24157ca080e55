"""The maintained benchmarks, run from the repository root as `python -m bench.NAME` (bench/README.md)."""
