"""Flash attention forward on NVIDIA GPUs: the Triton kernel of triton_kernels.py, one program per query block.

A program owns BLOCK_M query rows of one (batch, head): it loads its Q block once, then walks the keys in steps of
BLOCK_N. Each step loads a K and a V block (`num_stages` steps in flight), computes the BLOCK_M x BLOCK_N scores
(QKᵀ on the tensor cores), the online softmax on them (scale, mask, row max, exp2, row sum: CUDA cores and the
SFU), rescales the BLOCK_M x D accumulator and adds P·V (tensor cores). Under the causal mask a program stops at
its last visible key, so the programs of one head differ in length: the last query blocks are the heaviest.

A step, per SM: the resident warpgroups (programs x warpgroups per program) share the tensor cores and the CUDA
cores, each warpgroup alternating its MMAs with its softmax (this kernel does not overlap the two within one
warpgroup); how well one warpgroup's MMAs overlap another's softmax is a closed queueing network solved by mean
value analysis (`_mva_levels`): one warpgroup alone runs its MMAs and softmax back to back, many keep both units
busy. A program's warpgroups meet at a barrier every step (the shared K/V stage), so the last one starts its softmax
one QKᵀ per warpgroup late. The K/V stream is a separate pipeline: num_stages - 1 blocks in flight per program
cover the L2 latency plus the transfer of every resident program's blocks at the SM's share of the L2 bandwidth.

Programs go to SM slots (SMs x resident programs) as slots free up, in launch order: ORDER 0 walks the query blocks
of each head in order (light to heavy), ORDER 1 launches the heaviest blocks of every head first. `prepare()`
deals the programs to the slots once per candidate (exact greedy list scheduling), keeps the slots that can finish
last as (programs, steps) pairs and how many programs each SM still holds as the grid drains (the tail, where the
last programs run with fewer neighbours and so faster); `timing()` prices a program and a step at each residency
with the [efficiency] constants and takes the busiest slot. docs/model_cuda.md §10 gives the equations.

LOADS 1 (K/V through TMA descriptors, Hopper only: rule `tma`) changes two things: compiled() lowers the register
demand (no per-thread K/V addresses) and each program pays `fa_tma_program_cycles` to build its descriptors
(docs/model_cuda.md §10b); LOADS 0, or no LOADS, is the model as it was.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ...errors import ProblemError
from ...model.common import BOUND_SAFETY, ceil_div, classify_bound, group_rows, roofline_us
from ...model.schedule import on_clear
from ...operator import Operator, register
from ..triton_measure import TritonRunner
from . import views
from .compiled import COMPILED
from .problem import FlashAttention

KNOBS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER", "LOADS")
RULES = {
    "pow2": ("BLOCK_M", "BLOCK_N"),
    "threads": ("num_warps",),
    "smem": ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps"),
    "occupancy": ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps"),
    "rows": ("BLOCK_M", "num_warps"),
    "tma": ("LOADS",),
}
RULE_TEXT = {
    "pow2": "BLOCK_M, BLOCK_N powers of two >= 16 (tl.arange, tl.dot)",
    "threads": "32*num_warps <= 1024 threads per block",
    "smem": "K and V blocks for every pipeline stage (and Q, P for wgmma) <= shared memory per block",
    "occupancy": "one program fits an SM (threads, shared memory)",
    "rows": "BLOCK_M >= 16*num_warps/4: every warp owns at least 16 query rows of the dot",
    "tma": "LOADS 1 (K/V through TMA descriptors): a chip with TMA (Hopper: mma_version 3); before it, LOADS 0 only",
}
# The [efficiency] constants, with the values before calibration (rough counts and latencies: guesses until
# `tiler calibrate` fits them to bench/data/h200_fa_cal.csv) and their fit boxes.
DEFAULTS = {
    "fa_mma_efficiency": 0.7,  # share of the SM's tensor-core peak a wide wgmma reaches
    "fa_mma_n_half": 16.0,  # instruction N at which an MMA reaches half of that (a fixed cost per instruction)
    "fa_mma_sync_efficiency": 0.6,  # share of the peak mma.sync reaches (no wgmma: BLOCK_M < 64 or < 4 warps)
    "fa_softmax_lanes": 10.0,  # CUDA-core instructions per score element: scale, mask, max, exp2, sum, convert
    "fa_step_cycles": 30.0,  # per step of one warpgroup: loop, wgmma fences and waits
    "fa_load_latency_cycles": 700.0,  # a K/V block's L2 round trip unloaded; num_stages - 1 blocks are in flight
    "fa_sync_cycles": 50.0,  # per step and extra warpgroup of a program: the barrier on the shared K/V stage
    "fa_program_cycles": 2000.0,  # per program: start, Q load, index math, final divide and O store
    "fa_phase_cv2": 1.0,  # squared coefficient of variation of a warpgroup's MMA and softmax phases (MVA)
    "fa_spill_cycles_per_reg": 40.0,  # cycles per step per 32-bit word a thread spills to local memory
    # LOADS 1, per program: building the K and V tensor descriptors (two 128-byte writes to global scratch, a
    # tensormap fence) before the first K/V copy can be issued, in the program's chain (a guess until fitted)
    "fa_tma_program_cycles": 2000.0,
}
FITTABLE = {
    "fa_mma_efficiency": (0.1, 1.0),
    "fa_mma_n_half": (0.5, 256.0),
    "fa_mma_sync_efficiency": (0.05, 1.0),
    "fa_softmax_lanes": (1.0, 64.0),
    "fa_step_cycles": (10.0, 5000.0),
    "fa_load_latency_cycles": (10.0, 1e4),
    "fa_sync_cycles": (1.0, 1e4),
    "fa_program_cycles": (10.0, 1e5),
    "fa_phase_cv2": (0.01, 4.0),
    "fa_spill_cycles_per_reg": (0.1, 1000.0),
    "fa_tma_program_cycles": (10.0, 1e5),
}
# Counted, not fitted: CUDA-core instructions (thread lanes) per step of the loop that scale with the accumulator
# and with the rows. The rescale acc *= alpha is one FMUL per accumulator element. Per query row (held by a quad
# of 4 threads in the wgmma layout): the row max and the row sum each reduce across the quad (2 SHFL + 2 FMNMX /
# FADD per thread: 16 lanes each), the new max (4), alpha = exp2(old - new) (FADD + MUFU: 8) and the row-sum update
# (FFMA: 4): 48.
RESCALE_LANES = 1.0
ROW_LANES = 48.0
LANES_PER_CYCLE = 128.0  # 4 schedulers x 32 lanes per SM and cycle
# rows of one warpgroup MMA instruction (wgmma.m64nNk16): the tensor core's turn between warpgroups
WGMMA_M = 64.0
# prepare() keeps this many (programs, steps) pairs per candidate: the slots on the upper hull of all slots' pairs
HULL = 8
# Most programs slot_profile deals one chunk at a time (a causal grid of long sequences and many heads holds
# tens of millions); beyond, a sample of the heads is dealt and the others spread evenly
DEAL_MAX = 1 << 17
# residency levels tracked as the grid drains: programs resident on one SM (32 blocks at most, the CUDA limit)
RMAX = 32
# registers(): base, per accumulator, score and K/V element per thread (fit to bench/data/h200_fa_registers.csv)
_REG_BASE, _REG_ACC, _REG_SCORE, _REG_KV = 51.5, 0.962, 1.437, 0.407
# LOADS 1: registers per thread saved per K/V element per thread (no per-thread K/V addresses or masks: the copy
# engine computes them), a least-squares fit through 0 to the 37 tilings of bench/data/h200_fa_tma.csv that
# compiled under 255 registers at both LOADS (Triton 3.6, sm_90; median error 9 registers)
_REG_TMA_SAVED = 0.612
# LOADS 1: shared bytes added per program (the copies' mbarriers; Triton gave 32 to 1024 more, 1024 with 3 stages
# or more: the larger figure)
TMA_SMEM_BYTES = 1024.0


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _loads(c: dict) -> np.ndarray:
    """LOADS per candidate, 0 (pointer loads) where the candidates do not have the knob (a table or document from
    before it: the kernel's own default)."""
    if "LOADS" in c:
        return _i(c, "LOADS")
    return np.zeros(np.asarray(c["BLOCK_M"]).shape, dtype=np.int64)


def _wgmma(c: dict, chip=None) -> np.ndarray:
    """Hopper's warpgroup MMA when every warpgroup (4 warps) owns 64 query rows (BLOCK_M >= 16*num_warps);
    else mma.sync (BLOCK_M = 64 on 8 warps measures like mma.sync: 0.45-0.55 of the best, bench/data/h200_fa*).
    A chip before Hopper (mma_version < 3) has mma.sync only."""
    w = _i(c, "num_warps")
    hopper = chip is None or chip.get("mma_version", 3.0) >= 3.0
    return (w >= 4) & (_i(c, "BLOCK_M") >= 16 * w) & hopper


def smem_bytes(p: FlashAttention, c: dict) -> np.ndarray:
    """Shared memory of one program: K and V blocks per pipeline stage plus the Q block when BLOCK_M >= 64 on 4
    warps or more; smaller blocks keep one K/V stage fewer and 1.5 Q blocks (Q and the P staging). Matches the
    compiler's figure exactly on the median tiling of bench/data/h200_fa_registers.csv (164 tilings, within -14%
    / +18%) and its compile failures (D=128, BLOCK_N=128, 4 stages, BLOCK_M >= 64)."""
    bm, bn, st = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "num_stages")
    b = p.in_bytes
    kv = 2 * bn * p.D * b
    staged = (bm >= 64) & (_i(c, "num_warps") >= 4)  # Q staged in shared memory with every K/V stage
    return np.where(staged, st * kv + bm * p.D * b, np.maximum(st - 1, 1) * kv + 1.5 * bm * p.D * b)


def registers(p: FlashAttention, c: dict) -> np.ndarray:
    """Registers per thread the compiler asks for (more than 255 spill): a base, the fp32 accumulator (BLOCK_M x D),
    the score and P tiles (BLOCK_M x BLOCK_N) and the K/V addresses and fragments (BLOCK_N x D), each spread over the
    program's threads. The coefficients are a least-squares fit to the register counts Triton 3.6 gave the 164
    tilings of bench/data/h200_fa_registers.csv (bench/fa_registers.py on the H200; median error 12 registers): a
    compile-time fact fitted once, not a runtime constant."""
    bm, bn, w = _i(c, "BLOCK_M"), _i(c, "BLOCK_N"), _i(c, "num_warps")
    threads = 32 * w
    return _REG_BASE + (_REG_ACC * bm * p.D + _REG_SCORE * bm * bn + _REG_KV * bn * p.D) / threads


def compiled(p: FlashAttention, chip, c: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Registers per thread, spilled words per thread and shared bytes per program: the compiler's own figures
    (compiled.py, Triton 3.6 for sm_90 on the H200) for the tilings it compiled when the chip is a Hopper
    (mma_version 3: the same instructions and register file), else registers() (its excess over 255 spilled) and
    smem_bytes(). A tiling the compiler could not fit gets infinite shared memory."""
    bm, bn, st, w = (_i(c, k) for k in ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps"))
    regs = np.asarray(registers(p, c), dtype=np.float64)
    spill = np.maximum(regs - 255.0, 0.0)
    smem = np.asarray(smem_bytes(p, c), dtype=np.float64)
    if p.in_bytes == 2 and chip.get("mma_version", 3.0) >= 3.0:
        for j, key in enumerate(zip(bm.tolist(), bn.tolist(), st.tolist(), w.tolist(), strict=True)):
            got = COMPILED.get((p.D, *key), 0)
            if got == 0:
                continue
            if got is None:
                smem[j] = np.inf
            else:
                regs[j], spill[j], smem[j] = got
    tma = _loads(c) == 1
    if tma.any():
        # the K/V addresses no longer held: the register demand (what was allocated plus what spilled) falls by
        # _REG_TMA_SAVED per K/V element per thread; what is still above 255 spills
        demand = regs + spill - _REG_TMA_SAVED * bn * p.D / (32.0 * w)
        regs = np.where(tma, np.minimum(demand, 255.0), regs)
        spill = np.where(tma, np.maximum(demand - 255.0, 0.0), spill)
        smem = np.where(tma, smem + TMA_SMEM_BYTES, smem)
    regs = np.minimum(regs, 255.0)
    return regs, spill, smem


def occupancy(p: FlashAttention, chip, c: dict) -> np.ndarray:
    """Programs one SM holds: threads, blocks, shared memory (+1 KB reserved per block) and registers."""
    threads = 32 * _i(c, "num_warps")
    regs, _, smem = compiled(p, chip, c)
    alloc = np.minimum(np.ceil(regs / 8) * 8, 256)
    by_regs = chip["regs_per_sm"] // (alloc * threads)
    by_threads = chip["max_threads_per_sm"] // threads
    by_smem = np.where(
        np.isfinite(smem), chip["smem_bytes_per_sm"] // (np.where(np.isfinite(smem), smem, 0) + 1024), 0
    )
    return np.minimum(np.minimum(np.minimum(by_regs, by_threads), by_smem), chip["max_blocks_per_sm"]).astype(
        np.int64
    )


def program_steps(p: FlashAttention, bm: int, bn: int) -> np.ndarray:
    """K steps of each query block of one head (block i's last row is (i+1)*bm - 1)."""
    n_m = -(-p.S1 // bm)
    # the kernel runs to its last visible key: under the mask, row r sees keys <= r + shift (a padded last block
    # runs as far as its padded rows would)
    keys = p.visible_keys((np.arange(n_m) + 1) * bm)
    return -(-keys // bn)


def launch_order(p: FlashAttention, steps: np.ndarray, order: int, heads: int | None = None) -> np.ndarray:
    """Steps of every program in launch order: ORDER 0, grid (query blocks, batch*heads) with the query block
    fastest; ORDER 1, grid (batch*heads, query blocks) with the heads fastest and the last query block first.
    heads: the (batch, head) pairs launched, all of them by default."""
    heads = p.B * p.heads if heads is None else heads
    if order == 0:
        return np.tile(steps, heads)
    return np.repeat(steps[::-1], heads)


def deal(durations: np.ndarray, slots: int, whole_rounds: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Greedy list scheduling of jobs in launch order onto `slots` identical slots: each job goes to the slot that
    frees first (the block scheduler hands the next program of the grid to the first SM slot that frees). Exact:
    the jobs are placed in chunks, each chunk's k-th job to the k-th earliest free slot, a chunk ending before the
    first of its jobs that would start after an earlier job of the chunk has ended (that slot would take it).
    Returns per slot the jobs it ran and their summed durations.

    A run of equal jobs (duration d) dealt while the slots' free times lie within less than d of each other goes
    one job to each slot per `slots` jobs, every slot then d later (the spread kept): whole such rounds are
    added at once, so a long grid of equal programs (no mask, or a query block's heads) costs a few chunks.
    Durations are whole numbers of steps, so the sums are the same numbers the chunks would add (whole_rounds
    False: chunks only, the reference the tests compare with)."""
    free = np.zeros(slots)
    count = np.zeros(slots)
    pos = 0
    # where each run of equal durations ends
    run_ends = np.append(np.flatnonzero(durations[1:] != durations[:-1]) + 1, durations.size)
    while pos < durations.size:
        run_end = int(run_ends[np.searchsorted(run_ends, pos, side="right")])
        rounds = (run_end - pos) // slots
        if whole_rounds and rounds and free.max() - free.min() < durations[pos]:
            free += rounds * durations[pos]
            count += rounds
            pos += rounds * slots
            continue
        order = np.argsort(free, kind="stable")
        k = min(slots, durations.size - pos)
        start = free[order[:k]]
        jobs = durations[pos : pos + k]
        ends = np.minimum.accumulate(start + jobs)
        late = np.flatnonzero(ends[:-1] < start[1:])  # job j+1 starts after an earlier job of the chunk ended
        m = int(late[0]) + 1 if late.size else k
        to = order[:m]
        free[to] += jobs[:m]
        count[to] += 1
        pos += m
    return count, free


def hull(count: np.ndarray, steps: np.ndarray, k: int = HULL) -> np.ndarray:
    """The (count, steps) pairs that can be the busiest slot for some positive per-program and per-step costs
    (the upper-right convex hull), at most k of them (the extremes first), padded by repeating the first."""
    pts = np.stack([count, steps], axis=1)
    # Pareto front: for each count the most steps, then drop points dominated by a larger count with more steps
    # (a repeated point is dropped there too, not steps above the ones before it: no np.unique(axis=0) first, which
    # cost most of a hull)
    pts = pts[np.lexsort((-pts[:, 1], -pts[:, 0]))]
    front = pts[np.r_[True, pts[1:, 1] > np.maximum.accumulate(pts[:-1, 1])]]
    if len(front) > k:  # keep the extremes and evenly spaced points between them
        front = front[np.unique(np.linspace(0, len(front) - 1, k).round().astype(int))]
    out = np.repeat(front[:1], k, axis=0)
    out[: len(front)] = front
    return out


@lru_cache(maxsize=1024)
def slot_profile(p: FlashAttention, bm: int, bn: int, order: int, occ: int, sms: int) -> tuple:
    """The deal of one grid onto `occ` x `sms` slots, as prepare() reads it: the hull of the slots' (programs,
    steps) pairs (HULL, 2) and the drain profile (RMAX,). Cached: the branch and bound scores a grid's candidates
    in several batches, and the deal is most of an estimate's cost on long sequences."""
    steps = program_steps(p, bm, bn)
    heads = p.B * p.heads
    dealt = min(heads, max(1, DEAL_MAX // steps.size))  # (batch, head) pairs dealt program by program
    count, load = deal(launch_order(p, steps, order, dealt) + 1.0, occ * sms)  # one step per program start
    if dealt < heads:
        # more programs than DEAL_MAX: the rest of the heads spread evenly over the slots (the greedy deal keeps
        # every slot within one program of the others), an approximation (docs/model_cuda.md)
        count = count + (heads - dealt) * steps.size / (occ * sms)
        load = load + (heads - dealt) * float((steps + 1.0).sum()) / (occ * sms)
    pairs = hull(count, load - count)
    # the drain: a slot is busy from 0 to its finish without a gap (greedy), so while more than (r - 1) * SMs
    # slots are busy the busiest SM holds r or more programs; tail[r - 1] is the time that stops being so
    fin = np.sort(load)[::-1]
    idx = np.arange(RMAX) * sms
    tail = np.where(idx < fin.size, fin[np.minimum(idx, fin.size - 1)], 0.0)
    pairs.setflags(write=False)
    tail.setflags(write=False)
    return pairs, tail


on_clear(slot_profile.cache_clear)  # schedule.clear_caches() starts it over too


def prepare(p: FlashAttention, chip, c: dict, slots: bool = True) -> dict[str, np.ndarray]:
    """Per candidate, what the constants do not change: per-step MACs, score and accumulator elements, bytes,
    occupancy, spills, the programs' total, least and most steps, the busiest slots' (programs, steps) from dealing the
    programs (once per grid), and the drain profile: `tail_r`, the nominal time (steps, a program's start counted
    as one) at which the busiest SM holds fewer than r + 1 programs. `slots=False` skips the deal (the slot and tail
    columns stay 0): what quick_bound reads."""
    bm, bn, w, order = (_i(c, k) for k in ("BLOCK_M", "BLOCK_N", "num_warps", "ORDER"))
    occ = np.maximum(occupancy(p, chip, c), 1)
    n = bm.size
    pairs = np.zeros((n, HULL, 2))
    tail = np.zeros((n, RMAX))
    total_steps = np.zeros(n)
    least_steps = np.zeros(n)
    most_steps = np.zeros(n)
    programs = np.zeros(n)
    first, inv = group_rows([bm, bn, order, occ] if slots else [bm, bn])
    for j, i in enumerate(first):
        steps = program_steps(p, int(bm[i]), int(bn[i]))
        rows = inv == j
        total_steps[rows] = steps.sum() * p.B * p.heads
        least_steps[rows] = steps.min()
        most_steps[rows] = steps.max()
        programs[rows] = steps.size * p.B * p.heads
        if slots:
            pairs[rows], tail[rows] = slot_profile(
                p, int(bm[i]), int(bn[i]), int(order[i]), int(occ[i]), chip.cores
            )
    b = p.in_bytes
    threads = 32 * w
    _, spill, _ = compiled(p, chip, c)
    # K/V from HBM: ORDER 0 runs a head's query blocks together, so each K/V block comes from HBM once; ORDER 1
    # walks every head for one query block before the next, so a K/V block is read again by the next query block
    # from L2 only if all heads' K/V (the visible part) stay in L2 between the passes
    kv_touched = total_steps / np.maximum(programs, 1) * (2.0 * bn * p.D * b) * p.B * p.kv_heads  # one pass
    kv_once = 2.0 * p.B * p.kv_heads * p.S2 * p.D * b
    n_m = ceil_div(p.S1, bm)
    fits = kv_touched <= chip["l2_bytes"] * chip.get("l2_usable_fraction", 0.8)
    kv_hbm = np.where((order == 1) & ~fits, np.maximum(kv_once, n_m * kv_touched), kv_once)
    return {
        "macs_step": (2.0 * bm * bn * p.D).astype(np.float64),
        # the two MMAs' instruction N: QKᵀ is BLOCK_M x BLOCK_N (N = BLOCK_N), PV is BLOCK_M x D (N = D)
        "n_qk": bn.astype(np.float64),
        "n_pv": np.full(n, float(p.D)),
        "score_elems": (bm * bn).astype(np.float64),
        "rows": bm.astype(np.float64),
        "warpgroups": np.maximum(w / 4.0, 1.0),
        "acc_elems": (bm * p.D).astype(np.float64),
        "kv_bytes_step": (2.0 * bn * p.D * b).astype(np.float64),
        "threads": threads.astype(np.float64),
        "occupancy": occ.astype(np.float64),
        "spill": spill,
        "wgmma": _wgmma(c, chip).astype(np.float64),
        "stages": _i(c, "num_stages").astype(np.float64),
        "tma": (_loads(c) == 1).astype(np.float64),
        **{f"slot_programs_{k}": pairs[:, k, 0] for k in range(HULL)},
        **{f"slot_steps_{k}": pairs[:, k, 1] for k in range(HULL)},
        **{f"tail_{r}": tail[:, r] for r in range(RMAX)},
        "total_steps": total_steps,
        "least_steps": least_steps,
        "most_steps": most_steps,
        "programs": programs,
        "flops": np.full(n, p.flops),
        "compulsory": np.full(n, p.compulsory_bytes),
        "io_bytes_program": (2.0 * bm * p.D * b).astype(np.float64),
        "kv_hbm_bytes": kv_hbm.astype(np.float64),
        "kv_once": np.full(n, kv_once),
    }


def _mva_levels(wg: np.ndarray, occ: np.ndarray, demands: list, z: np.ndarray, cv2: float) -> np.ndarray:
    """(RMAX, n): cycles for r resident programs of wg warpgroups each to complete one step, r = 1..RMAX.

    The SM as a closed queueing network: r * wg warpgroups (customers) cycle through the tensor cores and the CUDA
    cores (queueing stations, `demands` = one warpgroup's cycles on each per step) and a delay z (latencies no other
    warpgroup's work waits on). Approximate mean value analysis with general service times: an arriving warpgroup
    waits for those queued and for (1 + cv2) / 2 of the one in service. One warpgroup alone takes the sum of its
    phases plus z; many saturate the busier unit (never faster than it). Levels above a candidate's occupancy are not
    used."""
    q = [np.zeros_like(z) for _ in demands]
    u = [np.zeros_like(z) for _ in demands]
    top = int(np.max(np.round(occ * wg))) if z.size else 0
    cycle = np.zeros((max(top, 1), z.size))  # cycle[j - 1]: j customers, one cycle each
    for j in range(1, top + 1):
        resid = [d * (1.0 + qq - uu * (1.0 - cv2) / 2.0) for d, qq, uu in zip(demands, q, u, strict=True)]
        x = j / (z + sum(resid))  # customers' cycles per SM cycle
        q = [x * rr for rr in resid]
        u = [x * d for d in demands]
        # the approximation may undercut the busiest unit's own time by a little: no unit outruns its rate
        cycle[j - 1] = np.maximum(j / x, j * np.maximum.reduce(demands))
    j = np.clip(np.round(np.arange(1, RMAX + 1)[:, None] * wg[None, :]).astype(np.int64), 1, max(top, 1))
    return np.take_along_axis(cycle, j - 1, axis=0)


def _costs(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """What a step and a program cost, from prepared columns (the deal's columns not read): `step_r` (RMAX, n),
    the cycles of one step of every program when r are resident, r = 1..RMAX; `program`, a program's own cycles;
    `hbm_s`, the HBM bytes' time in seconds; and the per-step unit times the record's pipes report."""
    f = chip.clock_hz
    sms = chip.cores
    occ = g["occupancy"]
    mma_rate = chip.macs_per_cycle("fp16") * e["fa_mma_efficiency"]
    l2_per_sm = chip["l2_gbps"] * 1e9 / f / sms  # the measured L2 bandwidth, bytes per cycle and SM
    hbm_per_sm = chip["hbm_gbps"] * 1e9 * chip.get("hbm_efficiency", 0.92) / f / sms
    # each of the two MMAs (half the MACs) at the efficiency of its instruction N; mma.sync at its own share
    n_eff = lambda nn: nn / (nn + e["fa_mma_n_half"])  # noqa: E731
    share = np.where(g["wgmma"] > 0, 1.0, e["fa_mma_sync_efficiency"] / e["fa_mma_efficiency"])
    qk = g["macs_step"] * 0.5 / n_eff(g["n_qk"]) / (mma_rate * share)  # the program's QKᵀ per step
    mma = qk + g["macs_step"] * 0.5 / n_eff(g["n_pv"]) / (mma_rate * share)
    alu = (
        g["score_elems"] * e["fa_softmax_lanes"] + g["acc_elems"] * RESCALE_LANES + g["rows"] * ROW_LANES
    ) / LANES_PER_CYCLE
    # the K/V stream: L2 for the re-reads, HBM for the share that misses (time adds: harmonic mix)
    kv_all = np.maximum(g["total_steps"] * g["kv_bytes_step"], 1.0)
    miss = np.clip(g["kv_hbm_bytes"] / kv_all, 0.0, 1.0)
    load = g["kv_bytes_step"] * ((1.0 - miss) / l2_per_sm + miss / hbm_per_sm)
    spill = e["fa_spill_cycles_per_reg"] * g["spill"]
    wg = g["warpgroups"]
    in_flight = g["stages"] - 1.0
    latency = e["fa_load_latency_cycles"]
    # one warpgroup's delay per step: the loop, its spills, and the barrier on the shared K/V stage, where the
    # program's last warpgroup starts its softmax one QKᵀ per warpgroup ahead of it late; without pipelining
    # (num_stages = 1) the K/V load is in the chain too
    z = (
        e["fa_step_cycles"]
        + spill
        + (e["fa_sync_cycles"] + qk / wg * np.minimum(1.0, WGMMA_M * wg / g["rows"])) * (wg - 1.0)
        + np.where(in_flight < 1.0, latency + load, 0.0)
    )
    compute = _mva_levels(wg, occ, [mma / wg, alu / wg], z, e["fa_phase_cv2"])
    # the K/V pipeline (Little's law): a block arrives one L2 latency plus the transfer of every resident program's
    # outstanding blocks after it was asked for, and num_stages - 1 blocks are in flight per program
    r = np.arange(1, RMAX + 1)[:, None]
    stream = r * load[None, :] + (latency / np.maximum(in_flight, 1.0))[None, :]
    step_r = np.maximum(compute, stream)  # (RMAX, n): a step of every program when r are resident
    # LOADS 1 adds the descriptors' set-up to every program (0 for LOADS 0: adding 0.0 leaves the sum as it was)
    program = (
        e["fa_program_cycles"] + g["io_bytes_program"] / l2_per_sm + g["tma"] * e["fa_tma_program_cycles"]
    )
    hbm_bytes = g["compulsory"] - g["kv_once"] + g["kv_hbm_bytes"]
    hbm_s = hbm_bytes / (chip["hbm_gbps"] * 1e9 * chip.get("hbm_efficiency", 0.92))
    return {
        "step_r": step_r,
        "program": program,
        "hbm_bytes": hbm_bytes,
        "hbm_s": hbm_s,
        "mma": mma,
        "alu": alu,
        "load": load,
        "spill": spill,
    }


def timing(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """The estimate record from prepared columns and the constants (see the module docstring)."""
    f = chip.clock_hz
    sms = chip.cores
    occ = g["occupancy"]
    n = occ.size
    cost = _costs(g, chip, e)
    step_r, program, hbm_bytes, hbm_s = (cost[key] for key in ("step_r", "program", "hbm_bytes", "hbm_s"))
    mma, alu, load, spill = (cost[key] for key in ("mma", "alu", "load", "spill"))
    top = np.clip(occ.astype(np.int64), 1, RMAX) - 1
    step = step_r[top, np.arange(n)]  # at full residency
    # each candidate busiest slot: its programs, and its steps at the residency its SM has at the time (the drain
    # profile tail_r, in the deal's nominal time)
    edges = np.stack([g[f"tail_{k}"] for k in range(RMAX)] + [np.zeros(n)])  # (RMAX + 1, n)
    slots = []
    for k in range(HULL):
        progs, steps = g[f"slot_programs_{k}"], g[f"slot_steps_{k}"]
        end = progs + steps
        spent = np.maximum(np.minimum(end, edges[:-1]) - np.minimum(end, edges[1:]), 0.0)  # at residency r
        mean_step = (spent * step_r).sum(axis=0) / np.maximum(end, 1e-30)
        slots.append(progs * program + steps * mean_step)
    make = np.max(slots, axis=0)
    launch = chip["launch_us"]
    time_us = np.maximum(make / f, hbm_s) * 1e6 + launch
    per_sm_steps = g["total_steps"] / sms
    pipes = {
        "tensor": per_sm_steps * mma / f * 1e6,
        "alu": per_sm_steps * alu / f * 1e6,
        "issue": (
            per_sm_steps * (e["fa_step_cycles"] + spill)
            + g["programs"] / sms * (e["fa_program_cycles"] + g["tma"] * e["fa_tma_program_cycles"])
        )
        / f
        * 1e6,
        "smem": np.zeros_like(make),
        "load": np.maximum(per_sm_steps * load / f, hbm_s) * 1e6,
        "store": np.zeros_like(make),
    }
    busy = time_us - launch
    mean = (g["programs"] * program + g["total_steps"] * step) / (sms * occ)
    l2_bytes = g["total_steps"] * g["kv_bytes_step"] + g["programs"] * g["io_bytes_program"]
    return {
        "time_us": time_us,
        "bound": classify_bound(pipes, busy),
        **{f"{k}_us": v for k, v in pipes.items()},
        "cores_used": np.minimum(g["programs"], sms).astype(np.int64),
        "waves": np.ceil(g["programs"] / (sms * occ)).astype(np.int64),
        "balance": np.clip(mean / np.maximum(make, 1e-30), 0.0, 1.0),
        "l2_hit_rate": 1.0 - np.minimum(g["compulsory"], l2_bytes) / np.maximum(l2_bytes, 1.0),
        "hbm_bytes": hbm_bytes,
        "l2_bytes": l2_bytes,
        "roofline_us": roofline_us(
            g["flops"], g["compulsory"], chip.peak_tflops("fp16") * 1e12, chip["hbm_gbps"] * 1e9, launch
        ),
        "tiles": g["programs"].astype(np.int64),
        "occupancy": occ.astype(np.int64),
    }


def quick_bound(p: FlashAttention, chip, c: dict, e: dict[str, float]) -> np.ndarray:
    """A floor of timing()'s time_us with no deal of the programs.

    timing()'s `make` is the most of its slots' costs, programs x program + steps x mean step, over a hull that
    always keeps the slot with the most steps and the slot with the most programs (hull(): the extremes first). A
    slot's mean step mixes step_r over the residencies its time spans; every weight is at least the least step_r,
    and the weight of full residency (the SM holding all its `occ` programs) is at least (L - d) / (L + d), L the
    slots' mean nominal load and d the longest program: in a greedy deal every slot finishes within d of the last
    one (all slots were busy when the last program started), so full residency lasts until at least L - d, and no
    slot ends after L + d. The slot with the most steps has at least the mean steps and one program, the one with the
    most programs at least the mean programs, each with at least the shortest program's steps. The HBM floor and the
    launch are timing()'s own; common.BOUND_SAFETY keeps rounding from lifting the floor above the estimate.
    """
    g = prepare(p, chip, c, slots=False)
    cost = _costs(g, chip, e)
    n = g["occupancy"].size
    slots = g["occupancy"] * chip.cores
    step_r = cost["step_r"]
    least = step_r.min(axis=0)
    full = step_r[np.clip(g["occupancy"].astype(np.int64), 1, RMAX) - 1, np.arange(n)]
    load = (g["total_steps"] + g["programs"]) / slots  # nominal: a step each, one more per program start
    longest = g["most_steps"] + 1.0
    weight = np.clip((load - longest) / (load + longest), 0.0, 1.0)
    step = least + (full - least) * weight
    most_steps = cost["program"] + g["total_steps"] / slots * step
    most_programs = g["programs"] / slots * (cost["program"] + g["least_steps"] * step)
    make = np.maximum(most_steps, most_programs)
    return (np.maximum(make / chip.clock_hz, cost["hbm_s"]) * 1e6 + chip["launch_us"]) * BOUND_SAFETY


@register
class FlashAttentionCuda(TritonRunner, Operator):
    OP = "flash_attention"
    FAMILY = "cuda"
    PROBLEM = FlashAttention
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    GRID_KNOBS = ("BLOCK_M", "BLOCK_N")
    SHAPE_KNOBS = ("BLOCK_M", "BLOCK_N")
    SAMPLE_ORDER = ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "ORDER")
    CHECKLIST = {
        "tensor": "tensor-core bound: other warpgroups' softmax already runs under these MMAs; a wider BLOCK_N "
        "(the QKᵀ instruction's N) raises the MMA rate",
        "alu": "CUDA-core bound (the softmax): larger BLOCK_N amortises the row reductions and the rescale; exp2 on "
        "the SFU",
        "issue": "issue bound (per-step and per-program overhead): fewer, larger steps and programs",
        "load": "memory bound: K and V re-read per query block; larger BLOCK_M re-reads them less, more stages "
        "cover the L2 latency",
        "latency": "no unit saturated: too few warpgroups per SM to run one's MMAs under another's softmax (more "
        "resident programs: fewer registers or less shared memory each), or more stages for the K/V latency",
    }
    WHAT_IF = {
        "ORDER": ("multi-core: launch the heaviest query blocks first (causal)", (0, 1)),
        "num_stages": ("latency: K/V loads in flight", (1, 2, 3, 4)),
    }
    FITTABLE = FITTABLE
    CONSTANTS = DEFAULTS
    IMPLS = ("triton",)
    # a Triton attention kernel without ORDER launches the tutorial's grid (query blocks, batch * heads): natural
    # and one without LOADS reads K and V through pointers (triton_kernels.OPTIONAL)
    ABSENT_DEFAULTS = {"ORDER": "natural", "LOADS": "0"}
    TARGETS = {"triton": views.TRITON}
    RUNNERS = ("triton",)

    def check(self, p: FlashAttention, chip) -> None:
        if p.dtype not in ("fp16", "bf16"):
            raise ProblemError(f"dtype: the Triton flash-attention kernel runs fp16 or bf16, got {p.dtype!r}")
        if p.D & (p.D - 1) or p.D < 16:
            raise ProblemError(f"D: the Triton kernel needs a power of two >= 16 (tl.arange), got {p.D}")

    def feasible(self, p: FlashAttention, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        out = {}
        for r in names:
            if r == "pow2":
                bm, bn = _i(c, "BLOCK_M"), _i(c, "BLOCK_N")
                out[r] = (bm >= 16) & (bn >= 16) & ((bm & (bm - 1)) == 0) & ((bn & (bn - 1)) == 0)
            elif r == "threads":
                out[r] = 32 * _i(c, "num_warps") <= 1024
            elif r == "smem":
                out[r] = compiled(p, chip, c)[2] <= chip["smem_bytes_per_block"]
            elif r == "occupancy":
                out[r] = occupancy(p, chip, c) >= 1
            elif r == "rows":
                out[r] = _i(c, "BLOCK_M") >= 4 * _i(c, "num_warps")
            elif r == "tma":
                out[r] = (_i(c, "LOADS") == 0) | chip.has_tma
        return out

    def dominated(self, p: FlashAttention, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """Without the causal mask every program has the same length, and with one query block per head both
        grids launch the same order: there ORDER=heavy_first is dropped for natural (when natural is in the domain)."""
        domains = domains or {}
        out = super().dominated(p, chip, c, domains)
        if "ORDER" in c and 0 in domains.get("ORDER", (0,)):
            # one query block per head: both grids launch the same programs in the same order
            moot = (
                (not p.causal) | (ceil_div(p.S1, _i(c, "BLOCK_M")) == 1) if "BLOCK_M" in c else (not p.causal)
            )
            out = out | (moot & (_i(c, "ORDER") == 1))
        return out

    def estimate(self, p: FlashAttention, chip, c: dict) -> dict[str, np.ndarray]:
        return timing(prepare(p, chip, c), chip, self.constants(chip))

    def quick_bound(self, p: FlashAttention, chip, c: dict) -> np.ndarray:
        """Below estimate() for every candidate, without dealing the programs (the deal is the estimate's cost)."""
        return quick_bound(p, chip, c, self.constants(chip))

    def prepare(self, p: FlashAttention, chip, c: dict) -> dict[str, np.ndarray]:
        return prepare(p, chip, c)

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        return timing(prepared, chip, constants)

    def advice(self, p: FlashAttention, chip, c: dict, est: dict, row: int) -> list[str]:
        out = [
            f"occupancy: {int(est['occupancy'][row])} program(s) per SM, {int(est['tiles'][row])} programs "
            f"({int(est['waves'][row])} waves)"
        ]
        if p.causal:
            out.append(
                "causal: query blocks differ in length (the last see every key); ORDER=heavy_first launches them "
                "first so the short ones fill the tail"
            )
        return out + super().advice(p, chip, c, est, row)

    def warm_start(self, p: FlashAttention, chip) -> dict:
        return dict(BLOCK_M=128, BLOCK_N=64, num_stages=3, num_warps=8, ORDER=1 if p.causal else 0, LOADS=0)
