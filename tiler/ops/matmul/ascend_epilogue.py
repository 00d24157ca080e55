"""Matmul on Ascend, the kernel time around the cube's tiles: launch head, fixpipe and dequant site, where the
output lands (L2 or HBM), the split-K reduction pass, the quantised vector side, and the estimate record that adds
them to the cores' makespan (docs/model.md, "Kernel time" and "Quantised matmul")."""

from __future__ import annotations

import numpy as np

from ...model.common import (
    ceil_div,
    classify_bound,
    mix_launch_us,
    mixed_bandwidth,
    pipes,
    roofline_us,
    round_up,
)
from .problem import Matmul


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


def warm_inputs(p: Matmul, chip) -> bool:
    """Whether A and B are already in L2 when the kernel starts: the chip value `l2_warm_inputs` (a measurement
    condition, not a profile constant; 0 when absent) says the operands were just touched (a benchmark loop calling
    the kernel on the same inputs, as torch.matmul's timed in a loop), and they stay resident only if both fit the
    usable L2 together (docs/model.md section 11, "Warm L2")."""
    if not chip.get("l2_warm_inputs", 0):
        return False
    inputs = float(p.batch * (p.M * p.K * p.in_bytes + p.K * p.N * p.b_bytes))
    return inputs <= chip["l2_bytes"] * chip["l2_usable_fraction"]


def _compulsory_hbm(p: Matmul, chip) -> float:
    """The roofline's HBM bytes: each input read once (none when they are warm in L2, warm_inputs), and the output
    written once unless it stays in the write-back L2 (_write_share: it fits the usable part; the kernel ends before
    it reaches HBM)."""
    out = float(p.batch * p.M * p.N * p.out_bytes)
    fits = out <= chip["l2_bytes"] * chip["l2_usable_fraction"]
    warm = float(p.batch * (p.M * p.K * p.in_bytes + p.K * p.N * p.b_bytes)) if warm_inputs(p, chip) else 0.0
    return p.compulsory_bytes - (out if fits else 0.0) - warm


def _reduction_us(p: Matmul, chip, c: dict) -> np.ndarray:
    """Split-K's extra work: zero the fp32 output, and cast it to the output dtype in a second (vector) kernel.

    A quantised matmul dequantises in that pass, reading its scales once, and runs it on the vector cores of the
    same MIX kernel (CATLASS 52_quant_multi_core_splitk: the AIVs reduce and dequantise after a cross-core barrier):
    instead of a launch of its own, one MIX launch (model.common.mix_launch_us; none more where the int4 widening
    already makes the kernel MIX) and the barrier: every core's partials landed in GM, a flag, the first read (two
    GM latencies and a flag, as a hand-off)."""
    mn = float(p.batch * p.M * p.N)
    hbm = chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"]
    if p.quant:
        barrier = (2 * chip["gm_latency_cycles"] + chip["sync_cycles"]) / chip.clock_hz * 1e6
        launch = (0.0 if p.b_int4 else mix_launch_us(chip)) + barrier
    else:
        launch = chip["head_base_us"]
    cast = 0.0 if p.out_bytes == 4 else ((mn * (4 + p.out_bytes) + p.scale_bytes) / hbm * 1e6 + launch)
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
    # A MIX launch starts the vector cores too (S6: a MIX kernel also starts the idle core type), once per launch
    # on separated cores (model.common.mix_launch_us; fitted by bench/ascend_fit.py --fit-mix)
    mix = np.where(passes > 0, mix_launch_us(chip), 0.0) * np.ones(n)
    return {
        "extra": extra,
        "vec": per_core * vec_busy,
        "mte3": per_core * mte3,
        "head_us": mix,
        "handoff": hand,
        # B's int4 panels from HBM, once each (the cube's reads of the int8 workspace hit L2)
        "hbm": float(p.batch * p.K * p.N) * 0.5 if p.b_int4 else 0.0,
    }


def _fill(cost: dict, ui: np.ndarray, out: dict) -> np.ndarray:
    """What every working core pays once besides its tiles: the first chunk's load (the interior tile's), and with
    preload the bubble its last tile could not hide (no successor): the interior tile's, or less when the busiest
    core's tiles hid less in all (a core with one small edge tile), so that preload never adds time."""
    return cost["fill"][ui, 0] + np.minimum(cost["drain"][ui, 0], out["drain"])


def _sub_sizes(g: dict, pieces) -> tuple:
    """The re-cut sub-tile's rows and columns: the tile cut into `pieces` along its longer side, in 16s."""
    along_m = g["tm"] >= g["tn"]
    sub_tm = np.where(along_m, round_up(ceil_div(g["tm"], pieces), 16), g["tm"])
    sub_tn = np.where(along_m, g["tn"], round_up(ceil_div(g["tn"], pieces), 16))
    return sub_tm, sub_tn


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
    sub_tm, sub_tn = _sub_sizes(g, pieces) if need_sub.any() else (0, 0)  # 0 where no row is re-cut
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
