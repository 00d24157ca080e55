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
    for path in (ROOT / "tiler" / "model").rglob("*.py"):  # schedule/ is a package
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


def _knob_names() -> set[str]:
    import tomllib

    names: set[str] = set()
    for path in (ROOT / "search_spaces").glob("*.toml"):
        for family in tomllib.loads(path.read_text()).values():
            if isinstance(family, dict):
                names |= set(family)
    return names


def _problem_fields() -> set[str]:
    from dataclasses import fields

    from tiler.operator import known_ops, problem_class

    return {f.name for op, _ in known_ops() for f in fields(problem_class(op))} - {"dtype"}


def _docstring(node: ast.AST) -> ast.Constant | None:
    """The docstring constant of a module, class or function node (None for other nodes or without one)."""
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            return body[0].value
    return None


def _operator_knowledge(text: str, where: str, knobs: set[str], fields: set[str], ops: set[str]) -> list[str]:
    """Knob names (as identifiers or inside string literals, docstrings and comments aside), problem-field
    accesses (`x.M`, `"K"`) and operator names (`op == "matmul"`, a default `--op`) in one file's source.

    One walk: ast.walk goes breadth first, so a module, class or function is seen before its docstring, whose id
    is noted then."""
    import re

    tree = ast.parse(text)
    docs: set[int] = set()
    word = re.compile(r"\b(" + "|".join(sorted(map(re.escape, knobs), key=len, reverse=True)) + r")\b")
    found = []
    for node in ast.walk(tree):
        if (doc := _docstring(node)) is not None:
            docs.add(id(doc))
        hit = None
        if isinstance(node, ast.Name) and node.id in knobs:
            hit = f"identifier {node.id}"
        elif isinstance(node, ast.arg) and node.arg in knobs:
            hit = f"argument {node.arg}"
        elif isinstance(node, ast.keyword) and node.arg in knobs:
            hit = f"keyword {node.arg}"
        elif isinstance(node, ast.Attribute) and (node.attr in knobs or node.attr in fields):
            hit = f"attribute .{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if node.value in fields:
                hit = f"field name {node.value!r}"
            elif node.value in ops:
                hit = f"operator name {node.value!r}"
            elif m := word.search(node.value):
                hit = f"knob {m.group(1)!r} in {node.value[:60]!r}"
        if hit is not None:
            found.append(f"{where}:{getattr(node, 'lineno', '?')}: {hit}")
    return found


def _op_names() -> set[str]:
    from tiler.operator import known_ops

    return {op for op, _ in known_ops()}


def test_generic_layers_name_no_knob_no_problem_field_and_no_operator():
    """Outside tiler/ops/ no code names a knob of any search space, reads a problem field or names an operator:
    operators are plug-ins, and everything that knows a knob, a field or an op is the operator's
    (docs/operators.md)."""
    knobs, fields, ops = _knob_names(), _problem_fields(), _op_names()
    assert knobs and fields and ops
    found = []
    for path in sorted((ROOT / "tiler").rglob("*.py")):
        if "ops" in path.relative_to(ROOT / "tiler").parts:
            continue
        found += _operator_knowledge(path.read_text(), str(path.relative_to(ROOT)), knobs, fields, ops)
    assert not found, "\n".join(found)


def test_the_style_check_sees_a_knob_a_field_and_an_operator():
    """The check above can fail: a generic-looking source that names a knob, reads a field or switches on an
    operator name is reported."""
    text = 'def f(p, c, op):\n    return p.K * c["base_k"] if op == "matmul" else 0\n'
    found = _operator_knowledge(text, "probe.py", _knob_names(), _problem_fields(), _op_names())
    assert any(".K" in f for f in found) and any("base_k" in f for f in found), found
    assert any("operator name 'matmul'" in f for f in found), found


def test_no_test_reads_bench():
    """bench/ is the benchmarks' (scripts and data may move or be re-measured): a test reads its fixtures from
    tests/data and imports nothing of bench. Checked on the code of every test file (docstrings aside): no import of
    bench, no path `... / "bench"` and no string "bench/..." (this file lints bench/ with ruff, by design)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path.name == "test_style.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                hits = [a.name for a in node.names if a.name.split(".")[0] == "bench"]
            elif isinstance(node, ast.ImportFrom):
                hits = [node.module] if (node.module or "").split(".")[0] == "bench" else []
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
                hits = [
                    f"... / {side.value!r}"
                    for side in (node.left, node.right)
                    if isinstance(side, ast.Constant)
                    and isinstance(side.value, str)
                    and (side.value == "bench" or side.value.startswith("bench/"))
                ]
            elif isinstance(node, ast.Call):  # "bench/data/x.csv" as an argument (Path, open, read_csv, ...)
                hits = [
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant)
                    and isinstance(a.value, str)
                    and a.value.startswith("bench/")
                ]
            else:
                hits = []
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: {h}" for h in hits]
    assert not found, "\n".join(found)


def test_every_package_of_tiler_is_installed():
    """`pip install .` (CI, a user) installs only the packages pyproject lists: every folder of tiler/ with an
    __init__.py is one of them (a module split into a package must be added, or it is missing when installed)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "tiler").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found and not found - listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"
