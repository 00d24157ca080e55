"""Row softmax (tiler/ops/softmax): the problem, the Ascend and CUDA models (online 2-pass and 3-pass forms, a
whole row read once when it fits), export views, the Triton kernels and their runner."""

from . import ascend, cuda  # noqa: F401  (registers the operators)
from .problem import Softmax

__all__ = ["Softmax"]
