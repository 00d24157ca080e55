"""The README's "Input limits" are the code's (issue 31: "the limits in the README match what the tool can do"):
each number the README states is the constant it names, the tool takes a value at the limit and refuses the next
one in one line, and a search of the largest problems inside the limits runs within the stated memory bound."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tiler.calibrate import CALIBRATE_BYTES_MAX, CALIBRATE_OVERHEAD, TIME_MAX_S
from tiler.hardware import MAXIMUM, MAXIMUM_BY_UNIT
from tiler.io import FILE_BYTES_MAX
from tiler.model.schedule import SIM_MAX
from tiler.msprof import TILING_CHARS_MAX
from tiler.problem import FIELD_MAX, TENSOR_MAX
from tiler.search import SEED_MAX, TOP_MAX, TRIALS_MAX
from tiler.search.proven import ESTIMATE_ROWS
from tiler.space import KNOB_VALUES_MAX, OPEN_MAX, SPACE_SIZE_MAX
from tiler.sweep import COUNT_MAX
from tiler.triton import CONFIGS_MAX, RESTRICTION_CHARS, RESTRICTIONS_MAX

ROOT = Path(__file__).resolve().parent.parent
SEARCH_BYTES_MAX = 1 << 30  # the README's bound on a search's address space


def _limits_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("## Input limits")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start : end if end > 0 else None].split())  # one line: wrapping aside


def _pow2(n: int) -> str:
    """2^k or 2^k-1 as the README writes them."""
    if n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    assert (n + 1) & n == 0, n
    return f"2^{n.bit_length()}-1"


def test_every_number_the_readme_states_is_the_constant_it_names():
    readme = _limits_section()
    stated = [
        f"integers in 1..{_pow2(FIELD_MAX)}",
        f"at most {_pow2(TENSOR_MAX)} elements per tensor (`FIELD_MAX`, `TENSOR_MAX`",
        f"any integer in 1..{_pow2(OPEN_MAX)} (`OPEN_MAX`",
        f"`search --top`: 1..{TOP_MAX}; `--trials`: 1..{TRIALS_MAX}; `--seed`: 0..{_pow2(SEED_MAX)}",
        "at most one hour (`TIME_MAX_S`" if TIME_MAX_S == 3600 else "TIME_MAX_S changed",
        f"times {CALIBRATE_OVERHEAD} for the fit's copies",
        f"at most {CALIBRATE_BYTES_MAX >> 20} MiB (`CALIBRATE_BYTES_MAX`",
        f"at most {SIM_MAX:,} tiles of it, `SIM_MAX`",
        f"at most {ESTIMATE_ROWS:,} candidates per model call (`ESTIMATE_ROWS`",
        f"at most {KNOB_VALUES_MAX} distinct integer values",
        f"at most {_pow2(SPACE_SIZE_MAX)} candidates in all (`KNOB_VALUES_MAX`",
        f"at most {_pow2(CONFIGS_MAX)} configs",
        f"at most {RESTRICTIONS_MAX} restrictions of at most {RESTRICTION_CHARS:,} characters",
        f"integer in 0..{_pow2(COUNT_MAX)} (`COUNT_MAX`",
        f"is at most {FILE_BYTES_MAX >> 20} MiB (`FILE_BYTES_MAX`",
        f"at most {TILING_CHARS_MAX:,} characters, `TILING_CHARS_MAX`",
        f"within {SEARCH_BYTES_MAX >> 30} GiB of address space",
    ]
    for key, bound in MAXIMUM.items():
        if f"`{key}`" in readme:
            stated.append(f"`{key}` <= {_pow2(bound) if bound > 10_000 else bound}")
    for unit, bound in MAXIMUM_BY_UNIT:
        shown = {2**20: "2^20", 2**30: "2^30", 1e6: "10^6", 1e9: "10^9"}[bound]
        stated.append(f"{unit.strip('_')}{'*' if unit == 'per_cycle' else ''}` <= {shown}")
    missing = [s for s in stated if s not in readme]
    assert not missing, missing


B3 = ["--op", "matmul", "--chip", "ascend910b3"]
PINS = ["--fix", "base_m=64", "--fix", "base_n=64", "--fix", "base_k=64", "--fix", "split_k=1"]


@pytest.mark.parametrize(
    "argv, at_limit, beyond",
    [
        (["search", *B3, "--shape", "M={},N=64,K=64", *PINS, "--top", "1"], FIELD_MAX, FIELD_MAX + 1),
        (["search", *B3, "--shape", "M=64,N=64,K=64", *PINS, "--top", "{}"], TOP_MAX, TOP_MAX + 1),
        (["search", *B3, "--shape", "M=64,N=64,K=64", *PINS, "--top", "1", "--seed", "{}"], SEED_MAX, SEED_MAX + 1),
        (["search", *B3, "--shape", "M=64,N=64,K=64", *PINS, "--fix", "step_m={}"], None, OPEN_MAX + 1),
        (["search", *B3, "--shape", "M={},N=16777216,K=64", *PINS, "--top", "1"], TENSOR_MAX // 2**24, TENSOR_MAX // 2**24 + 1),
    ],
)  # fmt: skip
def test_a_value_at_the_limit_runs_and_the_next_is_refused_in_one_line(argv, at_limit, beyond, capsys):
    from tiler.cli import main

    if at_limit is not None:
        assert main([a.format(at_limit) for a in argv]) == 0, capsys.readouterr().err[-500:]
    capsys.readouterr()
    assert main([a.format(beyond) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err


LARGEST = [
    ("matmul", "M=16777216,N=16777216,K=16777216"),
    ("matmul", "M=1048576,N=1048576,K=256"),
    ("matmul", "M=2147483647,N=131072,K=1"),
    (
        "matmul",
        "M=64,N=128,K=256,batch=2147483647",
    ),  # the slices' starting cores once took an array per slice
    ("flash_attention", "B=1,heads=128,kv_heads=128,S1=1048576,S2=1048576,D=128,causal=1"),
    ("softmax", "rows=16777216,d=16777216"),
    ("depthwise_conv", "N=4096,C=4096,H=4096,W=4096,kh=3,kw=3,stride=1,pad=0,dilation=1"),
]
_SEARCH_ALL = """
from tiler import api
for chip in ("ascend910b3", "h200"):
    for op, shape in {largest!r}:
        api.search(op, chip, shape, top=1)
        print(chip, op, shape, flush=True)
"""


@pytest.mark.slow
def test_searches_of_the_largest_problems_run_within_the_stated_memory_bound():
    """The README's bound as an address-space limit on one process that searches the largest problems of every
    operator on an Ascend and a CUDA chip: a search that allocated by the tile count (issue 31: M = N = K = 2^24
    once asked for 3.3 TiB) dies with MemoryError here."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (SEARCH_BYTES_MAX, SEARCH_BYTES_MAX))

    proc = subprocess.run(
        [sys.executable, "-c", _SEARCH_ALL.format(largest=LARGEST)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.splitlines()) == 2 * len(LARGEST), proc.stdout


@pytest.mark.slow
def test_a_calibration_of_the_largest_problems_runs_within_the_stated_memory_bound(tmp_path):
    """Rows of M = N = K = 2^24 and M = N = 2^20 x K = 256 (h200 matmul) fit in a process limited to the README's
    1 GiB of address space (issue 31: two 2^48-element tensors once asked calibrate for 85 GiB)."""
    import resource

    header = (ROOT / "tests" / "data" / "h200_matmul_cal.csv").read_text().splitlines()[0]
    rows = [
        "16777216,16777216,16777216,triton,grid,128,256,64,3,8,8,1,1,900000,11.11,",
        "16777216,16777216,16777216,triton,grid,64,256,32,4,4,8,1,1,950000,12.62,",
        "1048576,1048576,256,triton,grid,128,128,32,4,4,8,1,1,30000,12.29,",
    ]
    src = tmp_path / "big.csv"
    src.write_text("\n".join([header, *rows]) + "\n")

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (SEARCH_BYTES_MAX, SEARCH_BYTES_MAX))

    cmd = [sys.executable, "-m", "tiler", "calibrate", "--chip", "h200", "--op", "matmul", "--folds", "0"]
    proc = subprocess.run(
        [*cmd, "--measurements", str(src), "--out", str(tmp_path / "o.toml")],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "o.toml").exists()


LIMIT = 1 << 16  # above every shipped profile and space (the largest, h200.toml, is about 46 KB)
PAD_JSON = "{}" + " " * LIMIT
PAD_CSV = "M,N,K\n" + "64,128,256\n" * (LIMIT // 10)
PAD_TOML = "# pad\n" * (LIMIT // 5)
SMALL = ["--shape", "M=64,N=128,K=256"]
FILE_ARGS = {
    "sweep SHAPES": (PAD_CSV, ["sweep", "{f}", "--op", "matmul", "--chip", "h200", "--out", "{d}/o.csv"]),
    "report RESULT csv": (PAD_CSV, ["report", "{f}", "--out", "{d}/r.html"]),
    "report RESULT json": (PAD_JSON, ["report", "{f}.json", "--out", "{d}/r.html"]),
    "shapes CONFIG": (PAD_JSON, ["shapes", "{f}.json", "--op", "matmul"]),
    "search --space": (PAD_TOML, ["search", "--op", "matmul", "--chip", "h200", *SMALL, "--space", "{f}"]),
    "search --chip FILE": (PAD_TOML, ["search", "--op", "matmul", "--chip", "{f}.toml", *SMALL]),
    "explain --tiling": (PAD_JSON, ["explain", "--op", "matmul", "--chip", "h200", *SMALL, "--tiling", "{f}"]),
    "rank --candidates": (PAD_CSV, ["rank", "--op", "matmul", "--chip", "h200", *SMALL, "--candidates", "{f}"]),
    "calibrate --measurements": (PAD_CSV, ["calibrate", "--chip", "h200", "--op", "matmul",
                                           "--measurements", "{f}", "--out", "{d}/p.toml"]),
    "check": (PAD_JSON, ["check", "{f}"]),
    "emit LIBRARY": (PAD_JSON, ["emit", "{f}", "--target", "triton"]),
    "lookup --library": (PAD_JSON, ["lookup", "--library", "{f}", *SMALL]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(FILE_ARGS))
def test_every_file_argument_over_the_size_limit_is_refused_in_one_line(case, tmp_path, capsys, monkeypatch):
    """README: every file tiler reads is at most FILE_BYTES_MAX bytes, refused before it is read past that."""
    import tiler.io
    from tiler.cli import main

    text, argv = FILE_ARGS[case]
    base = tmp_path / "big"
    argv = [a.format(f=base, d=tmp_path) for a in argv]
    path = next(Path(a) for a in argv if a.startswith(str(base)))
    path.write_text(text)
    assert path.stat().st_size > LIMIT
    monkeypatch.setattr(tiler.io, "FILE_BYTES_MAX", LIMIT)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"at most {LIMIT}" in err[0] and path.name in err[0], err
