"""Issue 28 on a GPU: a user's tutorial-style Triton GEMM (tests/gpu_user_gemm.py) tuned with the model's configs.

* everywhere: the user's space and the bench's shapes (76 configs; no bench shape in any bench/data CSV);
* on an NVIDIA GPU (skipped without torch, triton or a device): the kernel matches torch; `tiler search --emit triton
  --top 8 --space <the user's TOML>` output, pasted into the kernel's `@triton.autotune`, runs and matches torch
  (skipped, saying so, where the CLI has no `--space`); the pruner of `tiler.triton` inside `@triton.autotune`; the
  runners' vendor timings (cuBLAS, torch conv2d in both formats, SDPA) beside a tiling's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import gpu_user_gemm as g
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    import user_autotune

    return user_autotune


# --- everywhere -----------------------------------------------------------------------------------------------


def test_user_space_and_its_toml():
    import tomllib

    pts = g.space_points()
    assert len(pts) == 76 >= 64
    assert len({g.config_label(p) for p in pts}) == len(pts)
    for p in pts:
        assert (p["BLOCK_SIZE_M"] + p["BLOCK_SIZE_N"]) * p["BLOCK_SIZE_K"] * 2 * p["num_stages"] <= 196608
    assert tomllib.loads(g.user_space_toml()) == g.user_space()
    assert set(g.user_space()["key_map"]) == set(g.PARAMS)


def test_bench_shapes_are_not_in_bench_data():
    ua = _bench()
    assert len(ua.SHAPES) >= 12
    seen = ua.fitted_shapes()
    assert len(seen) > 100  # the measured tables were read
    assert not [s for s in ua.SHAPES if s[1:] in seen]
    assert any(k % 64 for _, _, _, k in ua.SHAPES) and any(n % 16 for _, _, n, _ in ua.SHAPES)


# --- on an NVIDIA GPU -----------------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K", [(16, 1280, 8192), (1000, 999, 1001), (257, 50257, 96), (512, 1000, 720)])
def test_user_kernel_matches_torch(torch, M, N, K):
    pts = g.space_points()
    for p in pts[:: len(pts) // 5] + [pts[-1]]:
        assert g.check(M, N, K, config=p, tol=3e-3) <= 3e-3


def _emitted_configs(text: str) -> list:
    """The triton.Config(...) expressions of --emit triton output, evaluated."""
    import triton

    exprs = re.findall(r"triton\.Config\((?:[^()]|\([^()]*\))*\)", text)
    return [eval(e, {"triton": triton}) for e in exprs]  # noqa: S307 - the CLI's own output


@pytest.mark.gpu
def test_emit_top8_in_user_names_runs_in_autotune(torch, tmp_path, capsys):
    from tiler.cli import main

    space = tmp_path / "user.toml"
    space.write_text(g.user_space_toml())
    args = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=1024,N=4096,K=4000"]
    code = main([*args, "--space", str(space), "--emit", "triton", "--top", "8"])
    out = capsys.readouterr()
    if code == 2 and "--space" in out.err:
        pytest.skip(f"tiler search has no --space yet: {out.err.strip().splitlines()[-1]}")
    assert code == 0, out.err
    configs = _emitted_configs(out.out + out.err)
    assert len(configs) == 8, out.out
    names = {g.config_label(g.config_dict(c)) for c in configs}
    assert len(names) == 8 and names <= {g.config_label(p) for p in g.space_points()}
    kernel = g.autotuned(configs)
    for M, N, K in [(1024, 4096, 4000), (300, 700, 1000)]:
        a = torch.randn((M, K), device="cuda").half()
        b = torch.randn((K, N), device="cuda").half()
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        g.matmul(a, b, kernel, out=c)
        assert g.rel_err(c, a, b) < 3e-3
        assert g.config_label(g.config_dict(kernel.best_config)) in names


@pytest.mark.gpu
def test_pruner_in_autotune_keeps_four_and_matches_torch(torch):
    tt = pytest.importorskip("tiler.triton", reason="tiler/triton.py is not there yet")
    configs = g.user_configs()
    prune = tt.pruner(op="matmul", chip="h200", space=g.user_space(), top_k=4)
    kernel = g.autotuned(configs, prune_configs_by=prune)
    M, N, K = 768, 2048, 1408
    a = torch.randn((M, K), device="cuda").half()
    b = torch.randn((K, N), device="cuda").half()
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    g.matmul(a, b, kernel, out=c)
    assert g.rel_err(c, a, b) < 3e-3
    assert len(kernel.configs_timings) == 4


@pytest.mark.gpu
def test_runners_time_the_vendor_beside(torch):
    from tiler.ops.depthwise_conv import triton_runner as dw
    from tiler.ops.flash_attention import triton_runner as fa
    from tiler.ops.matmul import triton_runner as mm

    cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=3, num_warps=4, GROUP_M=8, ORDER=1, SPLIT_K=1)
    res = mm.time_config(512, 768, 1024, cfg, vendor=True)
    assert res["vendor"]["name"] == "cublas" and res["vendor"]["ms"] > 0 and res["vendor"]["rel_err"] < 1e-2
    assert res["vs_vendor"] == pytest.approx(res["vendor"]["ms"] / res["ms"])
    assert set(mm.time_config(64, 64, 64, cfg)) == {"ms", "tflops", "rel_err"}  # opt-in only

    ven = dw.vendor_times(
        {"N": 8, "C": 256, "H": 56, "W": 56, "kh": 7, "kw": 7, "stride": 1, "pad": 3, "dilation": 1}
    )
    assert (
        ven["nchw"]["ms"] > 0 and ven["channels_last"]["ms"] > 0 and ven["best"] in ("nchw", "channels_last")
    )

    for causal, S1 in ((0, 1024), (1, 1024), (1, 256)):
        shape = {"B": 2, "heads": 8, "kv_heads": 2, "S1": S1, "S2": 1024, "D": 128, "causal": causal}
        ven = fa.vendor_times(shape)
        assert ven["ms"] > 0 and ven["max_abs_err"] < 2e-2 and ven["backend"], ven
