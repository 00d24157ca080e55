"""The cuda matmul's branch-and-bound floors: quick_bound over launch orders, prefix_bound over completions."""

from __future__ import annotations

import numpy as np

from ....model.common import (
    BOUND_SAFETY,
    ceil_div,
    soft_max,
)
from ..problem import Matmul
from ..triton_tma import TMA_ALIGN_BYTES, tail_tiles
from .constants import _BASE_REGS, _SMEM_RESERVED, DEFAULTS, PERSISTENT, POINTER, TMA, efficiency
from .kernel_time import prepare, timing
from .resources import _i, _reg_cap, _vector_elems, contiguous_lengths


def quick_bound(p: Matmul, chip, c: dict) -> np.ndarray:
    """A lower bound of time_us over every launch order (ORDER, GROUP_M) of each candidate: the estimate with
    every panel load an L2 hit (prepare(l2_hits=False)).

    Valid because timing() is non-increasing in the A and B hit rates, which are at most 1: they enter only the
    HBM share of a load (per_byte = max(act / L2, (1 - hit) * act / HBM), so t_x and t_lat, and every soft max
    they enter, can only fall as the hits rise) and the HBM bytes (max(hbm_read + out, compulsory), hbm_read
    falling in the hits). Everything else (grid, occupancy, rounds, wgmma, registers, atomics) does not depend on
    the order. The L2 walk, the costly part of the estimate, is skipped.
    """
    return timing(prepare(p, chip, c, l2_hits=False), chip, efficiency(chip))["time_us"] * BOUND_SAFETY


def prefix_bound(p: Matmul, chip, c: dict, domains: dict) -> np.ndarray:
    """A floor of quick_bound over every completion (num_stages, num_warps, ORDER, GROUP_M in `domains`) of rows of
    the first level (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K). Terms of timing(), each at most its value for every
    completion:

    * exact at this level: the launch, split-K's extra kernels, the L2 time (requested bytes), and the HBM time
      at least max(output bytes, compulsory bytes) / bandwidth (hbm_read >= 0);
    * the main loop, steps * sum over rounds of the per-step soft max (Minkowski: a sum of p-norms is at least the
      p-norm of the sums), with each pipe summed over the busiest SM's programs (sum of k over rounds = n_sm):
      tensor max(n_sm * t_mma, rounds * chain), t_mma at the largest efficiency any completion reaches (wgmma's
      widest instruction, or mma.sync) and chain at least t_mma + the step overhead (+ latency and the synchronous
      loads on that path); shared memory at least a write and a read of each operand block; the fill port's
      cache lines and the L2 share of the async bytes (at least hi SMs loading at once); the synchronous loads; the
      latency at least lat / (most stages - 1) per round;
    * per round the fill (latency + program overhead) and the epilogue's latency, plus the stores (at the SM
      port) or the atomics (at least hi SMs at once) of the busiest SM's n_sm tiles;
    * rounds at least ceil(n_sm / the most resident programs any completion allows): shared memory with the
      fewest stages, threads with the fewest warps, registers at least accumulator + base (capped) per warp count.
    TEMPLATE (the last level): the least of the floors of the kinds of template in domains["TEMPLATE"] the problem
    can run (pointer; TMA loads, which take no synchronous path and no address registers; the persistent grid, one
    program per SM whose later tiles cost persistent_tile_cycles instead of a fill), and for the persistent grid
    each TAIL_SPLIT in the domain (the last partial wave's tiles in K slices: the busiest SM's steps are its whole
    tiles' and its slices'; the slices' workspace stores and the second kernel, both positive, left out).
    """
    templates = [int(t) for t in domains.get("TEMPLATE", (POINTER,)) if int(t) == POINTER or chip.has_tma]
    variants = sorted({(t >= TMA, t == PERSISTENT) for t in templates}) or [(False, False)]
    splits = sorted({int(s) for s in domains.get("TAIL_SPLIT", (1,))} | {1})
    floors = [
        _prefix_floor(p, chip, c, domains, tma, per, s)
        for tma, per in variants
        for s in (splits if per else (1,))
    ]
    return np.minimum.reduce(floors)


def _occupancy_ceiling(p: Matmul, chip, ibm, ibn, ibk, st_min: int, w_dom: list, tma: bool) -> np.ndarray:
    """_prefix_floor's most resident programs per SM of any completion of each row (at least 1): shared memory
    with the fewest stages (`st_min`), threads with the fewest warps, registers with the best of the warp counts
    (`w_dom`, sorted)."""
    b = p.in_bytes
    # shared memory as allocated (smem_allocated) with the fewest stages: at least one buffer per operand, and
    # st_min - 1 for one on the asynchronous path (mma.sync allocates one buffer fewer than wgmma)
    len_a, len_b = contiguous_lengths(p)
    buf_min = max(st_min - 1, 1)
    a_buf = 1 if not tma and _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip) == 1 else buf_min
    b_buf = (
        1 if not tma and _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip) == 1 else buf_min
    )
    smem = (ibm * ibk * a_buf + ibk * ibn * b_buf) * b + _SMEM_RESERVED
    occ_ub = np.minimum(int(chip["smem_bytes_per_sm"]) // np.maximum(smem, 1), int(chip["max_blocks_per_sm"]))
    occ_ub = np.minimum(occ_ub, int(chip["max_threads_per_sm"]) // (32 * w_dom[0]))
    by_regs = np.zeros_like(occ_ub)
    for w in w_dom:
        cap = _reg_cap(chip, np.int64(w))
        alloc = np.minimum(ibm * ibn / (32 * w) + _BASE_REGS, cap)  # regs >= accumulator + base
        by_regs = np.maximum(by_regs, np.floor(int(chip["regs_per_sm"]) / np.maximum(alloc * 32 * w, 1)))
    occ_ub = np.maximum(np.minimum(occ_ub, by_regs.astype(np.int64)), 1)
    return occ_ub


def _prefix_floor(
    p: Matmul, chip, c: dict, domains: dict, tma: bool, persistent: bool, tail_split: int = 1
) -> np.ndarray:
    """prefix_bound's floor for one kind of template: TMA loads or pointer loads, persistent grid or not (and its
    split of the last wave, `tail_split`)."""
    e = efficiency(chip)
    f, sms = chip.clock_hz, chip.cores
    bm, bn, bk, sk = (_i(c, k).astype(np.float64) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K"))
    ibm, ibn, ibk, isk = (_i(c, k) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K"))
    b, ob = p.in_bytes, p.out_bytes
    pw = max(e["overlap_power"], 1.0)
    lat = chip["gm_latency_cycles"] * e["latency_scale"] / f
    hbm_bw = chip["hbm_gbps"] * 1e9 * min(e["hbm_efficiency"], 1.0)
    l2_bw = chip["l2_gbps"] * 1e9 * e["l2_efficiency"]
    sm_bw = e["sm_load_bytes_per_cycle"] * f
    ovh = e["tma_step_overhead_cycles" if tma else "step_overhead_cycles"] / f
    prog_ovh = e["program_overhead_cycles"] / f
    # grid (prepare)
    tm, tn = ceil_div(p.M, ibm), ceil_div(p.N, ibn)
    steps = ceil_div(ceil_div(p.K, ibk), isk).astype(np.float64)
    programs = tm * tn * isk * p.batch
    n_sm = ceil_div(programs, sms)
    # the fewest SMs any round has at work (act_full >= hi, act_last >= hi)
    hi = (programs - (n_sm - 1) * sms).astype(np.float64)
    # the most resident programs of any completion
    st_min, w_dom = min(domains["num_stages"]), sorted(domains["num_warps"])
    occ_ub = _occupancy_ceiling(p, chip, ibm, ibn, ibk, st_min, w_dom, tma)
    if persistent:  # one program per SM
        occ_ub = np.ones_like(occ_ub)
    rounds = ceil_div(n_sm, occ_ub).astype(np.float64)
    n_sm = n_sm.astype(np.float64)
    # tensor cores at the best efficiency any completion reaches
    mma_version = float(chip.get("mma_version", DEFAULTS["mma_version"]))
    n0 = e["mma_n_half"]
    v3_ok = (mma_version >= 3) & any(w % 4 == 0 for w in w_dom)
    v3_ok = v3_ok & (ibm % 64 == 0) & (ibn % 16 == 0) & (ibk * b >= 32)
    eff3 = min(e["mma_efficiency_v3"], 1.0) * (1.0 + n0 / 256.0) / (1.0 + n0 / np.minimum(bn, 256.0))
    eff2 = min(e["mma_efficiency_v2"], 1.0)
    eff = np.where(v3_ok, np.maximum(eff3, eff2), eff2)
    t_mma = bm * bn * bk / (chip.macs_per_cycle(p.dtype) * f * eff)
    # loads (prepare's alignment and cache lines)
    len_a, len_b = contiguous_lengths(p)
    unal_a = float(not tma and _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip) == 1)
    unal_b = float(not tma and _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip) == 1)
    unal_c = _vector_elems(p.N, True, ob, chip) == 1
    a_step, b_step = bm * bk * b, bk * bn * b
    unal_ab = unal_a * a_step + unal_b * b_step
    async_b = a_step + b_step - unal_ab
    line = int(chip.get("cache_line_bytes", 128))
    a_rows, a_len = (ibk, ibm) if p.a_transposed else (ibm, ibk)
    b_rows, b_len = (ibn, ibk) if p.b_transposed else (ibk, ibn)
    a_lines = a_rows * np.maximum(ceil_div(a_len * b, line), 1)
    b_lines = b_rows * np.maximum(ceil_div(b_len * b, line), 1)
    async_lines = (1.0 - unal_a) * a_lines + (1.0 - unal_b) * b_lines
    t_unal1 = unal_ab / (a_step + b_step) * (bm + bn) * bk / (e["unaligned_elems_per_cycle"] * f)
    port = async_b / (e["tma_bytes_per_cycle"] * f) if tma else async_lines * line / sm_bw
    t_x = np.maximum(port, async_b * hi / l2_bw)
    chain = t_mma + ovh + ((lat + t_unal1) if unal_a or unal_b else 0.0)  # timing's sync path
    t_mte1 = 2.0 * (bm + bn) * bk * b / (e["smem_bytes_per_cycle"] * f)
    t_lat = lat / max(max(domains["num_stages"]) - 1, 1)
    terms = [
        np.maximum(n_sm * t_mma, rounds * chain),
        n_sm * t_mte1,
        n_sm * t_x,
        n_sm * t_unal1,
        rounds * t_lat,
    ]
    loop = steps * soft_max(terms, pw)
    elems = bm * bn * n_sm
    if persistent and tail_split > 1:
        # the persistent grid runs n_sm items an SM one after another (rounds = n_sm): its loop is n_sm * steps
        # unit steps (the soft max is homogeneous); with the split, the busiest SM runs its whole tiles' steps and
        # ceil(tail * split / SMs) slices of ceil(steps / split) steps. SMs loading at once stay at least hi
        grid = {"BLOCK_M": ibm, "BLOCK_N": ibn, "TAIL_SPLIT": np.where(isk == 1, tail_split, 1)}
        tail = tail_tiles(p.M, p.N, grid, sms)[1]
        t_rounds = ceil_div(tail * tail_split, sms).astype(np.float64)
        items = np.where(tail > 0, n_sm - 1.0 + t_rounds, n_sm)
        work = np.where(tail > 0, (n_sm - 1.0) * steps + t_rounds * ceil_div(steps, tail_split), n_sm * steps)
        unit = [np.maximum(t_mma, chain), t_mte1, t_x, t_unal1, np.full_like(t_mma, t_lat)]
        loop = work * soft_max(unit, pw)
        rounds = items
        elems = bm * bn * np.where(tail > 0, n_sm - 1.0, n_sm)  # the slices' fp32 stores left out
    # a TMA template may store C through a descriptor (16-byte rows): the aligned rate, the floor of either store
    unal_store = unal_c and not (tma and (p.N * ob) % TMA_ALIGN_BYTES == 0)
    store = np.where(unal_store, elems / (e["unaligned_elems_per_cycle"] * f), elems * ob / sm_bw)
    atomic_rate = (e["unaligned_atomic_gelems_per_s"] if unal_c else e["atomic_gelems_per_s"]) * 1e9
    atomic = elems * hi / atomic_rate
    if persistent:  # one start, then each later tile's setup (timing's refill), an epilogue latency per tile
        fills = lat + prog_ovh + (rounds - 1.0) * e["persistent_tile_cycles"] / f + rounds * lat
    else:
        fills = rounds * (2.0 * lat + prog_ovh)
    main = loop + fills + np.where(isk > 1, atomic, store)
    # whole-kernel floors (prepare's L2 and HBM bytes, exact or at their minimum)
    mn = float(p.batch * p.M * p.N)
    split = isk > 1
    out_hbm = np.where(split, mn * 4 * 2 + mn * (4 + ob), mn * ob)
    out_l2 = np.where(split, mn * 4 * (2 * sk + 1) + mn * (4 + ob), mn * ob)
    l2_t = (programs * steps * (a_step + b_step) + out_l2) / l2_bw
    hbm_t = np.maximum(out_hbm, p.compulsory_bytes) / hbm_bw
    extra = np.where(
        split,
        mn * 4 / hbm_bw + mn * (4 + ob) / hbm_bw + 2 * e["extra_kernel_us"] * 1e-6,
        0.0,
    )
    body = np.maximum(main, np.maximum(hbm_t, l2_t))
    # twice the safety: a floor of quick_bound even where both reach the same term (the HBM time, say)
    return ((body + extra) * 1e6 + float(chip["launch_us"])) * BOUND_SAFETY**2
