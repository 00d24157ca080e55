"""The matmul problem: C[M,N] = A[M,K] · B[K,N], `batch` independent products; A and B stored as `layout` and
`b_format` say (default: both row-major ND), C row-major."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import ProblemError
from ...problem import OUT_BYTES, Problem, check_tensor_sizes, profiler_dims


@dataclass(frozen=True)
class Matmul(Problem):
    """C[M,N] = A[M,K] · B[K,N], `batch` independent products of that size; C is row-major.

    layout: how A and B are stored, one letter each, `n` as written above and `t` transposed (BLAS style):
      nn  A is M x K row-major, B is K x N row-major (the default);
      nt  B is stored N x K row-major and used transposed (a torch nn.Linear weight);
      tn  A is stored K x M row-major;  tt  both.
    b_format: `nd` (plain row-major, as `layout` says) or `nz` (B stored in Ascend's NZ fractal format: 16 x C0
      fractals, each 512 B contiguous, as Ascend weights commonly are; an Ascend-only format).

    Quantised matmul (dtype int8; docs/model.md, "Quantised matmul"): the int32 accumulator is dequantised to a
    float output, as AscendC's QuantBatchMatmul and CATLASS's quant kernels run it.
    scale: `none` (no dequant: int32 out, or one per-tensor scalar when out_dtype is a float), `channel` (one
      scale per output column, N values), `token` (one per output row, M values) or `channel_token` (both).
    out_dtype: `auto` (int32 without a scale, fp16 with one), `int32`, `fp16` or `bf16`.
    b_dtype: `auto` (B has the problem's dtype) or `int4` (A8W4: B stored as packed int4, half the bytes of int8;
      the vector cores widen it to int8 before the cube reads it, as CATLASS's W4A8 kernel does).
    dequant: where the dequant runs: `auto` (the fixpipe when the chip has one and the scales allow it, else the
      vector cores), `fixpipe` (per-channel or per-tensor scale applied by the fixpipe on the way out of L0C) or
      `vector` (the accumulator goes to a GM workspace as int32 and the vector cores dequantise it: the only place
      a per-token scale or a bf16 output can be applied on A2/A3). A property of the kernel the library calls
      (neither TCubeTiling nor CATLASS's tile shapes carry it), so a problem field, not a tiling knob.
    """

    OP: ClassVar[str] = "matmul"
    FIELDS: ClassVar[tuple[str, ...]] = ("M", "N", "K")
    OPTIONAL: ClassVar[dict[str, Any]] = {
        "batch": 1,
        "layout": "nn",
        "b_format": "nd",
        "scale": "none",
        "out_dtype": "auto",
        "b_dtype": "auto",
        "dequant": "auto",
    }
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {
        "layout": ("nn", "nt", "tn", "tt"),
        "b_format": ("nd", "nz"),
        "scale": ("none", "channel", "token", "channel_token"),
        "out_dtype": ("auto", "int32", "fp16", "bf16"),
        "b_dtype": ("auto", "int4"),
        "dequant": ("auto", "fixpipe", "vector"),
    }
    # a library's nearest match keeps the batch, and never hands a tiling of another layout, B format or quant mode
    MATCHED: ClassVar[tuple[str, ...]] = (
        "batch",
        "layout",
        "b_format",
        "scale",
        "out_dtype",
        "b_dtype",
        "dequant",
    )
    EXAMPLE: ClassVar[dict[str, int]] = {"M": 1000, "N": 768, "K": 512}
    # fields a printed shape line (an emitted fragment's header comment) leaves out at their default, so that a plain
    # problem's line reads as it did before they existed; exports and keys are unaffected
    QUIET: ClassVar[tuple[str, ...]] = ("scale", "out_dtype", "b_dtype", "dequant")

    M: int
    N: int
    K: int
    batch: int = 1
    dtype: str = "fp16"
    layout: str = "nn"
    b_format: str = "nd"
    scale: str = "none"
    out_dtype: str = "auto"
    b_dtype: str = "auto"
    dequant: str = "auto"

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

    def shape_text(self) -> str:
        """The shape as `k=v,...` for a printed line: every field but QUIET ones at their default."""
        return ",".join(
            f"{k}={v}" for k, v in self.shape().items() if not (k in self.QUIET and v == self.OPTIONAL[k])
        )

    @property
    def quant(self) -> bool:
        """An int8 problem whose int32 accumulator is dequantised (a scale, or a float output)."""
        return self.dtype == "int8" and self.output_dtype != "int32"

    @property
    def output_dtype(self) -> str:
        """The output's dtype: out_dtype, or for auto int32 (int8 without a scale: the accumulator as it is),
        fp16 (int8 with a scale) or the input dtype (floats)."""
        if self.out_dtype != "auto":
            return self.out_dtype
        if self.dtype == "int8":
            return "int32" if self.scale == "none" else "fp16"
        return self.dtype

    @property
    def out_bytes(self) -> int:
        return {"int32": 4, "fp16": 2, "bf16": 2}.get(self.output_dtype, OUT_BYTES[self.dtype])

    @property
    def b_int4(self) -> bool:
        """B stored as packed int4 (A8W4)."""
        return self.b_dtype == "int4"

    @property
    def b_bytes(self) -> float:
        """Bytes per element of B as stored in GM: 0.5 for packed int4, else the input dtype's."""
        return 0.5 if self.b_int4 else float(self.in_bytes)

    @property
    def token_scale(self) -> bool:
        return "token" in self.scale

    @property
    def channel_scale(self) -> bool:
        return "channel" in self.scale

    @property
    def scale_bytes(self) -> float:
        """GM bytes of the dequant scales (fp32 per value; the fixpipe's per-channel form is a 64-bit packed word
        per column, QuantBatchMatmulV3's uint64/int64 scale): read once per output tile that uses them."""
        return self.batch * (8.0 * self.N * self.channel_scale + 4.0 * self.M * self.token_scale)

    @classmethod
    def from_profiler(cls, shapes: str, dtypes: str, formats: str = "") -> tuple[dict, str] | str | None:
        """msprof's `Input Shapes` of a MatMul / BatchMatMul: "M,K;K,N" (A then B, then a bias, which is not
        read; leading dims are the batch and must be the same on A and B). B stored N x K (its last dimension is K)
        reads as layout nt; A stored K x M as tn; a FRACTAL_NZ B as b_format nz. None when the shapes are not two
        matrices with a common K; a reason (str) for a broadcast operand, which tiler's matmul does not model."""
        dims = profiler_dims(shapes)
        if len(dims) < 2 or len(dims[0]) < 2 or len(dims[1]) < 2:
            return None
        a, b = dims[0], dims[1]
        lead_a, lead_b = list(a[:-2]), list(b[:-2])
        while lead_a and lead_a[0] == 1:
            lead_a.pop(0)
        while lead_b and lead_b[0] == 1:
            lead_b.pop(0)
        if lead_a != lead_b:
            if lead_a and lead_b:
                raise ProblemError(
                    f"batch dimensions {a[:-2]} of A and {b[:-2]} of B differ (a batched matmul's are the same)"
                )
            one = "B" if lead_a else "A"
            return f"a broadcast {one} (A {a}, B {b}): tiler's matmul has no broadcast operand"
        batch = math.prod(lead_a)
        for ta, tb in (("n", "n"), ("n", "t"), ("t", "n"), ("t", "t")):
            M, K = (a[-2], a[-1]) if ta == "n" else (a[-1], a[-2])
            Kb, N = (b[-2], b[-1]) if tb == "n" else (b[-1], b[-2])
            if K == Kb:
                break
        else:
            return None
        kinds = [
            t.strip().upper().removeprefix("DT_") for t in dtypes.strip().strip('"').split(";") if t.strip()
        ]
        dtype = {
            "FLOAT16": "fp16",
            "BF16": "bf16",
            "BFLOAT16": "bf16",
            "FLOAT": "fp32",
            "FLOAT32": "fp32",
            "INT8": "int8",
        }.get(kinds[0] if kinds else "FLOAT16")
        if dtype is None:
            return f"input data type {kinds[0][:24]!r} is not one of tiler's dtypes (fp16, bf16, fp32, int8)"
        fmts = [f.strip().upper() for f in formats.strip().strip('"').split(";")]
        nz = len(fmts) > 1 and "NZ" in fmts[1]
        fields = {"M": M, "N": N, "K": K, "batch": batch, "layout": ta + tb, "b_format": "nz" if nz else "nd"}
        return fields, dtype

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.M * self.N * self.K

    def validate(self) -> None:
        quant = {
            k: getattr(self, k)
            for k in ("scale", "out_dtype", "b_dtype", "dequant")
            if getattr(self, k) != self.OPTIONAL[k]
        }
        if quant and self.dtype != "int8":
            k, v = next(iter(quant.items()))
            raise ProblemError(
                f"{k}: {v} is a quantised-matmul field; it needs dtype int8 (A int8 x B int8/int4, int32 accumulate), "
                f"got dtype {self.dtype}"
            )
        if self.scale != "none" and self.output_dtype == "int32":
            raise ProblemError(
                f"out_dtype: int32 with scale {self.scale}: a dequantised output is a float (fp16 or bf16)"
            )
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
        return (
            self.batch
            * (
                self.M * self.K * self.in_bytes
                + self.K * self.N * self.b_bytes
                + self.M * self.N * self.out_bytes
            )
            + self.scale_bytes
        )
