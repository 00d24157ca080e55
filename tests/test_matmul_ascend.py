"""Behaviour of the Ascend matmul model: directions and rough sizes that a toy model would get wrong."""

from __future__ import annotations

import pytest
from conftest import mm, score

from tiler.search import search


def test_tail_split_balances_one_tile_too_many(b3):
    """21 tiles of 128x256 on 20 cores: re-splitting the lone tail tile cuts the time by a fifth or more."""
    p = mm(896, 768, 4096)  # 7 x 3 = 21 tiles
    off = score(b3, p, tail_split=0)
    auto = score(b3, p, tail_split=1)
    assert off["waves"] == 2 and off["balance"] < 0.6
    assert auto["tail_sub_count"] >= 8 and auto["tail_sub_n"] in (16, 32)
    assert auto["time_us"] < 0.85 * off["time_us"]
    assert auto["balance"] > 0.85


def test_serpentine_raises_l2_hits_when_panels_exceed_l2(b3):
    """16384^3: a tile row of B panels (512 MB) is far beyond L2's share; the snake order reuses the row end."""
    p = mm(16384, 16384, 16384)
    raster = score(b3, p, serpentine=0, swizzle_offset=1)
    snake = score(b3, p, serpentine=1, swizzle_offset=1)
    assert snake["l2_hit_rate"] > raster["l2_hit_rate"] + 0.03
    assert snake["hbm_bytes"] < 0.97 * raster["hbm_bytes"]
    assert snake["time_us"] < raster["time_us"]


def test_serpentine_irrelevant_when_everything_fits_l2(b3):
    """1024^3 fits L2 many times over: the order changes the hit rate by at most a few points."""
    p = mm(1024, 1024, 1024)
    raster = score(b3, p, serpentine=0, swizzle_offset=1)
    snake = score(b3, p, serpentine=1, swizzle_offset=1)
    assert abs(snake["l2_hit_rate"] - raster["l2_hit_rate"]) < 0.05


def test_weight_resident_cuts_traffic_when_b_panel_fits_l1(b3):
    """K=512: a 256-column B panel is 256 KB, fits L1; cores walking a column reuse it instead of reloading."""
    p = mm(8192, 1024, 512)
    sched = dict(swizzle_direction=1, swizzle_offset=1, serpentine=0)
    reload = score(b3, p, weight_resident=0, **sched)
    resident = score(b3, p, weight_resident=1, **sched)
    assert resident["hbm_bytes"] < reload["hbm_bytes"]
    assert resident["l2_bytes"] < 0.7 * reload["l2_bytes"]  # GM->L1 traffic: B is about half of it
    # with the fitted 910B3 (L2 at its ports' sum, write-backs on their own channel) B's reloads are L2 hits that
    # no longer bind: both tiles are compute + serial write-out bound (two 128x256 fp32 accumulators do not fit
    # L0C), so residency saves traffic and never costs time
    assert resident["time_us"] <= reload["time_us"]


def test_double_buffering_beats_single_when_mte2_and_mac_are_close(b3):
    """4096^3 with 128x256x64: MTE2 and MAC within 20% of each other, so overlapping them nearly halves time."""
    p = mm(4096, 4096, 4096)
    one = score(b3, p, l1_stages=1, preload=0)
    two = score(b3, p, l1_stages=2, preload=0)
    assert 0.8 < two["mte2_us"] / two["mac_us"] < 1.25
    assert two["time_us"] < 0.7 * one["time_us"]


def test_misaligned_rows_lower_gm_bandwidth(b3):
    """N=4097 fp16: B's row stride (8194 B) is not even 32-B aligned, so MTE2 moves bytes far slower."""
    aligned = score(b3, mm(4096, 4096, 4096))
    odd = score(b3, mm(4096, 4097, 4096))
    bw_aligned = aligned["l2_bytes"] / aligned["mte2_us"]
    bw_odd = odd["l2_bytes"] / odd["mte2_us"]
    assert bw_odd < 0.6 * bw_aligned
    assert odd["time_us"] > 1.3 * aligned["time_us"]


def test_tiny_base_blocks_are_scalar_or_latency_bound(b3):
    """16x16x16 blocks: one cube cycle per MMAD, but every instruction costs scalar issue and a GM latency."""
    e = score(b3, mm(4096, 4096, 4096), base_m=16, base_n=16, base_k=16, step_ka=1, step_kb=1)
    assert e["bound"] in ("scalar", "latency")
    assert e["time_us"] > 20 * score(b3, mm(4096, 4096, 4096))["time_us"]


def test_split_k_wins_for_deep_k_small_mn(b3, ascend_space):
    """M=N=128, K=131072: one output tile, 20 cores; only splitting K puts the other cores to work (1.8x faster
    with the fitted launch head, which split-K's cast kernel pays a second time)."""
    res = search(mm(128, 128, 131072), b3, ascend_space)
    assert res.tiling(0)["split_k"] >= 4
    no_split = search(mm(128, 128, 131072), b3, ascend_space.pin({"split_k": 1}))
    assert res.row(0)["time_us"] < 0.6 * no_split.row(0)["time_us"]


def test_cube_bound_large_tiles_near_peak(b3):
    """Big square fp16 GEMM with the CATLASS default: within 2x of the roofline, MAC busy most of the time."""
    e = score(b3, mm(8192, 8192, 8192))
    assert e["roofline_us"] <= e["time_us"] < 2 * e["roofline_us"]
    assert e["mac_us"] > 0.6 * e["time_us"]


def test_int8_doubles_cube_rate(b3):
    """int8 runs 8192 MACs/cycle against fp16's 4096: cube time halves for the same tiling."""
    fp16 = score(b3, mm(4096, 4096, 4096))
    int8 = score(b3, mm(4096, 4096, 4096, "int8"), base_k=64)
    assert 0.4 < int8["mac_us"] / fp16["mac_us"] < 0.6


def test_more_cores_finish_faster(b3):
    """910B1 (24 cores, 1.85 GHz) beats 910B3 (20 cores, 1.8 GHz) on a large GEMM by roughly the core ratio."""
    from tiler.hardware import load_chip

    b1 = load_chip("ascend910b1")
    p = mm(8192, 8192, 8192)
    ratio = score(b3, p)["time_us"] / score(b1, p)["time_us"]
    assert 1.05 < ratio < 1.35


def test_preload_overlaps_next_tile_load_with_compute_when_mte2_bound():
    """AscendC's MTE2-preload case (128x24576x512 fp16, MDL, each tile one L1 chunk, 8 tiles a core): the tile is
    MTE2-bound (load longer than compute), so a model that only hides the next load in idle MTE2 time predicts no
    gain. The real preload loads the next tile's chunk into the free L1 buffer while this tile computes and writes
    out, removing the load/compute bubble of every tile but a core's last: published 1.083, modelled ~1.18. A core
    with a single tile has nothing to preload: no gain."""
    from tiler.hardware import load_chip

    b2 = load_chip("ascend910b2")
    knobs = dict(
        base_m=128, base_n=128, base_k=64, step_ka=8, step_kb=8, l1_stages=2, multi_load=1, core_split=1
    )
    p = mm(128, 24576, 512)
    off, on = score(b2, p, preload=0, **knobs), score(b2, p, preload=1, **knobs)
    assert off["bound"] == on["bound"] == "mte2" and off["mte2_us"] > 2 * off["mac_us"]
    assert 1.05 < off["time_us"] / on["time_us"] < 1.35
    one = mm(128, 128 * 20, 512)  # 20 tiles on 24 cores: one tile each
    once = score(b2, one, preload=1, **knobs)["time_us"]
    assert once == pytest.approx(score(b2, one, preload=0, **knobs)["time_us"], rel=1e-6)  # float32 sums only


def test_preload_never_adds_time_for_one_edge_tile_per_core(b3):
    """20x6144x16384 with 32x320 tiles: every core runs one edge tile (20 of 32 rows). The drain preload cannot
    hide on a core's last tile is charged at that core's own size, not the interior tile's, so preload (which
    resolve() always maximises) costs nothing here rather than a little."""
    p = mm(20, 6144, 16384)
    knobs = dict(base_m=32, base_n=320, base_k=32, step_ka=4, step_kb=4, l1_stages=2)
    assert score(b3, p, preload=1, **knobs)["time_us"] <= score(b3, p, preload=0, **knobs)["time_us"]


def test_core_time_leaves_out_the_launch_head_and_split_k_cast(b3):
    """A 16x16x1024 GEMV-like product: splitting K over 2 cores halves each cube core's work (msprof's aic_time,
    `core_us`, falls by about 40 %) while the kernel as a whole gets slower: the second core's launch head and
    split-K's zero and cast pass on the vector cores cost more than the halved K saves."""
    one = score(b3, mm(16, 16, 1024), split_k=1, base_m=16, base_n=16, base_k=64)
    two = score(b3, mm(16, 16, 1024), split_k=2, base_m=16, base_n=16, base_k=64)
    assert two["core_us"] < 0.7 * one["core_us"]
    assert two["time_us"] > one["time_us"]
    assert one["time_us"] - one["core_us"] < two["time_us"] - two["core_us"]
    assert two["time_us"] - two["core_us"] >= two["vec_us"] > 0
