"""Physics shared by every operator model: the estimate record, roofline, bandwidth mixing, alignment, bounds.

Column-in, column-out: every function takes numpy arrays (one entry per candidate) or scalars and broadcasts.
"""

from __future__ import annotations

import numpy as np

# msprof's pipe names; a GPU model maps its units onto them (mac = tensor cores, mte2 = global->shared loads,
# mte1 = shared->registers, fixpipe = epilogue stores, scalar = issue/index overhead, vec = CUDA-core math).
PIPES = ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
BOUND_OF_PIPE = {
    "mac": "cube",
    "vec": "vector",
    "scalar": "scalar",
    "mte1": "mte1",
    "mte2": "mte2",
    "mte3": "mte3",
    "fixpipe": "fixpipe",
}
BOUNDS = ("mte2", "mte1", "cube", "vector", "fixpipe", "mte3", "scalar", "latency")
# The estimate record (DESIGN §4): scalar columns, one row per candidate; pipes are `<pipe>_us` columns.
RECORD = (
    "time_us",
    "bound",
    *(f"{p}_us" for p in PIPES),
    "cores_used",
    "waves",
    "balance",
    "l2_hit_rate",
    "hbm_bytes",
    "l2_bytes",
    "roofline_us",
)
# A pipe counts as the bound when it is busy for at least this share of the critical core's time; below it no
# pipe is saturated and gaps, fill and drain dominate ("latency").
SATURATED = 0.6


def roofline_us(
    flops: float, compulsory_bytes: float, peak_flops: float, hbm_bytes_per_s: float, launch_us
) -> np.ndarray:
    """The physical floor: max(FLOPs over peak, compulsory bytes over HBM bandwidth) + launch."""
    return np.maximum(flops / peak_flops, compulsory_bytes / hbm_bytes_per_s) * 1e6 + launch_us


def classify_bound(pipes_us: dict[str, np.ndarray], busy_us: np.ndarray) -> np.ndarray:
    """Arg-max pipe, or `latency` when no pipe is busy for SATURATED of the core's time."""
    names = list(pipes_us)
    stack = np.stack([pipes_us[p] for p in names])
    top = stack.argmax(axis=0)
    label = np.array([BOUND_OF_PIPE[p] for p in names], dtype=object)[top]
    saturated = stack.max(axis=0) >= SATURATED * np.maximum(busy_us, 1e-12)
    return np.where(saturated, label, "latency")


def mixed_bandwidth(hit_rate, l2_bytes_per_s, hbm_bytes_per_s):
    """Bytes/s when a fraction `hit_rate` comes from L2 and the rest from HBM (harmonic mix: time adds)."""
    return 1.0 / (hit_rate / l2_bytes_per_s + (1.0 - hit_rate) / hbm_bytes_per_s)


def stride_efficiency(stride_bytes, burst: int, misaligned: float):
    """Share of peak GM bandwidth a strided 2-D transfer gets from its row stride's alignment.

    Aligned to the burst (512 B on Ascend, a 16 B vector on a GPU): full rate. Aligned to 32 B only: `misaligned`
    (Ascend: ~70%, S5). Not even 32 B-aligned: each row splits into more, partial bursts; half of that again
    (estimate; CATLASS's fitted table gives 0.3-0.4 of peak for such strides).
    """
    stride_bytes = np.asarray(stride_bytes)
    return np.where(
        stride_bytes % burst == 0, 1.0, np.where(stride_bytes % 32 == 0, misaligned, misaligned * 0.5)
    )


def segment_efficiency(contiguous_bytes, granule: int = 32):
    """Share of a transfer's bytes that are useful when each contiguous row segment is rounded up to whole
    granules and pays about one granule of request overhead (short rows waste bandwidth)."""
    seg = np.maximum(np.asarray(contiguous_bytes, dtype=np.float64), 1.0)
    return seg / (np.ceil(seg / granule) * granule + granule)


def ceil_div(a, b):
    """ceil(a / b) for non-negative integers held in int or float arrays (float division: exact below 2**53,
    and several times faster than numpy's integer floor division)."""
    return np.ceil(np.divide(a, b))


def round_up(a, b):
    return ceil_div(a, b) * b


def group_rows(columns) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct rows of a table of integer columns: (index of each group's first row, group of each
    row), groups in sorted order. One sort in all: the columns are packed into one integer (mixed radix) and
    only re-numbered when the packed code would overflow."""
    code, span = None, 1
    for col in columns:
        col = np.asarray(col).astype(np.int64, copy=False)
        lo = int(col.min())
        width = int(col.max()) - lo + 1
        if code is None:
            code, span = col - lo, width
            continue
        if span * width >= 1 << 62:
            vals, code = np.unique(code, return_inverse=True)
            span, code = len(vals), code.ravel()
        code, span = code * width + (col - lo), span * width
    _, first, inv = np.unique(code, return_index=True, return_inverse=True)
    return first, inv.ravel()
