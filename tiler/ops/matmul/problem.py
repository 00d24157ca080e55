"""The matmul problem: C[M,N] = A[M,K] · B[K,N], row-major, `batch` independent products."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class Matmul(Problem):
    """C[M,N] = A[M,K] · B[K,N] (row-major A, B and C), `batch` independent products of that size."""

    OP: ClassVar[str] = "matmul"
    FIELDS: ClassVar[tuple[str, ...]] = ("M", "N", "K")
    OPTIONAL: ClassVar[dict[str, Any]] = {"batch": 1}
    MATCHED: ClassVar[tuple[str, ...]] = ("batch",)
    EXAMPLE: ClassVar[dict[str, int]] = {"M": 1000, "N": 768, "K": 512}

    M: int
    N: int
    K: int
    batch: int = 1
    dtype: str = "fp16"

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
