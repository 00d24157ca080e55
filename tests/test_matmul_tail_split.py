"""TAIL_SPLIT: split-K on the last wave only, on the persistent template (tiler/ops/matmul/triton_tma.py).

The persistent grid runs whole waves of tiles, one program an SM; the last, partial wave leaves SMs idle. Split
into K slices, its tiles fill them, but each slice stores an fp32 workspace tile and a second kernel adds them into
C. Measured on the H200 (bench/data/h200_matmul_tail_flatten.csv, `python -m bench.gpu.matmul_tail report`): the
split pays where the tail is small and K long (1536x1536x6144 in 64x128 tiles: 288 tiles, a tail of 24; 1.15x at 2
slices, 1.20x at 4) and costs where the tail is nearly a wave or K short (777x7777x777: 0.81x at 2, 0.50x at 8;
12288^2x512: 0.96x, 0.79x). A model that only sees the idle SMs calls every split faster; one without the
workspace and the second kernel cannot see the loss.
"""

from __future__ import annotations

import numpy as np
from test_matmul_templates import feasible_rows

from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul import Matmul, views
from tiler.ops.matmul import cuda as mc
from tiler.space import load_space

MODEL = get_operator("matmul", "cuda")
H200 = load_chip("h200")


def rows(splits, **kw) -> dict:
    """The persistent template at each TAIL_SPLIT of `splits`, the rest of the tiling from `kw`."""
    base = dict(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_stages=3, num_warps=8, GROUP_M=1, ORDER=0, SPLIT_K=1
    )
    base |= kw
    n = len(splits)
    c = {k: np.full(n, v, dtype=np.int64) for k, v in base.items()}
    return c | {"TEMPLATE": np.full(n, 2, dtype=np.int64), "TAIL_SPLIT": np.asarray(splits, dtype=np.int64)}


def speedups(shape, **kw) -> np.ndarray:
    """Predicted time at TAIL_SPLIT 1 over the time at 2, 4 and 8."""
    t = MODEL.estimate(Matmul(*shape), H200, rows([1, 2, 4, 8], **kw))["time_us"]
    return t[0] / t[1:]


def test_a_split_tail_pays_where_the_tail_is_small_and_k_long_and_costs_where_it_is_not():
    """The directions and rough sizes measured (module docstring): gains of 10-25% at 2 and 4 slices on
    1536x1536x6144 and 2049x2049x8191, losses of 15% or more at 2 slices on 777x7777x777 and growing with the
    slices, a loss on 12288^2x512 whose 120-tile tail is nearly a wave."""
    s = speedups((1536, 1536, 6144), BLOCK_M=64, BLOCK_N=128, num_stages=4, num_warps=4)
    assert 1.05 < s[0] < 1.3 and 1.05 < s[1] < 1.35
    s = speedups((2049, 2049, 8191), BLOCK_M=128, BLOCK_N=128, num_stages=4, num_warps=8)
    assert 1.05 < s[0] < 1.3 and 1.05 < s[1] < 1.3
    s = speedups((777, 7777, 777), BLOCK_K=32, num_stages=5)
    assert s[0] < 0.9 and s[2] < s[1] < s[0]
    s = speedups((12288, 12288, 512))
    assert np.all(s < 1.0) and s[2] < 0.9


def test_the_split_costs_the_workspace_and_a_second_kernel():
    """Every tile in the one partial wave (32 tiles of 64x128, K = 32768): four slices keep 128 SMs busy instead of
    32, the run is about 3-4x shorter. The price is in the record: the second kernel (its launch, the workspace
    read and C written at the HBM rate) on the `alu` pipe, as split-K's extra kernels are, and each slice's fp32
    workspace tile (twice the bytes of the fp16 tile an unsplit program stores) on the `store` pipe."""
    p = Matmul(512, 512, 32768)
    est = MODEL.estimate(p, H200, rows([1, 4], BLOCK_M=64, BLOCK_N=128, num_stages=6, num_warps=4))
    t = est["time_us"]
    assert 2.5 < t[0] / t[1] < 4.2
    e = MODEL.constants(H200)
    second = 32 * (4 * 64 * 128 * 4 + 64 * 128 * 2) / (H200["hbm_gbps"] * 1e3 * e["hbm_efficiency"])
    assert est["alu_us"][0] == 0 and np.isclose(est["alu_us"][1], e["extra_kernel_us"] + second)
    assert est["store_us"][1] > 1.5 * est["store_us"][0] > 0


def test_the_rule_keeps_it_to_the_persistent_template_without_split_k():
    p = Matmul(3000, 3000, 3000)
    c = rows([2, 2, 2, 1])
    c["TEMPLATE"] = np.array([2, 1, 2, 0])
    c["SPLIT_K"] = np.array([1, 1, 2, 2])
    assert list(MODEL.feasible(p, H200, c, ["tail_split"])["tail_split"]) == [True, False, False, True]


def test_a_split_without_a_partial_wave_is_a_duplicate():
    """264 tiles of 128x128 on 132 SMs: two whole waves, nothing to split (the search keeps TAIL_SPLIT 1)."""
    c = rows([1, 2, 4], BLOCK_M=128, BLOCK_N=128)
    assert list(MODEL.dominated(Matmul(128 * 12, 128 * 22, 4096), H200, c)) == [False, True, True]
    assert list(MODEL.dominated(Matmul(3000, 3000, 3000), H200, c)) == [False, False, False]
    # a batched problem (the kernel splits no batch) runs the same at any split; with 1 out of the domain (a pinned
    # split) nothing is dropped: there is no twin left to keep
    assert list(MODEL.dominated(Matmul(3000, 3000, 3000, batch=2), H200, c)) == [False, True, True]
    pinned = {"TAIL_SPLIT": (2,)}
    assert not MODEL.dominated(Matmul(128 * 12, 128 * 22, 4096), H200, c, pinned).any()


def test_prefix_bound_stays_a_floor_with_each_split_pinned():
    """prefix_bound over a domain of one TAIL_SPLIT is a floor of that split's completions, and the bound over the
    whole domain is at most each of those (the branch and bound stays exact with the knob)."""
    space = load_space("matmul", "cuda")
    rng = np.random.default_rng(11)
    for shape in ((3000, 3000, 3000), (512, 512, 32768), (1536, 1536, 6144), (777, 7777, 777)):
        p = Matmul(*shape)
        c = feasible_rows(p, space.pin({"TEMPLATE": 2}), rng)
        q = MODEL.quick_bound(p, H200, c)
        first = {k: c[k] for k in mc.LEVELS[0]}
        every = MODEL.prefix_bound(p, H200, first, space.domains())
        for s in (1, 2, 4):
            floor = MODEL.prefix_bound(p, H200, first, space.pin({"TEMPLATE": 2, "TAIL_SPLIT": s}).domains())
            mine = c["TAIL_SPLIT"] == s
            assert mine.any()
            assert np.all(floor[mine] <= q[mine] * (1 + 1e-9))
            assert np.all(every <= floor * (1 + 1e-9))


def test_the_triton_view_carries_the_split_and_launches_the_work_items():
    """The export names TAIL_SPLIT (absent at 1) and the grid the launcher starts: min(SMs, whole-wave tiles +
    tail tiles x slices); check_triton refuses a split on another template and a wrong grid."""
    t = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "num_stages": 6, "num_warps": 4, "GROUP_M": 8,
         "ORDER": "grouped", "SPLIT_K": 1, "TEMPLATE": "persistent"}  # fmt: skip
    p = Matmul(512, 512, 32768)  # 32 tiles, all in the tail: 4 slices each, 128 programs
    v = views.triton_view(p, H200, {**t, "TAIL_SPLIT": 4}, {})
    assert v["kwargs"]["TAIL_SPLIT"] == 4 and v["grid"] == [128, 1] and views.check_triton(v, H200, p) == []
    assert "TAIL_SPLIT" not in views.triton_view(p, H200, {**t, "TAIL_SPLIT": 1}, {})["kwargs"]
    bad = {**v, "kwargs": {**v["kwargs"], "TEMPLATE": 1}}
    assert any("TAIL_SPLIT" in b for b in views.check_triton(bad, H200, p))
    assert any("grid" in b for b in views.check_triton({**v, "grid": [32, 1]}, H200, p))


def test_the_record_describes_the_split_grid_the_view_launches():
    """32 tiles of 64x128 (512x512x32768), all in the one partial wave: at 4 slices the grid runs 128 programs of
    one slice each (then `_tail_store_kernel`). The record's launch fields say so (work items, SMs used, the last
    wave's SMs, waves, the balance of K steps), the export's launch gives the view's block count and names the
    second kernel, the issue pipe counts a slice's K steps, not the whole tile's, and the advice does not offer
    SPLIT_K for SMs the split already fills."""
    p = Matmul(512, 512, 32768)
    c = rows([1, 4], BLOCK_M=64, BLOCK_N=128, num_stages=6, num_warps=4)
    est = MODEL.estimate(p, H200, c)
    for k in ("tiles", "programs", "cores_used", "tail_sms"):
        assert list(est[k]) == [32, 128], k
    assert list(est["waves"]) == [1, 1]
    steps = 32768 // 64
    assert np.isclose(est["balance"][0], 32 / 132)
    assert np.isclose(est["balance"][1], 32 * steps / (132 * steps / 4))  # mean over the busiest SM's steps
    prog = MODEL.constants(H200)["program_overhead_cycles"] / H200.clock_hz * 1e6
    assert np.isclose(est["issue_us"][0] - prog, 4 * (est["issue_us"][1] - prog))
    space = load_space("matmul", "cuda")
    tiling = space.decode(c, 1)
    row = {k: v[1] for k, v in est.items()}
    launch = MODEL.launch(p, tiling, row)
    assert launch["block_dim"] == 128 == views.triton_view(p, H200, tiling, row)["grid"][0]
    assert launch["tiles"] == 128 and launch["waves"] == 1
    assert "_tail_store_kernel" in launch["schedule"] and "32" in launch["schedule"]
    unsplit = MODEL.launch(p, space.decode(c, 0), {k: v[0] for k, v in est.items()})
    assert unsplit["schedule"] == "GROUP_M=1, ORDER=row" and unsplit["block_dim"] == 32
    text = " ".join(MODEL.advice(p, H200, c, est, 1))
    assert "SPLIT_K" not in text
    assert "SPLIT_K" in " ".join(MODEL.advice(p, H200, c, est, 0))  # unsplit: 32 programs, SPLIT_K would fill


def test_the_record_and_the_view_count_the_same_work_items():
    """One source of the grid: on random persistent tilings at every split, the record's SMs used are the view's
    grid (min(SMs, work items)) and its tiles the work items the launcher deals (triton_tma.work_items)."""
    from tiler.ops.matmul.triton_tma import work_items

    space = load_space("matmul", "cuda")
    rng = np.random.default_rng(5)
    for shape in ((512, 512, 32768), (1536, 1536, 6144), (777, 7777, 777), (3000, 1000, 2000)):
        p = Matmul(*shape)
        c = feasible_rows(p, space.pin({"TEMPLATE": 2}), rng, 60)
        est = MODEL.estimate(p, H200, c)
        assert (c["TAIL_SPLIT"] > 1).any()
        assert np.array_equal(est["tiles"], work_items(p.M, p.N, c, H200.cores))
        grid = [views.triton_view(p, H200, space.decode(c, i), {})["grid"][0] for i in range(60)]
        assert list(est["cores_used"]) == grid


def test_the_tail_tiles_of_c_are_written_once():
    """The tail tiles of C are written by the second kernel, not by the GEMM: where the HBM floor sets the time
    (the compulsory bytes made the largest term), a split adds the workspace read and the second kernel's launch
    over the unsplit tiling, and the C it writes only moves from one kernel to the other."""
    p = Matmul(512, 512, 32768)
    c = rows([1, 4], BLOCK_M=64, BLOCK_N=128, num_stages=6, num_warps=4)
    g = mc.prepare(p, H200, c)
    g["compulsory"] = g["compulsory"] * 0 + 1e12  # the HBM floor binds on both rows
    e = MODEL.constants(H200)
    t = mc.timing(g, H200, e)["time_us"]
    bw = H200["hbm_gbps"] * 1e3 * e["hbm_efficiency"]  # bytes per us
    workspace = 32 * 4 * 64 * 128 * 4
    assert np.isclose(t[1] - t[0], workspace / bw + e["extra_kernel_us"])


def test_the_advice_weighs_a_tail_split_where_the_space_has_it():
    """The what-ifs flip TAIL_SPLIT as they flip SPLIT_K: on the unsplit tiling of 512x512x32768 (32 tiles on 132
    SMs) the split to 4 slices is the predicted gain; a table without the knob (a kernel from before the
    templates) is not offered it."""
    from tiler.advice import advice

    space = load_space("matmul", "cuda")
    p = Matmul(512, 512, 32768)
    c = rows([1], BLOCK_M=64, BLOCK_N=128, num_stages=6, num_warps=4)
    lines = advice(p, H200, space, c, MODEL.estimate(p, H200, c))
    assert any(line.startswith("multi-core") and "TAIL_SPLIT=4" in line for line in lines), lines
    plain = {k: v for k, v in c.items() if k != "TAIL_SPLIT"}
    assert not any(
        "TAIL_SPLIT" in line for line in advice(p, H200, space, plain, MODEL.estimate(p, H200, plain))
    )
