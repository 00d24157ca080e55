"""Row softmax on Ascend: an AscendC kernel on the vector cores (AIV on separated chips, the AI cores' vector
units on coupled ones).

A *task* is `rows_per_core` rows (q) of one slice of a row: the whole row (cores_per_row s = 1) or one of s
slices of ceil(d/s) elements (L). A task walks its slice in UB chunks of c = min(block_d, L) elements:

* L <= block_d (the slice fits UB): one read, max, subtract, exp, sum, scale, one write, whatever `passes`.
* passes = 2 (online): pass 1 reads each chunk once for a running max and a running sum rescaled by
  exp(m_old - m_new) when the max grows; pass 2 reads again, subtracts, exps, scales, writes.
* passes = 3: a pass for the max, a pass for the sum of exponentials, a pass that reads, exps, scales, writes.

Per pass and chunk step, each pipe's time is bytes or operations over its rate (profile numbers): MTE2 = the
chunk of q rows at the core's GM->UB port (each DataCopy pays a fixed overhead, short rows waste granules), MTE3
= the output chunk at the UB->GM port, vec = per-element costs of cast, max, sub, exp, sum, scale in fp32
(64 lanes a cycle) plus a start-up per vector instruction, scalar = every instruction issued plus a loop head
and flag waits per step. With double_buffer a pass costs its slowest pipe, without it the pipes in series plus
one GM latency per read. Tasks go to the vector cores in order (task i -> core i mod cores); the kernel takes the
busiest core, the HBM floor of all bytes (re-reads of a row that is still in L2 are hits: the working set is
the rows the cores hold at once), the L2 floor, cross-core barriers of the split mode, and the head. The
constants with the `sm_` prefix are documented guesses (no Ascend hardware measured); docs/model.md,
"9. Softmax on Ascend", has the equations and the reasons.
"""

from __future__ import annotations

import numpy as np

from ...errors import ProblemError
from ...model.common import PIPES_OF, ceil_div, classify_bound, roofline_us, segment_efficiency
from ...operator import Operator, register
from ...target import Target
from . import views
from .problem import Softmax

KNOBS = ("rows_per_core", "block_d", "passes", "double_buffer", "cores_per_row")
RULES = {
    "ub": ("rows_per_core", "block_d", "double_buffer", "cores_per_row"),
    "rows": ("rows_per_core",),
    "block": ("block_d", "cores_per_row"),
    "split": ("cores_per_row",),
}
RULE_TEXT = {
    "ub": "a task's UB: input and output chunks (x2 with double_buffer), an fp32 work chunk and the row stats, "
    "rows_per_core*min(block_d, slice)*(buffers*(in+out bytes) + 4) + rows_per_core*64 <= UB",
    "rows": "rows_per_core <= rows rounded up to a power of two (no task of only absent rows)",
    "block": "block_d <= the slice (d/cores_per_row) rounded up to a power of two: a larger chunk only holds "
    "the same slice",
    "split": "cores_per_row <= d / 256 (a slice keeps at least 256 elements) and <= the vector cores",
}
# The [efficiency] constants this model reads (CONSTANTS), with the values used: documented guesses, not
# measured on Ascend hardware. Costs are in vector cycles per 64 fp32 elements (one 256-byte repeat).
DEFAULTS = {
    "sm_cast_cycles": 1.0,  # fp16/bf16 <-> fp32 cast, per repeat (a simple elementwise op)
    "sm_max_cycles": 1.0,  # max reduction, per repeat of the chunk (a tree of elementwise maxima)
    "sm_sub_cycles": 1.0,  # subtract the row max, per repeat
    "sm_exp_cycles": 4.0,  # exp, per repeat: the expensive op (a multi-cycle function on the AIV), a guess
    "sm_sum_cycles": 1.0,  # sum reduction, per repeat
    "sm_scale_cycles": 1.0,  # multiply by 1/sum, per repeat
    "sm_vec_issue_cycles": 8.0,  # start-up of one vector instruction (pipeline fill), per instruction
    "sm_copy_overhead_bytes": 2048.0,  # per DataCopy, in bytes at the port rate: a 16 KB copy reaches 89% (S5)
    "sm_sync_us": 1.0,  # one cross-core barrier (SyncAll through GM flags, about two GM round trips)
}
REPEAT = 255 * 256  # bytes one vector instruction covers at most (255 repeats of 256 bytes)


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _units(chip) -> int:
    """Cores the kernel spreads over: the AIVs of a separated chip, the AI cores of a coupled one."""
    return int(chip["vector_cores"]) or chip.cores


def _runs_dtype(p: Softmax, chip) -> bool:
    """fp16 and fp32 on every vector unit; bf16 where the architecture has bf16 datapaths (its cube does)."""
    return p.dtype in ("fp16", "fp32") or (p.dtype == "bf16" and chip.macs_per_cycle("bf16") > 0)


def _slice(p: Softmax, s) -> np.ndarray:
    return ceil_div(p.d, s)


def _pow2_at_least(v):
    return 2 ** np.ceil(np.log2(np.maximum(v, 1)))


def ub_bytes(p: Softmax, c: dict) -> np.ndarray:
    """UB bytes a task fills: input and output queues (x2 buffered), an fp32 work chunk, 64 B of stats a row."""
    q = _i(c, "rows_per_core")
    chunk = np.minimum(_i(c, "block_d"), _slice(p, _i(c, "cores_per_row")))
    bufs = 1 + _i(c, "double_buffer")
    return (q * chunk * (bufs * (p.in_bytes + p.out_bytes) + 4) + q * 64).astype(np.int64)


def _pass_pipes(p: Softmax, chip, e: dict, q, chunk, steps, elems, whole, ops: tuple[str, ...], writes: bool):
    """Seconds one pass of a task keeps each pipe busy: `steps` chunks of `chunk` elements of q rows (`elems`
    elements a row in all), read from GM, the vector ops `ops` (keys of the constants) on each element, and
    written back when `writes`. `whole`: the q rows are whole rows in one chunk, one contiguous copy."""
    f = chip.clock_hz
    run = np.where(whole, q * elems * p.in_bytes, chunk * p.in_bytes)  # bytes of one contiguous run
    seg = segment_efficiency(run)
    over = e[
        "sm_copy_overhead_bytes"
    ]  # one DataCopy of q rows per chunk (strided when a chunk is part of a row)
    t_in = (q * elems * p.in_bytes / seg + steps * over) / (chip["gm_to_l1_bytes_per_cycle"] * f)
    t_out = (q * elems * p.out_bytes / seg + steps * over) / (chip["ub_to_gm_bytes_per_cycle"] * f) * writes
    lanes = chip["vector_flops_per_cycle_fp16"] / 4  # fp32 elements per cycle (half the fp16 lanes, no FMA)
    cost = sum(e[k] for k in ops)
    # one instruction per op, row and 255 repeats of a chunk (max, sub and scale take a per-row operand)
    instr = len(ops) * q * steps * ceil_div(chunk * 4, REPEAT)
    t_vec = (q * elems * cost / lanes + instr * e["sm_vec_issue_cycles"]) / f
    copies = steps * (1 + writes)
    t_scalar = (
        (instr + copies) * chip["scalar_cycles_per_instr"]
        + steps * (chip["scalar_cycles_per_loop"] + 2 * chip["sync_cycles"])
    ) / f
    return {"mte2": t_in, "mte3": t_out, "vec": t_vec, "scalar": t_scalar}


def task_cost(p: Softmax, chip, c: dict, q, e: dict) -> dict:
    """Seconds a task of q rows keeps each pipe of its core busy, its busy time and its pipeline fill, and the
    times it reads its rows (broadcast over candidates)."""
    f = chip.clock_hz
    L = _slice(p, _i(c, "cores_per_row"))
    chunk = np.minimum(_i(c, "block_d"), L)
    steps = ceil_div(L, chunk)
    fits = steps == 1
    whole = fits & (_i(c, "cores_per_row") == 1)  # the task's rows are one contiguous block
    two = _i(c, "passes") == 2
    db = _i(c, "double_buffer") == 1
    cin = ("sm_cast_cycles",) if p.in_bytes != 4 else ()
    cout = ("sm_cast_cycles",) if p.out_bytes != 4 else ()
    exp = ("sm_sub_cycles", "sm_exp_cycles")
    # the passes of each form: (vector ops, writes)
    forms = {
        "whole": [((*cin, "sm_max_cycles", *exp, "sm_sum_cycles", "sm_scale_cycles", *cout), True)],
        "online": [
            ((*cin, "sm_max_cycles", *exp, "sm_sum_cycles"), False),
            ((*cin, *exp, "sm_scale_cycles", *cout), True),
        ],
        "three": [
            ((*cin, "sm_max_cycles"), False),
            ((*cin, *exp, "sm_sum_cycles"), False),
            ((*cin, *exp, "sm_scale_cycles", *cout), True),
        ],
    }
    which = {"whole": fits, "online": ~fits & two, "three": ~fits & ~two}
    lat = chip["gm_latency_cycles"] / f
    shape = np.broadcast(q, chunk).shape
    pipes = ("mte2", "mte3", "vec", "scalar")
    out = {k: np.zeros(shape) for k in (*pipes, "busy", "reads")}
    for form, passes in forms.items():
        sel = which[form]
        for i, (ops, writes) in enumerate(passes):
            ps = {
                k: np.broadcast_to(np.asarray(v, dtype=np.float64), shape)
                for k, v in _pass_pipes(p, chip, e, q, chunk, steps, L, whole, ops, writes).items()
            }
            if (
                form == "online" and i == 0
            ):  # the running sum is rescaled once a chunk: ~4 instructions on q lanes
                ps["vec"] = ps["vec"] + 4 * steps * (e["sm_vec_issue_cycles"] + 1) / f
                ps["scalar"] = ps["scalar"] + 4 * steps * chip["scalar_cycles_per_instr"] / f
            piped = np.maximum(np.maximum(ps["mte2"], ps["mte3"]), np.maximum(ps["vec"], ps["scalar"]))
            serial = ps["mte2"] + ps["mte3"] + ps["vec"] + ps["scalar"] + steps * lat
            for k in pipes:
                out[k] += np.where(sel, ps[k], 0.0)
            out["busy"] += np.where(sel, np.where(db, piped, serial), 0.0)
            out["reads"] += sel
    # double buffering: the first chunk's read and one GM latency are not overlapped (once per core)
    out["fill"] = np.where(db, lat + out["mte2"] / np.maximum(out["reads"] * steps, 1.0), 0.0)
    return out


def _grid(p: Softmax, c: dict) -> dict:
    q, s = _i(c, "rows_per_core"), _i(c, "cores_per_row")
    full = (p.rows // q) * s
    part = np.where(p.rows % q > 0, s, 0)
    return {"full": full, "part": part, "tasks": full + part, "last": np.where(p.rows % q > 0, p.rows % q, q)}


ASCENDC_SOFTMAX = Target(
    name="ascendc_softmax",
    doc="an AscendC row-softmax kernel on the vector cores: tasks, UB chunk, passes and the UB bytes a task fills",
    schema=views.ASCENDC_SCHEMA,
    view=lambda p, chip, t, row: views.ascendc_view(p, t, row, _units(chip)),
    check=views.check_ascendc,
    emit=views.ASCENDC_TILING.emit,
    language="cpp",
    includes=views.ASCENDC_TILING.includes,
    entry=views.ASCENDC_TILING.entry,
)


@register
class SoftmaxAscend(Operator):
    OP = "softmax"
    FAMILY = "ascend"
    PROBLEM = Softmax
    KNOBS = KNOBS
    SHAPE_KNOBS = ("rows_per_core", "block_d", "passes")
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    CONSTANTS = DEFAULTS
    SAMPLE_ORDER = ("block_d", "passes", "rows_per_core", "cores_per_row", "double_buffer")
    CHECKLIST = {
        "vector": "vector bound: exp dominates; fewer passes that recompute exp, fewer casts (keep one fp32 copy "
        "of a row that fits UB), larger chunks so instruction start-ups amortise",
        "mte2": "memory bound: read each row once (a chunk that holds the row), else 2 passes (online) instead "
        "of 3; keep re-read rows in L2 (fewer rows in flight); large contiguous DataCopy (>= 16 KB)",
        "mte3": "write-out bound (UB -> GM): larger, contiguous output copies",
        "scalar": "scalar bound: more rows per task and larger chunks (fewer instructions, loop heads and flags)",
        "latency": "no pipe saturated: double-buffer the UB queues; more rows per task",
    }
    WHAT_IF = {
        "passes": ("memory: online (2) vs three-pass (3) when a row does not fit UB", (2, 3)),
        "double_buffer": ("latency: ping-pong the UB queues", (0, 1)),
        "rows_per_core": ("overhead: rows per task", (1, 4, 16)),
    }
    TARGETS = {"ascendc_softmax": ASCENDC_SOFTMAX}

    def check(self, p: Softmax, chip) -> None:
        if not _runs_dtype(p, chip):
            raise ProblemError(
                f"dtype: softmax on {chip.id}'s vector units runs fp16, fp32"
                + (" and bf16" if chip.macs_per_cycle("bf16") > 0 else "")
                + f", got {p.dtype!r}"
            )

    def feasible(self, p: Softmax, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        out = {}
        for r in names:
            if r == "ub":
                out[r] = ub_bytes(p, c) <= chip["ub_bytes"]
            elif r == "rows":
                out[r] = _i(c, "rows_per_core") <= _pow2_at_least(p.rows)
            elif r == "block":
                out[r] = _i(c, "block_d") <= np.maximum(
                    _pow2_at_least(_slice(p, _i(c, "cores_per_row"))), 256
                )
            elif r == "split":
                s = _i(c, "cores_per_row")
                out[r] = (s == 1) | ((s * 256 <= p.d) & (s <= _units(chip)))
        return out

    def dominated(self, p: Softmax, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """A slice that fits its chunk is read once whatever the passes (without a split, which syncs once
        per pass): passes = 3 is then an exact twin of 2."""
        domains = domains or {}
        out = super().dominated(p, chip, c, domains)
        if not all(k in c for k in ("passes", "block_d", "cores_per_row")) or 2 not in domains.get(
            "passes", (2,)
        ):
            return out
        s = _i(c, "cores_per_row")
        fits = _i(c, "block_d") >= _slice(p, s)
        return out | (fits & (s == 1) & (_i(c, "passes") == 3))

    def estimate(self, p: Softmax, chip, c: dict) -> dict[str, np.ndarray]:
        e = self.constants(chip)
        f = chip.clock_hz
        V = _units(chip)
        q = _i(c, "rows_per_core")
        s = _i(c, "cores_per_row")
        g = _grid(p, c)
        full = task_cost(p, chip, c, q, e)
        part = task_cost(p, chip, c, g["last"], e)
        n0 = ceil_div(g["tasks"], V)
        k0 = g["tasks"] - (n0 - 1) * V  # cores with n0 tasks; the partial tasks are the last `part`
        crit_full = np.where(k0 > g["part"], n0, n0 - 1)
        crit_part = np.where(k0 > g["part"], 0, 1)
        busy = crit_full * full["busy"] + crit_part * part["busy"]
        # split mode: every round of tasks ends its stats passes behind a cross-core barrier (1 for the online
        # form or a slice that fits, 2 for three passes), and restarts the pipeline after each
        fits = ceil_div(_slice(p, s), np.minimum(_i(c, "block_d"), _slice(p, s))) == 1
        n_sync = np.where(s > 1, np.where((_i(c, "passes") == 2) | fits, 1, 2), 0)
        rounds = n0
        sync_s = rounds * n_sync * (e["sm_sync_us"] * 1e-6 + chip["gm_latency_cycles"] / f)
        make = busy + full["fill"] + sync_s
        used = np.minimum(g["tasks"], V).astype(np.int64)
        mean = (g["full"] * full["busy"] + g["part"] * part["busy"]) / V + full["fill"] * used / V + sync_s
        # traffic: every read of a row goes through L2; re-reads hit when the rows the cores hold at once fit
        # the usable L2 (else the share that does)
        L = _slice(p, s)
        row_bytes = p.rows * p.d * p.in_bytes
        reads = full["reads"]
        partials = np.where(
            s > 1, p.rows * s * 8.0 * 2 * n_sync, 0.0
        )  # (max, sum) per slice, written and read
        l2_bytes = reads * row_bytes + p.rows * p.d * p.out_bytes + partials
        ws = used * q * L * p.in_bytes
        hit = np.clip(chip["l2_bytes"] * chip["l2_usable_fraction"] / np.maximum(ws, 1.0), 0.0, 1.0)
        hbm = p.compulsory_bytes + (reads - 1) * row_bytes * (1 - hit) + partials
        hbm_s = hbm / (chip["hbm_gbps"] * 1e9 * chip["hbm_efficiency"])
        l2_s = l2_bytes / (chip["l2_gbps"] * 1e9 * chip["l2_efficiency"])
        floor = np.maximum(hbm_s, l2_s)
        head = chip["head_base_us"] + chip["head_per_core_us"] * used * chip.cores / V
        time_us = np.maximum(make, floor) * 1e6 + head
        n = len(q)
        pipes = {k: np.zeros(n) for k in PIPES_OF["ascend"]}
        for k in ("vec", "scalar", "mte2", "mte3"):
            pipes[k] = (crit_full * full[k] + crit_part * part[k]) * 1e6
        bound = classify_bound(pipes, make * 1e6)
        bound = np.where(floor > make, "mte2", bound)
        return {
            "time_us": time_us,
            "bound": bound,
            **{f"{k}_us": v for k, v in pipes.items()},
            "cores_used": used,
            "waves": n0.astype(np.int64),
            "balance": mean / np.maximum(make, 1e-30),
            "l2_hit_rate": np.where(l2_bytes > 0, 1.0 - np.minimum(hbm, l2_bytes) / l2_bytes, 0.0),
            "hbm_bytes": hbm.astype(np.float64),
            "l2_bytes": l2_bytes.astype(np.float64),
            "roofline_us": roofline_us(
                p.flops,
                p.compulsory_bytes,
                chip["vector_flops_per_cycle_fp16"] * V * f,
                chip["hbm_gbps"] * 1e9,
                head,
            ),
            "tiles": g["tasks"].astype(np.int64),
            "row_reads": reads.astype(np.int64),
            "ub_bytes": ub_bytes(p, c),
            "chunks": ceil_div(L, np.minimum(_i(c, "block_d"), L)).astype(np.int64),
            "sync_us": sync_s * 1e6,
        }

    def advice(self, p: Softmax, chip, c: dict, est: dict, row: int) -> list[str]:
        """What the kernel does with a row (read once, or 2/3 passes and whether re-reads hit L2) and the
        multi-core facts over the vector cores (the base class counts the AI cores)."""
        V = _units(chip)
        reads = int(est["row_reads"][row])
        chunks = int(est["chunks"][row])
        if reads == 1:
            what = "the row (or its slice) fits one UB chunk: read once, written once"
        else:
            what = f"{chunks} chunks a row, read {reads} times"
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
        if float(est["sync_us"][row]) > 0:
            out.append(f"split: cross-core barriers cost {float(est['sync_us'][row]):.1f} us")
        return out

    def warm_start(self, p: Softmax, chip) -> dict:
        """Whole rows per core, 2 rows per task, 4k-element double-buffered chunks (48 KB of UB a row), the
        online form."""
        return dict(rows_per_core=2, block_d=4096, passes=2, double_buffer=1, cores_per_row=1)
