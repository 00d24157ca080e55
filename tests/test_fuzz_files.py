"""Fuzzing of every file format tiler reads that tests/test_hostile.py, test_msprof.py, test_lookup.py and
test_check_cross.py do not already draw (issue 31: "the fuzzing suites grow to cover every file format the tool
reads, with hypothesis strategies").

Each property starts from a valid file of the format (made here or shipped in the repository), replaces one cell,
leaf or line with a drawn value (or the whole file with drawn bytes) and runs the command that reads it in-process:
it must end as the README promises (exit 0, or 1 where a command may, or exit 2 with one `error:` line), never a
traceback; a refusal names the file and the place of the damage as the user sees it (`refused_naming`: a file
line or data row, a column as the header has it, a TOML key or table, a JSON field on the path to the changed
node). The formats, and where each is fuzzed:

| format | read by | fuzzed in |
|---|---|---|
| shape CSV (any column) | `tiler sweep` | here (cells of every column, bytes); test_hostile (M, N, K cells) |
| sweep journal (`<out>.journal.db`) | `tiler sweep --resume` | here (a row's columns and result JSON) |
| sweep output CSV / Parquet | `tiler report` | here (cells, bytes) |
| search document (`tiler.tiling/v1`) | `tiler report`, `explain --tiling`, `check` | here (report); test_hostile, test_check_cross |
| library (`tiler.library/v1`) | `tiler emit`, `lookup` | here (emit); test_lookup (lookup, both loaders) |
| model config.json | `tiler shapes` | here |
| user Triton space TOML | `tiler search --space`, `tiler.triton` | here |
| chip profile TOML (by path) | `--chip FILE.toml`, `--hardware-dir` | here (values); test_hostile (bytes) |
| space TOML (`TILER_SPACES_DIR`) | every search | here (values); test_hostile (bytes) |
| measured CSV (tiler's table) | `tiler calibrate`, `rank` | here (calibrate and rank cells); test_hostile (rank cells, bytes) |
| export (`tiler.tiling/v1`) | `tiler check` | here (any node); test_check_cross (each rule broken) |
| msprof op_summary CSV, manifest CSV | `tiler calibrate` | test_msprof |
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import FAST, json_values
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile import outcome

ROOT = Path(__file__).resolve().parent.parent
FIX = [a for f in FAST for a in ("--fix", f)]
B3 = ["--op", "matmul", "--chip", "ascend910b3"]
SHAPE = "M=64,N=128,K=256"
FUZZ = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# cells and values as a careless or hostile user writes them: numbers of any size, floats, words, empty, quotes
cell_text = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=10),
    st.sampled_from(["", " ", "nan", "inf", "1e400", "9" * 400, "1,2", '"', "fp16", "nt", "-1", "0", "1.5"]),
)
toml_values = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8).map(json.dumps),
    st.lists(st.integers(-(2**40), 2**40), max_size=4).map(str),
    st.sampled_from(
        ["true", "false", "[]", '["a", 1]', "{}", "{ x = 1 }", "nan", "inf", "-inf", "0", "1e400"]
    ),
    st.text(max_size=10),  # not TOML at all
)


def _mutate_json(doc, data, max_depth: int = 8, where: list | None = None):
    """`doc` with one node (reached by drawn keys and indices) replaced by a drawn JSON value; `where` (a list)
    receives the keys and indices of the path to it (and `line *`: a position in the file)."""
    node, parent, key = doc, None, None
    where = [] if where is None else where
    where.append("line *")  # strict JSON readers refuse NaN and Infinity at the line and column they stand
    for _ in range(max_depth):
        if isinstance(node, dict) and node:
            k = data.draw(st.sampled_from(sorted(node)), label="key")
        elif isinstance(node, list) and node:
            k = data.draw(st.integers(0, len(node) - 1), label="index")
        else:
            break
        parent, key, node = node, k, node[k]
        where.append(k)
        if not data.draw(st.booleans(), label="deeper"):
            break
    value = data.draw(json_values, label="value")
    if parent is None:
        return value
    parent[key] = value
    return doc


def _mutate_toml(text: str, data, where: list | None = None) -> str:
    """`text` with the value of one `key = value` line replaced by drawn TOML (or not-TOML) text; `where` (a
    list) receives the key, its table and the line's number."""
    lines = text.splitlines()
    assigned = [i for i, line in enumerate(lines) if "=" in line and not line.lstrip().startswith("#")]
    i = data.draw(st.sampled_from(assigned), label="line")
    key = lines[i].split("=", 1)[0]
    table = next((ln.strip() for ln in reversed(lines[:i]) if ln.lstrip().startswith("[")), "")
    if where is not None:
        tables = table.strip("[]").split(".")  # [ascend.base_k]: its family's table [ascend] is a place too
        where += [key.strip(), *(".".join(tables[: j + 1]) for j in range(len(tables)))]
        where += [
            f"line {i + 1}",
            "line *",
        ]  # line *: TOML's parser names where a value of several lines ends
        for j in range(
            i - 1, -1, -1
        ):  # a line inside an array of several lines (`key = [`): the array's key too
            s = lines[j].strip()
            opened = re.match(r"([\w\"'.-]+)\s*=\s*\[\s*(#.*)?$", s)
            if opened:
                where.append(opened.group(1))
            if opened or s.startswith(("[", "]")):
                break
    lines[i] = f"{key}= {data.draw(toml_values, label='value')}"
    return "\n".join(lines) + "\n"


def _csv(rows: list[list[str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue()


def _mutate_csv(text: str, data, where: list | None = None) -> str:
    """`text` (a CSV with a header) with one cell, header cell included, replaced by a drawn cell; `where` (a
    list) receives the ways a message may name that cell: its column (as the header had it, and as drawn when the
    header cell was replaced), its data row and its file line (`row 2`, `line 3`; the header is line 1)."""
    rows = list(csv.reader(io.StringIO(text)))
    r = data.draw(st.integers(0, len(rows) - 1), label="row")
    c = data.draw(st.integers(0, len(rows[r]) - 1), label="column")
    cell = data.draw(cell_text, label="cell")
    if where is not None:  # a header cell changes what every row means: any column, row or line then
        where += [rows[0][c], f"line {r + 1}"] + ([f"row {r}"] if r else ["header", cell, *rows[0], "row *"])
    rows[r][c] = cell
    return _csv(rows)


def refused_naming(capsys, argv: list, file: Path, where=()) -> tuple[int, str, str]:
    """`outcome`, and a refusal (exit 2) names the file (its name, as given) and, where the damage has a place
    (a line, a column, a field), one of the ways `where` lists of naming it, as the user sees it."""
    rc, out, err = outcome(capsys, argv)
    if rc == 2:
        line = err.strip()
        assert file.name in line, f"the error does not name the file {file.name}: {line[:400]}"
        places = [str(w) for w in where if str(w).strip()]
        assert not places or any(_names(line, w) for w in places), f"names none of {places}: {line[:400]}"
    return rc, out, err


def _names(line: str, what: str) -> bool:
    """Whether an error line names `what`: a line/row number as written (`line *`: any line, where the file's
    parser says where it stopped), or a column, key or field as a word (quoted, or followed by ':', '=', ']', ',',
    '.', '/', ' ', '[' or the end: `chip` in `chip.id: ...`, `entries` in `entries/0`, `restrictions` in
    `restrictions[3]`), not as part of another word."""
    if what in ("line *", "row *"):
        return re.search(rf"\b{what[:-2]} \d+", line) is not None
    if what.startswith(("line ", "row ")):
        return re.search(re.escape(what) + r"(?!\d)", line) is not None
    word = re.escape(what.strip())
    return re.search(rf"(?<![\w.])['\"\[]?{word}['\"\]]?(?=[:=\],;./) \[]|$)", line) is not None


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A small valid sweep on ascend910b3: its output CSV, its journal and its library."""
    tmp = tmp_path_factory.mktemp("swept")
    shapes = tmp / "shapes.csv"
    shapes.write_text("M,N,K,name\n64,128,256,a.q\n96,128,256,a.q\n128,256,64,b\n")
    out, lib = tmp / "out.csv", tmp / "lib.json"
    argv = ["sweep", str(shapes), *B3, "--out", str(out), "--library", str(lib), "--quiet", *FIX]
    from tiler.cli import main

    assert main(argv) == 0
    return {"shapes": shapes, "out": out, "lib": lib, "argv": argv}


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """A search document (tiler.tiling/v1 with alternatives) to draw as a report."""
    from tiler.cli import main

    p = tmp_path_factory.mktemp("doc") / "doc.json"
    assert main(["search", *B3, "--shape", SHAPE, *FIX, "--top", "3", "--export", str(p)]) == 0
    return json.loads(p.read_text())


# ------------------------------------------------------------------ sweep inputs


SWEEP_HEADER = ["M", "N", "K", "batch", "dtype", "layout", "name", "count"]
SWEEP_GOOD = ["64", "128", "256", "1", "fp16", "nn", "layers.0.q", "2"]


@FUZZ
@given(data=st.data())
def test_any_shape_row_is_refused_or_swept(data, tmp_path, capsys):
    """A shape CSV of every column a sweep reads, one cell (header too) replaced by any text."""
    p, where = tmp_path / "shapes.csv", []
    p.write_text(_mutate_csv(_csv([SWEEP_HEADER, SWEEP_GOOD, SWEEP_GOOD]), data, where), encoding="utf-8")
    refused_naming(
        capsys, ["sweep", str(p), *B3, "--out", str(tmp_path / "o.csv"), "--quiet", *FIX], p, where
    )


@FUZZ
@given(data=st.binary(max_size=256), suffix=st.sampled_from([".csv", ".parquet"]))
def test_any_shape_file_bytes_are_refused_or_swept(data, suffix, tmp_path, capsys):
    p = tmp_path / f"shapes{suffix}"
    p.write_bytes(data)
    refused_naming(capsys, ["sweep", str(p), *B3, "--out", str(tmp_path / "o.csv"), "--quiet", *FIX], p)


JOURNAL_COLUMNS = ("key", "chip", "op", "problem", "strategy", "seed", "status", "kind", "error", "result")


@FUZZ
@given(data=st.data())
def test_any_journal_field_is_refused_or_resumed(swept, data, tmp_path_factory, capsys):
    """A finished sweep's journal with one column of one row replaced (a drawn JSON value, as text or as a SQLite
    value), or one node of a row's result JSON replaced: `--resume` reuses it, re-runs it, or refuses the journal
    in one line; never a traceback (a result damaged inside is searched again)."""
    out = tmp_path_factory.mktemp("resume") / "out.csv"  # a fresh folder per example: no -wal of the last one
    journal = Path(str(out) + ".journal.db")
    shutil.copy(str(swept["out"]) + ".journal.db", journal)
    db = sqlite3.connect(journal)
    keys = [k for (k,) in db.execute("SELECT key FROM results ORDER BY rowid")]
    key = data.draw(st.sampled_from(keys), label="row")
    column = data.draw(st.sampled_from(JOURNAL_COLUMNS), label="column")
    if column == "result" and data.draw(st.booleans(), label="inside"):
        (text,) = db.execute("SELECT result FROM results WHERE key = ?", (key,)).fetchone()
        value = json.dumps(_mutate_json(json.loads(text), data), allow_nan=True)
    else:
        drawn = data.draw(json_values, label="value")
        value = drawn if isinstance(drawn, int | float | str) or drawn is None else json.dumps(drawn)
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            value = str(value)
    try:
        db.execute(f"UPDATE results SET {column} = ? WHERE key = ?", (value, key))  # noqa: S608 -- a test's own column
    except sqlite3.IntegrityError:  # a NULL in a NOT NULL column, a duplicate key: SQLite refuses it already
        db.close()
        return
    db.commit()
    db.close()
    lib = ["--library", str(out.with_suffix(".json"))] if data.draw(st.booleans(), label="library") else []
    argv = ["sweep", str(swept["shapes"]), *B3, "--out", str(out), "--quiet", "--resume", *lib, *FIX]
    rc, _, err = refused_naming(capsys, argv, journal, [column, key[:40]])
    assert rc in (0, 2), err[-500:]


# ------------------------------------------------------------------ report inputs


@FUZZ
@given(data=st.data())
def test_any_sweep_output_cell_is_refused_or_reported(swept, data, tmp_path, capsys):
    """A sweep output with one cell (header included) replaced by any text: a page or one line."""
    p, where = tmp_path / "res.csv", []
    p.write_text(_mutate_csv(swept["out"].read_text(), data, where), encoding="utf-8")
    refused_naming(capsys, ["report", str(p), "--out", str(tmp_path / "r.html")], p, where)


@FUZZ
@given(data=st.data())
def test_any_document_field_is_refused_or_reported(document, data, tmp_path, capsys):
    """A search document with one node replaced by any JSON value: a page or one line."""
    import copy

    p, where = tmp_path / "doc.json", []
    p.write_text(json.dumps(_mutate_json(copy.deepcopy(document), data, where=where), allow_nan=True))
    refused_naming(capsys, ["report", str(p), "--out", str(tmp_path / "r.html")], p, where)


@FUZZ
@given(data=st.binary(max_size=256), suffix=st.sampled_from([".csv", ".json", ".parquet", ".txt"]))
def test_any_result_bytes_are_refused_or_reported(data, suffix, tmp_path, capsys):
    p = tmp_path / f"res{suffix}"
    p.write_bytes(data)
    refused_naming(capsys, ["report", str(p), "--out", str(tmp_path / "r.html")], p)


# ------------------------------------------------------------------ libraries into code


@FUZZ
@given(data=st.data(), target=st.sampled_from(["catlass", "ascendc"]))
def test_any_library_field_is_refused_or_emitted(swept, data, target, tmp_path, capsys):
    """`tiler emit` of a library with one node replaced by any JSON value: a unit or one line."""
    p, where = tmp_path / "lib.json", []
    p.write_text(
        json.dumps(_mutate_json(json.loads(swept["lib"].read_text()), data, where=where), allow_nan=True)
    )
    refused_naming(capsys, ["emit", str(p), "--target", target], p, where)


# ------------------------------------------------------------------ model configs


@FUZZ
@given(data=st.data(), op=st.sampled_from(["matmul", "flash_attention"]))
def test_any_model_config_field_is_refused_or_read(data, op, tmp_path, capsys):
    """`tiler shapes` of a Hugging Face config.json with one field replaced by any JSON value."""
    cfg = json.loads((ROOT / "examples" / "models" / "llama-3-8b" / "config.json").read_text())
    p, where = tmp_path / "config.json", []
    p.write_text(json.dumps(_mutate_json(cfg, data, max_depth=2, where=where), allow_nan=True))
    refused_naming(capsys, ["shapes", str(p), "--op", op, "--tokens", "1,128"], p, where)


# ------------------------------------------------------------------ TOML files


@FUZZ
@given(data=st.data())
def test_any_user_space_value_is_refused_or_searched(data, tmp_path, capsys):
    """A user's Triton space (examples/triton/tutorial_gemm.toml) with one value replaced by any TOML text."""
    text = (ROOT / "examples" / "triton" / "tutorial_gemm.toml").read_text()
    p, where = tmp_path / "space.toml", []
    p.write_text(_mutate_toml(text, data, where), encoding="utf-8")
    argv = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=256,N=256,K=256", "--space", str(p)]
    refused_naming(capsys, argv, p, where)


@FUZZ
@given(data=st.data())
def test_any_chip_profile_value_is_refused_or_searched(data, tmp_path, capsys):
    """`--chip FILE.toml`: the 910B3 profile with one value replaced by any TOML text."""
    text = (ROOT / "hardware" / "ascend910b3.toml").read_text()
    p, where = tmp_path / "mychip.toml", []
    p.write_text(_mutate_toml(text, data, where), encoding="utf-8")
    argv = ["search", "--op", "matmul", "--chip", str(p), "--shape", SHAPE, *FIX, "--top", "1"]
    refused_naming(capsys, argv, p, where)


@FUZZ
@given(data=st.data())
def test_any_space_value_is_refused_or_searched(data, tmp_path, capsys, monkeypatch):
    """TILER_SPACES_DIR: the shipped matmul space with one value replaced by any TOML text."""
    text = (ROOT / "search_spaces" / "matmul.toml").read_text()
    p, where = tmp_path / "matmul.toml", []
    p.write_text(_mutate_toml(text, data, where), encoding="utf-8")
    monkeypatch.setenv("TILER_SPACES_DIR", str(tmp_path))
    refused_naming(capsys, ["search", *B3, "--shape", SHAPE, *FIX, "--top", "1"], p, where)


# ------------------------------------------------------------------ measured tables


@FUZZ
@given(data=st.data())
def test_any_measured_cell_is_refused_or_calibrated(data, tmp_path, capsys):
    """A tiler measurement table (h200 matmul, the first rows of tests/data/h200_matmul_cal.csv) with one cell,
    header included, replaced by any text."""
    lines = (ROOT / "tests" / "data" / "h200_matmul_cal.csv").read_text().splitlines()
    p, where = tmp_path / "m.csv", []
    p.write_text(_mutate_csv("\n".join(lines[:9]) + "\n", data, where), encoding="utf-8")
    argv = ["calibrate", "--chip", "h200", "--op", "matmul", "--measurements", str(p)]
    refused_naming(capsys, [*argv, "--out", str(tmp_path / "o.toml"), "--folds", "0"], p, where)


@FUZZ
@given(data=st.data())
def test_any_candidate_cell_is_refused_or_ranked(data, tmp_path, capsys):
    """`tiler rank --candidates`: the same measurement table (tiling columns and times) with one cell, header
    included, replaced by any text: a ranking, or one line naming the file and the cell's column or row."""
    lines = (ROOT / "tests" / "data" / "h200_matmul_cal.csv").read_text().splitlines()
    p, where = tmp_path / "c.csv", []
    p.write_text(_mutate_csv("\n".join(lines[:9]) + "\n", data, where), encoding="utf-8")
    argv = [
        "rank",
        "--op",
        "matmul",
        "--chip",
        "h200",
        "--shape",
        "M=16,N=4096,K=4096",
        "--candidates",
        str(p),
    ]
    refused_naming(capsys, argv, p, where)


@FUZZ
@given(data=st.data())
def test_any_export_field_is_refused_or_checked(document, data, tmp_path, capsys):
    """`tiler check` of an export (a search document) with one node replaced by any JSON value: ok, findings
    (exit 1), or one line naming the file and a field on the path to the node (test_check_cross shows that the
    findings are the right ones)."""
    import copy

    p, where = tmp_path / "export.json", []
    p.write_text(json.dumps(_mutate_json(copy.deepcopy(document), data, where=where), allow_nan=True))
    refused_naming(capsys, ["check", str(p)], p, where)


USER_PARAMS = ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages"]
restriction_token = st.one_of(
    st.sampled_from(
        [*USER_PARAMS, "TEMPLATE", "x", "min", "max", "abs", "__import__", "lambda", "in", "not"]
    ),
    st.sampled_from(
        ["+", "-", "*", "/", "//", "%", "**", "<<", ">>", "&", "|", "^", "~", "==", "<=", "<", "!="]
    ),
    st.sampled_from(["and", "or", "if", "else", "(", ")", "[", "]", ",", ".", ":", "'tma'", '"a"', "True"]),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["0", "1", "99999999999", "9" * 500, "1e400", "0.5", "nan"]),
)


@FUZZ
@given(
    restrictions=st.lists(st.lists(restriction_token, min_size=1, max_size=9).map(" ".join), max_size=3),
    values=st.lists(st.one_of(st.integers(-(2**40), 2**40), st.sampled_from(["tma", "", 1.5])), max_size=4),
    param=st.sampled_from(USER_PARAMS),
)
def test_any_user_restriction_is_refused_or_searched(restrictions, values, param, tmp_path, capsys):
    """A user space whose restrictions are drawn token strings (names, operators, huge numbers, strings, words
    a restriction may not use) and one param's values any list: configs ranked, or one line."""
    params = {p: [32, 64, 128] for p in USER_PARAMS} | {
        "GROUP_SIZE_M": [8],
        "num_warps": [4],
        "num_stages": [3],
    }
    params[param] = values
    text = 'op = "matmul"\nrestrictions = ' + json.dumps(restrictions) + "\n[params]\n"
    text += "".join(f"{k} = {json.dumps(v)}\n" for k, v in params.items())
    p = tmp_path / "space.toml"
    p.write_text(text, encoding="utf-8")
    argv = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=256,N=256,K=256", "--space", str(p)]
    refused_naming(capsys, argv, p, [param, *(f"restrictions[{i}]" for i in range(len(restrictions)))])


# ------------------------------------------------------------------ optuna storages

STUDY_TABLES = [
    "studies",
    "trials",
    "version_info",
    "alembic_version",
    "study_directions",
    "trial_values",
    "x",
]


@FUZZ
@given(
    raw=st.one_of(st.none(), st.binary(max_size=2048)),
    tables=st.lists(
        st.tuples(st.sampled_from(STUDY_TABLES), st.lists(st.sampled_from(["study_id", "study_name", "a"]),
                                                        min_size=1, max_size=3, unique=True)),
        max_size=3, unique_by=lambda t: t[0],
    ),
)  # fmt: skip
def test_any_storage_file_is_refused_or_searched(raw, tables, tmp_path_factory, capsys):
    """`--storage FILE.db` holding drawn bytes, or a SQLite database of drawn tables (optuna's names or others):
    a search or one line."""
    db = tmp_path_factory.mktemp("storage") / "s.db"
    if raw is not None:
        db.write_bytes(raw)
    else:
        con = sqlite3.connect(db)
        for table, cols in tables:
            con.execute(f"CREATE TABLE {table} ({', '.join(cols)})")
        con.commit()
        con.close()
    argv = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=64,N=128,K=256", "--strategy", "tpe"]
    refused_naming(capsys, [*argv, "--trials", "2", "--storage", str(db)], db)


@pytest.mark.parametrize(
    "restriction, why",
    [
        ("1 << 99999999999 > 0", "1 << 99999999999 overflows 64-bit integers"),
        ("BLOCK_SIZE_M << 60 > 0", "BLOCK_SIZE_M << 60 overflows 64-bit integers"),
        ("BLOCK_SIZE_M * 99999999999 * 99999999999 > 0", "overflows 64-bit integers"),
        ("BLOCK_SIZE_M - 9223372036854775807 - 9223372036854775807 < 0", "overflows 64-bit integers"),
        ("2 ** 99999 > BLOCK_SIZE_M", "2 ** 99999 overflows"),
        ("BLOCK_SIZE_M << -1 > 0", "negative shift count"),
    ],
)
def test_an_over_large_integer_restriction_is_refused_naming_it(restriction, why, tmp_path, capsys):
    """numpy computes a restriction in int64 and wraps silently (`1 << 99999999999` is 0, which would keep or
    drop configs by accident): a shift, product, sum or power past 64 bits is one line naming the restriction
    (its index and text) and what overflowed, exit 2; the same restriction with small numbers is searched."""
    params = "".join(f"{k} = [32, 64, 128]\n" for k in USER_PARAMS[:3])
    params += "GROUP_SIZE_M = [8]\nnum_warps = [4]\nnum_stages = [3]\n"
    argv = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=256,N=256,K=256"]
    for text, rc_want in ((restriction, 2), ("BLOCK_SIZE_M << 2 > 0", 0)):
        p = tmp_path / "space.toml"
        p.write_text(
            f'op = "matmul"\nrestrictions = ["BLOCK_SIZE_N > 0", {json.dumps(text)}]\n[params]\n{params}'
        )
        rc, _, err = outcome(capsys, [*argv, "--space", str(p)])
        assert rc == rc_want, err
        if rc_want == 2:
            assert "restrictions[1]" in err and repr(text) in err and why in err, err


def test_the_naming_check_can_fail():
    """refused_naming's test of a line: the file by name, then a place as a word or a number, not a substring."""
    line = "error: --measurements: m.csv: row 12: column 'K' must be a number"
    assert (
        _names(line, "K") and _names(line, "row 12") and _names(line, "row *") and not _names(line, "row 1")
    )
    assert not _names(line, "line *") and not _names(line, "M") and not _names(line, "numb")
    assert _names("error: RESULT: doc.json: chip.id: not as ...", "chip")
    assert _names("error: library: lib.json: entries/0: must be an object", "entries")
