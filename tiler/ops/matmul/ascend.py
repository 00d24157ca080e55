"""Matmul on Ascend (AscendC Matmul / CATLASS style): per-core pipelines, multi-core schedule, L2, split-K.

A core's unit of work is a *tile* of `tm x tn` outputs (tm = base_m*step_m, tn = base_n*step_n) over one K slice
(K / split_k). Inside a tile the core walks L0 blocks of base_m x base_n, streaming K in L1 chunks of
base_k*step_ka (A) and base_k*step_kb (B) through MTE2 (GM->L1), MTE1 (L1->L0A/L0B), the cube (MMAD) and the
fixpipe (L0C->GM). Tiles go to cores in the traversal order (tile i -> core i mod cores); the kernel takes the
makespan over cores. docs/model.md gives every equation and its reason.
"""

from __future__ import annotations

import numpy as np

from ...errors import ProblemError
from ...model.common import (
    ceil_div,
    classify_bound,
    group_rows,
    group_rows_any,
    mixed_bandwidth,
    pipes,
    roofline_us,
    round_up,
    segment_efficiency,
    stride_efficiency,
    unique_inverse,
)
from ...model.schedule import (
    WORK_COLUMNS,
    CodeTable,
    GrowingRows,
    PairTable,
    block_grid,
    block_work,
    core_work_many,
    first_touch_only,
    front_rows,
    max_b_reuse,
    on_clear,
    pack_codes,
    panel_hits_many,
    round_hit_front,
    rounds_overflow,
    same_walk,
    serial_b_reuse,
    serial_hit_ceiling,
    unpack_codes,
)
from ...operator import Operator, register
from . import views
from .problem import Matmul

KNOBS = (
    "base_m",
    "base_n",
    "base_k",
    "step_m",
    "step_n",
    "step_ka",
    "step_kb",
    "l1_stages",
    "preload",
    "l0_pingpong",
    "multi_load",
    "weight_resident",
    "iterate_order",
    "swizzle_offset",
    "swizzle_direction",
    "serpentine",
    "tail_split",
    "split_k",
    "core_split",
)
# Knobs that only change which core runs which tile (and so L2 hits, balance): bound() holds for all of them.
SCHEDULE_KNOBS = ("swizzle_offset", "swizzle_direction", "serpentine", "tail_split", "core_split")
# Knobs whose best value follows from the others in closed form (see resolve()); not enumerated unless pinned.
RESOLVED = ("l0_pingpong", "l1_stages", "preload")
REUSE_EXACT = 2048  # tile grids up to this size get the exact weight-reuse maximum in bound()
# rows of (tiling, L2 hit pair) bounded per call when bound() takes its smallest over several hit pairs (its work
# arrays: a few KB a row)
BOUND_ROWS = 1 << 14
# full rounds a walk needs before bound() takes its L2 misses from overflowing rounds (round_hit_front, a tile
# cost per corner pair): fewer, and the ceiling hit rates (it costs more to bound than it saves in scoring)
ROUND_TILES = 256
# Enumeration levels: each level's rules prune before the next level multiplies the table.
LEVELS = (
    ("base_m", "base_n", "base_k", "split_k"),
    ("step_m", "step_n", "step_ka", "step_kb", "weight_resident"),
    ("multi_load", "iterate_order"),
)
# Capacity and alignment rules and the knobs each needs (AscendC TCubeTiling rules, research §3).
RULES = {
    "align": ("base_m", "base_n", "base_k"),
    "fix_split": ("base_m", "base_n", "base_k"),
    "split_k": ("base_k", "split_k"),
    "l0a": ("base_m", "base_k", "l0_pingpong"),
    "l0b": ("base_n", "base_k", "l0_pingpong"),
    "l0c": ("base_m", "base_n"),
    "mdl_step": ("base_k", "step_m", "step_n", "step_ka", "step_kb", "split_k"),
    "k_step_ratio": ("base_k", "step_ka", "step_kb", "split_k", "weight_resident"),
    "l1": (
        "base_m",
        "base_n",
        "base_k",
        "step_m",
        "step_n",
        "step_ka",
        "step_kb",
        "l1_stages",
        "weight_resident",
        "split_k",
    ),
    "preload": ("l1_stages", "preload"),
}
RULE_TEXT = {
    "align": "base_m/base_n multiples of 16, base_k a multiple of 16 and of C0 (32 B / element)",
    "fix_split": "base_m <= align16(M), base_n <= align16(N), base_k <= alignC0(K) (SetFixSplit)",
    "split_k": "split_k <= number of base_k steps in K",
    "l0a": "base_m*base_k*bytes*(1+l0_pingpong) <= L0A",
    "l0b": "base_n*base_k*bytes*(1+l0_pingpong) <= L0B",
    "l0c": "base_m*base_n*4 <= L0C (fp32/int32 accumulator)",
    "mdl_step": "step_m > 1 needs A fully loaded along K (step_ka*base_k >= K slice); same for step_n and B",
    "k_step_ratio": "A's and B's L1 load counts along K (kaStepIter, kbStepIter) must divide one another",
    "l1": "A and B L1 buffers (all stages; a resident B panel holds its whole K slice) <= L1",
    "preload": "preload < l1_stages",
}


def _k0(p: Matmul) -> int:
    """C0: elements of one 32-byte fractal row (16 for fp16/bf16, 8 for fp32, 32 for int8)."""
    return 32 // p.in_bytes


def _geometry(p: Matmul, c: dict) -> dict:
    """Tile grid, K slice and edge sizes, per candidate."""
    tm = c["base_m"] * c["step_m"]
    tn = c["base_n"] * c["step_n"]
    gm, gn = ceil_div(p.M, tm), ceil_div(p.N, tn)
    ksteps = ceil_div(p.K, c["base_k"])
    per = ceil_div(ksteps, c["split_k"])  # see _k_slice
    splits = c[
        "split_k"
    ]  # every slice is launched on its own core, even when ceil() leaves the last ones short
    kc = np.minimum(per * c["base_k"], p.K)
    return {
        "tm": tm,
        "tn": tn,
        "gm": gm,
        "gn": gn,
        "kc": kc,
        "splits": splits,
        "m_last": p.M - (gm - 1) * tm,
        "n_last": p.N - (gn - 1) * tn,
        "tiles": gm * gn * splits * p.batch,
    }


def _k_slice(p: Matmul, c: dict):
    """K extent of one split-K slice, a whole number of base_k steps (the last slice may be shorter)."""
    return np.minimum(ceil_div(ceil_div(p.K, c["base_k"]), c["split_k"]) * c["base_k"], p.K)


def _l1_bytes(p: Matmul, c: dict, kc) -> np.ndarray:
    """L1 in use: A chunks for all stages; B chunks for all stages, or one whole-K B panel when resident.

    TCubeTiling's sizes (research §3): an operand whose M or N side is the stored rows' contiguous axis (A `n`:
    no, A `t`: M; B `n`: N, B `t`: no) has that side padded to whole C0 fractals in L1: AL1 = baseM·baseK (A `n`)
    or ceil(baseM/C0)·C0·baseK (A `t`), BL1 = ceil(baseN/C0)·C0·baseK (B `n`) or baseN·baseK (B `t`), per block.
    """
    b, k0 = p.in_bytes, _k0(p)
    am = round_up(c["base_m"], k0) if p.a_transposed else c["base_m"]
    bn = c["base_n"] if p.b_transposed else round_up(c["base_n"], k0)
    a = c["l1_stages"] * am * c["step_m"] * c["base_k"] * c["step_ka"] * b
    b_staged = c["l1_stages"] * bn * c["step_n"] * c["base_k"] * c["step_kb"] * b
    b_res = bn * c["step_n"] * round_up(kc, c["base_k"]) * b
    return a + np.where(c["weight_resident"] == 1, b_res, b_staged)


def _row_strides(p: Matmul) -> tuple[int, int]:
    """Row stride in GM, in bytes, of A and of B as stored: A `n` (M x K) K, A `t` (K x M) M; B `n` (K x N) N,
    B `t` (N x K) K."""
    b = p.in_bytes
    return (p.M if p.a_transposed else p.K) * b, (p.K if p.b_transposed else p.N) * b


def _segment_ceiling(contiguous_bytes, granule: int = 32) -> np.ndarray:
    """The largest segment_efficiency of any row of at most `contiguous_bytes` (a floor for rows whose length
    varies with the tile: edge tiles and re-cut sub-tiles are shorter). Equal to segment_efficiency at a whole
    number of granules."""
    x = np.maximum(np.asarray(contiguous_bytes, dtype=np.float64), 1.0)
    j = np.ceil(x / granule)
    return np.maximum(segment_efficiency(x, granule), (j - 1) / j)


def _stride_scalar(stride_bytes: int, burst: int, misaligned: float) -> float:
    """common.stride_efficiency of one row stride, in plain Python (the same value; a problem's strides are
    scalars, and tile_cost runs once per scored batch)."""
    if stride_bytes % burst == 0:
        return 1.0
    return misaligned if stride_bytes % 32 == 0 else misaligned * 0.5


def _transfer_efficiency(p: Matmul, chip, c: dict, mt, nt, ka, kb) -> tuple:
    """Share of the GM->L1 bandwidth the transfers of A and of B reach (docs/model.md, "Layouts").

    ND operands: the row stride's alignment (stride_efficiency) times the row-segment overhead
    (segment_efficiency) of the contiguous bytes per row of one transfer, along the axis the stored rows run:
    A `n` K (MDL: the L1 chunk's ka, Norm: base_k), A `t` M (MDL: the tile's rows, Norm: base_m); B `n` N (the
    tile's columns / base_n), B `t` K (kb / base_k). Along M or N an edge tile's rows are shorter (its real mt or
    nt), in either mode: Norm's edge block moves only those elements too, so Norm and MDL stay the same transfer
    when a chunk is one base block (dominated()'s twin). That is the cost of the ND->NZ conversion MTE2 does on the
    way in. B in NZ (b_format nz) is already fractal: each 16 x C0 fractal is 512 contiguous, burst-aligned
    bytes, moved as they are: full rate.
    """
    b = p.in_bytes
    burst, mis = chip["gm_burst_bytes"], chip["gm_misaligned_efficiency"]
    ml = c["multi_load"] == 1
    stride_a, stride_b = _row_strides(p)
    if p.a_transposed:  # an edge tile's rows hold only its mt real elements, in either load mode
        seg_a = np.minimum(mt, np.where(ml, c["base_m"] * c["step_m"], c["base_m"]))
    else:
        seg_a = np.where(ml, ka, c["base_k"])
    if p.b_transposed:
        seg_b = np.where(ml, kb, c["base_k"])
    else:
        seg_b = np.minimum(nt, np.where(ml, c["base_n"] * c["step_n"], c["base_n"]))
    eff_a = _stride_scalar(stride_a, burst, mis) * segment_efficiency(seg_a * b)
    eff_b = _stride_scalar(stride_b, burst, mis) * segment_efficiency(seg_b * b)
    return eff_a, (np.ones_like(eff_b) if p.b_nz else eff_b)


def _stride_floor(p: Matmul, chip) -> np.ndarray:
    """The row-stride efficiencies of A and B (_transfer_efficiency's, the same for every tile), as [A, B]."""
    stride = stride_efficiency(
        np.array(_row_strides(p)), chip["gm_burst_bytes"], chip["gm_misaligned_efficiency"]
    )
    return np.array([stride[0], 1.0]) if p.b_nz else stride


def _segment_floor(p: Matmul, c: dict, tm, tn, ka, kb) -> tuple:
    """Row-segment efficiencies of A and B at least as high as every tile's in tile_cost (a floor's view): along
    K the same for every tile (ka, kb or base_k); along M or N, MDL rows are at most the tile's `tm` (`tn`) and
    shorter at the edges, so their best efficiency (_segment_ceiling) is taken; Norm's likewise, of at most base_m
    (base_n)."""
    b = p.in_bytes
    ml = c["multi_load"] == 1
    if p.a_transposed:
        seg_a = _segment_ceiling(np.minimum(tm, np.where(ml, c["base_m"] * c["step_m"], c["base_m"])) * b)
    else:
        seg_a = segment_efficiency(np.where(ml, ka, c["base_k"]) * b)
    if p.b_nz:
        seg_b = np.ones(np.shape(seg_a))
    elif p.b_transposed:
        seg_b = segment_efficiency(np.where(ml, kb, c["base_k"]) * b)
    else:
        seg_b = _segment_ceiling(np.minimum(tn, np.where(ml, c["base_n"] * c["step_n"], c["base_n"])) * b)
    return seg_a, seg_b


def _b_elems(p: Matmul, nt, k):
    """Elements a transfer of B's `nt` columns over `k` rows of K moves: ND moves just those; NZ moves whole
    fractals, 16 rows by C0 columns of the stored matrix (B `n`: K rounded up to 16 and N to C0; B `t`: N to 16,
    K to C0; the format stores that padding)."""
    if not p.b_nz:
        return nt * k
    k0 = _k0(p)
    if p.b_transposed:
        return round_up(nt, 16) * round_up(k, k0)
    return round_up(nt, k0) * round_up(k, 16)


def _chip_rates(p: Matmul, chip) -> dict:
    f = chip.clock_hz
    return {
        "f": f,
        "hbm": chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"],
        "l2": chip["l2_gbps"] * 1e9 * chip["l2_efficiency"],
        "core_gm": chip["gm_to_l1_bytes_per_cycle"] * f,
        "lat": chip["gm_latency_cycles"] / f,
        "mac_cycle": 16 * 16 * _k0(p) / (chip.macs_per_cycle(p.dtype) * chip["mac_efficiency"]),
    }


def _head_us(chip, cores_used) -> np.ndarray:
    """Launch/head overhead: core start, instruction fetch, argument reads; grows with cores launched (S6)."""
    return chip["head_base_us"] + chip["head_per_core_us"] * np.asarray(cores_used, dtype=np.float64)


def has_fixpipe(chip) -> bool:
    """Whether the chip has a fixpipe (L0C -> GM with on-the-fly conversion and dequant): A2/A3 (separated cores)
    and 310B do; 910A (arch 1001) and 310P (arch 2002) do not, their L0C leaves through UB (S2). A profile may say
    so with `has_fixpipe`; else the arch is told apart by its cube types: the two coupled archs without a fixpipe
    are also the two without bf16 on the cube (S1)."""
    if chip.get("has_fixpipe") is not None:
        return bool(chip["has_fixpipe"])
    return not chip["coupled"] or chip.macs_per_cycle("bf16") > 0


def dequant_site(p: Matmul, chip) -> str:
    """Where a quantised matmul's dequant runs (docs/model.md, "Quantised matmul"): `none` (not quantised),
    `fixpipe` or `vector`. `auto` takes the fixpipe when the chip has one and it can apply the scales (one per
    column or per tensor, fp16 out: VDEQF16/DEQF16), else the vector cores."""
    if not p.quant:
        return "none"
    if p.dequant != "auto":
        return p.dequant
    ok = has_fixpipe(chip) and not p.token_scale and p.output_dtype == "fp16"
    return "fixpipe" if ok else "vector"


def _fix_elem_bytes(p: Matmul, chip) -> int:
    """Bytes per output element the fixpipe writes (split-K aside): int32 to the vector epilogue's workspace, or
    the output's own dtype."""
    return 4 if dequant_site(p, chip) == "vector" else p.out_bytes


def tile_cost(p: Matmul, chip, c: dict, mt, nt, kc, hit_a, hit_b, b_resident, active) -> dict:
    """Busy time (seconds) of one tile of `mt x nt` outputs over a K slice `kc`, and its per-pipe times.

    hit_a/hit_b: L2 hit rates of the first load of the tile's A/B panels; b_resident: the B panel is already in
    L1 (weight residency, previous tile had the same panel); active: cores loading at the same time (they share
    HBM and L2 bandwidth). All arguments broadcast over candidates.
    """
    r = _chip_rates(p, chip)
    f, b, ob = r["f"], p.in_bytes, _fix_elem_bytes(p, chip)
    bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
    k0 = _k0(p)
    site = dequant_site(p, chip)
    if p.b_int4:  # A8W4: the cube reads B as int8 from the vector cores' small workspace, which sits in L2
        hit_b = 1.0
    nbm, nbn = ceil_div(mt, bm), ceil_div(nt, bn)
    nk = ceil_div(kc, bk)
    ka = np.minimum(bk * c["step_ka"], kc)
    kb = np.minimum(bk * c["step_kb"], kc)
    wr = c["weight_resident"] == 1
    res_a = ka >= kc  # A's whole K slice sits in L1: loaded once per tile
    res_b = (kb >= kc) | wr
    # --- MTE2: GM -> L1. First pass of each panel comes from L2 (hit) or HBM; re-streams are L2 hits.
    pass_a, pass_b = np.where(res_a, 1, nbn), np.where(res_b, 1, nbm)  # passes over the K slice
    a_first = mt * kc * b
    a_bytes = a_first * pass_a
    b_first = np.where(b_resident, 0.0, _b_elems(p, nt, kc) * b)
    b_bytes = b_first * pass_b
    hbm_share, l2_share = r["hbm"] / active, r["l2"] / active
    # stride and row-segment efficiency along the axis each operand's stored rows run (the layout)
    eff_a, eff_b = _transfer_efficiency(p, chip, c, mt, nt, ka, kb)
    ml = c["multi_load"] == 1
    hit_a_all = np.where(a_bytes > 0, (a_first * hit_a + (a_bytes - a_first)) / np.maximum(a_bytes, 1), 1.0)
    hit_b_all = np.where(b_bytes > 0, (b_first * hit_b + (b_bytes - b_first)) / np.maximum(b_bytes, 1), 1.0)
    bw_a = np.minimum(r["core_gm"], mixed_bandwidth(hit_a_all, l2_share, hbm_share)) * eff_a
    bw_b = np.minimum(r["core_gm"], mixed_bandwidth(hit_b_all, l2_share, hbm_share)) * eff_b
    t_a, t_b = a_bytes / bw_a, b_bytes / bw_b
    # the tile's per-channel scales (8 B each) GM -> L1 -> fixpipe buffer
    if site == "fixpipe" and p.channel_scale:
        t_b = t_b + np.where(c["split_k"] > 1, 0.0, nt * 8.0) / r["core_gm"]
    # transfers: MDL (multi_load) moves a whole L1 chunk at once; Norm one base block per transfer
    chunks_a = ceil_div(kc, ka) * pass_a
    chunks_b = np.where(b_resident, 0, ceil_div(kc, kb) * pass_b)
    per_chunk_a = np.where(ml, 1, nbm * ceil_div(ka, bk))
    per_chunk_b = np.where(ml, 1, nbn * ceil_div(kb, bk))
    xfers = chunks_a * per_chunk_a + chunks_b * per_chunk_b
    stages = c["l1_stages"]
    # Each transfer waits one GM latency before data flows; with `stages` buffers that many transfers overlap
    # their latencies (the MTE2 queue issues ahead), so latency is exposed only when transfers are small.
    t_ab = t_a + t_b
    t_mte2 = np.maximum(t_ab, (xfers * r["lat"] + t_a + t_b) / stages)
    # --- MTE1: L1 -> L0A/L0B, padded to fractals; one L0 operand stays put across the inner loop if K fits one step
    m16, n16 = ceil_div(mt, 16), ceil_div(nt, 16)  # fractal rows and columns
    mt16, nt16, kcp = m16 * 16, n16 * 16, round_up(kc, k0)
    one_k = nk == 1
    a_l0 = mt16 * kcp * b * np.where(one_k & (c["iterate_order"] == 1), 1, nbn)
    b_l0 = nt16 * kcp * b * np.where(one_k & (c["iterate_order"] == 0), 1, nbm)
    t_mte1 = (a_l0 / chip["l1_to_l0a_bytes_per_cycle"] + b_l0 / chip["l1_to_l0b_bytes_per_cycle"]) / f
    # --- MAC: one fractal (16 x 16 x C0) per mac_cycle; edge blocks padded to 16; tiny blocks need a PIPE_M barrier
    mmads = nbm * nbn * nk
    small = (bm // 16) * (bn // 16) < 10
    mn16 = m16 * n16
    mac_cycles = mn16 * (kcp // k0) * r["mac_cycle"] + np.where(small, mmads * chip["sync_cycles"], 0)
    t_mac = mac_cycles / f
    # --- FIXPIPE: L0C -> GM; split-K writes fp32 partials with atomic adds (read-modify-write: twice the bytes)
    split = c["split_k"] > 1
    out_bytes = mt * nt * np.where(split, 8, ob)
    t_fix = out_bytes / np.minimum(
        chip["fixpipe_bytes_per_cycle"] * f, _write_share(p, chip, r, active, split)
    )
    if site == "fixpipe":  # dequant on the way out: the fixpipe still drains the int32 accumulator from L0C
        t_fix = np.maximum(t_fix, np.where(split, 0.0, mt * nt * 4.0) / (chip["fixpipe_bytes_per_cycle"] * f))
    l0c_db = (
        bm * bn * 4 * 2 <= chip["l0c_bytes"]
    )  # a second L0C buffer lets the write-out overlap the next block
    # --- SCALAR: every instruction is issued by the scalar unit; every loop iteration pays its head and flags
    blocks = nbm * nbn
    instr = mmads * 3 + xfers + blocks
    loops = mmads + chunks_a + chunks_b
    t_scalar = (instr * chip["scalar_cycles_per_instr"] + loops * chip["scalar_cycles_per_loop"]) / f
    # --- composition
    pp = c["l0_pingpong"] == 1
    steps = np.maximum(mmads, 1)
    inner = np.where(pp, np.maximum(t_mte1, t_mac) + np.minimum(t_mte1, t_mac) / steps, t_mte1 + t_mac)
    # The write-out of a block overlaps the next block's MMADs (the next tile's first block included) where L0C
    # lets it: a second L0C buffer (the whole next block's MMADs), or else the unit flag (CATLASS's blocks and the
    # kernels tiler emits set ENABLE_UNIT_FLAG with one L0C stage; the fixpipe chips offer it for all but int8
    # inputs): the fixpipe drains 512 B units as the last K step completes them and the next block's first K
    # step writes only drained units, so one K step's MMADs hide it (asc-devkit's UnitFlag case: 37.39 -> 34.66
    # us). What the window cannot hide stays on the cube's path; the core's last write-out has no successor and is
    # charged once per core as part of the drain. Without either (int8 with one L0C stage), every write-out waits.
    nblk = np.maximum(blocks, 1)
    fix_block = t_fix / nblk
    unit_flag = ~l0c_db & (p.dtype != "int8") & has_fixpipe(chip)
    window = np.where(l0c_db, t_mac / nblk, np.where(unit_flag, t_mac / np.maximum(mmads, 1), 0.0))
    overlap = l0c_db | unit_flag
    t_comp = inner + np.where(overlap, nblk * np.maximum(fix_block - window, 0.0), t_fix)
    # MTE2's reads and the fixpipe's write-backs run on the bus's separate read and write channels (S10 gives a read
    # and a write rate per core), so they overlap; but the HBM serves both: the reads' misses and the writes that
    # reach it (an output larger than the usable L2, _write_share) share the core's HBM share.
    hbm_out = np.where(_out_fits(p, chip, split), 0.0, out_bytes)
    # the workspace stays in L2; the vector cores' output write shares the HBM when it spills
    if site == "vector":
        hbm_out = np.where(split | _final_fits(p, chip), hbm_out, mt * nt * float(p.out_bytes))
    t_hbm = (a_first * (1 - hit_a) + b_first * (1 - hit_b) + hbm_out) / hbm_share
    t_gm = np.maximum(np.maximum(t_mte2, t_fix), t_hbm)
    # The cube starts once A's first L1 chunk and B's first chunk (unless B is resident) have landed: their bytes
    # over the bandwidth plus their transfers' latency. The pipeline's grain is the finer of the two K extents:
    # the compute of that many K steps is what a later load can hide behind. Both grow with K.
    k_first = np.minimum(np.minimum(ka, kb), kc)
    l_chunk = (
        mt * ka * b / bw_a
        + np.where(b_resident, 0.0, _b_elems(p, nt, kb) * b / bw_b)
        + (per_chunk_a + np.where(b_resident, 0, per_chunk_b)) * r["lat"] / stages
    )
    step_mac = mn16 * (bk / k0) * r["mac_cycle"] / f
    step_mte1 = (
        mt16 * bk * b / chip["l1_to_l0a_bytes_per_cycle"] + nt16 * bk * b / chip["l1_to_l0b_bytes_per_cycle"]
    ) / f
    step = np.where(pp, np.maximum(step_mac, step_mte1), step_mac + step_mte1)
    c_chunk = ceil_div(k_first, bk) * step
    # preload (cross-tile double buffering): the next tile's first chunk is loaded into the L1 buffer this tile's
    # second-to-last chunk has freed (preload < l1_stages), while the cube computes this tile's last chunk and the
    # fixpipe writes it out. Without it that load waits for the next tile's loop, so every tile pays the
    # pipeline's fill/drain bubble min(l, c) on top of its slowest stage; with it the bubble is gone and the tile
    # costs its slowest stage (MTE2, compute, scalar or the shared GM port) alone: in steady state tile i+1's load
    # runs while tile i computes. Hiding exactly the bubble keeps busy >= every pipe (so the bounds, which floor
    # busy by the pipes, hold) and keeps busy monotone in K.
    slowest = np.maximum(np.maximum(np.maximum(t_mte2, t_comp), t_scalar), t_gm)
    hidden = np.where(c["preload"] >= 1, np.minimum(l_chunk, c_chunk), 0.0)
    # two-stage pipeline over the chunks: the slower stage throughout, plus one chunk of the faster one
    piped = slowest + np.minimum(l_chunk, c_chunk) - hidden
    serial = np.maximum(t_mte2 + t_comp, np.maximum(t_scalar, t_gm))
    two = stages >= 2
    busy = np.where(two, piped, serial)
    # fill: the first tile of a core waits for its first chunk (serial tiles already pay their loads). drain: the
    # bubble preload hid; a core's last tile has no successor to overlap it with, so _record charges it once per
    # core (a core running one tile gains nothing from preload)
    return {
        "busy": busy,
        "fill": np.where(two, l_chunk, 0.0),
        "drain": hidden + np.where(overlap, np.minimum(fix_block, window), 0.0),
        "mac": t_mac,
        "scalar": t_scalar,
        "mte1": t_mte1,
        "mte2": t_mte2,
        "fixpipe": t_fix,
        "mte2_bw": t_ab,
        "l2_read": a_bytes + b_bytes,
        "hbm_read": a_first * (1 - hit_a) + b_first * (1 - hit_b),
    }


def _same(index: np.ndarray, columns) -> list[np.ndarray]:
    """Positions in `index` (rows of the candidate table) grouped by equal values of `columns` at those rows."""
    _, inv = group_rows([np.asarray(col)[index] for col in columns])
    order = np.argsort(inv, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(inv[order])) + 1)


def _tail(g: dict, cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Tiles in a partial last round (0 when every round is full), and the pieces tail_split=auto cuts each of
    them into: as many as the idle cores allow, along the longer side, at least 16 rows or columns each."""
    tiles = g["tiles"]
    # tiles % cores and cores // last, by true division and floor: the same values (whole numbers far below 2**52 /
    # cores, so the rounded quotient never reaches the next integer) without numpy's slower float divmod
    rem = tiles - np.floor(tiles / cores) * cores
    last = np.where(tiles > cores, rem, np.where(tiles < cores, tiles, 0))
    return last, np.minimum(np.floor(cores / np.maximum(last, 1)), ceil_div(np.maximum(g["tm"], g["tn"]), 16))


def _sizes(g: dict):
    """(mt, nt) of the four tile types: 0 interior, 1 last column, 2 last row, 3 corner."""
    ms = (g["tm"], g["tm"], g["m_last"], g["m_last"])
    ns = (g["tn"], g["n_last"], g["tn"], g["n_last"])
    return ms, ns


def _type_counts(g: dict, batch: int) -> list:
    """Tiles of each of the four types over the whole problem (independent of the order)."""
    em = (g["m_last"] < g["tm"]).astype(np.int64)
    en = (g["n_last"] < g["tn"]).astype(np.int64)
    s = g["splits"] * batch
    return [
        (g["gm"] - em) * (g["gn"] - en) * s,
        (g["gm"] - em) * en * s,
        em * (g["gn"] - en) * s,
        em * en * s,
    ]


def _write_share(p: Matmul, chip, r: dict, active, split):
    """The bandwidth one core's write-backs get: L2 is a write-back cache, so while the whole output (fp32 partials
    under split-K) fits its usable part the writes land there at the core's L2 share and reach HBM later, behind
    the reads; a larger output evicts to HBM as it is written, at the core's HBM share."""
    return np.where(_out_fits(p, chip, split), r["l2"], r["hbm"]) / active


def _out_fits(p: Matmul, chip, split):
    """Whether the whole output (fp32 partials under split-K) fits the usable L2, per candidate."""
    out = float(p.batch * p.M * p.N) * np.where(split, 4, p.out_bytes)
    if dequant_site(p, chip) == "vector":  # the int32 goes to a few per-core workspace slots, not the output
        return np.where(split, out <= chip["l2_bytes"] * chip["l2_usable_fraction"], True)
    return out <= chip["l2_bytes"] * chip["l2_usable_fraction"]


def _final_fits(p: Matmul, chip) -> bool:
    """Whether the final output (its own dtype) fits the usable L2."""
    return float(p.batch * p.M * p.N * p.out_bytes) <= chip["l2_bytes"] * chip["l2_usable_fraction"]


def _compulsory_hbm(p: Matmul, chip) -> float:
    """The roofline's HBM bytes: each input read once, and the output written once unless it stays in the
    write-back L2 (_write_share: it fits the usable part; the kernel ends before it reaches HBM)."""
    out = float(p.batch * p.M * p.N * p.out_bytes)
    fits = out <= chip["l2_bytes"] * chip["l2_usable_fraction"]
    return p.compulsory_bytes - (out if fits else 0.0)


def _write_floor(p: Matmul, chip, c: dict, active) -> np.ndarray:
    """Core-seconds the fixpipe spends writing the output, summed over tiles (every output element once per
    split-K slice; split-K writes fp32 with atomic adds: 8 B read-modify-write). Reads and writes run on separate
    channels (tile_cost: busy >= max(MTE2, fixpipe)), so this is a floor beside the MTE2 floor, not added to it."""
    out_bytes = (
        float(p.batch * p.M * p.N) * c["split_k"] * np.where(c["split_k"] > 1, 8, _fix_elem_bytes(p, chip))
    )
    share = _write_share(p, chip, _chip_rates(p, chip), active, c["split_k"] > 1)
    return out_bytes / np.minimum(chip["fixpipe_bytes_per_cycle"] * chip.clock_hz, share)


def _reduction_us(p: Matmul, chip, c: dict) -> np.ndarray:
    """Split-K's extra work: zero the fp32 output, and cast it to the output dtype in a second (vector) kernel."""
    mn = float(p.batch * p.M * p.N)
    hbm = chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"]
    # a quantised matmul dequantises here, in the cast pass, reading its scales once
    cast = (
        0.0
        if p.out_bytes == 4
        else ((mn * (4 + p.out_bytes) + p.scale_bytes) / hbm * 1e6 + chip["head_base_us"])
    )
    return np.where(c["split_k"] > 1, mn * 4 / hbm * 1e6 + cast, 0.0)


def _vector_side(p: Matmul, chip, c: dict, g: dict, cores_used, make) -> dict:
    """The vector cores' share of a quantised matmul (docs/model.md, "Quantised matmul"), per candidate, seconds.

    Two passes can run there, each per output tile, each overlapping the cube's next tiles (the workspace has two
    or more slots) but not the cube's last:
    - the dequant epilogue (dequant_site vector, split_k 1): read the int32 tile back from the workspace (on
      separated A2/A3 cores through GM/L2, on a coupled core L0C -> UB), the scales, cast and scale it on the
      vector unit (2 + one multiply per scale kind vector ops per element, on fp32 lanes: half the fp16 lanes), write
      the output (UB -> GM). Split-K dequantises in its reduction pass instead (_reduction_us).
    - the int4 widening (b_dtype int4): read the tile's B panel as int4 (half the bytes), cast to int8 (2 vector
      ops per element on fp16 lanes), write it to the workspace the cube reads (CATLASS W4A8MatmulLocal).
    Each pass's tile time is the slowest of its read, vector and write pipes (double-buffered UB), over the
    vector units beside one cube core (2 on A2/A3). The kernel pays: the vector side's excess over the cube's
    makespan, the last tile's passes (nothing follows to hide them), one cube<->vector hand-off through GM per
    exposed pass (the write landing, CrossCoreSetFlag/WaitFlag, the first read: 2 GM latencies + a sync on
    separated chips, a sync on coupled ones), and a MIX launch (the vector cores start too: head_per_core_us each).
    """
    n = len(c["base_m"])
    zero = np.zeros(n)
    site = dequant_site(p, chip)
    epi = (site == "vector") & (c["split_k"] == 1)
    if not (np.any(epi) or p.b_int4):
        return {"extra": zero, "vec": zero, "mte3": zero, "head_us": zero, "handoff": zero, "hbm": 0.0}
    f = chip.clock_hz
    units = max(1.0, chip["vector_cores"] / chip.cores)  # vector units beside one cube core
    lanes32 = chip["vector_flops_per_cycle_fp16"] / 4.0  # fp32 elements per cycle (fp16 lanes / 2, FMA / 2)
    read_bw = chip["gm_to_l1_bytes_per_cycle"] * f  # an AIV's GM -> UB read: the core's L2 read rate [E]
    write_bw = chip["ub_to_gm_bytes_per_cycle"] * f
    coupled = bool(chip["coupled"])
    # the accumulator read back: on chip (L0C -> UB, the profile's fixpipe rate there) or from the GM workspace
    acc_bw = chip["fixpipe_bytes_per_cycle"] * f if coupled else read_bw
    handoff = (chip["sync_cycles"] if coupled else 2 * chip["gm_latency_cycles"] + chip["sync_cycles"]) / f
    tm, tn = np.asarray(g["tm"], dtype=np.float64), np.asarray(g["tn"], dtype=np.float64)
    active = np.maximum(np.asarray(cores_used, dtype=np.float64), 1.0)
    hbm_share = chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"] / active
    l2_share = chip["l2_gbps"] * 1e9 * chip["l2_efficiency"] / active
    elems = tm * tn
    ops = 2 + p.channel_scale + p.token_scale
    scale_b = 4.0 * (tn * p.channel_scale + tm * p.token_scale)
    t_read = (elems * 4 + scale_b) / (acc_bw * units)
    t_vec = elems * ops / (lanes32 * f * units)
    # the output write (UB -> GM): into L2, or at the core group's HBM share when the whole output does not fit
    dest = l2_share if _final_fits(p, chip) else hbm_share
    t_write = elems * p.out_bytes / np.minimum(write_bw * units, dest)
    t_epi = np.where(epi, np.maximum(np.maximum(t_read, t_vec), t_write), 0.0)
    vec_busy = np.where(epi, t_vec, 0.0)
    mte3 = np.where(epi, t_write, 0.0)
    kc = np.asarray(g["kc"], dtype=np.float64)
    if p.b_int4:
        # B's int4 panel: a tile's first touch of it misses L2 (1 - 1/gm hits, as the cube's B would), the
        # misses at the core's HBM share
        hit = 1.0 - 1.0 / np.asarray(g["gm"], dtype=np.float64)
        b_read = np.minimum(read_bw * units, mixed_bandwidth(hit, l2_share, hbm_share))
        belems = tn * kc
        t_w4 = np.maximum(
            np.maximum(belems * 0.5 / b_read, belems * 2 / (2 * lanes32 * f * units)),
            belems / (write_bw * units),
        )
        vec_busy = vec_busy + belems * 2 / (2 * lanes32 * f * units)
        mte3 = mte3 + belems / (write_bw * units)
    else:
        t_w4 = zero
    per_core = np.ceil(np.asarray(g["tiles"], dtype=np.float64) / chip.cores)
    vec_make = per_core * (t_epi + t_w4)
    passes = np.where(epi, 1, 0) + (1 if p.b_int4 else 0)
    hand = passes * handoff
    extra = np.maximum(vec_make - make, 0.0) + t_epi + t_w4 + hand
    # A MIX launch starts the vector cores too (S6: the head grows with the cores launched, and a MIX kernel also
    # starts the idle core type): each vector core launched pays the profile's per-core head [E: the per-core head
    # was fitted on cube-only kernels; reading a launch per block (Block Dim counts cube cores) would drop this term]
    mix = np.where(
        passes > 0, chip["head_per_core_us"] * units * np.asarray(cores_used, dtype=np.float64), 0.0
    )
    return {
        "extra": extra,
        "vec": per_core * vec_busy,
        "mte3": per_core * mte3,
        "head_us": mix,
        "handoff": hand,
        # B's int4 panels from HBM, once each (the cube's reads of the int8 workspace hit L2)
        "hbm": float(p.batch * p.K * p.N) * 0.5 if p.b_int4 else 0.0,
    }


def _per_core(cost: dict, ui: np.ndarray, gi: np.ndarray, work: list, cols: np.ndarray) -> dict:
    """Combine tile costs with each row's schedule: the busiest core's time and pipes, and chip-wide sums.

    cost[k]: (U, len(cols)) cost of one unit of each work column (schedule.WORK_COLUMNS, those in `cols`) for
    the distinct tile-cost rows; ui, gi: each row's cost row and schedule; work[j]: schedule j's CoreWork.
    A core's time is its work vector dotted with the costs; the makespan is the largest over the schedule's
    cores that can finish last (rows are bucketed by how many such cores their schedule has, padded to a power of
    two). The busiest core is picked in float32 (half the memory traffic of the gather), its time then computed
    in float64: when two cores' times agree to within float32 rounding (about 1e-6 relative for 13 columns),
    the one picked may be the lesser, and the kernel time low by at most that much.
    """
    n = ui.size
    total = np.stack([w.total for w in work])[:, cols]
    depth = np.array([len(w.padded) for w in work])
    at = np.empty((n, cols.size), dtype=np.float32)
    busy = np.take(cost["busy"], ui, axis=0)
    busy32 = busy.astype(np.float32)
    for d in np.unique(depth):
        groups = np.flatnonzero(depth == d)
        local = np.zeros(len(work), dtype=np.int64)
        local[groups] = np.arange(groups.size)
        rows = np.flatnonzero(depth[gi] == d)
        w = np.take(
            np.stack([work[j].padded for j in groups])[:, :, cols], local[gi[rows]], axis=0
        )  # (rows, d, k)
        crit = np.matmul(w, busy32[rows][:, :, None])[:, :, 0].argmax(axis=1)
        pick = np.arange(rows.size)
        at[rows] = w[pick, crit]
    # the busy time in float64 (it is the kernel time); the pipes and sums in float32 (reported, not ranked)
    out = {"busy": np.einsum("rk,rk->r", busy, at)}
    names = ("mac", "scalar", "mte1", "mte2_bw", "fixpipe", "drain")
    per = np.take(np.stack([cost[k] for k in names], axis=1).astype(np.float32), ui, axis=0)
    out.update(zip(names, np.einsum("rpk,rk->pr", per, at).astype(np.float64), strict=True))
    tot = np.take(total.astype(np.float32), gi, axis=0)
    out["busy_sum"] = np.einsum("rk,rk->r", busy, tot)
    sums = np.take(np.stack([cost["l2_read"], cost["hbm_read"]], axis=1).astype(np.float32), ui, axis=0)
    out["l2_read"], out["hbm_read"] = np.einsum("rpk,rk->pr", sums, tot).astype(np.float64)
    return out


# Calibration: each constant with the pipe whose msprof column pins it, and a box of physical values.
FITTABLE = {
    "mac_efficiency": (0.2, 1.0),  # mac: share of the cube's peak the MMADs reach
    "gm_to_l1_bytes_per_cycle": (8.0, 512.0),  # mte2: one core's GM->L1 port
    # mte2: share of the datasheet HBM bandwidth. Sustained streams reach 70-95% of it; below 0.7 a fit is not
    # measuring the HBM but soaking up another term's error (the L2 hit-rate model's optimism), which then
    # mis-prices every HBM-bound kernel of the chip (docs/model.md section 11)
    "hbm_efficiency": (0.7, 1.0),
    "l2_efficiency": (0.2, 3.0),  # mte2: share of the profile's L2 bandwidth
    "l1_to_l0a_bytes_per_cycle": (16.0, 2048.0),  # mte1
    "l1_to_l0b_bytes_per_cycle": (16.0, 2048.0),  # mte1
    "fixpipe_bytes_per_cycle": (8.0, 1024.0),  # fixpipe
    "scalar_cycles_per_instr": (0.1, 100.0),  # scalar
    "head_base_us": (0.05, 100.0),  # total time: the launch head
    "head_per_core_us": (0.001, 5.0),
}
# (head_per_core_us stays out: a library launches every core on all but the smallest problems, so totals cannot
# separate it from head_base_us; catlass's 7 us / cores is kept)
FIT_FROM_TOTALS = ("mac_efficiency", "l2_efficiency", "hbm_efficiency", "head_base_us")
# Used only where a profile lacks the key (every shipped Ascend profile has them all).
CONSTANTS = {
    "mac_efficiency": 0.95,
    "gm_to_l1_bytes_per_cycle": 110.0,
    "hbm_efficiency": 0.85,
    "l2_efficiency": 0.8,
    "l1_to_l0a_bytes_per_cycle": 512.0,
    "l1_to_l0b_bytes_per_cycle": 256.0,
    "fixpipe_bytes_per_cycle": 128.0,
    "scalar_cycles_per_instr": 16.0,
    "head_base_us": 1.0,
    "head_per_core_us": 0.35,
}

# The CATLASS default for Atlas A2 (examples/00_basic_matmul): 128x256x64 L0 block, L1 K 256, ping-pong, swizzle 3;
# the known-good tiling the Bayesian search may try first (--warm-start).
WARM_START = dict(
    base_m=128,
    base_n=256,
    base_k=64,
    step_m=1,
    step_n=1,
    step_ka=4,
    step_kb=4,
    l1_stages=2,
    preload=1,
    l0_pingpong=1,
    multi_load=1,
    weight_resident=0,
    iterate_order="m",
    swizzle_offset=3,
    swizzle_direction=0,
    serpentine=1,
    tail_split="auto",
    split_k=1,
    core_split="walk",
)


@register
class MatmulAscend(Operator):
    OP = "matmul"
    FAMILY = "ascend"
    PROBLEM = Matmul
    KNOBS = KNOBS
    SCHEDULE_KNOBS = SCHEDULE_KNOBS
    RESOLVED = RESOLVED
    LEVELS = LEVELS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    # knobs that fix the tile grid (the schedule simulation); the block shape is sampled first, then the knobs
    # whose feasible values depend on it
    GRID_KNOBS = ("base_m", "base_n", "base_k", "step_m", "step_n", "split_k")
    SHAPE_KNOBS = ("base_m", "base_n", "base_k", "step_m", "step_n", "split_k")
    SAMPLE_ORDER = (
        "base_m",
        "base_n",
        "base_k",
        "split_k",
        "step_ka",
        "step_kb",
        "weight_resident",
        "step_m",
        "step_n",
        "l1_stages",
        "preload",
    )
    CHECKLIST = {
        "mte2": "memory bound: cut repeated loads, keep panels in L2/L1 (shared memory), make transfers large and "
        "aligned",
        "mte1": "L1->L0 bound: larger base_k per load, fewer L0 reloads (iterate order), Load3D instead of 2D",
        "cube": "compute bound: keep the cube busy (no gaps between MMADs), align instruction sizes, quantise",
        "vector": "vector bound: move work to the cube, fewer passes, fused instructions",
        "fixpipe": "write-out bound: larger K per output block, double-buffer L0C (unit flag)",
        "scalar": "scalar bound: fewer, larger instructions (multi-load, bigger base blocks), less loop overhead",
        "latency": "no pipe saturated: ping-pong, preload and fewer, larger transfers hide the latency",
    }
    WHAT_IF = {
        "tail_split": ("multi-core: re-split the tail round", (1,)),
        "serpentine": ("memory: serpentine order keeps the panels just used in L2", (0, 1)),
        "swizzle_offset": ("memory: swizzle group width changes which panels share L2", (1, 2, 3, 4, 8)),
        "swizzle_direction": ("memory: swizzle direction", (0, 1)),
        "l1_stages": ("latency: L1 ping-pong / more stages hide MTE2 behind the cube", (1, 2, 3, 4)),
        "preload": ("latency: preload the next tile's first chunk", (0, 1, 2, 3)),
        "l0_pingpong": ("latency: L0A/L0B ping-pong overlaps MTE1 with the MMAD", (0, 1)),
        "multi_load": ("scalar: multi-load moves all L1 blocks in one MTE2 transfer", (0, 1)),
        "weight_resident": ("memory: keep the B panel resident in L1 (no reload per tile)", (0, 1)),
        "split_k": ("multi-core: split K across cores", (1, 2, 4, 8, 16)),
    }
    TARGETS = {"catlass": views.CATLASS, "ascendc": views.ASCENDC}
    # calibration (`tiler calibrate --chip ascend910b3 --op matmul --measurements op_summary.csv`): the profile's
    # rates each pipe reads, with boxes of physical values; each msprof pipe column constrains its own
    FITTABLE = FITTABLE
    CONSTANTS = CONSTANTS
    # what a fit from kernel totals alone (tiler.calibrate_totals: the library's tiling unknown) can pin: the
    # chip-generic efficiencies and fixed costs; a single pipe's rate needs that pipe's measured time
    FIT_FROM_TOTALS = FIT_FROM_TOTALS

    def prepare(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        """The model is re-run whole per fit step (it is fast on a few hundred rows): keep the knob columns and
        the problem of every row."""
        n = len(next(iter(c.values())))
        return {**{k: np.asarray(v) for k, v in c.items()}, "problem": np.array([p] * n, dtype=object)}

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        """The estimate record of prepared rows of any number of problems, with the constants replaced."""
        tuned = chip.with_values(constants)
        problems = prepared["problem"]
        out: dict[str, np.ndarray] = {}
        groups: dict = {}
        for i, p in enumerate(problems):
            groups.setdefault(p, []).append(i)
        n = len(problems)
        for p, rows in groups.items():
            idx = np.asarray(rows)
            est = self.estimate(p, tuned, {k: prepared[k][idx] for k in KNOBS})
            for k, v in est.items():
                if k not in out:
                    out[k] = np.empty(n, dtype=np.asarray(v).dtype if k != "bound" else object)
                out[k][idx] = v
        return out

    def check(self, p: Matmul, chip) -> None:
        """The dtype on the cube, then a quantised matmul's dequant where the chip can run it: the fixpipe applies
        one scale per column (VDEQF16) or per tensor (DEQF16) and writes fp16 only (CATLASS CopyL0CToGm's AtlasA2
        specialisations; AscendC Fixpipe's quantPre checks); 910A and 310P have no fixpipe at all."""
        super().check(p, chip)
        if p.dequant != "fixpipe":
            return
        if not has_fixpipe(chip):
            raise ProblemError(
                f"dequant: fixpipe, but {chip.id} has no fixpipe (its L0C leaves through UB); use dequant vector or auto"
            )
        if p.token_scale:
            raise ProblemError(
                f"dequant: fixpipe cannot apply a per-token (per-row) scale (scale {p.scale}): the fixpipe takes one "
                "scale per column or per tensor; use dequant vector or auto"
            )
        if p.output_dtype != "fp16":
            raise ProblemError(
                f"dequant: fixpipe writes a dequantised int32 as fp16 only (VDEQF16/DEQF16), not "
                f"{p.output_dtype}; use dequant vector or auto"
            )

    def warm_start(self, p: Matmul, chip) -> dict:
        """CATLASS's default, its swizzle direction along the longer output side."""
        return dict(WARM_START, swizzle_direction=1 if p.M < p.N else 0)

    def advice(self, p: Matmul, chip, c: dict, est: dict, row: int) -> list[str]:
        """The shared multi-core facts, the fixed costs (the launch head, the split-K reduction pass), plus row
        strides that are not GM-burst aligned (full-rate transfers): A's (K, or M when A is stored transposed) and
        B's (N, or K when stored transposed; none in NZ)."""
        out = super().advice(p, chip, c, est, row)
        out.insert(len(out) - 1 if out else 0, self._fixed_costs(p, chip, c, est, row))
        burst = chip["gm_burst_bytes"]
        rows = [("M", p.M) if p.a_transposed else ("K", p.K)]
        if not p.b_nz:
            rows.append(("K", p.K) if p.b_transposed else ("N", p.N))
        for name, elems in dict(rows).items():
            stride = elems * p.in_bytes
            if stride % burst:
                pad = -(-stride // burst) * burst // p.in_bytes
                out.insert(
                    -1,
                    f"memory: row stride {name}*{p.in_bytes} = {stride} B is not {burst}-B aligned; "
                    f"padding {name} to {pad} restores full-rate transfers",
                )
        return out

    def _fixed_costs(self, p: Matmul, chip, c: dict, est: dict, row: int) -> str:
        """One line: the kernel time's terms that do not scale with the tiles (docs/model.md, "Kernel time")."""
        used = float(np.asarray(est["cores_used"])[row])
        head = float(_head_us(chip, used))
        one = {k: np.asarray(v)[row : row + 1] for k, v in c.items()}
        red = float(_reduction_us(p, chip, one)[0])
        text = (
            f"fixed costs: head {head:.1f} us (launch {chip['head_base_us']:.2f} us + {used:.0f} cores x "
            f"{chip['head_per_core_us']:.3f} us)"
        )
        if red > 0:
            text += f"; split-K reduction {red:.1f} us (zero the fp32 output, cast pass with its own launch)"
            if p.quant:
                text += " (the dequant runs in that pass)"
        quant = float(np.asarray(est.get("quant_us", np.zeros(row + 1)))[row])
        if quant > 0:
            what = ["int4 -> int8 widening of B"] if p.b_int4 else []
            if dequant_site(p, chip) == "vector" and red == 0:
                trip = "L0C -> UB on chip" if chip["coupled"] else "int32 round trip through GM"
                what.insert(0, f"dequant epilogue ({p.scale} scale, {trip})")
            units = max(1.0, chip["vector_cores"] / chip.cores)
            mix = chip["head_per_core_us"] * units * used
            text += (
                f"; vector side {quant:.1f} us beyond the cube ({', '.join(what)}: its last tile and the "
                f"cube->vector hand-off are never hidden); MIX launch {mix:.1f} us ({units * used:.0f} vector "
                f"cores x {chip['head_per_core_us']:.3f} us)"
            )
        return (
            text
            + f"; makespan {float(np.asarray(est['core_us'])[row]):.1f} us of {float(np.asarray(est['time_us'])[row]):.1f}"
        )

    def derived(self, p: Matmul, tiling: dict, row: dict) -> dict:
        """The tail re-split's sub-block sizes, when the last round is re-cut."""
        if int(row.get("tail_sub_count", 0)) <= 0:
            return {}
        return {k: int(row[k]) for k in ("tail_sub_m", "tail_sub_n", "tail_sub_count")}

    def feasible(self, p: Matmul, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        """One boolean mask per rule (True = allowed), for the rules whose knobs are all present."""
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        b, k0 = p.in_bytes, _k0(p)
        kc = _k_slice(p, c) if "base_k" in c and "split_k" in c else None
        out = {}
        for r in names:
            if r == "align":
                out[r] = (
                    (c["base_m"] % 16 == 0)
                    & (c["base_n"] % 16 == 0)
                    & (c["base_k"] % 16 == 0)
                    & (c["base_k"] % k0 == 0)
                )
            elif r == "fix_split":
                # no block larger than the smallest legal block that covers the dimension: 16 rows (AscendC's
                # SetFixSplit); CATLASS's tile extents must be 32-byte multiples, so 32 for int8 there
                mn = 16 if self.target is None or self.target.name != "catlass" else max(16, 32 // b)
                out[r] = (
                    (c["base_m"] <= round_up(p.M, mn))
                    & (c["base_n"] <= round_up(p.N, mn))
                    & (c["base_k"] <= round_up(p.K, max(k0, 16)))
                )
            elif r == "split_k":
                out[r] = c["split_k"] <= ceil_div(p.K, c["base_k"])
            elif r == "l0a":
                out[r] = c["base_m"] * c["base_k"] * b * (1 + c["l0_pingpong"]) <= chip["l0a_bytes"]
            elif r == "l0b":
                out[r] = c["base_n"] * c["base_k"] * b * (1 + c["l0_pingpong"]) <= chip["l0b_bytes"]
            elif r == "l0c":
                out[r] = c["base_m"] * c["base_n"] * 4 <= chip["l0c_bytes"]
            elif r == "mdl_step":
                out[r] = ((c["step_m"] == 1) | (c["base_k"] * c["step_ka"] >= kc)) & (
                    (c["step_n"] == 1) | (c["base_k"] * c["step_kb"] >= kc)
                )
            elif r == "k_step_ratio":
                ka_iter = ceil_div(kc, c["base_k"] * c["step_ka"])
                kb_iter = np.where(c["weight_resident"] == 1, 1, ceil_div(kc, c["base_k"] * c["step_kb"]))
                hi, lo = np.maximum(ka_iter, kb_iter), np.minimum(ka_iter, kb_iter)
                out[r] = hi % lo == 0
            elif r == "l1":
                out[r] = _l1_bytes(p, c, kc) <= chip["l1_bytes"]
            elif r == "preload":
                out[r] = c["preload"] < c["l1_stages"]
        return out

    def dominated(self, p: Matmul, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """Settings with an equal twin (same estimate; one of each pair is kept). iterate_order only decides
        which L0 operand stays put when a tile's K slice is one base_k step and the tile has more than one L0
        block (tile_cost's MTE1 term), so it is moot otherwise: `n` is dropped for `m`. Norm and MDL loads are
        the same transfer when each L1 chunk is one base block: Norm is dropped for MDL. Neither knob is in a
        rule, so the twin is feasible whenever the row is; a row is dropped only when the twin's value is in
        `domains` (the space, which --fix may have pinned)."""
        domains = domains or {}
        single_block = (c["step_m"] == 1) & (c["step_n"] == 1)
        one_k = ceil_div(_k_slice(p, c), c["base_k"]) == 1
        one_xfer = (c["step_m"] * c["step_ka"] == 1) & (c["step_n"] * c["step_kb"] == 1)
        order_twin = 0 in domains.get("iterate_order", (0,))
        load_twin = 1 in domains.get("multi_load", (1,))
        out = (order_twin & (single_block | ~one_k) & (c["iterate_order"] == 1)) | (
            load_twin & one_xfer & (c["multi_load"] == 0)
        )
        if all(k in c for k in SCHEDULE_KNOBS) and all(k in domains for k in SCHEDULE_KNOBS):
            out = out | self._schedule_twins(p, chip, c, domains)
        return out

    def dominated_product(
        self, p: Matmul, chip, rows: dict, sched: dict, domains: dict | None = None
    ) -> np.ndarray:
        """dominated() of product(rows, sched), flattened rows outer, on a broadcast instead of the product: the
        rows' columns as (n, 1), the schedules' as (1, S). Every term of dominated() is elementwise, so each
        (row, schedule) gets the same value, but the tile grid and the tiling twins are computed once per row
        rather than once per schedule (most of a search's product is schedule twins)."""
        cols = {**{k: v[:, None] for k, v in rows.items()}, **{k: v[None, :] for k, v in sched.items()}}
        out = self.dominated(p, chip, cols, domains)
        return np.broadcast_to(out, (len(rows["base_m"]), len(next(iter(sched.values()))))).ravel()

    def _schedule_twins(self, p: Matmul, chip, c: dict, domains: dict) -> np.ndarray:
        """Schedules that cost exactly what another schedule in `domains` costs (schedule.same_walk), and
        tail_split=auto where it re-cuts nothing (no partial last round, or no room for two pieces)."""
        g = _geometry(p, c)
        cores = chip.cores
        out = same_walk(
            g["gm"],
            g["gn"],
            g["tiles"],
            cores,
            c["swizzle_offset"],
            c["swizzle_direction"],
            c["serpentine"],
            domains["swizzle_offset"],
            domains["swizzle_direction"],
            domains["serpentine"],
        )
        last, pieces = _tail(g, cores)
        no_recut = (last == 0) | (pieces < 2)
        out = out | ((0 in domains["tail_split"]) & no_recut & (c["tail_split"] == 1))
        # the block split ignores the walk knobs and the re-cut: one setting of them is kept (the smallest
        # offset, direction, serpentine and tail_split in their domains)
        block = c["core_split"] == 1
        canonical = np.ones(np.shape(block), dtype=bool)
        for k in ("swizzle_offset", "swizzle_direction", "serpentine", "tail_split"):
            canonical &= c[k] == min(domains[k])
        return np.where(block, ~canonical, out)

    def resolve(self, p: Matmul, chip, c: dict, domains: dict[str, tuple]) -> dict:
        """Fill the RESOLVED knobs with their best feasible value from `domains` (which may be pinned).

        Proof of dominance (docs/model.md): with everything else fixed, the estimate never rises when
        l0_pingpong goes 0 -> 1 (max + one step <= sum), when l1_stages grows (more loads in flight, pipelined
        instead of serial) or when preload grows (0 -> 1 hides every tile's bubble and charges at most one back per
        core as the drain, _fill; beyond 1 nothing changes); these knobs cost
        only buffer capacity. So the largest value that fits wins.
        """
        c = dict(c)
        n = len(c["base_m"])
        dom = sorted(domains["l0_pingpong"])
        c["l0_pingpong"] = np.full(n, dom[0], dtype=np.int64)
        for v in dom[1:]:
            ok = self.feasible(p, chip, dict(c, l0_pingpong=np.full(n, v, dtype=np.int64)), ["l0a", "l0b"])
            c["l0_pingpong"] = np.where(ok["l0a"] & ok["l0b"], v, c["l0_pingpong"])
        # L1 use is (fixed part) + stages * (per-stage part): the most stages that fit, from the domain
        kc = _k_slice(p, c)
        one = _l1_bytes(p, dict(c, l1_stages=np.ones(n, dtype=np.int64)), kc)
        two = _l1_bytes(p, dict(c, l1_stages=np.full(n, 2, dtype=np.int64)), kc)
        per_stage, fixed = two - one, 2 * one - two
        fit = np.floor((chip["l1_bytes"] - fixed) / np.maximum(per_stage, 1))
        st_dom = np.array(sorted(domains["l1_stages"]))
        c["l1_stages"] = st_dom[np.maximum(np.searchsorted(st_dom, fit, side="right") - 1, 0)]
        pre_dom = np.array(sorted(domains["preload"]))
        c["preload"] = pre_dom[np.maximum(np.searchsorted(pre_dom, c["l1_stages"], side="left") - 1, 0)]
        return self._settle(p, chip, c, domains, fit)

    def _settle(self, p: Matmul, chip, c: dict, domains: dict, fit: np.ndarray) -> dict:
        """The target's kernel fixes some resolved knobs: the best values it can express (the largest that fit
        and that it takes, by the same dominance argument as resolve()).

        catlass, split_k > 1: the split-K kernel's pingpong block has exactly 2 L1 and L0 stages and no preload.
        ascendc: doMTE2Preload needs MDL, double-buffered L1 and the preloaded operand whole along K; elsewhere
        the preload is 0."""
        name = self.target.name if self.target is not None else None
        if name == "catlass":
            split = c["split_k"] > 1
            if 2 in domains["l1_stages"]:
                c["l1_stages"] = np.where(split & (fit >= 2), 2, c["l1_stages"])
            if 0 in domains["preload"]:
                c["preload"] = np.where(split, 0, c["preload"])
            if 1 in domains["l0_pingpong"]:
                one = {**c, "l0_pingpong": np.ones_like(c["l0_pingpong"])}
                ok = self.feasible(p, chip, one, ["l0a", "l0b"])
                c["l0_pingpong"] = np.where(split & ok["l0a"] & ok["l0b"], 1, c["l0_pingpong"])
        elif name == "ascendc" and 0 in domains["preload"]:
            ok = views.ascendc_masks(p, chip, c, ["ascendc_preload"])["ascendc_preload"]
            c["preload"] = np.where(ok, c["preload"], 0)
        return c

    # ------------------------------------------------------------------ estimate
    def quick_bound(self, p: Matmul, chip, c: dict) -> np.ndarray:
        """A cheaper, looser lower bound than bound(): whole-kernel floors that no schedule can beat.

        Each core's busy time is at least its MAC time, its MTE2 byte time and its scalar time (every formula in
        tile_cost takes a max over them), so the makespan is at least each total over the cores: all MMAD
        fractals over the cube rate; the GM->L1 bytes the tile shape forces (A re-streamed per L0 column block
        unless its K slice fits L1, B likewise unless resident: then only its compulsory panel bytes) over the
        best bandwidth one core can reach (port and L2 share, stride and row-segment penalties) plus the
        transfers' latency `l1_stages` at a time; the issued
        instructions over the scalar rate; the output writes (fixpipe) over the write channel (a floor beside the
        MTE2 one: reads and writes overlap on separate channels, tile_cost's t_gm). The search runs it first and computes bound() only where it is
        below the best time found.
        """
        fl = self._floors(p, chip, c)
        mte2 = np.maximum(
            np.maximum(fl["bytes"], (fl["latency"] + fl["bytes"]) / c["l1_stages"]), fl["writes"]
        )
        make = (
            np.maximum(np.maximum(fl["mac"], mte2), fl["scalar"]) / chip.cores
        )  # core-seconds over the cores
        return make * 1e6 + fl["head_us"] + _reduction_us(p, chip, c)

    def prefix_bound(self, p: Matmul, chip, c: dict, domains: dict) -> np.ndarray:
        """A floor of quick_bound over every completion of first-level rows (base sizes and split_k).

        quick_bound is max(MAC, MTE2, scalar) over the cores plus head and reduction, with MTE2 at least its
        byte time. Each term is bounded below over every setting of the steps, residency and load mode in
        `domains` (only the MDL rule is used: steps above 1 need the operand's whole K slice in L1):
        A is re-read at least once per column of the widest tiles, B once if residency is allowed else once per
        row of the tallest tiles (sums of per-tile block counts are at least the tile counts); the best row
        segment and port any completion can reach; the L0 blocks at least ceil(M/base_m)*ceil(N/base_n); the
        fewest cores a completion can leave busy for the head. tests/test_search.py checks the floor against
        quick_bound on completions.
        """
        r = _chip_rates(p, chip)
        f, b, k0, cores = r["f"], p.in_bytes, _k0(p), chip.cores
        bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
        kc = _k_slice(p, c)
        s = c["split_k"] * p.batch
        mac = ceil_div(p.M, 16) * ceil_div(p.N, 16) * ceil_div(kc, k0) * s * r["mac_cycle"] / f
        # MDL: step_m > 1 needs A's whole K slice in one L1 chunk (base_k * step_ka >= kc), step_n B's
        a_whole = bk * max(domains["step_ka"]) >= kc
        b_whole = bk * max(domains["step_kb"]) >= kc
        step_m = np.where(a_whole, max(domains["step_m"]), 1)
        step_n = np.where(b_whole, max(domains["step_n"]), 1)
        gm_min, gn_min = ceil_div(p.M, bm * step_m), ceil_div(p.N, bn * step_n)
        b_passes = 1 if 1 in domains["weight_resident"] else gm_min
        active = np.minimum(cores, gm_min * gn_min * s)
        if 1 in domains.get("core_split", (0,)):  # the block split may launch as few as one core per slice
            active = np.minimum(active, c["split_k"])
        port = np.minimum(r["core_gm"], r["l2"] / active)
        eff = _stride_floor(p, chip)
        # the best row segment of any completion (quick_bound's segments): along K, MDL moves
        # ka = min(base_k*step_ka, kc) per row and Norm one whole base_k block; along M or N, rows of at most
        # base_m (base_n) times the largest step
        along_k = [segment_efficiency(bk * b)]
        seg_a = np.max(
            along_k + [segment_efficiency(np.minimum(bk * v, kc) * b) for v in domains["step_ka"]], axis=0
        )
        seg_b = np.max(
            along_k + [segment_efficiency(np.minimum(bk * v, kc) * b) for v in domains["step_kb"]], axis=0
        )
        if p.a_transposed:
            seg_a = _segment_ceiling(bm * max(1, *domains["step_m"]) * b)
        if not p.b_transposed:
            seg_b = _segment_ceiling(bn * max(1, *domains["step_n"]) * b)
        if p.b_nz:
            seg_b = np.ones_like(seg_b)
        t_bytes = p.M * kc * b * s * gn_min / (port * eff[0] * seg_a) + p.N * kc * b * s * b_passes / (
            port * eff[1] * seg_b
        )
        mmads = ceil_div(p.M, bm) * ceil_div(p.N, bn) * ceil_div(kc, bk) * s
        scalar = mmads * (3 * chip["scalar_cycles_per_instr"] + chip["scalar_cycles_per_loop"]) / f
        make = (
            np.maximum(np.maximum(mac, np.maximum(t_bytes, _write_floor(p, chip, c, active))), scalar) / cores
        )
        return make * 1e6 + _head_us(chip, active) + _reduction_us(p, chip, c)

    def _fewest_active(self, chip, g: dict, schedules: dict | None = None) -> np.ndarray:
        """The fewest cores any allowed schedule keeps loading at once (each gets the largest share of HBM and L2)
        and launches (the head): the walk fills min(cores, tiles); the block split (when the target or
        `schedules` allows it) only its blocks, block_grid's um*un per slice."""
        walk = np.minimum(chip.cores, g["tiles"])
        if not self._block_allowed(schedules):
            return walk
        gm, gn, sk = (np.asarray(g[k], dtype=np.int64) for k in ("gm", "gn", "splits"))
        first, inv = group_rows([gm, gn, sk])
        um, un, _, _ = block_grid(gm[first], gn[first], sk[first], chip.cores)
        return np.minimum(walk, np.minimum(um * un * sk[first], chip.cores)[inv])

    def _block_allowed(self, schedules: dict | None) -> bool:
        """Whether some allowed schedule is the block split (the target's domain and `schedules`' values)."""
        return self._split_allowed(schedules, 1)

    def _split_allowed(self, schedules: dict | None, split: int) -> bool:
        """Whether some allowed schedule has core_split `split` (0 walk, 1 block; the target's domain and
        `schedules`' values)."""
        allowed = set((schedules or {}).get("core_split", (0, 1)))
        if self.target is not None and "core_split" in self.target.domains:
            allowed &= {1 if v == "block" else 0 for v in self.target.domains["core_split"]}
        return split in allowed

    def _floors(self, p: Matmul, chip, c: dict) -> dict:
        """quick_bound's whole-kernel floors (core-seconds summed over the chip): MAC; MTE2 bytes over the best
        bandwidth and the transfers' latency; scalar issue; and the head (us)."""
        r = _chip_rates(p, chip)
        f, b, k0 = r["f"], p.in_bytes, _k0(p)
        g = _geometry(p, c)
        bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
        s = g["splits"] * p.batch
        kc = g["kc"]
        mac = ceil_div(p.M, 16) * ceil_div(p.N, 16) * ceil_div(kc, k0) * s * r["mac_cycle"] / f
        ka, kb = np.minimum(bk * c["step_ka"], kc), np.minimum(bk * c["step_kb"], kc)
        nbn, nbm = ceil_div(g["tn"], bn), ceil_div(g["tm"], bm)
        # L0 blocks summed over a row (column) of tiles, the edge tile at its real size
        nbn_sum = (g["gn"] - 1) * nbn + ceil_div(g["n_last"], bn)
        nbm_sum = (g["gm"] - 1) * nbm + ceil_div(g["m_last"], bm)
        res = c["weight_resident"] == 1
        a_bytes = p.M * kc * b * s * np.where(ka >= kc, g["gn"], nbn_sum)
        b_bytes = p.N * kc * b * s * np.where(res, 1, np.where(kb >= kc, g["gm"], nbm_sum))
        active = self._fewest_active(chip, g)
        port = np.minimum(r["core_gm"], r["l2"] / active)  # the best one core's MTE2 can see
        eff = _stride_floor(p, chip)
        ml = c["multi_load"] == 1
        seg_a, seg_b = _segment_floor(p, c, g["tm"], g["tn"], ka, kb)
        t_bytes = a_bytes / (port * eff[0] * seg_a) + b_bytes / (port * eff[1] * seg_b)
        # transfers issued (B's at least once per panel when resident), each waiting one latency; count them
        # with every tile at its smallest (edge) block count, a valid floor
        tiles = g["tiles"]
        nbn_min, nbm_min = (
            ceil_div(np.minimum(g["n_last"], g["tn"]), bn),
            ceil_div(np.minimum(g["m_last"], g["tm"]), bm),
        )
        xa = ceil_div(kc, ka) * np.where(ka >= kc, 1, nbn_min) * np.where(ml, 1, nbm_min * ceil_div(ka, bk))
        xb = (
            ceil_div(kc, kb)
            * np.where((kb >= kc) | res, 1, nbm_min)
            * np.where(ml, 1, nbn_min * ceil_div(kb, bk))
        )
        xfers = tiles * xa + np.where(res, g["gn"] * s, tiles) * xb
        mmads = nbm_sum * nbn_sum * ceil_div(kc, bk) * s
        return {
            "mac": mac,
            "bytes": t_bytes,
            "writes": _write_floor(p, chip, c, active),
            "latency": xfers * r["lat"],
            "scalar": mmads * (3 * chip["scalar_cycles_per_instr"] + chip["scalar_cycles_per_loop"]) / f,
            "head_us": _head_us(chip, active),
        }

    def bound(self, p: Matmul, chip, c: dict, schedules: dict | None = None) -> np.ndarray:
        """Lower bound of time_us over every value of SCHEDULE_KNOBS (see docs/model.md, "exhaustive search").

        Hit rates at their ceiling (every panel misses at least once), weight residency everywhere it is on,
        makespan at least the average busy time and at least the full rounds every core must run.
        `schedules` gives the schedule knobs' domains (default: the whole space file's); with weight residency
        on, only as many tiles as the best of those traversals lets reuse a B panel get the resident cost.
        """
        schedules = schedules or {
            "swizzle_offset": (1, 2, 3, 4, 8),
            "swizzle_direction": (0, 1),
            "serpentine": (0, 1),
        }
        splits = [v for v in (0, 1) if self._split_allowed(schedules, v)]
        if len(splits) < 2:
            return self._bound_split(p, chip, c, schedules, block=splits == [1])
        # both splits: one floor for every schedule (the fewest cores either split keeps loading), and where that
        # mixes the two (the block split loads on fewer cores than the walk fills: faster tiles, yet the walk's
        # sharing over every core) or a single core's walk is simulated (its hit rates below the ceiling), the
        # walk and the block split bounded apart, each with its own cores, the smaller of the two; a schedule is
        # one or the other, so the larger of that and the common floor holds
        out = self._bound_split(p, chip, c, schedules, block=False)
        g = _geometry(p, c)
        apart = self._fewest_active(chip, g, schedules) < np.minimum(chip.cores, g["tiles"])
        if chip.cores == 1:  # where some walk setting falls below the ceiling on every best pair
            a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
            walks = [schedules[k] for k in ("swizzle_offset", "swizzle_direction", "serpentine")]
            cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
            fa, fb = serial_hit_ceiling(
                g["gm"], g["gn"], g["splits"], p.batch, a_panel, b_panel, cap, *walks, front=True
            )
            apart |= ~((fa == 1.0 - 1.0 / g["gn"]) & (fb == 1.0 - 1.0 / g["gm"])).any(axis=0)
            # with residency, where the walks' B-panel reuse differs (a 2-D grid): each with its own hit rates
            first, inv = group_rows([g["gm"], g["gn"]])
            reuse = serial_b_reuse(g["gm"][first], g["gn"][first], *walks)
            apart |= (c["weight_resident"] == 1) & (reuse.min(axis=0) < reuse.max(axis=0))[inv]
        else:  # where a walk's full rounds overflow L2 (round_hit_front) and are many (where it pays)
            a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
            cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
            many = g["tiles"] > ROUND_TILES * chip.cores
            apart |= many & rounds_overflow(g["tiles"], chip.cores, a_panel, b_panel, cap)
        rows = np.flatnonzero(apart)
        if rows.size:
            sub = {k: v[rows] for k, v in c.items()}
            walk = self._bound_split(p, chip, sub, {**schedules, "core_split": (0,)}, block=False)
            block = self._bound_split(p, chip, sub, {**schedules, "core_split": (1,)}, block=True)
            out[rows] = np.maximum(out[rows], np.minimum(walk, block))
        return out

    def _bound_split(
        self, p: Matmul, chip, c: dict, schedules: dict, block: bool, hits: tuple | None = None
    ) -> np.ndarray:
        """bound() over the schedules of `schedules`; `block`: they are all the block split, whose cores used
        (block_grid's um * un per slice, the cores loading at once) share all the work: the busiest core runs at
        least their mean (no re-cut there).

        L2 hit rates: at their ceiling (each panel misses once), except where every schedule of the kind has
        them in closed form: the block split's are estimate()'s exactly (B once per panel, A once or once per
        block column); a walk of one tile a round (one core): the smallest bound over the (A, B) hit rates of the
        walk settings no other setting beats on both (schedule.serial_hit_ceiling's front: the simulation's own
        counts in closed form, for every row at once), with weight residency the front over (A hits, B hits, B
        reuse) of each setting (schedule.serial_b_reuse); several tiles a round whose panels overflow L2: the
        corners of schedule.round_hit_front. Every walk is at or below one of them (`hits`: one such pair, or
        triple, per row)."""
        g = _geometry(p, c)
        cores = chip.cores
        hit_a = 1.0 - 1.0 / g["gn"]
        hit_b = 1.0 - 1.0 / g["gm"]
        cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
        a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
        if block:
            gm, gn, sk = (np.asarray(g[k], dtype=np.int64) for k in ("gm", "gn", "splits"))
            _, un, _, bn_t = block_grid(gm, gn, sk, cores)
            fits = gm * a_panel + un * b_panel <= cap
            hit_a = 1.0 - np.where(fits, 1.0, bn_t) / g["gn"]
        elif hits is None and not self._split_allowed(schedules, 1):
            walks = [schedules[k] for k in ("swizzle_offset", "swizzle_direction", "serpentine")]
            grid = (g["gm"], g["gn"], g["splits"], p.batch)
            res = c["weight_resident"] == 1
            if cores == 1 and res.any():
                # one walk gives both its hit rates and its B-panel reuse (weight residency's saved loads): the
                # front over (A hits, B hits, reuse) of every setting, not the best of each from different walks
                # once per distinct (grid, panel bytes, residency): the front depends on nothing else
                a_bits, b_bits = (np.asarray(x, dtype=np.float64).view(np.int64) for x in (a_panel, b_panel))
                first, inv = group_rows([g["gm"], g["gn"], g["splits"], a_bits, b_bits, res])
                one = tuple(x[first] for x in (g["gm"], g["gn"], g["splits"], a_panel, b_panel))
                every = serial_hit_ceiling(*one[:3], p.batch, *one[3:], cap, *walks, every=True)
                reuse = serial_b_reuse(*one[:2], *walks) * (one[2] * p.batch * res[first])
                front = tuple(f[:, inv] for f in front_rows(*every, reuse.astype(np.float64)))
            elif cores == 1:
                front = serial_hit_ceiling(*grid, a_panel, b_panel, cap, *walks, front=True)
            else:
                front = round_hit_front(*grid, cores, a_panel, b_panel, cap, *walks[:2], ROUND_TILES)
            if front is None:
                return self._bound_split(p, chip, c, schedules, block, (hit_a, hit_b))
            out = self._bound_split(p, chip, c, schedules, block, tuple(f[0] for f in front))
            # the further pairs, only on rows with another pair there, stacked into few calls of BOUND_ROWS rows
            pair, rows = np.nonzero(np.logical_or.reduce([f[1:] != f[0] for f in front]))
            for lo in range(0, rows.size, BOUND_ROWS):
                k, r = pair[lo : lo + BOUND_ROWS] + 1, rows[lo : lo + BOUND_ROWS]
                sub = {key: v[r] for key, v in c.items()}
                more = self._bound_split(p, chip, sub, schedules, block, tuple(f[k, r] for f in front))
                np.minimum.at(out, r, more)
            # a walk's own hit rates and reuse can make this its exact time but for the float order of the
            # sums: a relative hair below, so that rounding never lifts it above
            return out * (1.0 - 1e-12)
        if hits is not None:
            hit_a, hit_b = hits[:2]
        active = self._fewest_active(chip, g, schedules)
        res = c["weight_resident"] == 1
        n = len(c["base_m"])
        counts = np.stack(_type_counts(g, p.batch), axis=1)  # (n, 4)
        # residency saves a B load only on tiles whose core just ran the same panel: at most `reuse_max`
        reuse_max = np.zeros(n)
        if hits is not None and len(hits) > 2:  # one walk setting's own reuse (serial_b_reuse)
            reuse_max = np.asarray(hits[2], dtype=np.float64)
        elif res.any():
            # exact maximum for grids up to REUSE_EXACT tiles; beyond, the trivial bound (every tile but the
            # first user of each panel reuses it) keeps the bound valid without walking huge grids
            reuse_max = g["tiles"] - g["gn"] * g["splits"] * p.batch
            small = np.flatnonzero(res & (g["tiles"] <= REUSE_EXACT))
            if small.size:
                first, inv = group_rows([g[k][small] for k in ("gm", "gn", "splits")])
                walks = tuple(
                    tuple(schedules[k]) for k in ("swizzle_offset", "swizzle_direction", "serpentine")
                )
                best = np.array(
                    [
                        max_b_reuse(int(a), int(b), int(s), p.batch, cores, *walks)
                        for a, b, s in zip(*(g[k][small][first] for k in ("gm", "gn", "splits")), strict=True)
                    ]
                )
                if self._block_allowed(schedules):  # the block split reuses all but each block column's first
                    gm, gn, sk = (g[k][small][first].astype(np.int64) for k in ("gm", "gn", "splits"))
                    um = block_grid(gm, gn, sk, cores)[0]
                    best = np.maximum(best, p.batch * sk * gn * (gm - um))
                reuse_max[small] = best[inv]
        must_load = np.maximum(g["tiles"] - reuse_max, 0)
        # the tile types present (type 0 always: it gives the fill) side by side; with residency also each type
        # with its B panel loaded
        types = np.flatnonzero((counts > 0).any(axis=0) | (np.arange(4) == 0))
        counts = counts[:, types]
        ms, ns = (np.stack(x, axis=1)[:, types] for x in _sizes(g))
        col = {k: v[:, None] for k, v in c.items()}
        hit = (hit_a[:, None], hit_b[:, None])
        cost = tile_cost(p, chip, col, ms, ns, g["kc"][:, None], *hit, res[:, None], active[:, None])
        busy = cost["busy"]
        work = (counts * busy).sum(axis=1)
        cheapest = np.where(counts > 0, busy, np.inf).min(axis=1)
        fill0 = cost["fill"][:, 0]
        if res.any():
            r = np.flatnonzero(res)
            loaded = tile_cost(
                p,
                chip,
                {k: v[r] for k, v in col.items()},
                ms[r],
                ns[r],
                g["kc"][r, None],
                hit[0][r],
                hit[1][r],
                False,
                active[r, None],
            )["busy"]
            extra = np.where(counts[r] > 0, loaded - busy[r], np.inf).min(axis=1)
            work[r] += must_load[r] * np.maximum(np.where(np.isfinite(extra), extra, 0.0), 0.0)
        # cores that can share the work: every core in full rounds; in a partial last round only the tiles
        # there, each re-cut into at most cores // last pieces (tail_split) of at least 16 rows/columns
        last, pieces = _tail(g, cores)
        if tuple(schedules.get("tail_split", (0, 1))) == (0,):
            pieces = np.ones_like(pieces)
        sharing = np.where(last > 0, np.minimum(cores, (g["tiles"] - last) + last * pieces), cores)
        if block:
            sharing = active
        make = np.maximum(work / sharing, (g["tiles"] // cores) * cheapest)
        return (make + fill0) * 1e6 + _head_us(chip, active) + _reduction_us(p, chip, c)

    def estimate(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        """The estimate record (common.record("ascend")) plus tail-split sub-block sizes, one row per candidate.

        Work is shared where the physics allows: each distinct schedule is simulated once per process (its core
        work is kept in a table per batch and core count, found by a packed integer code of the tile grid, its
        edges and the schedule, so every shape of a sweep with that grid shares it; its L2 hit rates in a table
        per problem and L2 size; a search or a sweep pays no Python per schedule once it is known), each
        distinct (tiling, hit rates, re-cut) gets its tile costs once, only for the work columns its schedules
        use (a tile after a B-panel reuse costs what a tile does unless its B panel is resident), and a core's
        time is its work vector (tiles per type, schedule.core_work) dotted with those costs. The result is
        estimate_reference's, bit for bit.
        """
        n = len(c["base_m"])
        g = _geometry(p, c)
        cores = chip.cores
        cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
        tm, tn, kc = (g[k].astype(np.int64) for k in ("tm", "tn", "kc"))
        splits = np.asarray(g["splits"]).astype(np.int64)
        tiles = g["tiles"]
        block = c["core_split"] == 1
        last, pieces = _tail(g, cores)
        pieces = np.where((c["tail_split"] == 1) & (last > 0) & ~block, np.maximum(pieces, 1), 1).astype(
            np.int64
        )
        sched = tuple(np.where(block, 0, c[k]) for k in ("swizzle_offset", "swizzle_direction", "serpentine"))
        gm, gn = g["gm"].astype(np.int64), g["gn"].astype(np.int64)
        # a schedule's core work depends on the problem only through its tile grid and edges (_new_work)
        edges = (p.M % tm != 0, p.N % tn != 0)
        code = pack_codes([gm, gn, splits, *edges, *sched, pieces, block], _SCHED_BITS)
        walk_code = pack_codes([tm, tn, splits, *sched, c["base_k"]], _HIT_BITS)
        if n == 0 or code is None or walk_code is None:  # sizes beyond the tables' codes (never feasible)
            return self.estimate_reference(p, chip, c)
        scodes, gi, _ = unique_inverse(code)
        works = _work_table(p, cores)
        sid = works.ids(scodes, lambda missing: _new_work(p, cores, missing))
        a_panel, b_panel = tm * kc * p.in_bytes, tn * kc * p.in_bytes
        hit_a, hit_b = 1.0 - 1.0 / gn, 1.0 - 1.0 / gm
        walk = ~first_touch_only(tiles, cores, (gm * a_panel + gn * b_panel) * splits * p.batch, cap) & ~block
        um, un, bm_t, bn_t = works.blocks[sid][gi].T
        if block.any():
            fits = gm * a_panel + un * b_panel <= cap
            hit_a = np.where(block, 1.0 - np.where(fits, 1.0, bn_t) / gn, hit_a)
            hit_b = np.where(block, 1.0 - 1.0 / gm, hit_b)
        hit_key = np.zeros(n, dtype=np.int64)
        if walk.any():
            rows = np.flatnonzero(walk)
            wcodes, wi, _ = unique_inverse(walk_code[rows])
            hits = _hit_table(p, cores, cap)
            hid = hits.ids(wcodes, lambda missing: _new_hits(p, cores, cap, missing))
            rate = hits.values[hid[wi.ravel()]]
            hit_a[rows], hit_b[rows] = rate[:, 0], rate[:, 1]
            hit_key[rows] = 1 + hid[wi.ravel()]
        # tile costs once per distinct (tiling, hit rates, pieces): the schedule reaches the tile only there
        tiling = [c[k] for k in KNOBS if k not in SCHEDULE_KNOBS and k in c]
        ufirst, ui = group_rows_any([*tiling, hit_key, pieces, block])
        # groups numbered in the order of their representative rows: the gathers at them then run forward
        by_row = ufirst.argsort()
        rank = np.empty(by_row.size, dtype=np.int64)
        rank[by_row] = np.arange(by_row.size)
        ufirst, ui = ufirst[by_row], rank[ui]
        total = works.total[sid]
        used = works.used[sid]
        present = (total[:, :-1] > 0).any(axis=0)
        cols = np.flatnonzero(present | (np.arange(WORK_COLUMNS - 1) == 0))  # type 0 gives the fill
        active = np.where(block, np.minimum(um * un * splits, cores), np.minimum(cores, tiles))
        # the work columns each distinct tile-cost row needs: those its schedules use (and type 0, the fill)
        bits = (total[:, :-1] > 0) @ (1 << np.arange(WORK_COLUMNS - 1))
        need = np.zeros(ufirst.size, dtype=np.int64)
        np.bitwise_or.at(need, ui, bits[gi])
        cost, order = _tile_costs(
            p,
            chip,
            c,
            ufirst,
            g,
            need | 1,
            pieces[ufirst],
            hit_a[ufirst],
            hit_b[ufirst],
            active[ufirst],
            cores,
            cols,
        )
        if order is not None:  # the cost rows come in `order`: renumber the rows' references to them
            rank = np.empty(order.size, dtype=np.int64)
            rank[order] = np.arange(order.size)
            ui = rank[ui]
        out = _per_core_table(cost, ui, gi, works, sid, cols)
        fill = cost["fill0"][ui] + np.minimum(cost["drain0"][ui], out["drain"])  # _fill's
        return _record(p, chip, c, g, out, fill, used[gi], pieces, block, bm_t, bn_t)

    def estimate_reference(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        """estimate(), formulated plainly: the reference the fast path is tested against (bit for bit).

        Work is shared where the physics allows: each distinct schedule is simulated once (cached), each distinct
        (tiling, hit rates, re-cut) gets its tile costs once, and a core's time is its work vector (tiles per
        type, schedule.core_work) dotted with those costs.
        """
        n = len(c["base_m"])
        g = _geometry(p, c)
        cores = chip.cores
        cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
        tm, tn, kc = (g[k].astype(np.int64) for k in ("tm", "tn", "kc"))
        splits = np.asarray(g["splits"]).astype(np.int64)
        tiles = g["tiles"]
        # AscendC's block split (core_split=block): each core one contiguous block of tiles; the walk knobs and
        # the tail re-cut do not apply to it
        block = c["core_split"] == 1
        # tail re-split: a partial last round's tiles are cut into `pieces` along their longer side
        last, pieces = _tail(g, cores)
        pieces = np.where((c["tail_split"] == 1) & (last > 0) & ~block, np.maximum(pieces, 1), 1).astype(
            np.int64
        )
        sched = tuple(np.where(block, 0, c[k]) for k in ("swizzle_offset", "swizzle_direction", "serpentine"))
        first, gi = group_rows([tm, tn, splits, *sched, pieces, block])
        gm, gn = g["gm"].astype(np.int64), g["gn"].astype(np.int64)
        setting = np.stack([*sched, pieces], axis=1)  # (offset, direction, serpentine, pieces) per row
        work = [None] * first.size
        for rows in _same(first, [gm, gn, splits, tm, tn]):  # schedules of one tile grid: one vectorised pass
            i = first[rows[0]]
            edges = (bool(p.M % tm[i]), bool(p.N % tn[i]))
            grid = (int(gm[i]), int(gn[i]), int(splits[i]), p.batch, cores, *edges)
            walked = [j for j in rows if not block[first[j]]]
            for j, w in zip(walked, core_work_many(*grid, setting[first[walked]]), strict=True):
                work[j] = w
            for j in rows:
                if block[first[j]]:
                    work[j] = block_work(*grid)
        used = np.array([w.cores_used for w in work], dtype=np.float64)
        present = np.logical_or.reduce([w.total[:-1] > 0 for w in work])
        cols = np.flatnonzero(present | (np.arange(WORK_COLUMNS - 1) == 0))  # type 0 gives the fill
        # L2 hits: in closed form where each panel's first touch is its only miss, else walked per schedule and
        # K slice (the panel bytes)
        a_panel, b_panel = tm * kc * p.in_bytes, tn * kc * p.in_bytes
        hit_a, hit_b = 1.0 - 1.0 / gn, 1.0 - 1.0 / gm
        walk = ~first_touch_only(tiles, cores, (gm * a_panel + gn * b_panel) * splits * p.batch, cap) & ~block
        um, un, bm_t, bn_t = block_grid(gm, gn, splits, cores)
        if block.any():
            # block split: every core works through its block in step with the others, so a B panel is loaded
            # from HBM once for all the block rows (first touch); an A panel row is revisited at each of the
            # block's column steps and misses each time unless all of A's panels (and the B panels in use) stay
            # in L2 between the visits
            fits = gm * a_panel + un * b_panel <= cap
            hit_a = np.where(block, 1.0 - np.where(fits, 1.0, bn_t) / gn, hit_a)
            hit_b = np.where(block, 1.0 - 1.0 / gm, hit_b)
        hit_key = np.zeros(n, dtype=np.int64)
        if walk.any():
            rows = np.flatnonzero(walk)
            wfirst, wi = group_rows([gi[rows], kc[rows]])
            walked = np.zeros((wfirst.size, 2))
            at = rows[wfirst]
            for ws in _same(at, [gm, gn, splits, a_panel, b_panel]):
                i = at[ws[0]]
                grid = (int(gm[i]), int(gn[i]), int(splits[i]), p.batch, cores)
                panels = (float(a_panel[i]), float(b_panel[i]), float(cap))
                walked[ws] = panel_hits_many(*grid, setting[at[ws], :3], *panels)
            hit_a[rows], hit_b[rows] = walked[wi, 0], walked[wi, 1]
            hit_key[rows] = 1 + wi
        # tile costs once per distinct (tiling, hit rates, pieces): the schedule reaches the tile only there
        tiling = [c[k] for k in KNOBS if k not in SCHEDULE_KNOBS and k in c]
        ufirst, ui = group_rows([*tiling, hit_key, pieces, block])
        cu = {k: v[ufirst] for k, v in c.items()}
        gu = {k: v[ufirst] if np.ndim(v) else v for k, v in g.items()}
        ms, ns = (np.stack(x, axis=1) for x in _sizes(gu))  # (U, 4)
        pu = pieces[ufirst][:, None]
        along_m = (gu["tm"] >= gu["tn"])[:, None]
        sub_m = np.where(along_m, np.minimum(round_up(ceil_div(ms, pu), 16), ms), ms)
        sub_n = np.where(along_m, ns, np.minimum(round_up(ceil_div(ns, pu), 16), ns))
        kind, q = cols // 4, cols % 4  # 0: tile, 1: tile after a B-panel reuse, 2: re-cut sub-tile
        # cores loading at once (sharing HBM and L2): the walk fills every core it can; the block split its blocks
        active = np.where(block, np.minimum(um * un * splits, cores), np.minimum(cores, tiles))
        cost = tile_cost(
            p,
            chip,
            {k: v[:, None] for k, v in cu.items()},
            np.where(kind == 2, sub_m[:, q], ms[:, q]),
            np.where(kind == 2, sub_n[:, q], ns[:, q]),
            gu["kc"][:, None],
            hit_a[ufirst, None],
            hit_b[ufirst, None],
            (cu["weight_resident"] == 1)[:, None] & (kind == 1),
            np.where(kind == 2, cores, active[ufirst][:, None]),
        )
        # per row: the busiest core of its schedule, plus the pipeline fill every working core pays once
        out = _per_core(cost, ui, gi, work, cols)
        fill = _fill(cost, ui, out)
        return _record(p, chip, c, g, out, fill, used[gi], pieces, block, bm_t, bn_t)


def _fill(cost: dict, ui: np.ndarray, out: dict) -> np.ndarray:
    """What every working core pays once besides its tiles: the first chunk's load (the interior tile's), and with
    preload the bubble its last tile could not hide (no successor): the interior tile's, or less when the busiest
    core's tiles hid less in all (a core with one small edge tile), so that preload never adds time."""
    return cost["fill"][ui, 0] + np.minimum(cost["drain"][ui, 0], out["drain"])


def _record(
    p: Matmul, chip, c: dict, g: dict, out: dict, fill, cores_used, pieces, block, bm_t, bn_t
) -> dict:
    """The estimate record from the busiest core's time and pipes (`out`, _per_core), the fill, the cores used,
    the tail re-cut and the block split's block shape, one row per candidate."""
    n = len(c["base_m"])
    tiles = g["tiles"]
    tm, tn = (np.asarray(g[k]).astype(np.int64) for k in ("tm", "tn"))
    cores = chip.cores
    make = out["busy"] + fill
    mean = (out["busy_sum"] + fill * cores_used) / cores
    head = _head_us(chip, cores_used)
    red = _reduction_us(p, chip, c)
    vs = _vector_side(p, chip, c, g, cores_used, make)
    head = head + vs["head_us"]
    time_us = (make + vs["extra"]) * 1e6 + head + red
    pipes_us = {p_: np.zeros(n) for p_ in pipes("ascend")}
    for k in ("mac", "scalar", "mte1", "fixpipe"):
        pipes_us[k] = out[k] * 1e6
    pipes_us["mte2"] = out["mte2_bw"] * 1e6  # busy moving bytes; waiting on latency is not busy
    split = c["split_k"] > 1
    pipes_us["vec"] = (
        np.where(split, red, 0.0) + vs["vec"] * 1e6
    )  # the cast / dequant runs on the vector cores
    pipes_us["mte3"] = pipes_us["mte3"] + vs["mte3"] * 1e6  # the vector cores' writes (UB -> GM)
    named = ("mac", "mte2", "mte1", "fixpipe", "scalar") + (("vec", "mte3") if p.quant or p.b_int4 else ())
    bound = classify_bound({k: pipes_us[k] for k in named}, (make + vs["extra"]) * 1e6)
    mn = float(p.batch * p.M * p.N)
    out_hbm = mn * p.out_bytes + np.where(split, mn * 4 * 3, 0.0)  # zero + atomics (r+w) of fp32 partials
    l2_read = out["l2_read"]
    hit = 1.0 - out["hbm_read"] / np.maximum(l2_read, 1)
    need_sub = pieces >= 2
    sub_tm = np.where(g["tm"] >= g["tn"], round_up(ceil_div(g["tm"], pieces), 16), g["tm"])
    sub_tn = np.where(g["tm"] >= g["tn"], g["tn"], round_up(ceil_div(g["tn"], pieces), 16))
    return {
        "time_us": time_us,
        "bound": bound,
        **{f"{k}_us": v for k, v in pipes_us.items()},
        # the busiest cube core from its first load to its last write (its fill included), without the launch
        # head and split-K's separate zero/cast pass: what msprof's aic_time reports for the AIC side
        "core_us": make * 1e6,
        # a quantised matmul's vector side beyond the cube's makespan (epilogue / int4 widening, hand-offs)
        "quant_us": vs["extra"] * 1e6,
        "cores_used": cores_used.astype(np.int64),
        "waves": ceil_div(tiles, cores).astype(np.int64),
        "balance": mean / np.maximum(make, 1e-30),
        "l2_hit_rate": hit,
        "hbm_bytes": out["hbm_read"] + out_hbm + vs["hbm"],
        "l2_bytes": l2_read + out_hbm,
        "roofline_us": roofline_us(
            p.flops, _compulsory_hbm(p, chip), chip.peak_tflops(p.dtype) * 1e12, chip["hbm_gbps"] * 1e9, head
        ),
        "tiles": tiles.astype(np.int64),
        "tail_sub_m": np.where(need_sub, sub_tm, 0).astype(np.int64),
        "tail_sub_n": np.where(need_sub, sub_tn, 0).astype(np.int64),
        "tail_sub_count": np.where(need_sub, pieces, 0).astype(np.int64),
        # the block split's per-core share (AscendC singleCoreM/N); 0 for the walk
        "single_core_m": np.where(block, np.minimum(bm_t * tm, p.M), 0).astype(np.int64),
        "single_core_n": np.where(block, np.minimum(bn_t * tn, p.N), 0).astype(np.int64),
    }


# ---------------------------------------------------------------- the fast estimate's tables and tile costs
# Packed codes (field widths in bits, most significant first) of a schedule: tiles along M (gm) and N (gn), splits,
# partial last tile row and column (edges), swizzle offset, direction, serpentine, tail pieces, block split (with
# the batch and the cores, all a schedule's core work depends on: its table is shared by every problem of a batch
# and a core count, e.g. the shapes of a sweep); and of an L2 walk: tm, tn, splits, offset, direction,
# serpentine, base_k (with the problem, base_k and splits give the K slice; one table per problem and L2). A row
# whose values do not fit is scored by estimate_reference (no feasible tiling comes near these limits).
_SCHED_BITS = (18, 18, 6, 1, 1, 6, 1, 1, 8, 1)  # 61 bits: grids up to 2^18 tiles a side (M = 2^22 at base 16)
_HIT_BITS = (16, 16, 6, 6, 1, 1, 13)
_TABLES: dict = {}
_TABLES_MAX = 16  # hit-rate tables (problems) kept before all start over
_WORK_TABLES: dict = {}
# work tables (batch and core counts) kept before all start over: apart from the hit-rate tables, so that a
# sweep's stream of new problems does not start the shared work table over
_WORK_TABLES_MAX = 8
_SMALL = 2048  # tile-cost rows scored in one pass; larger tables are split by the work columns they need
_BUCKET_MIN = 256  # rows a work-column pattern needs for a pass of its own


class _WorkTable(CodeTable):
    """CoreWork of schedules (schedule.core_work_many / block_work) of one batch and core count, by id: cores
    used, the work-vector totals, the padded work vectors grouped by their count (depth), and the block split's
    shape of the schedule's grid (schedule.block_grid: um, un, bm, bn)."""

    def __init__(self):
        super().__init__()
        # each column grows in a GrowingRows buffer; the attributes are views of the rows so far
        self._grow = {
            "used": GrowingRows(),
            "total": GrowingRows((WORK_COLUMNS,)),
            "depth": GrowingRows((), np.int64),
            "slot": GrowingRows((), np.int64),
            "blocks": GrowingRows((4,), np.int64),
        }
        for name, rows in self._grow.items():
            setattr(self, name, rows.filled)
        self._bucket_rows: dict[int, GrowingRows] = {}
        self.buckets: dict[int, np.ndarray] = {}  # depth -> (schedules, depth, WORK_COLUMNS) float32

    def _add(self, new: tuple) -> None:
        works, blocks = new
        depth = np.array([len(w.padded) for w in works], dtype=np.int64)
        slot = np.empty(len(works), dtype=np.int64)
        for d in np.unique(depth).tolist():
            new = np.flatnonzero(depth == d)
            rows = self._bucket_rows.setdefault(d, GrowingRows((d, WORK_COLUMNS), np.float32))
            slot[new] = rows.size + np.arange(new.size)
            self.buckets[d] = rows.append(np.stack([works[i].padded for i in new.tolist()]))
        added = {
            "used": [float(w.cores_used) for w in works],
            "total": np.stack([w.total for w in works]),
            "depth": depth,
            "slot": slot,
            "blocks": blocks,
        }
        for name, rows in added.items():
            setattr(self, name, self._grow[name].append(rows))


on_clear(_TABLES.clear)  # schedule.clear_caches() starts the tables over too
on_clear(_WORK_TABLES.clear)


def _table(store: dict, most: int, key: tuple, kind):
    table = store.get(key)
    if table is None:
        if len(store) >= most:
            store.clear()
        table = store[key] = kind()
    return table


def _work_table(p: Matmul, cores: int) -> _WorkTable:
    return _table(_WORK_TABLES, _WORK_TABLES_MAX, (p.batch, cores), _WorkTable)


def _hit_table(p: Matmul, cores: int, cap: float) -> PairTable:
    key = (p.M, p.N, p.K, p.batch, p.in_bytes, cores, float(cap))
    return _table(_TABLES, _TABLES_MAX, key, PairTable)


def _new_work(p: Matmul, cores: int, codes: np.ndarray) -> tuple[list, np.ndarray]:
    """The CoreWork of each schedule code (estimate_reference's simulation: one pass per tile grid), and the
    block split's shape of its grid (um, un, bm, bn). Reads only the codes, the batch and the cores."""
    fields = unpack_codes(codes, _SCHED_BITS)
    blocks = np.stack(block_grid(fields[0], fields[1], fields[2], cores), axis=1)
    gm, gn, splits, edge_m, edge_n, off, dirn, snake, pieces, block = (f.tolist() for f in fields)
    works: list = [None] * len(gm)
    grids: dict = {}
    for i, key in enumerate(zip(gm, gn, splits, edge_m, edge_n, strict=True)):
        grids.setdefault(key, []).append(i)
    for (a, b, s, em, en), idx in grids.items():
        grid = (a, b, s, p.batch, cores, bool(em), bool(en))
        walked = [i for i in idx if not block[i]]
        if walked:
            setting = np.array([(off[i], dirn[i], snake[i], pieces[i]) for i in walked], dtype=np.int64)
            for i, w in zip(walked, core_work_many(*grid, setting), strict=True):
                works[i] = w
        for i in idx:
            if block[i]:
                works[i] = block_work(*grid)
    return works, blocks


def _new_hits(p: Matmul, cores: int, cap: float, codes: np.ndarray) -> np.ndarray:
    """L2 hit rates (A, B) of each walk code (schedule.panel_hits_many, one pass per grid and panel size)."""
    tm, tn, splits, off, dirn, snake, bk = (f.tolist() for f in unpack_codes(codes, _HIT_BITS))
    out = np.empty((len(tm), 2))
    groups: dict = {}
    for i in range(len(tm)):
        steps = -(-p.K // bk[i])
        kc = min(-(-steps // splits[i]) * bk[i], p.K)
        grid = (-(-p.M // tm[i]), -(-p.N // tn[i]), splits[i], p.batch, cores)
        panels = (float(tm[i] * kc * p.in_bytes), float(tn[i] * kc * p.in_bytes), float(cap))
        groups.setdefault((grid, panels), []).append(i)
    for (grid, panels), idx in groups.items():
        setting = np.array([(off[i], dirn[i], snake[i]) for i in idx], dtype=np.int64)
        out[idx] = panel_hits_many(*grid, setting, *panels)
    return out


def _buckets(need: np.ndarray) -> list[tuple[np.ndarray | None, np.ndarray]]:
    """Passes over the tile-cost rows: (rows or None for all, work columns), so that a row is costed on the
    columns it needs (bit j of `need`) and a few more: one pass for a small table, else one per pattern of
    columns shared by enough rows, and one for the rest on the union of their columns."""

    def columns(bits: int) -> np.ndarray:
        return np.flatnonzero((bits >> np.arange(WORK_COLUMNS - 1)) & 1)

    if need.size <= _SMALL:
        return [(None, columns(int(np.bitwise_or.reduce(need))))]
    counts = np.bincount(need, minlength=1 << (WORK_COLUMNS - 1))
    pats = np.flatnonzero(counts)
    if pats.size == 1:
        return [(None, columns(int(pats[0])))]
    order = need.astype(np.uint16).argsort(kind="stable")  # a radix sort: rows grouped by pattern
    groups = np.split(order, np.cumsum(counts[pats])[:-1])
    out, rest, rest_bits = [], [], 0
    for pat, rows in zip(pats.tolist(), groups, strict=True):
        if rows.size >= _BUCKET_MIN:
            out.append((rows, columns(pat)))
        else:
            rest.append(rows)
            rest_bits |= pat
    if rest:
        out.append((np.concatenate(rest), columns(rest_bits)))
    return out


_PER_KEYS = ("mac", "scalar", "mte1", "mte2_bw", "fixpipe", "drain")  # _per_core's pipes, in its order
_SUM_KEYS = ("l2_read", "hbm_read")
# the knobs tile_cost reads (the schedule knobs never reach a tile)
_TILE_KNOBS = tuple(k for k in KNOBS if k not in SCHEDULE_KNOBS)


def _tile_costs(p: Matmul, chip, c: dict, at_c, g: dict, need, pieces, hit_a, hit_b, active, cores, cols):
    """tile_cost of the work columns `cols` (of schedule.WORK_COLUMNS but the last: 4 tile types, the same after a
    B-panel reuse, 4 re-cut sub-tile types) of the distinct tile-cost rows (row u is candidate `at_c[u]` of `c`
    and of the geometry `g`; the other arguments are per row u), in the layout _per_core_table reads:
    ({"busy": (U, k) float64, "per": (U, 6, k) float32 of _PER_KEYS, "sums": (U, 2, k) float32 of _SUM_KEYS,
    "fill0", "drain0": (U,) the type-0 column}, order), the rows in `order` (None: as given). Only the columns a
    row needs (bit j of `need`) are computed; the others are 0 or a copy (their work is 0 in every schedule of
    the row).

    A tile after a B-panel reuse costs what the tile does unless its B panel is resident (weight_resident), so
    such rows need the tile's column instead. The arguments of tile_cost are estimate_reference's, element for
    element (the tile sizes as float64, as its where() makes them), and each value is cast to float32 as
    _per_core casts it, so the costs are the same bit for bit."""
    kind = np.arange(WORK_COLUMNS - 1) // 4  # 0: tile, 1: tile after a B-panel reuse, 2: re-cut sub-tile
    quad = np.arange(WORK_COLUMNS - 1) % 4  # the tile type: 0 interior, 1 last column, 2 last row, 3 corner
    wr = c["weight_resident"][at_c] == 1
    need = np.where(wr, need, (need & 0xF0F) | ((need >> 4) & 0xF))
    passes = _buckets(need)
    order = None if len(passes) == 1 else np.concatenate([r for r, _ in passes])
    if order is not None:  # every per-row input in pass order, once: each pass is then a contiguous slice
        at_c, wr, pieces, hit_a, hit_b, active = (x[order] for x in (at_c, wr, pieces, hit_a, hit_b, active))
    u, k = at_c.size, cols.size
    # tile_cost runs on (columns, rows) arrays, the per-row values as (rows,) broadcast along the columns: numpy's
    # inner loop then runs along the rows (long) rather than along the few columns (several times faster)
    knobs = {key: c[key][at_c] for key in _TILE_KNOBS if key in c}
    tm, tn, m_last, n_last, kc = (np.asarray(g[key])[at_c] for key in ("tm", "tn", "m_last", "n_last", "kc"))
    ms = np.stack([tm, tm, m_last, m_last])  # (4, U): _sizes
    ns = np.stack([tn, n_last, tn, n_last])
    along_m = tm >= tn
    busy = np.zeros((u, k))
    per = np.zeros((u, len(_PER_KEYS), k), dtype=np.float32)
    sums = np.zeros((u, len(_SUM_KEYS), k), dtype=np.float32)
    fill0, drain0 = np.empty(u), np.empty(u)
    lo = 0
    for rows, bcols in passes:
        hi = lo + (u if rows is None else rows.size)
        s = slice(lo, hi)
        kd, q = kind[bcols], quad[bcols]
        mt, nt = ms[q, s].astype(np.float64), ns[q, s].astype(np.float64)  # (k, rows)
        sub = np.flatnonzero(kd == 2)
        if sub.size:  # estimate_reference's sub_m / sub_n, for the re-cut columns
            pu, am = pieces[s], along_m[s]
            x, y = ms[q[sub], s], ns[q[sub], s]
            mt[sub] = np.where(am, np.minimum(round_up(ceil_div(x, pu), 16), x), x)
            nt[sub] = np.where(am, y, np.minimum(round_up(ceil_div(y, pu), 16), y))
        cost = tile_cost(
            p,
            chip,
            {key: v[s] for key, v in knobs.items()},
            mt,
            nt,
            kc[s],
            hit_a[s],
            hit_b[s],
            wr[s] & (kd == 1)[:, None],
            np.where((kd == 2)[:, None], cores, active[s]),
        )
        cost = {key: v.T for key, v in cost.items()}  # (rows, k), the layout of the tables below
        # each output column from the pass's: itself, else (a reuse column) the tile's, else none (0)
        pos = np.full(WORK_COLUMNS - 1, bcols.size)
        pos[bcols] = np.arange(bcols.size)
        src = pos[cols]
        reuse = (src == bcols.size) & (kind[cols] == 1)
        src[reuse] = pos[cols[reuse] - 4]
        have = src < bcols.size
        dst = None if have.all() else np.flatnonzero(have)
        src = src if dst is None else src[dst]
        direct = dst is None and src.size == bcols.size and bool((src == np.arange(bcols.size)).all())
        if direct:
            busy[s] = cost["busy"]
            for j, key in enumerate(_PER_KEYS):
                per[s, j] = cost[key]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j] = cost[key]
        elif dst is None:
            busy[s] = cost["busy"][:, src]
            for j, key in enumerate(_PER_KEYS):
                per[s, j] = cost[key][:, src]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j] = cost[key][:, src]
        else:
            busy[s, dst] = cost["busy"][:, src]
            for j, key in enumerate(_PER_KEYS):
                per[s, j, dst] = cost[key][:, src]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j, dst] = cost[key][:, src]
        p0 = pos[0]  # type 0 (the fill) is computed in every pass (need | 1), and is cols[0]
        fill0[s] = cost["fill"][:, p0]
        drain0[s] = cost["drain"][:, p0]
        lo = hi
    return {"busy": busy, "per": per, "sums": sums, "fill0": fill0, "drain0": drain0}, order


def _per_core_table(cost: dict, ui: np.ndarray, gi: np.ndarray, works: _WorkTable, sid, cols) -> dict:
    """_per_core with the schedules' work from a _WorkTable (`sid`: the table id of each distinct schedule) and
    the tile costs in _tile_costs' layout: the same arrays in the same operations, so the same results bit for
    bit."""
    n = ui.size
    total = works.total[sid][:, cols]
    depth = works.depth[sid]
    slot = works.slot[sid]
    at = np.empty((n, cols.size), dtype=np.float32)
    busy = np.take(cost["busy"], ui, axis=0)
    busy32 = busy.astype(np.float32)
    row_depth = depth[gi]
    for d in np.unique(depth).tolist():
        groups = np.flatnonzero(depth == d)
        local = np.zeros(sid.size, dtype=np.int64)
        local[groups] = np.arange(groups.size)
        rows = np.flatnonzero(row_depth == d) if len(groups) < sid.size else np.arange(n)
        if d == 1:  # one core can finish last: it is the busiest (argmax of one is 0), no product needed
            at[rows] = np.take(works.buckets[d][slot[groups], 0][:, cols], local[gi[rows]], axis=0)
            continue
        w = np.take(works.buckets[d][slot[groups]][:, :, cols], local[gi[rows]], axis=0)  # (rows, d, k)
        crit = np.matmul(w, busy32[rows][:, :, None])[:, :, 0].argmax(axis=1)
        at[rows] = w[np.arange(rows.size), crit]
    out = {"busy": np.einsum("rk,rk->r", busy, at)}
    per = np.take(cost["per"], ui, axis=0)
    out.update(zip(_PER_KEYS, np.einsum("rpk,rk->pr", per, at).astype(np.float64), strict=True))
    tot = np.take(total.astype(np.float32), gi, axis=0)
    out["busy_sum"] = np.einsum("rk,rk->r", busy, tot)
    sums = np.take(cost["sums"], ui, axis=0)
    out["l2_read"], out["hbm_read"] = np.einsum("rpk,rk->pr", sums, tot).astype(np.float64)
    return out
