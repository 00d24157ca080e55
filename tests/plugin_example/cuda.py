"""row_scale on NVIDIA GPUs: a streaming kernel, one program per BLOCK columns of one row (the last chunk masked).

The model is small but physical, and its constants are guesses (this operator exists to test the plugin contract,
it was never measured or calibrated):
* memory: x and y cross HBM once and each row's factor once: bytes over the profile's HBM rate times its
  `hbm_efficiency`; every program also reads its row's factor, from L2 after the first.
* issue: a program issues LANES_PER_ELEMENT thread instructions per element of its BLOCK (masked lanes issue too;
  at least one per thread) plus PROGRAM_LANES per thread (indices, masks, the factor); an SM issues 32 lanes a
  cycle per scheduler, 4 schedulers when 4 warps are resident.
* latency: a program's chain is one dependent HBM round (the profile's gm_latency_cycles) plus PROGRAM_CYCLES; an
  SM runs its programs in rounds of the resident count (threads and blocks per SM).
* the kernel: the larger of the memory time and the busiest SM's time (a streaming kernel overlaps them), plus
  the launch.
"""

from __future__ import annotations

import numpy as np

from tiler.model.common import ceil_div, classify_bound, roofline_us
from tiler.operator import Operator

from .problem import RowScale

LANES_PER_ELEMENT = 1.5  # load, multiply, convert, store, vectorised: a guess, not measured
PROGRAM_LANES = 24.0  # per thread and program: index math, masks, the factor's load (a guess)
PROGRAM_CYCLES = 200.0  # per program: start and exit (a guess)
MAX_THREAD_ELEMS = 64  # elements a thread holds in registers before the tile spills (a guess)
LANES_PER_CYCLE = 128  # per SM: 4 schedulers x 32 lanes (compute capability 8.x and 9.x)


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


class RowScaleCuda(Operator):
    """The row_scale model on the cuda family (module docstring); its space ships beside it."""

    OP = "row_scale"
    FAMILY = "cuda"
    PROBLEM = RowScale
    SPACE_FILE = "row_scale.toml"
    KNOBS = ("BLOCK", "num_warps")
    RULES = {"registers": ("BLOCK", "num_warps"), "block": ("BLOCK",)}
    RULE_TEXT = {
        "registers": f"BLOCK/(32*num_warps) <= {MAX_THREAD_ELEMS} elements a thread (registers)",
        "block": "BLOCK <= cols rounded up to a power of two (a larger chunk only adds masked lanes)",
    }
    CHECKLIST = {
        "load": "HBM-bound: the floor for a streaming kernel; fuse it into its producer or consumer",
        "alu": "issue-bound: fewer instructions per element (wider vectors, larger BLOCK per thread)",
        "issue": "program overheads dominate: larger BLOCK, fewer programs",
        "latency": "too few bytes in flight: more resident warps or larger BLOCK per program",
    }
    CONSTANTS = {"hbm_efficiency": 0.92}

    def check(self, p, chip) -> None:
        """Any dtype: the CUDA cores scale it (no matrix unit needed)."""

    def feasible(self, p, chip, c, rules=None):
        out = {}
        rules = self.RULES if rules is None else rules
        if "registers" in rules and {"BLOCK", "num_warps"} <= set(c):
            out["registers"] = _i(c, "BLOCK") <= MAX_THREAD_ELEMS * 32 * _i(c, "num_warps")
        if "block" in rules and "BLOCK" in c:
            out["block"] = _i(c, "BLOCK") <= 2 ** int(np.ceil(np.log2(max(p.cols, 1))))
        return out

    def _memory_s(self, p, chip) -> float:
        rate = chip["hbm_gbps"] * 1e9 * self.constants(chip)["hbm_efficiency"]
        return p.compulsory_bytes / rate

    def quick_bound(self, p, chip, c):
        """The memory time and the launch: every tiling moves the same bytes."""
        return np.full(len(c["BLOCK"]), self._memory_s(p, chip) * 1e6 + chip["launch_us"])

    def estimate(self, p, chip, c):
        block, warps = _i(c, "BLOCK"), _i(c, "num_warps")
        f, sms = chip.clock_hz, chip.cores
        threads = 32 * warps
        programs = (p.rows * ceil_div(p.cols, block)).astype(np.float64)
        occupancy = np.maximum(
            np.minimum(chip["max_threads_per_sm"] // threads, chip["max_blocks_per_sm"]), 1
        ).astype(np.float64)
        per_sm = np.ceil(programs / sms)
        resident = np.minimum(occupancy, per_sm)
        lanes = LANES_PER_ELEMENT * np.maximum(block, threads) + PROGRAM_LANES * threads
        issue = per_sm * lanes / (32 * np.minimum(4, resident * warps))
        rounds = np.ceil(per_sm / occupancy)
        latency = rounds * (PROGRAM_CYCLES + chip["gm_latency_cycles"])
        sm_s = np.maximum(issue, latency) / f
        mem_s = self._memory_s(p, chip)
        launch = chip["launch_us"]
        time_us = np.maximum(sm_s, mem_s) * 1e6 + launch
        zero = np.zeros(len(block))
        pipes = {
            "tensor": zero,
            "alu": issue / f * 1e6,
            "issue": rounds * PROGRAM_CYCLES / f * 1e6,
            "smem": zero,
            "load": np.full(len(block), mem_s * 1e6),
            "store": zero,
        }
        l2_bytes = p.compulsory_bytes + programs * p.in_bytes  # every program reads its row's factor
        lanes_per_s = sms * LANES_PER_CYCLE * f
        return {
            "time_us": time_us,
            "bound": classify_bound(pipes, time_us - launch),
            **{f"{k}_us": v for k, v in pipes.items()},
            "cores_used": np.minimum(programs, sms).astype(np.int64),
            "waves": np.ceil(programs / (sms * occupancy)).astype(np.int64),
            "balance": (programs / sms) / np.maximum(per_sm, 1),
            "l2_hit_rate": 1.0 - p.compulsory_bytes / l2_bytes,
            "hbm_bytes": np.full(len(block), p.compulsory_bytes),
            "l2_bytes": l2_bytes,
            "roofline_us": roofline_us(
                p.flops, p.compulsory_bytes, lanes_per_s, chip["hbm_gbps"] * 1e9, launch
            )
            + zero,
        }
