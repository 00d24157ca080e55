"""RMSNorm on Ascend: an AscendC kernel on the vector cores (the AIVs of a separated chip, the AI cores' vector
units on a coupled one).

A *task* is `rows_per_core` rows (q) of the input; tasks go to the V vector cores in order (task i -> core
i mod V, so `waves` = ceil(tasks / V) rounds). A task walks its rows in UB chunks of c = min(block_h, hidden)
elements:

* hidden <= block_h (one pass): one DataCopy of the q whole rows in, cast to fp32, square, reduce-sum per row,
  rsqrt, scale by 1/rms and by the weight, cast, one DataCopy out. The weight (hidden elements) is loaded once per
  core and stays in UB for every task of that core.
* hidden > block_h (two passes): pass 1 reads each chunk of the q rows, squares it and accumulates the squares in
  an fp32 chunk; a reduction at the end gives each row's sum. Pass 2 reads each chunk again with its weight chunk
  (once per task, shared by the q rows), scales and writes. The re-read hits L2 when the rows the cores hold at
  once fit the usable L2.

Per pass and chunk step each pipe's time is bytes or operations over its rate (the chip profile's numbers):
MTE2 = the chunk of q rows (and the weight chunk) at the core's GM->UB port, each DataCopy paying a fixed
overhead and short rows wasting granules; MTE3 = the output chunk at the UB->GM port; vec = the per-element costs
of cast, square, add, reduce and the two scales in fp32 (half the fp16 lanes) plus a start-up per vector
instruction; scalar = every instruction issued plus a loop head and flag waits per step. With double_buffer a pass
costs its slowest pipe, without it the pipes in series plus one GM latency per read. The kernel takes the busiest
core (the partial task's core or a core with one more task), the HBM floor (x, y and the weight once, plus the
re-reads that miss L2) and the L2 floor, plus the launch head.

The `rn_` constants are documented guesses (no Ascend hardware measured for this example); a chip profile's
[efficiency] table may override them, and `tiler calibrate` could fit them once the model declares FITTABLE.
"""

from __future__ import annotations

import numpy as np

from tiler.errors import ProblemError
from tiler.model.common import (
    BOUND_SAFETY,
    PIPES_OF,
    ceil_div,
    classify_bound,
    roofline_us,
    segment_efficiency,
)
from tiler.operator import Operator, register

from .problem import RMSNorm

KNOBS = ("rows_per_core", "block_h", "double_buffer")
RULES = {
    "ub": ("rows_per_core", "block_h", "double_buffer"),
    "rows": ("rows_per_core",),
    "block": ("block_h",),
}
RULE_TEXT = {
    "ub": "a task's UB: input and output chunks of q rows (x2 with double_buffer), an fp32 work chunk, the weight "
    "chunk (x2) and its fp32 copy, 32 B of stats a row: q*c*(buffers*(in+out)+4) + c*(buffers*in+4) + 32*q <= UB",
    "rows": "rows_per_core <= rows rounded up to a power of two (no task of only absent rows)",
    "block": "block_h <= hidden rounded up to a power of two (at least 256): a larger chunk only holds the same row",
}
# The [efficiency] constants this model reads (CONSTANTS), with the values used: documented guesses, not measured on
# Ascend hardware. Vector costs are in cycles per 64 fp32 elements (one 256-byte repeat).
DEFAULTS = {
    "rn_cast_cycles": 1.0,  # fp16/bf16 <-> fp32 cast, per repeat (a simple elementwise op)
    "rn_mul_cycles": 1.0,  # one elementwise multiply (the square, the scale by 1/rms, the scale by the weight)
    "rn_add_cycles": 1.0,  # accumulate the squares of a chunk (two-pass form), per repeat
    "rn_reduce_cycles": 1.0,  # ReduceSum of a row's squares, per repeat (a tree of elementwise adds)
    "rn_row_cycles": 40.0,  # per row: mean, add eps, sqrt, reciprocal on one value (a few dependent instructions)
    "rn_vec_issue_cycles": 8.0,  # start-up of one vector instruction (pipeline fill), per instruction
    "rn_copy_overhead_bytes": 2048.0,  # per DataCopy, in bytes at the port rate: a 16 KB copy reaches ~89%
    "hbm_efficiency": 0.6,  # share of the HBM rate a stream reaches (every Ascend profile sets its own)
}
REPEAT = 255 * 256  # bytes one vector instruction covers at most (255 repeats of 256 bytes)
STATS_BYTES = 32  # a row's sum of squares and 1/rms, 32-byte aligned in UB


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def vector_units(chip) -> int:
    """Cores the kernel spreads over: the AIVs of a separated chip, the AI cores of a coupled one."""
    return int(chip["vector_cores"]) or chip.cores


def _pow2_at_least(v):
    return 2 ** np.ceil(np.log2(np.maximum(v, 1)))


def ub_bytes(p: RMSNorm, c: dict) -> np.ndarray:
    """UB bytes a task fills (RULE_TEXT["ub"])."""
    q = _i(c, "rows_per_core")
    chunk = np.minimum(_i(c, "block_h"), p.hidden)
    bufs = 1 + _i(c, "double_buffer")
    rows = q * chunk * (bufs * (p.in_bytes + p.out_bytes) + 4)
    weight = chunk * (bufs * p.in_bytes + 4)
    return (rows + weight + STATS_BYTES * q).astype(np.int64)


def _pass(p: RMSNorm, chip, e: dict, q, chunk, steps, ops, weight_elems, writes: bool) -> dict:
    """Seconds one pass of a task keeps each pipe busy: `steps` chunks of `chunk` elements of q rows (hidden
    elements a row in all) read from GM with `weight_elems` weight elements (cast to fp32 once for the q rows), the
    vector ops `ops` (keys of the constants, each once per element of a row), written back when `writes`."""
    f = chip.clock_hz
    whole = steps == 1  # the q rows are whole rows: one contiguous run
    run = np.where(whole, q * p.hidden * p.in_bytes, chunk * p.in_bytes)
    seg = segment_efficiency(run)
    over = e["rn_copy_overhead_bytes"]
    copies_in = steps * np.where(weight_elems > 0, 2, 1)  # the rows' chunk (and the weight chunk) per step
    bytes_in = q * p.hidden * p.in_bytes / seg + weight_elems * p.in_bytes
    t_in = (bytes_in + copies_in * over) / (chip["gm_to_l1_bytes_per_cycle"] * f)
    t_out = (
        (q * p.hidden * p.out_bytes / seg + steps * over) / (chip["ub_to_gm_bytes_per_cycle"] * f) * writes
    )
    lanes = chip["vector_flops_per_cycle_fp16"] / 4  # fp32 elements a cycle (half the fp16 lanes, no FMA)
    cost = sum(e[k] for k in ops)
    # one instruction per op, row and 255 repeats of a chunk (the scale by 1/rms takes a per-row operand)
    instr = len(ops) * q * steps * ceil_div(chunk * 4, REPEAT)
    wcast = e["rn_cast_cycles"] * (p.in_bytes != 4)  # the weight chunk to fp32, shared by the q rows
    instr = instr + np.where(weight_elems > 0, steps * ceil_div(chunk * 4, REPEAT), 0) * (p.in_bytes != 4)
    t_vec = ((q * p.hidden * cost + weight_elems * wcast) / lanes + instr * e["rn_vec_issue_cycles"]) / f
    copies = copies_in + steps * writes
    t_scalar = (
        (instr + copies) * chip["scalar_cycles_per_instr"]
        + steps * (chip["scalar_cycles_per_loop"] + 2 * chip["sync_cycles"])
    ) / f
    return {"mte2": t_in, "mte3": t_out, "vec": t_vec, "scalar": t_scalar}


def task_cost(p: RMSNorm, chip, c: dict, q, e: dict) -> dict:
    """Seconds a task of q rows keeps each pipe of its core busy, its busy time, the one-off per core (the first
    chunk's read when double-buffered, and the resident weight's load in the one-pass form) and the reads of a
    row (broadcast over candidates)."""
    f = chip.clock_hz
    chunk = np.minimum(_i(c, "block_h"), p.hidden)
    steps = ceil_div(p.hidden, chunk)
    one = steps == 1
    db = _i(c, "double_buffer") == 1
    cin = ("rn_cast_cycles",) if p.in_bytes != 4 else ()
    cout = ("rn_cast_cycles",) if p.out_bytes != 4 else ()
    scale = ("rn_mul_cycles", "rn_mul_cycles")  # by 1/rms, by the weight
    forms = {  # form -> its passes: (vector ops per element, weight elements read, writes)
        "one": [((*cin, "rn_mul_cycles", "rn_reduce_cycles", *scale, *cout), 0, True)],
        "two": [
            ((*cin, "rn_mul_cycles", "rn_add_cycles"), 0, False),
            ((*cin, *scale, *cout), p.hidden, True),
        ],
    }
    which = {"one": one, "two": ~one}
    lat = chip["gm_latency_cycles"] / f
    shape = np.broadcast(q, chunk).shape
    pipes = ("mte2", "mte3", "vec", "scalar")
    out = {k: np.zeros(shape) for k in (*pipes, "busy", "reads")}
    for form, passes in forms.items():
        sel = which[form]
        for ops, weight, writes in passes:
            ps = {
                k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape)
                for k, v in _pass(p, chip, e, q, chunk, steps, ops, np.full(shape, weight), writes).items()
            }
            piped = np.maximum(np.maximum(ps["mte2"], ps["mte3"]), np.maximum(ps["vec"], ps["scalar"]))
            serial = ps["mte2"] + ps["mte3"] + ps["vec"] + ps["scalar"] + steps * lat
            for k in pipes:
                out[k] += np.where(sel, ps[k], 0.0)
            out["busy"] += np.where(sel, np.where(db, piped, serial), 0.0)
            out["reads"] += sel
    # every row: the reduction's tail (two-pass form: the accumulated chunk) and mean, eps, sqrt, reciprocal
    tail = q * (e["rn_row_cycles"] + np.where(one, 0.0, e["rn_reduce_cycles"] * ceil_div(chunk, 64))) / f
    out["vec"] += tail
    out["busy"] += tail
    # once per core: the resident weight (one-pass form), and the first chunk's read that double buffering cannot
    # overlap, with one GM latency
    w_s = np.where(
        one, (p.weight_bytes + e["rn_copy_overhead_bytes"]) / (chip["gm_to_l1_bytes_per_cycle"] * f), 0
    )
    first = out["mte2"] / np.maximum(out["reads"] * steps, 1.0)
    out["once"] = w_s + np.where(db, lat + first, 0.0)
    out["mte2_once"] = w_s
    return out


def _grid(p: RMSNorm, c: dict) -> dict:
    q = _i(c, "rows_per_core")
    full = p.rows // q
    part = (p.rows % q > 0).astype(np.int64)
    return {"full": full, "part": part, "tasks": full + part, "last": np.where(part > 0, p.rows % q, q)}


@register
class RMSNormAscend(Operator):
    """The rmsnorm model on the ascend family (module docstring); its space ships beside it (rmsnorm.toml)."""

    OP = "rmsnorm"
    FAMILY = "ascend"
    PROBLEM = RMSNorm
    SPACE_FILE = "rmsnorm.toml"
    KNOBS = KNOBS
    SHAPE_KNOBS = ("rows_per_core", "block_h")
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    CONSTANTS = DEFAULTS
    SAMPLE_ORDER = ("block_h", "rows_per_core", "double_buffer")
    CHECKLIST = {
        "vector": "vector bound: fewer casts and passes (a chunk that holds the row), larger chunks so instruction "
        "start-ups amortise",
        "mte2": "memory bound: read each row once (block_h >= hidden); keep re-read rows in L2 (fewer rows in "
        "flight); large contiguous DataCopy (>= 16 KB: more rows per task)",
        "mte3": "write-out bound (UB -> GM): larger, contiguous output copies (more rows per task)",
        "scalar": "scalar bound: more rows per task and larger chunks (fewer instructions, loop heads and flags)",
        "latency": "no pipe saturated: double-buffer the UB queues; more rows per task",
    }
    WHAT_IF = {
        "double_buffer": ("latency: ping-pong the UB queues", (0, 1)),
        "rows_per_core": ("overhead: rows per task", (1, 4, 16)),
    }

    def check(self, p: RMSNorm, chip) -> None:
        """fp16 and fp32 on every vector unit; bf16 where the architecture has bf16 datapaths (its cube does)."""
        bf16 = chip.macs_per_cycle("bf16") > 0
        if p.dtype in ("fp16", "fp32") or (p.dtype == "bf16" and bf16):
            return
        runs = "fp16, fp32" + (" and bf16" if bf16 else "")
        raise ProblemError(f"dtype: rmsnorm on {chip.id}'s vector units runs {runs}, got {p.dtype!r}")

    def feasible(self, p: RMSNorm, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        out = {}
        for r in [r for r in (rules or RULES) if all(k in c for k in RULES[r])]:
            if r == "ub":
                out[r] = ub_bytes(p, c) <= chip["ub_bytes"]
            elif r == "rows":
                out[r] = _i(c, "rows_per_core") <= _pow2_at_least(p.rows)
            elif r == "block":
                out[r] = _i(c, "block_h") <= np.maximum(_pow2_at_least(p.hidden), 256)
        return out

    def _floor_s(self, p: RMSNorm, chip, hbm, l2) -> np.ndarray:
        """The memory floor: HBM bytes at the reachable HBM rate, L2 bytes at L2's, never below the compulsory
        bytes at the datasheet HBM rate (the roofline's)."""
        e = self.constants(chip)
        hbm_s = hbm / (chip["hbm_gbps"] * 1e9 * e["hbm_efficiency"])
        l2_s = l2 / (chip["l2_gbps"] * 1e9 * chip["l2_efficiency"])
        return np.maximum(np.maximum(hbm_s, l2_s), p.compulsory_bytes / (chip["hbm_gbps"] * 1e9))

    def _head_us(self, chip, used) -> np.ndarray:
        return chip["head_base_us"] + chip["head_per_core_us"] * used * chip.cores / vector_units(chip)

    def quick_bound(self, p: RMSNorm, chip, c: dict) -> np.ndarray:
        """Every tiling moves at least the compulsory bytes (through HBM and L2) and launches on one core at
        least."""
        n = len(next(iter(c.values())))
        b = p.compulsory_bytes
        return np.full(n, (self._floor_s(p, chip, b, b) * 1e6 + self._head_us(chip, 1)) * BOUND_SAFETY)

    def estimate(self, p: RMSNorm, chip, c: dict) -> dict[str, np.ndarray]:
        e = self.constants(chip)
        V = vector_units(chip)
        q = _i(c, "rows_per_core")
        g = _grid(p, c)
        full = task_cost(p, chip, c, q, e)
        part = task_cost(p, chip, c, g["last"], e)
        rounds = ceil_div(g["tasks"], V)  # waves
        k0 = g["tasks"] - (rounds - 1) * V  # cores with `rounds` tasks; the partial task is the last one's
        with_part = (rounds - 1) * full["busy"] + np.where(g["part"] > 0, part["busy"], full["busy"])
        busy = np.where(k0 > 1, np.maximum(rounds * full["busy"], with_part), with_part)
        make = busy + full["once"]
        used = np.minimum(g["tasks"], V).astype(np.int64)
        mean = (g["full"] * full["busy"] + g["part"] * part["busy"]) / V + full["once"] * used / V
        # traffic: every read goes through L2; the two-pass re-read hits when the rows the cores hold at once fit
        # the usable L2 (else the share that does); the weight is read once per core (one pass) or per task
        reads = full["reads"]
        one = reads == 1
        ws = used * q * p.hidden * p.in_bytes
        hit = np.clip(chip["l2_bytes"] * chip["l2_usable_fraction"] / np.maximum(ws, 1.0), 0.0, 1.0)
        weight_reads = np.where(one, used, g["tasks"]) * p.weight_bytes
        l2 = reads * p.x_bytes + p.rows * p.hidden * p.out_bytes + weight_reads
        hbm = p.compulsory_bytes + (reads - 1) * p.x_bytes * (1 - hit)
        floor = self._floor_s(p, chip, hbm, l2)
        head = self._head_us(chip, used)
        time_us = np.maximum(make, floor) * 1e6 + head
        n = len(q)
        pipes = {k: np.zeros(n) for k in PIPES_OF["ascend"]}
        crit = np.where(k0 > 1, rounds, rounds - 1 + (g["part"] == 0))  # full tasks on the busiest core
        for k in ("vec", "scalar", "mte2", "mte3"):
            pipes[k] = (crit * full[k] + (rounds - crit) * part[k]) * 1e6
        pipes["mte2"] = pipes["mte2"] + full["mte2_once"] * 1e6
        bound = np.where(floor > make, "mte2", classify_bound(pipes, make * 1e6))
        return {
            "time_us": time_us,
            "bound": bound,
            **{f"{k}_us": v for k, v in pipes.items()},
            "cores_used": used,
            "waves": rounds.astype(np.int64),
            "balance": mean / np.maximum(make, 1e-30),
            "l2_hit_rate": np.where(l2 > 0, 1.0 - np.minimum(hbm, l2) / l2, 0.0),
            "hbm_bytes": hbm.astype(np.float64),
            "l2_bytes": l2.astype(np.float64),
            "roofline_us": roofline_us(
                p.flops,
                p.compulsory_bytes,
                chip["vector_flops_per_cycle_fp16"] * V * chip.clock_hz,
                chip["hbm_gbps"] * 1e9,
                head,
            ),
            "tiles": g["tasks"].astype(np.int64),
            "row_reads": reads.astype(np.int64),
            "ub_bytes": ub_bytes(p, c),
            "core_us": make * 1e6,  # the cores' own time (the memory floor apart): tie_rank
        }

    def tie_rank(self, p: RMSNorm, chip, c: dict) -> np.ndarray:
        """Among tilings predicted exactly equal (at the HBM floor), report first the one with the most slack: the
        least time its next-busiest resource needs, the cores' own time or the L2 traffic (a second pass, a weight
        read per task) at L2's rate. That is the time the kernel would take with an infinitely fast HBM."""
        est = self.estimate(p, chip, c)
        return np.maximum(
            est["core_us"], est["l2_bytes"] / (chip["l2_gbps"] * 1e9 * chip["l2_efficiency"]) * 1e6
        )

    def advice(self, p: RMSNorm, chip, c: dict, est: dict, row: int) -> list[str]:
        """Passes over a row, UB use, and the multi-core facts over the vector cores (the base class counts the AI
        cores)."""
        V = vector_units(chip)
        reads = int(est["row_reads"][row])
        what = "each row fits one UB chunk: read once, the weight resident" if reads == 1 else "two passes"
        out = [
            f"passes: {what}; HBM {float(est['hbm_bytes'][row]) / 1e6:.1f} MB, L2 traffic "
            f"{float(est['l2_bytes'][row]) / 1e6:.1f} MB (hit rate {float(est['l2_hit_rate'][row]):.0%})",
            f"UB: {int(est['ub_bytes'][row])} of {int(chip['ub_bytes'])} bytes a task",
        ]
        tasks, used = int(est["tiles"][row]), int(est["cores_used"][row])
        if used < V:
            out.append(f"multi-core: only {used} of {V} vector cores have work ({tasks} tasks)")
        elif tasks % V:
            out.append(
                f"multi-core: {tasks} tasks on {V} vector cores: the last round runs {tasks % V} "
                f"(balance {float(est['balance'][row]):.2f})"
            )
        return out

    def warm_start(self, p: RMSNorm, chip) -> dict:
        """One whole row per task in a double-buffered 4k-element chunk (the weight resident)."""
        return dict(rows_per_core=1, block_h=4096, double_buffer=1)
