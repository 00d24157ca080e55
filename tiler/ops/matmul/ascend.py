"""Matmul on Ascend (AscendC Matmul / CATLASS style), the operator: its rules, knob resolution and estimate.

Tiles go to cores in the traversal order (tile i -> core i mod cores); the kernel takes the makespan over cores.
The physics sits beside it, one concern a module: ascend_knobs (the space's knobs and rules), ascend_tile (one
tile's per-pipe times), ascend_epilogue (head, dequant site, split-K reduction, quantised vector side, the
record), ascend_bounds (the search's lower bounds), ascend_tables (the fast estimate's memo tables).
docs/model.md gives every equation and its reason.
"""

from __future__ import annotations

import numpy as np

from ...errors import ProblemError
from ...model.common import (
    ceil_div,
    group_rows,
    group_rows_any,
    mix_launch_us,
    round_up,
    segment_efficiency,
    unique_inverse,
)
from ...model.schedule import (
    WORK_COLUMNS,
    block_grid,
    block_work,
    core_work_many,
    first_touch_only,
    pack_codes,
    panel_hits_many,
    same_walk,
)
from ...operator import Operator, register
from . import views
from .ascend_bounds import AscendBounds
from .ascend_epilogue import _fill, _head_us, _record, _reduction_us, _vector_side, dequant_site, has_fixpipe
from .ascend_knobs import KNOBS, LEVELS, RESOLVED, RULE_TEXT, RULES, SCHEDULE_KNOBS
from .ascend_tables import (
    _HIT_BITS,
    _SCHED_BITS,
    _TILE_KNOBS,
    _hit_table,
    _new_hits,
    _new_work,
    _per_core_table,
    _tile_costs,
    _work_table,
)
from .ascend_tile import (
    _b_elems,
    _chip_rates,
    _geometry,
    _k0,
    _k_slice,
    _l1_bytes,
    _per_core,
    _row_strides,
    _same,
    _segment_ceiling,
    _sizes,
    _stride_scalar,
    _tail,
    tile_cost,
)
from .problem import Matmul

# Names the tests and bench/ read from this module, which held them all before the split by concern (issue 32).
_MOVED = (_b_elems, _chip_rates, _row_strides, _segment_ceiling, _stride_scalar, _TILE_KNOBS, _vector_side)
_MOVED += (segment_efficiency,)

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
class MatmulAscend(AscendBounds, Operator):
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

    def totals_floors(self, p: Matmul, chip, seconds: float) -> dict[str, float]:
        """What one measured total proves about the constants (tiler.calibrate_totals raises the fit's box floors
        to it): the kernel's MMADs alone take flops / (peak x mac_efficiency) whatever its tiling (padding only
        adds MACs) and the measured time includes them, so mac_efficiency >= flops / (peak x measured)."""
        return {"mac_efficiency": p.flops / (chip.peak_tflops(p.dtype) * 1e12 * seconds)}

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
        if red > 0 and p.quant:
            text += (
                f"; split-K reduction {red:.1f} us (zero the fp32 output; the vector cores reduce and dequantise in "
                "the same MIX kernel after a cross-core barrier)"
            )
        elif red > 0:
            text += f"; split-K reduction {red:.1f} us (zero the fp32 output, cast pass with its own launch)"
        quant = float(np.asarray(est.get("quant_us", np.zeros(row + 1)))[row])
        if quant > 0:
            what = ["int4 -> int8 widening of B"] if p.b_int4 else []
            if dequant_site(p, chip) == "vector" and red == 0:
                trip = "L0C -> UB on chip" if chip["coupled"] else "int32 round trip through GM"
                what.insert(0, f"dequant epilogue ({p.scale} scale, {trip})")
            text += (
                f"; vector side {quant:.1f} us beyond the cube ({', '.join(what)}: its last tile and the "
                f"cube->vector hand-off are never hidden)"
            )
            mix = mix_launch_us(chip)
            if mix > 0:
                text += f"; MIX launch {mix:.1f} us (the vector cores started beside the cube cores, once)"
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
            # keyed by the rates' values, not the walk: walks with the same rates share a tile-cost row (tile_cost
            # is element-wise, so equal inputs give equal costs)
            pair = hits.values[hid]
            _, same_rates = group_rows_any([pair[:, 0].view(np.int64), pair[:, 1].view(np.int64)])
            hit_key[rows] = 1 + same_rates[wi.ravel()]
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
