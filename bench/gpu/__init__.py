"""What runs on the GPU machine: measurement tools and GPU benchmarks (`python -m bench.gpu.NAME`); no tiler import here."""
