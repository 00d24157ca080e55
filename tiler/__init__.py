"""tiler: tiling-strategy autotuner for Ascend NPU and NVIDIA GPU kernels."""

__version__ = "0.1.0"
