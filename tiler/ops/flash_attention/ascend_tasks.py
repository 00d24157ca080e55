"""The tasks of flash attention on Ascend and how they are dealt to cores: each task's geometry (rows, keys, heads
per block), the kinds of its steps (full or ragged rows and keys, masked or not), the per-core sums of the plain
and balanced (snake) deals in closed form, and the cached schedule and work totals the model reads."""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np

from ...model.common import ceil_div
from ...model.schedule import on_clear
from .problem import FlashAttention

STEP_TYPES = 8  # rows (full, last s1 block) x keys (full, ragged last s2 block) x mask (none, diagonal)
NTYPES = STEP_TYPES + 2  # + tasks with full rows, tasks with the last s1 block's rows


# ------------------------------------------------------------------------------------------------- geometry


def _divisors(n: int) -> np.ndarray:
    return np.array([d for d in range(1, n + 1) if n % d == 0], dtype=np.int64)


def geometry(p: FlashAttention, bs1, bs2, ks) -> dict:
    """Blocks and tasks of (block_s1, block_s2, kv_split), as numpy columns (or scalars).

    heads_per_block: query heads of one GQA group packed into a block when S1 < block_s1 (the largest divisor of
    the group with heads * S1 <= block_s1), else 1; rows: a block's rows (full / the last s1 block's); n1, nb2:
    s1 blocks per head block, s2 blocks; w, w_last: keys of a full / the last s2 block; bpc: s2 blocks per kv
    chunk; copies: (batch, head block) pairs, each of which runs every (s1 block, kv chunk) task kind."""
    bs1, bs2, ks = (np.asarray(x, dtype=np.int64) for x in (bs1, bs2, ks))
    packs = p.S1 < bs1
    divs = _divisors(p.group)
    cap = np.maximum(bs1 // p.S1, 1)
    gp = np.where(packs, divs[np.searchsorted(divs, cap, side="right") - 1], 1)
    n1 = np.where(packs, 1, ceil_div(p.S1, bs1)).astype(np.int64)
    rows = np.where(packs, gp * p.S1, bs1)
    rows_last = np.where(packs, gp * p.S1, p.S1 - (n1 - 1) * bs1)
    nb2 = ceil_div(p.S2, bs2).astype(np.int64)
    return {
        "gp": gp,
        "n1": n1,
        "rows": rows,
        "rows_last": rows_last,
        "nb2": nb2,
        "w": np.minimum(bs2, p.S2),
        "w_last": p.S2 - (nb2 - 1) * bs2,
        "bpc": ceil_div(nb2, ks).astype(np.int64),
        "copies": p.B * p.heads // gp,
    }


def _kinds(p: FlashAttention, bs1: int, bs2: int, ks: int, blocks=None) -> tuple[np.ndarray, np.ndarray]:
    """Per task kind (s1 block i, kv chunk k), i-major: its work columns (NTYPES: steps of each step type, then the
    task itself by row type) and its weight (valid s2 blocks, what the balanced split sorts by). blocks: the s1
    blocks to list (increasing, the last one last), all by default.

    Causal: a block is visited when its first key is visible to the block's last row, and needs the mask pass
    (at full cost) unless every key is visible to the block's first row."""
    g = geometry(p, bs1, bs2, ks)
    n1, nb2, bpc = int(g["n1"]), int(g["nb2"]), int(g["bpc"])
    edge_rows = int(g["rows_last"]) < int(g["rows"])
    ragged = int(g["w_last"]) < bs2
    blocks = np.arange(n1, dtype=np.int64) if blocks is None else np.asarray(blocks, dtype=np.int64)
    i = np.repeat(blocks, ks)
    k = np.tile(np.arange(ks, dtype=np.int64), blocks.size)
    start = i * bs1
    end = np.minimum(start + bs1, p.S1)
    nvalid = ceil_div(p.visible_keys(end), bs2).astype(np.int64)
    if p.causal:
        first = np.minimum(start + p.shift + 1, p.S2)  # keys visible to the block's first row
        nfull = np.where(first >= p.S2, nb2, first // bs2)
    else:
        nfull = np.full(i.shape, nb2)
    a = k * bpc
    hi = np.minimum(np.minimum(a + bpc, nb2), nvalid)
    steps = np.maximum(hi - a, 0)
    unmasked = np.maximum(np.minimum(hi, nfull) - a, 0)
    masked = steps - unmasked
    tail = ragged & (a <= nb2 - 1) & (nb2 - 1 < hi)
    tail_m = tail & (nb2 - 1 >= nfull)
    tail_u = tail & ~tail_m
    out = np.zeros((i.size, NTYPES))
    # step type = rows * 4 + keys * 2 + mask; the last s1 block's tasks (its ks rows, at the end) have the
    # last-rows types when its rows are fewer
    out[:, 0] = unmasked - tail_u
    out[:, 1] = masked - tail_m
    out[:, 2] = tail_u
    out[:, 3] = tail_m
    out[:, STEP_TYPES] = steps > 0
    if edge_rows and blocks[-1] == n1 - 1:
        last = slice(i.size - ks, i.size)
        out[last, 4:8], out[last, :4] = out[last, :4], 0.0
        out[last, STEP_TYPES + 1], out[last, STEP_TYPES] = out[last, STEP_TYPES], 0.0
    return out, steps


def _residue_counts(stride: int, n: int, cores: int) -> np.ndarray:
    """How many of j * stride, j in [0, n), are each residue mod `cores` (cores,): the residues repeat every
    cores / gcd(stride, cores) terms, so one period is counted, times the whole periods, plus the rest."""
    period = cores // gcd(stride % cores, cores) if stride % cores else 1
    first = (stride * np.arange(min(period, n), dtype=np.int64)) % cores
    whole, rest = divmod(n, period)
    return whole * np.bincount(first, minlength=cores) + np.bincount(first[:rest], minlength=cores)


def _deal_plain(kinds: np.ndarray, copies: int, cores: int) -> np.ndarray:
    """Per-core work columns when task t = j * U + u (copy j of kind u) goes to core t mod cores, in closed form:
    the kinds' work summed by u mod cores (R, cores x NTYPES), and how often copy j's offset j * U is each
    residue s (H); kind residue r lands on core c (r + s = c mod cores) H[c - r] times. Time and memory grow with
    the kinds and the cores, never with their product (whole counts: exact)."""
    U = kinds.shape[0]
    by_residue = np.stack([kinds[r::cores].sum(axis=0) for r in range(cores)])  # (cores, NTYPES)
    hist = _residue_counts(U, copies, cores).astype(np.float64)
    times = hist[(np.arange(cores)[None, :] - np.arange(cores)[:, None]) % cores]  # times[r, c]
    return times.T @ by_residue


def _deal_snake(kinds: np.ndarray, weight: np.ndarray, copies: int, cores: int) -> np.ndarray:
    """Per-core work columns when tasks sorted heaviest first (valid s2 blocks) are dealt in snake order (0..K-1,
    K-1..0, ...): the vectorised stand-in for the greedy least-loaded assignment. Position q goes to core q mod K
    on even rounds and K-1 - q mod K on odd ones, so positions below x give core c
    2 (x // 2K) + [x mod 2K > c] + [x mod 2K > 2K-1-c] tasks. The kind at rank v holds positions v copies ..
    (v + 1) copies: its count on core c is 2 (whole double rounds it spans, the same on every core) plus the
    indicator terms of its two ends, which depend on the ends' residues mod 2K only; so the kinds' work is summed
    by those residues (weighted bincounts) and never multiplied by a (kinds x cores) table."""
    U = kinds.shape[0]
    two_k = 2 * cores
    top = int(weight.max()) if U else 0
    # a stable sort of small whole keys is numpy's radix sort: the same order as argsort(-weight, stable)
    key = (top - weight).astype(np.uint16) if 0 <= int(weight.min(initial=0)) and top < 1 << 16 else -weight
    order = np.argsort(key, kind="stable")
    rank = np.empty(U, dtype=np.int64)
    rank[order] = np.arange(U, dtype=np.int64)
    lo, hi = rank * copies, (rank + 1) * copies  # each kind's positions
    whole = (hi // two_k - lo // two_k).astype(np.float64)
    r_lo, r_hi = lo % two_k, hi % two_k
    c = np.arange(cores, dtype=np.int64)[None, :]
    rho = np.arange(two_k, dtype=np.int64)[:, None]
    ind = ((rho > c).astype(np.float64) + (rho > two_k - 1 - c)).T  # (cores, 2K): [rho > c] + [rho > 2K-1-c]
    out = np.zeros((cores, NTYPES))
    for t in np.flatnonzero(kinds.any(axis=0)).tolist():  # a column of zeros deals zeros
        col = kinds[:, t]
        net = np.bincount(r_hi, weights=col, minlength=two_k) - np.bincount(
            r_lo, weights=col, minlength=two_k
        )
        out[:, t] = 2 * float(whole @ col) + ind @ net
    return out


def _block_sums(p: FlashAttention, bs1: int, bs2: int, ks: int) -> np.ndarray:
    """Per s1 block i, its ks tasks' work columns summed over the kv chunks, (n1, NTYPES): what _kinds lists
    task by task, summed in closed form per block. The chunks [k bpc, min((k + 1) bpc, nb2)) tile the s2 blocks,
    so a block's steps over its chunks are its valid s2 blocks (nvalid), the unmasked ones min(nvalid, nfull),
    the ragged last s2 block is in exactly one chunk (stepped when nvalid reaches nb2), and the chunks with a
    step are those starting below nvalid: min(ceil(nvalid / bpc), ks). Whole counts, so sums are exact."""
    g = geometry(p, bs1, bs2, ks)
    n1, nb2, bpc = int(g["n1"]), int(g["nb2"]), int(g["bpc"])
    edge_rows = int(g["rows_last"]) < int(g["rows"])
    ragged = int(g["w_last"]) < bs2
    start = np.arange(n1, dtype=np.int64) * bs1
    end = np.minimum(start + bs1, p.S1)
    nvalid = np.clip(ceil_div(p.visible_keys(end), bs2).astype(np.int64), 0, nb2)
    if p.causal:
        first = np.minimum(start + p.shift + 1, p.S2)
        nfull = np.where(first >= p.S2, nb2, first // bs2)
    else:
        nfull = np.full(n1, nb2)
    unmasked = np.clip(np.minimum(nvalid, nfull), 0, nb2)
    masked = nvalid - unmasked
    tail = ragged & (nvalid >= nb2)
    tail_m = tail & (nb2 - 1 >= nfull)
    tail_u = tail & ~tail_m
    out = np.zeros((n1, NTYPES))
    out[:, 0] = unmasked - tail_u
    out[:, 1] = masked - tail_m
    out[:, 2] = tail_u
    out[:, 3] = tail_m
    out[:, STEP_TYPES] = np.minimum(-(-nvalid // bpc), ks)
    if edge_rows:
        out[-1, 4:8], out[-1, :4] = out[-1, :4], 0.0
        out[-1, STEP_TYPES + 1], out[-1, STEP_TYPES] = out[-1, STEP_TYPES], 0.0
    return out


@lru_cache(maxsize=1024)
def work_total(p: FlashAttention, bs1: int, bs2: int, ks: int) -> np.ndarray:
    """The work columns of every task of one (block_s1, block_s2, kv_split), summed: what the cores share.

    Each s1 block's tasks are summed over its kv chunks in closed form (_block_sums), so the table is one row per
    s1 block, not per task; without the mask every s1 block but the last has the same tasks (the same keys), so
    the sum is n1 - 1 times the first block's plus the last's. The same whole counts as summing every task."""
    g = geometry(p, bs1, bs2, ks)
    n1 = int(g["n1"])
    if p.causal or n1 <= 2:
        total = _block_sums(p, bs1, bs2, ks).sum(axis=0)
    else:
        kinds, _ = _kinds(p, bs1, bs2, ks, blocks=[0, n1 - 1])
        total = kinds[:ks].sum(axis=0) * (n1 - 1) + kinds[ks:].sum(axis=0)
    out = total * int(g["copies"])
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)
def schedule(p: FlashAttention, cores: int, bs1: int, bs2: int, ks: int) -> dict:
    """Per-core work columns of both core splits, for one (block_s1, block_s2, kv_split)."""
    kinds, weight = _kinds(p, bs1, bs2, ks)
    copies = int(geometry(p, bs1, bs2, ks)["copies"])
    out = {
        "plain": _deal_plain(kinds, copies, cores),
        "balanced": _deal_snake(kinds, weight, copies, cores),
    }
    for v in out.values():
        v.setflags(write=False)
    return out


on_clear(schedule.cache_clear)  # schedule.clear_caches() (the model module's) starts them over too
on_clear(work_total.cache_clear)
