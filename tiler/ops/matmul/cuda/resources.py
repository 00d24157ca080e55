"""What one config takes of an SM: load paths, warp layouts, registers, shared memory and occupancy."""

from __future__ import annotations

import numpy as np

from ....model.common import (
    ceil_div,
    group_rows_any,
)
from ..problem import Matmul
from .constants import _BASE_REGS, _SMEM_RESERVED, DEFAULTS, PERSISTENT, TMA


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
    from ..triton_tma import tma_ok as rows_ok

    return rows_ok(p.M, p.N, p.K, p.layout, p.in_bytes)


def staged_elems(p: Matmul) -> tuple[float, float]:
    """(elements, copies) a TMA template stages before its kernel: each operand whose rows TMA cannot describe is
    copied element by element into 16-byte-pitched rows (triton_tma.staged_operands), one copy kernel each."""
    from ..triton_tma import staged_operands

    staged = staged_operands(p.M, p.N, p.K, p.layout, p.in_bytes)
    size = {"A": p.M * p.K, "B": p.K * p.N}
    return float(sum(size[x] for x in staged)), float(len(staged))


def _warps_v3(bm, w):
    """Triton warpsPerTileV3: start from one warpgroup along M (4, 1); double M while BLOCK_M > 16*wm, else N.
    The doubling stops where no row grows: nothing changes after that (num_warps 4: no step, 16: two steps)."""
    wm, wn = np.full_like(bm, 4), np.ones_like(bm)
    for _ in range(6):
        grow = wm * wn < w
        if not grow.any():
            break
        along_m = grow & (bm > 16 * wm)
        wm = np.where(along_m, wm * 2, wm)
        wn = np.where(grow & ~along_m, wn * 2, wn)
    return wm, wn


def _warps_v2(bm, bn, w):
    """Triton warpsPerTileV2: balance the 16x8 mma repetitions between M and N. The doubling stops where no row
    grows: nothing changes after that (every update is masked by `grow`)."""
    rm, rn = ceil_div(bm, 16), ceil_div(bn, 8)
    wm, wn = np.ones_like(bm), np.ones_like(bm)
    for _ in range(6):
        grow = wm * wn < w
        if not grow.any():
            break
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


def c_store_tma(p: Matmul, chip, c: dict) -> np.ndarray:
    """Per row, whether a TMA template's epilogue stores C through a descriptor (triton_tma.tma_c_store: C's rows,
    N elements, 16-byte multiples; no split-K; the C tile fits in shared memory beside the stages)."""
    from ..triton_tma import TMA_ALIGN_BYTES, tma_c_store

    tma = _template(c) >= TMA
    if (p.N * p.out_bytes) % TMA_ALIGN_BYTES or not tma.any():  # no row can: skip the arithmetic (a hot path)
        return np.zeros(tma.shape, dtype=bool)
    bm, bn, bk, st, sk = (_i(c, k) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "SPLIT_K"))
    limit = int(chip["smem_bytes_per_block"])
    return tma & tma_c_store(True, bm, bn, bk, st, sk, p.in_bytes, p.out_bytes, limit)


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
    # TMA templates: both operands through the copy engine into `bufs` buffers each, and the C tile where the
    # epilogue stores it through a descriptor
    c_tile = np.where(c_store_tma(p, chip, c), bm * bn * p.out_bytes, 0)
    return np.where(_template(c) >= TMA, (bm * bk + bk * bn) * bufs * b + c_tile, pointer)


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
