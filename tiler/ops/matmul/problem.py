"""The matmul problem: C[M,N] = A[M,K] · B[K,N], `batch` independent products; A and B stored as `layout` and
`b_format` say (default: both row-major ND), C row-major."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class Matmul(Problem):
    """C[M,N] = A[M,K] · B[K,N], `batch` independent products of that size; C is row-major.

    layout: how A and B are stored, one letter each, `n` as written above and `t` transposed (BLAS style):
      nn  A is M x K row-major, B is K x N row-major (the default);
      nt  B is stored N x K row-major and used transposed (a torch nn.Linear weight);
      tn  A is stored K x M row-major;  tt  both.
    b_format: `nd` (plain row-major, as `layout` says) or `nz` (B stored in Ascend's NZ fractal format: 16 x C0
      fractals, each 512 B contiguous, as Ascend weights commonly are; an Ascend-only format).
    """

    OP: ClassVar[str] = "matmul"
    FIELDS: ClassVar[tuple[str, ...]] = ("M", "N", "K")
    OPTIONAL: ClassVar[dict[str, Any]] = {"batch": 1, "layout": "nn", "b_format": "nd"}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "layout": ("nn", "nt", "tn", "tt"),
        "b_format": ("nd", "nz"),
    }
    # a library's nearest match keeps the batch, and never hands a tiling of another layout or B format
    MATCHED: ClassVar[tuple[str, ...]] = ("batch", "layout", "b_format")
    EXAMPLE: ClassVar[dict[str, int]] = {"M": 1000, "N": 768, "K": 512}

    M: int
    N: int
    K: int
    batch: int = 1
    dtype: str = "fp16"
    layout: str = "nn"
    b_format: str = "nd"

    @property
    def a_transposed(self) -> bool:
        """A is stored K x M (its rows run along M)."""
        return self.layout[0] == "t"

    @property
    def b_transposed(self) -> bool:
        """B is stored N x K (its rows run along K)."""
        return self.layout[1] == "t"

    @property
    def b_nz(self) -> bool:
        """B is stored in NZ fractals (Ascend)."""
        return self.b_format == "nz"

    def memory_layout(self) -> str:
        return self.layout

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.M * self.N * self.K

    def validate(self) -> None:
        b = self.batch
        check_tensor_sizes(
            {
                "batch*M*K": b * self.M * self.K,
                "batch*K*N": b * self.K * self.N,
                "batch*M*N": b * self.M * self.N,
            }
        )

    @property
    def compulsory_bytes(self) -> float:
        """Each input read once, the output written once: the floor of HBM traffic."""
        return self.batch * (
            (self.M * self.K + self.K * self.N) * self.in_bytes + self.M * self.N * self.out_bytes
        )
