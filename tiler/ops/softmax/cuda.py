"""Row softmax on NVIDIA GPUs: the Triton kernels of triton_kernels.py, one program per ROWS rows.

A program walks its rows in chunks of BLOCK_D (the whole row at once when BLOCK_D >= d). Every lane issues, masked
or not, so the model counts a program's thread instructions ("lanes"), exponentials (the SFU's) and dependent load
rounds, and spreads the programs over the SMs:

* passes: the row is read once (BLOCK_D >= d), twice (online: running max and rescaled sum, then read + write)
  or three times (max, sum, read + write). The first pass's rounds load from HBM (do_bench flushes L2); a
  re-read hits L2 with probability 1 / (1 + (S / sm_l2_bytes)^sm_l2_sharpness), S = the bytes of x the resident
  programs hold at once. HBM bytes = x and y once + the re-reads that miss; L2 bytes = every read and write.
* lanes per program: `sm_read_lanes` per element and pass, `sm_max_lanes` per element, `sm_exp_lanes` per
  exponential (1 per element whole-row, 2 chunked), `sm_write_lanes` per element written, `sm_reduce_lanes` per
  thread and row reduction (max and sum per chunk of the statistics passes), `sm_spill_lanes` per spilled
  register and round. Registers follow the ptxas report of the compiled kernels (REGS); above the launch-bound
  cap (65536 / threads, at most 255) they spill; registers and threads give the programs an SM holds.
* one program's chain: `sm_program_cycles` + per HBM round `sm_round_cycles` + its bytes at min(
  `sm_port_bytes_per_cycle`, warps x `sm_warp_bytes_per_cycle`) + per L2 round `sm_l2_round_cycles` + its bytes
  at `sm_l2_port_bytes_per_cycle` + the stores of the last pass + `sm_reduce_cycles` per reduction + its own
  issue. An SM: max(issue (lanes over 4 schedulers x 32, fewer with fewer resident warps) + overheads, SFU (16
  exponentials a cycle), ceil(programs / resident) x chain).
* the kernel: a soft maximum (power `sm_overlap_power`) of the busiest SM and the memory time (max of HBM bytes
  over the measured HBM rate and L2 bytes over L2's), plus the launch.

`prepare()` counts what the constants do not change; `timing()` applies the [efficiency] constants, fitted by
`tiler calibrate` on the heldout=0 shapes of bench/data/h200_softmax.csv and stored in hardware/h200.toml (DEFAULTS
hold the same fit for the other cuda chips, which have no softmax measurements). docs/model_cuda.md, "Softmax on the H200", gives
the equations, the fit and the held-out figures.
"""

from __future__ import annotations

import numpy as np

from ...errors import ProblemError
from ...model.common import ceil_div, classify_bound, roofline_us, soft_max
from ...operator import Operator, register
from ...target import Target
from ..triton_measure import TritonRunner
from . import views
from .problem import Softmax

KNOBS = ("BLOCK_D", "passes", "ROWS", "num_warps")
MAX_THREAD_ELEMS = views.MAX_THREAD_ELEMS
RULES = {
    "registers": ("BLOCK_D", "ROWS", "num_warps"),
    "rows": ("ROWS",),
    "block": ("BLOCK_D",),
}
RULE_TEXT = {
    "registers": f"the tile fits the registers: ROWS*BLOCK_D/(32*num_warps) <= {MAX_THREAD_ELEMS} fp32 elements "
    "a thread",
    "rows": "ROWS <= rows rounded up to a power of two (no program of only absent rows)",
    "block": "BLOCK_D <= d rounded up to a power of two (a larger chunk only adds masked lanes)",
}
# per kernel (whole row, online, three-pass): registers = base + per_elem x tile elements a thread holds, least
# squares over the ptxas resource report of 464 compiled tilings (Triton 3.6, sm_90, BLOCK_D 256-131072, ROWS
# 1-16, 1-32 warps; median error 3-5 registers)
REGS = {"base": (16.0, 21.9, 20.9), "per_elem": (1.18, 1.16, 0.79)}
SFU_PER_CYCLE = 16.0  # exp2 results per SM and cycle, compute capability 9.0 (CUDA C++ Programming Guide)
# The [efficiency] constants this model reads. The values are the fit of `tiler calibrate` to the H200
# measurements of bench/data/h200_softmax.csv on 6 shapes (rows x d: 65536x1024, 16384x4096, 4096x16384,
# 1024x65536, 256x262144, 32x262144; 631 rows), 2026-12-01; the other 6 shapes were held out (docs/model_cuda.md,
# "Softmax on the H200", gives the guesses the fit started from and the held-out errors). They stay here, not in
# hardware/h200.toml: a profile's [efficiency] value overrides them. `sm_` keeps them apart from other operators'.
DEFAULTS = {
    "sm_read_lanes": 0.25,  # per element and pass: load, convert (at its box floor: not resolved by the data)
    "sm_max_lanes": 0.83006,  # per element: the running max
    "sm_exp_lanes": 1.771,  # per exponential: subtract, scale by log2 e, ex2 issue (the SFU's time apart), add
    "sm_write_lanes": 0.89161,  # per element written: scale, convert, store
    "sm_reduce_lanes": 62.538,  # per thread and row reduction: shuffles, shared-memory exchange, barrier
    "sm_reduce_cycles": 598.13,  # latency of one row reduction across the program's warps (in its chain)
    "sm_spill_lanes": 116.67,  # per spilled register and dependent round (local-memory store and load)
    "sm_program_cycles": 10.0,  # per program: start, pointers, exit (at its box floor: not resolved)
    "sm_round_cycles": 547.5,  # per dependent round from HBM: the loads' latency under load, the loop
    "sm_l2_round_cycles": 209.45,  # per dependent round of L2 hits (re-reads of rows still in L2)
    "sm_port_bytes_per_cycle": 140.89,  # HBM bytes one program's round streams a cycle at most
    "sm_warp_bytes_per_cycle": 3.792,  # ... and per warp of the program (its loads in flight)
    "sm_l2_port_bytes_per_cycle": 58.787,  # L2-hit bytes one program's round streams a cycle
    "sm_l2_bytes": 27515000.0,  # working set at which half the re-reads still hit L2 (of the 60 MB)
    "sm_l2_sharpness": 3.8157,  # how fast the hit rate falls past it: hit = 1 / (1 + (set / sm_l2_bytes)^this)
    "sm_overlap_power": 1.6869,  # soft maximum of the SM and memory times: (a^k + b^k)^(1/k)
    "hbm_efficiency": 0.92,  # share of the HBM datasheet rate a stream reaches (shared with matmul; not fitted)
}
# the values the fit started from: rough guesses from the kernels' PTX and the H200's measured latencies
GUESSES = {
    "sm_read_lanes": 1.5,
    "sm_max_lanes": 1.0,
    "sm_exp_lanes": 3.0,
    "sm_write_lanes": 2.0,
    "sm_reduce_lanes": 12.0,
    "sm_reduce_cycles": 200.0,
    "sm_spill_lanes": 4.0,
    "sm_program_cycles": 1000.0,
    "sm_round_cycles": 1000.0,
    "sm_l2_round_cycles": 300.0,
    "sm_port_bytes_per_cycle": 8.0,
    "sm_warp_bytes_per_cycle": 1.0,
    "sm_l2_port_bytes_per_cycle": 64.0,
    "sm_l2_bytes": 30e6,
    "sm_l2_sharpness": 3.0,
    "sm_overlap_power": 4.0,
}
FITTABLE = {
    "sm_read_lanes": (0.25, 16.0),
    "sm_max_lanes": (0.1, 16.0),
    "sm_exp_lanes": (0.5, 32.0),
    "sm_write_lanes": (0.25, 16.0),
    "sm_reduce_lanes": (0.5, 200.0),
    "sm_reduce_cycles": (1.0, 1e4),
    "sm_spill_lanes": (0.1, 256.0),
    "sm_program_cycles": (10.0, 1e5),
    "sm_round_cycles": (10.0, 1e4),
    "sm_l2_round_cycles": (10.0, 1e4),
    "sm_port_bytes_per_cycle": (1.0, 256.0),
    "sm_warp_bytes_per_cycle": (0.05, 64.0),
    "sm_l2_port_bytes_per_cycle": (4.0, 1024.0),
    "sm_l2_bytes": (1e6, 62914560.0),
    "sm_l2_sharpness": (1.0, 16.0),
    "sm_overlap_power": (1.0, 32.0),
}
_ROW, _ONLINE, _THREE = 0, 1, 2


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _pow2_at_least(v) -> np.ndarray:
    return 2 ** np.ceil(np.log2(np.maximum(v, 1)))


def prepare(p: Softmax, chip, c: dict) -> dict[str, np.ndarray]:
    """Per candidate, the counts the constants multiply: one program's lanes per kind of work, exponentials,
    reductions, dependent rounds (first reads from HBM, re-reads) and their bytes; programs; registers and the
    occupancy they allow."""
    bd, r, w = _i(c, "BLOCK_D"), _i(c, "ROWS"), _i(c, "num_warps")
    fits = bd >= p.d
    kind = np.where(fits, _ROW, np.where(_i(c, "passes") == 2, _ONLINE, _THREE))
    reads = np.where(fits, 1, np.where(kind == _ONLINE, 2, 3)).astype(np.float64)
    chunks = ceil_div(p.d, bd)
    threads = 32 * w
    tile = r * bd
    # lanes a chunk issues: every element of the tile (masked or not), at least one per thread
    issued = np.maximum(tile, threads) * chunks
    per_thread = tile / threads
    regs = np.choose(kind, REGS["base"]) + np.choose(kind, REGS["per_elem"]) * per_thread
    cap = np.minimum(chip["regs_per_thread_max"], (chip["regs_per_sm"] // threads) // 8 * 8)
    spill = np.maximum(regs - cap, 0.0)
    alloc = np.minimum(np.ceil(np.minimum(regs, cap) / 8) * 8, cap)
    occupancy = np.maximum(
        np.minimum(
            np.minimum(chip["max_threads_per_sm"] // threads, chip["regs_per_sm"] // (alloc * threads)),
            chip["max_blocks_per_sm"],
        ),
        1,
    )
    programs = ceil_div(p.rows, r)
    row_bytes = float(p.rows) * p.d * p.in_bytes
    out_bytes = float(p.rows) * p.d * p.out_bytes
    resident = np.minimum(programs, chip.cores * occupancy)
    chunk_elems = r * np.minimum(bd, p.d)  # elements a round moves (masked lanes fetch nothing)
    return {
        "read_elems": reads * issued,
        "max_elems": issued,
        "exp_elems": np.where(fits, 1.0, 2.0) * issued,
        "write_elems": issued.astype(np.float64),
        # row reductions a program makes (max and sum; per chunk of the statistics passes)
        "reductions": np.where(fits, 2.0, 2.0 * chunks),
        "first_rounds": chunks.astype(np.float64),
        "reread_rounds": (reads - 1) * chunks,
        "round_in_bytes": (chunk_elems * p.in_bytes).astype(np.float64),
        "round_out_bytes": (chunk_elems * p.out_bytes).astype(np.float64),
        "spill": spill,
        "threads": threads.astype(np.float64),
        "warps": w.astype(np.float64),
        "occupancy": occupancy.astype(np.float64),
        "programs": programs.astype(np.float64),
        "reread_bytes": (reads - 1) * row_bytes,
        "l2_bytes": reads * row_bytes + out_bytes,
        "compulsory": np.full(bd.shape, p.compulsory_bytes),
        # bytes of x the resident programs hold between a row's first read and its re-read
        "working_set": resident * r * float(p.d) * p.in_bytes,
        "flops": np.full(bd.shape, p.flops),
        "registers": regs,
        "reads": reads,
    }


def timing(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """The estimate record from prepared columns and the constants (see the module docstring)."""
    f = chip.clock_hz
    sms = chip.cores
    rounds = g["first_rounds"] + g["reread_rounds"]
    lanes = (
        e["sm_read_lanes"] * g["read_elems"]
        + e["sm_max_lanes"] * g["max_elems"]
        + e["sm_exp_lanes"] * g["exp_elems"]
        + e["sm_write_lanes"] * g["write_elems"]
        + e["sm_reduce_lanes"] * g["reductions"] * g["threads"]
        + e["sm_spill_lanes"] * g["spill"] * rounds * g["threads"]
    )
    per_sm = np.ceil(g["programs"] / sms)
    resident = np.minimum(g["occupancy"], per_sm)
    issue = per_sm * lanes / (32 * np.minimum(4, resident * g["warps"]))
    sfu = per_sm * g["exp_elems"] / SFU_PER_CYCLE
    overhead = per_sm * e["sm_program_cycles"] / resident
    # one program alone: each dependent round waits its loads (from HBM: first reads, and re-reads of rows that
    # left L2; else L2 hits) and streams them at the program's rate; the last pass also streams its stores
    hit = 1.0 / (1.0 + (g["working_set"] / e["sm_l2_bytes"]) ** e["sm_l2_sharpness"])
    rate = np.minimum(e["sm_port_bytes_per_cycle"], g["warps"] * e["sm_warp_bytes_per_cycle"])
    hbm_round = e["sm_round_cycles"] + g["round_in_bytes"] / rate
    l2_round = e["sm_l2_round_cycles"] + g["round_in_bytes"] / e["sm_l2_port_bytes_per_cycle"]
    waits = (
        g["first_rounds"] * hbm_round
        + g["reread_rounds"] * (hit * l2_round + (1.0 - hit) * hbm_round)
        + g["first_rounds"] * g["round_out_bytes"] / rate
    )
    chain = (
        e["sm_program_cycles"]
        + waits
        + g["reductions"] * e["sm_reduce_cycles"]
        + lanes / (32 * np.minimum(4, g["warps"]))
    )
    latency = np.ceil(per_sm / g["occupancy"]) * chain
    sm_cycles = np.maximum(np.maximum(issue + overhead, sfu), latency)
    hbm_bytes = g["compulsory"] + g["reread_bytes"] * (1.0 - hit)
    hbm_s = hbm_bytes / (chip["hbm_gbps"] * 1e9 * e["hbm_efficiency"])
    l2_s = g["l2_bytes"] / (chip["l2_gbps"] * 1e9)
    sm_s = sm_cycles / f
    # HBM and L2 stream in parallel (a hard maximum); the SMs' own time overlaps them only in part
    mem_s = np.maximum(hbm_s, l2_s)
    soft = soft_max([sm_s, mem_s], e["sm_overlap_power"])
    launch = chip["launch_us"]
    time_us = soft * 1e6 + launch
    zero = np.zeros(len(sm_s))
    # the GPU's pipes: CUDA-core instructions (and the SFU's exponentials) on `alu`, program overheads on
    # `issue`, HBM and L2 traffic on `load`; no tensor, shared-memory or separate store term. A busiest SM whose
    # programs mostly wait on their rounds saturates none of them: `latency`.
    pipes = {
        "tensor": zero,
        "alu": np.maximum(issue, sfu) / f * 1e6,
        "issue": overhead / f * 1e6,
        "smem": zero,
        "load": np.maximum(hbm_s, l2_s) * 1e6,
        "store": zero,
    }
    bound = classify_bound(pipes, time_us - launch)
    used = np.minimum(g["programs"], sms)
    return {
        "time_us": time_us,
        "bound": bound,
        **{f"{k}_us": v for k, v in pipes.items()},
        "cores_used": used.astype(np.int64),
        "waves": np.ceil(g["programs"] / (sms * g["occupancy"])).astype(np.int64),
        "balance": (g["programs"] / sms) / np.maximum(per_sm, 1),
        "l2_hit_rate": 1.0 - np.minimum(hbm_bytes, g["l2_bytes"]) / np.maximum(g["l2_bytes"], 1.0),
        "hbm_bytes": hbm_bytes,
        "l2_bytes": g["l2_bytes"],
        "roofline_us": roofline_us(
            g["flops"], g["compulsory"], chip.peak_tflops("fp16") * 1e12, chip["hbm_gbps"] * 1e9, launch
        ),
        "tiles": g["programs"].astype(np.int64),
        "occupancy": g["occupancy"].astype(np.int64),
        "registers": g["registers"],
        "row_reads": g["reads"].astype(np.int64),
        "latency_us": latency / f * 1e6,
    }


def _supports(chip, p: Softmax) -> str | None:
    return None if p.dtype in ("fp16", "bf16", "fp32") else f"the Triton softmax kernels take no {p.dtype}"


TRITON = Target(
    name="triton",
    doc="the project's Triton softmax kernels (tiler/ops/softmax/triton_kernels.py)",
    schema=views.TRITON_SCHEMA,
    view=views.triton_view,
    check=views.check_triton,
    emit=views.emit_triton,
    supports=_supports,
    language="python",
    entry=views.triton_entry,
)


@register
class SoftmaxCuda(TritonRunner, Operator):
    OP = "softmax"
    FAMILY = "cuda"
    PROBLEM = Softmax
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    SAMPLE_ORDER = ("BLOCK_D", "passes", "ROWS", "num_warps")
    GRID_KNOBS = ("BLOCK_D", "passes", "ROWS")
    SHAPE_KNOBS = ("BLOCK_D", "passes", "ROWS")
    CHECKLIST = {
        "load": "memory bound: read each row once (BLOCK_D >= d), else 2 passes (online) instead of 3; keep rows "
        "in L2 between their reads (fewer rows in flight); 16-byte loads (d a multiple of 8)",
        "alu": "instruction bound: fewer masked lanes (BLOCK_D near d), no register spills, fewer passes that "
        "recompute exp",
        "issue": "program overhead bound: more rows per program",
        "latency": "no unit saturated: more rows or warps in flight (larger ROWS, more resident programs), "
        "larger chunks (fewer dependent rounds)",
    }
    WHAT_IF = {
        "passes": ("memory: online (2) vs three-pass (3) when a row does not fit the chunk", (2, 3)),
        "num_warps": ("latency: warps per program (occupancy vs registers)", (4, 8, 16)),
        "ROWS": ("work per program: rows per program", (1, 2, 4)),
    }
    FITTABLE = FITTABLE
    CONSTANTS = DEFAULTS
    IMPLS = ("triton",)
    TARGETS = {"triton": TRITON}
    RUNNERS = ("triton",)

    def check(self, p: Softmax, chip) -> None:
        """The Triton kernels run fp16, bf16 and fp32."""
        if p.dtype not in ("fp16", "bf16", "fp32"):
            raise ProblemError(f"dtype: the Triton softmax kernels run fp16, bf16 and fp32, got {p.dtype!r}")

    def feasible(self, p: Softmax, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        out = {}
        for r in names:
            if r == "registers":
                per = _i(c, "ROWS") * _i(c, "BLOCK_D") / (32 * _i(c, "num_warps"))
                out[r] = per <= MAX_THREAD_ELEMS
            elif r == "rows":
                out[r] = _i(c, "ROWS") <= _pow2_at_least(p.rows)
            elif r == "block":
                out[r] = _i(c, "BLOCK_D") <= np.maximum(_pow2_at_least(p.d), 256)
        return out

    def dominated(self, p: Softmax, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """The whole-row kernel ignores passes: passes = 3 is then an exact twin of 2."""
        domains = domains or {}
        out = super().dominated(p, chip, c, domains)
        if "passes" not in c or "BLOCK_D" not in c or 2 not in domains.get("passes", (2,)):
            return out
        return out | ((_i(c, "BLOCK_D") >= p.d) & (_i(c, "passes") == 3))

    def estimate(self, p: Softmax, chip, c: dict) -> dict[str, np.ndarray]:
        return timing(prepare(p, chip, c), chip, self.constants(chip))

    def prepare(self, p: Softmax, chip, c: dict) -> dict[str, np.ndarray]:
        return prepare(p, chip, c)

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        return timing(prepared, chip, constants)

    def advice(self, p: Softmax, chip, c: dict, est: dict, row: int) -> list[str]:
        out = [
            f"occupancy: {int(est['occupancy'][row])} program(s) per SM at {float(est['registers'][row]):.0f} "
            f"registers a thread, {int(est['tiles'][row])} programs in all"
        ]
        return out + super().advice(p, chip, c, est, row)

    def warm_start(self, p: Softmax, chip) -> dict:
        """The online kernel with 4096-element chunks, one row a program, 8 warps."""
        return dict(BLOCK_D=4096, passes=2, ROWS=1, num_warps=8)
