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

from __future__ import annotations

import numpy as np

from ...errors import ConfigError, ProblemError
from ...model.common import (
    BOUND_SAFETY,
    ceil_div,
    classify_bound,
    group_rows_any,
    roofline_us,
    unique_inverse,
)
from ...model.schedule import PairTable, on_clear, pack_codes, panel_hits_many, unpack_codes
from ...operator import Operator, register
from ..triton_measure import TritonRunner
from . import views
from .problem import Matmul

KNOBS = (
    "BLOCK_M",
    "BLOCK_N",
    "BLOCK_K",
    "num_stages",
    "num_warps",
    "GROUP_M",
    "ORDER",
    "SPLIT_K",
    "TEMPLATE",
)
# TEMPLATE (triton_tma.py): 0 pointer loads, 1 TMA loads, 2 TMA loads in a persistent grid; a table without the
# knob is the pointer kernel (the user's own kernels, measurements from before the templates)
POINTER, TMA, PERSISTENT = 0, 1, 2
# GROUP_M and ORDER only change which SM runs which tile (and so the L2 hits): they are the SCHEDULE_KNOBS, expanded
# inside the exhaustive search's branch and bound (quick_bound holds for all of them; dominated() drops the
# duplicates, GROUP_M being moot unless ORDER is grouped, before scoring).
ORDER_KNOBS = ("GROUP_M", "ORDER")
SCHEDULE_KNOBS: tuple[str, ...] = ORDER_KNOBS
# Enumeration levels: the tile grid and K split first (prefix_bound bounds each row over every completion), then
# the pipelining depth and warps (the capacity rules prune before the schedule knobs multiply the table).
LEVELS = (("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K"), ("num_stages", "num_warps", "TEMPLATE"))

RULES = {
    "pow2": ("BLOCK_M", "BLOCK_N", "BLOCK_K"),
    "dot_min": ("BLOCK_M", "BLOCK_N", "BLOCK_K"),
    "threads": ("num_warps",),
    "smem": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"),
    "registers": ("BLOCK_M", "BLOCK_N", "num_warps"),
    "occupancy": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"),
    "dtype": (),
    "tma": ("TEMPLATE",),
}
RULE_TEXT = {
    "pow2": "BLOCK_M, BLOCK_N, BLOCK_K powers of two (tl.arange: 'arange's range must be a power of 2')",
    "dot_min": "BLOCK_M, BLOCK_N, BLOCK_K >= 16 (tl.dot: every non-batch dimension must be >= 16)",
    "threads": "32*num_warps <= 1024 threads per block (CUDA launch limit)",
    "smem": "(BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N)*bytes*num_stages <= shared memory per block (Triton OutOfResources)",
    "registers": "fp32 accumulator BLOCK_M*BLOCK_N/(32*num_warps) + 16 <= min(255, regs per SM / threads) "
    "(the accumulator itself would spill to local memory)",
    "occupancy": "at least one block fits an SM (shared memory + 1 KB reserved, registers, threads)",
    "dtype": "the chip's tensor cores support the dtype (macs_per_cycle_<dtype> > 0)",
    "tma": "TEMPLATE tma/persistent: a chip with TMA (Hopper: mma_version 3) and each operand's row stride a multiple "
    "of 16 bytes (cuTensorMapEncodeTiled)",
}

# The [efficiency] constants the model reads, with the value used when a profile lacks them (uncalibrated).
# Each is a physical quantity; `tiler calibrate` fits them to measured latencies (docs/model_cuda.md, "constants").
DEFAULTS = {
    "mma_version": 3.0,  # tensor-core instruction family: 3 = wgmma (sm90), 2 = mma.sync only (sm80)
    "mma_efficiency_v3": 0.9,  # share of peak wgmma reaches with the widest instruction (N = 256)
    "mma_n_half": 16.0,  # instruction N at which a wgmma would reach half of its peak (fixed cost per issue)
    "mma_efficiency_v2": 0.6,  # share of peak mma.sync reaches (Hopper's peak needs wgmma: Luo et al., arXiv 2402.13499)
    "sm_load_bytes_per_cycle": 128.0,  # global -> shared bytes per SM cycle: the SM's L1/TEX fill port (not fitted)
    "smem_bytes_per_cycle": 128.0,  # shared-memory bandwidth per SM (32 banks x 4 B)
    "l2_efficiency": 1.0,  # share of the profile's L2 bandwidth loads get (fitted: may exceed 1, see docs)
    "hbm_efficiency": 0.92,  # share of the profile's HBM bandwidth (a read loop measured 4.42 of 4.8 TB/s)
    "latency_scale": 1.5,  # loaded latency of a tile load / idle pointer-chase latency (gm_latency_cycles)
    "step_overhead_cycles": 120.0,  # per K step of one program: barrier, wait, address update, loop
    "program_overhead_cycles": 1500.0,  # per program: start, index math, accumulator init, epilogue setup
    "overlap_power": 4.0,  # p of the soft max (sum x^p)^(1/p) that joins overlapped pipes
    "atomic_gelems_per_s": 150.0,  # fp32 atomic adds per second (1e9), whole chip (tl.atomic_add: acq_rel, one per element)
    # the same adds where the output's rows are not provably 16-B aligned (N not a multiple of 16: Triton cannot
    # vectorise them, one scalar atomic per element); a guess of a quarter of the aligned rate until fitted
    "unaligned_atomic_gelems_per_s": 37.5,
    "extra_kernel_us": 2.0,  # each extra kernel of split-K (zero fill, cast) beyond its memory time
    "unaligned_elems_per_cycle": 4.0,  # elements per SM cycle of synchronous scalar loads (rows not 16-B aligned)
    "spill_cycles_per_reg": 60.0,  # cycles per K step per register a thread spills to local memory
    # fixed cost of one DRAM request, in bytes of transfer time: a tile row shorter than a 128-B line reaches HBM
    # as short requests, which move fewer bytes per activation and command slot (docs/model_cuda.md, "Short rows")
    "dram_request_bytes": 32.0,
    # the TMA templates (triton_tma.py): a K step's loads are two bulk copies one thread issues, with no address
    # arithmetic or masks per thread: the step's fixed cost, like step_overhead_cycles (the profile's value of that
    # until fitted: efficiency() copies it)
    "tma_step_overhead_cycles": 120.0,
    # the TMA unit's copy rate into one SM's shared memory, bytes per cycle: bulk boxes, not the L1/TEX path's
    # line slots (sm_load_bytes_per_cycle); a guess of twice that path until fitted
    "tma_bytes_per_cycle": 256.0,
    # the persistent template: between two tiles of one program, the index math and accumulator reset; the next
    # tile's first loads were issued during the last one's K loop (flatten), so no load latency (guess until fitted)
    "persistent_tile_cycles": 300.0,
    # the launch order reported when the model predicts several orders of a tiling exactly equal (tie_rank):
    # 0 = row-major, -1 = serpentine, g > 0 = grouped with GROUP_M = g; one for 16-B aligned (cp.async) loads,
    # one for the synchronous path. Chosen from measurements by `tiler calibrate` (choose_tie_orders), not fitted
    "tie_order_async": 0.0,
    "tie_order_sync": 0.0,
}
TIE_KEYS = ("tie_order_async", "tie_order_sync")
# The constants `tiler calibrate` fits, each with the box of physical values the fit stays in.
FITTABLE = {
    "mma_efficiency_v3": (0.3, 1.0),
    "mma_n_half": (0.5, 256.0),
    "mma_efficiency_v2": (0.1, 1.0),
    "l2_efficiency": (0.5, 3.0),
    "latency_scale": (0.5, 8.0),
    "step_overhead_cycles": (1.0, 5000.0),
    "program_overhead_cycles": (1.0, 1e5),
    "overlap_power": (1.0, 32.0),
    "atomic_gelems_per_s": (5.0, 5000.0),
    "unaligned_atomic_gelems_per_s": (1.0, 5000.0),
    "extra_kernel_us": (0.01, 50.0),
    "unaligned_elems_per_cycle": (0.1, 64.0),
    "spill_cycles_per_reg": (0.1, 1e4),
    "dram_request_bytes": (0.1, 1024.0),
    "tma_step_overhead_cycles": (1.0, 5000.0),
    "tma_bytes_per_cycle": (16.0, 2048.0),
    "persistent_tile_cycles": (1.0, 1e5),
}
_BASE_REGS = (
    24  # per-thread registers besides accumulator, fragments and load addresses (indices, loop, masks)
)
_SMEM_RESERVED = 1024  # bytes of shared memory the driver reserves per block (sm80+)


def efficiency(chip) -> dict[str, float]:
    """The model's constants from a profile's [efficiency] section, defaults filled in. The tie orders are
    launch-order codes (0 row-major, -1 serpentine, g > 1 grouped); every other constant is positive."""
    out = {k: float(chip.get(k, v)) for k, v in DEFAULTS.items()}
    if chip.get("tma_step_overhead_cycles") is None:  # unfitted: a TMA K step costs what a pointer one does
        out["tma_step_overhead_cycles"] = out["step_overhead_cycles"]
    for k, v in out.items():
        if k in TIE_KEYS and (v != int(v) or v < -1):
            raise ConfigError(
                f"{chip.path or chip.id}: [efficiency] {k}: must be an integer >= -1, got {v!r}"
            )
        if k not in TIE_KEYS and not v > 0:
            raise ConfigError(f"{chip.path or chip.id}: [efficiency] {k}: must be positive, got {v!r}")
    return out


def contiguous_lengths(p: Matmul) -> tuple[int, int]:
    """The length, in elements, of the axis A and B are contiguous along as stored, which is also their row
    stride: A `n` (M x K) K, A `t` (K x M) M; B `n` (K x N) N, B `t` (N x K) K (docs/model_cuda.md, "Layouts")."""
    return (p.M if p.a_transposed else p.K), (p.K if p.b_transposed else p.N)


def synchronous_loads(p: Matmul) -> bool:
    """True when a row stride is not a multiple of 16 elements: A or B loads take the synchronous 1-element path."""
    return any(n % 16 for n in contiguous_lengths(p))


def order_code(p: Matmul, c: dict, effective: bool = True) -> np.ndarray:
    """The launch order of each candidate as a tie code: 0 row-major, -1 serpentine, g > 0 grouped by g.

    `effective`: the walk the kernel really runs. A group of one tile row is row-major, and groups of at least
    all tile rows are one walk, so the group is min(GROUP_M, tiles along M). Otherwise the setting as given.
    """
    order = _i(c, "ORDER")
    g = _i(c, "GROUP_M")
    if effective:
        g = np.minimum(g, ceil_div(p.M, _i(c, "BLOCK_M")))
    return np.where(order == 2, -1, np.where((order == 1) & (g > 1), g, 0))


def tie_rank(p: Matmul, chip, c: dict) -> np.ndarray:
    """0 for candidates in the order measurements favour on this load path, 1 otherwise (search.top_distinct).

    The model predicts orders of a tiling exactly equal when its L2 walk sees no difference, but the H200 does not
    run them equal: on the measured shapes grouped order is a few percent faster with cp.async loads, and row-major
    up to 1.5x faster on the synchronous path, where it is code generation (ORDER is a constexpr: the row-major
    kernel's loop does fewer address adds; docs/model_cuda.md sections 6 and 8). Neither is modelled as time; the
    preference only decides which of the exactly tied orders the search reports.
    """
    key = "tie_order_sync" if synchronous_loads(p) else "tie_order_async"
    want = int(round(float(chip.get(key, DEFAULTS[key]))))
    # the preferred setting on each candidate's own grid, as the walk it really runs
    bm = _i(c, "BLOCK_M")
    setting = {
        "ORDER": np.full(bm.shape, 2 if want < 0 else 1 if want > 1 else 0),
        "GROUP_M": np.full(bm.shape, max(want, 1)),
        "BLOCK_M": bm,
    }
    return (order_code(p, c) != order_code(p, setting)).astype(np.int8)


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _template(c: dict) -> np.ndarray:
    """Each row's TEMPLATE; POINTER for every row of a table without the knob."""
    if "TEMPLATE" in c:
        return _i(c, "TEMPLATE")
    return np.zeros(np.shape(c["BLOCK_M"]), dtype=np.int64)


def resident(occ: np.ndarray, c: dict) -> np.ndarray:
    """Programs resident on an SM at a time: the occupancy (at least 1), but 1 for the persistent template, whose
    grid has one program per SM walking its tiles one after another."""
    return np.where(_template(c) == PERSISTENT, 1, np.maximum(occ, 1))


def tma_ok(p: Matmul) -> bool:
    """TMA descriptors can describe A and B as stored: each row stride a multiple of 16 bytes (triton_tma)."""
    from .triton_tma import tma_ok as rows_ok

    return rows_ok(p.M, p.N, p.K, p.layout, p.in_bytes)


def tma_runs(p: Matmul, chip) -> bool:
    """The TMA templates can run this problem on this chip: the chip has the tensor memory accelerator (Hopper,
    compute capability 9.0, which the profile says as mma_version 3: wgmma came with it) and tma_ok(p)."""
    return float(chip.get("mma_version", DEFAULTS["mma_version"])) >= 3 and tma_ok(p)


def _warps_v3(bm, w):
    """Triton warpsPerTileV3: start from one warpgroup along M (4, 1); double M while BLOCK_M > 16*wm, else N."""
    wm, wn = np.full_like(bm, 4), np.ones_like(bm)
    for _ in range(6):
        grow = wm * wn < w
        along_m = grow & (bm > 16 * wm)
        wm = np.where(along_m, wm * 2, wm)
        wn = np.where(grow & ~along_m, wn * 2, wn)
    return wm, wn


def _warps_v2(bm, bn, w):
    """Triton warpsPerTileV2: balance the 16x8 mma repetitions between M and N."""
    rm, rn = ceil_div(bm, 16), ceil_div(bn, 8)
    wm, wn = np.ones_like(bm), np.ones_like(bm)
    for _ in range(6):
        grow = wm * wn < w
        go_m = grow & (rm >= rn)
        wm = np.where(go_m, wm * 2, wm)
        rm = np.where(go_m & (rm != 1), rm // 2, rm)
        go_n = grow & ~go_m
        wn = np.where(go_n, wn * 2, wn)
        rn = np.where(go_n, rn // 2, rn)
    return wm, wn


def _vector_elems(stride: int, contiguous_ok: bool, b: int, chip) -> int:
    """Elements per global load of a row-major operand whose rows are `stride` elements apart.

    Triton learns alignment only from its integer specialisation (an argument divisible by 16 is tagged
    divisibility=16); a row stride that is not a multiple of 16 elements leaves the row starts 1-element aligned,
    and every load is one element wide (no 16-B vector, no cp.async below 4 B). `contiguous_ok` is False when a mask
    along the contiguous axis varies inside a vector (A's K mask when K % 16 != 0).
    """
    if stride % 16 == 0 and contiguous_ok:
        return max(1, int(chip["vector_load_bytes"]) // b)
    return 1


def _registers(c: dict, b: int, v3, wm, wn, vec_a: int, vec_b: int, b_rows_along_k: bool = False):
    """Estimated registers per thread (before the launch cap) and the accumulator's share.

    Accumulator: BLOCK_M*BLOCK_N fp32 values over the threads. mma.sync keeps a warp's A and B fragments of the
    K step in registers (wgmma reads both from shared memory). Async (cp.async) loads write shared memory directly
    and need one 64-bit address per 16-B vector. A synchronous 1-element load path (rows not 16-B aligned) stages
    every element in a register; a warp's 32 lanes cover 32 consecutive elements of a row. For B the compiler keeps
    one 64-bit base address per tile row the thread touches (offsets along the row are immediates); for A it keeps
    a 64-bit address per element (3 registers per element), as ptxas' counts show (bench/data/h200_registers.csv:
    with 2 per A row instead, the estimate ran a median 22 registers low on misaligned A rows; now 10 high).
    `b_rows_along_k`: B is stored transposed (N x K), so its tile rows are BLOCK_N rows of BLOCK_K elements
    (an estimate: ptxas' counts were measured on row-major B only).
    With one stage there is no cp.async pipeline, and under wgmma ptxas' counts fit A's K-step fragment,
    BLOCK_M * BLOCK_K / threads elements, living in registers (as when wgmma takes A from registers; B always comes
    from shared memory); an inference from the counts, not read from the compiler's passes. On 90 aligned one-stage tilings of 4096^3 (ptxas, bench/data/
    h200_registers_one_stage.csv) this takes the estimate from a median 30 registers low to 0 (median |error| 9; the
    two-stage twins run 8 low); the gap between one and two stages follows A's share, not B's (64x256x64 on 8 warps:
    1 register, 256x16x128 on 4 warps: 92). Nsight Compute shows the consequence: 128x16x64 on 4 warps holds 80
    registers and 6 programs per SM with 1 stage, 56 and 6 with 2 (bench/data/h200_matmul_ncu.csv).
    """
    bm, bn, bk, w = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "BLOCK_K"), _i(c, "num_warps")
    threads = 32 * w
    acc = bm * bn / threads
    frag = np.where(v3, 0.0, ((bm / wm) * bk + bk * (bn / wn)) * b / 4.0 / 32.0)
    la = bm * bk / threads
    lb = bk * bn / threads
    addr = 2.0 * ((la / vec_a if vec_a > 1 else 0.0) + (lb / vec_b if vec_b > 1 else 0.0))
    # synchronous path: values + addresses (A: one per element; B: one per row, BLOCK_K rows over the warps)
    rows_b = np.maximum(
        (bn * np.minimum(bk, 32) if b_rows_along_k else bk * np.minimum(bn, 32)) / threads, 1.0
    )
    staged = (3.0 * la if vec_a == 1 else 0.0) + (lb + 2.0 * rows_b if vec_b == 1 else 0.0)
    # (an A on the synchronous path is already staged above, stages or not)
    one_stage = np.where((_i(c, "num_stages") == 1) & (v3 > 0), la * b / 4.0 if vec_a > 1 else 0.0, 0.0)
    pointer = acc + frag + addr + staged + one_stage + _BASE_REGS
    # TMA templates: the copy engine computes the addresses and writes shared memory (no address registers, no
    # staging); A's one-stage fragment as on the aligned path
    tma_one_stage = np.where((_i(c, "num_stages") == 1) & (v3 > 0), la * b / 4.0, 0.0)
    return np.where(_template(c) >= TMA, acc + frag + tma_one_stage + _BASE_REGS, pointer), acc


def _reg_cap(chip, w):
    """Registers a thread may use: 255, and the block's share of the register file (ptxas honours .maxntid)."""
    cap = np.minimum(int(chip["regs_per_thread_max"]), int(chip["regs_per_sm"]) // (32 * w))
    return (cap // 8) * 8


def smem_bytes(p: Matmul, c: dict) -> np.ndarray:
    return (
        (_i(c, "BLOCK_M") * _i(c, "BLOCK_K") + _i(c, "BLOCK_K") * _i(c, "BLOCK_N"))
        * p.in_bytes
        * _i(c, "num_stages")
    )


def smem_allocated(p: Matmul, chip, c: dict) -> np.ndarray:
    """Shared memory the compiler allocates for the K loop's operand buffers (what limits residency).

    Read off ptxas for 768 tilings of 4 shapes (bench/data/h200_registers.csv, column `shared`; exact on 90 % of
    them, the rest below by an epilogue scratch): an operand loaded with cp.async gets `num_stages` buffers under
    wgmma and `num_stages - 1` under mma.sync; an operand on the synchronous path (rows not 16-element aligned,
    `_vector_elems` = 1) goes through registers into a single buffer. smem_bytes() (every operand `num_stages`
    buffers) stays the conservative feasibility check: it is never below this."""
    bm, bn, bk = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "BLOCK_K")
    st, w = _i(c, "num_stages"), _i(c, "num_warps")
    b = p.in_bytes
    v3 = (float(chip.get("mma_version", DEFAULTS["mma_version"])) >= 3) & (w % 4 == 0) & (bm % 64 == 0)
    v3 &= (bn % 16 == 0) & (bk * b >= 32)
    bufs = np.where(v3, st, np.maximum(st - 1, 1))
    len_a, len_b = contiguous_lengths(p)
    sync_a = _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip) == 1
    sync_b = _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip) == 1
    pointer = (bm * bk * (1 if sync_a else bufs) + bk * bn * (1 if sync_b else bufs)) * b
    # TMA templates: both operands through the copy engine into `bufs` buffers each
    return np.where(_template(c) >= TMA, (bm * bk + bk * bn) * bufs * b, pointer)


def occupancy(p: Matmul, chip, c: dict, regs) -> np.ndarray:
    """Blocks resident per SM: the tightest of shared memory (as allocated), registers, threads and the block
    limit."""
    w = _i(c, "num_warps")
    smem = smem_allocated(p, chip, c) + _SMEM_RESERVED
    by_smem = int(chip["smem_bytes_per_sm"]) // np.maximum(smem, 1)
    alloc = np.ceil(np.minimum(regs, _reg_cap(chip, w)) / 8.0) * 8.0
    by_regs = np.floor(int(chip["regs_per_sm"]) / np.maximum(alloc * 32 * w, 1)).astype(np.int64)
    by_threads = int(chip["max_threads_per_sm"]) // (32 * w)
    return np.minimum(np.minimum(by_smem, by_regs), np.minimum(by_threads, int(chip["max_blocks_per_sm"])))


# L2 hit rates of the launch orders, kept per (problem, chip L2 and SMs) in tables found by a packed code of what
# else they depend on: BLOCK_M, BLOCK_N, SPLIT_K, the round's slots, the group width and serpentine (field widths
# in bits, most significant first). Rows whose values do not fit are simulated without the table.
_HIT_BITS = (12, 12, 10, 16, 8, 1)
_HIT_TABLES: dict = {}
_HIT_TABLES_MAX = 16  # tables (problems) kept before all start over
# rows from which a call looks its hit rates up in the tables (below: the table costs more)
_HIT_TABLE_MIN = 1024


on_clear(_HIT_TABLES.clear)  # schedule.clear_caches() starts the tables over too


def _panel_hit_rates(p: Matmul, chip, c: dict, tm, tn, sk, occ_eff, rows_a, bn):
    """L2 hit rates of A and B panel loads in each candidate's launch order (schedule.panel_hits), one
    simulation per distinct (grid, round, order, panel sizes), kept per problem and chip (a search or a repeated
    call pays no simulation and no Python per row once a setting is known)."""
    order, gm = _i(c, "ORDER"), _i(c, "GROUP_M")
    sms = chip.cores
    group = np.where(order == 1, gm, 1)
    serp = (order == 2).astype(np.int64)
    # a round is `occupancy` programs on every SM; for the L2 walk it is rounded down to a power of two (the
    # footprint of a round changes reuse only near the capacity edge; this keeps distinct walks few)
    slots = sms * (1 << np.floor(np.log2(occ_eff)).astype(np.int64))
    l2 = float(chip["l2_bytes"])
    if np.size(order) < _HIT_TABLE_MIN:  # a search's batch: simulated directly (the schedule caches the walks)
        return _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, rows_a, bn)
    code = pack_codes([_i(c, "BLOCK_M"), bn, sk, slots, group, serp], _HIT_BITS)
    if code is None:
        return _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, rows_a, bn)
    ucode, inv, _ = unique_inverse(code)
    key = (p.M, p.N, p.K, p.batch, p.in_bytes, sms, l2)
    table = _HIT_TABLES.get(key)
    if table is None:
        if len(_HIT_TABLES) >= _HIT_TABLES_MAX:
            _HIT_TABLES.clear()
        table = _HIT_TABLES[key] = PairTable()
    ids = table.ids(ucode, lambda missing: _hit_rates_of_codes(p, l2, missing))
    rates = table.values[ids[inv]]
    return rates[:, 0], rates[:, 1]


def _hit_rates_of_codes(p: Matmul, l2: float, codes: np.ndarray) -> np.ndarray:
    """(A, B) hit rates of packed codes (_HIT_BITS), by prepare()'s grid arithmetic on their fields."""
    bm, bn, sk, slots, group, serp = unpack_codes(codes, _HIT_BITS)
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    a, b = _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, np.minimum(bm, p.M), bn)
    return np.stack([a, b], axis=1)


def _simulated_hit_rates(p: Matmul, l2: float, tm, tn, sk, slots, group, serp, rows_a, bn):
    """The hit rates by simulation: one panel_hits_many call per grid (tm, tn, splits, slots, panel sizes) with
    all of its launch orders."""
    b = p.in_bytes
    kslice = ceil_div(p.K, sk)
    a_panel = rows_a * kslice * b
    b_panel = np.minimum(bn, p.N) * kslice * b
    keys = [tm, tn, sk, slots, group, serp, a_panel, b_panel]
    keys = [np.broadcast_to(np.asarray(k, dtype=np.int64), np.shape(tm)) for k in keys]
    first, inv = group_rows_any(keys)
    uniq = np.stack([k[first] for k in keys], axis=1)
    hits = np.zeros((len(uniq), 2))
    grid_cols = [0, 1, 2, 3, 6, 7]
    gfirst, ginv = group_rows_any([uniq[:, j] for j in grid_cols])
    for gi, row in enumerate(gfirst):
        t_m, t_n, s_k, sl, _, _, ap, bp = (int(x) for x in uniq[row])
        members = np.flatnonzero(ginv == gi)
        settings = np.stack(
            [np.maximum(uniq[members, 4], 1), np.zeros(members.size, dtype=np.int64), uniq[members, 5]],
            axis=1,
        )
        hits[members] = panel_hits_many(t_m, t_n, s_k, p.batch, sl, settings, float(ap), float(bp), l2)
    return hits[inv, 0], hits[inv, 1]


def _layout(p: Matmul, chip, c: dict) -> tuple:
    """prepare()'s tensor-core path (Triton supportMMA / warpsPerTile), registers and occupancy: (v3, wm, wn,
    regs, acc, occ)."""
    bm, bn, bk = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "BLOCK_K")
    w = _i(c, "num_warps")
    b = p.in_bytes
    mma_version = float(chip.get("mma_version", DEFAULTS["mma_version"]))
    v3 = (mma_version >= 3) & (w % 4 == 0) & (bm % 64 == 0) & (bn % 16 == 0) & (bk * b >= 32)
    # the warp layouts depend on (BLOCK_M, BLOCK_N, num_warps) alone: solved once per distinct triple
    first, inv = group_rows_any([bm, bn, w])
    wm3, wn3 = (x[inv] for x in _warps_v3(bm[first], w[first]))
    wm2, wn2 = (x[inv] for x in _warps_v2(bm[first], bn[first], w[first]))
    wm, wn = np.where(v3, wm3, wm2), np.where(v3, wn3, wn2)
    len_a, len_b = contiguous_lengths(p)
    vec_a = _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip)
    vec_b = _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip)
    regs, acc = _registers(c, b, v3, wm, wn, vec_a, vec_b, p.b_transposed)
    return v3, wm, wn, regs, acc, occupancy(p, chip, c, regs)


_SHARE_MIN = 1024  # rows from which estimate() looks for rows that differ only in launch orders of equal hits
_SHARE_MAX = 0.7  # ... and scores only one of each when the distinct rows are at most this share of the table


def estimate(p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
    """timing(prepare(...)) with the work shared across rows that differ only in their launch order (ORDER,
    GROUP_M) and get the same L2 hit rates from it: the order reaches the estimate only through the hit rates,
    so such rows have equal estimates, and one of each is scored. Bit for bit timing(prepare(...))."""
    n = len(c["BLOCK_M"]) if "BLOCK_M" in c else 0
    if n < _SHARE_MIN or any(k not in c for k in KNOBS):
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    tiling = {k: _i(c, k) for k in KNOBS if k not in ORDER_KNOBS}
    tfirst, tinv = group_rows_any(list(tiling.values()))
    if tfirst.size > _SHARE_MAX * n:
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    # the hit rates of every row: prepare()'s grid and occupancy, per distinct tiling
    bm, bn, sk = (tiling[k][tfirst] for k in ("BLOCK_M", "BLOCK_N", "SPLIT_K"))
    first = {k: v[tfirst] for k, v in tiling.items()}
    occ = _layout(p, chip, first)[5]
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    occ_eff, rows_a = resident(occ, first), np.minimum(bm, p.M)
    a_hit, b_hit = _panel_hit_rates(
        p, chip, c, tm[tinv], tn[tinv], sk[tinv], occ_eff[tinv], rows_a[tinv], bn[tinv]
    )
    first, inv = group_rows_any([tinv, a_hit.view(np.int64), b_hit.view(np.int64)])
    if first.size > _SHARE_MAX * n:
        return timing(prepare(p, chip, c), chip, efficiency(chip))
    est = timing(prepare(p, chip, {k: np.asarray(v)[first] for k, v in c.items()}), chip, efficiency(chip))
    return {k: v[inv] for k, v in est.items()}


def prepare(p: Matmul, chip, c: dict, l2_hits: bool = True) -> dict[str, np.ndarray]:
    """Everything the timing needs that does not depend on the [efficiency] constants, one column per quantity.

    `l2_hits=False` skips the launch order's L2 walk and counts every panel load as an L2 hit (ORDER and GROUP_M
    are then not read): the time is non-increasing in the hit rates, so this is a floor over every order.
    """
    bm, bn, bk = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "BLOCK_K")
    st, w, sk = _i(c, "num_stages"), _i(c, "num_warps"), _i(c, "SPLIT_K")
    n = bm.size
    b, ob = p.in_bytes, p.out_bytes
    sms = chip.cores
    # --- grid
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    k_tiles = ceil_div(p.K, bk)
    steps = ceil_div(k_tiles, sk)
    programs = tm * tn * sk * p.batch
    # --- tensor-core path (Triton supportMMA / warpsPerTile), registers and occupancy
    v3, wm, wn, regs, acc, occ = _layout(p, chip, c)
    instr_n = np.minimum(bn // wn, 256)
    # warps beyond what the tile can feed repeat the same mma.sync work (layout replication)
    rep = np.where(v3, 1, np.maximum(1, wm * 16 // bm) * np.maximum(1, wn * 8 // bn))
    # shared-memory traffic per K step: cp.async writes + tensor-core operand reads
    smem_rd = np.where(v3, bk * (bm * wn + bn * np.maximum(bm // 64, 1)), bk * (bm * wn + bn * wm) * rep) * b
    smem_traffic = smem_rd + (bm + bn) * bk * b
    # --- alignment: each operand is contiguous along one axis, whose length is its row stride (A `n`: K, `t`: M;
    # B `n`: N, `t`: K; C rows are N apart); the K mask varies inside a vector when that axis is K and K % 16 != 0
    len_a, len_b = contiguous_lengths(p)
    vec_a = _vector_elems(len_a, p.a_transposed or p.K % 16 == 0, b, chip)
    vec_b = _vector_elems(len_b, not p.b_transposed or p.K % 16 == 0, b, chip)
    vec_c = _vector_elems(p.N, True, ob, chip)
    cap = _reg_cap(chip, w)
    tpl = _template(c)
    # TMA loads: full-width bulk copies whatever Triton can prove (the `tma` rule: 16-B rows)
    tma = tpl >= TMA
    persistent = tpl == PERSISTENT
    occ_eff = resident(occ, c)
    # --- the SM-level schedule: programs per SM, rounds of `occ`, the explicit tail round
    n_sm = ceil_div(programs, sms)
    rounds = ceil_div(n_sm, occ_eff)
    k_last = n_sm - (rounds - 1) * occ_eff
    k_full = np.minimum(occ_eff, n_sm)
    hi = programs - (n_sm - 1) * sms  # SMs that run n_sm programs (the rest run n_sm - 1)
    act_full = np.minimum(programs, sms)
    act_last = np.where((k_last >= 2) & (programs >= sms), sms, hi)
    rows_a = np.minimum(bm, p.M)  # A rows wrap (offs % M): a tile never reads more distinct rows than M
    if l2_hits:  # --- L2 hits of the launch order, one simulation per distinct schedule
        a_hit, b_hit = _panel_hit_rates(p, chip, c, tm, tn, sk, occ_eff, rows_a, bn)
    else:  # every panel load an L2 hit: the ceiling of every launch order (quick_bound)
        a_hit = b_hit = np.ones(n)
    # bytes per K step of one program (requests, which the L2 serves) and the HBM share of them
    a_step = (bm * bk * b).astype(np.float64)
    b_step = (bk * bn * b).astype(np.float64)
    # cache lines per K step: the SM's L1/TEX path handles one line (up to 128 B) per cycle, so a tile row of
    # fewer than 128 B costs a whole line slot. A tile's rows run along the operand's contiguous axis: A `n`
    # BLOCK_M rows of BLOCK_K elements, A `t` BLOCK_K rows of BLOCK_M; B `n` BLOCK_K rows of BLOCK_N, B `t`
    # BLOCK_N rows of BLOCK_K
    line = int(chip.get("cache_line_bytes", 128))
    a_rows, a_len = (bk, bm) if p.a_transposed else (bm, bk)
    b_rows, b_len = (bn, bk) if p.b_transposed else (bk, bn)
    a_lines = (a_rows * np.maximum(ceil_div(a_len * b, line), 1)).astype(np.float64)
    b_lines = (b_rows * np.maximum(ceil_div(b_len * b, line), 1)).astype(np.float64)
    # wrapped A rows (M < BLOCK_M) re-read lines another warp just fetched: they count as hits
    a_hit_req = 1.0 - (1.0 - a_hit) * rows_a / bm
    hit = (a_step * a_hit_req + b_step * b_hit) / (a_step + b_step)
    a_l2 = programs * steps * a_step
    b_l2 = programs * steps * b_step
    hbm_read = a_l2 * (1.0 - a_hit_req) + b_l2 * (1.0 - b_hit)
    mn = float(p.batch * p.M * p.N)
    split = sk > 1
    out_hbm = np.where(
        split, mn * 4 * 2 + mn * (4 + ob), mn * ob
    )  # zero + atomics' write-back + cast, or the store
    out_l2 = np.where(split, mn * 4 * (2 * sk + 1) + mn * (4 + ob), mn * ob)
    hbm = np.maximum(hbm_read + out_hbm, p.compulsory_bytes)
    # contiguous bytes a tile asks HBM for at a time: one tile row, or the whole tile when its rows span the
    # operand's contiguous axis (consecutive rows then follow each other in memory: one block, counted at the
    # tile's size, so that more K never makes the request look longer than before)
    a_seg = np.where(a_len >= len_a, a_rows * a_len, a_len) * b
    b_seg = np.where(b_len >= len_b, b_rows * b_len, b_len) * b
    c_seg = np.where(bn >= p.N, bm * bn, bn) * ob
    f = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    return {
        "n": np.full(n, 1.0),
        "M": np.full(n, float(p.M)),
        "N": np.full(n, float(p.N)),
        "batch": np.full(n, float(p.batch)),
        "flops": np.full(n, p.flops),
        "compulsory": np.full(n, float(p.compulsory_bytes)),
        "bm": f(bm),
        "bn": f(bn),
        "bk": f(bk),
        "stages": f(st),
        "warps": f(w),
        "sk": f(sk),
        "steps": f(steps),
        "programs": f(programs),
        "tiles": f(tm * tn * p.batch),
        "v3": v3.astype(np.float64),
        "instr_n": f(instr_n),
        "rep": f(rep),
        "smem_traffic": f(smem_traffic),
        "unal_a": np.where(tma, 0.0, float(vec_a == 1)),
        "unal_b": np.where(tma, 0.0, float(vec_b == 1)),
        "tma": tma.astype(np.float64),
        "persistent": persistent.astype(np.float64),
        "unal_c": np.full(n, float(vec_c == 1)),
        "out_bytes": np.full(n, float(ob)),
        "regs": f(regs),
        "acc_regs": f(acc),
        "reg_cap": f(cap),
        "occ": f(occ),
        "n_sm": f(n_sm),
        "rounds": f(rounds),
        "k_full": f(k_full),
        "k_last": f(k_last),
        "act_full": f(act_full),
        "act_last": f(act_last),
        "a_step": a_step,
        "b_step": b_step,
        "a_lines": a_lines,
        "b_lines": b_lines,
        "line_bytes": np.full(n, float(line)),
        "hit": hit,
        "a_hit": a_hit,
        "b_hit": b_hit,
        "l2_read": a_l2 + b_l2,
        "hbm_read": hbm_read,
        "hbm": hbm,
        "a_miss": a_l2 * (1.0 - a_hit_req),
        "b_miss": b_l2 * (1.0 - b_hit),
        "out_hbm": f(out_hbm),
        "a_miss_step": a_step * (1.0 - a_hit_req),
        "b_miss_step": b_step * (1.0 - b_hit),
        "a_seg": f(a_seg),
        "b_seg": f(b_seg),
        "c_seg": f(c_seg),
        "l2_total": a_l2 + b_l2 + out_l2,
        "mn": np.full(n, mn),
        "macs_per_cycle": np.full(n, chip.macs_per_cycle(p.dtype)),
        "peak": np.full(n, chip.peak_tflops(p.dtype) * 1e12),
    }


def _smax(terms, pw):
    """Soft maximum (sum x^p)^(1/p): >= the largest term, and the overlap of pipes is never perfect."""
    top = terms[0]  # the element-wise largest (np.maximum.reduce of the list, without stacking it)
    for t in terms[1:]:
        top = np.maximum(top, t)
    safe = np.maximum(top, 1e-30)
    return safe * np.power(sum(np.power(t / safe, pw) for t in terms), 1.0 / pw)


def timing(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """The estimate record from prepared columns `g` and the efficiency constants `e` (see DEFAULTS)."""
    f = chip.clock_hz
    sms = chip.cores
    pw = max(e["overlap_power"], 1.0)
    lat = chip["gm_latency_cycles"] * e["latency_scale"] / f
    hbm_bw = chip["hbm_gbps"] * 1e9 * min(e["hbm_efficiency"], 1.0)
    l2_bw = chip["l2_gbps"] * 1e9 * e["l2_efficiency"]
    sm_bw = e["sm_load_bytes_per_cycle"] * f
    tma_bw = e["tma_bytes_per_cycle"] * f
    ovh = np.where(g["tma"] > 0, e["tma_step_overhead_cycles"], e["step_overhead_cycles"]) / f
    prog_ovh = e["program_overhead_cycles"] / f
    v3 = g["v3"] > 0
    # tensor cores: one program's K step with the whole SM's tensor cores
    n0 = e["mma_n_half"]
    eff3 = min(e["mma_efficiency_v3"], 1.0) * (1.0 + n0 / 256.0) / (1.0 + n0 / g["instr_n"])
    macs = g["bm"] * g["bn"] * g["bk"] * g["rep"]
    rate = g["macs_per_cycle"] * f
    unal_ab = g["unal_a"] * g["a_step"] + g["unal_b"] * g["b_step"]  # bytes on the synchronous scalar path
    async_b = g["a_step"] + g["b_step"] - unal_ab
    # the fill port counts cache lines, not bytes (prepare(): short tile rows waste part of a line slot)
    async_lines = (1.0 - g["unal_a"]) * g["a_lines"] + (1.0 - g["unal_b"]) * g["b_lines"]
    unal_elems = unal_ab / (g["a_step"] + g["b_step"]) * (g["bm"] + g["bn"]) * g["bk"]
    t_unal1 = unal_elems / (e["unaligned_elems_per_cycle"] * f)  # the SM's rate on the synchronous path
    # registers beyond the cap spill to local memory
    spill = np.maximum(g["regs"] - g["reg_cap"], 0.0)
    t_spill = spill * e["spill_cycles_per_reg"] / f
    t_mte1 = g["smem_traffic"] / (e["smem_bytes_per_cycle"] * f)
    stages = g["stages"]
    sync = unal_ab > 0
    # HBM serves rows shorter than a line at a lower rate: each request carries a fixed cost worth
    # `dram_request_bytes` of transfer; relative to a whole 128-B line (the rate hbm_efficiency describes), a row
    # of s bytes runs at (s / (s + r)) / (128 / (128 + r)), and at full rate from 128 B on
    r0 = e["dram_request_bytes"]

    def row_rate(seg):
        return np.minimum(1.0, seg / (seg + r0) * (128.0 + r0) / 128.0)

    ra, rb, rc = row_rate(g["a_seg"]), row_rate(g["b_seg"]), row_rate(g["c_seg"])
    # a K step's HBM bytes, each operand's weighted by its row rate, per byte requested
    miss = (g["a_miss_step"] / ra + g["b_miss_step"] / rb) / (g["a_step"] + g["b_step"])

    def step(k, act):
        """Busy time of one SM for one K step of its `k` resident programs, with `act` SMs loading at once."""
        eff = np.where(v3, eff3, min(e["mma_efficiency_v2"], 1.0) * np.minimum(1.0, k * g["warps"] / 4.0))
        t_mma = macs / (rate * eff)
        # the SM's fill port, its share of the L2 bandwidth, and its share of HBM for the bytes that miss L2
        # (HBM fills L2 while L2 serves the SMs: the two overlap, the slower one sets the pace)
        per_byte = np.maximum(act / l2_bw, miss * act / hbm_bw)
        # the SM's own port: line slots on the L1/TEX path, bytes at the TMA unit's rate for bulk copies
        port = np.where(g["tma"] > 0, async_b / tma_bw, async_lines * g["line_bytes"] / sm_bw)
        t_x = np.maximum(port, async_b * per_byte)
        # Little's law: each program keeps (stages - 1) steps of loads in flight, each answered after the latency
        # plus its own transfer; the k programs' loads overlap, and their bandwidth is the k * t_x term (with 1
        # stage a program's load, wait and mma are serial)
        t_lat = np.where(stages >= 2, (lat + t_x) / np.maximum(stages - 1, 1), lat + t_x + t_mma)
        # the chain one program cannot overlap: its own mma, the step's sync, the synchronous loads, spills
        chain = t_mma + ovh + np.where(sync, lat + t_unal1, 0.0) + t_spill
        # the SM's tensor work (k programs) and one program's chain are two bounds on the same tensor-core
        # timeline, not two pipes: their max is one term (with k = 1 a second term would charge 2^(1/p) for an
        # overlap that does not exist, and leave no room for the per-step cost of a lone program)
        terms = [np.maximum(k * t_mma, chain), k * t_mte1, k * t_x, k * t_unal1, t_lat]
        return _smax(terms, pw), k * t_mma, k * t_mte1, k * (t_x + t_unal1), ovh + 0 * k

    def epilogue(k, act):
        """The tile store (or fp32 atomics) of `k` programs on one SM, `act` SMs storing at once."""
        elems = g["bm"] * g["bn"] * k
        st_bw = np.minimum(sm_bw, hbm_bw / act)
        t_store = np.where(
            g["unal_c"] > 0, elems / (e["unaligned_elems_per_cycle"] * f), elems * g["out_bytes"] / st_bw
        )
        atomic_rate = (
            np.where(g["unal_c"] > 0, e["unaligned_atomic_gelems_per_s"], e["atomic_gelems_per_s"]) * 1e9
        )
        t_atomic = elems * act / atomic_rate
        return np.where(g["sk"] > 1, t_atomic, t_store) + lat

    s_full, mac_f, mte1_f, mte2_f, sc_f = step(g["k_full"], g["act_full"])
    s_last, mac_l, mte1_l, mte2_l, sc_l = step(g["k_last"], g["act_last"])
    epi_f, epi_l = epilogue(g["k_full"], g["act_full"]), epilogue(g["k_last"], g["act_last"])
    fill = lat + prog_ovh
    # a persistent program starts once; each later tile of it costs the tile's setup, its loads already in flight
    persist = g["persistent"] > 0
    refill = np.where(persist, e["persistent_tile_cycles"] / f, fill)
    r_full = g["rounds"] - 1.0
    steps = g["steps"]
    main = r_full * (steps * s_full + refill + epi_f) + steps * s_last + fill + epi_l
    hbm_t = np.maximum(g["a_miss"] / ra + g["b_miss"] / rb + g["out_hbm"] / rc, g["compulsory"]) / hbm_bw
    l2_t = g["l2_total"] / l2_bw
    body = np.maximum(main, np.maximum(hbm_t, l2_t))
    split = g["sk"] > 1
    extra = np.where(
        split,
        g["mn"] * 4 / hbm_bw + g["mn"] * (4 + g["out_bytes"]) / hbm_bw + 2 * e["extra_kernel_us"] * 1e-6,
        0.0,
    )
    launch = float(chip["launch_us"])
    time_us = (body + extra) * 1e6 + launch
    # the GPU's pipes (common.PIPES_OF["cuda"]): tensor cores, CUDA-core math (split-K's extra kernels), issue
    # overhead, shared -> registers, global -> shared, epilogue stores / atomics
    pipes = {
        "tensor": (r_full * steps * mac_f + steps * mac_l) * 1e6,
        "alu": extra * 1e6,
        # program starts: one per round, or one per SM and a tile setup per later tile (persistent)
        "issue": (
            r_full * steps * sc_f + steps * sc_l + prog_ovh + r_full * np.where(persist, refill, prog_ovh)
        )
        * 1e6,
        "smem": (r_full * steps * mte1_f + steps * mte1_l) * 1e6,
        "load": (r_full * steps * mte2_f + steps * mte2_l) * 1e6,
        "store": (r_full * (epi_f - lat) + epi_l - lat) * 1e6,
    }
    bound = classify_bound({k: pipes[k] for k in ("tensor", "load", "smem", "store", "issue")}, body * 1e6)
    bound[hbm_t >= main] = "load"
    roof = roofline_us(g["flops"], g["compulsory"], g["peak"], chip["hbm_gbps"] * 1e9, launch)
    return {
        "time_us": time_us,
        "bound": bound,
        **{f"{k}_us": v for k, v in pipes.items()},
        "cores_used": np.minimum(g["programs"], sms).astype(np.int64),
        "waves": g["rounds"].astype(np.int64),
        "balance": g["programs"] / (sms * g["n_sm"]),
        "l2_hit_rate": 1.0 - g["hbm_read"] / np.maximum(g["l2_read"], 1.0),
        "hbm_bytes": g["hbm"],
        "l2_bytes": g["l2_total"],
        "roofline_us": roof,
        "occupancy": g["occ"].astype(np.int64),
        "programs": g["programs"].astype(np.int64),
        "tiles": g["programs"].astype(
            np.int64
        ),  # the export's launch.tiles: programs launched (split-K included)
        "tail_programs_per_sm": g["k_last"].astype(np.int64),
        "tail_sms": g["act_last"].astype(np.int64),
        "wgmma": v3,
        "regs_per_thread": g["regs"],
        "spill_regs": spill,
    }


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
    program per SM whose later tiles cost persistent_tile_cycles instead of a fill).
    """
    templates = [
        int(t) for t in domains.get("TEMPLATE", (POINTER,)) if int(t) == POINTER or tma_runs(p, chip)
    ]
    variants = sorted({(t >= TMA, t == PERSISTENT) for t in templates}) or [(False, False)]
    return np.minimum.reduce([_prefix_floor(p, chip, c, domains, tma, per) for tma, per in variants])


def _prefix_floor(p: Matmul, chip, c: dict, domains: dict, tma: bool, persistent: bool) -> np.ndarray:
    """prefix_bound's floor for one kind of template: TMA loads or pointer loads, persistent grid or not."""
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
    loop = steps * _smax(terms, pw)
    elems = bm * bn * n_sm
    store = np.where(unal_c, elems / (e["unaligned_elems_per_cycle"] * f), elems * ob / sm_bw)
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
                out[r] = (_i(c, "TEMPLATE") == POINTER) | tma_runs(p, chip)
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
        only add atomics of zeros: a smaller SPLIT_K runs the same main loop with fewer programs.
        """
        n = len(next(iter(c.values()))) if c else 0
        out = np.zeros(n, dtype=bool)
        if "BLOCK_K" in c and "SPLIT_K" in c:
            k_tiles = ceil_div(p.K, _i(c, "BLOCK_K"))
            sk = _i(c, "SPLIT_K")
            per = ceil_div(k_tiles, sk)
            out |= (sk > 1) & ((sk - 1) * per >= k_tiles)
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
        )

    def constants(self, chip) -> dict[str, float]:
        return efficiency(chip)

    def prepare(self, p: Matmul, chip, c: dict) -> dict[str, np.ndarray]:
        return prepare(p, chip, c)

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        return timing(prepared, chip, constants)

    def choices(self, chip, data, constants: dict[str, float]) -> list:
        """The launch orders reported for exact ties (ties.choose_tie_orders), chosen from the measurements."""
        from .ties import choose_tie_orders

        pred = timing(data.prepared, chip, constants)["time_us"]
        return choose_tie_orders(data.problems, data.cands, pred, data.seconds, data.shape_of, chip)

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
                    "; or TEMPLATE tma (TMA loads need only 16-byte rows, which these are)"
                    if tma_runs(p, chip)
                    else ""
                )
            )
        if int(g["programs"]) < sms:
            out.append(
                f"multi-core: {int(g['programs'])} programs for {sms} SMs; a smaller tile or SPLIT_K > 1 "
                "would use more SMs"
            )
        elif int(g["waves"]) > 1 and int(g["tail_sms"]) < sms // 2 and int(g["tail_programs_per_sm"]) <= 1:
            out.append(
                f"tail: the last wave runs on {int(g['tail_sms'])} of {sms} SMs; a tile size that divides "
                "the grid into whole waves (or SPLIT_K) evens it out"
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
