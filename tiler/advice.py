"""Advice: which items of the optimisation checklist (MISSION §4) apply to one tiling, with predicted gains.

Each what-if flips one knob of the given tiling, re-scores it with the same model and reports the change, so
every line carries a number the model computed, not a rule of thumb.
"""

from __future__ import annotations

import numpy as np

from .model import get_model
from .space import Candidates, Space

# The checklist by bound type (MISSION §4), the first line printed for each bound, in each family's words (the
# bound names are the estimate record's: docs/model_cuda.md section 3 maps them onto the GPU's units).
CHECKLIST = {
    "ascend": {
        "mte2": "memory bound: cut repeated loads, keep panels in L2/L1 (shared memory), make transfers large and "
        "aligned",
        "mte1": "L1->L0 bound: larger base_k per load, fewer L0 reloads (iterate order), Load3D instead of 2D",
        "cube": "compute bound: keep the cube busy (no gaps between MMADs), align instruction sizes, quantise",
        "vector": "vector bound: move work to the cube, fewer passes, fused instructions",
        "fixpipe": "write-out bound: larger K per output block, double-buffer L0C (unit flag)",
        "scalar": "scalar bound: fewer, larger instructions (multi-load, bigger base blocks), less loop overhead",
        "latency": "no pipe saturated: ping-pong, preload and fewer, larger transfers hide the latency",
    },
    "cuda": {
        "mte2": "memory bound (global -> shared): larger tiles raise reuse, GROUP_M raises L2 hits, 16-B aligned "
        "rows keep cp.async",
        "mte1": "shared-memory bound: wider wgmma tiles (BLOCK_N 128-256) read shared memory less per MMA",
        "cube": "compute bound: keep the tensor cores busy: wgmma (BLOCK_M % 64 == 0, warps in groups of 4), "
        "wide instructions, no split-K you do not need",
        "vector": "split-K's extra kernels (zero fill, cast) dominate: fewer slices",
        "fixpipe": "epilogue bound: fewer split-K atomics, a larger K per output tile",
        "scalar": "overhead bound: fewer programs and K steps (larger BLOCK_K and tiles)",
        "latency": "no unit saturated: more num_stages or more resident programs hide the load latency",
    },
}

# knob -> (checklist item, values to try) per family; only knobs the space has are tried.
WHAT_IF = {
    "ascend": {
        "tail_split": ("multi-core: re-split the tail round", (1,)),
        "serpentine": ("memory: serpentine order keeps the panels just used in L2", (0, 1)),
        "swizzle_offset": ("memory: swizzle group width changes which panels share L2", (1, 2, 3, 4, 8)),
        "swizzle_direction": ("memory: swizzle direction", (0, 1)),
        "l1_stages": ("latency: L1 ping-pong / more stages hide MTE2 behind the cube", (1, 2, 3, 4)),
        "preload": ("latency: preload the next tile's first chunk", (0, 1, 2, 3)),
        "l0_pingpong": ("latency: L0A/L0B ping-pong overlaps MTE1 with the MMAD", (0, 1)),
        "multi_load": ("scalar: multi-load moves all L1 blocks in one MTE2 transfer", (0, 1)),
        "weight_resident": ("memory: keep the B panel resident in L1 (no reload per tile)", (0, 1)),
        "split_k": ("multi-core: split K across cores", (1, 2, 4, 8, 16)),
    },
    "cuda": {
        "SPLIT_K": ("multi-core: split K across SMs", (1, 2, 4, 8, 16)),
        "num_stages": ("latency: software pipelining depth", (2, 3, 4, 5)),
        "ORDER": ("memory: tile order for L2 reuse", (0, 1, 2)),
        "GROUP_M": ("memory: grouped order width", (1, 4, 8, 16)),
        "num_warps": ("latency: warps per block (occupancy vs registers)", (2, 4, 8)),
    },
}


def advice(problem, chip, space: Space, cand: Candidates, est: dict, min_gain: float = 0.02) -> list[str]:
    """Lines naming the checklist items that apply to candidate 0 of `cand`, best predicted gain first."""
    model = get_model(space.op, space.family)
    base = float(est["time_us"][0])
    bound = str(est["bound"][0])
    lines = [f"bound {bound}: {CHECKLIST.get(chip.family, CHECKLIST['ascend']).get(bound, '')}"]
    gains = []
    for knob, (item, values) in WHAT_IF.get(chip.family, {}).items():
        if knob not in cand:
            continue
        cur = int(cand[knob][0])
        alts = [v for v in values if v != cur]
        if not alts:
            continue
        trial = {k: np.repeat(v, len(alts)) for k, v in cand.items()}
        trial[knob] = np.array(alts, dtype=np.int64)
        ok = np.logical_and.reduce(list(model.feasible(problem, chip, trial).values()))
        if not ok.any():
            continue
        t = model.estimate(problem, chip, {k: v[ok] for k, v in trial.items()})["time_us"]
        i = int(np.argmin(t))
        gain = 1.0 - float(t[i]) / base
        if gain >= min_gain:
            label = (
                space.knobs[knob].label(np.array(alts)[ok][i])
                if knob in space.knobs
                else np.array(alts)[ok][i]
            )
            gains.append(
                (gain, f"{item}: {knob}={label} predicts -{gain:.0%} ({base:.1f} -> {float(t[i]):.1f} us)")
            )
    lines += [text for _, text in sorted(gains, reverse=True)]
    if hasattr(model, "advice"):  # the family's own checklist items (GPU: alignment, waves, wgmma, spills)
        lines += model.advice(problem, chip, cand, est, 0)
    else:
        lines += _static(problem, chip, est)
    return lines


def _static(problem, chip, est: dict) -> list[str]:
    """Facts of the problem and schedule that no single knob flip shows."""
    out = []
    cores, used = chip.cores, int(est["cores_used"][0])
    if used < cores:
        out.append(f"multi-core: only {used} of {cores} cores have work")
    tiles = int(est["tiles"][0]) if "tiles" in est else 0
    if tiles and tiles % cores and tiles > cores:
        out.append(
            f"multi-core: {tiles} tiles on {cores} cores: the last round runs {tiles % cores} tiles "
            f"(balance {float(est['balance'][0]):.2f})"
        )
    if problem.OP == "matmul":
        burst = chip.get("gm_burst_bytes", chip.get("vector_load_bytes", 16))
        for name, elems in (("K", problem.K), ("N", problem.N)):
            stride = elems * problem.in_bytes
            if stride % burst:
                pad = -(-stride // burst) * burst // problem.in_bytes
                out.append(
                    f"memory: row stride {name}*{problem.in_bytes} = {stride} B is not {burst}-B aligned; "
                    f"padding {name} to {pad} restores full-rate transfers"
                )
    hit = float(est["l2_hit_rate"][0])
    out.append(
        f"L2 hit rate {hit:.0%} for this traversal; HBM traffic {float(est['hbm_bytes'][0]) / 1e6:.1f} MB"
    )
    return out
