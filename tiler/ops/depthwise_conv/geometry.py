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
    planes of the batch one after another) reads: the output rows it covers, worst-case alignment (a run
    that does not fill whole rows straddles one more), mapped back through stride and dilation to input rows
    of full width W (the columns a stride skips sit in the same contiguous row). A run longer than a plane
    reads whole planes."""
    pixels = np.asarray(pixels, dtype=np.float64)
    plane = p.out_h * p.out_w
    out_rows = np.minimum(ceil_div(pixels, p.out_w) + (pixels % p.out_w != 0), p.out_h)
    span = (out_rows - 1) * p.stride + p.dilation * (p.kh - 1) + 1
    in_rows = np.clip(span, 1, p.H)  # padded rows are zeros the kernel makes, not reads
    whole = ceil_div(pixels, plane) * p.H
    return np.where(pixels >= plane, whole, in_rows) * p.W


def packed_k(p: DepthwiseConv, groups) -> np.ndarray:
    """K of one cube op over `groups` channels: their taps side by side, padded to the 16-deep fractal."""
    return round_up(np.asarray(groups) * p.taps, 16)


def useful_fraction(p: DepthwiseConv, groups) -> np.ndarray:
    """Useful MACs over issued MACs of a cube op packing `groups` channels with a block-diagonal weight: each
    output pixel does groups*taps useful MACs, the op issues K_pad * N_pad with K = groups*taps and N = groups,
    each padded to 16. M padding is left out (it is the tile's, the same for every packing)."""
    g = np.asarray(groups, dtype=np.float64)
    return g * p.taps / (packed_k(p, g) * round_up(g, 16))
