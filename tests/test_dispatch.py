"""`tiler emit LIBRARY --target T`: a sweep's library as a dispatch unit whose selection answers as tiler lookup.

The Python unit (Triton) is imported and queried; the C++ units (CATLASS, AscendC) are compiled with the stand-in
headers of tests/cpp and run on the same queries (skipped without a C++ compiler). Every answer must be the entry
`tiler.lookup` gives on the same library: exact hits, nearest shapes, other layouts and dtypes (no answer).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tiler
from tiler.cli import main
from tiler.errors import TilerError

INCLUDE = Path(__file__).resolve().parent / "cpp" / "include"
CXX = next((path for name in ("g++", "clang++", "c++") if (path := shutil.which(name))), None)

# LLM-like GEMMs in two layouts and two dtypes, with a batch-2 entry (a matched field), so the rule's every branch
# has entries to choose among
SHAPES = [
    (m, n, k, layout, dtype)
    for m in (1, 16, 512, 4096)
    for n, k in ((4096, 4096), (14336, 4096), (4096, 14336))
    for layout, dtype in (("nt", "bf16"), ("nn", "fp16"))
    if not (layout == "nn" and m in (1, 4096))
]


def _library(tmp_path_factory, chip: str) -> Path:
    rows = pd.DataFrame(
        [{"M": m, "N": n, "K": k, "batch": 1, "layout": lay, "dtype": dt} for m, n, k, lay, dt in SHAPES]
        + [{"M": 64, "N": 4096, "K": 4096, "batch": 2, "layout": "nt", "dtype": "bf16"}]
    )
    folder = tmp_path_factory.mktemp(f"lib_{chip}")
    tiler.sweep(rows, op="matmul", chips=chip, out=folder / "s.csv", library=folder / "lib.json")
    return folder / "lib.json"


@pytest.fixture(scope="module")
def h200_library(tmp_path_factory) -> Path:
    return _library(tmp_path_factory, "h200")


def _queries(seed: int = 5, n: int = 120) -> list[dict]:
    """Exact shapes of the library, and random ones near and far, over both layouts, both dtypes, batch 1 and 3."""
    rng = np.random.default_rng(seed)
    out = [{"M": m, "N": n, "K": k, "batch": 1, "layout": lay, "dtype": dt} for m, n, k, lay, dt in SHAPES]
    for _ in range(n):
        out.append(
            {
                "M": int(rng.integers(1, 20000)),
                "N": int(2 ** rng.uniform(8, 15)),
                "K": int(2 ** rng.uniform(8, 15)),
                "batch": int(rng.choice([1, 1, 2, 3])),
                "layout": str(rng.choice(["nt", "nn", "tt"])),
                "dtype": str(rng.choice(["bf16", "fp16", "fp32"])),
            }
        )
    return out


def _lookup_key(library: Path, target: str, q: dict) -> str | None:
    """The key tiler lookup answers for q over the library's entries that have a `target` view (those the unit
    holds), or None when it has no answer."""
    doc = json.loads(library.read_text())
    doc["entries"] = [e for e in doc["entries"] if target in e["targets"]]
    shape = {k: v for k, v in q.items() if k != "dtype"}
    try:
        return tiler.lookup(tiler.lookup.from_document(doc), shape=shape, dtype=q["dtype"])["key"]
    except LookupError:
        return None


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_python_unit_answers_as_lookup(h200_library, tmp_path):
    unit = tiler.emit(h200_library, target="triton", out=tmp_path)
    entries = json.loads(h200_library.read_text())["entries"]
    # the batch-2 entry: the project's Triton kernel has no batch axis
    assert [s.split(":")[1] for s in unit.skipped] == ["M=64,N=4096,K=4096,batch=2,layout=nt"]
    assert unit.entries == len(entries) - 1
    mod = _import(tmp_path / unit.name)
    answered = 0
    for q in _queries():
        want = _lookup_key(h200_library, "triton", q)
        i = mod.select(q["M"], q["N"], q["K"], batch=q["batch"], layout=q["layout"], dtype=q["dtype"])
        got = None if i is None else mod.ENTRIES[i]["key"]
        assert got == want, q
        answered += want is not None
    assert 40 < answered < len(_queries()) - 10  # both branches: answers, and no answer (dtype, layout)


def test_python_unit_configs_are_the_library_views(h200_library, tmp_path, monkeypatch):
    """`configs()` builds one triton.Config per entry config from the entry's triton view (a stand-in triton
    module records the arguments: CI has no triton)."""

    class Config:
        def __init__(self, kwargs, num_warps, num_stages):
            self.kwargs, self.num_warps, self.num_stages = kwargs, num_warps, num_stages

    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(Config=Config))
    unit = tiler.emit(h200_library, target="triton", out=tmp_path)
    mod = _import(tmp_path / unit.name)
    lib = json.loads(h200_library.read_text())
    for e in lib["entries"][:-1]:  # (the last, batch 2, has no triton view)
        shape = e["problem"]["shape"]
        (cfg,) = mod.configs(
            shape["M"],
            shape["N"],
            shape["K"],
            batch=shape["batch"],
            layout=shape["layout"],
            dtype=e["problem"]["dtype"],
        )
        view = e["targets"]["triton"]
        assert isinstance(cfg, Config)
        assert (cfg.kwargs, cfg.num_warps, cfg.num_stages) == (
            view["kwargs"],
            view["num_warps"],
            view["num_stages"],
        )
    assert mod.config_dicts(64, 64, 64, layout="tn", dtype="bf16") == []  # no entry of that layout


def test_emit_prints_the_unit_without_out(h200_library, capsys):
    assert main(["emit", str(h200_library), "--target", "triton"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('"""tiler') and "def configs(" in out
    compile(out, "unit.py", "exec")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--target", "catlass"], "--target: must be one of triton for matmul on the cuda family"),
        (["--target", "triton", "--op", "softmax"], "--op: "),
        (["--target", "triton", "--chip", "ascend910b3"], "--chip: "),
    ],
)
def test_emit_bad_input_writes_nothing(h200_library, tmp_path, capsys, args, message):
    out = tmp_path / "gen"
    assert main(["emit", str(h200_library), *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert not out.exists()


def test_emit_refuses_an_empty_library_and_a_broken_file(h200_library, tmp_path, capsys):
    doc = json.loads(h200_library.read_text())
    doc["entries"] = []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(doc))
    assert main(["emit", str(empty), "--target", "triton", "--out", str(tmp_path / "gen")]) == 2
    assert "is empty; nothing to emit" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{" * 10)
    assert main(["emit", str(broken), "--target", "triton", "--out", str(tmp_path / "gen")]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    file_as_folder = tmp_path / "a_file"
    file_as_folder.write_text("")
    assert main(["emit", str(h200_library), "--target", "triton", "--out", str(file_as_folder)]) == 2
    assert "not a folder" in capsys.readouterr().err
    assert not (tmp_path / "gen").exists()


def test_entries_without_a_view_are_left_out_and_named(h200_library, tmp_path):
    doc = json.loads(h200_library.read_text())
    dropped = doc["entries"][0]
    dropped["targets"] = {}
    dropped["no_view"] = {"triton": "a reason"}
    unit = tiler.emit(doc, target="triton")
    assert unit.skipped[0] == f"{dropped['key']}: a reason" and len(unit.skipped) == 2  # and the batch-2 one
    assert unit.entries == len(doc["entries"]) - 2 and dropped["key"] not in unit.text
    with pytest.raises(TilerError, match="has no triton view in any of its"):
        tiler.emit({**doc, "entries": [dropped]}, target="triton")
