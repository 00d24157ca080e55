"""The row softmax problem: y[r, :] = softmax(x[r, :]) over `rows` rows of `d` elements (row-major)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class Softmax(Problem):
    """x and y are rows x d, row-major, contiguous; the softmax runs along d (the long axis: 1k to 256k elements
    per row for vocabulary logits and long attention rows)."""

    OP: ClassVar[str] = "softmax"
    FIELDS: ClassVar[tuple[str, ...]] = ("rows", "d")
    OPTIONAL: ClassVar[dict[str, Any]] = {}
    MATCHED: ClassVar[tuple[str, ...]] = ()
    EXAMPLE: ClassVar[dict[str, int]] = {"rows": 4096, "d": 32768}

    rows: int
    d: int
    dtype: str = "fp16"

    def validate(self) -> None:
        """The tensor size only: which dtypes run is each family's `check` (int8 is refused there, with one line
        naming the dtype, so that a problem of any dtype can be parsed and asked about)."""
        check_tensor_sizes({"rows*d": self.rows * self.d})

    @property
    def out_bytes(self) -> int:
        return self.in_bytes  # y has x's dtype

    @property
    def flops(self) -> float:
        """About 5 operations per element (max, subtract, exp, sum, scale); the vector units' work, not FMAs."""
        return 5.0 * self.rows * self.d

    @property
    def compulsory_bytes(self) -> float:
        """x read once and y written once."""
        return 2.0 * self.rows * self.d * self.in_bytes
