"""The cuda matmul model's branch-and-bound bounds (tiler/ops/matmul/cuda/bounds.py: quick_bound, prefix_bound).

Correctness is what matters: a bound above the estimate of one candidate could cut the optimum. So, on many random
feasible candidates over shapes (tiny M, split-K, misaligned strides, batches), every layout, four GPUs, fp16 and
bf16, and constants drawn across the boxes `tiler calibrate` fits them in:

* quick_bound <= the estimate of every candidate (whatever its ORDER and GROUP_M);
* prefix_bound (on BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K) <= quick_bound of every completion, also with pinned domains;
* the exhaustive search (which now prunes with both) returns the same top times and the same best tiling as scoring
  every feasible candidate of the whole space without a bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul import cuda
from tiler.problem import parse_problem
from tiler.search import search
from tiler.search.result import top_distinct
from tiler.space import load_space, take

CHIPS = ("h200", "h100", "a100", "h20")
LAYOUTS = ("nn", "nt", "tn", "tt")
# (M, N, K, batch): LLM GEMMs, tiny M (decode), long K (split-K wins), odd sizes (synchronous loads), batches
SHAPES = (
    (16, 4096, 4096, 1),
    (1, 8192, 28672, 1),
    (2048, 14336, 4096, 1),
    (128, 128, 131072, 1),
    (1000, 1000, 1000, 1),
    (37, 4097, 300, 1),
    (8192, 128, 8192, 1),
    (3, 17, 65536, 2),
    (256, 256, 64, 8),
    (4096, 4096, 4096, 1),
    (33, 1024, 1040, 3),
    (512, 512, 32768, 1),
)
MODEL = get_operator("matmul", "cuda")
SPACE = load_space("matmul", "cuda")
EPS = 1e-12  # float slack only: the bounds are already scaled down by 1e-9


def _feasible(p, chip, space, n, rng):
    """Up to `n` random candidates of `space` that pass every rule and are not dominated (what the search scores)."""
    c = {k: rng.choice(np.asarray(kn.values, dtype=np.int64), size=8 * n) for k, kn in space.knobs.items()}
    ok = np.logical_and.reduce([np.broadcast_to(m, 8 * n) for m in MODEL.masks(p, chip, c).values()])
    ok &= ~MODEL.dominated(p, chip, c, space.domains())
    return take(c, np.flatnonzero(ok)[:n])


def _constants(rng) -> dict:
    """Efficiency constants drawn log-uniformly in the boxes calibration fits them in, the mma family either way."""
    out = {k: float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) for k, (lo, hi) in cuda.FITTABLE.items()}
    out["mma_version"] = float(rng.choice([2.0, 3.0]))
    out["hbm_efficiency"] = float(rng.uniform(0.5, 1.2))
    return out


def _cases(n: int, seed: int):
    rng = np.random.default_rng(seed)
    for i in range(n):
        M, N, K, batch = SHAPES[i % len(SHAPES)]
        chip = load_chip(CHIPS[i % len(CHIPS)])
        if i % 3 == 2:
            chip = chip.with_values(_constants(rng))
        layout = LAYOUTS[(i // len(CHIPS)) % len(LAYOUTS)]
        dtype = ("fp16", "bf16")[(i // 2) % 2]
        p = parse_problem("matmul", {"M": M, "N": N, "K": K, "batch": batch, "layout": layout}, dtype)
        yield rng, chip, p


@pytest.mark.parametrize("seed", [0, 1])
def test_quick_bound_never_exceeds_the_estimate(seed):
    """quick_bound <= estimate on random feasible candidates (random ORDER and GROUP_M too)."""
    checked = 0
    for rng, chip, p in _cases(48, seed):
        c = _feasible(p, chip, SPACE, 400, rng)
        if not len(c["BLOCK_M"]):
            continue
        t = MODEL.estimate(p, chip, c)["time_us"]
        q = MODEL.quick_bound(p, chip, c)
        bad = np.flatnonzero(q > t * (1 + EPS))
        assert bad.size == 0, (p.label(), chip.id, {k: v[bad[0]] for k, v in c.items()}, q[bad[0]], t[bad[0]])
        # the bound is the hits-at-1 estimate: never far below it unless the L2 walk costs
        assert np.all(q > 0)
        checked += t.size
    assert checked > 5000


def test_quick_bound_holds_for_every_launch_order():
    """quick_bound ignores ORDER and GROUP_M: one value per tiling, below the estimate of each of its 12 orders."""
    rng = np.random.default_rng(5)
    sched = SPACE.product(list(cuda.SCHEDULE_KNOBS))
    for _, chip, p in _cases(12, 9):
        c = _feasible(p, chip, SPACE, 60, rng)
        c = {k: v for k, v in c.items() if k not in cuda.SCHEDULE_KNOBS}
        n = len(c["BLOCK_M"])
        q = MODEL.quick_bound(p, chip, c)
        full = {k: np.repeat(v, len(sched["ORDER"])) for k, v in c.items()}
        full.update({k: np.tile(v, n) for k, v in sched.items()})
        t = MODEL.estimate(p, chip, full)["time_us"].reshape(n, -1)
        assert np.all(q <= t.min(axis=1) * (1 + EPS))


@pytest.mark.parametrize("seed", [0, 1])
def test_prefix_bound_is_a_floor_of_quick_bound(seed):
    """prefix_bound of a first-level row <= quick_bound (so <= the estimate) of every feasible completion."""
    checked = 0
    for rng, chip, p in _cases(48, 100 + seed):
        c = _feasible(p, chip, SPACE, 400, rng)
        if not len(c["BLOCK_M"]):
            continue
        q = MODEL.quick_bound(p, chip, c)
        floor = MODEL.prefix_bound(p, chip, {k: c[k] for k in cuda.LEVELS[0]}, SPACE.domains())
        bad = np.flatnonzero(floor > q * (1 + EPS))
        assert bad.size == 0, (
            p.label(),
            chip.id,
            {k: v[bad[0]] for k, v in c.items()},
            floor[bad[0]],
            q[bad[0]],
        )
        assert np.all(floor > 0)
        checked += q.size
    assert checked > 5000


def test_prefix_bound_with_pinned_domains():
    """With num_stages and num_warps pinned (--fix), the floor uses the pinned domains and stays valid; pinning
    can only raise it."""
    rng = np.random.default_rng(3)
    for st in (1, 2, 3, 8):
        for w in (2, 4, 16):
            space = SPACE.pin({"num_stages": st, "num_warps": w})
            for _, chip, p in _cases(8, st * 10 + w):
                c = _feasible(p, chip, space, 200, rng)
                if not len(c["BLOCK_M"]):
                    continue
                first = {k: c[k] for k in cuda.LEVELS[0]}
                floor = MODEL.prefix_bound(p, chip, first, space.domains())
                assert np.all(floor <= MODEL.quick_bound(p, chip, c) * (1 + EPS))
                assert np.all(floor >= MODEL.prefix_bound(p, chip, first, SPACE.domains()) * (1 - EPS))


def _brute_force(p, chip, space, top):
    """Every feasible candidate of the whole space scored, no bound, no dominance: the top `top` distinct."""
    c = space.product(space.names)
    ok = np.logical_and.reduce(
        [np.broadcast_to(m, len(c["BLOCK_M"])) for m in MODEL.masks(p, chip, c).values()]
    )
    c = take(c, np.flatnonzero(ok))
    t = MODEL.estimate(p, chip, c)["time_us"]
    order = top_distinct(c, t, space.names, top, MODEL.tie_rank(p, chip, c))
    return take(c, order), t[order]


@pytest.mark.parametrize(
    "chip_id, shape, layout, dtype",
    [
        ("h200", (16, 4096, 4096, 1), "nt", "fp16"),
        ("h200", (2048, 14336, 4096, 1), "nt", "bf16"),
        ("h200", (128, 128, 131072, 1), "nn", "fp16"),
        ("h100", (1000, 1000, 1000, 1), "tn", "fp16"),
        ("a100", (1, 8192, 28672, 1), "nt", "bf16"),
        ("h20", (37, 4097, 300, 2), "tt", "fp16"),
    ],
)
def test_exhaustive_equals_brute_force_on_the_whole_space(chip_id, shape, layout, dtype):
    """The pruned search's top 5 (times and tilings) equal scoring every feasible candidate without bounds."""
    chip = load_chip(chip_id)
    M, N, K, batch = shape
    p = parse_problem("matmul", {"M": M, "N": N, "K": K, "batch": batch, "layout": layout}, dtype)
    res = search(p, chip, SPACE, top=5)
    cands, times = _brute_force(p, chip, SPACE, 5)
    assert res.proven_optimal
    assert res.est["time_us"].tolist() == times.tolist()
    assert res.tiling(0) == SPACE.decode(cands, 0)
    # the bounds pruned: far fewer candidates scored than the space holds
    assert res.evaluated < res.feasible
