"""Flash attention forward on Ascend (FlashAttentionScore / CATLASS FA-infer style): cube, vector and transfers.

A *task* is one (batch, query-head block, s1 block, kv chunk): `block_s1` query rows (when S1 < block_s1, the block
packs the rows of several query heads of one GQA group, as CATLASS's FA infer does: `heads_per_block` = the largest
divisor of heads/kv_heads with heads_per_block * S1 <= block_s1) against the keys of its kv chunk (`kv_split` chunks
of whole s2 blocks). A task walks its s2 blocks of `block_s2` keys; each *step* is

* cube (AIC): S = Q Kᵀ (rows x keys x D) and O_tmp = P V (rows x D x keys), 16 x 16 x C0 fractals, real padding;
* vector (AIV; two per AIC on separated chips, each half the rows; the core's own vector unit on coupled chips):
  scale, row max, subtract, exp, row sum, cast P to fp16 (a mask pass on blocks the causal diagonal crosses),
  then the rescale of the output accumulator by exp(m_old - m_new) and the add of O_tmp;
* transfers: K and V into L1 (re-streamed for every s1 block and query head: L2 hits after the first), and on
  separated chips the exchange through GM/L2 of S (fp32), P (fp16) and O_tmp (fp32), each written and read.

A step's pipes overlap when the cube runs `preload` steps ahead of the vector side: the step costs the slowest
pipeline or the dependency chain over (preload + 1) steps in flight, whichever is longer (docs/model.md §8).
Tasks go to cores in order (`plain`) or heaviest first in snake order (`balanced`); the kernel takes the busiest
core, a combine phase when kv_split > 1, the HBM floor and the launch head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ProblemError
from ...model.common import (
    BOUND_SAFETY,
    ceil_div,
    classify_bound,
    group_rows,
    mix_launch_us,
    mixed_bandwidth,
    pipes,
    roofline_us,
    round_up,
)
from ...operator import Operator, register
from ...target import Target
from . import views_ascend as views
from .ascend_tasks import (  # noqa: F401  (tests read the task geometry here too)
    NTYPES,
    STEP_TYPES,
    _block_sums,
    _deal_plain,
    _deal_snake,
    _divisors,
    _kinds,
    _residue_counts,
    geometry,
    schedule,
    work_total,
)
from .problem import FlashAttention

KNOBS = ("block_s1", "block_s2", "preload", "double_buffer", "core_split", "kv_split")
PLAIN, BALANCED = 0, 1
RULES = {
    "align": ("block_s1", "block_s2"),
    "kv_split": ("block_s2", "kv_split"),
    "l0a": ("block_s1", "block_s2", "double_buffer"),
    "l0b": ("block_s2", "double_buffer"),
    "l0c": ("block_s1", "block_s2", "double_buffer"),
    "l1": ("block_s1", "block_s2", "double_buffer", "preload"),
    "ub": ("block_s1", "block_s2", "double_buffer", "preload"),
}
RULE_TEXT = {
    "align": "block_s1 and block_s2 multiples of 16 (the cube fractal's M and N)",
    "kv_split": "kv_split <= the number of s2 blocks (every kv chunk holds at least one block)",
    "l0a": "the MMAD's A tile, rows16 x max(D, 128-key chunk) x 2 B x (1 + double_buffer) <= L0A",
    "l0b": "the MMAD's B tile, min(block_s2, 128) keys x min(D, 128) x 2 B x (1 + double_buffer) <= L0B",
    "l0c": "the fp32 result tile, rows16 x max(128-key chunk, min(D, 128)) x 4 B x (1 + double_buffer) <= L0C",
    "l1": "Q block + K and V blocks x (1 + double_buffer) + P blocks x max(1 + double_buffer, preload + 1) <= L1",
    "ub": "per vector core: a 32 KB fp32 row slice of S and its fp16 P x (1 + double_buffer), the O_tmp slice, the "
    "fp32 output accumulator of its rows and (preload + 1) sets of row max/sum/correction <= UB",
}
# Per-element vector costs, in fp32 vector operations (64 lanes a cycle per AIV): the profile's [efficiency] may
# override them. All are guesses (docs/model.md §8): no Ascend measurement calibrates them.
CONSTANTS = {
    "fa_score_ops": 5.0,  # per score element: scale, row max, subtract max, row sum, cast P to fp16
    "fa_exp_ops": 4.0,  # per score element: exp, a multi-cycle transcendental, in simple-op equivalents
    "fa_mask_ops": 2.0,  # per element of a block the causal diagonal crosses: compare and select
    "fa_out_ops": 2.0,  # per accumulator element per step: multiply by exp(m_old - m_new), add O_tmp
    "fa_vec_instrs": 12.0,  # vector instructions per row slice per step (issue cost on the AIV's scalar unit)
    "fa_l2_mixed_ratio": 1.75,  # the L2's read+write bandwidth over the profile's read-only l2_gbps (S5: ~7 TB/s)
}
L0_CHUNK = 128  # keys (and D columns) per L0 MMAD tile: FlashAttentionScore's BMM1 baseN, CATLASS's L0 tile
VEC_SLICE_BYTES = 32768  # fp32 bytes of S a vector core holds at once: FlashAttentionScore's 8x1024 fp32
STAT_BYTES = 32  # one 32-byte block per row for each of max, sum and the rescale factor (broadcast form)


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


# ------------------------------------------------------------------------------------------------- capacity


def _vector_per_core(chip) -> int:
    """Vector units serving one task: the AIC's AIVs on a separated chip (2 on 910B), the core's own on a coupled
    one."""
    return 1 if chip["coupled"] else max(1, int(chip["vector_cores"]) // chip.cores)


def buffers(p: FlashAttention, chip, c: dict) -> dict:
    """Bytes each on-chip buffer holds for the candidates' full block (the capacity rules' left-hand sides)."""
    b = p.in_bytes
    c0 = 32 // b
    g = geometry(p, _i(c, "block_s1"), _i(c, "block_s2"), 1)
    r16 = round_up(g["rows"], 16)
    w16 = round_up(g["w"], 16)
    n0 = np.minimum(w16, L0_CHUNK)
    dk = min(int(round_up(p.D, c0)), L0_CHUNK)
    dn = min(int(round_up(p.D, 16)), L0_CHUNK)
    buf = 1 + _i(c, "double_buffer") if "double_buffer" in c else 1
    inflight = _i(c, "preload") + 1 if "preload" in c else 1
    rv = ceil_div(g["rows"], _vector_per_core(chip))
    slice_rows = np.clip(VEC_SLICE_BYTES // (w16 * 4), 1, rv)
    d16 = round_up(p.D, 16)
    return {
        "l0a": r16 * np.maximum(dk, n0) * b * buf,
        "l0b": n0 * dn * b * buf,
        "l0c": r16 * np.maximum(n0, dn) * 4 * buf,
        "l1": r16 * round_up(p.D, c0) * b
        + 2 * w16 * round_up(p.D, c0) * b * buf
        + r16 * w16 * b * np.maximum(buf, inflight),
        "ub": slice_rows * w16 * (4 + b) * buf
        + slice_rows * d16 * 4
        + rv * d16 * 4
        + inflight * 3 * rv * STAT_BYTES,
        "workspace": inflight * (r16 * w16 * 4 + r16 * w16 * b + r16 * d16 * 4),
    }


# ------------------------------------------------------------------------------------------------- costs


def _rates(p: FlashAttention, chip, k: dict, active) -> dict:
    f = chip.clock_hz
    return {
        "f": f,
        "port": chip["gm_to_l1_bytes_per_cycle"] * f,
        "ub_out": chip["ub_to_gm_bytes_per_cycle"] * f,
        "fix": chip["fixpipe_bytes_per_cycle"] * f,
        "hbm": chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"] / active,
        "l2": chip["l2_gbps"] * 1e9 * chip["l2_efficiency"] * k["fa_l2_mixed_ratio"] / active,
        # fp32 operations a cycle per vector unit (half the fp16 lanes, no FMA pairing)
        "lanes": chip["vector_flops_per_cycle_fp16"] / 4 * chip["mac_efficiency"],
        "mac_cycle": 16 * 16 * (32 // p.in_bytes) / (chip.macs_per_cycle(p.dtype) * chip["mac_efficiency"]),
        "lat": chip["gm_latency_cycles"] / f,
        "sync": chip["sync_cycles"] / f,
        "spi": chip["scalar_cycles_per_instr"],
        "spl": chip["scalar_cycles_per_loop"],
    }


def step_cost(p: FlashAttention, chip, k: dict, c: dict, rate: dict, r, w, masked, hit_kv) -> dict:
    """Seconds one step (r query rows x w keys; `masked`: the causal diagonal crosses it) keeps each pipeline of
    its core busy, the step's interval with `preload` steps in flight and its dependency chain. Broadcasts."""
    f, b = rate["f"], p.in_bytes
    c0 = 32 // b
    sep = not chip["coupled"]
    vper = _vector_per_core(chip)
    D = p.D
    r16, w16, wc0 = round_up(r, 16), round_up(w, 16), round_up(w, c0)
    dc0, d16 = round_up(D, c0), round_up(D, 16)
    buf = _i(c, "double_buffer") == 1
    pre = _i(c, "preload")
    # --- cube: QKᵀ (M = rows, N = keys, K = D) and PV (M = rows, N = D, K = keys), whole fractals
    fractals = (r16 // 16) * (w16 // 16) * (dc0 // c0) + (r16 // 16) * (d16 // 16) * (wc0 // c0)
    t_mac = fractals * rate["mac_cycle"] / f
    chunks = ceil_div(w16, L0_CHUNK)
    a_bytes = (r16 * dc0 * chunks + r16 * wc0) * b  # Q once per 128-key L0 chunk, P once
    b_bytes = (w16 * dc0 + wc0 * d16) * b  # K, V
    t_mte1 = (a_bytes / chip["l1_to_l0a_bytes_per_cycle"] + b_bytes / chip["l1_to_l0b_bytes_per_cycle"]) / f
    t_cube = np.where(buf, np.maximum(t_mac, t_mte1), t_mac + t_mte1)
    # --- transfers. AIC: K and V (L2 hits after the first reader), P back into L1; fixpipe drains S and O_tmp
    kv = 2.0 * w * D * b
    t_kv = kv / np.minimum(rate["port"], mixed_bandwidth(hit_kv, rate["l2"], rate["hbm"]))
    s_bytes, p_bytes, o_bytes = r * w16 * 4.0, r * wc0 * b * 1.0, r * d16 * 4.0
    drain = (r16 * w16 + r16 * d16) * 4.0
    t_fix = drain / rate["fix"]
    rv = ceil_div(r, vper)
    if sep:  # through GM/L2: S and O_tmp read by the AIVs, P written by them and read by the AIC
        t_p = p_bytes / np.minimum(rate["port"], rate["l2"])
        t_vin = rv * (w16 + d16) * 4.0 / rate["port"]
        t_vout = rv * wc0 * b * 1.0 / rate["ub_out"]
        exchange = 2.0 * (s_bytes + p_bytes + o_bytes)
    else:  # coupled: L0C -> UB and UB -> L1 inside the core (the fixpipe rate stands for both paths)
        t_p = r16 * wc0 * b / rate["fix"]
        t_vin = t_vout = np.zeros(np.shape(t_p))
        exchange = np.zeros(np.shape(t_p))
    # reads and write-backs use separate channels (S10 gives a read and a write rate per core)
    t_aic = np.maximum(t_kv + t_p, t_fix)
    t_aiv = np.maximum(t_vin, t_vout)
    t_l2 = (kv + exchange) / rate["l2"]  # everything the core moves through the L2, at its share
    transfer = np.maximum(np.maximum(t_aic, t_aiv), t_l2)
    # --- vector, per unit: its rows of the score tile in 32 KB row slices
    ops = (
        rv * w * (k["fa_score_ops"] + k["fa_exp_ops"] + masked * k["fa_mask_ops"]) + rv * D * k["fa_out_ops"]
    )
    t_vec = ops / rate["lanes"] / f
    slice_rows = np.clip(VEC_SLICE_BYTES // (w16 * 4), 1, rv)
    slices = ceil_div(rv, slice_rows)
    # AIC: K, V, P loads; per 128-key L0 chunk an L0A load, an L0B load and an MMAD (QK, then PV per D chunk);
    # two fixpipes; four flags
    aic_instr = 3 + 3 * chunks * (1 + ceil_div(d16, L0_CHUNK)) + 2 + 4
    aiv_instr = slices * k["fa_vec_instrs"] + 3 + 4
    sc_aic = (aic_instr * rate["spi"] + rate["spl"]) / f
    sc_aiv = (aiv_instr * rate["spi"] + rate["spl"]) / f
    t_scalar = np.maximum(sc_aic, sc_aiv) if sep else sc_aic + sc_aiv  # coupled: one scalar unit
    # --- composition: each side overlaps its transfers with its compute when double-buffered
    side_c = np.where(buf, np.maximum(t_cube, t_aic), t_cube + t_aic)
    side_v = np.where(buf, np.maximum(t_vec, t_aiv), t_vec + t_aiv)
    slowest = np.maximum(np.maximum(side_c, side_v), np.maximum(t_l2, t_scalar))
    # the chain of one step: QK, S out, softmax, P back, PV, O_tmp out, rescale; three hand-offs (through GM on
    # a separated chip: a write landing in L2 and a flag); K/V loads join it without double buffering
    hand = (rate["lat"] + rate["sync"]) if sep else rate["sync"]
    chain = t_cube + t_fix + t_vin + t_vec + t_vout + t_p + np.where(buf, 0.0, t_kv) + 3 * hand
    interval = np.maximum(slowest, chain / (pre + 1))
    return {
        "interval": interval,
        "slowest": slowest,
        "chain": chain,
        "mac": t_mac,
        "mte1": t_mte1,
        "cube": t_cube,
        "vec": t_vec,
        "scalar": t_scalar,
        "transfer": transfer,
        "aic": t_aic,
        "aiv": t_aiv,
        "l2": t_l2,
        "fixpipe": t_fix,
        "mte3": t_vout,
        "reads": np.maximum(t_kv + t_p, t_vin),
        "kv_bytes": kv * np.ones(np.shape(t_p)),
        "exchange": exchange * np.ones(np.shape(t_p)),
    }


def task_cost(p: FlashAttention, chip, c: dict, rate: dict, r, hit_q) -> np.ndarray:
    """Seconds a task adds beyond its steps: its Q block in, then the output out (the final division and cast and
    O in fp16, or with kv_split > 1 the fp32 partial O and the row max and sum); overlapped with the steps of
    the neighbouring tasks when anything is pipelined, in series otherwise."""
    b, f = p.in_bytes, rate["f"]
    ks = _i(c, "kv_split")
    rv = ceil_div(r, _vector_per_core(chip))
    t_q = r * p.D * b / np.minimum(rate["port"], mixed_bandwidth(hit_q, rate["l2"], rate["hbm"]))
    epi_vec = np.where(ks == 1, rv * p.D * 2.0 / rate["lanes"] / f, 0.0)
    out = np.where(ks == 1, rv * p.D * b, rv * (p.D * 4 + 2 * STAT_BYTES)) / rate["ub_out"]
    serial = (_i(c, "preload") == 0) & (_i(c, "double_buffer") == 0)
    loop = rate["spl"] / f
    return np.where(serial, t_q + epi_vec + out, np.maximum(t_q, epi_vec + out)) + loop


def _combine(p: FlashAttention, chip, k: dict, c: dict, g: dict, partial_rows, rate: dict) -> np.ndarray:
    """kv_split > 1: after a barrier, the vector units read every partial O (fp32) with its row max and sum,
    rescale and add them, divide and write O: one more vector pass, dealt evenly over all vector units."""
    f, b = rate["f"], p.in_bytes
    units = chip.cores if chip["coupled"] else int(chip["vector_cores"]) or chip.cores
    rows_all = float(p.B * p.heads * p.S1)
    tasks = g["copies"] * g["n1"]
    per_unit = ceil_div(tasks, units) / np.maximum(tasks, 1)  # share of all the work the busiest unit does
    reads = partial_rows * (p.D * 4.0 + 2 * STAT_BYTES)
    ops = partial_rows * (p.D * 2.0 + k["fa_exp_ops"] + 4) + rows_all * p.D * 2.0
    l2_unit = rate["l2"] * rate["active"] / units
    t = np.maximum(
        np.maximum(reads / np.minimum(rate["port"], l2_unit), ops / rate["lanes"] / f),
        rows_all * p.D * b / rate["ub_out"],
    )
    barrier = 2 * rate["lat"] + rate["sync"]
    return np.where(_i(c, "kv_split") > 1, t * per_unit + barrier, 0.0)


# ------------------------------------------------------------------------------------------------- target


def _view(p, chip, tiling, row):
    return views.ascendc_fa_view(p, chip, tiling, row, _vector_per_core(chip))


ASCENDC_FA = Target(
    name="ascendc_fa",
    doc="a FlashAttentionScore / CATLASS FA-infer style AscendC kernel: s1/s2 bases, core split, preload depth, "
    "kv split and the buffers a block fills",
    schema=views.ASCENDC_FA_SCHEMA,
    view=_view,
    check=views.check_ascendc_fa,
    emit=views.ASCENDC_TILING.emit,
    language="cpp",
    includes=views.ASCENDC_TILING.includes,
    entry=views.ASCENDC_TILING.entry,
)


@dataclass
class _Work:
    """What FlashAttentionAscend.estimate() computes before it deals the tasks to cores (quick_bound reads it too):
    the geometry, each candidate's total work columns (n, NTYPES) and task count, the per-type costs `cols`
    (`interval` is what a step or task of each type adds to its core), the pipeline fill, the combine phase, and
    the chip totals: bytes, the HBM floor (seconds), cores used and the head (us)."""

    n: int
    g: dict
    first: np.ndarray
    gi: np.ndarray
    total: np.ndarray
    tasks: np.ndarray
    cols: dict
    fill: np.ndarray
    combine: np.ndarray
    partial_bytes: np.ndarray
    exchange: np.ndarray
    hbm: np.ndarray
    l2: np.ndarray
    l2_read: np.ndarray
    hbm_read: np.ndarray
    hbm_floor: np.ndarray
    used: np.ndarray
    head: np.ndarray


@register
class FlashAttentionAscend(Operator):
    OP = "flash_attention"
    FAMILY = "ascend"
    PROBLEM = FlashAttention
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    CONSTANTS = CONSTANTS
    GRID_KNOBS = ("block_s1", "block_s2", "kv_split")
    SHAPE_KNOBS = ("block_s1", "block_s2", "kv_split")
    SAMPLE_ORDER = ("block_s1", "block_s2", "kv_split", "double_buffer", "preload", "core_split")
    CHECKLIST = {
        "cube": "compute bound: the cube runs QKᵀ and PV; fewer padded rows (block_s1 a multiple of 16, pack GQA "
        "heads when S1 is small), skip fully masked blocks",
        "vector": "vector bound: exp, max, sum and the rescale per score element on the AIVs; larger block_s2 "
        "amortises the per-step rescale, fewer masked blocks cut the mask pass",
        "mte2": "transfer bound: K/V streaming (share K/V across GQA heads, larger block_s1 re-streams it less) "
        "or the cube<->vector exchange of S, P and O_tmp through L2 (larger block_s2 amortises O_tmp)",
        "mte1": "L1->L0 bound: Q is reloaded per 128-key L0 chunk; larger block_s1 per K/V load",
        "fixpipe": "write-out bound: the fixpipe drains S and O_tmp in fp32 every step",
        "mte3": "UB->GM bound: P and the output leave the vector cores at 64 B/cycle",
        "scalar": "scalar bound: fewer, larger steps (larger blocks), fewer vector slices",
        "latency": "no pipe saturated: raise preload so the cube runs ahead of the vector side, double-buffer "
        "K/V and the score tiles",
    }
    WHAT_IF = {
        "preload": ("latency: let the cube run ahead of the vector side", (0, 1, 2, 3)),
        "core_split": ("multi-core: deal tasks by real (unmasked) work", (PLAIN, BALANCED)),
        "kv_split": ("multi-core: split S2 across cores with a combine step", (1, 2, 4, 8, 16)),
        "double_buffer": ("latency: double-buffer K/V and the score tiles", (0, 1)),
        "block_s2": ("exchange: key block length (O_tmp and rescale per step)", (128, 256, 512)),
    }
    TARGETS = {"ascendc_fa": ASCENDC_FA}

    # ------------------------------------------------------------------ rules

    def check(self, p: FlashAttention, chip) -> None:
        """FlashAttentionScore-style kernels run fp16 and bf16 inputs (fp32 softmax inside); the chip's cube must
        have the dtype."""
        if p.dtype not in ("fp16", "bf16"):
            raise ProblemError(f"dtype: flash attention on Ascend runs fp16 or bf16, got {p.dtype!r}")
        chip.require_dtype(p.dtype)

    def feasible(self, p: FlashAttention, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if r in RULES and all(k in c for k in RULES[r])]
        out = {}
        need = {}
        if set(names) & {"l0a", "l0b", "l0c", "l1", "ub"}:
            sub = dict(c)
            sub.setdefault("block_s1", np.full(np.shape(c["block_s2"]), 16))
            need = buffers(p, chip, sub)
        cap = {"l0a": "l0a_bytes", "l0b": "l0b_bytes", "l0c": "l0c_bytes", "l1": "l1_bytes", "ub": "ub_bytes"}
        for r in names:
            if r == "align":
                out[r] = (_i(c, "block_s1") % 16 == 0) & (_i(c, "block_s2") % 16 == 0)
            elif r == "kv_split":
                out[r] = _i(c, "kv_split") <= ceil_div(p.S2, _i(c, "block_s2"))
            else:
                out[r] = np.asarray(need[r] <= chip[cap[r]])
        return {r: np.broadcast_to(m, np.shape(c[RULES[r][0]])).copy() for r, m in out.items()}

    def dominated(self, p: FlashAttention, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """A block larger than the problem clamps to it: block_s1 (block_s2) is a twin of a smaller value of its
        domain with the same heads per block, rows and s1 blocks (the same keys and s2 blocks); the smaller value
        is kept (every rule and every cost reads the clamped geometry only)."""
        domains = domains or {}
        out = np.zeros(np.shape(next(iter(c.values()))), dtype=bool)
        if "block_s1" in c and "block_s1" in domains:
            bs1 = _i(c, "block_s1")
            g = geometry(p, bs1, 16, 1)
            for v in domains["block_s1"]:
                if v % 16:
                    continue
                h = geometry(p, v, 16, 1)
                same = (h["gp"] == g["gp"]) & (h["n1"] == g["n1"]) & (h["rows_last"] == g["rows_last"])
                out |= (v < bs1) & same & (h["rows"] == g["rows"])
        if "block_s2" in c and "block_s2" in domains:
            bs2 = _i(c, "block_s2")
            for v in domains["block_s2"]:
                if v % 16 == 0:
                    out |= (v < bs2) & (v >= p.S2)
        return out

    # ------------------------------------------------------------------ the model

    def _costs(self, p: FlashAttention, chip, c: dict) -> _Work:
        """What estimate() computes before it deals the tasks to cores: the geometry, each (block_s1, block_s2,
        kv_split) group's total work columns, the traffic, the per-type costs (cols, `cost` the intervals), the
        pipeline fill, the combine phase and the chip totals. quick_bound() reads the same."""
        k = self.constants(chip)
        n = len(c["block_s1"])
        bs1, bs2, ks = _i(c, "block_s1"), _i(c, "block_s2"), _i(c, "kv_split")
        cores = chip.cores
        g = geometry(p, bs1, bs2, ks)
        first, gi = group_rows([bs1, bs2, ks])
        total = np.stack([work_total(p, int(bs1[i]), int(bs2[i]), int(ks[i])) for i in first])[gi]
        tasks = total[:, STEP_TYPES] + total[:, STEP_TYPES + 1]
        active = np.minimum(cores, np.maximum(tasks, 1))
        # --- traffic: K/V is re-read by every task that needs it; the first reader misses, the rest hit while the
        # K/V heads in flight fit in the usable L2, else each wave of a head's tasks misses once
        b = p.in_bytes
        w_of = [g["w"], g["w"], g["w_last"], g["w_last"]] * 2
        r_of = [g["rows"]] * 4 + [g["rows_last"]] * 4
        steps_tot = total[:, :STEP_TYPES]
        kv_reads = sum(steps_tot[:, t] * 2.0 * w_of[t] * p.D * b for t in range(STEP_TYPES))
        kv_head = 2.0 * p.S2 * p.D * b
        per_head = (p.group // g["gp"]) * g["n1"] * ks
        in_flight = np.minimum(p.B * p.kv_heads, ceil_div(cores, per_head) + 1)
        fits = in_flight * kv_head <= chip["l2_bytes"] * chip["l2_usable_fraction"]
        rereads = np.where(fits, 1, np.minimum(ceil_div(per_head, cores), (p.group // g["gp"]) * g["n1"]))
        kv_hbm = np.minimum(p.B * p.kv_heads * kv_head * rereads, kv_reads)
        hit_kv = 1.0 - kv_hbm / np.maximum(kv_reads, 1.0)
        hit_q = 1.0 - 1.0 / ks
        rate = _rates(p, chip, k, active)
        rate["active"] = active
        # --- per-type costs (n, NTYPES): the 8 step types' intervals, then the 2 task types
        cols = {}
        for t in range(STEP_TYPES):
            st = step_cost(p, chip, k, c, rate, r_of[t], w_of[t], t % 2, hit_kv)
            for key, v in st.items():
                cols.setdefault(key, np.zeros((n, NTYPES)))[:, t] = v
        for rt, r in enumerate((g["rows"], g["rows_last"])):
            cols["interval"][:, STEP_TYPES + rt] = task_cost(p, chip, c, rate, r, hit_q)
        fill = cols["chain"][:, 0] - cols["interval"][:, 0] + rate["lat"]
        partial_rows = total[:, STEP_TYPES] * g["rows"] + total[:, STEP_TYPES + 1] * g["rows_last"]
        combine = _combine(p, chip, k, c, g, partial_rows, rate)
        # --- chip totals
        rows_all = float(p.B * p.heads * p.S1)
        q_reads = partial_rows * p.D * b
        exchange = np.einsum("nt,nt->n", cols["exchange"], total)
        partial_bytes = np.where(ks > 1, partial_rows * (p.D * 4.0 + 2 * STAT_BYTES), 0.0)
        spill = partial_bytes > chip["l2_bytes"] * chip["l2_usable_fraction"]
        o_bytes = rows_all * p.D * b
        hbm = rows_all * p.D * b + kv_hbm + o_bytes + np.where(spill, 2 * partial_bytes, 0.0)
        l2_read = kv_reads + q_reads + exchange / 2 + partial_bytes
        l2 = l2_read + exchange / 2 + partial_bytes + o_bytes
        hbm_read = rows_all * p.D * b + kv_hbm + np.where(spill, partial_bytes, 0.0)
        hbm_floor = hbm / (chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"])
        used = np.minimum(cores, tasks)
        # a MIX kernel on separated cores (the cube's QK/PV and the vector side's softmax): its launch starts both
        # core types (model.common.mix_launch_us)
        head = chip["head_base_us"] + chip["head_per_core_us"] * used + mix_launch_us(chip)
        return _Work(
            n=n,
            g=g,
            first=first,
            gi=gi,
            total=total,
            tasks=tasks,
            cols=cols,
            fill=fill,
            combine=combine,
            partial_bytes=partial_bytes,
            exchange=exchange,
            hbm=hbm,
            l2=l2,
            l2_read=l2_read,
            hbm_read=hbm_read,
            hbm_floor=hbm_floor,
            used=used,
            head=head,
        )

    def quick_bound(self, p: FlashAttention, chip, c: dict) -> np.ndarray:
        """Below estimate() for every candidate, with no deal of the tasks: both core splits deal the same total
        work, so the busiest core's intervals are at least the mean core's, total work x cost / cores."""
        w = self._costs(p, chip, c)
        make = np.einsum("nt,nt->n", w.cols["interval"], w.total) / chip.cores + w.fill
        return (np.maximum(make + w.combine, w.hbm_floor) * 1e6 + w.head) * BOUND_SAFETY

    def _deal(self, p: FlashAttention, chip, c: dict, w) -> tuple[np.ndarray, ...]:
        """Each candidate's tasks dealt to the cores both ways (plain and balanced, `schedule` once per grid): the
        per-core busy times of both (n, cores), the task counts of the split the candidate runs (n, cores, NTYPES)
        and the work columns of its busiest core (n, NTYPES)."""
        cost = w.cols["interval"]
        bs1, bs2, ks = _i(c, "block_s1"), _i(c, "block_s2"), _i(c, "kv_split")
        split = _i(c, "core_split")
        groups = [schedule(p, chip.cores, int(bs1[i]), int(bs2[i]), int(ks[i])) for i in w.first]
        sched_plain = np.stack([s["plain"] for s in groups])
        sched_bal = np.stack([s["balanced"] for s in groups])
        per_plain = np.einsum("nt,nkt->nk", cost, sched_plain[w.gi])
        per_bal = np.einsum("nt,nkt->nk", cost, sched_bal[w.gi])
        per = np.where((split == BALANCED)[:, None], per_bal, per_plain)
        crit_core = per.argmax(axis=1)
        counts = np.where((split == BALANCED)[:, None, None], sched_bal[w.gi], sched_plain[w.gi])
        crit = counts[np.arange(w.n), crit_core]  # (n, NTYPES) work columns of the busiest core
        return per_plain, per_bal, counts, crit

    def estimate(self, p: FlashAttention, chip, c: dict) -> dict[str, np.ndarray]:
        """The estimate record plus, for the critical core, cube/vector/transfer/sync time, the exchange bytes,
        the makespan and balance of both core splits, the combine phase and the buffers a block fills."""
        w = self._costs(p, chip, c)
        n, g, tasks, cols, fill = w.n, w.g, w.tasks, w.cols, w.fill
        split = _i(c, "core_split")
        cores = chip.cores
        per_plain, per_bal, counts, crit = self._deal(p, chip, c, w)
        make_plain = per_plain.max(axis=1) + fill
        make_bal = per_bal.max(axis=1) + fill
        make = np.where(split == BALANCED, make_bal, make_plain)
        combine, exchange, partial_bytes, hbm_floor, used, head = (
            w.combine,
            w.exchange,
            w.partial_bytes,
            w.hbm_floor,
            w.used,
            w.head,
        )
        hbm, l2, l2_read, hbm_read = w.hbm, w.l2, w.l2_read, w.hbm_read
        main = make + combine
        time_us = np.maximum(main, hbm_floor) * 1e6 + head
        # --- pipes of the critical core (us)
        zero = np.zeros(n)

        def crit_sum(key):
            return np.einsum("nt,nt->n", cols[key][:, :STEP_TYPES], crit[:, :STEP_TYPES]) * 1e6

        pipe = {q: zero for q in pipes("ascend")}
        pipe.update(
            mac=crit_sum("mac"),
            vec=crit_sum("vec"),
            scalar=crit_sum("scalar"),
            mte1=crit_sum("mte1"),
            mte2=crit_sum("transfer"),
            mte3=crit_sum("mte3"),
            fixpipe=crit_sum("fixpipe"),
        )
        slowest = crit_sum("slowest")
        busy = make * 1e6
        bound = classify_bound(
            {
                "mac": pipe["mac"],
                "vec": pipe["vec"],
                "scalar": pipe["scalar"],
                "mte1": pipe["mte1"],
                "mte2": pipe["mte2"],
            },
            busy,
        )
        bound = np.where(hbm_floor > main, "mte2", bound)
        mean_plain = per_plain.mean(axis=1) + fill * np.minimum(cores, tasks) / cores
        mean_bal = per_bal.mean(axis=1) + fill * np.minimum(cores, tasks) / cores
        buf = buffers(p, chip, c)
        task_counts = counts[:, :, STEP_TYPES] + counts[:, :, STEP_TYPES + 1]
        return {
            "time_us": time_us,
            "bound": bound,
            **{f"{q}_us": v for q, v in pipe.items()},
            "cores_used": used.astype(np.int64),
            "waves": ceil_div(tasks, cores).astype(np.int64),
            "balance": np.where(split == BALANCED, mean_bal / make_bal, mean_plain / make_plain),
            "l2_hit_rate": np.clip(1.0 - hbm_read / np.maximum(l2_read, 1.0), 0.0, 1.0),
            "hbm_bytes": hbm,
            "l2_bytes": l2,
            "roofline_us": roofline_us(
                p.flops, p.compulsory_bytes, chip.peak_tflops(p.dtype) * 1e12, chip["hbm_gbps"] * 1e9, head
            ),
            "tiles": tasks.astype(np.int64),
            "tasks_per_core_max": task_counts.max(axis=1).astype(np.int64),
            "heads_per_block": g["gp"] * np.ones(n, dtype=np.int64),
            "rows_per_block": g["rows"] * np.ones(n, dtype=np.int64),
            "cube_us": crit_sum("cube"),
            "vector_us": crit_sum("vec"),
            "transfer_us": pipe["mte2"],
            "aic_transfer_us": crit_sum("aic"),
            "aiv_transfer_us": crit_sum("aiv"),
            "l2_share_us": crit_sum("l2"),
            "sync_us": crit_sum("interval") - slowest + fill * 1e6,
            "exchange_bytes": exchange,
            "combine_us": combine * 1e6,
            "makespan_us": busy,
            "makespan_plain_us": make_plain * 1e6,
            "makespan_balanced_us": make_bal * 1e6,
            "balance_plain": mean_plain / make_plain,
            "balance_balanced": mean_bal / make_bal,
            "hbm_floor_us": hbm_floor * 1e6,
            "l0a_bytes": buf["l0a"] * np.ones(n, dtype=np.int64),
            "l0b_bytes": buf["l0b"] * np.ones(n, dtype=np.int64),
            "l0c_bytes": buf["l0c"] * np.ones(n, dtype=np.int64),
            "l1_bytes": buf["l1"] * np.ones(n, dtype=np.int64),
            "ub_bytes": buf["ub"] * np.ones(n, dtype=np.int64),
            "workspace_bytes": (buf["workspace"] * used + partial_bytes).astype(np.int64),
        }

    # ------------------------------------------------------------------ reporting

    def launch(self, p: FlashAttention, tiling: dict, row: dict) -> dict:
        """Block dim, waves, tasks, and the split the tasks are dealt by."""
        out = super().launch(p, tiling, row)
        out["schedule"] = f"core_split={tiling['core_split']}, kv_split={tiling['kv_split']}"
        return out

    def warm_start(self, p: FlashAttention, chip) -> dict:
        """CATLASS's FA infer: 128 x 128 blocks, KERNEL_TASK_NUM = 3 blocks in flight (preload 2), double-buffered
        S and O_tmp, tasks split by valid blocks, no kv split."""
        return dict(block_s1=128, block_s2=128, preload=2, double_buffer=1, core_split="balanced", kv_split=1)

    def advice(self, p: FlashAttention, chip, c: dict, est: dict, row: int) -> list[str]:
        """The critical core's cube, vector and transfer time, what bounds it, the exchange traffic, the balance
        with and without balancing, the GQA packing, the kv split's combine and the fixed costs (head, MIX
        launch)."""

        def v(key):
            return float(np.asarray(est[key])[row])

        t = {key: int(np.asarray(val)[row]) for key, val in c.items()}
        out = [
            f"per core (the busiest): cube {v('cube_us'):.1f} us, vector {v('vector_us'):.1f} us, transfers "
            f"{v('transfer_us'):.1f} us (AIC {v('aic_transfer_us'):.1f}, AIV {v('aiv_transfer_us'):.1f}, its L2 "
            f"share {v('l2_share_us'):.1f}); synchronisation preload={t['preload']} does not hide "
            f"{v('sync_us'):.1f} us; makespan {v('makespan_us'):.1f} us"
        ]
        sides = {"cube": v("cube_us"), "vector": v("vector_us"), "transfer": v("transfer_us")}
        top = max(sides, key=sides.get)
        if v("hbm_floor_us") > v("makespan_us") + v("combine_us"):
            out.append(
                f"bounded by HBM: {v('hbm_bytes') / 1e6:.1f} MB take {v('hbm_floor_us'):.1f} us, more than any "
                f"core's pipelines ({top} {sides[top]:.1f} us)"
            )
        elif sides[top] < 0.6 * v("makespan_us"):
            out.append(
                f"bounded by synchronisation: the longest pipeline ({top}, {sides[top]:.1f} us) fills "
                f"{sides[top] / max(v('makespan_us'), 1e-9):.0%} of the makespan; the cube and vector sides wait "
                "for each other (preload, double_buffer)"
            )
        else:
            others = ", ".join(f"{k} {x:.1f}" for k, x in sides.items() if k != top)
            out.append(f"bounded by the {top} pipeline: {sides[top]:.1f} us per core ({others} us)")
        if chip["coupled"]:
            out.append("exchange: S and P stay on chip (coupled core: L0C -> UB -> L1), no GM/L2 traffic")
        else:
            share = v("exchange_bytes") / max(v("l2_bytes"), 1.0)
            out.append(
                f"exchange through GM/L2: {v('exchange_bytes') / 1e6:.1f} MB (S fp32, P fp16, O_tmp fp32, each "
                f"written and read back), {share:.0%} of the L2 traffic"
            )
        bp, bb = v("balance_plain"), v("balance_balanced")
        mp, mb = v("makespan_plain_us"), v("makespan_balanced_us")
        which = "balanced" if t["core_split"] == BALANCED else "plain"
        out.append(
            f"balance across cores: plain {bp:.2f} (makespan {mp:.1f} us), balanced {bb:.2f} ({mb:.1f} us); "
            f"this tiling deals {which}"
        )
        gp = int(v("heads_per_block"))
        if gp > 1:
            out.append(
                f"GQA: {gp} query heads of a group share each block (S1 = {p.S1} < block_s1 = {t['block_s1']}): "
                f"{int(v('rows_per_block'))} rows per K/V pass"
            )
        if t["kv_split"] > 1:
            out.append(
                f"kv_split={t['kv_split']}: {int(v('tiles'))} tasks; the combine pass (partial O, max and sum "
                f"re-read) costs {v('combine_us'):.1f} us"
            )
        used = v("cores_used")
        fixed = (
            f"fixed costs: head {chip['head_base_us'] + chip['head_per_core_us'] * used:.1f} us (launch "
            f"{chip['head_base_us']:.2f} us + {used:.0f} cores x {chip['head_per_core_us']:.3f} us)"
        )
        if mix_launch_us(chip) > 0:
            fixed += f"; MIX launch {mix_launch_us(chip):.1f} us (the vector cores started beside the cube cores, once)"
        out.append(fixed + f"; makespan {v('makespan_us'):.1f} us of {v('time_us'):.1f}")
        return out + super().advice(p, chip, c, est, row)
