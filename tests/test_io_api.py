"""Writing files (tiler.io), `--export -`, `python -m tiler`, `--version` everywhere, boolean knob words, and the
Python API (tiler.search/explain/rank/sweep)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import FAST

import tiler
from tiler import io as tio
from tiler.cli import cli, main
from tiler.errors import TilerError
from tiler.export import validate
from tiler.space import load_space

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "tests" / "data" / "h200_matmul_cal.csv"
SHAPE = "M=256,N=512,K=256"
SEARCH = ["search", "--op", "matmul", "--chip", "ascend910b3", "--shape", SHAPE] + [
    a for f in FAST for a in ("--fix", f)
]


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def _sweep_args(tmp: Path) -> list[str]:
    shapes = tmp / "shapes.csv"
    shapes.write_text("M,N,K\n256,512,256\n512,256,256\n")
    return ["sweep", str(shapes), "--op", "matmul", "--chip", "ascend910b3", "--quiet"] + [
        a for f in FAST for a in ("--fix", f)
    ]


# each write path: (the flag, the command line that writes `path` with it)
WRITERS = {
    "search --export": ("--export", lambda tmp, path: SEARCH + ["--export", path]),
    "search --manifest": ("--manifest", lambda tmp, path: SEARCH + ["--manifest", path]),
    "sweep --out": ("--out", lambda tmp, path: _sweep_args(tmp) + ["--out", path]),
    "sweep --library": (
        "--library",
        lambda tmp, path: _sweep_args(tmp) + ["--out", str(tmp / "table.csv"), "--library", path],
    ),
    "calibrate --out": (
        "--out",
        lambda tmp, path: [
            "calibrate",
            "--chip",
            "h200",
            "--op",
            "matmul",
            "--measurements",
            str(MEASUREMENTS),
            "--folds",
            "2",
            "--out",
            path,
        ],
    ),
}


def _leftovers(folder: Path) -> list[Path]:
    """Temporary files a write could leave behind (tiler.io's `.<name>.<pid>.<hex>.tmp`, or any `*.tmp`)."""
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp") or ".tmp" in p.name]


def _one_error_line(err: str, flag: str, path: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {flag}: ") or lines[0].startswith(
        f"error: Invalid value for '{flag}'"
    ), err
    assert path in lines[0], err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("writer", list(WRITERS))
def test_missing_folders_are_created(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    target = tmp_path / "new" / "deeper" / "file.out"
    code, _, err = run(args(tmp_path, str(target)), capsys)
    assert code == 0, err
    assert target.is_file() and target.stat().st_size > 0
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_parent_that_is_a_file_is_refused(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    (tmp_path / "plain").write_text("x")
    target = str(tmp_path / "plain" / "file.out")
    code, out, err = run(args(tmp_path, target), capsys)
    assert code == 2
    line = _one_error_line(err, flag, target)
    assert "is not a folder" in line
    assert (tmp_path / "plain").read_text() == "x"
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_trailing_slash_is_refused_not_written_as_a_file(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    target = str(tmp_path / "folder") + "/"
    code, out, err = run(args(tmp_path, target), capsys)
    assert code == 2
    assert "names a folder" in _one_error_line(err, flag, target)
    assert not (tmp_path / "folder").exists()
    assert not _leftovers(tmp_path)


@pytest.mark.parametrize("writer", list(WRITERS))
def test_an_existing_folder_is_refused(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    (tmp_path / "folder").mkdir()
    target = str(tmp_path / "folder")
    code, out, err = run(args(tmp_path, target), capsys)
    assert code == 2
    _one_error_line(err, flag, target)
    assert list((tmp_path / "folder").iterdir()) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_full_disk_is_one_line(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    code, out, err = run(args(tmp_path, "/dev/full"), capsys)
    assert code == 2
    _one_error_line(err, flag, "/dev/full")
    assert Path("/dev/full").is_char_device()  # written into, never replaced by a file
    assert not _leftovers(tmp_path)
    assert not [p for p in Path("/dev").glob(".full.*")]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_read_only_folder_is_one_line(writer, tmp_path, capsys):
    flag, args = WRITERS[writer]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        target = str(locked / "file.out")
        code, out, err = run(args(tmp_path, target), capsys)
        assert code == 2
        assert "Permission denied" in _one_error_line(err, flag, target)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


# ------------------------------------------------------------------------------------------------ tiler.io


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "t.json"
    target.write_text("old")
    real_write = os.write
    calls = []

    def half_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tio.os, "write", half_then_full)
    with pytest.raises(TilerError) as exc:
        tio.write_text(target, "new text " * 100, "export")
    assert str(exc.value) == f"export: {target}: cannot write: {os.strerror(errno.ENOSPC)}"
    assert len(calls) == 2  # the first half was written, then the disk filled
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_write_text_replaces_keeps_the_mode_and_follows_a_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("a")
    real.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    tio.write_text(link, "b")
    assert link.is_symlink() and real.read_text() == "b"
    assert real.stat().st_mode & 0o777 == 0o640
    with pytest.raises(TilerError, match="empty path"):
        tio.write_text("", "x", "out")


# ------------------------------------------------------------------------------------------------ --export -


def test_export_dash_writes_the_document_alone_on_stdout(capsys):
    code, out, err = run(SEARCH + ["--export", "-"], capsys)
    assert code == 0, err
    doc = json.loads(out)
    validate(doc)
    assert "best tiling:" in err and "best tiling:" not in out  # the report went to stderr
    code, out, err = run(SEARCH + ["--export", "-", "--format", "json"], capsys)
    assert code == 0
    assert json.loads(out)["tiling"] == doc["tiling"]  # stdout is one JSON document: the export
    assert json.loads(err)["tiling"] == doc["tiling"]  # the JSON report on stderr
    assert not Path("-").exists()


# ------------------------------------------------------------------------------------------------ entry points


def test_python_dash_m_tiler():
    proc = subprocess.run(
        [sys.executable, "-m", "tiler", "--version"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"tiler, version {tiler.__version__}"
    proc = subprocess.run(
        [sys.executable, "-m", "tiler", "search", "--op", "nope", "--chip", "h200", "--shape", "M=1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_version_on_every_subcommand(command, capsys):
    code, out, err = run([command, "--version"], capsys)
    assert code == 0, err
    assert out.strip() == f"tiler, version {tiler.__version__}"


# ------------------------------------------------------------------------------------------------ boolean knobs


@pytest.mark.parametrize(
    "word,code",
    [("true", 1), ("TRUE", 1), ("yes", 1), ("On", 1), ("1", 1), ("false", 0), ("No", 0), ("off", 0)],
)
def test_boolean_words_pin_a_boolean_knob(word, code, capsys):
    rc, out, err = run(
        SEARCH + ["--fix", f"serpentine={word}", "--fix", f"weight_resident={word}", "--format", "json"],
        capsys,
    )
    assert rc == 0, err
    tiling = json.loads(out)["tiling"]
    assert tiling["serpentine"] == code and tiling["weight_resident"] == code


def test_boolean_words_only_for_boolean_knobs(capsys):
    space = load_space("matmul", "ascend")
    assert space.knobs["serpentine"].parse("Yes") == 1
    for knob in ("tail_split", "split_k", "step_m"):  # labelled, or values other than {0, 1}
        with pytest.raises(TilerError, match=knob):
            space.knobs[knob].parse("true")
    code, out, err = run(SEARCH + ["--fix", "serpentine=maybe"], capsys)
    assert code == 2 and err.startswith("error: serpentine: must be one of 0, 1"), err
    assert len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ Python API


def test_import_tiler_is_lazy():
    code = "import sys, tiler; print(sorted(m for m in ('numpy', 'pandas', 'click', 'tiler.api') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_api_search_matches_the_cli(capsys):
    code, out, err = run(SEARCH + ["--format", "json"], capsys)
    assert code == 0, err
    cli_doc = json.loads(out)
    fix = dict(f.split("=") for f in FAST)
    res = tiler.search(op="matmul", chip="ascend910b3", shape={"M": 256, "N": 512, "K": 256}, fix=fix, top=3)
    assert res.tiling(0) == {k: cli_doc["tiling"][k] for k in res.tiling(0)}
    assert res.row(0)["time_us"] == pytest.approx(cli_doc["estimate"]["time_us"])
    doc = res.document()
    validate(doc)
    assert doc["tiling"] == cli_doc["tiling"] and doc["targets"] == cli_doc["targets"]
    same = tiler.search("matmul", "ascend910b3", SHAPE, fix=",".join(FAST), top=1)  # text forms
    assert same.tiling(0) == res.tiling(0)
    with pytest.raises(TilerError, match="top"):
        tiler.search("matmul", "ascend910b3", SHAPE, fix=fix, top=0)


def test_api_explain_rank_and_sweep(tmp_path):
    fix = dict(f.split("=") for f in FAST)
    res = tiler.search("matmul", "ascend910b3", SHAPE, fix=fix, top=3)
    ex = tiler.explain("matmul", "ascend910b3", SHAPE, res.tiling(0))
    assert ex.row["time_us"] == pytest.approx(res.row(0)["time_us"])
    assert ex.advice and validate(ex.document()) is None
    assert tiler.explain("matmul", "ascend910b3", SHAPE, res.document()).tiling == ex.tiling

    n = len(res.est["time_us"])
    assert n >= 2
    table = pd.DataFrame([res.tiling(i) for i in reversed(range(n))])  # worst first
    ranked, rejected = tiler.rank("matmul", "ascend910b3", SHAPE, table)
    assert list(ranked.sort_values("rank")["row"]) == list(range(n, 0, -1)) and rejected.empty
    csv = tmp_path / "cands.csv"
    table.to_csv(csv, index=False)
    assert tiler.rank("matmul", "ascend910b3", SHAPE, str(csv)).ranked.equals(ranked)

    shapes = pd.DataFrame({"M": [256, 512], "N": [512, 256], "K": [256, 256]})
    rep = tiler.sweep(shapes, "matmul", "ascend910b3", tmp_path / "out" / "s.csv", fix=fix)
    assert rep.ok == 2 and (tmp_path / "out" / "s.csv").is_file()
    first = rep.frame.iloc[0]
    assert first["time_us"] == pytest.approx(res.row(0)["time_us"])

    import tiler.search as search_module  # the submodules stay modules: tiler.search is both

    assert search_module is tiler.search and callable(search_module.exhaustive)
