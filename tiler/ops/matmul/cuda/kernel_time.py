"""The kernel time: prepare() computes the columns the constants do not change, timing() the estimate record."""

from __future__ import annotations

import numpy as np

from ....model.common import (
    ceil_div,
    classify_bound,
    group_rows_any,
    roofline_us,
    soft_max,
)
from ..problem import Matmul
from ..triton_tma import tail_tiles, work_items
from .constants import KNOBS, ORDER_KNOBS, PERSISTENT, TMA, efficiency
from .hits import _panel_hit_rates
from .resources import (
    _i,
    _layout,
    _reg_cap,
    _template,
    _vector_elems,
    c_store_tma,
    contiguous_lengths,
    resident,
    staged_elems,
)

_SHARE_MIN = 1024  # rows from which estimate() looks for rows that differ only in launch orders of equal hits
_SHARE_MAX = 0.7  # ... and scores only one of each when the distinct rows are at most this share of the table


def estimate(p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
    """timing(prepare(...)) with the work shared across rows that differ only in their launch order (ORDER,
    GROUP_M) and get the same L2 hit rates from it: the order reaches the estimate only through the hit rates,
    so such rows have equal estimates, and one of each is scored. Bit for bit timing(prepare(...))."""
    n = len(c["BLOCK_M"]) if "BLOCK_M" in c else 0
    if n < _SHARE_MIN or any(k not in c for k in KNOBS):
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    tiling = {k: _i(c, k) for k in KNOBS if k not in ORDER_KNOBS}
    tfirst, tinv = group_rows_any(list(tiling.values()))
    if tfirst.size > _SHARE_MAX * n:
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    # the hit rates of every row: prepare()'s grid and occupancy, per distinct tiling
    bm, bn, sk = (tiling[k][tfirst] for k in ("BLOCK_M", "BLOCK_N", "SPLIT_K"))
    first = {k: v[tfirst] for k, v in tiling.items()}
    occ = _layout(p, chip, first)[5]
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    occ_eff, rows_a = resident(occ, first), np.minimum(bm, p.M)
    a_hit, b_hit = _panel_hit_rates(
        p, chip, c, tm[tinv], tn[tinv], sk[tinv], occ_eff[tinv], rows_a[tinv], bn[tinv]
    )
    first, inv = group_rows_any([tinv, a_hit.view(np.int64), b_hit.view(np.int64)])
    if first.size > _SHARE_MAX * n:
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    est = timing(prepare(p, chip, {k: np.asarray(v)[first] for k, v in c.items()}), chip, efficiency(chip))
    return {k: v[inv] for k, v in est.items()}


def prepare(p: Matmul, chip, c: dict, l2_hits: bool = True) -> dict[str, np.ndarray]:
    """Everything the timing needs that does not depend on the [efficiency] constants, one column per quantity.

    `l2_hits=False` skips the launch order's L2 walk and counts every panel load as an L2 hit (ORDER and GROUP_M
    are then not read): the time is non-increasing in the hit rates, so this is a floor over every order.
    """
    bm, bn, bk = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "BLOCK_K")
    st, w, sk = _i(c, "num_stages"), _i(c, "num_warps"), _i(c, "SPLIT_K")
    n = bm.size
    b, ob = p.in_bytes, p.out_bytes
    sms = chip.cores
    # --- grid
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    k_tiles = ceil_div(p.K, bk)
    steps = ceil_div(k_tiles, sk)
    programs = tm * tn * sk * p.batch
    # --- tensor-core path (Triton supportMMA / warpsPerTile), registers and occupancy
    v3, wm, wn, regs, acc, occ = _layout(p, chip, c)
    instr_n = np.minimum(bn // wn, 256)
    # warps beyond what the tile can feed repeat the same mma.sync work (layout replication)
    rep = np.where(v3, 1, np.maximum(1, wm * 16 // bm) * np.maximum(1, wn * 8 // bn))
    # shared-memory traffic per K step: cp.async writes + tensor-core operand reads
    smem_rd = np.where(v3, bk * (bm * wn + bn * np.maximum(bm // 64, 1)), bk * (bm * wn + bn * wm) * rep) * b
    smem_traffic = smem_rd + (bm + bn) * bk * b
    # --- alignment: each operand is contiguous along one axis, whose length is its row stride (A `n`: K, `t`: M;
    # B `n`: N, `t`: K; C rows are N apart); the K mask varies inside a vector when that axis is K and K % 16 != 0
    len_a, len_b = contiguous_lengths(p)
    vec_a = _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip)
    vec_b = _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip)
    vec_c = _vector_elems(p.N, True, ob, chip)
    cap = _reg_cap(chip, w)
    tpl = _template(c)
    # TMA loads: full-width bulk copies whatever Triton can prove (the `tma` rule: 16-B rows)
    tma = tpl >= TMA
    persistent = tpl == PERSISTENT
    stage_e, stage_n = staged_elems(p)  # operands a TMA template copies into 16-byte rows first
    occ_eff = resident(occ, c)
    # --- the SM-level schedule: programs per SM, rounds of `occ`, the explicit tail round
    n_sm = ceil_div(programs, sms)
    rounds = ceil_div(n_sm, occ_eff)
    k_last = n_sm - (rounds - 1) * occ_eff
    k_full = np.minimum(occ_eff, n_sm)
    hi = programs - (n_sm - 1) * sms  # SMs that run n_sm programs (the rest run n_sm - 1)
    tail = _tail_split(p, c, tpl, bm, bn, sk, steps, sms)
    act_full = np.minimum(programs, sms)
    act_last = np.where((k_last >= 2) & (programs >= sms), sms, hi)
    rows_a = np.minimum(bm, p.M)  # A rows wrap (offs % M): a tile never reads more distinct rows than M
    if l2_hits:  # --- L2 hits of the launch order, one simulation per distinct schedule
        a_hit, b_hit = _panel_hit_rates(p, chip, c, tm, tn, sk, occ_eff, rows_a, bn)
    else:  # every panel load an L2 hit: the ceiling of every launch order (quick_bound)
        a_hit = b_hit = np.ones(n)
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return {
        "n": np.full(n, 1.0),
        "M": np.full(n, float(p.M)),
        "N": np.full(n, float(p.N)),
        "batch": np.full(n, float(p.batch)),
        "flops": np.full(n, p.flops),
        "compulsory": np.full(n, float(p.compulsory_bytes)),
        "bm": f(bm),
        "bn": f(bn),
        "bk": f(bk),
        "stages": f(st),
        "warps": f(w),
        "sk": f(sk),
        "steps": f(steps),
        "programs": f(programs),
        "tiles": f(tm * tn * p.batch),
        "v3": v3.astype(np.float64),
        "instr_n": f(instr_n),
        "rep": f(rep),
        "smem_traffic": f(smem_traffic),
        "unal_a": np.where(tma, 0.0, float(vec_a == 1)),
        "unal_b": np.where(tma, 0.0, float(vec_b == 1)),
        "tma": tma.astype(np.float64),
        "persistent": persistent.astype(np.float64),
        "stage_elems": np.where(tma, stage_e, 0.0),
        "stage_copies": np.where(tma, stage_n, 0.0),
        # C through a TMA descriptor: bulk copies, whatever Triton can prove of the rows
        "unal_c": np.where(c_store_tma(p, chip, c), 0.0, float(vec_c == 1)),
        "out_bytes": np.full(n, float(ob)),
        "regs": f(regs),
        "acc_regs": f(acc),
        "reg_cap": f(cap),
        "occ": f(occ),
        "n_sm": f(n_sm),
        "rounds": f(rounds),
        "k_full": f(k_full),
        "k_last": f(k_last),
        "act_full": f(act_full),
        "act_last": f(act_last),
        **tail,
        **_memory(p, chip, bm, bn, bk, sk, programs, steps, a_hit, b_hit, rows_a),
        "macs_per_cycle": np.full(n, chip.macs_per_cycle(p.dtype)),
        "peak": np.full(n, chip.peak_tflops(p.dtype) * 1e12),
    }


def _tail_split(p: Matmul, c: dict, tpl, bm, bn, sk, steps, sms: int) -> dict[str, np.ndarray]:
    """prepare()'s columns of TAIL_SPLIT: the persistent grid's last, partial wave of `tail_tiles` tiles split
    into `tail_split` K slices of `tail_steps` steps, `tail_rounds` slices on the busiest SM and `tail_act` SMs at
    work; tail_tiles 0 where there is no split (or no partial wave). `items`: the grid's work items, slices
    included (times the batch), which the record reports; the tail and the items are triton_tma's, the
    launcher's and the view's own count."""
    split = _i(c, "TAIL_SPLIT") if "TAIL_SPLIT" in c else np.ones_like(sk)
    split = np.where((tpl == PERSISTENT) & (sk == 1) & (p.batch == 1), split, 1)
    grid = {"BLOCK_M": bm, "BLOCK_N": bn, "SPLIT_K": sk, "TAIL_SPLIT": split}
    tail = tail_tiles(p.M, p.N, grid, sms)[1]
    slices = tail * split
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return {
        "tail_tiles": f(tail),
        "tail_split": f(split),
        "tail_rounds": f(ceil_div(slices, sms)),
        "tail_act": f(np.clip(slices, 1, sms)),
        "tail_steps": f(ceil_div(steps, split)),
        "items": f(work_items(p.M, p.N, grid, sms) * p.batch),
    }


def _memory(p: Matmul, chip, bm, bn, bk, sk, programs, steps, a_hit, b_hit, rows_a) -> dict[str, np.ndarray]:
    """prepare()'s memory columns: bytes and cache lines per K step, L2 and HBM bytes (the hit rates given) and
    the contiguous request length of each operand."""
    b, ob = p.in_bytes, p.out_bytes
    len_a, len_b = contiguous_lengths(p)
    # bytes per K step of one program (requests, which the L2 serves) and the HBM share of them
    a_step = (bm * bk * b).astype(np.float64)
    b_step = (bk * bn * b).astype(np.float64)
    # cache lines per K step: the SM's L1/TEX path handles one line (up to 128 B) per cycle, so a tile row of
    # fewer than 128 B costs a whole line slot. A tile's rows run along the operand's contiguous axis: A `n`
    # BLOCK_M rows of BLOCK_K elements, A `t` BLOCK_K rows of BLOCK_M; B `n` BLOCK_K rows of BLOCK_N, B `t`
    # BLOCK_N rows of BLOCK_K
    line = int(chip.get("cache_line_bytes", 128))
    a_rows, a_len = (bk, bm) if p.a_transposed else (bm, bk)
    b_rows, b_len = (bn, bk) if p.b_transposed else (bk, bn)
    a_lines = (a_rows * np.maximum(ceil_div(a_len * b, line), 1)).astype(np.float64)
    b_lines = (b_rows * np.maximum(ceil_div(b_len * b, line), 1)).astype(np.float64)
    # wrapped A rows (M < BLOCK_M) re-read lines another warp just fetched: they count as hits
    a_hit_req = 1.0 - (1.0 - a_hit) * rows_a / bm
    hit = (a_step * a_hit_req + b_step * b_hit) / (a_step + b_step)
    a_l2 = programs * steps * a_step
    b_l2 = programs * steps * b_step
    hbm_read = a_l2 * (1.0 - a_hit_req) + b_l2 * (1.0 - b_hit)
    mn = float(p.batch * p.M * p.N)
    split = sk > 1
    out_hbm = np.where(
        split, mn * 4 * 2 + mn * (4 + ob), mn * ob
    )  # zero + atomics' write-back + cast, or the store
    out_l2 = np.where(split, mn * 4 * (2 * sk + 1) + mn * (4 + ob), mn * ob)
    hbm = np.maximum(hbm_read + out_hbm, p.compulsory_bytes)
    # contiguous bytes a tile asks HBM for at a time: one tile row, or the whole tile when its rows span the
    # operand's contiguous axis (consecutive rows then follow each other in memory: one block, counted at the
    # tile's size, so that more K never makes the request look longer than before)
    a_seg = np.where(a_len >= len_a, a_rows * a_len, a_len) * b
    b_seg = np.where(b_len >= len_b, b_rows * b_len, b_len) * b
    c_seg = np.where(bn >= p.N, bm * bn, bn) * ob
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return {
        "a_step": a_step,
        "b_step": b_step,
        "a_lines": a_lines,
        "b_lines": b_lines,
        "line_bytes": np.full(a_step.size, float(line)),
        "hit": hit,
        "a_hit": a_hit,
        "b_hit": b_hit,
        "l2_read": a_l2 + b_l2,
        "hbm_read": hbm_read,
        "hbm": hbm,
        "a_miss": a_l2 * (1.0 - a_hit_req),
        "b_miss": b_l2 * (1.0 - b_hit),
        "out_hbm": f(out_hbm),
        "a_miss_step": a_step * (1.0 - a_hit_req),
        "b_miss_step": b_step * (1.0 - b_hit),
        "a_seg": f(a_seg),
        "b_seg": f(b_seg),
        "c_seg": f(c_seg),
        "l2_total": a_l2 + b_l2 + out_l2,
        "mn": np.full(a_step.size, mn),
    }


def _row_rate(seg, r0: float):
    """HBM's rate for rows of `seg` bytes relative to whole 128-B lines: each request carries a fixed cost worth
    `r0` bytes of transfer (dram_request_bytes), so (seg / (seg + r0)) / (128 / (128 + r0)), at most 1."""
    return np.minimum(1.0, seg / (seg + r0) * (128.0 + r0) / 128.0)


def _epilogue(g: dict, e: dict, f: float, lat: float, sm_bw: float, hbm_bw: float, k, act):
    """The tile store (or fp32 atomics) of `k` programs on one SM, `act` SMs storing at once (timing's)."""
    elems = g["bm"] * g["bn"] * k
    st_bw = np.minimum(sm_bw, hbm_bw / act)
    t_store = np.where(
        g["unal_c"] > 0, elems / (e["unaligned_elems_per_cycle"] * f), elems * g["out_bytes"] / st_bw
    )
    atomic_rate = (
        np.where(g["unal_c"] > 0, e["unaligned_atomic_gelems_per_s"], e["atomic_gelems_per_s"]) * 1e9
    )
    t_atomic = elems * act / atomic_rate
    return np.where(g["sk"] > 1, t_atomic, t_store) + lat


def _step_inputs(g: dict, chip, e: dict[str, float]) -> dict:
    """What one K step's time reads, per row, whatever the round (full, last or a split tail's): the chip's rates
    and latency under the constants `e`, the tensor cores' efficiency, the step's bytes on each load path, the
    synchronous loads' and spills' own time, and the row rates of each operand's HBM rows."""
    f = chip.clock_hz
    lat = chip["gm_latency_cycles"] * e["latency_scale"] / f
    hbm_bw = chip["hbm_gbps"] * 1e9 * min(e["hbm_efficiency"], 1.0)
    l2_bw = chip["l2_gbps"] * 1e9 * e["l2_efficiency"]
    # tensor cores: one program's K step with the whole SM's tensor cores
    n0 = e["mma_n_half"]
    unal_ab = g["unal_a"] * g["a_step"] + g["unal_b"] * g["b_step"]  # bytes on the synchronous scalar path
    unal_elems = unal_ab / (g["a_step"] + g["b_step"]) * (g["bm"] + g["bn"]) * g["bk"]
    # registers beyond the cap spill to local memory
    spill = np.maximum(g["regs"] - g["reg_cap"], 0.0)
    # HBM serves rows shorter than a line at a lower rate: each request carries a fixed cost worth
    # `dram_request_bytes` of transfer; relative to a whole 128-B line (the rate hbm_efficiency describes), a row
    # of s bytes runs at (s / (s + r)) / (128 / (128 + r)), and at full rate from 128 B on
    r0 = e["dram_request_bytes"]
    ra, rb, rc = _row_rate(g["a_seg"], r0), _row_rate(g["b_seg"], r0), _row_rate(g["c_seg"], r0)
    return {
        "f": f,
        "lat": lat,
        "hbm_bw": hbm_bw,
        "l2_bw": l2_bw,
        "sm_bw": e["sm_load_bytes_per_cycle"] * f,
        "tma_bw": e["tma_bytes_per_cycle"] * f,
        "ovh": np.where(g["tma"] > 0, e["tma_step_overhead_cycles"], e["step_overhead_cycles"]) / f,
        "v3": g["v3"] > 0,
        "eff3": min(e["mma_efficiency_v3"], 1.0) * (1.0 + n0 / 256.0) / (1.0 + n0 / g["instr_n"]),
        "macs": g["bm"] * g["bn"] * g["bk"] * g["rep"],
        "rate": g["macs_per_cycle"] * f,
        "sync": unal_ab > 0,
        "async_b": g["a_step"] + g["b_step"] - unal_ab,
        # the fill port counts cache lines, not bytes (prepare(): short tile rows waste part of a line slot)
        "async_lines": (1.0 - g["unal_a"]) * g["a_lines"] + (1.0 - g["unal_b"]) * g["b_lines"],
        "t_unal1": unal_elems / (e["unaligned_elems_per_cycle"] * f),  # the SM's rate on the synchronous path
        "spill": spill,
        "t_spill": spill * e["spill_cycles_per_reg"] / f,
        "t_mte1": g["smem_traffic"] / (e["smem_bytes_per_cycle"] * f),
        "rates": (ra, rb, rc),
        # a K step's HBM bytes, each operand's weighted by its row rate, per byte requested
        "miss": (g["a_miss_step"] / ra + g["b_miss_step"] / rb) / (g["a_step"] + g["b_step"]),
    }


def _step(g: dict, e: dict[str, float], s: dict, k, act) -> tuple:
    """Busy time of one SM for one K step of its `k` resident programs, with `act` SMs loading at once (`s`:
    _step_inputs), and the step's tensor, shared-memory, load and issue times."""
    t_mma = s["macs"] / (
        s["rate"]
        * np.where(
            s["v3"], s["eff3"], min(e["mma_efficiency_v2"], 1.0) * np.minimum(1.0, k * g["warps"] / 4.0)
        )
    )
    # the SM's fill port, its share of the L2 bandwidth, and its share of HBM for the bytes that miss L2
    # (HBM fills L2 while L2 serves the SMs: the two overlap, the slower one sets the pace)
    per_byte = np.maximum(act / s["l2_bw"], s["miss"] * act / s["hbm_bw"])
    # the SM's own port: line slots on the L1/TEX path, bytes at the TMA unit's rate for bulk copies
    async_b = s["async_b"]
    port = np.where(g["tma"] > 0, async_b / s["tma_bw"], s["async_lines"] * g["line_bytes"] / s["sm_bw"])
    t_x = np.maximum(port, async_b * per_byte)
    # Little's law: each program keeps (stages - 1) steps of loads in flight, each answered after the latency
    # plus its own transfer; the k programs' loads overlap, and their bandwidth is the k * t_x term (with 1
    # stage a program's load, wait and mma are serial)
    stages, lat, t_unal1 = g["stages"], s["lat"], s["t_unal1"]
    t_lat = np.where(stages >= 2, (lat + t_x) / np.maximum(stages - 1, 1), lat + t_x + t_mma)
    # the chain one program cannot overlap: its own mma, the step's sync, the synchronous loads, spills
    chain = t_mma + s["ovh"] + np.where(s["sync"], lat + t_unal1, 0.0) + s["t_spill"]
    # the SM's tensor work (k programs) and one program's chain are two bounds on the same tensor-core
    # timeline, not two pipes: their max is one term (with k = 1 a second term would charge 2^(1/p) for an
    # overlap that does not exist, and leave no room for the per-step cost of a lone program)
    terms = [np.maximum(k * t_mma, chain), k * s["t_mte1"], k * t_x, k * t_unal1, t_lat]
    busy = soft_max(terms, max(e["overlap_power"], 1.0))
    return busy, k * t_mma, k * s["t_mte1"], k * (t_x + t_unal1), s["ovh"] + 0 * k


def timing(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """The estimate record from prepared columns `g` and the efficiency constants `e` (see DEFAULTS): each round's
    K steps (_step), the epilogues, the HBM and L2 floors, and the kernels around the GEMM (split-K's, TAIL_SPLIT's
    second one, a TMA template's staging copies)."""
    s = _step_inputs(g, chip, e)
    f, lat, hbm_bw, l2_bw, sm_bw = s["f"], s["lat"], s["hbm_bw"], s["l2_bw"], s["sm_bw"]
    ra, rb, rc = s["rates"]
    prog_ovh = e["program_overhead_cycles"] / f

    s_full, mac_f, mte1_f, mte2_f, sc_f = _step(g, e, s, g["k_full"], g["act_full"])
    s_last, mac_l, mte1_l, mte2_l, sc_l = _step(g, e, s, g["k_last"], g["act_last"])
    epi_f = _epilogue(g, e, f, lat, sm_bw, hbm_bw, g["k_full"], g["act_full"])
    epi_l = _epilogue(g, e, f, lat, sm_bw, hbm_bw, g["k_last"], g["act_last"])
    fill = lat + prog_ovh
    # a persistent program starts once; each later tile of it costs the tile's setup, its loads already in flight
    persist = g["persistent"] > 0
    refill = np.where(persist, e["persistent_tile_cycles"] / f, fill)
    r_full = g["rounds"] - 1.0
    steps = g["steps"]
    # the last round: its tiles whole, or (TAIL_SPLIT) tail_rounds K slices a busiest SM, each storing its fp32
    # sum as a workspace tile, one later slice's setup after another
    tail = g["tail_tiles"] > 0
    s_tail, mac_t, mte1_t, mte2_t, sc_t = _step(g, e, s, np.ones_like(steps), g["tail_act"])
    ws_tile = g["bm"] * g["bn"] * 4.0
    epi_t = ws_tile / np.minimum(sm_bw, hbm_bw / g["tail_act"]) + lat
    t_rounds, t_steps = g["tail_rounds"], g["tail_steps"]
    last = np.where(tail, t_rounds * (t_steps * s_tail + epi_t) + (t_rounds - 1.0) * refill, steps * s_last)
    main = r_full * (steps * s_full + refill + epi_f) + last + fill + np.where(tail, 0.0, epi_l)
    # the C the GEMM writes to HBM: all of it but the tail tiles of a split last wave, which the second kernel
    # writes (counted there, once; at most C's own bytes, where edge tiles are clipped)
    tail_c = np.minimum(g["tail_tiles"] * g["bm"] * g["bn"], g["mn"]) * g["out_bytes"]
    hbm_t = (
        np.maximum(
            g["a_miss"] / ra + g["b_miss"] / rb + (g["out_hbm"] - tail_c) / rc, g["compulsory"] - tail_c
        )
        / hbm_bw
    )
    l2_t = g["l2_total"] / l2_bw
    body = np.maximum(main, np.maximum(hbm_t, l2_t))
    split = g["sk"] > 1
    extra = np.where(
        split,
        g["mn"] * 4 / hbm_bw + g["mn"] * (4 + g["out_bytes"]) / hbm_bw + 2 * e["extra_kernel_us"] * 1e-6,
        0.0,
    )
    # a TMA template's staged operands: copy kernels before the GEMM, element by element (rows that are not 16-byte
    # multiples: no vector loads), at the rate stage_gelems_per_s
    stage = (
        g["stage_elems"] / (e["stage_gelems_per_s"] * 1e9) + g["stage_copies"] * e["extra_kernel_us"] * 1e-6
    )
    # TAIL_SPLIT's second kernel: it reads the tail tiles' workspace slices and writes those tiles of C
    tail_bytes = g["tail_tiles"] * g["tail_split"] * ws_tile + tail_c
    extra = extra + np.where(tail, tail_bytes / hbm_bw + e["extra_kernel_us"] * 1e-6, 0.0)
    launch = float(chip["launch_us"])
    time_us = (body + extra + stage) * 1e6 + launch
    # the GPU's pipes (common.PIPES_OF["cuda"]): tensor cores, CUDA-core math (split-K's extra kernels), issue
    # overhead, shared -> registers, global -> shared, epilogue stores / atomics
    last_of = lambda whole, sliced: np.where(tail, t_rounds * t_steps * sliced, steps * whole)  # noqa: E731
    pipes = {
        "tensor": (r_full * steps * mac_f + last_of(mac_l, mac_t)) * 1e6,
        "alu": extra * 1e6,
        # program starts: one per round, or one per SM and a tile setup per later tile (persistent), and the K
        # steps of the last round: its tiles', or (TAIL_SPLIT) its slices' with a setup per later slice
        "issue": (
            r_full * steps * sc_f
            + last_of(sc_l, sc_t)
            + prog_ovh
            + r_full * np.where(persist, refill, prog_ovh)
            + np.where(tail, (t_rounds - 1.0) * refill, 0.0)
        )
        * 1e6,
        "smem": (r_full * steps * mte1_f + last_of(mte1_l, mte1_t)) * 1e6,
        "load": (r_full * steps * mte2_f + last_of(mte2_l, mte2_t) + stage) * 1e6,
        "store": (r_full * (epi_f - lat) + np.where(tail, t_rounds * (epi_t - lat), epi_l - lat)) * 1e6,
    }
    bound = classify_bound({k: pipes[k] for k in ("tensor", "load", "smem", "store", "issue")}, body * 1e6)
    bound[hbm_t >= main] = "load"
    return _record(g, chip, time_us, bound, pipes, launch, s["v3"], s["spill"])


def _record(g: dict, chip, time_us, bound, pipes: dict, launch: float, v3, spill) -> dict[str, np.ndarray]:
    """timing()'s estimate record: the time, its bound and pipes, and the launch (programs, waves, occupancy, L2
    and HBM bytes) as the export and the report read it. The grid as it runs: its work items (TAIL_SPLIT's
    slices included; the persistent grid's programs are min(SMs, items), as the view's), and for a split the
    last wave's slices on `tail_act` SMs (`_grid`)."""
    sms = chip.cores
    roof = roofline_us(g["flops"], g["compulsory"], g["peak"], chip["hbm_gbps"] * 1e9, launch)
    items = g["items"].astype(np.int64)
    return {
        "time_us": time_us,
        "bound": bound,
        **{f"{k}_us": v for k, v in pipes.items()},
        "cores_used": np.minimum(items, sms),
        **_grid(g, sms),
        "l2_hit_rate": 1.0 - g["hbm_read"] / np.maximum(g["l2_read"], 1.0),
        "hbm_bytes": g["hbm"],
        "l2_bytes": g["l2_total"],
        "roofline_us": roof,
        "occupancy": g["occ"].astype(np.int64),
        "programs": items,
        "tiles": items,  # the export's launch.tiles: work items launched (split-K and TAIL_SPLIT's slices included)
        "tail_programs_per_sm": g["k_last"].astype(np.int64),
        "tail_sms": np.where(g["tail_tiles"] > 0, g["tail_act"], g["act_last"]).astype(np.int64),
        "wgmma": v3,
        "regs_per_thread": g["regs"],
        "spill_regs": spill,
    }


def _grid(g: dict, sms: int) -> dict[str, np.ndarray]:
    """The record's waves and balance. Unsplit: `rounds` of programs, and programs / (SMs x the busiest SM's).
    With TAIL_SPLIT: the whole waves and then the busiest SM's `tail_rounds` slices, and the mean SM's K steps
    (every tile's) over the busiest SM's (its whole tiles' and its slices')."""
    tail = g["tail_tiles"] > 0
    r_full, steps = g["rounds"] - 1.0, g["steps"]
    busiest = np.maximum(r_full * steps + g["tail_rounds"] * g["tail_steps"], 1.0)  # >= 1 with a tail
    return {
        "waves": np.where(tail, r_full + g["tail_rounds"], g["rounds"]).astype(np.int64),
        "balance": np.where(tail, g["tiles"] * steps / (sms * busiest), g["programs"] / (sms * g["n_sm"])),
    }
