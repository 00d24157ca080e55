"""Matmul on NVIDIA GPUs: the Triton kernel of shared/data/h200_reference_kernel.py, one program per output tile.

A program computes a BLOCK_M x BLOCK_N tile over one K slice (K / SPLIT_K) in `steps` K steps of BLOCK_K. Each
step moves an A and a B block global -> shared (cp.async, `num_stages` - 1 steps ahead), reads them shared ->
tensor cores (wgmma on Hopper, mma.sync otherwise) and accumulates in fp32 registers; the epilogue stores the tile
(or adds it into an fp32 buffer with atomics when SPLIT_K > 1). Programs go to SMs in launch order, `occupancy` at a
time per SM; the kernel time is the busiest SM's rounds (full ones, then the explicit tail), each costed with the
bandwidth share, L2 hit rate (from the real traversal, model/schedule/) and latency hiding of that round.

The model is split so that calibration can re-time many problems at once: `prepare()` computes everything that does
not depend on the profile's [efficiency] constants (geometry, occupancy, registers, schedule and L2 hits) as columns;
`timing()` turns those columns and the constants into the estimate record. docs/model_cuda.md gives every equation.
"""

import numpy as np

from ....errors import ProblemError
from ....model.common import ceil_div
from ....operator import Operator, register
from ...triton_measure import TritonRunner
from .. import views
from ..problem import Matmul
from .bounds import prefix_bound, quick_bound
from .constants import (
    _BASE_REGS,
    DEFAULTS,
    FITTABLE,
    KNOBS,
    LEVELS,
    ORDER_KNOBS,
    PERSISTENT,
    POINTER,
    RULE_TEXT,
    RULES,
    SCHEDULE_KNOBS,
    TIE_KEYS,
    TMA,
    efficiency,
)
from .kernel_time import estimate, prepare, timing
from .resources import (
    _i,
    _reg_cap,
    contiguous_lengths,
    occupancy,
    order_code,
    resident,
    smem_allocated,
    smem_bytes,
    synchronous_loads,
    tie_rank,
    tma_ok,
)


def _split_tail(p: Matmul, tiling: dict, items: int) -> int:
    """Tail tiles a tiling's grid splits along K (TAIL_SPLIT; 0 for none, or where the model runs it unsplit),
    read from the record's work items (triton_tma.work_items): one per tile and K slice, and tail x
    (TAIL_SPLIT - 1) more."""
    split = int(tiling.get("TAIL_SPLIT", 1))
    if split <= 1:
        return 0
    tiles = ceil_div(p.M, int(tiling["BLOCK_M"])) * ceil_div(p.N, int(tiling["BLOCK_N"]))
    return (items - int(tiles) * int(tiling["SPLIT_K"]) * p.batch) // (split - 1)


def concat(parts: list[dict]) -> dict:
    """Prepared columns of several problems as one table (calibration re-times them in one pass)."""
    return {k: np.concatenate([p_[k] for p_ in parts]) for k in parts[0]}


@register
class MatmulCuda(TritonRunner, Operator):
    OP = "matmul"
    FAMILY = "cuda"
    PROBLEM = Matmul
    KNOBS = KNOBS
    SCHEDULE_KNOBS = SCHEDULE_KNOBS
    LEVELS = LEVELS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    GRID_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")
    SHAPE_KNOBS = (
        "BLOCK_M",
        "BLOCK_N",
        "BLOCK_K",
        "SPLIT_K",
    )  # the tile; num_stages, num_warps, GROUP_M, ORDER vary within it
    # the H200 model prices a shallow pipeline that already hides the latency a few percent too slow (6d)
    DEPTH_KNOB = "num_stages"
    SAMPLE_ORDER = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_stages", "num_warps")
    CHECKLIST = {
        "load": "memory bound (global -> shared): larger tiles raise reuse, GROUP_M raises L2 hits, 16-B aligned "
        "rows keep cp.async",
        "smem": "shared-memory bound: wider wgmma tiles (BLOCK_N 128-256) read shared memory less per MMA",
        "tensor": "tensor-core bound: keep the tensor cores busy: wgmma (BLOCK_M % 64 == 0, warps in groups of 4), "
        "wide instructions, no split-K you do not need",
        "alu": "CUDA-core bound: split-K's extra kernels (zero fill, cast) dominate: fewer slices",
        "store": "store bound (epilogue): fewer split-K atomics, a larger K per output tile",
        "issue": "issue bound (per-step and per-program overhead): fewer programs and K steps (larger BLOCK_K and "
        "tiles)",
        "latency": "no unit saturated: more num_stages or more resident programs hide the load latency",
    }
    WHAT_IF = {
        "SPLIT_K": ("multi-core: split K across SMs", (1, 2, 4, 8, 16)),
        "num_stages": ("latency: software pipelining depth", (2, 3, 4, 5)),
        "ORDER": ("memory: tile order for L2 reuse", (0, 1, 2)),
        "GROUP_M": ("memory: grouped order width", (1, 4, 8, 16)),
        "num_warps": ("latency: warps per block (occupancy vs registers)", (2, 4, 8)),
        "TAIL_SPLIT": (
            "multi-core: split the last partial wave's tiles along K onto the idle SMs",
            (1, 2, 4),
        ),
    }
    FITTABLE = FITTABLE
    CONSTANTS = DEFAULTS
    IMPLS = ("triton",)
    # a Triton kernel without ORDER launches grouped by its GROUP_M (the tutorial's swizzle) or, without GROUP_M,
    # row-major (GROUP_M then moot: 1); without SPLIT_K it does not split K
    ABSENT_DEFAULTS = {
        "ORDER": "grouped if GROUP_M else row",
        "GROUP_M": "1",
        "SPLIT_K": "1",
        "TEMPLATE": "pointer",
        "TAIL_SPLIT": "1",
    }
    TARGETS = {"triton": views.TRITON}
    RUNNERS = ("triton",)

    def check(self, p: Matmul, chip) -> None:
        """B in a format the GPU kernel reads (NZ fractals are Ascend's), and tensor cores for the dtype."""
        if p.b_nz:
            raise ProblemError("b_format: nz is an Ascend (NZ fractal) format; the cuda family takes nd")
        if p.b_int4:
            raise ProblemError(
                "b_dtype: int4 weights are not modelled on the cuda family (Hopper's wgmma has no int4 operand; "
                "a W4A8 kernel widens B in registers, which this model does not describe); use b_dtype auto"
            )
        if p.dequant != "auto":
            raise ProblemError(
                f"dequant: {p.dequant} is an Ascend placement; on the cuda family the dequant runs in the GEMM's "
                "epilogue, in registers (use dequant auto)"
            )
        super().check(p, chip)

    def feasible(self, p: Matmul, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        """One boolean mask per rule (True = allowed), for the rules whose knobs are all present."""
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        n = len(next(iter(c.values()))) if c else 0
        out = {}
        for r in names:
            if r == "dtype":
                out[r] = np.full(n, chip.macs_per_cycle(p.dtype) > 0)
            elif r == "tma":
                out[r] = (_i(c, "TEMPLATE") == POINTER) | chip.has_tma
            elif r == "tail_split":
                out[r] = (_i(c, "TAIL_SPLIT") == 1) | (
                    (_i(c, "TEMPLATE") == PERSISTENT) & (_i(c, "SPLIT_K") == 1)
                )
            elif r == "pow2":
                out[r] = np.logical_and.reduce([(_i(c, k) & (_i(c, k) - 1)) == 0 for k in RULES[r]])
            elif r == "dot_min":
                out[r] = np.logical_and.reduce([_i(c, k) >= 16 for k in RULES[r]])
            elif r == "threads":
                out[r] = 32 * _i(c, "num_warps") <= 1024
            elif r == "smem":
                out[r] = smem_bytes(p, c) <= int(chip["smem_bytes_per_block"])
            elif r == "registers":
                w = _i(c, "num_warps")
                out[r] = _i(c, "BLOCK_M") * _i(c, "BLOCK_N") / (32 * w) + 16 <= _reg_cap(chip, w)
            elif r == "occupancy":
                w = _i(c, "num_warps")
                regs = np.minimum(
                    _i(c, "BLOCK_M") * _i(c, "BLOCK_N") / (32 * w) + _BASE_REGS, _reg_cap(chip, w)
                )
                out[r] = occupancy(p, chip, c, regs) >= 1
        return out

    def dominated(self, p: Matmul, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """Duplicates and provably useless settings (the search keeps one of each set of equal candidates).

        GROUP_M is ignored unless ORDER is grouped: keep the smallest GROUP_M in the table. Groups of at least all
        tile rows are one and the same walk: keep the smallest such GROUP_M. Split-K slices past the last K step
        only add atomics of zeros: a smaller SPLIT_K runs the same main loop with fewer programs. A TAIL_SPLIT
        above 1 where the tiles fill whole waves of the SMs splits nothing.
        """
        n = len(next(iter(c.values()))) if c else 0
        out = np.zeros(n, dtype=bool)
        if "BLOCK_K" in c and "SPLIT_K" in c:
            k_tiles = ceil_div(p.K, _i(c, "BLOCK_K"))
            sk = _i(c, "SPLIT_K")
            per = ceil_div(k_tiles, sk)
            out |= (sk > 1) & ((sk - 1) * per >= k_tiles)
        if (
            "TAIL_SPLIT" in c
            and "BLOCK_M" in c
            and "BLOCK_N" in c
            and 1 in (domains or {}).get("TAIL_SPLIT", (1,))
        ):
            # a tail split without a partial last wave (tiles a multiple of the SMs), or of a batched problem (the
            # kernel has no batch axis), runs what 1 runs: its twin at 1 is in the domain
            tiles = ceil_div(p.M, _i(c, "BLOCK_M")) * ceil_div(p.N, _i(c, "BLOCK_N"))
            out |= (_i(c, "TAIL_SPLIT") > 1) & ((tiles % chip.cores == 0) | (p.batch != 1))
        if "ORDER" in c and "GROUP_M" in c and n:
            order, gm = _i(c, "ORDER"), _i(c, "GROUP_M")
            vals = np.unique(gm)
            out |= (order != 1) & (gm != vals[0])
            if "BLOCK_M" in c:
                tm = ceil_div(p.M, _i(c, "BLOCK_M"))
                first_whole = vals[
                    np.minimum(np.searchsorted(vals, tm), vals.size - 1)
                ]  # smallest value >= tm
                out |= (order == 1) & (gm >= tm) & (gm != first_whole)
        return out

    def estimate(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        return estimate(p, chip, c)

    def quick_bound(self, p: Matmul, chip, c: dict) -> np.ndarray:
        return quick_bound(p, chip, c)

    def prefix_bound(self, p: Matmul, chip, c: dict, domains: dict) -> np.ndarray:
        return prefix_bound(p, chip, c, domains)

    def tie_rank(self, p: Matmul, chip, c: dict) -> np.ndarray:
        return tie_rank(p, chip, c)

    def warm_start(self, p: Matmul, chip) -> dict:
        """The Triton tutorial's tiling, with the pointer kernel (the template every problem and GPU can run)."""
        return dict(
            BLOCK_M=128,
            BLOCK_N=256,
            BLOCK_K=64,
            num_stages=3,
            num_warps=8,
            GROUP_M=8,
            ORDER=1,
            SPLIT_K=1,
            TEMPLATE=0,
            TAIL_SPLIT=1,
        )

    def constants(self, chip) -> dict[str, float]:
        return efficiency(chip)

    def prepare(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        return prepare(p, chip, c)

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        return timing(prepared, chip, constants)

    def choices(self, chip, data, constants: dict[str, float]) -> list:
        """The launch orders reported for exact ties (ties.choose_tie_orders), chosen from the measurements."""
        from ..ties import choose_tie_orders

        pred = timing(data.prepared, chip, constants)["time_us"]
        return choose_tie_orders(data.problems, data.cands, pred, data.seconds, data.shape_of, chip)

    def launch(self, p: Matmul, tiling: dict, row: dict) -> dict:
        """The launch section of an export (Operator.launch: the record's SMs used, waves and work items); a
        tiling whose last wave is split along K (TAIL_SPLIT) also names the second kernel, one program per tail
        tile (`_split_tail`)."""
        out = super().launch(p, tiling, row)
        tail = _split_tail(p, tiling, int(row["tiles"]))
        if tail:
            split = int(tiling["TAIL_SPLIT"])
            out["schedule"] += (
                f"; TAIL_SPLIT={split}: the last wave's {tail} tiles in {tail * split} K slices, then "
                f"triton_tma._tail_store_kernel ({tail} programs)"
            )
        return out

    def advice(self, p: Matmul, chip, c: dict, est: dict, row: int) -> list[str]:
        """Checklist items (MISSION §4/§5) that apply to candidate `row`."""
        out = []
        sms = chip.cores
        val = {k: int(np.asarray(c[k])[row]) for k in KNOBS if k in c}
        template = val.get("TEMPLATE", POINTER)
        g = {k: np.asarray(v)[row] for k, v in est.items()}
        bound = str(g["bound"])
        len_a, len_b = contiguous_lengths(p)
        bad_rows = [(f"A ({'M' if p.a_transposed else 'K'})", len_a % 16)]
        if p.b_transposed:
            bad_rows += [("B (K)", len_b % 16), ("C (N)", p.N % 16)]
        else:
            bad_rows += [("B/C (N)", p.N % 16)]
        if any(bad for _, bad in bad_rows) and template == POINTER:
            which = " and ".join(x for x, bad in bad_rows if bad)
            out.append(
                f"alignment: row stride of {which} is not a multiple of 16 elements, so Triton cannot prove "
                "16-B alignment: loads are 1 element wide and synchronous (no cp.async pipelining); "
                "pad the leading dimension to a multiple of 16"
                + (
                    "; or TEMPLATE tma (TMA loads need only 16-byte rows"
                    + (
                        ", which these are)"
                        if tma_ok(p)
                        else "; these rows are staged into padded ones first)"
                    )
                    if chip.has_tma
                    else ""
                )
            )
        # a split last wave (TAIL_SPLIT) already deals its tiles' K slices to the SMs, and takes no SPLIT_K
        split = _split_tail(p, val, int(g["tiles"])) > 0
        if int(g["programs"]) < sms:
            out.append(
                f"multi-core: {int(g['programs'])} programs for {sms} SMs; a smaller tile "
                + ("(the last wave is in K slices already)" if split else "or SPLIT_K > 1")
                + " would use more SMs"
            )
        elif int(g["waves"]) > 1 and int(g["tail_sms"]) < sms // 2 and int(g["tail_programs_per_sm"]) <= 1:
            out.append(
                f"tail: the last wave runs on {int(g['tail_sms'])} of {sms} SMs; a tile size that divides "
                "the grid into whole waves " + ("evens it out" if split else "(or SPLIT_K) evens it out")
            )
        if not bool(g["wgmma"]) and float(chip.get("mma_version", DEFAULTS["mma_version"])) >= 3:
            out.append(
                "compute: this tiling uses mma.sync, not wgmma (needs BLOCK_M % 64 == 0 and num_warps % 4 == 0)"
            )
        if float(g["spill_regs"]) > 0:
            out.append(
                f"registers: about {int(g['spill_regs'])} registers per thread spill to local memory; "
                "more warps or a smaller tile"
            )
        if bound == "latency" and val["num_stages"] <= 2:
            out.append("latency: loads are not hidden; more num_stages (preload) or more resident programs")
        if bound == "load":
            out.append(
                "memory: global->shared traffic dominates; larger tiles raise reuse, GROUP_M raises L2 hits"
            )
        if val["SPLIT_K"] > 1:
            out.append(
                f"split-K: {val['SPLIT_K']} slices add {p.M * p.N * val['SPLIT_K']:,} fp32 atomic adds and two "
                "extra kernels (zero, cast)"
            )
        if int(g["occupancy"]) == 1 and bound in ("latency", "load"):
            out.append(
                "occupancy: one program per SM; fewer stages or a smaller tile would let two share an SM"
            )
        return out


__all__ = [
    "DEFAULTS",
    "FITTABLE",
    "KNOBS",
    "LEVELS",
    "MatmulCuda",
    "ORDER_KNOBS",
    "PERSISTENT",
    "POINTER",
    "RULES",
    "RULE_TEXT",
    "SCHEDULE_KNOBS",
    "TIE_KEYS",
    "TMA",
    "contiguous_lengths",
    "efficiency",
    "estimate",
    "occupancy",
    "order_code",
    "prefix_bound",
    "prepare",
    "quick_bound",
    "resident",
    "smem_allocated",
    "smem_bytes",
    "synchronous_loads",
    "tie_rank",
    "timing",
    "tma_ok",
]
