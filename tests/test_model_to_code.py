"""A model to kernel code, end to end, as a user runs it: `tiler shapes` on every shipped config.json, `tiler sweep`
on an Atlas A2 chip and the H200, `tiler emit` for CATLASS, AscendC and Triton. The C++ headers compile against the
stand-ins of tests/cpp (CATLASS's and AscendC's names with their real template arities; every variant of a unit
instantiated), the AscendC unit is also run and its `Select` answers as `tiler lookup` on random queries, and the
Python module imports and returns configs for every row of the model's shape file.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiler
from tiler.cli import main

ROOT = Path(__file__).resolve().parent.parent
MODELS = sorted(p.parent for p in (ROOT / "examples" / "models").glob("*/config.json"))
INCLUDE = Path(__file__).resolve().parent / "cpp" / "include"
CXX = next((path for name in ("g++", "clang++", "c++") if (path := shutil.which(name))), None)
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++, clang++ or c++) on PATH")
CHIP = "ascend910b3"


@pytest.fixture(scope="module", params=MODELS, ids=lambda p: p.name)
def model(request, tmp_path_factory) -> dict:
    """shapes -> sweep (the A2 chip and the H200) -> libraries, through the CLI."""
    folder = tmp_path_factory.mktemp(request.param.name)
    csv = folder / "shapes.csv"
    assert (
        main(
            [
                "shapes",
                str(request.param / "config.json"),
                "--op",
                "matmul",
                "--tokens",
                "1,2048",
                "--out",
                str(csv),
            ]
        )
        == 0
    )
    lib = folder / "lib.json"
    args = ["sweep", str(csv), "--op", "matmul", "--chip", f"{CHIP},h200", "--out", str(folder / "s.csv")]
    assert main([*args, "--library", str(lib)]) == 0
    return {
        "folder": folder,
        "shapes": pd.read_csv(csv),
        "ascend": folder / f"lib.{CHIP}.json",
        "h200": folder / "lib.h200.json",
    }


def test_the_shapes_are_nn_linear_gemms(model):
    assert set(model["shapes"]["layout"]) == {"nt"} and (model["shapes"]["count"] >= 1).all()


def _compile(tmp_path: Path, source: str, flags: list[str], out: Path | None = None):
    tu = tmp_path / "tu.cpp"
    tu.write_text(source)
    cmd = [CXX, "-std=c++17", *flags, "-I", str(INCLUDE), "-I", str(tmp_path), str(tu)]
    return subprocess.run(
        cmd + (["-o", str(out)] if out else []), capture_output=True, text=True, timeout=300
    )


@needs_cxx
def test_catlass_header_compiles_with_every_variant(model, tmp_path):
    assert main(["emit", str(model["ascend"]), "--target", "catlass", "--out", str(tmp_path)]) == 0
    (header,) = tmp_path.glob("*.h")
    ns = header.stem
    source = f"""#include "{header.name}"
template <class E>
void Use(E) {{
    static_assert(sizeof(typename E::BlockMmad) > 0 && E::kBlockDim > 0);
    typename E::Adapter adapter;
    (void)adapter;
}}
int main() {{
    for (int v = 0; v < {ns}::kVariantCount; ++v) {{
        if (!{ns}::Dispatch(v, [](auto e) {{ Use(e); }})) return 1;
    }}
    return {ns}::Select({ns}::Query{{}}) < -1;
}}
"""
    proc = _compile(tmp_path, source, ["-fsyntax-only", "-Wall", "-Wextra", "-Werror"])
    assert proc.returncode == 0, proc.stderr[-3000:]


def _random_queries(shapes: pd.DataFrame, n: int = 60, seed: int = 11) -> list[dict]:
    """The model's own rows (exact hits) and random ones around them, in both layouts and two dtypes."""
    rng = np.random.default_rng(seed)
    rows = [
        {"M": int(r.M), "N": int(r.N), "K": int(r.K), "layout": "nt", "dtype": r.dtype}
        for r in shapes.itertuples()
    ]
    for _ in range(n):
        base = rows[int(rng.integers(len(rows)))]
        rows.append(
            {
                "M": max(1, int(base["M"] * 2 ** rng.uniform(-3, 3))),
                "N": max(1, int(base["N"] * 2 ** rng.uniform(-1, 1))),
                "K": max(1, int(base["K"] * 2 ** rng.uniform(-1, 1))),
                "layout": str(rng.choice(["nt", "nt", "nn"])),
                "dtype": str(rng.choice([base["dtype"], base["dtype"], "fp32"])),
            }
        )
    return rows


@needs_cxx
def test_ascendc_header_runs_and_selects_as_lookup(model, tmp_path):
    assert main(["emit", str(model["ascend"]), "--target", "ascendc", "--out", str(tmp_path)]) == 0
    (header,) = tmp_path.glob("*.h")
    ns = header.stem
    queries = _random_queries(model["shapes"])
    dtypes = ["fp16", "bf16", "fp32", "int8"]
    lines = "\n".join(
        f"    Answer({q['M']}, {q['N']}, {q['K']}, {ns}::layout_{q['layout']}, {ns}::dtype_{q['dtype']});"
        for q in queries
    )
    source = f"""#include <cstdio>
#include "{header.name}"
void Answer(long m, long n, long k, int layout, int dtype) {{
    {ns}::Query q;
    q.M = m; q.N = n; q.K = k; q.layout = layout; q.dtype = dtype;
    const int i = {ns}::Select(q);
    if (i < 0) {{ std::printf("none\\n"); return; }}
    optiling::TCubeTiling tiling;
    {ns}::Dispatch({ns}::VariantOf(i), [&](auto e) {{ decltype(e)::Fill(tiling); }});
    std::printf("%s %d %d %d\\n", {ns}::kRows[i].key, static_cast<int>(tiling.get_M()), static_cast<int>(tiling.get_N()),
                static_cast<int>(tiling.get_Ka()));
}}
int main() {{
{lines}
}}
"""
    exe = tmp_path / "select"
    proc = _compile(tmp_path, source, ["-O1", "-Wall", "-Wextra", "-Werror"], exe)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert len(out) == len(queries)
    doc = json.loads(model["ascend"].read_text())
    doc["entries"] = [e for e in doc["entries"] if "ascendc" in e["targets"]]
    lib = tiler.lookup.from_document(doc)
    answered = 0
    for q, line in zip(queries, out, strict=True):
        try:
            hit = lib.lookup({k: q[k] for k in ("M", "N", "K", "layout")}, dtype=q["dtype"])
        except LookupError:
            assert line == "none", q
            continue
        shape = hit["problem"]["shape"]
        assert line == f"{hit['key']} {shape['M']} {shape['N']} {shape['K']}", (
            q
        )  # the entry's own TCubeTiling
        answered += 1
    assert answered >= len(model["shapes"])
    assert dtypes  # (the enum names the header declares are the tool's dtypes)


def test_triton_module_returns_configs_for_every_row(model, tmp_path, monkeypatch):
    class Config:
        def __init__(self, kwargs, **options):
            self.kwargs, self.options = kwargs, options

    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(Config=Config))
    assert main(["emit", str(model["h200"]), "--target", "triton", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.glob("*.py")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lib = json.loads(model["h200"].read_text())
    views = {e["key"]: e["targets"]["triton"] for e in lib["entries"]}
    for r in model["shapes"].itertuples():
        configs = mod.configs(int(r.M), int(r.N), int(r.K), layout="nt", dtype=r.dtype)
        key = f"matmul:M={r.M},N={r.N},K={r.K},batch=1,layout=nt:{r.dtype}"
        assert len(configs) == 1 and configs[0].kwargs == views[key]["kwargs"], key
        assert configs[0].options == {
            "num_warps": views[key]["num_warps"],
            "num_stages": views[key]["num_stages"],
        }
