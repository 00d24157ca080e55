"""The Hopper matmul templates (TEMPLATE: pointer, tma, persistent) in the CUDA model, its space and its export.

Directions a model without the templates gets wrong: TMA loads need only 16-byte rows, so on a shape whose rows
Triton cannot prove 16-element aligned they leave the synchronous path (measured on the H200: 3000^3 from 1.1 ms to
0.15 ms, bench/data/h200_matmul_templates.csv); a persistent grid pays one program start per SM, not one per tile;
and neither exists without TMA (an A100). Rows that are not 16-byte multiples (K = 3333 in fp16) are staged into
padded rows before a TMA kernel: one read and one write of the operand, where the pointer kernel loads it one
element at a time on every K step.
"""

from __future__ import annotations

import numpy as np
import pytest

from tiler.errors import TilerError
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul import Matmul, views
from tiler.ops.matmul import cuda as mc
from tiler.space import load_space

MODEL = get_operator("matmul", "cuda")
H200 = load_chip("h200")


def tiling(n=1, **kw) -> dict:
    base = dict(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=3, num_warps=8, GROUP_M=8, ORDER=1, SPLIT_K=1
    )
    base.update(kw)
    return {k: np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)).copy() for k, v in base.items()}


def time_of(p, chip=H200, **kw) -> float:
    return float(MODEL.estimate(p, chip, tiling(**kw))["time_us"][0])


def test_tma_takes_unaligned_rows_off_the_synchronous_path():
    """3000^3: row strides of 3000 elements (6000 B: TMA can, Triton cannot prove 16 elements): the pointer kernel
    is several times slower than the same tiling with TMA loads (measured 1127 vs 158 us); on 4096^3, where Triton
    proves the alignment, the two are within 10 % (measured 210 and 219 us)."""
    odd = Matmul(3000, 3000, 3000)
    assert time_of(odd, TEMPLATE=0) > 3 * time_of(odd, TEMPLATE=1)
    even = Matmul(4096, 4096, 4096)
    assert abs(np.log(time_of(even, TEMPLATE=0) / time_of(even, TEMPLATE=1))) < 0.1
    # the TMA rows have no address registers: fewer registers than the pointer kernel's for the same tile
    prep = mc.prepare(even, H200, {**tiling(2), "TEMPLATE": np.array([0, 1])})
    assert prep["regs"][1] < prep["regs"][0]
    assert prep["unal_a"][1] == 0 and mc.prepare(odd, H200, tiling(TEMPLATE=0))["unal_a"][0] == 1


def test_persistent_grid_starts_one_program_per_sm():
    """A persistent grid runs one program per SM. With a tile that fills an SM alone (occupancy 1) over many waves,
    it saves the start of every tile after an SM's first (a fill: latency + program_overhead_cycles, fitted ~2700
    cycles on the H200) at persistent_tile_cycles each: faster than the same tiling one program per tile, by
    about (waves - 1) fills; in one wave there is nothing to save. With small tiles that three programs share an
    SM, one program per SM hides less latency: slower."""
    big = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=3, num_warps=8)
    many = Matmul(8192, 8192, 256)  # 2048 tiles: 16 waves
    t1, t2 = time_of(many, TEMPLATE=1, **big), time_of(many, TEMPLATE=2, **big)
    e = mc.efficiency(H200)
    fill = H200["gm_latency_cycles"] * e["latency_scale"] + e["program_overhead_cycles"]  # cycles
    saved = 15 * (fill - e["persistent_tile_cycles"]) / H200.clock_hz * 1e6
    assert t2 < 0.9 * t1 and (t1 - t2) == pytest.approx(saved, rel=0.35)
    one_wave = Matmul(1024, 1024, 4096)
    assert time_of(one_wave, TEMPLATE=2, **big) == pytest.approx(
        time_of(one_wave, TEMPLATE=1, **big), rel=0.01
    )
    small = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, num_stages=4, num_warps=4)
    assert int(MODEL.estimate(many, H200, tiling(**small, TEMPLATE=1))["occupancy"][0]) >= 3
    assert time_of(many, TEMPLATE=2, **small) > 1.1 * time_of(many, TEMPLATE=1, **small)


def test_the_tma_rule_needs_hopper_only():
    space = load_space("matmul", "cuda")
    c = tiling(3)
    c["TEMPLATE"] = np.array([0, 1, 2])
    for shape in ((3000, 3000, 3000), (1111, 2222, 3333)):  # the second's rows are staged
        assert MODEL.feasible(Matmul(*shape), H200, c)["tma"].tolist() == [True, True, True]
    assert MODEL.feasible(Matmul(3000, 3000, 3000), load_chip("a100"), c)["tma"].tolist() == [
        True,
        False,
        False,
    ]
    assert space.knobs["TEMPLATE"].labels == ("pointer", "tma", "persistent")


def test_staging_costs_a_copy_of_each_unaligned_operand():
    """M=64, N=K=8191 against N=K=8192: about the same GEMM, but every row of A and B is 16382 bytes, which no TMA
    descriptor describes: a TMA template first copies both, (64 + 8191) x 8191 elements, at the staging copy's rate
    (stage_gelems_per_s), plus a copy kernel each; the pointer kernel stages nothing. A model without the staging
    term prices the two shapes within a few percent."""
    odd, even = Matmul(64, 8191, 8191), Matmul(64, 8192, 8192)
    e = mc.efficiency(H200)
    copy_us = (64 + 8191) * 8191 / (e["stage_gelems_per_s"] * 1e9) * 1e6 + 2 * e["extra_kernel_us"]
    assert copy_us > 20  # a term that matters at this size
    extra = time_of(odd, TEMPLATE=1) - time_of(even, TEMPLATE=1)
    assert copy_us == pytest.approx(extra, rel=0.25)
    assert mc.prepare(even, H200, tiling(TEMPLATE=1))["stage_elems"][0] == 0
    assert (
        mc.prepare(odd, H200, tiling(TEMPLATE=0))["stage_elems"][0] == 0
    )  # the pointer kernel stages nothing
    # a `t` A is stored M-major: with M = 64 its rows (128 B) need no staging, only B's do
    tn = mc.prepare(Matmul(64, 8191, 8191, layout="tn"), H200, tiling(TEMPLATE=1))
    assert tn["stage_elems"][0] == 8191 * 8191 and tn["stage_copies"][0] == 1


def test_searches_pick_tma_where_it_pays_and_never_where_it_cannot_run():
    import tiler

    for shape in ({"M": 3000, "N": 3000, "K": 3000}, {"M": 4095, "N": 4095, "K": 4095}):  # the second staged
        res = tiler.search(op="matmul", chip="h200", shape=shape, runnable=False)
        assert res.tiling(0)["TEMPLATE"] in ("tma", "persistent")
    res = tiler.search(
        op="matmul", chip="a100", shape={"M": 3000, "N": 3000, "K": 3000}, top=20, runnable=False
    )
    assert {res.tiling(i)["TEMPLATE"] for i in range(20)} == {"pointer"}


def feasible_rows(p, space, rng, n: int = 3000) -> dict:
    """n random tilings of `space`'s whole product that pass every rule for `p` on the H200."""
    grid = space.product(space.names)
    ok = np.logical_and.reduce(
        [np.broadcast_to(m, len(grid["BLOCK_M"])) for m in MODEL.masks(p, H200, grid).values()]
    )
    idx = rng.choice(np.flatnonzero(ok), n, replace=False)
    return {k: v[idx] for k, v in grid.items()}


def test_prefix_bound_stays_a_floor_with_each_template_pinned():
    """prefix_bound over a domain of one template is a floor of that template's completions, and the bound over
    all templates is at most each of those."""
    space = load_space("matmul", "cuda")
    rng = np.random.default_rng(7)
    for shape in ((3000, 3000, 3000), (8192, 8192, 1024), (64, 4096, 4096)):
        p = Matmul(*shape)
        c = feasible_rows(p, space, rng)
        q = MODEL.quick_bound(p, H200, c)
        first = {k: c[k] for k in mc.LEVELS[0]}
        every = MODEL.prefix_bound(p, H200, first, space.domains())
        for t in (0, 1, 2):
            pinned = space.pin({"TEMPLATE": t})
            floor = MODEL.prefix_bound(p, H200, first, pinned.domains())
            rows = c["TEMPLATE"] == t
            assert np.all(floor[rows] <= q[rows] * (1 + 1e-9))
            assert np.all(every <= floor * (1 + 1e-9))


def test_the_triton_view_of_a_template_launches_what_the_runner_launches():
    """The export of a TMA tiling names the TMA kernel, carries TEMPLATE, and the grid the runner launches (one
    program per tile and K slice, or min(SMs, that) for the persistent one); check_triton refuses a wrong grid,
    rows TMA cannot describe, and a GPU without TMA."""
    from tiler.ops.matmul.triton_tma import programs

    p = Matmul(3000, 3000, 3000)
    t = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 4, "num_warps": 4, "GROUP_M": 8,
         "ORDER": "grouped", "SPLIT_K": 2}  # fmt: skip
    for template, grid in (("pointer", [24 * 24, 2]), ("tma", [24 * 24 * 2, 1]), ("persistent", [132, 1])):
        v = views.triton_view(p, H200, {**t, "TEMPLATE": template}, {})
        assert v["grid"] == grid and views.check_triton(v, H200, p) == []
        code = {"pointer": 0, "tma": 1, "persistent": 2}[template]
        assert v["kwargs"].get("TEMPLATE", 0) == code
        if code:
            assert v["kernel"].endswith("triton_tma:_gemm_tma_kernel")
            assert programs(3000, 3000, {**v["kwargs"], "TEMPLATE": code}, 132) == grid[0]
    v = views.triton_view(p, H200, {**t, "TEMPLATE": "persistent"}, {})
    assert any("grid" in b for b in views.check_triton({**v, "grid": [576, 2]}, H200, p))
    odd = Matmul(1111, 2222, 3333)  # rows TMA cannot describe: the runner stages them, the check passes it
    assert (
        views.check_triton(views.triton_view(odd, H200, {**t, "TEMPLATE": "persistent"}, {}), H200, odd) == []
    )
    assert any("Hopper" in b for b in views.check_triton(v, load_chip("a100"), p))


def test_an_export_of_a_template_reads_back_into_the_runner_config():
    """tiling_from_doc keeps TEMPLATE, so `--measure triton` and `python -m ...triton_runner` run the template the
    document names (a document without it runs the pointer kernel)."""
    import tiler
    from tiler.ops.matmul.triton_runner import tiling_from_doc

    res = tiler.search(op="matmul", chip="h200", shape={"M": 3000, "N": 3000, "K": 3000})
    doc = res.document(0)
    *_, config = tiling_from_doc(doc)
    assert config.get("TEMPLATE", 0) == doc["targets"]["triton"]["kwargs"].get("TEMPLATE", 0) != 0
    with pytest.raises(TilerError):
        tiling_from_doc({**doc, "schema": "x"})


def test_tma_templates_store_c_through_a_descriptor_where_the_tile_fits():
    """3000^3: C's rows (6000 B) are 16-byte multiples that Triton cannot prove 16-element aligned. A TMA template
    stores the C tile through a descriptor (bulk copies, measured 200 -> 141 us on the H200) when the tile fits in
    shared memory beside its stages; with 8 stages of 128x256x32 it does not (262 KB > 227 KB): masked scalar
    stores then, and the estimate says so. Split-K's atomic adds never go through the descriptor, and the pointer
    kernel always stores through pointers."""
    from tiler.ops.matmul.triton_tma import tma_c_store

    odd = Matmul(3000, 3000, 3000)
    tile = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8)
    fits, too_deep = tiling(TEMPLATE=2, num_stages=6, **tile), tiling(TEMPLATE=2, num_stages=8, **tile)
    assert mc.prepare(odd, H200, fits)["unal_c"][0] == 0
    assert mc.prepare(odd, H200, too_deep)["unal_c"][0] == 1
    assert mc.prepare(odd, H200, tiling(TEMPLATE=0, num_stages=3, **tile))["unal_c"][0] == 1
    assert mc.prepare(odd, H200, tiling(TEMPLATE=1, num_stages=3, SPLIT_K=2, **tile))["unal_c"][0] == 1
    # the C tile takes shared memory: 64 KB more than the stages alone
    c = tiling(2, TEMPLATE=[2, 2], num_stages=[6, 8], **tile)
    smem = mc.smem_allocated(odd, H200, c)
    assert smem[0] == 6 * (128 + 256) * 32 * 2 + 128 * 256 * 2 and smem[1] == 8 * (128 + 256) * 32 * 2
    assert not tma_c_store(True, 128, 256, 32, 8, 1, 2, 2, int(H200["smem_bytes_per_block"]))
    # the store the descriptor saves is worth microseconds at this size: stages 6 with it beat stages 8 without
    assert time_of(odd, TEMPLATE=2, num_stages=6, **tile) < time_of(odd, TEMPLATE=2, num_stages=8, **tile)
