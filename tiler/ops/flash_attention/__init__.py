"""Flash attention, forward (tiler/ops/flash_attention): problem, the Ascend and CUDA models, views, runners."""

from . import cuda  # noqa: F401  (registers the CUDA operator)
from .ascend import FlashAttentionAscend  # noqa: F401  (registers the Ascend operator)
from .problem import FlashAttention

__all__ = ["FlashAttention"]
