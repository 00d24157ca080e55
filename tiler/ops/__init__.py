"""The built-in operators, one folder each; importing this package registers them (tiler.operator)."""

from . import depthwise_conv, flash_attention, matmul, softmax  # noqa: F401
