"""`tiler.lookup` / `tiler lookup`: answers from a sweep's library without importing the models (behaviour, not
timings: bench/lookup_bench.py measures those)."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from dataclasses import fields

import pytest
from conftest import FAST, json_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tiler
import tiler.library as full
import tiler.lookup as fast
from tiler.cli import main
from tiler.errors import LibraryError, ProblemError, TilerError
from tiler.operator import known_ops, problem_class
from tiler.problem import parse_problem


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lookup")
    shapes = tmp / "s.csv"
    shapes.write_text(
        "name,M,N,K,dtype,layout\na,128,256,256,fp16,\nb,512,256,256,fp16,\nc,256,256,512,bf16,\nd,512,256,256,fp16,nt\n"
    )
    from tiler.sweep import run_sweep

    lib = tmp / "lib.json"
    run_sweep(shapes, "matmul", "ascend910b3", tmp / "o.csv", fix=FAST, library=lib, quiet=True)
    return lib


def _doc(*entries, op="matmul") -> dict:
    return {
        "schema": "tiler.library/v1",
        "tool": {"name": "tiler", "version": "0"},
        "chip": {"id": "x", "family": "ascend", "cores": 20, "profile_hash": "0"},
        "op": op,
        "entries": list(entries),
    }


def _entry(M, N, K, dtype="fp16", batch=1, layout="nn", time_us=10.0):
    lay = "" if layout == "nn" else f",layout={layout}"
    return {
        "key": f"matmul:M={M},N={N},K={K},batch={batch}{lay}:{dtype}",
        "problem": {
            "shape": {"M": M, "N": N, "K": K, "batch": batch, "layout": layout, "b_format": "nd"},
            "dtype": dtype,
        },
        "tiling": {"tag": f"{M}x{N}x{K}x{batch}{layout}:{dtype}"},
        "estimate": {"time_us": time_us, "bound": "cube"},
    }


def test_exact_hits_return_the_sweeps_tiling(swept):
    lib = fast.load(swept)
    doc = json.loads(swept.read_text())
    assert len(lib) == 4 and lib.op == "matmul" and lib.chip["id"] == "ascend910b3"
    for entry in doc["entries"]:
        for query in (entry["problem"], {**entry["problem"]["shape"], "dtype": entry["problem"]["dtype"]}):
            hit = lib.lookup(query)
            assert hit["exact"] is True and hit["key"] == entry["key"] == hit["query"]
            assert hit["tiling"] == entry["tiling"] and hit["estimate"] == entry["estimate"]
            assert hit["distance"] == 0.0 and hit["work_ratio"] == 1.0
    hit = tiler.lookup(str(swept), "matmul", "ascend910b3", "M=512,N=256,K=256,layout=nt")  # the package call
    assert hit["exact"] and hit["problem"]["shape"]["layout"] == "nt"
    from tiler import api

    assert api.lookup(swept, "matmul", "ascend910b3", {"M": 128, "N": 256, "K": 256})["exact"]
    assert fast.lookup(lib, shape="M=128,N=256,K=256")["key"] == "matmul:M=128,N=256,K=256,batch=1:fp16"


def test_nearest_hit_and_the_same_answers_as_tiler_library(swept):
    lib, ref = fast.load(swept), full.load(swept)
    near = lib.lookup("M=400,N=256,K=256")
    assert near["exact"] is False and near["key"] == "matmul:M=512,N=256,K=256,batch=1:fp16"
    assert near["query"] == "matmul:M=400,N=256,K=256,batch=1:fp16"
    assert near["distance"] == pytest.approx(math.log2(512 / 400))
    assert near["work_ratio"] == pytest.approx(400 / 512)
    assert near["scaled_time_us"] == pytest.approx(near["estimate"]["time_us"] * 400 / 512)
    assert near["problem"]["shape"]["layout"] == "nn"  # the nt entry at 512 is never handed to an nn query
    near["tiling"]["base_m"] = -1  # a copy
    assert lib.lookup("M=400,N=256,K=256")["tiling"]["base_m"] != -1
    for q in (
        "M=1,N=1,K=1",
        "M=9000,N=256,K=100",
        "M=300,N=300,K=300,dtype=bf16",
        "M=64,N=64,K=64,layout=nt",
        "M=512,N=256,K=256,batch=4",
    ):
        assert lib.lookup(q) == ref.lookup(q), q


def test_matched_fields_must_agree_and_ties_are_deterministic():
    lib = fast.from_document(
        _doc(
            _entry(1024, 1024, 1024),
            _entry(256, 1024, 1024),
            _entry(512, 512, 512, dtype="bf16"),
            _entry(512, 1024, 1024, batch=8),
            _entry(512, 512, 512, layout="nt"),
        )
    )
    assert lib.lookup("M=512,N=512,K=512")["problem"]["dtype"] == "fp16"
    assert lib.lookup("M=512,N=512,K=512")["problem"]["shape"]["layout"] == "nn"
    assert (
        lib.lookup("M=500,N=500,K=500,layout=nt")["key"] == "matmul:M=512,N=512,K=512,batch=1,layout=nt:fp16"
    )
    assert (
        lib.lookup("M=512,N=1024,K=1024")["key"] == "matmul:M=1024,N=1024,K=1024,batch=1:fp16"
    )  # tie: larger
    assert lib.lookup("M=500,N=1000,K=1000,batch=8")["problem"]["shape"]["batch"] == 8
    assert (
        lib.lookup("M=512,N=1024,K=1024,batch=4")["problem"]["shape"]["batch"] == 8
    )  # batch joins the distance
    with pytest.raises(LookupError, match="layout: no fp16 entry with layout=tt"):
        lib.lookup("M=512,N=512,K=512,layout=tt")
    with pytest.raises(LookupError, match="b_format: no fp16 entry with b_format=nz"):
        lib.lookup("M=512,N=512,K=512,b_format=nz")
    with pytest.raises(LookupError, match=r"dtype: no int8 entry in this library \(it has bf16, fp16\)"):
        lib.lookup("M=512,N=512,K=512", dtype="int8")
    with pytest.raises(LookupError, match="empty"):
        fast.from_document(_doc()).lookup("M=1,N=1,K=1")


def test_the_query_is_parsed_as_parse_problem_parses_it():
    for op, _ in known_ops():
        cls = problem_class(op)
        spec = fast.read_spec(op)
        assert spec == fast.Spec.of_class(cls)  # what is read with ast is what the class declares
        assert spec.order == tuple(f.name for f in fields(cls) if f.name != "dtype")
        lib = fast.Library(op, {}, [])
        shape, dtype, key = lib.parse(dict(cls.EXAMPLE), "bf16")
        p = parse_problem(op, cls.EXAMPLE, "bf16")
        assert (shape, dtype, key) == (p.shape(), p.dtype, p.key())
    lib = fast.Library("matmul", {}, [])
    for text in ("M=1,N=2,K=3,layout=NT", "M=1,N=2,K=3,layout=nn,b_format=nz,batch=4"):
        assert (
            lib.parse(text)[2] == parse_problem("matmul", dict(p.split("=") for p in text.split(","))).key()
        )
    for bad, msg in (
        ({"M": 1, "N": 2}, "K: missing"),
        ("M=-3,N=2,K=2", "M: must be an integer"),
        ({"M": 1, "N": 2, "K": 3, "Q": 1}, "unknown field 'Q'"),
        ("M=1,N=1,K=1,layout=xx", "layout: must"),
        ("M=1,N=1,K=1,dtype=fp8", "dtype: must"),
        (3, "expected a Problem"),
    ):
        with pytest.raises(ProblemError, match=msg):
            lib.parse(bad)
    assert (
        lib.parse({"M": 1, "N": 1, "K": 1, "name": "x", "count": 3})[2] == "matmul:M=1,N=1,K=1,batch=1:fp16"
    )
    assert (
        lib.parse(parse_problem("matmul", {"M": 2, "N": 2, "K": 2}))[2] == "matmul:M=2,N=2,K=2,batch=1:fp16"
    )


def _run(capsys, *args):
    rc = main(["lookup", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_answers_json_and_bad_inputs_exit_2(swept, tmp_path, capsys):
    rc, out, err = _run(
        capsys,
        "--library",
        str(swept),
        "--op",
        "matmul",
        "--chip",
        "ascend910b3",
        "--shape",
        "M=400,N=256,K=256",
    )
    assert rc == 0 and err == ""
    ans = json.loads(out)
    assert ans["key"] == "matmul:M=512,N=256,K=256,batch=1:fp16" and ans["exact"] is False
    assert {"tiling", "estimate", "distance", "query", "work_ratio", "scaled_time_us"} <= set(ans)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**json.loads(swept.read_text()), "schema": "tiler.tiling/v1"}))
    notjson = tmp_path / "nj.json"
    notjson.write_text("{nope")
    cases = [
        (["--library", str(tmp_path / "none.json")], "cannot read"),
        (["--library", str(wrong)], "schema must be tiler.library/v1"),
        (["--library", str(notjson)], "not valid JSON"),
        (["--library", str(swept), "--op", "softmax"], "holds matmul tilings, not softmax"),
        (["--library", str(swept), "--chip", "h200"], "holds tilings of ascend910b3, not h200"),
        (
            ["--library", str(swept), "--shape", "M=1,N=1,K=1,layout=tt"],
            "layout: no fp16 entry with layout=tt",
        ),
        (["--library", str(swept), "--dtype", "int8"], "dtype: no int8 entry"),
        (["--library", str(swept), "--shape", "M=1,N=1"], "K: missing"),
    ]
    for args, msg in cases:
        if "--shape" not in args:
            args = [*args, "--shape", "M=1,N=1,K=1"]
        rc, out, err = _run(capsys, *args)
        assert rc == 2 and out == "" and err.count("\n") == 1 and msg in err, (args, err)
    with pytest.raises(TilerError, match=r"entries/0 \(k\): needs key"):
        fast.from_document({**_doc(), "entries": [{"key": "k"}]})


def test_slowdown_only_when_asked(swept):
    lib = fast.load(swept)
    assert "slowdown" not in lib.lookup("M=400,N=256,K=256")
    exact = lib.lookup("M=512,N=256,K=256", slowdown=True)
    assert exact["slowdown"] == 1.0 and exact["reused_time_us"] == exact["estimate"]["time_us"]
    near = lib.lookup("M=400,N=256,K=256", slowdown=True)
    assert near["best_time_us"] > 0 and near["reused_time_us"] > 0
    assert near["slowdown"] == pytest.approx(near["reused_time_us"] / near["best_time_us"])
    assert near["slowdown"] >= 1 - 1e-9  # the best is the proven optimum of the query shape


def test_the_fast_path_imports_no_model():
    code = (
        "import json, sys, tiler, tiler.lookup as L\n"
        f"lib = L.from_document(json.loads({json.dumps(json.dumps(_doc(_entry(64, 64, 64))))}))\n"
        "assert lib.lookup('M=60,N=64,K=64')['key'] == 'matmul:M=64,N=64,K=64,batch=1:fp16'\n"
        "assert tiler.lookup(lib, 'matmul', 'x', {'M': 64, 'N': 64, 'K': 64})['exact']\n"
        "heavy = ('numpy', 'pandas', 'optuna', 'jsonschema', 'click', 'tiler.ops', 'tiler.operator', 'tiler.export',"
        " 'tiler.model', 'tiler.api')\n"
        "print(','.join(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


# --- corrupted libraries and unbounded files (issue 31) ---


def _corrupt(path, tmp_path, edit) -> str:
    doc = json.loads(path.read_text())
    edit(doc)
    out = tmp_path / "bad.json"
    out.write_text(json.dumps(doc, allow_nan=True))
    return str(out)


CORRUPTIONS = {
    "text-entry": (lambda d: d["entries"].__setitem__(0, "hello"), "entries/0: must be an object"),
    "null-entry": (lambda d: d["entries"].__setitem__(0, None), "got None"),
    "infinity": (lambda d: d["entries"][0]["estimate"].__setitem__("time_us", math.inf), "Infinity is not"),
    "nan": (lambda d: d["entries"][0]["estimate"].__setitem__("time_us", math.nan), "NaN is not"),
    "list-dtype": (
        lambda d: d["entries"][0]["problem"].__setitem__("dtype", ["fp16"]),
        "problem/dtype must be",
    ),
    "string-time": (lambda d: d["entries"][0]["estimate"].__setitem__("time_us", "fast"), "time_us must be"),
    "null-field": (lambda d: d["entries"][1]["problem"]["shape"].__setitem__("M", None), "problem/shape/M"),
    "float-knob": (lambda d: d["entries"][0]["tiling"].__setitem__("base_m", 64.5), "tiling/base_m"),
    "list-targets": (lambda d: d["entries"][0].__setitem__("targets", []), "targets must be an object"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_corrupted_entry_is_one_library_error_line(swept, tmp_path, capsys, name):
    edit, words = CORRUPTIONS[name]
    bad = _corrupt(swept, tmp_path, edit)
    for loader in (fast.load, full.load):
        with pytest.raises(LibraryError, match=re.escape(words)):
            loader(bad)
    rc, out, err = _run(capsys, "--library", bad, "--shape", "M=128,N=256,K=256")
    assert rc == 2 and out == "" and err.count("\n") == 1 and words in err and "Traceback" not in err, err


def test_deep_json_and_devices_are_refused_without_reading_on(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"schema": "tiler.library/v1", "entries": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(LibraryError, match="nested too deep"):
        fast.load(deep)
    for device in ("/dev/zero", "/dev/urandom"):
        rc, out, err = _run(capsys, "--library", device, "--shape", "M=1,N=1,K=1")
        assert rc == 2 and "not a regular file" in err, err
        with pytest.raises(LibraryError, match="not a regular file"):
            full.load(device)


def test_a_file_over_the_size_limit_is_refused(swept, tmp_path, capsys, monkeypatch):
    import shutil

    import tiler.io

    swept = shutil.copy(swept, tmp_path / "lib.json")  # a file no earlier look-up has cached
    size = swept.stat().st_size
    monkeypatch.setattr(tiler.io, "FILE_BYTES_MAX", size - 1)
    with pytest.raises(LibraryError, match=f"{size} bytes; at most {size - 1}"):
        fast.load(swept)
    rc, out, err = _run(capsys, "--library", str(swept), "--shape", "M=128,N=256,K=256")
    assert rc == 2 and "at most" in err
    csv = tmp_path / "m.csv"
    csv.write_text("M,N,K\n" + "1,1,1\n" * size)
    assert main(["calibrate", "--chip", "h200", "--op", "matmul", "--measurements", str(csv),
                 "--out", str(tmp_path / "o.toml")]) == 2  # fmt: skip
    assert "at most" in capsys.readouterr().err
    monkeypatch.setattr(tiler.io, "FILE_BYTES_MAX", size)
    assert len(fast.load(swept)) == 4


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_corrupted_field_is_a_library_error_or_an_answer(swept, tmp_path_factory, data):
    """Any leaf or object of a valid library replaced by any JSON value: both loaders and a look-up end in an
    answer or a LibraryError / ProblemError / LookupError, never another exception."""
    doc = json.loads(swept.read_text())
    entry = data.draw(st.integers(0, len(doc["entries"]) - 1), label="entry")
    node, path = doc["entries"][entry], []
    while isinstance(node, dict) and node and data.draw(st.booleans(), label="deeper"):
        k = data.draw(st.sampled_from(sorted(node)), label="key")
        path.append(k)
        parent, node = node, node[k]
    value = data.draw(json_values, label="value")
    if path:
        parent[path[-1]] = value
    else:
        doc["entries"][entry] = value
    bad = tmp_path_factory.mktemp("fuzz") / "lib.json"
    bad.write_text(json.dumps(doc, allow_nan=True))
    for loader in (fast.load, full.load):
        try:
            lib = loader(bad)
            lib.lookup("M=128,N=256,K=256")
        except (LibraryError, ProblemError, LookupError):
            pass
