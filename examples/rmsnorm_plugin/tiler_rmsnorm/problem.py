"""The RMSNorm problem: y[r, :] = x[r, :] / sqrt(mean(x[r, :]**2) + eps) * weight over `rows` rows of `hidden`
elements (row-major, contiguous; one weight vector of `hidden` elements shared by every row)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tiler.problem import Problem, check_tensor_sizes

EPS = 1e-6  # the kernels' epsilon (a runtime argument of the kernel, not a problem field: it changes no cost)


@dataclass(frozen=True)
class RMSNorm(Problem):
    """x and y are rows x hidden (tokens x model width), weight is hidden; y has x's dtype, the arithmetic is fp32.
    Which dtypes run is each family's `check` (fp16, bf16, fp32; int8 is refused there with one line)."""

    OP: ClassVar[str] = "rmsnorm"
    FIELDS: ClassVar[tuple[str, ...]] = ("rows", "hidden")
    OPTIONAL: ClassVar[dict[str, Any]] = {}
    MATCHED: ClassVar[tuple[str, ...]] = ()
    # a Llama-3-8B layer's input norm on a 4096-token batch
    EXAMPLE: ClassVar[dict[str, int]] = {"rows": 4096, "hidden": 4096}

    rows: int
    hidden: int
    dtype: str = "fp16"

    def validate(self) -> None:
        check_tensor_sizes({"rows*hidden": self.rows * self.hidden})

    @property
    def out_bytes(self) -> int:
        return self.in_bytes  # y has x's dtype

    @property
    def x_bytes(self) -> float:
        return float(self.rows) * self.hidden * self.in_bytes

    @property
    def weight_bytes(self) -> float:
        return float(self.hidden) * self.in_bytes

    @property
    def flops(self) -> float:
        """Per element: square, add (the sum of squares), scale by 1/rms, scale by the weight."""
        return 4.0 * self.rows * self.hidden

    @property
    def compulsory_bytes(self) -> float:
        """x read once, y written once, the weight read once."""
        return self.x_bytes + float(self.rows) * self.hidden * self.out_bytes + self.weight_bytes
