"""Hostile inputs (issue 14): every command and file type fed malformed, huge, binary or absurd input.

Every case runs in-process through `tiler.cli.main` and must end as the README promises: exit 0, exit 2 with exactly
one stderr line `error: ...`, or exit 1 only where the README allows it (`sweep` with failed rows, `check` with a
broken rule); never a traceback. The hand-written cases below are grouped by what they attack; the hypothesis
properties at the end draw shapes, knob values, CSV cells and file bytes. Shapes are small so the file runs fast.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiler.cli import main

ROOT = Path(__file__).resolve().parent.parent
SHAPE = "M=64,N=64,K=64"
B3 = ["--op", "matmul", "--chip", "ascend910b3"]
H200 = ["--op", "matmul", "--chip", "h200"]
# pins that make a search or sweep row take a few hundredths of a second
FAST = [
    "base_m=64",
    "base_n=64",
    "base_k=64",
    "step_m=1",
    "step_n=1",
    "step_ka=1",
    "step_kb=1",
    "l1_stages=2",
    "preload=1",
    "split_k=1",
]
FIX = [a for f in FAST for a in ("--fix", f)]

# exits each command may end with; 1 only where the README says so
ALLOWED = {"sweep": {0, 1, 2}, "check": {0, 1, 2}}


def outcome(capsys, argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; fail on a traceback, an exit the command may not give, or a multi-line error."""
    try:
        rc = main([str(a) for a in argv])
    except BaseException as exc:  # noqa: BLE001 -- anything escaping main() is a traceback for the user
        pytest.fail(f"tiler {' '.join(map(str, argv))[:300]} raised {exc!r}")
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err, err[-2000:]
    command = next((a for a in argv if a in ("search", "explain", "rank", "check", "calibrate", "sweep")), "")
    assert rc in ALLOWED.get(command, {0, 2}), f"exit {rc}: {err[-1000:]}"
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), err[-2000:]
    return rc, out, err


# ------------------------------------------------------------------ values

# (text, whether a problem field must refuse it): numbers with no upper bound, not numbers, empty
NUMBERS = [
    ("inf", True),
    ("-inf", True),
    ("Infinity", True),
    ("nan", True),
    ("NaN", True),
    ("1e400", True),
    ("-1e400", True),
    ("2^63", True),
    ("2**63", True),
    (str(2**63), True),
    (str(2**64), True),
    (str(2**32), True),
    (str(2**31), True),
    ("9" * 400, True),
    ("1" + "0" * 5000, True),
    ("0", True),
    ("-1", True),
    ("-64", True),
    ("1.5", True),
    ("64.000001", True),
    ("0x40", True),
    ("abc", True),
    ("64abc", True),
    ("1e10", True),
    ("6.4e1", False),  # 64: a float with no fraction is the integer
    ("64.0", False),
    (" 64 ", False),
    ("+64", False),
    ("６４", False),  # fullwidth digits: Python reads them as 64
    ("True", True),
    ("[64]", True),
    ("{}", True),
    ("\x00", True),
    ("64\x00", True),
    ("∞", True),
    ("1e-400", True),
    ("-0", True),
    ("4.9e-324", True),
    ("1.7976931348623157e308", True),
]
BAD_NUMBERS = [t for t, bad in NUMBERS if bad]

# knob values for --fix / --tiling / CSV cells: all of these are outside every knob's domain
BAD_KNOB_VALUES = [
    "inf",
    "-inf",
    "nan",
    "1e400",
    str(2**63),
    str(2**64),
    str(2**31),
    "9" * 400,
    "0",
    "-16",
    "16.5",
    "abc",
    "",
    "2^63",
    "0x10",
    "1e30",
]


def _shape_cases():
    for text, bad in NUMBERS:
        if "," in text or "=" in text:
            continue
        want = {2} if bad else {0}
        yield pytest.param(
            ["search", *B3, "--shape", f"M={text},N=64,K=64", *FIX], want, id=f"search-M-{text[:12]!r}"
        )
    for field in ("N", "K", "batch"):
        for text in ("inf", "1e400", str(2**63), "9" * 400, "nan", "", "0", "-5"):
            shape = ",".join(f"{k}={text if k == field else 64}" for k in ("M", "N", "K", "batch"))
            want = {0} if field == "batch" and text == "" else {2}
            yield pytest.param(
                ["search", *B3, "--shape", shape, *FIX], want, id=f"search-{field}-{text[:12]!r}"
            )
    other = [
        "M=2147483647,N=2147483647,K=64",  # each field fits, the output tensor does not
        "M=4294967296,N=64,K=64",
        "M=64,N=1099511627776,K=64",
        "M=64,N=64",
        "M=64,N=64,K=64,K=64",
        "M=64,N=64,K=64,Q=3",
        "M=64;N=64;K=64",
        "M64,N64,K64",
        "",
        ",,,",
        "=,=,=",
        "M=64,N=64,K=64,layout=xx",
        "M=64,N=64,K=64,b_format=zz",
        "M=64,N=64,K=64,layout=1",
        "m=64,n=64,k=64",
        "M=64,N=64,K=64," + "X=1," * 500,
        "M=" + "9" * 10000 + ",N=64,K=64",
    ]
    for shape in other:
        yield pytest.param(["search", *B3, "--shape", shape], {2}, id=f"search-shape-{shape[:24]!r}")
    dw = ["--op", "depthwise_conv", "--chip", "ascend910b3"]
    for shape in (
        "N=1,C=16,H=8,W=8,kh=3,kw=3,pad=inf",
        "N=1,C=16,H=8,W=8,kh=3,kw=3,pad=-1",
        "N=1,C=16,H=8,W=8,kh=99,kw=3",
        "N=1,C=16,H=8,W=8,kh=3,kw=3,stride=0",
        "N=1,C=16,H=8,W=8,kh=3,kw=3,dilation=1e400",
        "N=2147483647,C=2147483647,H=8,W=8,kh=3,kw=3",
        "N=1,C=16,H=8,W=8,kh=3,kw=" + str(2**63),
    ):
        yield pytest.param(["search", *dw, "--shape", shape], {2}, id=f"dw-{shape[-16:]!r}")


def _option_cases():
    base = ["search", *B3, "--shape", SHAPE, *FIX]
    for dtype, want in [
        ("", {2}),
        (" ", {2}),
        ("fp64", {2}),
        ("FP16", {0}),
        ("\x00", {2}),
        ("fp16;rm -rf", {2}),
        ("int4", {2}),
    ]:
        yield pytest.param([*base, "--dtype", dtype], want, id=f"dtype-{dtype!r}")
    for top, want in [
        ("0", {2}),
        ("-1", {2}),
        ("1000000", {2}),
        (str(2**64), {2}),
        ("1e3", {2}),
        ("abc", {2}),
        ("1000", {0}),
        ("3", {0}),
    ]:
        yield pytest.param([*base, "--top", top], want, id=f"top-{top[:10]}")
    rnd = ["--strategy", "random", "--storage", "memory"]
    for trials, want in [
        ("0", {2}),
        ("-1", {2}),
        (str(2**64), {2}),
        ("10000000", {2}),
        ("nan", {2}),
        ("2", {0}),
    ]:
        yield pytest.param([*base, *rnd, "--trials", trials], want, id=f"trials-{trials[:10]}")
    for seed, want in [
        ("-1", {2}),
        (str(2**32), {2}),
        (str(2**64), {2}),
        ("1.5", {2}),
        (str(2**32 - 1), {0}),
    ]:
        yield pytest.param([*base, *rnd, "--trials", "2", "--seed", seed], want, id=f"seed-{seed[:10]}")
    for strategy in ("", "EXHAUSTIVE ", "bogus", "tpe;random"):
        yield pytest.param([*base, "--strategy", strategy], {2}, id=f"strategy-{strategy!r}")
    for target in ("", "nope", "triton"):  # triton is a CUDA target: not for an Ascend chip
        yield pytest.param([*base, "--target", target], {2}, id=f"target-{target!r}")
    for chip in ("", "nope", "../hardware/ascend910b3", "/dev/null.toml", "a" * 5000, "h200\x00"):
        yield pytest.param(
            ["search", "--op", "matmul", "--chip", chip, "--shape", SHAPE], {2}, id=f"chip-{chip[:12]!r}"
        )
    for op in ("", "MATMUL ", "conv", "../matmul"):
        yield pytest.param(["search", "--op", op, "--chip", "h200", "--shape", SHAPE], {2}, id=f"op-{op!r}")


def _fix_cases():
    base = ["search", *B3, "--shape", SHAPE]
    for value in BAD_KNOB_VALUES:
        yield pytest.param([*base, "--fix", f"base_m={value}"], {2}, id=f"fix-open-{value[:12]!r}")
        yield pytest.param([*base, "--fix", f"split_k={value}"], {2}, id=f"fix-closed-{value[:12]!r}")
    for fix in ("base_m", "=64", "nope=1", "base_m==64", "iterate_order=x", "serpentine=maybe", "BLOCK_M=64"):
        yield pytest.param([*base, "--fix", fix], {2}, id=f"fix-{fix!r}")
    for value in ("inf", str(2**63), "0", "-1", "1e400"):
        yield pytest.param(
            ["search", *H200, "--shape", SHAPE, "--fix", f"SPLIT_K={value}"], {2}, id=f"fix-cuda-{value[:10]}"
        )


# ------------------------------------------------------------------ files


def _profile_text(chip: str = "ascend910b3") -> str:
    return (ROOT / "hardware" / f"{chip}.toml").read_text()


def _set_value(text: str, key: str, value: str) -> str:
    new, n = re.subn(rf"^{key} = \{{ value = [^,]+,", f"{key} = {{ value = {value},", text, flags=re.M)
    assert n == 1, key
    return new


# name -> profile text (or bytes) written as ascend910b3.toml in its own --hardware-dir
PROFILES = {
    "cores-1e7": lambda: _set_value(_profile_text(), "cores", "10000000"),
    "cores-2^62": lambda: _set_value(_profile_text(), "cores", str(2**62)),
    "cores-0": lambda: _set_value(_profile_text(), "cores", "0"),
    "cores-neg": lambda: _set_value(_profile_text(), "cores", "-4"),
    "cores-float": lambda: _set_value(_profile_text(), "cores", "20.5"),
    "cores-string": lambda: _set_value(_profile_text(), "cores", '"20"'),
    "cores-bool": lambda: _set_value(_profile_text(), "cores", "true"),
    "cores-array": lambda: _set_value(_profile_text(), "cores", "[20]"),
    "clock-inf": lambda: _set_value(_profile_text(), "clock_mhz", "inf"),
    "clock-nan": lambda: _set_value(_profile_text(), "clock_mhz", "nan"),
    "clock-1e300": lambda: _set_value(_profile_text(), "clock_mhz", "1e300"),
    "hbm-2^63": lambda: _set_value(_profile_text(), "hbm_bytes", str(2**63 - 1)),
    "l1-huge": lambda: _set_value(_profile_text(), "l1_bytes", str(2**62)),
    "l2-gbps-1e20": lambda: _set_value(_profile_text(), "l2_gbps", "1e20"),
    "vector-cores-1e9": lambda: _set_value(_profile_text(), "vector_cores", "1000000000"),
    "head-us-inf": lambda: _set_value(_profile_text(), "head_base_us", "inf"),
    "macs-1e30": lambda: _set_value(_profile_text(), "macs_per_cycle_fp16", "1e30"),
    "binary": lambda: bytes(range(256)) * 8,
    "utf16": lambda: _profile_text().encode("utf-16"),
    "latin1": lambda: ("# caf\xe9\n" + _profile_text()).encode("latin-1"),
    "empty": lambda: "",
    "deep": lambda: "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "not-toml": lambda: "{ this is not toml",
    "no-family": lambda: _profile_text().replace('family = "ascend"', ""),
    "family-gpu": lambda: _profile_text().replace('family = "ascend"', 'family = "gpu"'),
    "section-string": lambda: 'id = "x"\nfamily = "ascend"\nname = "x"\ncompute = "fast"\n',
    "bad-tag": lambda: _profile_text().replace('tag = "confirmed"', 'tag = "sure"', 1),
    "no-source": lambda: re.sub(r'source = "[^"]*"', 'source = ""', _profile_text(), count=1),
    "value-bare": lambda: re.sub(r"^cores = .*$", "cores = 20", _profile_text(), flags=re.M),
    "unknown-section": lambda: (
        _profile_text() + '\n[turbo]\nx = { value = 1, tag = "confirmed", source = "s" }\n'
    ),
}


def _write_profiles(root: Path) -> dict[str, Path]:
    out = {}
    for name, make in PROFILES.items():
        d = root / f"hw-{name}"
        d.mkdir()
        data = make()
        (d / "ascend910b3.toml").write_bytes(data if isinstance(data, bytes) else data.encode())
        out[name] = d
    d = root / "hw-dangling"
    d.mkdir()
    (d / "ascend910b3.toml").symlink_to(root / "no-such-target.toml")
    out["dangling"] = d
    d = root / "hw-folder"
    (d / "ascend910b3.toml").mkdir(parents=True)
    out["folder"] = d
    return out


def _space_text() -> str:
    return (ROOT / "search_spaces" / "matmul.toml").read_text()


def _set_values(text: str, family: str, knob: str, values: str) -> str:
    head = f"[{family}.{knob}]\n"
    i = text.index(head) + len(head)
    j = text.index("\n", text.index("values", i))
    return text[:i] + text[i:j].split("values")[0] + f"values = {values}" + text[j:]


# name -> matmul.toml text (or bytes) written to its own TILER_SPACES_DIR; searched on h200 (cuda) and b3 (ascend)
SPACES = {
    "split_k-0": lambda: _set_values(_space_text(), "ascend", "split_k", "[0]"),
    "SPLIT_K-0": lambda: _set_values(_space_text(), "cuda", "SPLIT_K", "[0]"),
    "SPLIT_K-neg": lambda: _set_values(_space_text(), "cuda", "SPLIT_K", "[-2, 1]"),
    "BLOCK_M-strings": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", '["64", "128"]'),
    "BLOCK_M-floats": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[64.0, 128.5]"),
    "BLOCK_M-inf": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[inf]"),
    "BLOCK_M-huge": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", f"[{2**62}]"),
    "BLOCK_M-bool": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[true]"),
    "BLOCK_M-nested": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[[64]]"),
    "BLOCK_M-empty": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[]"),
    "BLOCK_M-many": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", str(list(range(16, 16 * 300, 16)))),
    "BLOCK_M-dup": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "[64, 64]"),
    "BLOCK_M-scalar": lambda: _set_values(_space_text(), "cuda", "BLOCK_M", "64"),
    "num_stages-0": lambda: _set_values(_space_text(), "cuda", "num_stages", "[0, 2]"),
    "ORDER-7": lambda: _set_values(_space_text(), "cuda", "ORDER", "[7]"),
    "ORDER-labels": lambda: _space_text().replace(
        'labels = ["row", "grouped", "serpentine"]', 'labels = ["a", "b", "c"]'
    ),
    "ORDER-labels-short": lambda: _space_text().replace(
        'labels = ["row", "grouped", "serpentine"]', 'labels = ["row"]'
    ),
    "knob-missing": lambda: _space_text().replace("[cuda.SPLIT_K]", "[cuda.SPLIT_K_GONE]"),
    "knob-table-string": lambda: _space_text().replace(
        "[cuda.SPLIT_K]\n", '[cuda]\nSPLIT_K = "x"\n[cuda.zzz]\n'
    ),
    "open-string": lambda: _space_text().replace(
        'open = true\ndoc = "L0 block rows', 'open = "yes"\ndoc = "', 1
    ),
    "family-string": lambda: 'op = "matmul"\ncuda = "all"\nascend = 1\n',
    "binary": lambda: bytes(range(256)) * 8,
    "utf16": lambda: _space_text().encode("utf-16"),
    "deep": lambda: "x = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "not-toml": lambda: "[cuda.BLOCK_M\nvalues = [",
    "empty": lambda: "",
}


def _write_spaces(root: Path) -> dict[str, Path]:
    out = {}
    for name, make in SPACES.items():
        d = root / f"sp-{name}"
        d.mkdir()
        data = make()
        (d / "matmul.toml").write_bytes(data if isinstance(data, bytes) else data.encode())
        out[name] = d
    d = root / "sp-dangling"
    d.mkdir()
    (d / "matmul.toml").symlink_to(root / "no-such-space.toml")
    out["dangling"] = d
    d = root / "sp-folder"
    (d / "matmul.toml").mkdir(parents=True)
    out["folder"] = d
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Hostile files shared by the cases: name -> path."""
    root = tmp_path_factory.mktemp("hostile")
    f: dict[str, Path] = {}

    def put(name: str, data: str | bytes) -> None:
        p = root / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        f[name] = p

    put("binary", bytes(range(256)) * 16)
    put("zeros", b"\x00" * 4096)
    put("utf16.json", '{"base_m": 64}'.encode("utf-16"))
    put("latin1.csv", "name,caf\xe9\n1,2\n".encode("latin-1"))
    put("empty", "")
    put("deep-list.json", "[" * 100_000 + "]" * 100_000)
    put("deep-object.json", '{"a":' * 100_000 + "1" + "}" * 100_000)
    put("bigint.json", '{"base_m": ' + "9" * 5000 + "}")
    put("array.json", "[1, 2, 3]")
    put("string.json", '"tiling"')
    put("null.json", "null")
    put("bom.json", "\ufeff{}".encode())
    (root / "folder.json").mkdir()
    f["folder.json"] = root / "folder.json"
    (root / "dangling.json").symlink_to(root / "missing-target")
    f["dangling.json"] = root / "dangling.json"
    f["missing.json"] = root / "missing.json"
    # a real export, then copies with hostile values
    export = root / "good.json"
    rc = main(["search", *B3, "--shape", SHAPE, *FIX, "--export", str(export)])
    assert rc == 0
    f["good.json"] = export
    doc = json.loads(export.read_text())
    for label, value in [
        ("inf", float("inf")),
        ("nan", float("nan")),
        ("big", 2**63),
        ("huge", 10**300),
        ("neg", -64),
        ("zero", 0),
        ("str", "sixty-four"),
        ("list", [64]),
        ("null", None),
        ("bool", True),
        ("float", 64.5),
    ]:
        bad = json.loads(json.dumps(doc))
        bad["tiling"]["base_m"] = value
        put(f"tiling-{label}.json", json.dumps(bad))
        bad = json.loads(json.dumps(doc))
        bad["problem"]["shape"]["M"] = value
        put(f"problem-{label}.json", json.dumps(bad))
    for label, edit in [
        ("no-schema", lambda d: d.pop("schema")),
        ("schema-other", lambda d: d.__setitem__("schema", "tiler.tiling/v999")),
        ("chip-unknown", lambda d: d.__setitem__("chip", {"id": "nope"})),
        ("chip-string", lambda d: d.__setitem__("chip", "ascend910b3")),
        ("op-unknown", lambda d: d.__setitem__("op", "conv9")),
        ("targets-list", lambda d: d.__setitem__("targets", [1, 2])),
        ("targets-garbage", lambda d: d.__setitem__("targets", {"catlass": {"L1TileShape": "x"}})),
        ("dtype-empty", lambda d: d["problem"].__setitem__("dtype", "")),
        ("shape-missing", lambda d: d["problem"].pop("shape")),
        ("tiling-list", lambda d: d.__setitem__("tiling", [1])),
    ]:
        bad = json.loads(json.dumps(doc))
        edit(bad)
        put(f"doc-{label}.json", json.dumps(bad))
    f.update({f"hw:{k}": v for k, v in _write_profiles(root).items()})
    f.update({f"sp:{k}": v for k, v in _write_spaces(root).items()})
    f["root"] = root
    return f


def _tiling_cases():
    base = ["explain", *B3, "--shape", SHAPE, "--tiling"]
    good = json.dumps({k.split("=")[0]: k.split("=")[1] for k in FAST})
    for text in [
        '{"base_m": 1e400}',
        '{"base_m": Infinity}',
        '{"base_m": NaN}',
        '{"base_m": -Infinity}',
        '{"base_m": 99999999999999999999999999999999}',
        '{"base_m": ' + "9" * 5000 + "}",
        '{"base_m": [1]}',
        '{"base_m": {"a": 1}}',
        '{"base_m": true}',
        '{"base_m": null}',
        "{}",
        "[]",
        '"x"',
        "{",
        "{" * 100_000,
        '{"a":' * 50_000 + "1" + "}" * 50_000,
        "",
        "   ",
        "x" * 10_000,
        "/dev/zero",
        "/dev/null",
        "/",
        "a\x00b",
        good[:-1] + ', "base_m": "0"}',
        json.dumps({**json.loads(good), "base_m": str(2**40)}),
        json.dumps({"targets": {"catlass": "x"}}),
        json.dumps({"targets": {"catlass": {"L1TileShape": [1e400]}}}),
    ]:
        yield pytest.param([*base, text], {2}, id=f"tiling-{text[:16]!r}")
    # a partial tiling (here inside a document-shaped object) is completed by the model: not an error
    yield pytest.param([*base, json.dumps({"tiling": {"base_m": 64}})], {0}, id="tiling-partial")
    for name in [
        "binary",
        "zeros",
        "utf16.json",
        "empty",
        "deep-list.json",
        "deep-object.json",
        "bigint.json",
        "array.json",
        "string.json",
        "null.json",
        "bom.json",
        "folder.json",
        "dangling.json",
        "tiling-inf.json",
        "tiling-nan.json",
        "tiling-big.json",
        "tiling-huge.json",
        "tiling-neg.json",
        "tiling-zero.json",
        "tiling-str.json",
        "tiling-list.json",
        "tiling-null.json",
        "tiling-bool.json",
        "tiling-float.json",
    ]:
        yield pytest.param([*base, f"@{name}"], {2}, id=f"tiling-file-{name}")
    yield pytest.param([*base, "@good.json"], {0}, id="tiling-file-good")
    yield pytest.param(
        ["explain", *H200, "--shape", SHAPE, "--tiling", "@good.json"], {2}, id="tiling-other-family"
    )


def _check_cases():
    names = [
        "binary",
        "zeros",
        "utf16.json",
        "empty",
        "deep-list.json",
        "deep-object.json",
        "bigint.json",
        "array.json",
        "string.json",
        "null.json",
        "bom.json",
        "dangling.json",
        "missing.json",
        "folder.json",
    ]
    names += [
        n
        for n in ("tiling", "problem")
        for n in [
            f"{n}-{v}.json"
            for v in ("inf", "nan", "big", "huge", "neg", "zero", "str", "list", "null", "bool", "float")
        ]
    ]
    names += [
        f"doc-{label}.json"
        for label in (
            "no-schema",
            "schema-other",
            "chip-unknown",
            "chip-string",
            "op-unknown",
            "targets-list",
            "targets-garbage",
            "dtype-empty",
            "shape-missing",
            "tiling-list",
        )
    ]
    for name in names:
        # the document's `tiling` object is informational: check reads the target views, so a bad value there
        # may pass (exit 0); what matters is one line or a clean run
        yield pytest.param(
            ["check", f"@{name}"], {0, 1, 2} if "tiling-" in name else {1, 2}, id=f"check-{name}"
        )
    yield pytest.param(["check", "@good.json"], {0}, id="check-good")
    yield pytest.param(["check", "@good.json", "--target", "nope"], {2}, id="check-target")


def _profile_cases():
    for name in [*PROFILES, "dangling", "folder"]:
        yield pytest.param(
            ["--hardware-dir", f"@hw:{name}", "search", *B3, "--shape", SHAPE, *FIX],
            {2},
            id=f"profile-{name}",
        )
    for name in ("cores-1e7", "binary", "dangling", "folder", "deep", "utf16"):
        yield pytest.param(["--hardware-dir", f"@hw:{name}", "chips"], {2}, id=f"chips-{name}")
    yield pytest.param(
        ["search", "--op", "matmul", "--chip", "@binary.toml", "--shape", SHAPE], {2}, id="chip-path-binary"
    )
    yield pytest.param(["--hardware-dir", "@binary", "chips"], {0, 2}, id="hardware-dir-is-file")
    yield pytest.param(["--hardware-dir", "/no/such/folder", "chips"], {0, 2}, id="hardware-dir-missing")


SPACE_BOTH = {"family-string", "binary", "utf16", "deep", "not-toml", "empty", "dangling", "folder"}
SPACE_ASCEND = {"split_k-0", "open-string"}  # the others damage the cuda family only


def _space_cases():
    for name in [*SPACES, "dangling", "folder"]:
        chips = (H200, B3) if name in SPACE_BOTH else (B3,) if name in SPACE_ASCEND else (H200,)
        for chip in chips:
            args = ["search", *chip, "--shape", SHAPE] + (FIX if chip is B3 else ["--fix", "BLOCK_K=64"])
            yield pytest.param([f"%sp:{name}", *args], {2}, id=f"space-{name}-{chip[3]}")


def _csv(rows: list[list[str]]) -> str:
    return "\n".join(",".join(r) for r in rows) + "\n"


RANK_HEADER = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K"]
RANK_GOOD = ["64", "64", "32", "3", "4", "8", "grouped", "1"]


def _rank_tables():
    """name -> CSV text (or bytes) of candidates for h200 matmul 64x64x64, and whether it must be refused."""
    out = {}
    for cell in BAD_KNOB_VALUES + ["1e15", "-0", "  ", "64;64", '"64"', "six"]:
        for col in (0, 6, 7):  # an open knob, a categorical one, SPLIT_K
            row = list(RANK_GOOD)
            row[col] = cell if "," not in cell else f'"{cell}"'
            out[f"cell-{RANK_HEADER[col]}-{cell[:10]!r}"] = (_csv([RANK_HEADER, RANK_GOOD, row]), {0, 2})
    out["dup-column"] = (_csv([["BLOCK_M", *RANK_HEADER], ["64", *RANK_GOOD]]), {2})
    out["missing-column"] = (
        _csv([RANK_HEADER[1:], RANK_GOOD[1:]]),
        {0},
    )  # completed: the model's best BLOCK_M
    out["header-only"] = (_csv([RANK_HEADER]), {0, 2})
    out["ragged"] = (_csv([RANK_HEADER, RANK_GOOD + ["1", "2"]]), {2})
    out["quote"] = ('BLOCK_M,"x\n64\n', {2})
    out["empty"] = ("", {2})
    out["blank-lines"] = ("\n\n\n", {2})
    out["binary"] = (bytes(range(256)) * 16, {2})
    out["utf16"] = (_csv([RANK_HEADER, RANK_GOOD]).encode("utf-16"), {2})
    out["nul"] = (_csv([RANK_HEADER, RANK_GOOD]).replace("64", "6\x004", 1), {2})
    out["many-columns"] = (
        _csv([RANK_HEADER + [f"x{i}" for i in range(3000)], RANK_GOOD + ["1"] * 3000]),
        {0},
    )
    out["good"] = (_csv([RANK_HEADER, RANK_GOOD]), {0})
    return out


def _rank_cases():
    for name, (_, want) in _rank_tables().items():
        yield pytest.param(
            ["rank", *H200, "--shape", SHAPE, "--candidates", f"@rank:{name}"], want, id=f"rank-{name}"
        )
    for name in ("binary", "folder.json", "dangling.json", "missing.json", "utf16.json"):
        yield pytest.param(
            ["rank", *H200, "--shape", SHAPE, "--candidates", f"@{name}"], {2}, id=f"rank-file-{name}"
        )


CAL_HEADER = ["M", "N", "K", "impl", *RANK_HEADER, "ms"]


def _cal_tables():
    good = ["64", "64", "64", "triton", *RANK_GOOD, "0.01"]
    out = {}
    for col, name in ((0, "M"), (5, "BLOCK_N"), (12, "ms")):
        for cell in ("inf", "nan", "1e400", str(2**63), "9" * 400, "-1", "0", "abc", ""):
            row = list(good)
            row[col] = cell
            out[f"{name}-{cell[:10]!r}"] = _csv([CAL_HEADER, good, row])
    out["dup-column"] = _csv([["M", *CAL_HEADER], ["64", *good]])
    out["binary"] = bytes(range(256)) * 16
    out["utf16"] = _csv([CAL_HEADER, good]).encode("utf-16")
    out["empty"] = ""
    out["no-time"] = _csv([CAL_HEADER[:-1], good[:-1]])
    out["msprof-inf"] = "Op Name,Task Duration(us),tiling\nmm,inf,{}\n"
    out["msprof-tiling-deep"] = 'Op Name,Task Duration(us),tiling\nmm,3,"' + "[" * 50_000 + '"\n'
    out["msprof-tiling-bigint"] = 'Op Name,Task Duration(us),tiling\nmm,3,{""a"": ' + "9" * 5000 + "}\n"
    return out


def _calibrate_cases():
    for name in _cal_tables():
        args = [
            "calibrate",
            "--chip",
            "h200",
            "--op",
            "matmul",
            "--measurements",
            f"@cal:{name}",
            "--out",
            "@out.toml",
        ]
        # a knob cell outside its domain makes its row infeasible (dropped), not the file bad: 0 or 2
        yield pytest.param(args, {0, 2} if name.startswith("BLOCK_N") else {2}, id=f"calibrate-{name}")
    real = [
        "calibrate",
        "--chip",
        "h200",
        "--op",
        "matmul",
        "--measurements",
        str(ROOT / "tests/data/h200_matmul_cal.csv"),
    ]
    for extra in (["--seed", "-1"], ["--seed", str(2**32)], ["--folds", "-1"], ["--folds", "1001"]):
        yield pytest.param([*real, "--out", "@out.toml", *extra], {2}, id=f"calibrate-{' '.join(extra)}")
    for folds in ("-1", str(2**63), "abc"):
        args = [
            "calibrate",
            "--chip",
            "h200",
            "--op",
            "matmul",
            "--measurements",
            "@cal:M-'inf'",
            "--out",
            "@out.toml",
        ]
        yield pytest.param([*args, "--folds", folds], {2}, id=f"calibrate-folds-{folds[:8]}")


def _sweep_tables():
    out = {}
    for cell in ("inf", "nan", "1e400", "1e30", str(2**63), "9" * 400, "-1", "0", "abc", "", "2^63"):
        out[f"M-{cell[:10]!r}"] = _csv([["M", "N", "K"], ["64", "64", "64"], [cell, "64", "64"]])
    out["dtype-bad"] = _csv([["M", "N", "K", "dtype"], ["64", "64", "64", "fp64"]])
    out["dup-column"] = _csv([["M", "M", "N", "K"], ["64", "64", "64", "64"]])
    out["no-K"] = _csv([["M", "N"], ["64", "64"]])
    out["binary"] = bytes(range(256)) * 16
    out["utf16"] = _csv([["M", "N", "K"], ["64", "64", "64"]]).encode("utf-16")
    out["empty"] = ""
    out["header-only"] = _csv([["M", "N", "K"]])
    out["good"] = _csv([["M", "N", "K"], ["64", "64", "64"]])
    return out


def _sweep_cases():
    for name in _sweep_tables():
        args = [
            "sweep",
            f"@sweep:{name}",
            "--op",
            "matmul",
            "--chip",
            "ascend910b3",
            "--out",
            "@sweep-out.csv",
            *FIX,
        ]
        yield pytest.param(args, {0, 1, 2}, id=f"sweep-{name}")
    base = [
        "sweep",
        "@sweep:good",
        "--op",
        "matmul",
        "--chip",
        "ascend910b3",
        "--out",
        "@sweep-out.csv",
        *FIX,
    ]
    for extra in (
        ["--seed", "-1"],
        ["--seed", str(2**32)],
        ["--jobs", "-1"],
        ["--trials", "0", "--strategy", "random"],
        ["--chip", "nope"],
        ["--fix", "base_m=inf"],
        ["--dtype", ""],
    ):
        yield pytest.param([*base, *extra], {2}, id=f"sweep-opt-{' '.join(extra)[:16]}")
    for name in ("binary", "folder.json", "missing.json", "dangling.json"):
        yield pytest.param(
            ["sweep", f"@{name}", "--op", "matmul", "--chip", "ascend910b3", "--out", "@sweep-out.csv"],
            {2},
            id=f"sweep-file-{name}",
        )


def _misc_cases():
    yield pytest.param(["chips"], {0}, id="chips")
    yield pytest.param(["ops"], {0}, id="ops")
    yield pytest.param(["ops", "--format", "xml"], {2}, id="ops-format")
    yield pytest.param(["nope"], {2}, id="no-command")
    yield pytest.param(["search"], {2}, id="search-nothing")
    yield pytest.param(["search", *B3, "--shape", SHAPE, "--format", "yaml"], {2}, id="search-format")
    yield pytest.param(["explain", *B3, "--shape", SHAPE], {2}, id="explain-no-tiling")
    yield pytest.param(["rank", *B3, "--shape", SHAPE], {2}, id="rank-no-candidates")


CASES = [
    *_shape_cases(),
    *_option_cases(),
    *_fix_cases(),
    *_tiling_cases(),
    *_check_cases(),
    *_profile_cases(),
    *_space_cases(),
    *_rank_cases(),
    *_calibrate_cases(),
    *_sweep_cases(),
    *_misc_cases(),
]


def test_there_are_at_least_200_hand_written_cases():
    assert len(CASES) >= 200, len(CASES)


def _resolve(arg: str, files: dict, tmp: Path) -> str:
    """`@name` -> the path of a hostile file; `@rank:`/`@cal:`/`@sweep:` tables are written on demand."""
    if not arg.startswith("@"):
        return arg
    name = arg[1:]
    for prefix, tables in (("rank:", _rank_tables), ("cal:", _cal_tables), ("sweep:", _sweep_tables)):
        if name.startswith(prefix):
            data = tables()[name[len(prefix) :]]
            data = data[0] if isinstance(data, tuple) else data
            p = tmp / "table.csv"
            p.write_bytes(data if isinstance(data, bytes) else data.encode())
            return str(p)
    if name in files:
        return str(files[name])
    return str(tmp / name)  # an output path, or a file that does not exist


@pytest.mark.parametrize("argv, allowed", CASES)
def test_hostile_input_is_one_line_or_runs(argv, allowed, files, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TILER_HARDWARE_DIR", raising=False)
    monkeypatch.delenv("TILER_SPACES_DIR", raising=False)
    if argv[0].startswith("%sp:"):  # a space file case: its folder as TILER_SPACES_DIR
        monkeypatch.setenv("TILER_SPACES_DIR", str(files[argv[0][1:]]))
        argv = argv[1:]
    monkeypatch.chdir(tmp_path)  # a default output (a study, results/) lands in the test's folder
    rc, _, err = outcome(capsys, [_resolve(a, files, tmp_path) for a in argv])
    assert rc in allowed, f"exit {rc}, expected {sorted(allowed)}: {err[-500:]}"


def test_a_refused_value_names_its_field(files, capsys):
    """Spot checks that the one line names the field and the bound, not just 'error'."""
    _, _, err = outcome(capsys, ["search", *B3, "--shape", f"M={2**40},N=64,K=64"])
    assert "M:" in err and "2147483647" in err
    _, _, err = outcome(capsys, ["search", *B3, "--shape", SHAPE, "--dtype", ""])
    assert "--dtype" in err and "fp16" in err
    _, _, err = outcome(capsys, ["search", *B3, "--shape", SHAPE, "--top", "1000000"])
    assert "--top" in err and "1000" in err
    _, _, err = outcome(capsys, ["search", *B3, "--shape", SHAPE, "--seed", "-1", "--strategy", "random"])
    assert "--seed" in err and str(2**32 - 1) in err
    _, _, err = outcome(
        capsys, ["--hardware-dir", str(files["hw:cores-1e7"]), "search", *B3, "--shape", SHAPE]
    )
    assert "cores" in err and "1024" in err
    _, _, err = outcome(capsys, ["--hardware-dir", str(files["hw:utf16"]), "search", *B3, "--shape", SHAPE])
    assert "UTF-8" in err
    _, _, err = outcome(capsys, ["explain", *B3, "--shape", SHAPE, "--tiling", str(files["deep-list.json"])])
    assert "too deep" in err


# ------------------------------------------------------------------ properties

PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

field_text = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet="0123456789.eE+-_xinfa ", max_size=12),
    st.sampled_from(BAD_NUMBERS),
)


@PROPS
@given(m=field_text, n=st.integers(min_value=1, max_value=256), k=field_text)
def test_any_shape_is_refused_or_searched(m, n, k, capsys):
    if "," in m + k or "=" in m + k:
        return
    outcome(capsys, ["search", *B3, "--shape", f"M={m},N={n},K={k}", *FIX, "--top", "1"])


knob_text = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=8).filter(lambda s: "\x00" not in s),
)


@PROPS
@given(
    knob=st.sampled_from(["base_m", "base_k", "split_k", "iterate_order", "serpentine", "l1_stages"]),
    value=knob_text,
)
def test_any_fix_value_is_refused_or_searched(knob, value, capsys):
    pins = [f for f in FAST if not f.startswith(knob + "=")]
    args = [a for f in pins for a in ("--fix", f)]
    outcome(capsys, ["search", *B3, "--shape", SHAPE, *args, "--fix", f"{knob}={value}", "--top", "1"])


@PROPS
@given(value=st.one_of(knob_text, st.integers(min_value=-(2**80), max_value=2**80)))
def test_any_tiling_value_is_refused_or_explained(value, capsys):
    tiling = {f.split("=")[0]: f.split("=")[1] for f in FAST}
    tiling["base_n"] = value
    outcome(capsys, ["explain", *B3, "--shape", SHAPE, "--tiling", json.dumps(tiling)])


csv_cell = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8),
)


@PROPS
@given(cells=st.lists(csv_cell, min_size=len(RANK_HEADER), max_size=len(RANK_HEADER)))
def test_any_candidate_cells_are_refused_or_ranked(cells, tmp_path, capsys):
    p = tmp_path / "cands.csv"
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows([RANK_HEADER, RANK_GOOD, cells])
    p.write_text(buf.getvalue(), encoding="utf-8")
    outcome(capsys, ["rank", *H200, "--shape", SHAPE, "--candidates", str(p)])


@PROPS
@given(cells=st.lists(csv_cell, min_size=3, max_size=3))
def test_any_sweep_cells_are_refused_or_swept(cells, tmp_path, capsys):
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf).writerows([["M", "N", "K"], cells])
    p = tmp_path / "shapes.csv"
    p.write_text(buf.getvalue(), encoding="utf-8")
    outcome(
        capsys,
        ["sweep", str(p), "--op", "matmul", "--chip", "ascend910b3", "--out", str(tmp_path / "o.csv"), *FIX],
    )


@PROPS
@given(
    data=st.binary(max_size=512),
    kind=st.sampled_from(["tiling", "check", "rank", "calibrate", "profile", "space"]),
)
def test_any_file_bytes_are_refused_or_read(data, kind, tmp_path, capsys, monkeypatch):
    p = tmp_path / (
        "matmul.toml" if kind == "space" else "ascend910b3.toml" if kind == "profile" else "f.json"
    )
    p.write_bytes(data)
    monkeypatch.delenv("TILER_SPACES_DIR", raising=False)
    argv = {
        "tiling": ["explain", *B3, "--shape", SHAPE, "--tiling", str(p)],
        "check": ["check", str(p)],
        "rank": ["rank", *H200, "--shape", SHAPE, "--candidates", str(p)],
        "calibrate": [
            "calibrate",
            "--chip",
            "h200",
            "--op",
            "matmul",
            "--measurements",
            str(p),
            "--out",
            str(tmp_path / "o.toml"),
        ],
        "profile": ["--hardware-dir", str(tmp_path), "search", *B3, "--shape", SHAPE, *FIX],
        "space": ["search", *B3, "--shape", SHAPE, *FIX],
    }[kind]
    if kind == "space":
        monkeypatch.setenv("TILER_SPACES_DIR", str(tmp_path))
    outcome(capsys, argv)
    os.remove(p)
