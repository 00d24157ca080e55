"""Geometry both families' depthwise models share: what a run of output pixels reads, and the useful-MAC
fraction of a packed cube op. Column-in, column-out (numpy arrays broadcast over candidates)."""

from __future__ import annotations

import numpy as np

from ...model.common import ceil_div, round_up
from .problem import DepthwiseConv

# the three schemes, as the `scheme` knob's codes in both families (search_spaces/depthwise_conv.toml)
GROUP_LOOP, GROUP_OPT, VECTOR = 0, 1, 2


def scheme_groups(scheme, groups) -> np.ndarray:
    """The rule both families share: group_loop packs one channel per op, group_opt at least two (one would be
    group_loop), the vector scheme any number."""
    scheme, groups = np.asarray(scheme), np.asarray(groups)
    return np.where(scheme == GROUP_LOOP, groups == 1, np.where(scheme == GROUP_OPT, groups >= 2, True))


def input_elems(p: DepthwiseConv, pixels) -> np.ndarray:
    """Input elements of one channel that a run of `pixels` consecutive output pixels (row-major in a plane,
    planes of the batch one after another) reads, at worst-case alignment: the output rows it covers (a run
    that does not fill whole rows straddles one more), mapped back through stride and dilation to input rows of
    full width W (the columns a stride skips sit in the same contiguous row), plus a second window's halo when
    the run can cross into the next plane. A run at least a plane long reads whole planes, one more when it
    does not divide the plane count evenly."""
    pixels = np.asarray(pixels, dtype=np.float64)
    plane = p.out_h * p.out_w
    out_rows = np.minimum(ceil_div(pixels, p.out_w) + (pixels % p.out_w != 0), p.out_h)
    halo = p.dilation * (p.kh - 1) + 1
    span = (out_rows - 1) * p.stride + halo
    crossing = (plane % np.maximum(pixels, 1) != 0) & (p.N > 1)  # a run may end in the next plane
    in_rows = np.clip(span, 1, p.H) + np.where(crossing, np.minimum(halo, p.H), 0)  # padding is not read
    planes = np.minimum(ceil_div(pixels, plane) + (pixels % plane != 0), p.N)
    return np.where(pixels >= plane, planes * p.H, np.minimum(in_rows, 2 * p.H)) * p.W


def strip_tiles(p: DepthwiseConv, block_p, strip):
    """Pixel tiles of one channel group of one image on the GPU: a tile covers block_p // strip strips of `strip`
    adjacent output columns, ceil(out_w / strip) strips an output row (columns past out_w masked); with strip 1,
    ceil(out_h * out_w / block_p)."""
    return ceil_div(p.out_h * ceil_div(p.out_w, strip), block_p // strip)


def k0(p: DepthwiseConv) -> int:
    """The cube fractal's depth in elements: 32 bytes (16 for fp16/bf16, 32 for int8, 8 for fp32)."""
    return 32 // p.in_bytes


def packed_k(p: DepthwiseConv, groups) -> np.ndarray:
    """K of one cube op over `groups` channels: their taps side by side, padded to the fractal's depth."""
    return round_up(np.asarray(groups) * p.taps, k0(p))


def useful_fraction(p: DepthwiseConv, groups, k_issued, n_issued) -> np.ndarray:
    """Useful MACs over issued MACs of a matrix op over `groups` channels with a block-diagonal weight: each
    output pixel does groups*taps useful MACs and the op issues k_issued * n_issued (the padded K and N of the
    hardware's tile: round16 and the fractal depth on Ascend, the dot's K chunks and max(G, 16) in Triton). M
    padding is left out (it is the tile's, the same for every packing)."""
    g = np.asarray(groups, dtype=np.float64)
    return g * p.taps / (np.asarray(k_issued, dtype=np.float64) * np.asarray(n_issued, dtype=np.float64))
