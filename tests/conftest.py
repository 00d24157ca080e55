"""Shared fixtures: chips, the ascend space, and a helper to score one tiling."""

from __future__ import annotations

import os
import sys

# Byte-code caching on, even where the environment turns it off (PYTHONDONTWRITEBYTECODE=1, as in the
# development container): the suite starts a few hundred Python processes (CLI runs, spawned sweep and study workers)
# that import tiler from this tree, and each would compile it again (0.52-0.57 s of CPU to import the API, CLI,
# sweep, bayes and the matmul model without a cache, 0.27-0.31 s with one). Set before the imports below, so the
# workers' own imports write the cache the later processes read.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# glibc serves an allocation above its mmap threshold (128 KiB, rising adaptively) with a fresh mmap and unmaps it on
# free, so the searches' large numpy temporaries are page-faulted in again on every use. With a 32 MiB threshold and
# a 1 GiB trim threshold they are reused from the heap: .ci/run on a fresh clone with these in the environment, user
# + sys CPU 461 -> 426 s, test command 3:43 -> 3:26 (one run each, 2026-12-03). Set here, before
# pytest-xdist starts its workers, which read them at start-up (as do the processes the tests start).
os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(32 << 20))
os.environ.setdefault("MALLOC_TRIM_THRESHOLD_", str(1 << 30))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.ops.matmul.ascend import WARM_START as ASCEND_DEFAULT  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.space import load_space  # noqa: E402

# The CATLASS default for A2 (examples/00_basic_matmul): 128x256x64 L0, L1 K 256, ping-pong, swizzle <3,0>,
# as knob codes, with the tail re-split off (the tests flip it).
_ASCEND = load_space("matmul", "ascend")
CATLASS_DEFAULT = {k: _ASCEND.knobs[k].parse(v) for k, v in {**ASCEND_DEFAULT, "tail_split": "off"}.items()}

# --fix pins that make a sweep's searches fast (~0.02-0.05 s each): the L0 block, L1 steps and buffering pinned;
# order, swizzle, tail re-split and the rest still searched.
FAST = [
    "base_m=64",
    "base_n=128",
    "base_k=64",
    "step_m=1",
    "step_n=1",
    "step_ka=4",
    "step_kb=4",
    "l1_stages=2",
    "preload=1",
    "split_k=1",
]


def pytest_collection_modifyitems(config, items):
    """Run the `slow` tests first, each file's in its own order, then the rest as collected.

    pytest-xdist's worksteal gives each worker a contiguous half of the collection and lets an idle worker take
    tests from the end of the other's queue, but never its last two. Collected in file order, the longest tests
    (test_targets' sampled properties, 9-16 s each) sit at the end of a queue, where no one can take them, and
    the other worker waits: the two workers finished 6.4 s apart in one run of the README's command (153.7 and
    160.1 s of tests). Started first, they leave the short tests for the end, which balance to within a test."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: file order kept


@pytest.fixture(scope="session")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="session")
def ascend_space():
    return load_space("matmul", "ascend")


def restrict(space, domains):
    """`space` with the given knobs cut to the given values (a small space the tests can brute-force)."""
    from dataclasses import replace

    knobs = dict(space.knobs)
    for k, vals in domains.items():
        knobs[k] = replace(knobs[k], values=tuple(vals))
    return replace(space, knobs=knobs)


def read_only(cand: dict) -> dict:
    """`cand` with every column made read-only: candidates a module's tests share (built once) raise where a model
    would write into them, so sharing them cannot carry one test's writes into the next."""
    for col in cand.values():
        col.flags.writeable = False
    return cand


def mm(M, N, K, dtype="fp16", batch=1):
    return parse_problem("matmul", {"M": M, "N": N, "K": K, "batch": batch}, dtype)


def score(chip, problem, **knobs):
    """Estimate of one ascend tiling (CATLASS default with `knobs` changed), as a dict of scalars."""
    model = get_operator("matmul", chip.family)
    t = {**CATLASS_DEFAULT, **knobs}
    cand = {k: np.array([v], dtype=np.int64) for k, v in t.items()}
    ok = model.feasible(problem, chip, cand)
    assert all(m[0] for m in ok.values()), {r: bool(m[0]) for r, m in ok.items()}
    est = model.estimate(problem, chip, cand)
    return {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in est.items()}


@pytest.fixture(scope="session")
def torch():
    """torch on a CUDA device, for the GPU tests (skipped without torch, triton or a device)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch


def ascend_floors_hold(p, chip, seed: int) -> None:
    """On 120 random feasible tile rows of the Ascend matmul search (each with every schedule): every estimate is at
    least its roofline, the search's floors (quick_bound, bound, prefix_bound) never exceed the best estimate of
    their row, and the fast estimate is the reference bit for bit."""
    from tiler.search import enumerate_feasible
    from tiler.space import product, take

    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    table, _, _ = enumerate_feasible(p, chip, space, model)
    rng = np.random.default_rng(seed)
    rows = take(table, rng.choice(len(table["base_m"]), size=min(120, len(table["base_m"])), replace=False))
    every = product(rows, space.product(list(model.SCHEDULE_KNOBS)))
    est = model.estimate(p, chip, every)
    best_t = est["time_us"].reshape(len(rows["base_m"]), -1).min(axis=1)
    assert np.all(est["time_us"] >= est["roofline_us"] * (1 - 1e-9))
    quick = model.quick_bound(p, chip, rows)
    assert np.all(quick <= best_t * (1 + 1e-9))
    assert np.all(model.bound(p, chip, rows) <= best_t * (1 + 1e-9))
    prefix = {k: rows[k] for k in model.LEVELS[0]}
    assert np.all(model.prefix_bound(p, chip, prefix, space.domains()) <= quick * (1 + 1e-9))
    some = take(every, slice(0, 400))
    same_estimates(model.estimate(p, chip, some), model.estimate_reference(p, chip, some))


def same_estimates(a: dict, b: dict) -> None:
    """Two estimate records are equal bit for bit: the same columns, dtypes, shapes and values."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert np.array_equal(x, y), k


# any JSON value, nested a little: the fuzz properties put it where a file expects one (test_fuzz_files, test_lookup)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
