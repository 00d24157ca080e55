"""The H200 flash-attention model (tiler/ops/flash_attention/cuda.py): the physical effects it prices, each checked
for direction and rough size against the shipped profile's fitted constants and the measured tables
(bench/data/h200_fa_cal.csv, h200_fa_measured.csv)."""

from __future__ import annotations

import heapq
from pathlib import Path

import numpy as np
import pytest

from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.flash_attention import cuda as fa
from tiler.problem import parse_problem

ROOT = Path(__file__).resolve().parent.parent
KNOBS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER")
FIELDS = ("B", "heads", "kv_heads", "S1", "S2", "D", "causal")


@pytest.fixture(scope="module")
def chip():
    return load_chip("h200")


def times(chip, shape, *tilings) -> np.ndarray:
    p = parse_problem("flash_attention", dict(zip(FIELDS, shape, strict=True)))
    c = {k: np.array([t[i] for t in tilings]) for i, k in enumerate(KNOBS)}
    return get_operator("flash_attention", "cuda").estimate(p, chip, c)


def test_one_warpgroup_alone_runs_its_mmas_and_softmax_back_to_back():
    """The SM as a closed network of warpgroups: one alone takes its MMAs + its softmax + its delay; two overlap
    one's MMAs with the other's softmax (less than twice that, more than twice the busier unit); many saturate
    the busier unit and never run faster than it."""
    m, a, z = np.array([1000.0]), np.array([600.0]), np.array([100.0])
    lv = fa._mva_levels(np.array([1.0]), np.array([16.0]), [m, a], z, 1.0)[:, 0]
    assert lv[0] == pytest.approx(1700.0)
    assert 2000.0 < lv[1] < 0.85 * 2 * 1700.0
    assert all(lv[r - 1] >= r * 1000.0 for r in range(1, 17))
    assert lv[15] == pytest.approx(16 * 1000.0, rel=0.02)  # 16 warpgroups keep the tensor cores busy
    # two warpgroups of one program count as two customers: r programs of 2 use the level of 2r warpgroups
    two = fa._mva_levels(np.array([2.0]), np.array([8.0]), [m, a], z, 1.0)[:, 0]
    assert two[0] == pytest.approx(lv[1]) and two[3] == pytest.approx(lv[7])


def test_one_program_of_two_warpgroups_per_sm_loses_to_independent_programs(chip):
    """The known weakness of the previous model: BLOCK_M 128, BLOCK_N 128 on 8 warps (one program per SM, two
    warpgroups meeting at a barrier every step) rated best. Measured on the H200 it is 1.25x slower than 64x64 on
    4 warps at D = 64 (8x16x16x2048: four independent programs per SM) and 1.12x at D = 128 (1x64x8x2048: two):
    one program cannot overlap its warpgroups' barrier waits with another's work."""
    d64 = times(chip, (8, 16, 16, 2048, 2048, 64, 0), (64, 64, 3, 4, 0), (128, 128, 3, 8, 0))
    assert list(d64["occupancy"]) == [4, 1]
    assert 1.1 < d64["time_us"][1] / d64["time_us"][0] < 1.5
    d128 = times(chip, (1, 64, 8, 2048, 2048, 128, 0), (64, 64, 3, 4, 0), (128, 128, 3, 8, 0))
    assert list(d128["occupancy"]) == [2, 1]
    assert 1.02 < d128["time_us"][1] / d128["time_us"][0] < 1.3


def test_warpgroups_of_128_rows_wait_one_wgmma_not_their_whole_qk(chip):
    """The barrier skew: the tensor core takes the warpgroups' wgmma instructions (64 rows each) in turn, so the last
    of two warpgroups of 128 rows starts its softmax one 64-row QK^T late, not its whole 128-row QK^T. Measured on the
    H200 (bench/data/h200_fa_wide_a.csv, user_autotune_attention_configs.csv), 256-row tiles on 8 warps ran 0.72-0.79
    of the time the whole-QK^T skew predicted. So programs of two 128-row warpgroups (256x32, 8 warps, one program
    an SM) take at most about the time of programs of one 128-row warpgroup (128x32, 4 warps, two an SM) on the same
    problem: under 1.12x (the whole-QK^T skew gave 1.18x). Warpgroups of 64 rows (every 8-warp tiling the fit saw) keep the
    skew they had."""
    shape = (2, 8, 8, 4096, 4096, 128, 0)
    t = times(chip, shape, (256, 32, 3, 8, 0), (128, 32, 3, 4, 0), (128, 32, 3, 8, 0))
    assert list(t["occupancy"]) == [1, 2, 2]
    assert t["time_us"][0] < 1.12 * t["time_us"][1]


def test_two_stages_leave_the_kv_latency_exposed(chip):
    """Little's law on the K/V stream: with num_stages - 1 blocks in flight, a block arrives one L2 latency plus
    the resident programs' transfers after it was asked for. On the decode shape (load bound) one block in flight
    (2 stages) is measured 1.2x slower than two (3 stages) at BLOCK_N 32."""
    t = times(chip, (16, 32, 8, 16, 8192, 128, 1), (16, 32, 2, 4, 0), (16, 32, 3, 4, 0))
    assert t["occupancy"][0] == t["occupancy"][1]
    assert 1.05 < t["time_us"][0] / t["time_us"][1] < 1.4


def test_programs_left_alone_on_their_sm_run_faster(chip):
    """An SM left with one program (a grid of one wave, or the tail of a longer one) gives it the tensor and
    CUDA cores to itself: one program per SM (132) takes well under the time of two per SM (264), though more
    than half of it."""
    one = times(chip, (132, 1, 1, 64, 4096, 128, 0), (64, 64, 3, 4, 0))
    two = times(chip, (264, 1, 1, 64, 4096, 128, 0), (64, 64, 3, 4, 0))
    assert one["occupancy"][0] == two["occupancy"][0] == 2
    assert 0.5 * two["time_us"][0] < one["time_us"][0] < 0.8 * two["time_us"][0]


def test_heavy_first_helps_a_causal_grid_by_its_measured_share(chip):
    """Causal imbalance with wave quantisation: launching the heaviest query blocks first (ORDER 1) saves 7% on
    2x32x8x2048 measured (64x64, 3 stages, 4 warps), 10% on 1x32x8x4096 (a fit shape)."""
    for shape, measured in (((2, 32, 8, 2048, 2048, 128, 1), 0.928), ((1, 32, 8, 4096, 4096, 128, 1), 0.898)):
        t = times(chip, shape, (64, 64, 3, 4, 0), (64, 64, 3, 4, 1))["time_us"]
        assert t[1] / t[0] == pytest.approx(measured, abs=0.05)


def test_deal_is_greedy_list_scheduling():
    """Programs go to the slot that frees first, in launch order: deal() equals a heap, job by job, on causal
    grids (light to heavy and heavy first) and on random lengths."""
    rng = np.random.default_rng(0)
    grids = [
        np.tile(np.arange(1.0, 65.0), 24),
        np.repeat(np.arange(64.0, 0.0, -1.0), 24),
        rng.integers(1, 50, 999),
    ]
    for jobs in grids:
        jobs = np.asarray(jobs, dtype=np.float64)
        heap = [(0.0, s) for s in range(100)]
        free = np.zeros(100)
        for d in jobs:
            t, s = heapq.heappop(heap)
            free[s] = t + d
            heapq.heappush(heap, (t + d, s))
        count, got = fa.deal(jobs, 100)
        assert count.sum() == jobs.size
        assert np.allclose(np.sort(got), np.sort(free))


def test_occupancy_and_spills_are_the_compilers():
    """Registers, spills and shared memory of a compiled tiling are Triton's own (compiled.py): at D = 64 the
    compiler gives 128x64 on 8 warps 124 registers, two programs per SM (the least-squares estimate said 135:
    one); 128x64 on 4 warps at D = 128 spills 24 words with 2 stages."""
    chip = load_chip("h200")
    p = parse_problem("flash_attention", dict(zip(FIELDS, (1, 8, 8, 1024, 1024, 64, 0), strict=True)))
    c = {k: np.array([v]) for k, v in zip(KNOBS, (128, 64, 3, 8, 0), strict=True)}
    regs, spill, smem = fa.compiled(p, chip, c)
    assert (regs[0], spill[0], smem[0]) == (124, 0, 65536)
    assert fa.occupancy(p, chip, c)[0] == 2
    p128 = parse_problem("flash_attention", dict(zip(FIELDS, (1, 8, 8, 1024, 1024, 128, 0), strict=True)))
    c = {k: np.array([v]) for k, v in zip(KNOBS, (128, 64, 2, 4, 0), strict=True)}
    assert fa.compiled(p128, chip, c)[1][0] == 24
    # a tiling the compiler could not fit is infeasible
    c = {k: np.array([v]) for k, v in zip(KNOBS, (128, 128, 4, 8, 0), strict=True)}
    op = get_operator("flash_attention", "cuda")
    assert not op.feasible(p128, chip, c)["smem"][0]


def test_the_compiled_table_is_the_measured_csv():
    """compiled.py is bench/data/h200_fa_registers.csv, row for row."""
    import pandas as pd

    from tiler.ops.flash_attention.compiled import COMPILED

    df = pd.read_csv(ROOT / "tests" / "data" / "h200_fa_registers.csv")
    assert len(df) == len(COMPILED)
    for r in df.itertuples():
        got = COMPILED[(r.D, r.BLOCK_M, r.BLOCK_N, r.num_stages, r.num_warps)]
        if r.status == "ok":
            assert got == (int(r.n_regs), int(r.n_spills), int(r.shared_bytes))
        else:
            assert got is None


def _measured_best(shape: tuple, loads: int) -> tuple:
    """The fastest tiling measured at `loads` on `shape` in the fa_tma run (tests/data/h200_fa_tma.csv)."""
    import pandas as pd

    d = pd.read_csv(ROOT / "tests" / "data" / "h200_fa_tma.csv")
    s = d[(d[list(FIELDS)] == pd.Series(shape, index=list(FIELDS))).all(axis=1) & (d.LOADS == loads)]
    return tuple(int(v) for v in s.loc[s.ms.idxmin(), list(KNOBS)])


def test_tma_loads_win_a_long_causal_prefill_and_lose_many_short_programs(chip):
    """LOADS 1 (K/V through TMA descriptors) on the H200, in the measured direction: on 1x32/8x8192 causal its
    programs are long (up to 128 steps) and the fewer registers pay (measured 1.086x faster, best of each); on
    16x12/12x512x512x64 there are many programs of 8 steps and each pays the descriptors' set-up (measured 0.834x).
    Same tiling at both LOADS, each shape's measured best at LOADS 1 and LOADS 0 respectively."""
    long_shape, short_shape = (1, 32, 8, 8192, 8192, 128, 1), (16, 12, 12, 512, 512, 64, 0)
    for shape, tiling, faster in ((long_shape, _measured_best(long_shape, 1), 1), (short_shape, _measured_best(short_shape, 0), 0)):  # fmt: skip
        p = parse_problem("flash_attention", dict(zip(FIELDS, shape, strict=True)))
        c = {k: np.array([v, v]) for k, v in zip(KNOBS, tiling, strict=True)}
        c["LOADS"] = np.array([0, 1])
        t = get_operator("flash_attention", "cuda").estimate(p, chip, c)["time_us"]
        assert t[faster] < t[1 - faster], (shape, tiling, t)


def test_tma_loads_save_the_kv_address_registers(chip):
    """LOADS 1 needs no per-thread K/V addresses: compiled() lowers the register demand by _REG_TMA_SAVED per K/V
    element per thread, within a median 12 registers of what Triton gave the tilings of the fa_tma run
    that compiled under 255 at LOADS 1; LOADS 0 keeps the compiler's table, and an absent LOADS is 0."""
    import pandas as pd

    d = pd.read_csv(ROOT / "tests" / "data" / "h200_fa_tma.csv")
    keys = ["D", "BLOCK_M", "BLOCK_N", "num_stages", "num_warps"]
    one = d[(d.LOADS == 1) & (d.n_regs < 255)].drop_duplicates(keys)
    errs = []
    for r in one.itertuples():
        p = parse_problem(
            "flash_attention", dict(B=1, heads=8, kv_heads=8, S1=1024, S2=1024, D=r.D, causal=0)
        )
        c = {k: np.array([getattr(r, k)] * 2) for k in keys[1:]} | {"ORDER": np.zeros(2, dtype=int)}
        base = fa.compiled(p, chip, c)
        regs, spill, smem = fa.compiled(p, chip, c | {"LOADS": np.array([0, 1])})
        assert (regs[0], spill[0], smem[0]) == (base[0][0], base[1][0], base[2][0])
        assert regs[1] + spill[1] < regs[0] + spill[0] and smem[1] == smem[0] + fa.TMA_SMEM_BYTES
        errs.append(abs(regs[1] - r.n_regs))
    assert len(errs) >= 30 and np.median(errs) <= 12


def test_tma_loads_are_infeasible_without_tma():
    """A chip before Hopper (the A100: mma_version 2, no TMA) cannot build tensor descriptors: LOADS 1 fails the
    `tma` rule there, and a search with LOADS pinned to tma says so; the H200 takes both."""
    p = parse_problem("flash_attention", dict(zip(FIELDS, (1, 32, 8, 1024, 1024, 128, 1), strict=True)))
    c = {k: np.array([v, v]) for k, v in zip(KNOBS, (64, 64, 3, 4, 1), strict=True)} | {
        "LOADS": np.array([0, 1])
    }
    op = get_operator("flash_attention", "cuda")
    assert op.feasible(p, load_chip("a100"), c)["tma"].tolist() == [True, False]
    assert op.feasible(p, load_chip("h200"), c)["tma"].tolist() == [True, True]
    import tiler.api as api
    from tiler.errors import TilerError

    with pytest.raises(TilerError, match="rule 'tma'.*a chip with TMA"):
        api.search(op="flash_attention", chip="a100", shape="B=1,heads=32,kv_heads=8,S1=1024,S2=1024,D=128,causal=1",
                   fix="LOADS=1")  # fmt: skip


def test_a_tma_export_carries_loads_and_passes_check(tmp_path, capsys):
    """search --export with LOADS 1 writes LOADS 1 into the triton view's kwargs (what the runner and the
    kernel read); `tiler check` passes it and refuses the view without it. A pointer export's view has no LOADS
    (the kernel's default 0: the view written before the knob) and passes."""
    import json

    from tiler.cli import main

    out = tmp_path / "fa.json"
    shape = "B=1,heads=32,kv_heads=8,S1=8192,S2=8192,D=128,causal=1"
    args = ["search", "--op", "flash_attention", "--chip", "h200", "--shape", shape, "--fix", "LOADS=1"]
    assert main([*args, "--export", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["targets"]["triton"]["kwargs"]["LOADS"] == 1
    assert main(["check", str(out)]) == 0
    del doc["targets"]["triton"]["kwargs"]["LOADS"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", str(bad)]) == 1
    assert "kwargs.LOADS" in capsys.readouterr().out
    args[-1] = "LOADS=0"
    assert main([*args, "--export", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["tiling"]["LOADS"] == 0 and "LOADS" not in doc["targets"]["triton"]["kwargs"]
    assert main(["check", str(out)]) == 0


def test_an_export_from_before_a_knob_checks_as_the_kernel_runs_it(tmp_path, capsys):
    """A document exported before the space had LOADS (and ORDER) has neither in its tiling: `tiler check` reads
    each as the value a kernel without the knob runs with (ABSENT_DEFAULTS: pointer loads, the natural grid) and
    passes it where its view is that kernel's; a knob with no such default (BLOCK_M) is still a finding."""
    import json

    from tiler.cli import main

    out = tmp_path / "fa.json"
    shape = "B=1,heads=16,kv_heads=4,S1=2048,S2=2048,D=64,causal=0"
    args = ["search", "--op", "flash_attention", "--chip", "h200", "--shape", shape]
    assert main([*args, "--fix", "LOADS=0", "--fix", "ORDER=natural", "--export", str(out)]) == 0
    doc = json.loads(out.read_text())
    for part in (doc, *doc.get("runnable", {}).values()):
        if isinstance(part, dict) and isinstance(part.get("tiling"), dict):
            part["tiling"].pop("LOADS", None)
            part["tiling"].pop("ORDER", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", str(old)]) == 0, capsys.readouterr().out
    del doc["tiling"]["BLOCK_M"]
    old.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", str(old)]) == 1
    assert "no 'BLOCK_M'" in capsys.readouterr().out
