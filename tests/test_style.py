"""Repository rules: ruff-clean, and the model layer knows nothing of the CLI, optuna or files."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    shutil.which("ruff") is None and sys.modules.get("ruff") is None, reason="ruff not installed"
)
def test_ruff_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "tiler", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_model_imports_nothing_of_cli_optuna_or_files():
    banned = {"click", "optuna", "pandas", "tomllib", "json", "csv", "sqlite3"}
    for path in (ROOT / "tiler" / "model").glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            assert not (set(names) & banned), f"{path.name} imports {set(names) & banned}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "open":
                raise AssertionError(f"{path.name} opens a file")
