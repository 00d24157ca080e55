"""The out-of-tree operator package examples/rmsnorm_plugin (tiler-rmsnorm): pip installs it, and then, in a fresh
interpreter with only that install added to the path, `tiler ops` lists rmsnorm, `tiler search --op rmsnorm` runs on
an Ascend chip and on the H200, and tiler's shipped conformance suite (tiler.testing) passes on both families.
The model's physics (directions a toy model would get wrong) and the Triton runner's contract are checked in
process, with the package imported from its source folder and the registry restored afterwards; the kernels run
against torch in Triton's CPU interpreter where torch and triton are installed, and on a GPU where there is one
(marked `gpu`)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import tiler.operator as registry
import tiler.space as spaces
from tiler.export import tiling_document
from tiler.hardware import load_chip
from tiler.operator import get_operator, known_ops
from tiler.problem import parse_problem
from tiler.runners.external import MeasureError
from tiler.search import search
from tiler.space import load_space, take

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "rmsnorm_plugin"
PACKAGE = "tiler_rmsnorm"


# ---------------------------------------------------------------- installed with pip, run in a fresh interpreter


def _offline_build() -> bool:
    """Whether this interpreter's setuptools can build a wheel without fetching anything: setuptools >= 70.1
    (bdist_wheel built in), or an older one with the `wheel` package."""
    spec = importlib.util.find_spec("setuptools")
    if spec is None:
        return False
    import setuptools

    version = tuple(int(x) for x in setuptools.__version__.split(".")[:2] if x.isdigit())
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """`pip install --no-deps --target <tmp> examples/rmsnorm_plugin` (a copy of it: the build writes build/ and
    *.egg-info beside the sources). Offline (`--no-build-isolation --no-index`, this interpreter's setuptools) when
    setuptools can build wheels here; else with build isolation, which fetches setuptools from pip's configured index
    (skipped when that fails: no network)."""
    tmp = tmp_path_factory.mktemp("rmsnorm_plugin")
    src, target = tmp / "src", tmp / "site"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    offline = _offline_build()
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input", "--disable-pip-version-check"]
    cmd += ["--no-build-isolation", "--no-index"] if offline else []
    run = subprocess.run([*cmd, "--target", str(target), str(src)], capture_output=True, text=True)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
        if not offline:
            pytest.skip(
                f"cannot build the example without network (no setuptools>=70.1 or wheel here): {tail}"
            )
        raise AssertionError(f"pip install failed:\n{tail}")
    assert (target / PACKAGE / "rmsnorm.toml").is_file(), "the space file was not installed with the package"
    return target


def _python(target: Path, *args: str) -> subprocess.CompletedProcess:
    """`python <args>` with the installed example first on the path (and not the source folder)."""
    path = os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, cwd=target)


def test_pip_install_adds_rmsnorm_to_tiler_ops(installed):
    run = _python(installed, "-m", "tiler", "ops")
    assert run.returncode == 0, run.stderr
    line = next((x for x in run.stdout.splitlines() if x.startswith("rmsnorm ")), "")
    assert "families: ascend, cuda" in line and "fields: rows, hidden" in line, run.stdout
    assert "plugin" not in run.stderr, run.stderr  # no plugin was skipped


@pytest.mark.parametrize(
    "chip, knob", [("ascend910b3", "rows_per_core="), ("h200", "BLOCK_N="), ("ascend310p3", "block_h=")]
)
def test_tiler_search_runs_the_installed_operator(installed, chip, knob):
    """On a separated Ascend chip (910B3, 40 AIVs), a coupled one (310P3) and the H200: a proven optimum (on the
    H200 one that the package's Triton kernels run as exported)."""
    args = ["search", "--op", "rmsnorm", "--chip", chip, "--shape", "rows=8192,hidden=5120"]
    run = _python(installed, "-m", "tiler", *args)
    assert run.returncode == 0, run.stderr
    assert "best tiling:" in run.stdout and knob in run.stdout and "optimum proven" in run.stdout, run.stdout
    # on the GPU the package's `triton` target expresses the tiling (Operator.TARGETS from another package)
    assert ("needs a custom kernel" in run.stdout) == (chip != "h200"), run.stdout


def test_the_installed_operator_passes_the_shipped_conformance_suite(installed):
    """tiler.testing.check_operator on both families, in an interpreter that found the package by its entry point
    alone (nothing imports it by name) and loaded it from the install, not the source folder."""
    script = (
        "import pathlib, sys\n"
        "from tiler.operator import known_ops\n"
        "from tiler.testing import CHECKS, check_operator\n"
        "assert {('rmsnorm', 'ascend'), ('rmsnorm', 'cuda')} <= set(known_ops())  # through the entry point\n"
        f"where = pathlib.Path(sys.modules[{PACKAGE!r}].__file__).resolve()\n"
        f"assert where.is_relative_to({str(installed.resolve())!r}), where\n"
        "for family in ('ascend', 'cuda'):\n"
        "    check_operator('rmsnorm', family)\n"
        "print('passed', len(CHECKS), 'checks x 2 families')\n"
    )
    run = _python(installed, "-c", script)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("passed"), run.stdout


# ---------------------------------------------------------------- in process: the model's physics


@pytest.fixture
def rmsnorm(monkeypatch):
    """The example registered from its source folder through its entry point, as an installed package would be;
    the registry, the space layer's file table and sys.modules are restored afterwards."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(spaces, "_SPACE_FILES", dict(spaces._SPACE_FILES))
    ep = EntryPoint(name="rmsnorm", value=PACKAGE, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == ep.group else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)
    monkeypatch.syspath_prepend(str(EXAMPLE))
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)
    assert ("rmsnorm", "cuda") in known_ops() and ("rmsnorm", "ascend") in known_ops()
    yield sys.modules[PACKAGE]
    for name in [m for m in sys.modules if m == PACKAGE or m.startswith(PACKAGE + ".")]:
        del sys.modules[name]


def _best(chip_id: str, rows: int, hidden: int, dtype: str = "fp16", top: int = 1):
    chip = load_chip(chip_id)
    p = parse_problem("rmsnorm", {"rows": rows, "hidden": hidden}, dtype)
    return search(p, chip, load_space("rmsnorm", chip.family), top=top)


def _table(family: str, chip_id: str, rows: int, hidden: int, dtype: str = "fp16"):
    """Every feasible tiling of the space with its estimate."""
    chip = load_chip(chip_id)
    p = parse_problem("rmsnorm", {"rows": rows, "hidden": hidden}, dtype)
    space = load_space("rmsnorm", family)
    model = get_operator("rmsnorm", family)
    cands = space.product(space.names)
    ok = np.logical_and.reduce(list(model.feasible(p, chip, cands).values()))
    cands = take(cands, ok)
    return cands, model.estimate(p, chip, cands), model, p, chip


def test_ascend_ub_capacity_decides_one_or_two_passes(rmsnorm):
    """A row that fits UB is read once (fp16, hidden 4096); an fp32 row of 16384 elements cannot fit with its
    buffers (16384 x (2 x 8 + 4) B = 320 KB > 192 KB of UB), so every feasible tiling reads it twice."""
    small = _best("ascend910b3", 4096, 4096)
    assert small.row(0)["row_reads"] == 1 and small.tiling(0)["block_h"] >= 4096
    cands, est, model, p, chip = _table("ascend", "ascend910b3", 4096, 16384, "fp32")
    assert np.all(est["row_reads"] == 2) and np.all(est["ub_bytes"] <= chip["ub_bytes"])
    whole = {"rows_per_core": np.array([1]), "block_h": np.array([16384]), "double_buffer": np.array([0])}
    assert not model.feasible(p, chip, whole)["ub"][0]


def test_ascend_cores_and_waves_follow_the_tasks(rmsnorm):
    """Tasks of q rows go round-robin to the 40 vector cores of the 910B3: 8 rows use 8 cores in one wave; 4096 rows
    of 4 rows a task are 1024 tasks in ceil(1024 / 40) = 26 waves."""
    chip = load_chip("ascend910b3")
    model = get_operator("rmsnorm", "ascend")
    one = {
        "rows_per_core": np.array([1, 4]),
        "block_h": np.array([4096, 4096]),
        "double_buffer": np.array([1, 0]),
    }
    few = model.estimate(parse_problem("rmsnorm", {"rows": 8, "hidden": 4096}), chip, one)
    assert few["cores_used"].tolist() == [8, 2] and few["waves"].tolist() == [1, 1]
    many = model.estimate(parse_problem("rmsnorm", {"rows": 4096, "hidden": 4096}), chip, one)
    assert many["cores_used"].tolist() == [40, 40] and many["waves"].tolist() == [103, 26]


@pytest.mark.parametrize("family, chip", [("ascend", "ascend910b3"), ("cuda", "h200")])
def test_a_second_pass_costs_traffic_and_large_problems_sit_on_the_memory_floor(rmsnorm, family, chip):
    """Two passes read x twice through L2 (every pass's bytes are L2 traffic); a large norm is memory bound, within
    2x of its roofline at the best tiling; HBM bytes are never below the compulsory ones."""
    cands, est, model, p, c = _table(family, chip, 16384, 8192)
    one, two = est["row_reads"] == 1, est["row_reads"] == 2
    assert one.any() and two.any()
    y_bytes = 16384 * 8192 * p.out_bytes
    assert np.all(est["l2_bytes"] >= est["row_reads"] * p.x_bytes + y_bytes)
    assert est["l2_bytes"][two].min() > est["l2_bytes"][one].min() + 0.5 * p.x_bytes  # ~ x once more
    assert np.all(est["hbm_bytes"] >= p.compulsory_bytes * (1 - 1e-12))
    best = int(np.argmin(est["time_us"]))
    assert est["bound"][best] in ("mte2", "load") and est["time_us"][best] < 2 * est["roofline_us"][best]


def test_cuda_registers_bound_the_tile_and_the_kernel_agrees(rmsnorm):
    """The model's `registers` rule is the kernel's own check (triton_kernels.validate, which runs without
    triton): the same tilings of the space are refused, for a one-pass and a two-pass row length."""
    from tiler_rmsnorm import triton_kernels as km

    for hidden in (4096, 65536):
        p = parse_problem("rmsnorm", {"rows": 1024, "hidden": hidden})
        space = load_space("rmsnorm", "cuda")
        cands = space.product(space.names)
        ok = get_operator("rmsnorm", "cuda").feasible(p, load_chip("h200"), cands, ["registers"])["registers"]
        for i in range(len(ok)):
            cfg = {k: int(cands[k][i]) for k in space.names}
            assert (km.validate(cfg, hidden) is None) == bool(ok[i]), (hidden, cfg)


def test_cuda_small_batches_are_latency_bound_and_rows_per_program_share_the_weight(rmsnorm):
    """A decode-sized norm (16 rows) cannot fill the H200's 132 SMs: latency bound, one pass, few SMs used. More
    rows per program read the weight fewer times (L2 traffic falls with ROWS)."""
    res = _best("h200", 16, 8192)
    row = res.row(0)
    assert row["bound"] == "latency" and row["row_reads"] == 1 and row["cores_used"] <= 16
    model = get_operator("rmsnorm", "cuda")
    p = parse_problem("rmsnorm", {"rows": 8192, "hidden": 4096})
    c = {"BLOCK_N": np.array([4096] * 3), "ROWS": np.array([1, 2, 4]), "num_warps": np.array([8] * 3)}
    l2 = model.estimate(p, load_chip("h200"), c)["l2_bytes"]
    assert l2[0] > l2[1] > l2[2]


def test_the_runner_is_declared_and_fails_in_one_line_without_a_gpu_stack(rmsnorm, monkeypatch):
    """`--measure triton` finds the package's runner; without torch (or triton, or a device) a measurement is one
    MeasureError line that fails the trial only."""
    chip = load_chip("h200")
    p = parse_problem("rmsnorm", {"rows": 256, "hidden": 4096})
    res = search(p, chip, load_space("rmsnorm", "cuda"), top=1)
    doc = tiling_document(p, chip, res.tiling(0), res.row(0))
    measure = get_operator("rmsnorm", "cuda").runner("triton")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MeasureError) as exc:
        measure(doc)
    assert "\n" not in str(exc.value) and "triton" in str(exc.value)


INTERPRETED = """
import torch
from tiler_rmsnorm import triton_kernels as km

for dtype in (torch.float16, torch.bfloat16, torch.float32):
    for cfg in (dict(BLOCK_N=8192, ROWS=2, num_warps=8), dict(BLOCK_N=1024, ROWS=4, num_warps=4)):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(37, 5000, generator=g).to(dtype)
        w = (1 + 0.1 * torch.randn(5000, generator=g)).to(dtype)
        y = torch.full_like(x, float("nan"))
        km.launch(x, w, y, cfg)
        ref = km.reference(x, w)
        err = float(torch.linalg.vector_norm(y.float() - ref) / torch.linalg.vector_norm(ref))
        assert err < km.REL_ERR_MAX, (dtype, cfg, err)
print("ok")
"""


def test_the_kernels_match_torch_in_tritons_interpreter():
    """Without a GPU: both kernels (one pass; two passes with a partial chunk and a partial last program) run in
    Triton's CPU interpreter (TRITON_INTERPRET=1, a fresh interpreter) and match torch's RMSNorm on fp16, bf16 and
    fp32, every element written (the output starts as NaN). Skipped without torch and triton, and with a numpy
    that Triton's interpreter cannot index a loop bound with (numpy >= 2.4 with Triton 3.6)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            int(np.array([1]))
    except TypeError:
        pytest.skip(
            f"numpy {np.__version__}: Triton's interpreter cannot use a 1-element array as a loop bound"
        )
    path = os.pathsep.join([str(EXAMPLE), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path, "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", INTERPRETED], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize(
    "cfg",
    [
        dict(BLOCK_N=8192, ROWS=2, num_warps=8),  # one pass
        dict(BLOCK_N=1024, ROWS=4, num_warps=4),  # two passes, a partial last program
    ],
)
def test_the_kernels_match_torch(rmsnorm, torch, dtype, cfg):
    """Each kernel on random rows (hidden not a multiple of the chunk, rows not a multiple of ROWS) against torch's
    RMSNorm in fp32."""
    from tiler_rmsnorm import triton_kernels as km

    res = km.run({"rows": 37, "hidden": 5000}, cfg, dtype=dtype, rep_ms=2, warmup_ms=1)
    assert res["rel_err"] < km.REL_ERR_MAX and res["ms"] > 0
