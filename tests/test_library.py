"""`tiler.library`: load a swept library, exact look-ups, and the documented nearest-shape rule."""

from __future__ import annotations

import json
import math

import pytest
from conftest import FAST

from tiler.errors import LibraryError, ProblemError, TilerError
from tiler.library import Library, from_document, load
from tiler.problem import parse_problem
from tiler.sweep import run_sweep


def test_swept_library_round_trips_exact_and_nearest(tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text(
        "name,M,N,K,dtype\na,128,256,256,fp16\nb,512,256,256,fp16\nc,128,256,256,fp16\nd,256,256,512,bf16\n"
    )
    lib_path = tmp_path / "lib.json"
    run_sweep(shapes, "matmul", "ascend910b3", tmp_path / "o.csv", fix=FAST, library=lib_path)
    lib = load(lib_path)
    assert lib.op == "matmul" and lib.chip["id"] == "ascend910b3"
    assert len(lib) == 3  # the repeated row is one entry
    doc = json.loads(lib_path.read_text())
    for entry in doc["entries"]:
        hit = lib.lookup(entry["problem"])  # the exported problem dict works as a query
        assert hit["exact"] is True and hit["distance"] == 0.0
        assert hit["tiling"] == entry["tiling"] and hit["estimate"] == entry["estimate"]
    hit = lib.lookup(parse_problem("matmul", {"M": 512, "N": 256, "K": 256}))
    assert hit["exact"] and hit["key"] == "matmul:M=512,N=256,K=256,batch=1:fp16"
    near = lib.lookup("M=400,N=256,K=256")  # log2(512/400)=0.36 < log2(400/128)=1.64
    assert near["exact"] is False and near["key"] == "matmul:M=512,N=256,K=256,batch=1:fp16"
    assert near["query"] == "matmul:M=400,N=256,K=256,batch=1:fp16"
    assert near["distance"] == pytest.approx(math.log2(512 / 400))
    assert lib.lookup({"M": 300, "N": 300, "K": 300, "dtype": "bf16"})["key"].endswith(":bf16")
    near["tiling"]["base_m"] = -1  # a copy: the library is unchanged
    assert lib.lookup("M=400,N=256,K=256")["tiling"]["base_m"] == 64


def _entry(M, N, K, dtype="fp16", batch=1, tag=""):
    key = f"matmul:M={M},N={N},K={K},batch={batch}:{dtype}"
    return {
        "key": key,
        "problem": {"shape": {"M": M, "N": N, "K": K, "batch": batch}, "dtype": dtype},
        "tiling": {"tag": tag or key},
        "estimate": {"time_us": 1.0, "bound": "cube"},
    }


def _lib(*entries) -> Library:
    doc = {
        "schema": "tiler.library/v1",
        "tool": {"name": "tiler", "version": "0"},
        "chip": {"id": "x", "family": "ascend", "cores": 20, "profile_hash": "0"},
        "op": "matmul",
        "entries": list(entries),
    }
    return from_document(doc)


def test_nearest_rule_dtype_batch_log_distance_and_ties():
    lib = _lib(
        _entry(1024, 1024, 1024),
        _entry(256, 1024, 1024),
        _entry(512, 512, 512, dtype="bf16"),
        _entry(512, 1024, 1024, batch=8),
    )
    # same dtype only: the bf16 entry is exact in M,N,K space terms but never chosen for fp16
    assert lib.lookup("M=512,N=512,K=512")["problem"]["dtype"] == "fp16"
    # equal distance (1 either way): the larger shape wins
    assert lib.lookup("M=512,N=1024,K=1024")["key"] == "matmul:M=1024,N=1024,K=1024,batch=1:fp16"
    # a same-batch entry is preferred even when a different-batch one is closer in M, N, K
    assert lib.lookup("M=512,N=1024,K=1024,batch=1")["problem"]["shape"]["batch"] == 1
    hit = lib.lookup("M=500,N=1000,K=1000,batch=8")
    assert hit["key"] == "matmul:M=512,N=1024,K=1024,batch=8:fp16" and not hit["exact"]
    # no entry of that batch: all of the dtype compete, batch joins the distance
    assert lib.lookup("M=512,N=1024,K=1024,batch=4")["problem"]["shape"]["batch"] == 8
    with pytest.raises(LookupError, match="dtype: no int8 entry"):
        lib.lookup("M=512,N=512,K=512", dtype="int8")
    with pytest.raises(LookupError, match="empty"):
        _lib().lookup("M=1,N=1,K=1")


def test_bad_queries_and_files_name_the_problem(tmp_path):
    lib = _lib(_entry(64, 64, 64))
    with pytest.raises(ProblemError, match="K: missing"):
        lib.lookup({"M": 1, "N": 2})
    with pytest.raises(ProblemError, match="M: must be an integer"):
        lib.lookup("M=-3,N=2,K=2")
    with pytest.raises(ProblemError, match="unknown field 'Q'"):
        lib.lookup({"M": 1, "N": 2, "K": 3, "Q": 1})
    assert lib.lookup({"M": 64, "N": 64, "K": 64, "name": "x", "count": 3})["exact"]  # sweep-row extras ok
    with pytest.raises(TilerError, match="cannot read"):
        load(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TilerError, match="not valid JSON"):
        load(bad)
    bad.write_text(json.dumps({"schema": "tiler.library/v1", "op": "matmul"}))
    with pytest.raises(LibraryError, match="needs an op \\(text\\) and a chip"):
        load(bad)
