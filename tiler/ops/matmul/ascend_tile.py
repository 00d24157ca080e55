"""Matmul on Ascend, one tile's physics: its geometry, transfers and per-pipe times (MTE2, MTE1, cube, fixpipe,
scalar), and a core's time as its work vector dotted with the tile costs (docs/model.md gives every equation).

A core's unit of work is a *tile* of `tm x tn` outputs (tm = base_m*step_m, tn = base_n*step_n) over one K slice
(K / split_k). Inside a tile the core walks L0 blocks of base_m x base_n, streaming K in L1 chunks of
base_k*step_ka (A) and base_k*step_kb (B) through MTE2 (GM->L1), MTE1 (L1->L0A/L0B), the cube (MMAD) and the
fixpipe (L0C->GM)."""

from __future__ import annotations

import numpy as np

from ...model.common import (
    ceil_div,
    group_rows,
    mixed_bandwidth,
    round_up,
    segment_efficiency,
    stride_efficiency,
)
from .ascend_epilogue import (
    _final_fits,
    _fix_elem_bytes,
    _out_fits,
    _write_share,
    dequant_site,
    has_fixpipe,
    warm_inputs,
)
from .problem import Matmul


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
    eff_a = _scaled(_stride_scalar(stride_a, burst, mis), segment_efficiency(seg_a * b))
    if p.b_nz:
        return eff_a, np.ones(np.shape(seg_b))
    return eff_a, _scaled(_stride_scalar(stride_b, burst, mis), segment_efficiency(seg_b * b))


def _scaled(s: float, x):
    """s * x, skipping the pass over x when s is 1 (1.0 * x is x, bit for bit)."""
    return x if s == 1.0 else s * x


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


def _b_bytes(p: Matmul, nt, k):
    """Bytes of _b_elems: ND's nt * (k * bytes), the per-row factor first (whole numbers: the same value as
    (nt * k) * bytes, one (columns, rows) product fewer)."""
    if p.b_nz:
        return _b_elems(p, nt, k) * p.in_bytes
    return nt * (k * p.in_bytes)


def _hit_all(first, total, hit):
    """L2 hit rate of all of an operand's loads: its first pass `first` bytes at `hit`, the re-streams of `total`
    all hits; 1 where it loads nothing. Where every tile loads (the usual case) the where() and maximum() that
    guard an empty load are no-ops and are skipped (the same values)."""
    if np.min(total) >= 1:
        return (first * hit + (total - first)) / total
    return np.where(total > 0, (first * hit + (total - first)) / np.maximum(total, 1), 1.0)


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


def _mte2(
    p: Matmul, chip, c: dict, r: dict, site: str, mt, nt, kc, steps: dict, hit_a, hit_b, b_resident, active
) -> dict:
    """MTE2, GM -> L1: each panel's first pass comes from L2 (its hit rate) or HBM, and its re-streams are L2 hits,
    at the core's share of both bandwidths and the stride and row-segment efficiency of the layout; each transfer
    waits one GM latency, which `l1_stages` buffers overlap. The load bytes, rates and transfer counts that the
    other stages and the pipeline's first chunk read too."""
    b = p.in_bytes
    nbm, nbn, ka, kb = steps["nbm"], steps["nbn"], steps["ka"], steps["kb"]
    res_a = ka >= kc  # A's whole K slice sits in L1: loaded once per tile
    res_b = (kb >= kc) | (c["weight_resident"] == 1)
    pass_a, pass_b = np.where(res_a, 1, nbn), np.where(res_b, 1, nbm)  # passes over the K slice
    # products of whole numbers (sizes, counts, bytes) are exact in float64 far below 2**53, so their order is free:
    # the per-row factors are multiplied first, on (rows,) rather than (columns, rows)
    a_first = mt * (kc * b)
    a_bytes = a_first * pass_a
    b_first = np.where(b_resident, 0.0, _b_bytes(p, nt, kc))
    b_bytes = b_first * pass_b
    hbm_share, l2_share = r["hbm"] / active, r["l2"] / active
    # stride and row-segment efficiency along the axis each operand's stored rows run (the layout)
    eff_a, eff_b = _transfer_efficiency(p, chip, c, mt, nt, ka, kb)
    ml = c["multi_load"] == 1
    hit_a_all, hit_b_all = _hit_all(a_first, a_bytes, hit_a), _hit_all(b_first, b_bytes, hit_b)
    bw_a = np.minimum(r["core_gm"], mixed_bandwidth(hit_a_all, l2_share, hbm_share)) * eff_a
    bw_b = np.minimum(r["core_gm"], mixed_bandwidth(hit_b_all, l2_share, hbm_share)) * eff_b
    t_a, t_b = a_bytes / bw_a, b_bytes / bw_b
    # the tile's per-channel scales (8 B each) GM -> L1 -> fixpipe buffer
    if site == "fixpipe" and p.channel_scale:
        t_b = t_b + np.where(c["split_k"] > 1, 0.0, nt * 8.0) / r["core_gm"]
    # transfers: MDL (multi_load) moves a whole L1 chunk at once; Norm one base block per transfer
    bk = c["base_k"]
    chunks_a = ceil_div(kc, ka) * pass_a
    chunks_b = np.where(b_resident, 0, ceil_div(kc, kb) * pass_b)
    per_chunk_a = np.where(ml, 1, nbm * ceil_div(ka, bk))
    per_chunk_b = np.where(ml, 1, nbn * ceil_div(kb, bk))
    xfers = chunks_a * per_chunk_a + chunks_b * per_chunk_b
    # Each transfer waits one GM latency before data flows; with `stages` buffers that many transfers overlap
    # their latencies (the MTE2 queue issues ahead), so latency is exposed only when transfers are small.
    t_ab = t_a + t_b
    t_mte2 = np.maximum(t_ab, (xfers * r["lat"] + t_a + t_b) / c["l1_stages"])
    return {
        "a_first": a_first,
        "b_first": b_first,
        "a_bytes": a_bytes,
        "b_bytes": b_bytes,
        "bw_a": bw_a,
        "bw_b": bw_b,
        "hbm_share": hbm_share,
        "chunks_a": chunks_a,
        "chunks_b": chunks_b,
        "per_chunk_a": per_chunk_a,
        "per_chunk_b": per_chunk_b,
        "xfers": xfers,
        "t_ab": t_ab,
        "t_mte2": t_mte2,
    }


def _cube(p: Matmul, chip, c: dict, r: dict, mt, nt, kc, steps: dict) -> dict:
    """MTE1 (L1 -> L0A/L0B, padded to 16 x C0 fractals; one L0 operand stays put across the inner loop when K fits
    one step) and the cube (one fractal per mac_cycle, edge blocks padded to 16; tiny blocks pay a PIPE_M barrier
    per MMAD): their times, and the padded sizes the pipeline's per-step times read."""
    f, b, k0 = r["f"], p.in_bytes, _k0(p)
    bm, bn = c["base_m"], c["base_n"]
    nbm, nbn, nk = steps["nbm"], steps["nbn"], steps["nk"]
    m16, n16 = ceil_div(mt, 16), ceil_div(nt, 16)  # fractal rows and columns
    mt16, nt16, kcp = m16 * 16, n16 * 16, round_up(kc, k0)
    one_k = nk == 1
    kcp_b = kcp * b
    a_l0 = mt16 * kcp_b * np.where(one_k & (c["iterate_order"] == 1), 1, nbn)
    b_l0 = nt16 * kcp_b * np.where(one_k & (c["iterate_order"] == 0), 1, nbm)
    t_mte1 = (a_l0 / chip["l1_to_l0a_bytes_per_cycle"] + b_l0 / chip["l1_to_l0b_bytes_per_cycle"]) / f
    blocks = nbm * nbn
    mmads = blocks * nk
    small = (bm // 16) * (bn // 16) < 10
    mn16 = m16 * n16
    # mmads * 0.0 is 0.0 (mmads >= 0): the same values as where(small, mmads * sync, 0), one (columns, rows) pass fewer
    mac_cycles = mn16 * (kcp // k0) * r["mac_cycle"] + mmads * np.where(small, chip["sync_cycles"], 0.0)
    return {
        "t_mte1": t_mte1,
        "t_mac": mac_cycles / f,
        "blocks": blocks,
        "mmads": mmads,
        "mt16": mt16,
        "nt16": nt16,
        "mn16": mn16,
    }


def _fixpipe(p: Matmul, chip, c: dict, r: dict, site: str, mt, nt, active) -> tuple:
    """FIXPIPE, L0C -> GM: (its time, the bytes it writes, split-K per row). Split-K writes fp32 partials with
    atomic adds (read-modify-write: twice the bytes); a dequant on the way out still drains the int32 accumulator
    from L0C."""
    f = r["f"]
    split = c["split_k"] > 1
    out_bytes = mt * nt * np.where(split, 8, _fix_elem_bytes(p, chip))
    t_fix = out_bytes / np.minimum(
        chip["fixpipe_bytes_per_cycle"] * f, _write_share(p, chip, r, active, split)
    )
    if site == "fixpipe":
        t_fix = np.maximum(t_fix, np.where(split, 0.0, mt * nt * 4.0) / (chip["fixpipe_bytes_per_cycle"] * f))
    return t_fix, out_bytes, split


def _first_chunk(
    p: Matmul, chip, c: dict, r: dict, mt, nt, kc, steps: dict, load: dict, cube: dict, b_resident
):
    """(load, compute) time of the pipeline's first chunk. The cube starts once A's first L1 chunk and B's first
    chunk (unless B is resident) have landed: their bytes over the bandwidth plus their transfers' latency. The
    pipeline's grain is the finer of the two K extents: the compute of that many K steps is what a later load can
    hide behind. Both grow with K."""
    f, b, k0, bk = r["f"], p.in_bytes, _k0(p), c["base_k"]
    ka, kb = steps["ka"], steps["kb"]
    k_first = np.minimum(np.minimum(ka, kb), kc)
    l_chunk = (
        mt * (ka * b) / load["bw_a"]
        + np.where(b_resident, 0.0, _b_bytes(p, nt, kb) / load["bw_b"])
        + (load["per_chunk_a"] + np.where(b_resident, 0, load["per_chunk_b"])) * r["lat"] / c["l1_stages"]
    )
    step_mac = cube["mn16"] * (bk / k0) * r["mac_cycle"] / f
    bk_b = bk * b
    step_mte1 = (
        cube["mt16"] * bk_b / chip["l1_to_l0a_bytes_per_cycle"]
        + cube["nt16"] * bk_b / chip["l1_to_l0b_bytes_per_cycle"]
    ) / f
    step = np.where(c["l0_pingpong"] == 1, np.maximum(step_mac, step_mte1), step_mac + step_mte1)
    return l_chunk, ceil_div(k_first, bk) * step


def tile_cost(p: Matmul, chip, c: dict, mt, nt, kc, hit_a, hit_b, b_resident, active) -> dict:
    """Busy time (seconds) of one tile of `mt x nt` outputs over a K slice `kc`, and its per-pipe times: each pipe's
    time (_mte2, _cube, _fixpipe, the scalar unit here), then how they overlap.

    hit_a/hit_b: L2 hit rates of the first load of the tile's A/B panels; b_resident: the B panel is already in
    L1 (weight residency, previous tile had the same panel); active: cores loading at the same time (they share
    HBM and L2 bandwidth). All arguments broadcast over candidates.
    """
    r = _chip_rates(p, chip)
    site = dequant_site(p, chip)  # where a quantised matmul dequantises: none, fixpipe or vector
    bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
    if p.b_int4:  # A8W4: the cube reads B as int8 from the vector cores' small workspace, which sits in L2
        hit_b = 1.0
    if warm_inputs(p, chip):  # the operands are in L2 before the kernel starts: no first touch misses
        hit_a = hit_b = 1.0
    steps = {
        "nbm": ceil_div(mt, bm),
        "nbn": ceil_div(nt, bn),
        "nk": ceil_div(kc, bk),
        "ka": np.minimum(bk * c["step_ka"], kc),
        "kb": np.minimum(bk * c["step_kb"], kc),
    }
    load = _mte2(p, chip, c, r, site, mt, nt, kc, steps, hit_a, hit_b, b_resident, active)
    cube = _cube(p, chip, c, r, mt, nt, kc, steps)
    t_mte2, t_mte1, t_mac = load["t_mte2"], cube["t_mte1"], cube["t_mac"]
    t_fix, out_bytes, split = _fixpipe(p, chip, c, r, site, mt, nt, active)
    l0c_db = (
        bm * bn * 4 * 2 <= chip["l0c_bytes"]
    )  # a second L0C buffer lets the write-out overlap the next block
    # --- SCALAR: every instruction is issued by the scalar unit; every loop iteration pays its head and flags
    mmads, blocks = cube["mmads"], cube["blocks"]
    instr = mmads * 3 + load["xfers"] + blocks
    loops = mmads + load["chunks_a"] + load["chunks_b"]
    t_scalar = (instr * chip["scalar_cycles_per_instr"] + loops * chip["scalar_cycles_per_loop"]) / r["f"]
    # --- composition
    pp = c["l0_pingpong"] == 1
    steps_k = np.maximum(mmads, 1)
    inner = np.where(pp, np.maximum(t_mte1, t_mac) + np.minimum(t_mte1, t_mac) / steps_k, t_mte1 + t_mac)
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
    window = np.where(l0c_db, t_mac / nblk, np.where(unit_flag, t_mac / steps_k, 0.0))
    overlap = l0c_db | unit_flag
    t_comp = inner + np.where(overlap, nblk * np.maximum(fix_block - window, 0.0), t_fix)
    # MTE2's reads and the fixpipe's write-backs run on the bus's separate read and write channels (S10 gives a read
    # and a write rate per core), so they overlap; but the HBM serves both: the reads' misses and the writes that
    # reach it (an output larger than the usable L2, _write_share) share the core's HBM share.
    hbm_out = np.where(_out_fits(p, chip, split), 0.0, out_bytes)
    # the workspace stays in L2; the vector cores' output write shares the HBM when it spills
    if site == "vector":
        hbm_out = np.where(split | _final_fits(p, chip), hbm_out, mt * nt * float(p.out_bytes))
    hbm_read = load["a_first"] * (1 - hit_a) + load["b_first"] * (1 - hit_b)
    t_hbm = (hbm_read + hbm_out) / load["hbm_share"]
    t_gm = np.maximum(np.maximum(t_mte2, t_fix), t_hbm)
    l_chunk, c_chunk = _first_chunk(p, chip, c, r, mt, nt, kc, steps, load, cube, b_resident)
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
    two = c["l1_stages"] >= 2
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
        "mte2_bw": load["t_ab"],
        "l2_read": load["a_bytes"] + load["b_bytes"],
        "hbm_read": hbm_read,
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


# the largest time (s) the per-core sums see in float32 (_clamp32): a core's sum of up to 2^32 tiles at it stays
# below float32's largest value (2^128)
F32_CEILING = 2.0**96


def _clamp32(x: np.ndarray) -> np.ndarray:
    """x in float32, each value at most F32_CEILING. Past float32's range (3.4e38 s: a calibration trial with a
    rate near 0) a time would become inf, and inf times a work column a core does not run (0) NaN: the busiest-
    core pick (argmax) then took the NaN whatever the other cores run, and a pipe's sum differed between the
    fast estimate (which leaves such columns 0) and the reference. Physical times are far below the ceiling:
    the same values there."""
    if x.size and not x.max() <= F32_CEILING:
        x = np.minimum(x, F32_CEILING)
    return x.astype(np.float32)


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
    busy32 = _clamp32(busy)
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
    per = np.take(_clamp32(np.stack([cost[k] for k in names], axis=1)), ui, axis=0)
    out.update(zip(names, np.einsum("rpk,rk->pr", per, at).astype(np.float64), strict=True))
    tot = np.take(total.astype(np.float32), gi, axis=0)
    out["busy_sum"] = np.einsum("rk,rk->r", busy, tot)
    sums = np.take(np.stack([cost["l2_read"], cost["hbm_read"]], axis=1).astype(np.float32), ui, axis=0)
    out["l2_read"], out["hbm_read"] = np.einsum("rpk,rk->pr", sums, tot).astype(np.float64)
    return out
