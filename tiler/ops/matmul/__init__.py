"""Matmul, the worked example of the operator contract (docs/operators.md): problem, Ascend and CUDA models,
export views, tuning hints and the Triton runner."""

from . import ascend, cuda  # noqa: F401  (registers the two operators)
from .problem import Matmul

__all__ = ["Matmul"]
