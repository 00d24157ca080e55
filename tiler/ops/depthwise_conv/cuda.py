"""Depthwise convolution on NVIDIA GPUs: the Triton kernels of triton_kernels.py, one program per (pixel tile of
one image plane, channel group, image).

Every program issues the same instructions (masked lanes issue too), so the model counts a program's work in
thread instructions ("lanes") and tensor-core MACs, and spreads the programs over the SMs:

* vector (CUDA cores): per tap, a load, a convert and an fp32 multiply-add for each of G x BLOCK_P outputs, plus
  the tap's spatial index and mask math on BLOCK_P pixels shared by the G channels; the store at the end.
  On an NHWC problem the vector kernel's tile is BLOCK_P pixels x G channels with the channels contiguous: a
  thread loads up to 16 bytes of one pixel's channels in one instruction, and the tap's index and mask math is
  paid per such vector, not per element; a pixel's channels narrower than a 32-byte sector still fetch the
  sector (the rest is another program's: an L2 hit when the input fits in L2, else HBM moves it again).
* group_loop / group_opt (tensor cores): per K chunk of BLOCK_K (ceil(G*kh*kw / BLOCK_K) chunks), the gather of a
  BLOCK_P x BLOCK_K img2col tile (index, mask, address and load per element), the block-diagonal weight chunk
  built in registers (BLOCK_K x NP, NP = max(G, 16)), and one tl.dot of BLOCK_P x BLOCK_K x NP MACs; group_loop
  is G = 1, so NP = 16 issues 16 times the useful columns.

An SM issues at most one warp instruction per scheduler per cycle (4 schedulers, 32 lanes): with fewer resident
warps than schedulers it issues less. Resident programs follow from registers (accumulator and operand tiles per
thread), threads, blocks and shared memory. An SM's time is the larger of its programs' issue time and their
latency chains (a load's latency exposed once per program for the unrolled vector taps, once per pipelined K
chunk for the dot), and the kernel's time is the busiest SM's, floored by HBM and L2 bandwidth, plus the launch.

`prepare()` counts what the constants do not change; `timing()` applies the [efficiency] constants that
`tiler calibrate` fits to the H200 measurements (bench/data/h200_dwconv.csv). docs/model_cuda.md, "Depthwise
convolution", gives the equations, the fit and the held-out figures.
"""

from __future__ import annotations

import numpy as np

from ...model.common import ceil_div, classify_bound, roofline_us
from ...operator import Operator, register
from ..triton_measure import TritonRunner
from . import views
from .geometry import VECTOR, input_elems, scheme_groups, strip_tiles, useful_fraction
from .problem import DepthwiseConv

KNOBS = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages", "STRIP")
# the kernels' own limits (triton_kernels.validate): exports are promises, so the space is cut by them
MAX_DOT_TILE = 32768  # BLOCK_P * NP of the dot's accumulator
MAX_VEC_TILE = 16384  # G * BLOCK_P of the vector accumulator
MAX_G = {"nchw": 64, "nhwc": 256}  # channels per program each layout's kernel takes (triton_kernels.validate)
SECTOR_BYTES = 32  # the L2 <-> SM transfer unit
VECTOR_LOAD_BYTES = 16  # the widest load one thread issues
ROW_LOOP_TAPS = (
    25  # the NHWC kernel loops over the filter rows at run time from this many taps (triton_kernels)
)
RULES = {
    "layout": ("scheme",),
    "strips": ("scheme", "STRIP"),
    "scheme_groups": ("scheme", "groups_per_op"),
    "groups": ("groups_per_op",),
    "tile": ("scheme", "groups_per_op", "BLOCK_P"),
    "smem": ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_stages"),
    "occupancy": ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages"),
}
RULE_TEXT = {
    "strips": "STRIP > 1 (output columns a strip) runs on the nhwc vector kernel only; nchw and the tensor-core "
    "kernels take STRIP 1",
    "layout": "an nhwc problem runs the vector kernel (the tensor-core kernels gather along NCHW channel planes)",
    "scheme_groups": "group_loop handles 1 channel per program (groups_per_op = 1); group_opt at least 2",
    "groups": "groups_per_op <= C rounded up to a power of two (no program of only masked channels), and <= 64 "
    "(nchw) or 256 (nhwc), what the layout's kernel takes",
    "tile": f"accumulator tile: BLOCK_P*max(G,16) <= {MAX_DOT_TILE} (dot), G*BLOCK_P <= {MAX_VEC_TILE} (vector)",
    "smem": "dot operands staged in shared memory, (BLOCK_P*BLOCK_K + BLOCK_K*NP)*bytes*num_stages <= per block",
    "occupancy": "at least one program fits an SM (threads, shared memory; registers spill rather than fail)",
}
# The [efficiency] constants this model reads, with the values used before calibration (rough guesses: counted
# instructions per element of the Triton kernels' inner loops), and their fit boxes. `dw_` keeps them apart
# from the matmul model's constants in the same profile section.
DEFAULTS = {
    "dw_tap_lanes": 5.0,  # vector: instructions per output and tap (address, mask, load, convert, FMA)
    "dw_tap_lanes_2d": 2.0,  # vector: more per output and tap when taps span two axes (a second bounds check)
    "dw_gather_lanes": 12.0,  # dot: per img2col element (tap decode, index, mask, address, load)
    "dw_gather_lanes_2d": 6.0,  # dot: more per element for 2-D taps (tap // kw, tap % kw, a second bounds check)
    "dw_decode_lanes": 4.0,  # dot: per element and integer division by a non-power-of-two (tap // (kh*kw), tap % kw
    # ...): the K index is decoded at run time only when the K loop has more than one chunk (else it folds)
    "dw_bbuild_lanes": 2.0,  # dot: per element of the block-diagonal weight chunk (compare, select, convert)
    "dw_store_lanes": 4.0,  # per accumulator element at the end (convert, address, mask, store)
    "dw_nhwc_elem_lanes": 2.0,  # NHWC vector: per output and tap, the convert and the fp32 FMA
    "dw_nhwc_vec_lanes": 8.0,  # NHWC vector: per vector of a pixel's channels and tap (index, mask, address,
    # the load)
    "dw_mma_macs_per_cycle": 1024.0,  # tensor-core MACs per SM cycle that tl.dot's mma reaches at these sizes
    "dw_program_cycles": 400.0,  # per program: start, index setup, accumulator init
    "dw_tap_round_cycles": 100.0,  # vector: latency of one tap's loads (L1/L2 hits) before its FMAs, not hidden
    "dw_chunk_round_cycles": 600.0,  # dot: one K chunk's gather, shared-memory staging, barrier and mma, in series
    "dw_regs_per_tap_elem": 0.5,  # vector: registers per accumulator element per tap the compiler keeps in flight
    "dw_regs_per_row": 3.0,  # vector: registers per channel row a thread holds (its 64-bit plane pointer, weight)
    "dw_regs_per_gather": 2.0,  # dot: registers per img2col element of a chunk (value, address, mask)
    "dw_spill_lanes": 4.0,  # instructions per spilled register per round (local-memory store and load)
    "dw_l1_bytes": 196608.0,  # L1 bytes that hold the resident programs' input windows (of the 256 KB L1/smem)
    "dw_loads_in_flight": 8.0,  # loads one thread keeps in flight in a round; more wait for a second round
    "dw_miss_cycles": 600.0,  # extra latency of a round whose loads miss L1 (an L2 round trip)
    "hbm_efficiency": 0.92,  # share of the HBM datasheet bandwidth a stream reaches (shared with matmul)
}
FITTABLE = {
    "dw_tap_lanes": (1.0, 64.0),
    "dw_tap_lanes_2d": (0.01, 64.0),
    "dw_gather_lanes": (1.0, 128.0),
    "dw_gather_lanes_2d": (0.01, 128.0),
    "dw_decode_lanes": (0.1, 64.0),
    "dw_bbuild_lanes": (0.1, 64.0),
    "dw_store_lanes": (0.1, 64.0),
    "dw_nhwc_elem_lanes": (0.1, 64.0),
    "dw_nhwc_vec_lanes": (0.1, 256.0),
    "dw_mma_macs_per_cycle": (64.0, 4096.0),
    "dw_program_cycles": (10.0, 1e5),
    "dw_tap_round_cycles": (1.0, 3000.0),
    "dw_chunk_round_cycles": (10.0, 1e4),
    "dw_regs_per_tap_elem": (0.05, 8.0),
    "dw_regs_per_row": (0.5, 16.0),
    "dw_regs_per_gather": (0.5, 8.0),
    "dw_spill_lanes": (0.1, 256.0),
    "dw_l1_bytes": (16384.0, 262144.0),
    "dw_loads_in_flight": (1.0, 64.0),
    "dw_miss_cycles": (20.0, 5000.0),
}
_BASE_REGS = 32  # per-thread registers besides the tiles: indices, pointers, loop state


def _i(c: dict, k: str) -> np.ndarray:
    return np.asarray(c[k], dtype=np.int64)


def _not_pow2(v: int) -> bool:
    return bool(v & (v - 1))


def _np16(g):
    return np.maximum(g, 16)


def _threads(c: dict) -> np.ndarray:
    return 32 * _i(c, "num_warps")


def _smem(p: DepthwiseConv, c: dict) -> np.ndarray:
    bp, bk, g = _i(c, "BLOCK_P"), _i(c, "BLOCK_K"), _i(c, "groups_per_op")
    dot = (bp * bk + bk * _np16(g)) * p.in_bytes * _i(c, "num_stages")
    return np.where(_i(c, "scheme") == VECTOR, 0, dot)


def _fixed_occupancy(p: DepthwiseConv, chip, c: dict) -> np.ndarray:
    """Programs one SM holds by threads, blocks and shared memory (registers come in timing())."""
    by_threads = chip["max_threads_per_sm"] // _threads(c)
    smem = _smem(p, c)
    by_smem = np.where(
        smem > 0, chip["smem_bytes_per_sm"] // np.maximum(smem + 1024, 1), chip["max_blocks_per_sm"]
    )
    return np.minimum(np.minimum(by_threads, by_smem), chip["max_blocks_per_sm"])


def _strip(c: dict, shape) -> np.ndarray:
    """Each row's strip; 1 (one output pixel) for every row of a table without the knob."""
    return _i(c, "STRIP") if "STRIP" in c else np.ones(shape, dtype=np.int64)


def strip_columns(p: DepthwiseConv, strip) -> np.ndarray:
    """Input columns a strip of `strip` adjacent output columns loads per filter row: the distinct offsets
    s*stride + t*dilation (s < strip, t < kw), each loaded once and used by every column whose window holds it
    (`_dw_nhwc_strip_kernel`; kw for a strip of one). Computed per distinct strip value (a handful)."""
    strip = np.asarray(strip, dtype=np.int64)
    out = np.empty(strip.shape, dtype=np.float64)
    for v in np.unique(strip):
        s, t = np.arange(int(v))[:, None], np.arange(p.kw)[None, :]
        out[strip == v] = np.unique(s * p.stride + t * p.dilation).size
    return out


def _registers(g: dict, e: dict) -> np.ndarray:
    """Registers per thread: the fp32 accumulator (one per element a thread owns), plus for the vector kernel the
    unrolled taps' operands the compiler keeps in flight, for the dot the img2col chunk (value, address, mask)."""
    vec = (
        _BASE_REGS
        + g["acc_elems"] * (1 + e["dw_regs_per_tap_elem"] * g["live_taps"])
        + e["dw_regs_per_row"] * g["rows_per_thread"]
    )
    dot = _BASE_REGS + g["acc_elems"] + e["dw_regs_per_gather"] * g["operand_elems"]
    return np.where(g["vec"] > 0, vec, dot)


def prepare(p: DepthwiseConv, chip, c: dict) -> dict[str, np.ndarray]:
    """Per candidate, the counts the constants multiply: one program's work and rounds, per-thread tile sizes,
    programs per SM, the occupancy limits other than registers, bytes."""
    scheme = _i(c, "scheme")
    g, bp, bk = _i(c, "groups_per_op"), _i(c, "BLOCK_P"), _i(c, "BLOCK_K")
    w, stages = _i(c, "num_warps"), _i(c, "num_stages")
    threads = _threads(c)
    vec = scheme == VECTOR
    nhwc = p.layout == "nhwc"
    # strips of sw output columns (NHWC vector; the rule `strips` keeps 1 elsewhere): each filter row loads
    # `cols` input columns a strip, cols / sw a pixel (kw for one pixel), a dependent round each
    sw = _strip(c, scheme.shape)
    cols = strip_columns(p, sw)
    row_loads = p.kh * cols / sw  # input vectors loaded per output pixel (taps for a strip of one)
    # NHWC: elements per vector load (a pixel's channels, up to 16 bytes) and the sector fetched per pixel
    vec_width = np.minimum(g, VECTOR_LOAD_BYTES // p.in_bytes) if nhwc else np.ones(scheme.shape)
    # a pixel's channels are one segment of g*b bytes: it moves in whole 32-byte sectors (NCHW rows are long runs)
    seg = g * p.in_bytes
    sector_waste = ceil_div(seg, SECTOR_BYTES) * SECTOR_BYTES / seg if nhwc else np.ones(scheme.shape)
    # the rest of each sector is another channel group's, read much later (pixel tiles run first): it is still in
    # L2 only when the input fits there; else HBM moves the whole sectors too
    in_bytes = p.N * p.C * p.H * p.W * p.in_bytes
    evicted = float(np.clip(1.0 - chip["l2_bytes"] / in_bytes, 0.0, 1.0)) if nhwc else 0.0
    hbm_bytes = p.compulsory_bytes + in_bytes * (sector_waste - 1.0) * evicted
    plane = p.out_h * p.out_w
    programs = strip_tiles(p, bp, sw) * ceil_div(p.C, g) * p.N
    steps = ceil_div(g * p.taps, bk)
    npad = _np16(g)
    zero = np.zeros(scheme.shape)
    # the programs' input windows come through L2 (halo rows are read by neighbouring tiles too)
    window = g * input_elems(p, np.minimum(bp, plane)) * p.in_bytes * sector_waste
    l2_bytes = programs * window + p.pixels * p.C * p.out_bytes
    return {
        "vec": vec.astype(np.float64),
        "tap_elems": np.where(vec, p.taps * g * bp, zero),
        # a strip's reuse: input vectors a program does not load because a strip shares its columns (0 at sw 1)
        "reused_elems": np.where(vec, (p.taps - row_loads) * g * bp, zero),
        "two_d": np.full(scheme.shape, float(p.kw > 1)),
        "nhwc": np.full(scheme.shape, float(nhwc)),
        "vec_width": vec_width.astype(np.float64),
        "gather_elems": np.where(vec, zero, steps * bp * bk),
        # divisions by a non-power-of-two per gathered element when the K loop runs more than one chunk:
        # k // taps and k % taps, then t // kw and t % kw
        "decode_ops": np.where(
            vec | (steps <= 1), zero, 2.0 * _not_pow2(p.taps) + 2.0 * ((p.kw > 1) & _not_pow2(p.kw))
        ),
        "bbuild_elems": np.where(vec, zero, steps * bk * npad),
        "store_elems": np.where(vec, g * bp, bp * npad).astype(np.float64),
        "macs": np.where(vec, zero, steps * bp * bk * npad),
        # dependent rounds of a program: each unrolled tap (its loads feed its FMAs), each K chunk not prefetched
        "rounds": np.where(vec, p.kh * cols, ceil_div(steps, stages)),
        # taps whose loads the compiler may keep live at once: all of them when every tap is unrolled; one filter
        # row's when the NHWC kernel loops over the rows at run time (ROW_LOOP_TAPS)
        # (a strip's loaded column serves sw outputs: cols / sw a pixel)
        "live_taps": np.where(vec, (1 if nhwc and p.taps >= ROW_LOOP_TAPS else p.kh) * cols / sw, zero),
        "acc_elems": np.where(vec, g * bp, bp * npad) / threads,
        # channel rows of the vector tile a thread holds: all G when the pixels alone cover the threads
        # (NHWC: one pixel pointer serves all its channels: none)
        "rows_per_thread": np.where(vec & (not nhwc), g * np.minimum(bp, threads) / threads, zero),
        "window_bytes": window.astype(np.float64),
        "load_bytes": np.where(vec, row_loads * g * bp * sector_waste, steps * bp * bk) * float(p.in_bytes),
        "operand_elems": np.where(vec, zero, bp * bk / threads),
        # loads one thread issues per round: a tap's G x BLOCK_P window, or a chunk's BLOCK_P x BLOCK_K gather
        "round_loads": np.where(vec, g * (bp // sw) / vec_width, bp * bk) / threads,
        "warps": w.astype(np.float64),
        "fixed_occupancy": _fixed_occupancy(p, chip, c).astype(np.float64),
        "programs": programs.astype(np.float64),
        "hbm_bytes": hbm_bytes * np.ones(scheme.shape),
        "l2_bytes": l2_bytes.astype(np.float64),
        "flops": np.full(scheme.shape, p.flops),
        "compulsory": np.full(scheme.shape, p.compulsory_bytes),
        "useful": np.where(vec, 1.0, useful_fraction(p, g, steps * bk, npad)),
    }


def sm_terms(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """An SM's cycles by term from prepared columns and the constants: `issue` (+ `overhead`), `tensor`, and
    `latency` (the programs' dependent chains, wave by wave), with the counts they rest on (`regs`, `occupancy`,
    `per_sm` programs, `miss`, the L1 re-reads' share that misses to L2). The SM's time is the largest term."""
    sms = chip.cores
    threads = 32 * g["warps"]
    regs = _registers(g, e)
    spill = np.maximum(regs - 255, 0)
    alloc = np.minimum(np.ceil(regs / 8) * 8, 256)
    occupancy = np.maximum(np.minimum(g["fixed_occupancy"], chip["regs_per_sm"] // (alloc * threads)), 1)
    tap_lanes = np.where(
        g["nhwc"] > 0,
        e["dw_nhwc_elem_lanes"] + e["dw_nhwc_vec_lanes"] / g["vec_width"],
        e["dw_tap_lanes"] + e["dw_tap_lanes_2d"] * g["two_d"],
    )
    lanes = (
        tap_lanes * g["tap_elems"]
        # a strip does not load (nor index) the input vectors its columns share
        - e["dw_nhwc_vec_lanes"] / g["vec_width"] * g["reused_elems"]
        + (
            e["dw_gather_lanes"]
            + e["dw_gather_lanes_2d"] * g["two_d"]
            + e["dw_decode_lanes"] * g["decode_ops"]
        )
        * g["gather_elems"]
        + e["dw_bbuild_lanes"] * g["bbuild_elems"]
        + e["dw_store_lanes"] * g["store_elems"]
        + e["dw_spill_lanes"]
        * spill
        * g["rounds"]
        * threads  # each spilled register stored and reloaded per round
    )
    mma = g["macs"] / e["dw_mma_macs_per_cycle"]
    per_sm = np.ceil(g["programs"] / sms)
    resident = np.minimum(occupancy, per_sm)
    issue_rate = 32 * np.minimum(4, resident * g["warps"])  # lanes per cycle the SM issues
    issue = per_sm * lanes / issue_rate
    tensor = per_sm * mma
    overhead = per_sm * e["dw_program_cycles"] / resident
    # each tap (or gathered element) re-reads the window from L1; when the resident programs' windows overflow
    # L1, that share of the re-reads comes from L2 again
    miss = np.clip(1.0 - e["dw_l1_bytes"] / np.maximum(resident * g["window_bytes"], 1.0), 0.0, 1.0)
    # one program alone: its warps issue in parallel on up to 4 schedulers, and each dependent round waits its
    # loads' latency (an L2 round trip for the share that misses L1), once per `loads in flight` loads a thread
    # issues in the round
    waits = np.maximum(1.0, g["round_loads"] / e["dw_loads_in_flight"])
    round_cycles = np.where(g["vec"] > 0, e["dw_tap_round_cycles"], e["dw_chunk_round_cycles"])
    chain = (
        e["dw_program_cycles"]
        + g["rounds"] * waits * (round_cycles + miss * e["dw_miss_cycles"])
        + lanes / (32 * np.minimum(4, g["warps"]))
        + mma
    )
    latency = np.ceil(per_sm / occupancy) * chain
    return {
        "issue": issue,
        "overhead": overhead,
        "tensor": tensor,
        "latency": latency,
        "regs": regs,
        "occupancy": occupancy,
        "per_sm": per_sm,
        "miss": miss,
    }


def timing(g: dict, chip, e: dict[str, float]) -> dict[str, np.ndarray]:
    """The estimate record from prepared columns and the constants (see the module docstring)."""
    f = chip.clock_hz
    sms = chip.cores
    t = sm_terms(g, chip, e)
    issue, overhead, tensor, miss, per_sm = t["issue"], t["overhead"], t["tensor"], t["miss"], t["per_sm"]
    regs, occupancy = t["regs"], t["occupancy"]
    sm_cycles = np.maximum(np.maximum(issue + overhead, tensor), t["latency"])
    hbm_s = g["hbm_bytes"] / (chip["hbm_gbps"] * 1e9 * e["hbm_efficiency"])
    l2_bytes = g["l2_bytes"] + miss * g["programs"] * g["load_bytes"]
    l2_s = l2_bytes / (chip["l2_gbps"] * 1e9)
    sm_s = sm_cycles / f
    launch = chip["launch_us"]
    time_us = np.maximum(np.maximum(sm_s, hbm_s), l2_s) * 1e6 + launch
    # the GPU's pipes (common.PIPES_OF["cuda"]): the CUDA-core instructions (math, index, loads) on `alu`, the
    # per-program overhead on `issue`; no shared-memory or separate store term (0)
    zero = np.zeros(len(sm_s))
    pipes = {
        "tensor": tensor / f * 1e6,
        "alu": issue / f * 1e6,
        "issue": overhead / f * 1e6,
        "smem": zero,
        "load": np.maximum(hbm_s, l2_s) * 1e6,
        "store": zero,
    }
    busy = time_us - launch
    bound = classify_bound(pipes, busy)
    used = np.minimum(g["programs"], sms)
    mean = g["programs"] / sms
    return {
        "time_us": time_us,
        "bound": bound,
        **{f"{k}_us": v for k, v in pipes.items()},
        "cores_used": used.astype(np.int64),
        "waves": np.ceil(g["programs"] / (sms * occupancy)).astype(np.int64),
        "balance": mean / np.maximum(per_sm, 1),
        "l2_hit_rate": 1.0 - np.minimum(g["hbm_bytes"], l2_bytes) / np.maximum(l2_bytes, 1.0),
        "hbm_bytes": g["hbm_bytes"],
        "l2_bytes": l2_bytes,
        "roofline_us": roofline_us(
            g["flops"], g["compulsory"], chip.peak_tflops("fp16") * 1e12, chip["hbm_gbps"] * 1e9, launch
        ),
        "tiles": g["programs"].astype(np.int64),
        "occupancy": occupancy.astype(np.int64),
        "registers": regs,
        "useful_mac_fraction": g["useful"],
    }


@register
class DepthwiseConvCuda(TritonRunner, Operator):
    OP = "depthwise_conv"
    FAMILY = "cuda"
    PROBLEM = DepthwiseConv
    KNOBS = KNOBS
    RULES = RULES
    RULE_TEXT = RULE_TEXT
    SAMPLE_ORDER = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages", "STRIP")
    GRID_KNOBS = ("scheme", "groups_per_op", "BLOCK_P", "STRIP")
    # a kernel without the knob computes one pixel a strip
    ABSENT_DEFAULTS = {"STRIP": "1"}
    SHAPE_KNOBS = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K")
    CHECKLIST = {
        "alu": "CUDA-core bound: fewer instructions per output: more channels per program share the index "
        "math; or the tensor cores (group_opt) when the taps are many",
        "tensor": "tensor-core bound: the dot issues max(G,16) columns for G useful; G a multiple of 16",
        "load": "memory bound: the kernel streams the input and output once; larger BLOCK_P cuts halo re-reads",
        "issue": "issue bound (per-program overhead): fewer, larger programs",
        "latency": "no unit saturated: more resident warps (smaller tiles, fewer registers) or larger programs",
    }
    WHAT_IF = {
        "num_warps": ("latency: warps per program (occupancy vs issue slots)", (1, 2, 4, 8)),
        "BLOCK_P": ("work per program: pixels per program", (64, 128, 256, 512, 1024)),
    }
    FITTABLE = FITTABLE
    CONSTANTS = DEFAULTS
    IMPLS = ("triton",)
    TARGETS = {"triton": views.TRITON}
    RUNNERS = ("triton",)

    def check(self, p: DepthwiseConv, chip) -> None:
        """The Triton kernels run fp16 and bf16 (the dot needs a 16-bit float operand) on nchw or nhwc tensors."""
        from ...errors import ProblemError

        if p.dtype not in ("fp16", "bf16"):
            raise ProblemError(f"dtype: the Triton depthwise kernels run fp16 and bf16, got {p.dtype!r}")
        if p.layout not in MAX_G:
            raise ProblemError(
                f"layout: the Triton depthwise kernels read {' or '.join(MAX_G)} tensors, got {p.layout!r} "
                "(Ascend's 5-D format)"
            )

    def feasible(self, p: DepthwiseConv, chip, c: dict, rules=None) -> dict[str, np.ndarray]:
        names = [r for r in (rules or RULES) if all(k in c for k in RULES[r])]
        out = {}
        for r in names:
            if r == "layout":
                out[r] = (_i(c, "scheme") == VECTOR) | (p.layout != "nhwc")
            elif r == "strips":
                out[r] = (_i(c, "STRIP") == 1) | ((_i(c, "scheme") == VECTOR) & (p.layout == "nhwc"))
            elif r == "scheme_groups":
                out[r] = scheme_groups(_i(c, "scheme"), _i(c, "groups_per_op"))
            elif r == "groups":
                g = _i(c, "groups_per_op")
                out[r] = (g <= 1 << max(p.C - 1, 0).bit_length()) & (g <= MAX_G.get(p.layout, MAX_G["nchw"]))
            elif r == "tile":
                g, bp = _i(c, "groups_per_op"), _i(c, "BLOCK_P")
                vec = _i(c, "scheme") == VECTOR
                out[r] = np.where(vec, g * bp <= MAX_VEC_TILE, bp * _np16(g) <= MAX_DOT_TILE)
            elif r == "smem":
                out[r] = _smem(p, c) <= chip["smem_bytes_per_block"]
            elif r == "occupancy":
                out[r] = _fixed_occupancy(p, chip, c) >= 1
        return out

    def dominated(self, p: DepthwiseConv, chip, c: dict, domains: dict | None = None) -> np.ndarray:
        """The vector kernel ignores BLOCK_K and has no K loop to pipeline: keep its smallest BLOCK_K and
        num_stages (when they are in the domain)."""
        domains = domains or {}
        out = super().dominated(p, chip, c, domains)
        if "scheme" not in c:
            return out
        vec = _i(c, "scheme") == VECTOR
        for k in ("BLOCK_K", "num_stages"):
            if k in c and k in domains:
                out |= vec & (_i(c, k) != min(domains[k]))
        return out

    def estimate(self, p: DepthwiseConv, chip, c: dict) -> dict[str, np.ndarray]:
        return timing(prepare(p, chip, c), chip, self.constants(chip))

    def prepare(self, p: DepthwiseConv, chip, c: dict) -> dict[str, np.ndarray]:
        return prepare(p, chip, c)

    def timing(self, prepared: dict, chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        return timing(prepared, chip, constants)

    def tie_rank(self, p: DepthwiseConv, chip, c: dict) -> np.ndarray:
        """Among exactly tied predictions, the shortest latency term first. A tie means the same binding term
        (issue, or HBM/L2): tilings that differ only in warps a program, say, issue the same instructions. The
        latency chain below it is what the model knows least (a warp's stalls beyond its counted rounds: 1-warp
        programs on ConvNeXt s3 measured 1.7x slower than the 2-warp ones tied with them), so the tiling with
        the most slack before its chain binds goes first (docs/model_cuda.md 9b)."""
        return sm_terms(prepare(p, chip, c), chip, self.constants(chip))["latency"]

    def advice(self, p: DepthwiseConv, chip, c: dict, est: dict, row: int) -> list[str]:
        out = []
        if int(np.asarray(c["scheme"])[row]) != VECTOR:
            out.append(f"compute: {float(est['useful_mac_fraction'][row]):.1%} of the dot's MACs are useful")
        occ = int(est["occupancy"][row])
        out.append(f"occupancy: {occ} program(s) per SM, {int(est['tiles'][row])} programs in all")
        return out + super().advice(p, chip, c, est, row)

    def warm_start(self, p: DepthwiseConv, chip) -> dict:
        """The CUDA-core kernel with two channels and 128 pixels per program on two warps: within 10% of the best
        measured tiling on 12 of the 15 H200 shapes where the grid has it (0.94 geomean, bench/data/h200_dwconv.csv)."""
        return dict(
            scheme="vector", groups_per_op=2, BLOCK_P=128, BLOCK_K=16, num_warps=2, num_stages=1, STRIP=1
        )
