"""Imports go one way, downward (issue 32): the import-linter contracts of pyproject.toml hold, and they fail when
a lower layer imports a higher one; loading a chip imports no operator; `tiler lookup` imports neither numpy nor
the models (the slowdown's model is a lazy path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parent.parent
LINT = (
    "from importlinter.cli import lint_imports; raise SystemExit(lint_imports(no_cache=True, no_logo=True))"
)


def _lint(where: Path) -> subprocess.CompletedProcess:
    """lint-imports on the package and pyproject.toml found in `where` (that folder first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [sys.executable, "-c", LINT], cwd=where, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_layer_contracts_hold():
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "KEPT" in run.stdout and "BROKEN" not in run.stdout


def test_an_upward_import_breaks_the_contracts(tmp_path):
    shutil.copytree(ROOT / "tiler", tmp_path / "tiler", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    problem = tmp_path / "tiler" / "problem.py"
    problem.write_text(
        problem.read_text() + "\nimport tiler.cli  # noqa: E402, F401  (the forbidden import)\n"
    )
    run = _lint(tmp_path)
    assert run.returncode != 0, run.stdout
    assert "BROKEN" in run.stdout and "tiler.problem" in run.stdout and "tiler.cli" in run.stdout


def _modules_after(code: str) -> list[str]:
    """The tiler.ops / numpy / model modules loaded after running `code` in a fresh interpreter."""
    probe = (
        f"{code}\nimport sys\n"
        "heavy = ('numpy', 'pandas', 'optuna', 'jsonschema', 'tiler.ops', 'tiler.operator', 'tiler.model', "
        "'tiler.api', 'tiler.search', 'tiler.export')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json\n" + probe], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("chip", ["ascend910b3", "h200"])
def test_loading_a_chip_imports_no_operator(chip):
    loaded = _modules_after(f"import tiler.hardware\ntiler.hardware.load_chip({chip!r})")
    assert not [m for m in loaded if m.startswith(("tiler.ops", "tiler.operator"))], loaded


def _library(tmp_path) -> Path:
    entry = {
        "key": "matmul:M=64,N=64,K=64,batch=1:fp16",
        "problem": {"shape": {"M": 64, "N": 64, "K": 64, "batch": 1, "layout": "nn"}, "dtype": "fp16"},
        "tiling": {"base_m": 64},
        "estimate": {"time_us": 10.0, "bound": "cube"},
    }
    doc = {
        "schema": "tiler.library/v1",
        "tool": {"name": "tiler", "version": "0"},
        "chip": {"id": "ascend910b3", "family": "ascend", "cores": 20, "profile_hash": "0"},
        "op": "matmul",
        "entries": [entry],
    }
    path = tmp_path / "lib.json"
    path.write_text(json.dumps(doc))
    return path


def test_tiler_lookup_imports_no_model(tmp_path):
    lib = _library(tmp_path)
    for extra in ([], ["--slowdown"]):  # an exact hit: its slowdown is 1.0 without the model
        code = (
            "import contextlib, io\nfrom tiler.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main({['lookup', '--library', str(lib), '--shape', 'M=64,N=64,K=64', *extra]!r}) == 0\n"
            "assert json.loads(out.getvalue())['exact']\n"
        )
        assert _modules_after(code) == [], extra
    near = "import tiler.lookup as L\nL.load(" + repr(str(lib)) + ").lookup('M=60,N=64,K=64')"
    assert _modules_after(near) == []


def test_the_slowdown_is_the_api_path():
    """tiler.lookup holds no import of tiler.api (the contracts check that); the model's slowdown is installed by
    tiler.api when it is imported, and only slowdown=True loads it."""
    import tiler.api
    import tiler.lookup

    assert tiler.lookup._SLOWDOWN["model"] is tiler.api.lookup_slowdown
