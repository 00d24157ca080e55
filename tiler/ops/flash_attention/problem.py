"""The flash-attention forward problem: O = softmax(Q Kᵀ / sqrt(D)) V per (batch, head), GQA and causal masks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import ProblemError
from ...problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class FlashAttention(Problem):
    """Q [B, heads, S1, D], K and V [B, kv_heads, S2, D], O like Q, contiguous; heads / kv_heads query heads share
    one K/V head (GQA; kv_heads = heads is plain multi-head attention, 1 is multi-query).

    `causal` = 1: query i sees keys j <= i + S2 - S1, the mask aligned bottom-right (chunked prefill, decode:
    the S1 new queries are the last S1 positions of the S2 keys). It needs S1 <= S2 (otherwise the first queries
    would see no key)."""

    OP: ClassVar[str] = "flash_attention"
    FIELDS: ClassVar[tuple[str, ...]] = ("B", "heads", "kv_heads", "S1", "S2", "D")
    OPTIONAL: ClassVar[dict[str, Any]] = {"causal": 0}
    MINIMUM: ClassVar[dict[str, int]] = {"causal": 0}
    MATCHED: ClassVar[tuple[str, ...]] = ("heads", "kv_heads", "D", "causal")
    EXAMPLE: ClassVar[dict[str, int]] = {
        "B": 1,
        "heads": 32,
        "kv_heads": 8,
        "S1": 4096,
        "S2": 4096,
        "D": 128,
        "causal": 1,
    }

    B: int
    heads: int
    kv_heads: int
    S1: int
    S2: int
    D: int
    causal: int = 0
    dtype: str = "fp16"

    def validate(self) -> None:
        if self.causal not in (0, 1):
            raise ProblemError(f"causal: must be 0 or 1, got {self.causal}")
        if self.heads % self.kv_heads:
            raise ProblemError(
                f"kv_heads: must divide heads (GQA groups of equal size): {self.heads} heads, {self.kv_heads} kv_heads"
            )
        if self.causal and self.S1 > self.S2:
            raise ProblemError(
                f"S1: a causal mask aligned bottom-right needs S1 <= S2 (query i sees keys <= i + S2 - S1), "
                f"got S1={self.S1} > S2={self.S2}"
            )
        check_tensor_sizes(
            {
                "B*heads*S1*D": self.B * self.heads * self.S1 * self.D,
                "B*kv_heads*S2*D": self.B * self.kv_heads * self.S2 * self.D,
            }
        )

    @property
    def group(self) -> int:
        """Query heads per K/V head."""
        return self.heads // self.kv_heads

    @property
    def shift(self) -> int:
        """S2 - S1: query i's last visible key is i + shift under the causal mask."""
        return self.S2 - self.S1

    def visible_keys(self, rows_end):
        """Keys a query block whose last row is `rows_end - 1` must visit (numpy-friendly): all S2 without the mask,
        min(rows_end + shift, S2) with it."""
        import numpy as np

        rows_end = np.asarray(rows_end)
        return np.minimum(rows_end + self.shift, self.S2) if self.causal else np.full(rows_end.shape, self.S2)

    @property
    def pairs(self) -> float:
        """(query, key) pairs computed by an exact kernel: S1*S2, or under the causal mask sum over i of
        min(S2, i + 1 + shift)."""
        if not self.causal:
            return float(self.S1) * self.S2
        return float(self.S1) * self.shift + self.S1 * (self.S1 + 1) / 2.0

    @property
    def flops(self) -> float:
        """Useful FLOPs: QKᵀ and PV, 2·D each per visible pair (softmax not counted, as FlashAttention's papers)."""
        return 4.0 * self.B * self.heads * self.pairs * self.D

    @property
    def compulsory_bytes(self) -> float:
        """Q read and O written once; K and V read once per K/V head."""
        b = self.in_bytes
        return self.B * (2.0 * self.heads * self.S1 * self.D + 2.0 * self.kv_heads * self.S2 * self.D) * b
