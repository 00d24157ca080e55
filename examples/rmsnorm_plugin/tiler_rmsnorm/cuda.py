"""RMSNorm on NVIDIA GPUs: the Triton kernels of triton_kernels.py, one program per ROWS rows.

A program holds a ROWS x BLOCK_N tile in registers (fp32). With BLOCK_N >= hidden (one pass) it loads its rows
once, sums the squares (one reduction across the program's warps), loads the weight once, scales and stores. With
BLOCK_N < hidden (two passes) a first loop accumulates the squares chunk by chunk in an fp32 tile (one reduction at
the end), and a second loop reads each chunk again with its weight chunk, scales and stores. Every lane issues,
masked or not, so the model counts a program's thread instructions ("lanes"), its dependent load rounds and its
registers, and spreads the programs over the SMs:

* lanes per program: `rn_read_lanes` per element read (each pass), `rn_square_lanes` per element of the sum of
  squares, `rn_weight_lanes` per weight element loaded (once per chunk, shared by the ROWS rows),
  `rn_write_lanes` per element written (two scales, convert, store), `rn_reduce_lanes` per thread for the
  reduction, `rn_program_lanes` per thread (indices, masks, the rsqrt), `rn_spill_lanes` per spilled register and
  round. Registers: REG_BASE + REG_PER_ELEM per fp32 element a thread holds (the tile, the accumulator of the
  two-pass form, the weight chunk); above the cap (65536 / threads, at most 255) they spill; registers and threads
  give the programs an SM holds (occupancy).
* an SM issues 32 lanes a cycle per scheduler, 4 schedulers when 4 warps are resident; a program's chain is
  `rn_program_cycles` + per dependent round one HBM latency (the profile's gm_latency_cycles) + its bytes at
  min(`rn_port_bytes_per_cycle`, warps x `rn_warp_bytes_per_cycle`) + `rn_reduce_cycles`; an SM runs its programs
  in rounds of the resident count (waves).
* memory: x, y and the weight once from HBM, plus the two-pass re-read of x where it missed L2 (the rows in flight
  against `rn_l2_usable` of the L2); L2 traffic adds the weight each program reads and the spilled registers
  (stored and loaded once a round). HBM bytes over the profile's HBM rate times `hbm_efficiency`, L2 bytes over
  L2's rate.
* the kernel: the larger of the busiest SM's time and the memory time (a streaming kernel overlaps them), plus the
  launch.

The constants are documented guesses (this example was never measured on a GPU); a chip profile's [efficiency]
table may override them.
"""

from __future__ import annotations

import numpy as np

from tiler.errors import ProblemError
from tiler.model.common import BOUND_SAFETY, ceil_div, classify_bound, roofline_us
from tiler.operator import Operator, register

from .problem import RMSNorm
from .views import TRITON

KNOBS = ("BLOCK_N", "ROWS", "num_warps")
MAX_THREAD_ELEMS = 128  # fp32 elements a thread holds (tile, accumulator, weight) before the tile cannot fit
RULES = {
    "registers": ("BLOCK_N", "ROWS", "num_warps"),
    "rows": ("ROWS",),
    "block": ("BLOCK_N",),
}
RULE_TEXT = {
    "registers": "the tile fits the registers: (ROWS*BLOCK_N*(1 one-pass, 2 two-pass: the accumulator) + BLOCK_N)"
    f"/(32*num_warps) <= {MAX_THREAD_ELEMS} fp32 elements a thread",
    "rows": "ROWS <= rows rounded up to a power of two (no program of only absent rows)",
    "block": "BLOCK_N <= hidden rounded up to a power of two (at least 256): a larger chunk only adds masked lanes",
}
REG_BASE = (
    24.0  # registers a thread needs beside its tile: pointers, offsets, masks, the row statistics (a guess)
)
REG_PER_ELEM = 1.1  # registers per fp32 tile element a thread holds (a guess, near softmax's ptxas fit)
LANES_PER_CYCLE = 128  # per SM: 4 schedulers x 32 lanes (compute capability 8.x and 9.x)
FP32_FLOPS_PER_CYCLE = 256  # per SM: 128 fp32 lanes x 2 (FMA), for the roofline
# The [efficiency] constants this model reads: documented guesses, not measured (`rn_` keeps them apart from other
# operators' constants in a chip profile).
DEFAULTS = {
    "rn_read_lanes": 1.0,  # per element and pass: load, convert to fp32
    "rn_square_lanes": 1.0,  # per element: x*x + acc (one FMA)
    "rn_weight_lanes": 1.5,  # per weight element loaded: load, convert (once per chunk for the ROWS rows)
    "rn_write_lanes": 2.0,  # per element written: scale by 1/rms, by the weight, convert, store
    "rn_reduce_lanes": 16.0,  # per thread, the sum across the program's warps: shuffles, shared memory, barrier
    "rn_program_lanes": 24.0,  # per thread and program: indices, masks, mean, rsqrt
    "rn_spill_lanes": 4.0,  # per spilled register and round (local-memory store and load)
    "rn_program_cycles": 300.0,  # per program: start, pointers, exit
    "rn_reduce_cycles": 200.0,  # latency of the reduction across warps (in the program's chain)
    "rn_port_bytes_per_cycle": 128.0,  # HBM bytes one program's round streams a cycle at most
    "rn_warp_bytes_per_cycle": 8.0,  # ... and per warp of the program (its loads in flight)
    "rn_l2_usable": 0.5,  # share of L2 that keeps rows between their two reads
    "hbm_efficiency": 0.92,  # share of the HBM datasheet rate a stream reaches (the profile's value when it has one)
}


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _pow2_at_least(v):
    return 2 ** np.ceil(np.log2(np.maximum(v, 1)))


def thread_elems(p: RMSNorm, c: dict) -> np.ndarray:
    """fp32 elements a thread holds: the tile (twice in the two-pass form: the accumulator) and the weight chunk."""
    bn, r, w = _i(c, "BLOCK_N"), _i(c, "ROWS"), _i(c, "num_warps")
    tiles = np.where(bn >= p.hidden, 1, 2)
    return (r * bn * tiles + bn) / (32 * w)


class _Counts:
    """What the constants do not change, per candidate: programs, passes, chunks, lanes by kind, registers and
    occupancy."""

    def __init__(self, p: RMSNorm, chip, c: dict):
        bn, r, w = _i(c, "BLOCK_N"), _i(c, "ROWS"), _i(c, "num_warps")
        self.one = bn >= p.hidden
        self.reads = np.where(self.one, 1.0, 2.0)
        self.chunks = ceil_div(p.hidden, bn)
        self.threads = (32 * w).astype(np.float64)
        self.warps = w.astype(np.float64)
        self.programs = ceil_div(p.rows, r)
        # a chunk issues every lane of its tile, masked or not (at least one per thread)
        self.issued = np.maximum(r * bn, self.threads) * self.chunks
        self.weight = np.maximum(bn, self.threads) * self.chunks
        self.regs = REG_BASE + REG_PER_ELEM * thread_elems(p, c)
        cap = np.minimum(chip["regs_per_thread_max"], (chip["regs_per_sm"] // self.threads) // 8 * 8)
        self.spill = np.maximum(self.regs - cap, 0.0)
        alloc = np.maximum(np.minimum(np.ceil(np.minimum(self.regs, cap) / 8) * 8, cap), 8)
        self.occupancy = np.maximum(
            np.minimum(
                np.minimum(
                    chip["max_threads_per_sm"] // self.threads, chip["regs_per_sm"] // (alloc * self.threads)
                ),
                chip["max_blocks_per_sm"],
            ),
            1,
        )
        self.rounds = self.reads * self.chunks  # dependent load rounds of a program
        self.round_bytes = (
            r * np.minimum(bn, p.hidden) * p.in_bytes
        )  # bytes one round loads (masked lanes: none)
        self.rows = r


@register
class RMSNormCuda(Operator):
    """The rmsnorm model on the cuda family (module docstring); its space ships beside it (rmsnorm.toml)."""

    OP = "rmsnorm"
    FAMILY = "cuda"
    PROBLEM = RMSNorm
    SPACE_FILE = "rmsnorm.toml"
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    CONSTANTS = DEFAULTS
    SAMPLE_ORDER = ("BLOCK_N", "ROWS", "num_warps")
    SHAPE_KNOBS = ("BLOCK_N", "ROWS")
    CHECKLIST = {
        "load": "memory bound: the floor for a norm; read each row once (BLOCK_N >= hidden), keep re-read rows in "
        "L2 (fewer rows in flight), fuse the norm into its producer (residual add) or consumer",
        "alu": "instruction bound: fewer masked lanes (BLOCK_N near hidden), no register spills, one pass",
        "issue": "program overhead bound: more rows per program",
        "latency": "no unit saturated: more rows or warps in flight (larger ROWS, more resident programs), larger "
        "chunks (fewer dependent rounds)",
    }
    WHAT_IF = {
        "num_warps": ("latency: warps per program (occupancy vs registers)", (4, 8, 16)),
        "ROWS": ("work per program: rows per program", (1, 2, 4)),
    }
    TARGETS = {"triton": TRITON}
    RUNNERS = ("triton",)

    def check(self, p: RMSNorm, chip) -> None:
        """The Triton kernels run fp16, bf16 and fp32 (fp32 arithmetic)."""
        if p.dtype not in ("fp16", "bf16", "fp32"):
            raise ProblemError(f"dtype: the Triton rmsnorm kernels run fp16, bf16 and fp32, got {p.dtype!r}")

    def feasible(self, p: RMSNorm, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        out = {}
        for r in [r for r in (rules or RULES) if all(k in c for k in RULES[r])]:
            if r == "registers":
                out[r] = thread_elems(p, c) <= MAX_THREAD_ELEMS
            elif r == "rows":
                out[r] = _i(c, "ROWS") <= _pow2_at_least(p.rows)
            elif r == "block":
                out[r] = _i(c, "BLOCK_N") <= np.maximum(_pow2_at_least(p.hidden), 256)
        return out

    def _memory_s(self, p: RMSNorm, chip, hbm, l2) -> np.ndarray:
        """HBM bytes at the reachable HBM rate, L2 bytes at L2's, never below the compulsory bytes at the datasheet
        HBM rate (the roofline's)."""
        e = self.constants(chip)
        hbm_s = hbm / (chip["hbm_gbps"] * 1e9 * e["hbm_efficiency"])
        l2_s = l2 / (chip["l2_gbps"] * 1e9)
        return np.maximum(np.maximum(hbm_s, l2_s), p.compulsory_bytes / (chip["hbm_gbps"] * 1e9))

    def quick_bound(self, p: RMSNorm, chip, c: dict) -> np.ndarray:
        """Every tiling moves at least the compulsory bytes (through HBM and L2), plus the launch."""
        n = len(next(iter(c.values())))
        b = p.compulsory_bytes
        return np.full(n, (self._memory_s(p, chip, b, b) * 1e6 + chip["launch_us"]) * BOUND_SAFETY)

    def estimate(self, p: RMSNorm, chip, c: dict) -> dict[str, np.ndarray]:
        e = self.constants(chip)
        g = _Counts(p, chip, c)
        f, sms = chip.clock_hz, chip.cores
        lanes = (
            e["rn_read_lanes"] * g.reads * g.issued
            + e["rn_square_lanes"] * g.issued
            + e["rn_weight_lanes"] * g.weight
            + e["rn_write_lanes"] * g.issued
            + (e["rn_reduce_lanes"] + e["rn_program_lanes"]) * g.threads
            + e["rn_spill_lanes"] * g.spill * g.rounds * g.threads
        )
        per_sm = np.ceil(g.programs / sms)
        resident = np.minimum(g.occupancy, per_sm)
        issue = per_sm * lanes / (32 * np.minimum(4, resident * g.warps))
        overhead = per_sm * e["rn_program_cycles"] / resident
        rate = np.minimum(e["rn_port_bytes_per_cycle"], g.warps * e["rn_warp_bytes_per_cycle"])
        chain = (
            e["rn_program_cycles"]
            + g.rounds * (chip["gm_latency_cycles"] + g.round_bytes / rate)
            + g.chunks * g.round_bytes / rate  # the stores of the last pass
            + e["rn_reduce_cycles"]
            + lanes / (32 * np.minimum(4, g.warps))
        )
        waves = np.ceil(per_sm / g.occupancy)
        latency = waves * chain
        sm_s = np.maximum(issue + overhead, latency) / f
        # memory: the re-read of the two-pass form hits L2 while the rows in flight fit its usable share
        in_flight = np.minimum(g.programs, sms * g.occupancy) * g.rows * p.hidden * p.in_bytes
        hit = np.clip(chip["l2_bytes"] * e["rn_l2_usable"] / np.maximum(in_flight, 1.0), 0.0, 1.0)
        hbm = p.compulsory_bytes + (g.reads - 1) * p.x_bytes * (1 - hit)
        # L2 traffic: x (each pass), y, the weight chunk every program reads, and spilled registers (local memory:
        # each spilled register stored and loaded once a round)
        spilled = g.programs * g.threads * g.spill * g.rounds * 4 * 2
        l2 = (
            g.reads * p.x_bytes
            + float(p.rows) * p.hidden * p.out_bytes
            + g.programs * p.weight_bytes
            + spilled
        )
        mem_s = self._memory_s(p, chip, hbm, l2)
        launch = chip["launch_us"]
        time_us = np.maximum(sm_s, mem_s) * 1e6 + launch
        zero = np.zeros(len(lanes))
        pipes = {
            "tensor": zero,
            "alu": issue / f * 1e6,
            "issue": overhead / f * 1e6,
            "smem": zero,
            "load": mem_s * 1e6,
            "store": zero,
        }
        used = np.minimum(g.programs, sms)
        return {
            "time_us": time_us,
            "bound": classify_bound(pipes, time_us - launch),
            **{f"{k}_us": v for k, v in pipes.items()},
            "cores_used": used.astype(np.int64),
            "waves": np.ceil(g.programs / (sms * g.occupancy)).astype(np.int64),
            "balance": (g.programs / sms) / np.maximum(per_sm, 1),
            "l2_hit_rate": 1.0 - np.minimum(hbm, l2) / np.maximum(l2, 1.0),
            "hbm_bytes": hbm,
            "l2_bytes": l2,
            "roofline_us": roofline_us(
                p.flops, p.compulsory_bytes, sms * FP32_FLOPS_PER_CYCLE * f, chip["hbm_gbps"] * 1e9, launch
            )
            + zero,
            "tiles": g.programs.astype(np.int64),
            "occupancy": g.occupancy.astype(np.int64),
            "registers": g.regs,
            "row_reads": g.reads.astype(np.int64),
            "latency_us": latency / f * 1e6,
            "core_us": sm_s * 1e6,  # the cores' own time (the memory floor apart): tie_rank
        }

    def tie_rank(self, p: RMSNorm, chip, c: dict) -> np.ndarray:
        """Among tilings predicted exactly equal (at the HBM floor), report first the one with the most slack: the
        least time its next-busiest resource needs, the cores' own time or the L2 traffic (a second pass, a weight
        read per task) at L2's rate. That is the time the kernel would take with an infinitely fast HBM."""
        est = self.estimate(p, chip, c)
        return np.maximum(est["core_us"], est["l2_bytes"] / (chip["l2_gbps"] * 1e9) * 1e6)

    def advice(self, p: RMSNorm, chip, c: dict, est: dict, row: int) -> list[str]:
        passes = "one pass (rows in registers)" if int(est["row_reads"][row]) == 1 else "two passes"
        out = [
            f"{passes}; occupancy: {int(est['occupancy'][row])} program(s) per SM at "
            f"{float(est['registers'][row]):.0f} registers a thread, {int(est['tiles'][row])} programs in all"
        ]
        return out + super().advice(p, chip, c, est, row)

    def warm_start(self, p: RMSNorm, chip) -> dict:
        """One row a program in 4096-element chunks, 8 warps."""
        return dict(BLOCK_N=4096, ROWS=1, num_warps=8)

    def runner(self, name: str):
        """`--measure triton`: time the tiling with triton_kernels (needs a GPU, torch and triton; imported only
        when a measurement runs)."""
        if name not in self.RUNNERS:
            return super().runner(name)
        from .triton_runner import measure_document

        return measure_document
