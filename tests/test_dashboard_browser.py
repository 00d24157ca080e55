"""A TPE study opened in optuna-dashboard, in a real headless Chromium: the rendered pages name the objective, each
sampled knob and the user attributes (tests/browser_checks.py runs the same check and writes the screenshots
under docs/images/). Skipped, with the reason, where Chromium, playwright or optuna-dashboard is missing (CI has
none of them); TILER_CHROMIUM=/path picks the Chromium binary."""

from __future__ import annotations

import shutil

import browser_checks as shot  # tests/browser_checks.py: the checks, and the screenshots for docs/images
import pytest


def test_the_skip_reason_names_what_is_missing(monkeypatch, tmp_path):
    # runs everywhere: what a machine without a browser is told (the browser test below skips with it)
    monkeypatch.setenv("TILER_CHROMIUM", str(tmp_path / "no-chromium"))
    assert shot.chromium_path() is None
    assert shot.missing().startswith(f"no Chromium (TILER_CHROMIUM={tmp_path / 'no-chromium'} is not a file)")
    monkeypatch.delenv("TILER_CHROMIUM")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert shot.chromium_path() is None and "apt-get install chromium" in shot.missing()


def test_a_study_shows_its_names_in_optuna_dashboard(tmp_path):
    why = shot.missing()
    if why:
        pytest.skip(why)
    import optuna

    from tiler.space import load_space

    study = shot.run_study(tmp_path / "studies.db", trials=20)
    # the contract, read back from the storage: the objective named, one parameter per sampled knob
    assert study.metric == "predicted_us"
    assert optuna.load_study(study_name=study.name, storage=study.url).metric_names == ["predicted_us"]
    assert study.best_params and set(study.best_params) <= set(load_space("matmul", "ascend").names)
    assert set(shot.USER_ATTRS) <= set(study.best_attrs)
    with shot.dashboard(study.url) as base, shot.browser() as ctx:
        seen = shot.check_dashboard(ctx, base, study, shots=tmp_path)
    # check_dashboard asserted the names in the rendered DOM; the study page also lists the knobs it ranks
    assert all(k in seen["history"] for k in study.best_params)
    for name in ("optuna_dashboard.png", "optuna_dashboard_history.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
