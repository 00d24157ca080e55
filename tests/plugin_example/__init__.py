"""An operator from outside tiler (tests of the plugin contract): row_scale, y[r, :] = x[r, :] * s[r] on GPUs.

A package that is not tiler adds an operator this way: a Problem subclass, an Operator subclass whose space file
ships beside it (SPACE_FILE), and an entry point in the group `tiler.operators` naming the class (or a module whose
import registers it). docs/operators.md walks through it.
"""

from .cuda import RowScaleCuda
from .problem import RowScale

__all__ = ["RowScale", "RowScaleCuda"]
