"""Physics shared by every operator model: the estimate record, roofline, bandwidth mixing, alignment, bounds.

Column-in, column-out: every function takes numpy arrays (one entry per candidate) or scalars and broadcasts.
"""

from __future__ import annotations

import math

import numpy as np

# The pipes of the estimate record, per chip family, in the words of the family's profiler: Ascend keeps msprof's
# names (what an msprof trace of the kernel shows); a GPU names its own units (what Nsight shows), not msprof's:
# tensor = tensor-core MMA, alu = CUDA-core math, issue = instruction issue (index, loop and program overhead),
# smem = shared memory -> registers, load = global -> shared, store = epilogue stores and atomics.
PIPES_OF = {
    "ascend": ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe"),
    "cuda": ("tensor", "alu", "issue", "smem", "load", "store"),
}
# The `bound` label a pipe gives when it is the bound (msprof calls the mac pipe's bound `cube`); every family adds
# `latency` (no pipe saturated).
BOUND_OF_PIPE_OF = {
    "ascend": {
        "mac": "cube",
        "vec": "vector",
        "scalar": "scalar",
        "mte1": "mte1",
        "mte2": "mte2",
        "mte3": "mte3",
        "fixpipe": "fixpipe",
    },
    "cuda": {p: p for p in PIPES_OF["cuda"]},
}
BOUNDS_OF = {
    "ascend": ("mte2", "mte1", "cube", "vector", "fixpipe", "mte3", "scalar", "latency"),
    "cuda": ("load", "smem", "tensor", "alu", "store", "issue", "latency"),
}
# The estimate record (DESIGN §4): scalar columns, one row per candidate; pipes are `<pipe>_us` columns, the
# family's pipes (record(family)).
RECORD_HEAD = ("time_us", "bound")
RECORD_TAIL = ("cores_used", "waves", "balance", "l2_hit_rate", "hbm_bytes", "l2_bytes", "roofline_us")
FAMILIES = tuple(PIPES_OF)
# pipe -> (family, bound): the families' pipe names are disjoint, so a pipe name says its family
_PIPE_INDEX = {p: (fam, b) for fam, table in BOUND_OF_PIPE_OF.items() for p, b in table.items()}


def _family(family: str) -> str:
    if family not in PIPES_OF:
        raise ValueError(f"unknown chip family {family!r} (known: {', '.join(FAMILIES)})")
    return family


def pipes(family: str) -> tuple[str, ...]:
    """The pipe names of a chip family's estimate record (`<pipe>_us` columns, `pipes_us` keys)."""
    return PIPES_OF[_family(family)]


def bounds(family: str) -> tuple[str, ...]:
    """The `bound` labels a chip family's estimate may carry (its pipes' bounds and `latency`)."""
    return BOUNDS_OF[_family(family)]


def record(family: str) -> tuple[str, ...]:
    """The estimate record's columns for a chip family, in order."""
    return (*RECORD_HEAD, *(f"{p}_us" for p in pipes(family)), *RECORD_TAIL)


def record_columns(families) -> tuple[str, ...]:
    """The union of several families' record columns, in record order (a table over chips of two families)."""
    fams = [_family(f) for f in dict.fromkeys(families)]
    pipe_cols = [f"{p}_us" for f in fams for p in pipes(f)]
    return (*RECORD_HEAD, *dict.fromkeys(pipe_cols), *RECORD_TAIL)


def family_of_pipes(names) -> str:
    """The family whose pipes `names` are; ValueError for an unknown name or names of two families."""
    names = list(names)
    unknown = [p for p in names if p not in _PIPE_INDEX]
    if unknown:
        raise ValueError(f"unknown pipe(s) {', '.join(unknown)} (known: {dict(PIPES_OF)})")
    fams = {_PIPE_INDEX[p][0] for p in names}
    if len(fams) != 1:
        raise ValueError(f"pipes {', '.join(names)} mix the families {', '.join(sorted(fams))}")
    return fams.pop()


def pipes_of_row(row) -> dict[str, float]:
    """A record row's pipes as {pipe: us}, with the names of the family whose `<pipe>_us` columns it has."""
    present = [p for p in _PIPE_INDEX if f"{p}_us" in row]
    if not present:
        raise ValueError("the row has no `<pipe>_us` column of any family")
    return {p: row[f"{p}_us"] for p in pipes(family_of_pipes(present))}


# A pipe counts as the bound when it is busy for at least this share of the critical core's time; below it no
# pipe is saturated and gaps, fill and drain dominate ("latency").
SATURATED = 0.6
# Lower bounds are scaled by this (1 - 1e-9) so that floating-point rounding (a bound's terms summed in another order
# than the estimate's) can never lift one above the estimate, and a candidate predicting exactly the incumbent's
# time is still scored (the tie rank may prefer it).
BOUND_SAFETY = 1.0 - 1e-9


def roofline_us(
    flops: float, compulsory_bytes: float, peak_flops: float, hbm_bytes_per_s: float, launch_us
) -> np.ndarray:
    """The physical floor: max(FLOPs over peak, compulsory bytes over HBM bandwidth) + launch."""
    return np.maximum(flops / peak_flops, compulsory_bytes / hbm_bytes_per_s) * 1e6 + launch_us


def classify_bound(pipes_us: dict[str, np.ndarray], busy_us: np.ndarray) -> np.ndarray:
    """Arg-max pipe's bound, or `latency` when no pipe is busy for SATURATED of the core's time.

    The labels come from the names given (all of one family: `mac` -> `cube` on Ascend, `load` -> `load` on a
    GPU); a name of no family, or names of two, raise ValueError.
    """
    names = list(pipes_us)
    family_of_pipes(names)
    # the first largest pipe, by a running comparison (argmax over a stacked axis is several times slower)
    cols = [np.asarray(pipes_us[p], dtype=np.float64) for p in names]
    largest = cols[0].copy()
    top = np.zeros(np.shape(largest), dtype=np.int64)
    for i, col in enumerate(cols[1:], start=1):
        more = col > largest
        top[more] = i
        np.maximum(largest, col, out=largest)
    saturated = largest >= SATURATED * np.maximum(busy_us, 1e-12)
    # one lookup: the pipes' labels, then `latency` for rows with no pipe saturated
    labels = np.array([*(_PIPE_INDEX[p][1] for p in names), "latency"], dtype=object)
    return labels[np.where(saturated, top, len(names))]


def mix_launch_us(chip) -> float:
    """What launching a MIX kernel (cube and vector cores together: MIX_AIC_1_2, an attention or a quantised
    matmul with its vector epilogue) costs beyond a one-type kernel, on a chip whose cube and vector cores are
    separate cores (A2/A3: `coupled` false): the runtime starts the second core type too and sets up the cross-core
    flags (S6: a MIX launch also starts the idle core type). The cores start in parallel, so it is paid once per
    launch, not per core. 0 on a coupled chip (one AI core runs both units: no second core type to start) and where
    the profile gives no `mix_head_us`."""
    if chip.get("coupled", True):
        return 0.0
    return float(chip.get("mix_head_us", 0.0))


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
    # (ceil + 1) * granule: ceil * granule + granule, one pass fewer (whole numbers: the same value exactly), the
    # passes in place on one fresh temporary
    d = seg / granule
    if not isinstance(d, np.ndarray):
        return seg / ((np.ceil(d) + 1.0) * granule)
    np.ceil(d, out=d)
    d += 1.0
    d *= granule
    return np.divide(seg, d, out=d)


_EXACT = 1 << 53  # integers below this convert to float64 exactly


def soft_max(terms, power):
    """Soft maximum (sum x^p)^(1/p) of same-shaped arrays: >= the largest term, and the overlap of units that run
    in parallel is never perfect (p -> infinity is the hard maximum, p = 1 their sum)."""
    top = terms[0]  # the element-wise largest (np.maximum.reduce of the list, without stacking it)
    for t in terms[1:]:
        top = np.maximum(top, t)
    safe = np.maximum(top, 1e-30)
    return safe * np.power(sum(np.power(t / safe, power) for t in terms), 1.0 / power)


def ceil_div(a, b):
    """ceil(a / b) for non-negative integers held in int or float arrays (float division: exact below 2**53,
    and several times faster than numpy's integer floor division)."""
    if type(a) is int and type(b) is int and 0 <= a < _EXACT and 0 < b < _EXACT:
        # two Python integers (a problem's sizes): the same float64 without numpy's call overhead (exact
        # conversions, so a / b is numpy's float64 division; the ceiling of a float64 is a float64 exactly)
        return np.float64(math.ceil(a / b))
    q = np.divide(a, b)
    # in place where the quotient is a fresh array: one temporary fewer (the same values)
    return np.ceil(q, out=q) if isinstance(q, np.ndarray) else np.ceil(q)


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


def unique_inverse(code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(code, return_inverse=True) of a 1-D integer array, plus a row holding each value: (sorted
    distinct values, the index of each row's value, one row of each value). One unstable sort (rows with equal
    codes are equal, so which of them comes first does not matter): several times faster than np.unique with
    return_index, whose sort must be stable."""
    code = np.asarray(code)
    if code.shape == (1,):  # one row: its own group (the arrays the sort gives, without it)
        return code.copy(), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    perm = code.argsort()
    s = code[perm]
    new = np.empty(s.size, dtype=bool)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    inv = np.empty(s.size, dtype=np.int64)
    inv[perm] = np.cumsum(new) - 1
    return s[new], inv, perm[new]


def group_rows_any(columns) -> tuple[np.ndarray, np.ndarray]:
    """group_rows' groups (the same numbering, sorted by the packed code), each represented by one of its rows,
    not necessarily the first: for callers that read only values that are equal over a group."""
    columns = [np.asarray(col).astype(np.int64, copy=False) for col in columns]
    if columns and all(col.shape == (1,) for col in columns):  # one row (a check, a lookup): one group
        return np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    code, span = None, 1
    for col in columns:
        lo = int(col.min())
        width = int(col.max()) - lo + 1
        if width >= 1 << 31:  # a wide column (e.g. float bit patterns): its values numbered densely first
            vals, col, _ = unique_inverse(col)
            lo, width = 0, len(vals)
        if code is None:
            code, span = col - lo, width
            continue
        if span * width >= 1 << 62:
            vals, code, _ = unique_inverse(code)
            span = len(vals)
        code, span = code * width + (col - lo), span * width
    _, inv, first = unique_inverse(code)
    return first, inv
