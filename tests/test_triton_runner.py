"""The Triton runner: correctness on the GPU (skipped without one), and clean failure without torch/triton."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiler.errors import SpaceError, TilerError
from tiler.ops.matmul import triton_runner as tm

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "data" / "example_triton_tiling.json"


def cfg(**kw):
    c = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=3, num_warps=4, GROUP_M=4, ORDER=1, SPLIT_K=1)
    c.update(kw)
    return c


# --- everywhere ---------------------------------------------------------------------------------------


def test_imports_and_fails_cleanly_without_torch():
    """With torch and triton unimportable, the module imports and time_config names the pip extra."""
    code = (
        "import sys\n"
        "sys.modules['torch'] = None\n"
        "sys.modules['triton'] = None\n"
        "import tiler.ops.matmul.triton_runner as m\n"
        "from tiler.errors import TilerError\n"
        "config = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=3, num_warps=4, GROUP_M=8, ORDER=1, SPLIT_K=1)\n"
        "try:\n"
        "    m.time_config(64, 64, 64, config)\n"
        "except TilerError as e:\n"
        "    print('TilerError:', e)\n"
        "else:\n"
        "    print('no error')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert "TilerError:" in r.stdout
    assert "pip install 'tiler[gpu]'" in r.stdout


def test_missing_stack_in_process(monkeypatch):
    """The same failure in this process, torch hidden by monkeypatching the import system."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(TilerError, match=r"pip install 'tiler\[gpu\]'"):
        tm.time_config(64, 64, 64, cfg())
    with pytest.raises(TilerError, match="torch and triton"):
        tm.run_tiling_json(EXAMPLE)


def test_check_config_rejects_bad_configs():
    assert tm.check_config(cfg()) == cfg()
    with pytest.raises(SpaceError, match="lacks SPLIT_K"):
        tm.check_config({k: v for k, v in cfg().items() if k != "SPLIT_K"})
    with pytest.raises(SpaceError, match="BLOCK_MM"):
        tm.check_config(dict(cfg(), BLOCK_MM=64))
    with pytest.raises(SpaceError, match="ORDER"):
        tm.check_config(cfg(ORDER=3))
    with pytest.raises(SpaceError, match="power of two"):
        tm.check_config(cfg(BLOCK_K=48))
    with pytest.raises(SpaceError, match="integer"):
        tm.check_config(cfg(num_warps="4"))


def test_template_key_is_optional_and_checked():
    """TEMPLATE may be left out (the pointer kernel) or given as 0..3; TMA templates need 16-byte row strides."""
    assert "TEMPLATE" not in tm.check_config(cfg())
    assert tm.check_config(cfg(TEMPLATE=2))["TEMPLATE"] == 2
    with pytest.raises(SpaceError, match="TEMPLATE must be one of 0 \\(pointer\\)"):
        tm.check_config(cfg(TEMPLATE=4))
    with pytest.raises(SpaceError, match="TEMPLATE 3 \\(persistent_ws\\) needs SPLIT_K 1"):
        tm.check_config(cfg(TEMPLATE=3, SPLIT_K=2))
    # TAIL_SPLIT: optional (1), and more only on the persistent template without SPLIT_K
    assert "TAIL_SPLIT" not in tm.check_config(cfg(TEMPLATE=2))
    assert tm.check_config(cfg(TEMPLATE=2, TAIL_SPLIT=4))["TAIL_SPLIT"] == 4
    for bad in (cfg(TEMPLATE=1, TAIL_SPLIT=2), cfg(TEMPLATE=2, SPLIT_K=2, TAIL_SPLIT=2), cfg(TAIL_SPLIT=2)):
        with pytest.raises(SpaceError, match="TAIL_SPLIT 2 needs TEMPLATE 2 \\(persistent\\) and SPLIT_K 1"):
            tm.check_config(bad)
    with pytest.raises(SpaceError, match="TAIL_SPLIT must be >= 1"):
        tm.check_config(cfg(TEMPLATE=2, TAIL_SPLIT=0))
    # EPILOGUE_SUBTILE: optional (1), 2 only where C can go out through a descriptor (a TMA template)
    assert tm.check_config(cfg(TEMPLATE=1, EPILOGUE_SUBTILE=2))["EPILOGUE_SUBTILE"] == 2
    for bad in (cfg(EPILOGUE_SUBTILE=2), cfg(TEMPLATE=2, EPILOGUE_SUBTILE=4)):
        with pytest.raises(SpaceError, match="EPILOGUE_SUBTILE must be 1, or 2 with a TMA template"):
            tm.check_config(bad)
    from tiler.ops.matmul.triton_tma import tma_ok

    assert tma_ok(
        3000, 5000, 2000, "nn", 2
    )  # 4000- and 10000-byte rows: TMA can, Triton cannot prove 16 elements
    assert not tma_ok(1111, 2222, 3333, "nn", 2)  # A's rows are 6666 bytes apart
    assert tma_ok(1111, 2224, 3336, "nn", 2) and not tma_ok(1111, 2224, 3336, "tn", 2)  # `t` A: rows M apart


def test_tiling_document_is_read():
    M, N, K, dtype, config = tm.tiling_from_doc(EXAMPLE)
    doc = json.loads(EXAMPLE.read_text())
    assert (M, N, K) == tuple(doc["problem"]["shape"][k] for k in "MNK")
    assert dtype == doc["problem"]["dtype"]
    assert config == doc["targets"]["triton"]
    with pytest.raises(TilerError, match="schema"):
        tm.tiling_from_doc(dict(doc, schema="tiler.tiling/v0"))
    with pytest.raises(TilerError, match="targets.triton"):
        tm.tiling_from_doc({k: v for k, v in doc.items() if k != "targets"})


# --- on an NVIDIA GPU ---------------------------------------------------------------------------------


CASES = [
    # (M, N, K, dtype, config)
    (1000, 999, 1001, "fp16", cfg(ORDER=0, GROUP_M=1)),
    (1000, 999, 1001, "fp16", cfg(ORDER=1, GROUP_M=8)),
    (1000, 999, 1001, "fp16", cfg(ORDER=2, GROUP_M=1)),
    (333, 777, 2050, "fp16", cfg(SPLIT_K=2)),
    (333, 777, 2050, "bf16", cfg(SPLIT_K=3, ORDER=2, BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, num_warps=8)),
    (17, 4100, 513, "bf16", cfg(BLOCK_M=32, BLOCK_N=128, ORDER=1, GROUP_M=3)),
    (4095, 130, 256, "fp16", cfg(BLOCK_M=128, BLOCK_N=32, ORDER=0, SPLIT_K=4)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,dtype,config", CASES)
def test_matmul_matches_torch(torch, M, N, K, dtype, config):
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed(M * 7 + N * 3 + K)
    a = torch.randn((M, K), generator=g, device="cuda").to(dt)
    b = torch.randn((K, N), generator=g, device="cuda").to(dt)
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")  # poisoned: every element must be written
    c = tm.matmul(a, b, config, out=out)
    assert c is out and c.dtype == dt and c.shape == (M, N)
    ref = torch.matmul(a.float(), b.float())
    assert torch.isfinite(c).all()
    rel = (torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref)).item()
    assert rel < (3e-3 if dtype == "fp16" else 1e-2)
    # also agrees with torch's own low-precision product
    close = torch.matmul(a, b).float()
    assert (torch.linalg.vector_norm(c.float() - close) / torch.linalg.vector_norm(close)).item() < 1e-2
    # and a fresh output (no out=) gives the same numbers for SPLIT_K == 1
    if config["SPLIT_K"] == 1:
        assert torch.equal(tm.matmul(a, b, config), c)


TEMPLATE_CASES = [
    # (M, N, K, layout, dtype, config): TMA needs row strides of 16 bytes (multiples of 8 fp16 elements)
    (1000, 1000, 1000, "nn", "fp16", cfg(ORDER=1, GROUP_M=8)),
    (333, 776, 2056, "nt", "bf16", cfg(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8)),
    (1024, 520, 264, "tn", "fp16", cfg(ORDER=2, GROUP_M=1, BLOCK_N=128)),
    (136, 4104, 512, "tt", "fp16", cfg(SPLIT_K=3)),
    (3000, 5000, 2000, "nn", "fp16", cfg(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, SPLIT_K=2)),
    # rows TMA cannot describe: A (K = 1001), B (N = 999), both, each layout: staged into 16-byte rows first
    (1000, 999, 1001, "nn", "fp16", cfg(ORDER=1, GROUP_M=8)),
    (333, 777, 2050, "nt", "bf16", cfg(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8)),
    (1023, 520, 263, "tn", "fp16", cfg(ORDER=2, GROUP_M=1, BLOCK_N=128)),
    (17, 4100, 513, "tt", "bf16", cfg(SPLIT_K=3)),
]


@pytest.mark.gpu
@pytest.mark.parametrize("template", [1, 2, 3])
@pytest.mark.parametrize("M,N,K,layout,dtype,config", TEMPLATE_CASES)
def test_tma_templates_match_torch(torch, template, M, N, K, layout, dtype, config):
    """Every TMA template (tma, persistent, persistent_ws) computes the product for every layout, edges and
    split-K included, writing every element of a poisoned output; operands whose rows are not 16-byte multiples
    are staged, and the staging must not change the operands given."""
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed(M + N + K + template)
    a, b = tm.operands(torch, M, N, K, layout, g, "cuda", dt)
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    if template == 3 and config["SPLIT_K"] > 1:
        with pytest.raises(SpaceError, match="needs SPLIT_K 1"):
            tm.matmul(a, b, dict(config, TEMPLATE=template), out=out)
        return
    a0, b0 = a.clone(), b.clone()
    try:
        c = tm.matmul(a, b, dict(config, TEMPLATE=template), out=out)
    except TilerError as exc:
        if template == 3 and "cannot run here" in str(exc):
            pytest.skip(f"warp specialisation not supported by this Triton on this GPU: {exc}"[:200])
        raise
    ref = torch.matmul(a.float(), b.float())
    assert torch.isfinite(c).all()
    assert (torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref)).item() < 1e-2
    assert torch.equal(a, a0) and torch.equal(b, b0)


TAIL_CASES = [
    # (M, N, K, layout, dtype, config, TAIL_SPLIT) on the GPU's SMs: a partial last wave, none at all (tiles a
    # multiple of the SMs is not needed: a grid smaller than the SMs puts every tile in the tail), staged rows,
    # K slices past the last K step (empty slices), every layout
    (3000, 3000, 3000, "nn", "fp16", cfg(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8), 4),
    (512, 512, 32768, "nn", "bf16", cfg(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, num_warps=4), 4),
    (1000, 999, 1001, "nt", "fp16", cfg(ORDER=1, GROUP_M=8), 2),
    (1536, 1536, 6144, "tn", "fp16", cfg(BLOCK_M=64, BLOCK_N=128, BLOCK_K=64, ORDER=2, GROUP_M=1), 8),
    (333, 776, 200, "tt", "bf16", cfg(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8), 8),
]


@pytest.mark.gpu
@pytest.mark.parametrize("M,N,K,layout,dtype,config,split", TAIL_CASES)
def test_tail_split_matches_torch(torch, M, N, K, layout, dtype, config, split):
    """The persistent template with the last wave's tiles in K slices (TAIL_SPLIT) computes the product: every
    element of a poisoned output written, the tail tiles from the summed workspace slices, the same numbers as
    the unsplit kernel up to the fp32 sum's order."""
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed(M + N + K + split)
    a, b = tm.operands(torch, M, N, K, layout, g, "cuda", dt)
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    c = tm.matmul(a, b, dict(config, TEMPLATE=2, TAIL_SPLIT=split), out=out)
    ref = torch.matmul(a.float(), b.float())
    assert torch.isfinite(c).all()
    assert (torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref)).item() < 1e-2
    whole = tm.matmul(a, b, dict(config, TEMPLATE=2)).float()
    assert (torch.linalg.vector_norm(c.float() - whole) / torch.linalg.vector_norm(whole)).item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("template", [1, 2])
@pytest.mark.parametrize("M,N,K,layout,dtype,config", TEMPLATE_CASES[:3] + TEMPLATE_CASES[5:7])
def test_a_subtiled_epilogue_matches_the_whole_tile(torch, template, M, N, K, layout, dtype, config):
    """EPILOGUE_SUBTILE 2 stores C in two halves of BLOCK_N / 2 columns (through the descriptor where C's rows
    allow it, else through pointers as before): the same numbers as one tile, every element of a poisoned output."""
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda")
    g.manual_seed(M + N + K + 2 * template)
    a, b = tm.operands(torch, M, N, K, layout, g, "cuda", dt)
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    c = tm.matmul(a, b, dict(config, TEMPLATE=template, EPILOGUE_SUBTILE=2), out=out)
    assert torch.equal(c, tm.matmul(a, b, dict(config, TEMPLATE=template)))


@pytest.mark.gpu
def test_time_config_and_tiling_json(torch):
    res = tm.time_config(512, 768, 1024, cfg(SPLIT_K=2, ORDER=2))
    assert set(res) == {"ms", "tflops", "rel_err"}
    assert res["ms"] > 0 and res["tflops"] > 0 and res["rel_err"] < 1e-2
    doc = json.loads(EXAMPLE.read_text())
    doc["problem"]["shape"] = {"M": 300, "N": 500, "K": 700}
    res = tm.run_tiling_json(doc)
    assert res["rel_err"] < 1e-2


@pytest.mark.gpu
def test_cli_prints_microseconds_last(torch, tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["problem"]["shape"] = {"M": 256, "N": 256, "K": 256}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(
        [sys.executable, "-m", "tiler.ops.matmul.triton_runner", str(p)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert float(r.stdout.strip().splitlines()[-1]) > 0


@pytest.mark.gpu
def test_bad_config_is_a_tiler_error(torch):
    a = torch.randn((64, 64), device="cuda").half()
    with pytest.raises(TilerError):
        tm.matmul(a, a.float(), cfg())
    with pytest.raises(TilerError, match="inner dimensions"):
        tm.matmul(a, torch.randn((32, 64), device="cuda").half(), cfg())
