"""Operators from other packages: an operator that ships its own space file (Operator.SPACE_FILE), found through the
entry-point group `tiler.operators`, passes the shipped conformance suite (tiler.testing) and runs from the CLI.
The plugin is tests/plugin_example/ (row_scale on the cuda family); every test leaves the registry as it was."""

from __future__ import annotations

import logging
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import tiler.operator as registry
import tiler.space as spaces
from tiler.cli import main
from tiler.errors import ConfigError
from tiler.operator import known_ops, load_plugins, register
from tiler.space import load_space, shipped_space_file
from tiler.testing import CHECKS, check_operator

HERE = Path(__file__).resolve().parent
PLUGIN = EntryPoint(name="row_scale", value="plugin_example:RowScaleCuda", group=registry.ENTRY_POINT_GROUP)
BROKEN = EntryPoint(name="broken", value="plugin_example_missing:Nothing", group=registry.ENTRY_POINT_GROUP)


@pytest.fixture
def installed(monkeypatch):
    """Pretend packages declare the entry points given to `install(...)`; the registry and the space layer's file
    table are restored afterwards (no other test sees the plugin)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(spaces, "_SPACE_FILES", dict(spaces._SPACE_FILES))

    def install(*eps: EntryPoint) -> None:
        monkeypatch.setattr(registry, "entry_points", lambda group: [e for e in eps if e.group == group])
        monkeypatch.setattr(registry, "_plugins_loaded", False)

    return install


def test_an_entry_point_adds_an_operator_with_its_own_space(installed):
    """Unknown before; once a package declares it, `known_ops` lists it and its space is the file beside it."""
    installed()
    assert ("row_scale", "cuda") not in known_ops()
    installed(PLUGIN)
    assert ("row_scale", "cuda") in known_ops()
    assert shipped_space_file("row_scale", "cuda") == HERE / "plugin_example" / "row_scale.toml"
    assert load_space("row_scale", "cuda").names == ("BLOCK", "num_warps")


def test_plugins_load_once(installed):
    """The entry points are read once per process, with the built-ins, not on every look-up."""
    calls = []
    installed(PLUGIN)
    real = registry.entry_points
    registry.entry_points = lambda group: calls.append(group) or real(group)
    try:
        known_ops(), known_ops(), registry.get_operator("row_scale", "cuda")
    finally:
        registry.entry_points = real
    assert calls == [registry.ENTRY_POINT_GROUP]


def test_the_plugin_passes_the_shipped_conformance_suite(installed):
    installed(PLUGIN)
    check_operator("row_scale", "cuda")


def test_a_check_fails_naming_itself(installed):
    """The suite can fail: an estimate below its roofline fails `estimate_record`, and the message names it."""
    installed(PLUGIN)
    from plugin_example import RowScaleCuda

    class Faster(RowScaleCuda):
        def estimate(self, p, chip, c):
            est = super().estimate(p, chip, c)
            return {**est, "time_us": est["roofline_us"] * 0.5}

    known_ops()
    del registry._REGISTRY[("row_scale", "cuda")]  # a plugin never replaces a registered operator
    register(Faster)
    with pytest.raises(AssertionError, match="check estimate_record failed for row_scale/cuda: .*roofline"):
        CHECKS["estimate_record"]("row_scale", "cuda")


def test_search_and_ops_run_the_plugin_from_the_cli(installed, capsys):
    installed(PLUGIN)
    assert main(["search", "--op", "row_scale", "--chip", "h200", "--shape", "rows=4096,cols=8192"]) == 0
    out = capsys.readouterr().out
    assert "best tiling: BLOCK=" in out and "optimum proven" in out
    assert main(["ops"]) == 0
    assert any(line.startswith("row_scale ") for line in capsys.readouterr().out.splitlines())


def test_a_plugin_that_fails_is_one_warning_line(installed, caplog, capsys):
    """A plugin that cannot be imported is skipped with one warning line naming it; the others still load and the
    CLI still works."""
    installed(BROKEN, PLUGIN)
    with caplog.at_level(logging.WARNING, logger="tiler.operator"):
        ops = known_ops()
    assert ("row_scale", "cuda") in ops and ("matmul", "cuda") in ops
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert "'broken'" in lines[0] and "plugin_example_missing" in lines[0]
    assert load_plugins() == ["row_scale"]  # the broken one is never listed as loaded
    assert main(["ops"]) == 0


def test_a_plugin_may_add_a_family_but_not_replace_an_operator(installed, tmp_path):
    """A new family of a registered op registers (its space from its own file); taking a registered (op, family)
    or bringing another problem class is a ConfigError, and a failed registration leaves the space files as they
    were."""
    installed(PLUGIN)
    known_ops()
    from plugin_example import RowScaleCuda

    toml = tmp_path / "row_scale_ascend.toml"
    toml.write_text("[ascend.BLOCK]\nvalues = [128, 256]\n[ascend.num_warps]\nvalues = [1, 2]\n")
    ascend = {"FAMILY": "ascend", "SPACE_FILE": str(toml)}
    softmax = registry.get_operator("softmax", "cuda").PROBLEM
    with pytest.raises(ConfigError, match="PROBLEM must be RowScale"):
        register(type("OtherProblem", (RowScaleCuda,), {**ascend, "PROBLEM": softmax}))
    before = shipped_space_file("row_scale", "ascend")
    with pytest.raises(ConfigError, match="warps"):
        register(type("Renamed", (RowScaleCuda,), {**ascend, "KNOBS": ("BLOCK", "warps")}))
    assert shipped_space_file("row_scale", "ascend") == before
    assert ("row_scale", "ascend") not in known_ops()
    register(type("RowScaleAscend", (RowScaleCuda,), ascend))
    assert ("row_scale", "ascend") in known_ops()
    assert load_space("row_scale", "ascend").domains()["BLOCK"] == (128, 256)

    with pytest.raises(ConfigError, match="already registered"):
        register(type("Clash", (RowScaleCuda,), {"OP": "softmax"}))


def test_a_user_spaces_folder_narrows_the_plugins_space(installed, tmp_path, monkeypatch):
    """TILER_SPACES_DIR may cut the plugin's domains like a built-in's (checked against the plugin's file); a folder
    without the op's file falls back to the plugin's own."""
    installed(PLUGIN)
    known_ops()
    monkeypatch.setenv("TILER_SPACES_DIR", str(tmp_path))
    assert load_space("row_scale", "cuda").domains()["BLOCK"][0] == 128  # the plugin's file
    (tmp_path / "row_scale.toml").write_text(
        "[cuda.BLOCK]\nvalues = [256, 512]\n[cuda.num_warps]\nvalues = [4]\n"
    )
    assert load_space("row_scale", "cuda").domains() == {"BLOCK": (256, 512), "num_warps": (4,)}
    (tmp_path / "row_scale.toml").write_text("[cuda.BLOCK]\nvalues = [100]\n[cuda.num_warps]\nvalues = [4]\n")
    with pytest.raises(ConfigError, match="outside the knob's domain"):
        load_space("row_scale", "cuda")


def test_an_installed_distribution_is_found_by_the_cli(tmp_path):
    """End to end through importlib.metadata: a distribution on the path declaring the entry point (and one that
    cannot import) -> `tiler search --op row_scale` runs the plugin, and the broken one is one stderr line."""
    import os
    import subprocess
    import sys

    dist = tmp_path / "row_scale_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: row-scale-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\nrow_scale = plugin_example:RowScaleCuda\n"
        "broken = plugin_example_missing:Nothing\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(HERE)])}

    args = ["search", "--op", "row_scale", "--chip", "h200", "--shape", "rows=4096,cols=8192"]
    run = subprocess.run([sys.executable, "-m", "tiler", *args], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and "best tiling: BLOCK=" in run.stdout, run.stderr
    warned = [x for x in run.stderr.splitlines() if x.strip()]
    assert len(warned) == 1 and "'broken'" in warned[0], run.stderr
