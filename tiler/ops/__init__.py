"""The built-in operators, one folder each; importing this package registers them (tiler.operator)."""

from . import matmul  # noqa: F401
