"""The row_scale problem: y[r, :] = x[r, :] * s[r] for `rows` rows of `cols` elements (row-major)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tiler.problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class RowScale(Problem):
    """x and y are rows x cols, row-major and contiguous; s holds one factor per row (x's dtype)."""

    OP: ClassVar[str] = "row_scale"
    FIELDS: ClassVar[tuple[str, ...]] = ("rows", "cols")
    OPTIONAL: ClassVar[dict[str, Any]] = {}
    MATCHED: ClassVar[tuple[str, ...]] = ()
    EXAMPLE: ClassVar[dict[str, int]] = {"rows": 8192, "cols": 4096}

    rows: int
    cols: int
    dtype: str = "fp16"

    def validate(self) -> None:
        check_tensor_sizes({"rows*cols": self.rows * self.cols})

    @property
    def out_bytes(self) -> int:
        return self.in_bytes  # y has x's dtype

    @property
    def flops(self) -> float:
        """One multiply per element."""
        return float(self.rows) * self.cols

    @property
    def compulsory_bytes(self) -> float:
        """x read and y written once, s read once."""
        return (
            float(self.rows) * self.cols * (self.in_bytes + self.out_bytes) + float(self.rows) * self.in_bytes
        )
