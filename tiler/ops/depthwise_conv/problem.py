"""The depthwise convolution problem: groups = C_in = C_out = C, one kh x kw filter per channel, in the memory
layout the tensors have (NCHW, NHWC, or Ascend's NC1HWC0)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...errors import ProblemError
from ...problem import Problem, check_tensor_sizes


@dataclass(frozen=True)
class DepthwiseConv(Problem):
    """out[n, c] = x[n, c] (*) w[c] with stride, zero padding and dilation; x is N x C x H x W, stored as
    `layout` says: nchw (each channel's plane contiguous), nhwc (channels_last: each pixel's C channels
    contiguous), or nc1hwc0 (Ascend's 5-D format: channels in blocks of C0 = 32 bytes, each pixel's C0 channels
    contiguous, the format the cube's img2col and the vector unit read). The output has the input's layout.

    `pad` pads both sides of each axis the kernel spans: H when kh > 1, W when kw > 1. A 1-D convolution (Mamba's
    causal conv1d) is W = 1, kw = 1 with the sequence along H (or H = 1, kh = 1 along W), and is not padded
    across. A causal conv1d is listed as PyTorch's
    Conv1d(padding=k-1) computes it: L + k - 1 outputs, of which the layer keeps the first L.
    """

    OP: ClassVar[str] = "depthwise_conv"
    FIELDS: ClassVar[tuple[str, ...]] = ("N", "C", "H", "W", "kh", "kw")
    OPTIONAL: ClassVar[dict[str, Any]] = {"stride": 1, "pad": 0, "dilation": 1, "layout": "nchw"}
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"layout": ("nchw", "nhwc", "nc1hwc0")}
    MINIMUM: ClassVar[dict[str, int]] = {"pad": 0}
    MATCHED: ClassVar[tuple[str, ...]] = ("kh", "kw", "stride", "pad", "dilation", "layout")
    EXAMPLE: ClassVar[dict[str, int]] = {"N": 2, "C": 96, "H": 28, "W": 28, "kh": 3, "kw": 3, "pad": 1}

    N: int
    C: int
    H: int
    W: int
    kh: int
    kw: int
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    dtype: str = "fp16"
    layout: str = "nchw"

    @property
    def pad_h(self) -> int:
        return self.pad if self.kh > 1 else 0

    @property
    def pad_w(self) -> int:
        return self.pad if self.kw > 1 else 0

    @property
    def taps(self) -> int:
        """kh * kw: the K of one channel's img2col product."""
        return self.kh * self.kw

    @property
    def out_h(self) -> int:
        return (self.H + 2 * self.pad_h - self.dilation * (self.kh - 1) - 1) // self.stride + 1

    @property
    def out_w(self) -> int:
        return (self.W + 2 * self.pad_w - self.dilation * (self.kw - 1) - 1) // self.stride + 1

    @property
    def pixels(self) -> int:
        """Output pixels over the batch: the M of the img2col product (the batch folded into M)."""
        return self.N * self.out_h * self.out_w

    @property
    def flops(self) -> float:
        return 2.0 * self.pixels * self.C * self.taps

    @property
    def compulsory_bytes(self) -> float:
        """Input read once, output written once (int8 writes int32), one filter per channel."""
        inputs = (self.N * self.C * self.H * self.W + self.C * self.taps) * self.in_bytes
        return inputs + self.N * self.C * self.out_h * self.out_w * self.out_bytes

    def memory_layout(self) -> str:
        return self.layout

    @property
    def c0(self) -> int:
        """Channels in one NC1HWC0 block: 32 bytes of the input dtype (16 fp16, 32 int8, 8 fp32)."""
        return max(32 // self.in_bytes, 1)

    def validate(self) -> None:
        check_tensor_sizes(
            {
                "N*C*H*W": self.N * self.C * self.H * self.W,
                "N*C*(H+2*pad)*(W+2*pad)": self.N
                * self.C
                * (self.H + 2 * self.pad_h)
                * (self.W + 2 * self.pad_w),
            }
        )
        for k, size, pad in (("kh", self.H, self.pad_h), ("kw", self.W, self.pad_w)):
            extent = self.dilation * (getattr(self, k) - 1) + 1
            if extent > size + 2 * pad:
                axis = "H" if k == "kh" else "W"
                raise ProblemError(
                    f"{k}: the kernel's extent dilation*({k}-1)+1 = {extent} exceeds the padded input "
                    f"{axis}+2*pad = {size + 2 * pad}; need {k} <= {(size + 2 * pad - 1) // self.dilation + 1}"
                )
