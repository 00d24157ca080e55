"""The cuda matmul's knobs, capacity rules and [efficiency] constants (defaults and the boxes the fit keeps)."""

from __future__ import annotations

from ....errors import ConfigError

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
    "TAIL_SPLIT",
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
LEVELS = (("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K"), ("num_stages", "num_warps", "TEMPLATE", "TAIL_SPLIT"))

RULES = {
    "pow2": ("BLOCK_M", "BLOCK_N", "BLOCK_K"),
    "dot_min": ("BLOCK_M", "BLOCK_N", "BLOCK_K"),
    "threads": ("num_warps",),
    "smem": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"),
    "registers": ("BLOCK_M", "BLOCK_N", "num_warps"),
    "occupancy": ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"),
    "dtype": (),
    "tma": ("TEMPLATE",),
    "tail_split": ("SPLIT_K", "TEMPLATE", "TAIL_SPLIT"),
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
    "tma": "TEMPLATE tma/persistent: a chip with TMA (Hopper: mma_version 3); an operand whose row stride is not a "
    "multiple of 16 bytes (cuTensorMapEncodeTiled) is staged into padded rows first",
    "tail_split": "TAIL_SPLIT > 1 (the last partial wave's tiles in K slices) runs on TEMPLATE persistent with SPLIT_K "
    "1 only (its slices are the persistent grid's work items and the only split)",
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
    "extra_kernel_us": 2.0,  # each extra kernel (split-K's zero fill and cast, a TMA staging copy) beyond its bytes
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
    # a TMA template's staging copy (an operand whose rows are not 16-byte multiples into padded rows): elements
    # copied per second (1e9), whole chip; a strided copy of 2-byte elements that cannot be vectorised. The guess:
    # the HBM rate of a read and a write of 2 bytes each (4.42 TB/s / 4 B); fitted on bench/data (docs/model_cuda.md)
    "stage_gelems_per_s": 1100.0,
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
    "stage_gelems_per_s": (10.0, 5000.0),
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
