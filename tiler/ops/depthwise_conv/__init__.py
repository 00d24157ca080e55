"""Depthwise convolution (groups = C): the problem, the Ascend and CUDA models of its three schemes
(group_loop, group_opt, vector), export views and the Triton kernels."""

from . import ascend, cuda  # noqa: F401  (registers the operators)
from .problem import DepthwiseConv

__all__ = ["DepthwiseConv"]
