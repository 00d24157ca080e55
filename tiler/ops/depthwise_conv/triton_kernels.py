"""Triton depthwise-convolution kernels (NCHW or NHWC, fp16/bf16 in/out, fp32 accumulation, no bias).

Depthwise conv: groups = C_in = C_out = C, weight ``w[C, 1, kh, kw]``. ``pad`` zero-pads both sides of each
axis the kernel spans: H when ``kh > 1``, W when ``kw > 1`` (a 1-D conv is W = 1, kw = 1, or H = 1, kh = 1,
and is not padded across)::

    OH = (H + 2*padH - dilation*(kh-1) - 1) // stride + 1,   padH = pad if kh > 1 else 0
    OW = (W + 2*padW - dilation*(kw-1) - 1) // stride + 1,   padW = pad if kw > 1 else 0

Reference: ``torch.nn.functional.conv2d(x, w, stride=stride, padding=(padH, padW), dilation=dilation,
groups=C)``. (Kept free of ``tiler`` imports: bench/dwconv_measure.py loads this file by path on the GPU
machine, so the padding rule is written here again, as in tiler/ops/depthwise_conv/problem.py.)

Three schemes share two kernels; the knob names (``scheme``, ``groups_per_op``, ``BLOCK_P``, ``BLOCK_K``,
``num_warps``, ``num_stages``) are a fixed contract with the cost model:

* ``scheme`` 0, **group_loop**: the tensor-core kernel with G = ``groups_per_op`` = 1, i.e. one small
  matmul per channel ``[BLOCK_P, kh*kw] x [kh*kw, 1]`` padded to a 16-wide ``tl.dot`` with one useful column.
* ``scheme`` 1, **group_opt**: the same kernel with G in {2, 4, ..., 64} channels per program: the
  im2col product ``out[p, j] = sum_k A[p, k] * B[k, j]`` with K = G*kh*kw and a block-diagonal B, built
  in registers from w (``B[k, j] = w[c, t]`` if ``k // (kh*kw) == j`` else 0), N padded to
  NP = max(G, 16). K is looped in chunks of ``BLOCK_K``.
* ``scheme`` 2, **vector**: a CUDA-core kernel, G channels x ``BLOCK_P`` pixels per program, taps
  unrolled; ``BLOCK_K`` is ignored (moot).

* ``layout`` nhwc (channels_last: ``x[n, h, w, c]`` at ``((n*H + h)*W + w)*C + c``), **vector** only: the
  CUDA-core kernel with the tile transposed, ``BLOCK_P`` pixels x G channels, channels the contiguous axis, so
  each pixel's G channels load as one vector (16 bytes a thread) and the index and mask math of a tap is paid
  once per pixel for all G channels. Its filter is ``w[kh, kw, C]`` (TensorFlow's depthwise layout, a tap's
  channels contiguous: one vector load per tap instead of one load per channel; measured 1.10x geomean over
  the 13 CNN layers' best configs, bench/data/h200_dwconv_nhwc_hwc.csv); ``Problem`` arranges torch's
  ``[C, 1, kh, kw]`` filter so once, outside the timed region, as a model's weights are arranged once at load. The tensor-core schemes gather along channels of one pixel only in NCHW;
  an NHWC problem runs the vector kernel (``validate`` refuses the others).

Every kernel: program = (pixel tile, channel group, n), grid = (cdiv(OH*OW, BLOCK_P), cdiv(C, G), N),
pixel tiles fastest. Sizes N, C, H, W, OH, OW are runtime arguments; kh, kw, stride, pad, padW, dilation,
G, BLOCK_P, BLOCK_K are constexpr. The batch offset is int64; offsets inside one image are int32
(``launch`` refuses C*H*W or C*OH*OW >= 2**31).

The module imports without torch or triton (both are imported lazily or under a guard), so the plain
helpers (``output_size``, ``validate``) work on a machine without them.
"""

from __future__ import annotations

import math

try:  # guarded: the module must import where triton is absent
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only without triton
    triton = None
    tl = None

SCHEMES = {0: "group_loop", 1: "group_opt", 2: "vector"}
LAYOUTS = ("nchw", "nhwc")
SCHEME_IDS = {v: k for k, v in SCHEMES.items()}
MAX_G = 64
MAX_G_NHWC = 256  # channels per NHWC program: a pixel's channels are one contiguous run (up to 512 bytes)
CONV_KEYS = ("kh", "kw", "stride", "pad", "dilation")
CFG_KEYS = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages", "STRIP")
REL_ERR_MAX = 1e-2
# filters of at least this many taps (5x5, 7x7) run their rows in a run-time loop on NHWC (`row_loop`): on the
# H200 five of the seven 5x5 and 7x7 layers ran 1.03-1.19x faster so (two 0.95-0.99x) and the 3x3 ones 0.82-0.96x
# (bench/data/h200_dwconv_nhwc_rows.csv)
ROW_LOOP_TAPS = 25
# output columns a NHWC strip computes from one load of each input column of its window (`_dw_nhwc_strip_kernel`)
STRIPS = (1, 2, 4)


def _pow2(v: int) -> bool:
    return v >= 1 and (v & (v - 1)) == 0


def next_pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def pad_h(kh: int, pad: int) -> int:
    """Padding along H: ``pad`` when the kernel has height (kh > 1), else 0 (1-D convs along W)."""
    return int(pad) if int(kh) > 1 else 0


def pad_w(kw: int, pad: int) -> int:
    """Padding along W: ``pad`` when the kernel has width (kw > 1), else 0 (1-D convs along H)."""
    return int(pad) if int(kw) > 1 else 0


def row_loop(kh: int, kw: int) -> bool:
    """Whether the NHWC kernel loops over the filter rows at run time (each row's taps unrolled) instead of
    unrolling every tap: a large filter's unrolled taps keep more loads live than registers hold well."""
    return kh * kw >= ROW_LOOP_TAPS


def output_size(H: int, W: int, kh: int, kw: int, stride: int, pad: int, dilation: int) -> tuple[int, int]:
    """(OH, OW) of the depthwise conv; each axis is padded only when the kernel spans it."""
    pw = pad_w(kw, pad)
    OH = (H + 2 * pad_h(kh, pad) - dilation * (kh - 1) - 1) // stride + 1
    OW = (W + 2 * pw - dilation * (kw - 1) - 1) // stride + 1
    return OH, OW


def scheme_id(s) -> int:
    """Scheme as its number (0, 1, 2) from a number or a label ('group_loop', 'group_opt', 'vector')."""
    if isinstance(s, str) and not s.strip().lstrip("-").isdigit():
        return SCHEME_IDS[s.strip()]
    return int(s)


def scheme_label(s) -> str:
    return SCHEMES[scheme_id(s)]


def normalize_cfg(cfg: dict) -> dict:
    """cfg with every knob as an int (scheme as its number); num_stages defaults to 1."""
    out = {
        "scheme": scheme_id(cfg["scheme"]),
        "groups_per_op": int(cfg["groups_per_op"]),
        "BLOCK_P": int(cfg["BLOCK_P"]),
        "BLOCK_K": int(cfg.get("BLOCK_K", 16)),
        "num_warps": int(cfg.get("num_warps", 4)),
        "num_stages": int(cfg.get("num_stages", 1)),
        "STRIP": int(cfg.get("STRIP", 1)),
    }
    return out


def validate(cfg: dict, conv: dict | None = None, layout: str = "nchw") -> str | None:
    """Why ``cfg`` cannot run (a sentence), or None when it can. ``conv`` (kh, kw, ...) is optional; ``layout``
    nchw or nhwc (a ``conv`` dict's own ``layout`` key, when it has one, wins)."""
    layout = str((conv or {}).get("layout", layout))
    if layout not in LAYOUTS:
        return f"layout {layout!r} is not one of {', '.join(LAYOUTS)}"
    try:
        c = normalize_cfg(cfg)
    except (KeyError, TypeError, ValueError) as e:
        return f"bad config {cfg}: {type(e).__name__}: {e}"
    s, G, BP, BK = c["scheme"], c["groups_per_op"], c["BLOCK_P"], c["BLOCK_K"]
    if s not in SCHEMES:
        return f"scheme {s} is not one of {sorted(SCHEMES)} ({', '.join(SCHEMES.values())})"
    if not _pow2(c["num_warps"]) or c["num_warps"] > 32:
        return f"num_warps {c['num_warps']} must be a power of two <= 32"
    if c["num_stages"] < 1:
        return f"num_stages {c['num_stages']} must be >= 1"
    if not _pow2(BP) or not 16 <= BP <= 1024:
        return f"BLOCK_P {BP} must be a power of two in [16, 1024]"
    max_g = MAX_G_NHWC if layout == "nhwc" else MAX_G
    if not _pow2(G) or G > max_g:
        return f"groups_per_op {G} must be a power of two in [1, {max_g}] (tl.arange needs powers of two)"
    if c["STRIP"] not in STRIPS:
        return f"STRIP {c['STRIP']} must be one of {', '.join(map(str, STRIPS))}"
    if c["STRIP"] > 1 and layout != "nhwc":
        return f"STRIP {c['STRIP']} (output columns a strip) runs on layout nhwc only; nchw takes STRIP 1"
    if c["STRIP"] > BP:
        return f"STRIP {c['STRIP']} exceeds BLOCK_P {BP}"
    if layout == "nhwc" and s != 2:
        return f"layout nhwc runs the vector scheme only (scheme 2), not {SCHEMES[s]}"
    if s == 0 and G != 1:
        return f"group_loop handles one channel per program: groups_per_op must be 1, not {G}"
    if s == 1 and G < 2:
        return "group_opt needs groups_per_op >= 2 (G = 1 is group_loop)"
    if s in (0, 1):
        if BK not in (16, 32, 64, 128):
            return f"BLOCK_K {BK} must be 16, 32, 64 or 128 (tl.dot needs K >= 16, a power of two)"
        if BP < 16:
            return f"BLOCK_P {BP} must be >= 16 for tl.dot"
        if BP * max(G, 16) > 32768:
            return f"register tile BLOCK_P*NP = {BP * max(G, 16)} > 32768"
    elif G * BP > 16384:
        return f"register tile G*BLOCK_P = {G * BP} > 16384"
    if conv is not None:
        try:
            kh, kw, st, pd, dl = (int(conv[k]) for k in CONV_KEYS)
        except (KeyError, TypeError, ValueError) as e:
            return f"bad conv {conv}: {type(e).__name__}: {e}"
        if min(kh, kw, st, dl) < 1 or pd < 0:
            return f"bad conv {conv}: kh, kw, stride, dilation must be >= 1 and pad >= 0"
    return None


def _split(cfg: dict, conv: dict):
    """(normalized config, kh, kw, stride, pad along H, pad along W, dilation)."""
    c = normalize_cfg(cfg)
    kh, kw, st, pd, dl = (int(conv[k]) for k in CONV_KEYS)
    return c, kh, kw, st, pad_h(kh, pd), pad_w(kw, pd), dl


# --- kernels -----------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _dw_dot_kernel(
        x_ptr,
        w_ptr,
        out_ptr,
        N,
        C,
        H,
        W,
        OH,
        OW,
        KH: tl.constexpr,
        KW: tl.constexpr,
        STRIDE: tl.constexpr,
        PAD: tl.constexpr,
        PADW: tl.constexpr,
        DIL: tl.constexpr,
        G: tl.constexpr,
        NP: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """group_loop (G = 1) / group_opt (G >= 2): out[p, j] = sum_k A[p, k] B[k, j] on tensor cores."""
        T: tl.constexpr = KH * KW
        KTOT: tl.constexpr = G * T
        pid_p = tl.program_id(0)
        pid_g = tl.program_id(1)
        n = tl.program_id(2)
        P = OH * OW
        offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
        p_mask = offs_p < P
        oh = offs_p // OW
        ow = offs_p % OW
        ih0 = oh * STRIDE - PAD
        iw0 = ow * STRIDE - PADW
        c0 = pid_g * G
        x_img = x_ptr + n.to(tl.int64) * C * H * W
        out_img = out_ptr + n.to(tl.int64) * C * P
        cols = tl.arange(0, NP)
        acc = tl.zeros((BLOCK_P, NP), dtype=tl.float32)
        for k0 in range(0, KTOT, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            cl = ks // T  # channel inside the group
            t = ks % T  # tap
            th = t // KW
            tw = t % KW
            c = c0 + cl
            k_mask = (ks < KTOT) & (c < C)
            ih = ih0[:, None] + (th * DIL)[None, :]
            iw = iw0[:, None] + (tw * DIL)[None, :]
            m = p_mask[:, None] & k_mask[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load(x_img + (c * H * W)[None, :] + ih * W + iw, mask=m, other=0.0)
            wv = tl.load(w_ptr + c * T + t, mask=k_mask, other=0.0)
            b = tl.where(cl[:, None] == cols[None, :], wv[:, None], 0.0).to(a.dtype)
            acc = tl.dot(a, b, acc)
        cc = c0 + cols
        o_mask = p_mask[:, None] & ((cols < G) & (cc < C))[None, :]
        tl.store(out_img + (cc * P)[None, :] + offs_p[:, None], acc.to(out_ptr.dtype.element_ty), mask=o_mask)

    @triton.jit
    def _dw_vec_kernel(
        x_ptr,
        w_ptr,
        out_ptr,
        N,
        C,
        H,
        W,
        OH,
        OW,
        KH: tl.constexpr,
        KW: tl.constexpr,
        STRIDE: tl.constexpr,
        PAD: tl.constexpr,
        PADW: tl.constexpr,
        DIL: tl.constexpr,
        G: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """vector: acc[G, BLOCK_P] += x_window * w[c, t] on CUDA cores, taps unrolled (BLOCK_K unused)."""
        pid_p = tl.program_id(0)
        pid_g = tl.program_id(1)
        n = tl.program_id(2)
        P = OH * OW
        offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
        p_mask = offs_p < P
        oh = offs_p // OW
        ow = offs_p % OW
        cs = pid_g * G + tl.arange(0, G)
        c_mask = cs < C
        x_planes = x_ptr + n.to(tl.int64) * C * H * W + (cs * H * W)[:, None]
        w_rows = w_ptr + cs * (KH * KW)
        acc = tl.zeros((G, BLOCK_P), dtype=tl.float32)
        for th in tl.static_range(KH):
            ih = oh * STRIDE - PAD + th * DIL
            mh = p_mask & (ih >= 0) & (ih < H)
            for tw in tl.static_range(KW):
                iw = ow * STRIDE - PADW + tw * DIL
                m = mh & (iw >= 0) & (iw < W)
                xv = tl.load(x_planes + (ih * W + iw)[None, :], mask=c_mask[:, None] & m[None, :], other=0.0)
                wv = tl.load(w_rows + (th * KW + tw), mask=c_mask, other=0.0)
                acc += xv.to(tl.float32) * wv.to(tl.float32)[:, None]
        out_planes = out_ptr + n.to(tl.int64) * C * P + (cs * P)[:, None]
        tl.store(
            out_planes + offs_p[None, :],
            acc.to(out_ptr.dtype.element_ty),
            mask=c_mask[:, None] & p_mask[None, :],
        )

    @triton.jit
    def _dw_nhwc_row(acc, x_img, w_ptr, th, oh, ow, p_mask, cs, c_mask, H, W, C, KW, STRIDE, PAD, PADW, DIL):
        """One filter row th of the NHWC kernel: its KW taps unrolled, acc[BLOCK_P, G] += x * w."""
        ih = oh * STRIDE - PAD + th * DIL
        mh = p_mask & (ih >= 0) & (ih < H)
        for tw in tl.static_range(KW):
            iw = ow * STRIDE - PADW + tw * DIL
            m = mh & (iw >= 0) & (iw < W)
            xv = tl.load(
                x_img + ((ih * W + iw) * C)[:, None] + cs[None, :],
                mask=m[:, None] & c_mask[None, :],
                other=0.0,
            )
            wv = tl.load(w_ptr + (th * KW + tw) * C + cs, mask=c_mask, other=0.0)
            acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
        return acc

    @triton.jit
    def _dw_nhwc_tap(acc, xj, w_ptr, th, cs, c_mask, C, J: tl.constexpr, S: tl.constexpr, KW, STRIDE, DIL):
        """Strip column S's accumulator += xj * w[th, tw, :] when the strip's input column J is its tap tw
        (J = S*STRIDE + tw*DIL); otherwise acc unchanged. Decided at compile time: J, S and the filter are
        constexpr."""
        D: tl.constexpr = J - S * STRIDE
        if D >= 0:
            if D % DIL == 0:
                if D // DIL < KW:
                    wv = tl.load(w_ptr + (th * KW + D // DIL) * C + cs, mask=c_mask, other=0.0)
                    acc += xj * wv.to(tl.float32)[None, :]
        return acc

    @triton.jit
    def _dw_nhwc_strip_row(
        a0,
        a1,
        a2,
        a3,
        x_img,
        w_ptr,
        th,
        oh,
        ow0,
        s_mask,
        cs,
        c_mask,
        H,
        W,
        C,
        KW,
        STRIDE,
        PAD,
        PADW,
        DIL,
        SW: tl.constexpr,
    ):
        """One filter row th for strips of SW output columns (a0..a3: the strip's columns, SW <= 4): the
        strip's (SW-1)*STRIDE + (KW-1)*DIL + 1 input columns are each loaded once and used from registers by
        every output column whose window holds them, where the one-pixel kernel loads a column once per tap
        that reads it."""
        ih = oh * STRIDE - PAD + th * DIL
        mh = s_mask & (ih >= 0) & (ih < H)
        row = x_img + (ih * W * C)[:, None] + cs[None, :]
        for j in tl.static_range((SW - 1) * STRIDE + (KW - 1) * DIL + 1):
            iw = ow0 * STRIDE - PADW + j
            m = mh & (iw >= 0) & (iw < W)
            xj = tl.load(row + (iw * C)[:, None], mask=m[:, None] & c_mask[None, :], other=0.0).to(tl.float32)
            a0 = _dw_nhwc_tap(a0, xj, w_ptr, th, cs, c_mask, C, j, 0, KW, STRIDE, DIL)
            if SW > 1:
                a1 = _dw_nhwc_tap(a1, xj, w_ptr, th, cs, c_mask, C, j, 1, KW, STRIDE, DIL)
            if SW > 2:
                a2 = _dw_nhwc_tap(a2, xj, w_ptr, th, cs, c_mask, C, j, 2, KW, STRIDE, DIL)
                a3 = _dw_nhwc_tap(a3, xj, w_ptr, th, cs, c_mask, C, j, 3, KW, STRIDE, DIL)
        return a0, a1, a2, a3

    @triton.jit
    def _dw_nhwc_strip_kernel(
        x_ptr,
        w_ptr,
        out_ptr,
        N,
        C,
        H,
        W,
        OH,
        OW,
        KH: tl.constexpr,
        KW: tl.constexpr,
        STRIDE: tl.constexpr,
        PAD: tl.constexpr,
        PADW: tl.constexpr,
        DIL: tl.constexpr,
        G: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_K: tl.constexpr,
        ROW_LOOP: tl.constexpr,
        SW: tl.constexpr,
    ):
        """vector on NHWC with output strips: BLOCK_P // SW strips of SW adjacent output columns x G channels
        (SW 2 or 4), each input column of a strip's window loaded once a filter row (`_dw_nhwc_strip_row`)."""
        BS: tl.constexpr = BLOCK_P // SW
        pid_p = tl.program_id(0)
        pid_g = tl.program_id(1)
        n = tl.program_id(2)
        strips_w = tl.cdiv(OW, SW)
        offs_s = pid_p * BS + tl.arange(0, BS)
        s_mask = offs_s < OH * strips_w
        oh = offs_s // strips_w
        ow0 = (offs_s % strips_w) * SW
        cs = pid_g * G + tl.arange(0, G)
        c_mask = cs < C
        x_img = x_ptr + n.to(tl.int64) * H * W * C
        a0 = tl.zeros((BS, G), dtype=tl.float32)
        a1 = tl.zeros((BS, G), dtype=tl.float32)
        a2 = tl.zeros((BS, G), dtype=tl.float32)
        a3 = tl.zeros((BS, G), dtype=tl.float32)
        # fmt: off
        if ROW_LOOP:
            for th in range(KH):
                a0, a1, a2, a3 = _dw_nhwc_strip_row(
                    a0, a1, a2, a3, x_img, w_ptr, th, oh, ow0, s_mask, cs, c_mask, H, W, C, KW, STRIDE, PAD, PADW,
                    DIL, SW,
                )
        else:
            for th in tl.static_range(KH):
                a0, a1, a2, a3 = _dw_nhwc_strip_row(
                    a0, a1, a2, a3, x_img, w_ptr, th, oh, ow0, s_mask, cs, c_mask, H, W, C, KW, STRIDE, PAD, PADW,
                    DIL, SW,
                )
        # fmt: on
        out = out_ptr + n.to(tl.int64) * OH * OW * C + ((oh * OW + ow0) * C)[:, None] + cs[None, :]
        om = s_mask[:, None] & c_mask[None, :]
        ty = out_ptr.dtype.element_ty
        tl.store(out, a0.to(ty), mask=om & (ow0 < OW)[:, None])
        if SW > 1:
            tl.store(out + C, a1.to(ty), mask=om & (ow0 + 1 < OW)[:, None])
        if SW > 2:
            tl.store(out + 2 * C, a2.to(ty), mask=om & (ow0 + 2 < OW)[:, None])
            tl.store(out + 3 * C, a3.to(ty), mask=om & (ow0 + 3 < OW)[:, None])

    @triton.jit
    def _dw_nhwc_kernel(
        x_ptr,
        w_ptr,
        out_ptr,
        N,
        C,
        H,
        W,
        OH,
        OW,
        KH: tl.constexpr,
        KW: tl.constexpr,
        STRIDE: tl.constexpr,
        PAD: tl.constexpr,
        PADW: tl.constexpr,
        DIL: tl.constexpr,
        G: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_K: tl.constexpr,
        ROW_LOOP: tl.constexpr,
    ):
        """vector on NHWC: acc[BLOCK_P, G] += x[pixel, channels] * w[t, channels], channels contiguous in both.
        ROW_LOOP (large filters, `row_loop`): the filter rows in a run-time loop, each row's taps unrolled, so
        the compiler cannot hoist later rows' loads above this row's FMAs; else every tap unrolled."""
        pid_p = tl.program_id(0)
        pid_g = tl.program_id(1)
        n = tl.program_id(2)
        P = OH * OW
        offs_p = pid_p * BLOCK_P + tl.arange(0, BLOCK_P)
        p_mask = offs_p < P
        oh = offs_p // OW
        ow = offs_p % OW
        cs = pid_g * G + tl.arange(0, G)
        c_mask = cs < C
        x_img = x_ptr + n.to(tl.int64) * H * W * C
        acc = tl.zeros((BLOCK_P, G), dtype=tl.float32)
        if ROW_LOOP:
            for th in range(KH):
                acc = _dw_nhwc_row(
                    acc, x_img, w_ptr, th, oh, ow, p_mask, cs, c_mask, H, W, C, KW, STRIDE, PAD, PADW, DIL
                )
        else:
            for th in tl.static_range(KH):
                acc = _dw_nhwc_row(
                    acc, x_img, w_ptr, th, oh, ow, p_mask, cs, c_mask, H, W, C, KW, STRIDE, PAD, PADW, DIL
                )
        out_img = out_ptr + n.to(tl.int64) * P * C
        tl.store(
            out_img + (offs_p * C)[:, None] + cs[None, :],
            acc.to(out_ptr.dtype.element_ty),
            mask=p_mask[:, None] & c_mask[None, :],
        )


def _kernel_and_args(cfg: dict, conv: dict, N: int, C: int, H: int, W: int, layout: str = "nchw"):
    """(jit kernel, grid, runtime int args, constexpr/launch kwargs) for one tiling."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    c, kh, kw, st, ph, pw, dl = _split(cfg, conv)
    OH, OW = output_size(H, W, kh, kw, st, int(conv["pad"]), dl)
    G, BP = c["groups_per_op"], c["BLOCK_P"]
    sw = c["STRIP"]  # strips of sw output columns: OH * cdiv(OW, sw) of them, BP // sw a program
    grid = (triton.cdiv(OH * triton.cdiv(OW, sw), BP // sw), triton.cdiv(C, G), N)
    kw_args = dict(
        KH=kh,
        KW=kw,
        STRIDE=st,
        PAD=ph,
        PADW=pw,
        DIL=dl,
        G=G,
        BLOCK_P=BP,
        BLOCK_K=c["BLOCK_K"],
        num_warps=c["num_warps"],
        num_stages=c["num_stages"],
    )
    if layout == "nhwc":
        kern = _dw_nhwc_kernel
        kw_args["ROW_LOOP"] = row_loop(kh, kw)
        if c["STRIP"] > 1:
            kern = _dw_nhwc_strip_kernel
            kw_args["SW"] = c["STRIP"]
    elif c["scheme"] == 2:
        kern = _dw_vec_kernel
    else:
        kern = _dw_dot_kernel
        kw_args["NP"] = max(G, 16)
    return kern, grid, (N, C, H, W, OH, OW), kw_args


def launch(x, w, out, cfg: dict, conv: dict, layout: str = "nchw") -> None:
    """Run one tiling: x [N, C, H, W], out [N, C, OH, OW], same dtype, contiguous in ``layout`` (nchw: torch's
    default format; nhwc: torch.channels_last); w contiguous, [C, 1, kh, kw] on nchw, [kh, kw, C] on nhwc
    (``filter_for``)."""
    layout = str(conv.get("layout", layout))
    why = validate(cfg, conv, layout)
    if why:
        raise ValueError(why)
    N, C, H, W = (int(v) for v in x.shape)
    kh, kw = int(conv["kh"]), int(conv["kw"])
    OH, OW = output_size(H, W, kh, kw, int(conv["stride"]), int(conv["pad"]), int(conv["dilation"]))
    w_shape = (kh, kw, C) if layout == "nhwc" else (C, 1, kh, kw)
    if tuple(w.shape) != w_shape or tuple(out.shape) != (N, C, OH, OW):
        raise ValueError(f"shapes x {tuple(x.shape)} w {tuple(w.shape)} out {tuple(out.shape)} do not match")
    if layout == "nhwc":
        import torch

        fmt = torch.channels_last
        if not (x.is_contiguous(memory_format=fmt) and out.is_contiguous(memory_format=fmt)):
            raise ValueError("layout nhwc: x and out must be contiguous in torch.channels_last")
        if not w.is_contiguous():
            raise ValueError("w must be contiguous ([kh, kw, C] on nhwc)")
    elif not (x.is_contiguous() and w.is_contiguous() and out.is_contiguous()):
        raise ValueError("x, w and out must be contiguous (NCHW)")
    if max(C * H * W, C * OH * OW) >= 2**31:
        raise ValueError("one image exceeds 2**31 elements: offsets inside an image are int32")
    kern, grid, ints, kw_args = _kernel_and_args(cfg, conv, N, C, H, W, layout)
    kern[grid](x, w, out, *ints, **kw_args)


def filter_for(w, layout: str):
    """torch's depthwise filter [C, 1, kh, kw] as the layout's kernel reads it: itself on nchw, [kh, kw, C] on
    nhwc (done once per filter, like any arrangement of a model's weights at load)."""
    if layout != "nhwc":
        return w
    C, _, kh, kw = w.shape
    return w.reshape(C, kh * kw).t().contiguous().view(kh, kw, C)


def precompile(problem: dict, cfg: dict, dtype: str = "fp16"):
    """Compile, into Triton's on-disk cache, the kernel that ``launch`` would run for this problem.

    Uses tiny tensors with the real ints, so Triton's specialisation (which ints are multiples of 16 or
    equal to 1; pointers 16-byte aligned) is the one the timed run gets. Nothing is launched. Returns
    Triton's compiled kernel (its ``n_regs``, ``n_spills`` and ``metadata.shared`` can be read).
    """
    import torch

    layout = str(problem.get("layout", "nchw"))
    why = validate(cfg, problem, layout)
    if why:
        raise ValueError(why)
    dt = _torch_dtype(torch, dtype)
    N, C, H, W = (int(problem[k]) for k in ("N", "C", "H", "W"))
    kern, grid, ints, kw_args = _kernel_and_args(cfg, problem, N, C, H, W, layout)
    t = [torch.empty(16, dtype=dt, device="cuda") for _ in range(3)]
    return kern.warmup(*t, *ints, grid=grid, **kw_args)


# --- measuring ----------------------------------------------------------------------------------------


def _torch_dtype(torch, dtype):
    if not isinstance(dtype, str):
        return dtype
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def compulsory_bytes(problem: dict, elem_bytes: int = 2) -> int:
    """Input read once + output written once + weight read once, in bytes."""
    N, C, H, W = (int(problem[k]) for k in ("N", "C", "H", "W"))
    kh, kw = int(problem["kh"]), int(problem["kw"])
    OH, OW = output_size(H, W, kh, kw, int(problem["stride"]), int(problem["pad"]), int(problem["dilation"]))
    return elem_bytes * (N * C * H * W + N * C * OH * OW + C * kh * kw)


class Problem:
    """Random-normal x and w of one depthwise problem on a device, their fp32 reference and an output; x and
    the output in the problem's ``layout`` (nchw, or nhwc: torch.channels_last)."""

    def __init__(self, problem: dict, dtype="fp16", seed: int = 0, device: str = "cuda"):
        import torch
        import torch.nn.functional as F

        self.p = {k: int(problem[k]) for k in ("N", "C", "H", "W", *CONV_KEYS)}
        self.layout = str(problem.get("layout", "nchw"))
        fmt = torch.channels_last if self.layout == "nhwc" else torch.contiguous_format
        N, C, H, W = (self.p[k] for k in ("N", "C", "H", "W"))
        kh, kw, st, pd, dl = (self.p[k] for k in CONV_KEYS)
        self.padding = (pad_h(kh, pd), pad_w(kw, pd))
        self.OH, self.OW = output_size(H, W, kh, kw, st, pd, dl)
        if self.OH < 1 or self.OW < 1:
            raise ValueError(f"empty output for {self.p}")
        self.dtype = _torch_dtype(torch, dtype)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        x = torch.randn((N, C, H, W), generator=gen, device=device, dtype=torch.float32)
        self.x = x.to(self.dtype).contiguous(memory_format=fmt)
        self.w = torch.randn((C, 1, kh, kw), generator=gen, device=device, dtype=torch.float32).to(self.dtype)
        self.w_kernel = filter_for(self.w, self.layout)  # the filter as the layout's kernel reads it
        self.out = torch.empty((N, C, self.OH, self.OW), device=device, dtype=self.dtype).contiguous(
            memory_format=fmt
        )
        self.ref = F.conv2d(
            self.x.float(), self.w.float(), stride=st, padding=self.padding, dilation=dl, groups=C
        )
        self.ref_norm = float(torch.linalg.vector_norm(self.ref))
        self.bytes = compulsory_bytes(self.p, self.x.element_size())

    @property
    def conv(self) -> dict:
        return {k: self.p[k] for k in CONV_KEYS}

    def rel_err(self, out) -> float:
        import torch

        if bool(torch.isnan(out).any()):
            return math.nan
        return float(torch.linalg.vector_norm(out.float() - self.ref)) / max(self.ref_norm, 1e-30)

    def check(self, cfg: dict) -> float:
        """Poison the output with NaN, run once, return ||out - ref|| / ||ref|| (raises if > 1e-2 or NaN)."""
        import torch

        self.out.fill_(float("nan"))
        launch(self.x, self.w_kernel, self.out, cfg, self.conv, self.layout)
        if self.out.is_cuda:
            torch.cuda.synchronize()
        err = self.rel_err(self.out)
        if not err <= REL_ERR_MAX:  # NaN fails too
            raise RuntimeError(f"wrong result: rel_err {err:.3e} for cfg {cfg}")
        return err

    def torch_fn(self):
        import torch.nn.functional as F

        x, w, st, dl, pad, C = self.x, self.w, self.p["stride"], self.p["dilation"], self.padding, self.p["C"]
        return lambda: F.conv2d(x, w, stride=st, padding=pad, dilation=dl, groups=C)

    def torch_formats(self, warmup_ms: float = 10, rep_ms: float = 40) -> dict[str, dict]:
        """torch conv2d on these values in both memory formats (the vendor call: torch dispatches a depthwise
        conv to cuDNN or its own kernel by shape and format), each checked against the fp32 reference and
        timed as a tiling is: {"nchw": {"ms", "rel_err"}, "channels_last": {...}}. The format conversion is not
        timed; a wrong result raises RuntimeError."""
        import torch
        import torch.nn.functional as F

        st, dl, pad, C = self.p["stride"], self.p["dilation"], self.padding, self.p["C"]
        out = {}
        for name, fmt in (("nchw", torch.contiguous_format), ("channels_last", torch.channels_last)):
            x, w = self.x.contiguous(memory_format=fmt), self.w.contiguous(memory_format=fmt)

            def fn(x=x, w=w):
                return F.conv2d(x, w, stride=st, padding=pad, dilation=dl, groups=C)

            err = self.rel_err(fn())
            if not err <= REL_ERR_MAX:  # NaN fails too
                raise RuntimeError(f"torch conv2d ({name}): rel_err {err:.3e}")
            out[name] = {"ms": self.time_fn(fn, warmup_ms, rep_ms), "rel_err": err}
        return out

    def check_torch(self) -> float:
        err = self.rel_err(self.torch_fn()())
        if not err <= REL_ERR_MAX:
            raise RuntimeError(f"torch conv2d: rel_err {err:.3e}")
        return err

    def time_fn(self, fn, warmup_ms: float = 10, rep_ms: float = 40) -> float:
        """Median ms of fn over do_bench (L2 flushed by a 256 MB write before every timed call)."""
        import triton as _triton

        return float(_triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))

    def time(self, cfg: dict, warmup_ms: float = 10, rep_ms: float = 40) -> float:
        x, w, out, conv = self.x, self.w_kernel, self.out, self.conv
        kern, grid, ints, kw_args = _kernel_and_args(cfg, conv, *x.shape, layout=self.layout)
        kern[grid](x, w, out, *ints, **kw_args)  # compile / load outside the timed region

        def fn():
            kern[grid](x, w, out, *ints, **kw_args)

        return self.time_fn(fn, warmup_ms, rep_ms)


def run(
    problem: dict,
    cfg: dict,
    check: bool = True,
    rep_ms: float = 40,
    warmup_ms: float = 10,
    dtype="fp16",
    seed: int = 0,
) -> dict:
    """Fresh random inputs, a correctness check against torch (fp32 on upcast inputs), then the median time.

    Returns ``{"ms", "rel_err", "gbps"}`` (rel_err None when check=False). Raises ValueError for a config
    that ``validate`` rejects and RuntimeError for a wrong result (rel_err > 1e-2 or any NaN). ``problem`` may
    carry ``layout`` (nchw, the default, or nhwc).
    """
    why = validate(cfg, problem, str(problem.get("layout", "nchw")))
    if why:
        raise ValueError(why)
    prob = Problem(problem, dtype=dtype, seed=seed)
    err = prob.check(cfg) if check else None
    ms = prob.time(cfg, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return {"ms": ms, "rel_err": err, "gbps": prob.bytes / (ms * 1e-3) / 1e9}
