"""Bayesian/random search (tiler.bayes): determinism, feasibility, pins, storage and resume, measured objectives
(external commands that work, crash, hang or print garbage), warm start and model guidance, and an offline
replay of measured search on the H200's measured tables (tests/data; bench/regret.py prints the same replay)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import optuna
import pytest

from tiler.errors import TilerError
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.runners.external import MeasureError, measure
from tiler.search import bayes, search
from tiler.space import load_space

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="module")
def space():
    return load_space("matmul", "ascend")


def mm(M, N, K):
    return parse_problem("matmul", {"M": M, "N": N, "K": K})


def evaluated(storage, name):
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    return [
        t
        for t in trials
        if "tiling" in t.user_attrs
        and "repeat_of" not in t.user_attrs
        and t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.FAIL)
    ]


# Everything but base_m pinned: at most 9 tilings, so measured tests know what they will see.
PINS = dict(
    base_n=128,
    base_k=64,
    step_m=1,
    step_n=1,
    step_ka=2,
    step_kb=2,
    multi_load=1,
    weight_resident=0,
    iterate_order="m",
    swizzle_offset=1,
    swizzle_direction=0,
    serpentine=0,
    tail_split="off",
    split_k=1,
    l1_stages=2,
    preload=1,
    l0_pingpong=1,
)


def small_space(space, **extra):
    return space.pin({**PINS, **extra})


def unpin(pinned, space, *names):
    return replace(pinned, knobs={**pinned.knobs, **{k: space.knobs[k] for k in names}})


# ------------------------------------------------------------------ model objective


def test_same_seed_same_result_memory_and_fresh_sqlite(b3, space, tmp_path):
    p = mm(256, 512, 1024)
    runs = [
        bayes.run(p, b3, space, "tpe", top=3, seed=7, trials=12, storage="memory"),
        bayes.run(p, b3, space, "tpe", top=3, seed=7, trials=12, storage="memory"),
        bayes.run(p, b3, space, "tpe", top=3, seed=7, trials=12, storage=str(tmp_path / "fresh.db")),
    ]
    for r in runs[1:]:
        assert r.tiling(0) == runs[0].tiling(0)
        np.testing.assert_allclose(r.est["time_us"], runs[0].est["time_us"])
        assert r.evaluated == 12 and r.seed == 7 and not r.proven_optimal
    other = bayes.run(p, b3, space, "random", top=3, seed=7, trials=15, storage="memory")
    again = bayes.run(p, b3, space, "random", top=3, seed=7, trials=15, storage="memory")
    assert other.tiling(0) == again.tiling(0)


def test_tpe_returns_feasible_distinct_sorted_tilings(b3, space):
    p = mm(333, 777, 2048)
    model = get_operator("matmul", "ascend")
    r = search(p, b3, space, strategy="tpe", top=5, seed=1, trials=30, storage="memory")
    masks = model.feasible(p, b3, r.cands)
    assert all(m.all() for m in masks.values()), {k: m.tolist() for k, m in masks.items()}
    t = r.est["time_us"]
    assert np.all(np.diff(t) >= 0)
    rows = {tuple(r.cands[k][i] for k in space.names) for i in range(len(t))}
    assert len(rows) == len(t)
    assert r.strategy == "tpe" and r.evaluated == 30


def test_pinned_knobs_respected(b3, space):
    pinned = space.pin({"base_m": 64, "split_k": 1, "iterate_order": "n", "l1_stages": 2, "serpentine": 1})
    r = bayes.run(mm(512, 512, 2048), b3, pinned, "tpe", top=4, seed=0, trials=12, storage="memory")
    for i in range(len(r.est["time_us"])):
        t = r.tiling(i)
        assert (t["base_m"], t["split_k"], t["iterate_order"], t["l1_stages"], t["serpentine"]) == (
            64,
            1,
            "n",
            2,
            1,
        )
        assert t["preload"] < t["l1_stages"]


def test_preload_is_sampled_below_l1_stages_when_measured(b3, space):
    """Measured search samples l1_stages and preload (no model.resolve): preload's values depend on the stages."""
    sp = unpin(small_space(space), space, "l1_stages", "preload")
    r = bayes.run(
        mm(256, 256, 1024),
        b3,
        sp,
        "random",
        top=3,
        seed=0,
        trials=12,
        storage="memory",
        measure=lambda doc: 10.0 + doc["tiling"]["l1_stages"] + doc["tiling"]["preload"] / 10,
    )
    assert r.evaluated == 12
    assert "infeasible" not in " ".join(r.notes).replace("0 infeasible", "")
    for i in range(len(r.est["time_us"])):
        assert r.tiling(i)["preload"] < r.tiling(i)["l1_stages"]


@pytest.mark.slow
def test_resume_runs_only_the_missing_trials(b3, space, tmp_path):
    p = mm(256, 512, 1024)
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    bayes.run(p, b3, space, "tpe", seed=3, trials=10, storage=url, study_name="resume")
    first = [(t.number, t.params, t.value) for t in evaluated(url, "resume")]
    assert len(first) == 10
    r = bayes.run(p, b3, space, "tpe", seed=3, trials=20, storage=url, study_name="resume")
    after = [(t.number, t.params, t.value) for t in evaluated(url, "resume")]
    assert len(after) == 20 and r.evaluated == 20
    assert after[:10] == first  # the first ten are kept, not redone
    assert any("resumed" in n for n in r.notes)
    # the same command again: nothing left to do, same answer
    again = bayes.run(p, b3, space, "tpe", seed=3, trials=20, storage=url, study_name="resume")
    assert len(evaluated(url, "resume")) == 20 and again.tiling(0) == r.tiling(0)


def test_default_storage_is_results_sqlite_and_default_name_resumes(b3, space, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = mm(128, 256, 512)
    bayes.run(p, b3, space, "random", seed=0, trials=5)
    db = tmp_path / "results" / "studies.db"
    assert db.is_file()
    names = optuna.get_all_study_names(f"sqlite:///{db}")
    assert (
        len(names) == 1
        and names[0].startswith("ascend910b3-matmul:M=128,N=256,K=512")
        and "random-seed0" in names[0]
    )
    r = bayes.run(p, b3, space, "random", seed=0, trials=8)
    assert r.evaluated == 8 and len(evaluated(f"sqlite:///{db}", names[0])) == 8


@pytest.mark.parametrize("url", ["sqlite:////no/such/folder/x.db", "nosuchdb://host/x", "not a url"])
def test_bad_storage_is_one_clear_error(b3, space, url):
    with pytest.raises(TilerError, match="^storage: ") as err:
        bayes.run(mm(128, 128, 128), b3, space, "tpe", trials=2, storage=url)
    assert "\n" not in str(err.value)


def test_bad_arguments(b3, space):
    with pytest.raises(TilerError, match="^trials: "):
        bayes.run(mm(128, 128, 128), b3, space, "tpe", trials=0, storage="memory")
    with pytest.raises(TilerError, match="tiling"):
        bayes.run(mm(128, 128, 128), b3, space, "tpe", trials=2, storage="memory", measure="echo 1")
    with pytest.raises(TilerError, match="cuda"):
        bayes.run(mm(128, 128, 128), b3, space, "tpe", trials=2, storage="memory", measure="triton")


def test_warm_start_enqueues_the_catlass_default_first(b3, space):
    p = mm(1024, 2048, 4096)
    # every knob sampled: the first trial is the default itself (l0/l1 buffering resolved to its best)
    storage = optuna.storages.InMemoryStorage()
    r = bayes.run(
        p, b3, space, "tpe", seed=0, trials=5, storage=storage, study_name="w", warm_start=True, inner="none"
    )
    t0 = optuna.load_study(study_name="w", storage=storage).trials[0]
    tiling = t0.user_attrs["tiling"]
    want = {
        k: space.knobs[k].parse(v)
        for k, v in get_operator("matmul", "ascend").warm_start(p, b3).items()
        if k not in ("l1_stages", "preload", "l0_pingpong")
    }
    assert {k: tiling[k] for k in want} == {**want, "swizzle_direction": 1}  # M < N: groups of columns
    assert t0.user_attrs["source"] == "warm_start"
    assert r.est["time_us"][0] <= t0.value
    # default (inner="grid"): the first trial is the default's tile grid, the rest of its knobs scored inside it
    storage = optuna.storages.InMemoryStorage()
    bayes.run(p, b3, space, "tpe", seed=0, trials=3, storage=storage, study_name="w", warm_start=True)
    t0 = optuna.load_study(study_name="w", storage=storage).trials[0]
    grid = {k: t0.user_attrs["tiling"][k] for k in get_operator("matmul", "ascend").GRID_KNOBS}
    assert grid == {"base_m": 128, "base_n": 256, "base_k": 64, "step_m": 1, "step_n": 1, "split_k": 1}
    assert len(t0.params) == len(
        grid
    )  # base_k's name carries its feasible values: 256 breaks L0B with base_n 256


def test_warm_start_skips_knobs_and_infeasible_defaults(b3, space):
    # base_n pinned to 64: the default's 256 is replaced by the pin
    storage = optuna.storages.InMemoryStorage()
    r = bayes.run(
        mm(1024, 2048, 4096),
        b3,
        space.pin({"base_n": 64}),
        "tpe",
        seed=0,
        trials=3,
        storage=storage,
        study_name="w",
        warm_start=True,
    )
    t0 = optuna.load_study(study_name="w", storage=storage).trials[0]
    assert t0.user_attrs["source"] == "warm_start" and t0.user_attrs["tiling"]["base_n"] == 64
    assert r.tiling(0)["base_n"] == 64
    # M = 64: the default's base_m = 128 breaks SetFixSplit (base_m <= align16(M)): skipped, with a note
    r = bayes.run(mm(64, 2048, 4096), b3, space, "tpe", seed=0, trials=3, storage="memory", warm_start=True)
    assert any("warm start" in n and "fix_split" in n and "skipped" in n for n in r.notes)
    assert r.evaluated == 3


def test_guided_enqueues_the_exhaustive_top_k(b3, space):
    p = mm(1024, 4096, 2048)
    ex = search(p, b3, space, "exhaustive", top=3)
    storage = optuna.storages.InMemoryStorage()
    # a "measurement" that is the model itself: the search samples every knob, the first three are the top-3
    r = bayes.run(
        p,
        b3,
        space,
        "tpe",
        seed=0,
        trials=6,
        storage=storage,
        study_name="g",
        guided=3,
        measure=lambda doc: doc["estimate"]["time_us"],
    )
    trials = optuna.load_study(study_name="g", storage=storage).trials
    assert [t.user_attrs.get("source") for t in trials[:3]] == ["guided"] * 3
    assert [t.user_attrs["tiling"] for t in trials[:3]] == [
        {k: int(ex.cands[k][i]) for k in space.names} for i in range(3)
    ]
    assert r.est["measured_us"][0] == pytest.approx(ex.est["time_us"][0])
    # model objective: the enqueued optimum is found (schedule variants of it collapse into one trial)
    r = bayes.run(p, b3, space, "tpe", seed=0, trials=3, storage="memory", guided=3)
    assert r.est["time_us"][0] == pytest.approx(ex.est["time_us"][0])


def test_cuda_space_warm_start_uses_the_triton_default():
    try:
        chip, sp = load_chip("h200"), load_space("matmul", "cuda")
        get_operator("matmul", "cuda")
    except TilerError as exc:
        pytest.skip(f"no cuda matmul space/model yet: {exc}")
    storage = optuna.storages.InMemoryStorage()
    bayes.run(
        mm(4096, 4096, 4096),
        chip,
        sp,
        "tpe",
        seed=0,
        trials=4,
        storage=storage,
        study_name="c",
        warm_start=True,
        inner="none",
    )
    t0 = optuna.load_study(study_name="c", storage=storage).trials[0].user_attrs["tiling"]
    want = get_operator("matmul", "cuda").warm_start(mm(4096, 4096, 4096), chip)
    assert {k: t0[k] for k in want} == want


# ------------------------------------------------------------------ measured objective


def script(tmp_path, body: str) -> str:
    """A measurement command: python3 on a script that reads the tiling JSON (sys.argv[1])."""
    f = tmp_path / "m.py"
    f.write_text("import json, sys, time\nd = json.load(open(sys.argv[1]))\nt = d['tiling']\n" + body)
    return f"{PY} {f} {{tiling}}"


def test_external_measure_parses_the_last_line(tmp_path):
    doc = {"tiling": {"base_m": 64}}
    cmd = script(tmp_path, "print('warming up')\nprint()\nprint(1000 / t['base_m'])\nprint('  ')\n")
    assert measure(cmd, doc, timeout=20) == pytest.approx(15.625)


@pytest.mark.parametrize(
    "body, timeout, reason",
    [
        (
            "sys.stderr.write('kernel crashed: illegal address\\n'); sys.exit(3)\n",
            20,
            "status 3: kernel crashed",
        ),
        ("time.sleep(30)\n", 0.5, "timed out after 0.5 s"),
        ("print('n/a')\n", 20, "not a number"),
        ("print(-1)\n", 20, "positive"),
        ("pass\n", 20, "printed nothing"),
    ],
)
def test_external_measure_failures_raise_measure_error(tmp_path, body, timeout, reason):
    with pytest.raises(MeasureError, match=reason):
        measure(script(tmp_path, body), {"tiling": {"base_m": 64}}, timeout=timeout)


@pytest.mark.slow
def test_failed_measurements_fail_their_trial_and_the_study_goes_on(b3, space, tmp_path):
    # base_m 16: crash; 32: hang past the timeout; 48: garbage; the others work (time falls with base_m)
    body = (
        "m = t['base_m']\n"
        "if m == 16: sys.stderr.write('boom\\n'); sys.exit(1)\n"
        "if m == 32: time.sleep(30)\n"
        "print('garbage' if m == 48 else 1000.0 / m)\n"
    )
    sp = small_space(space)
    storage = optuna.storages.InMemoryStorage()
    r = bayes.run(
        mm(512, 512, 1024),
        b3,
        sp,
        "tpe",
        top=3,
        seed=0,
        trials=20,
        storage=storage,
        study_name="m",
        measure=script(tmp_path, body),
        # the hang (30 s) times out, twice (a failed tiling may be proposed again); a working call (a Python start,
        # about 0.04 s) stays far below it
        measure_timeout=1.0,
    )
    trials = optuna.load_study(study_name="m", storage=storage).get_trials(deepcopy=False)
    failed = {
        t.user_attrs["tiling"]["base_m"]: t.user_attrs["error"]
        for t in trials
        if t.state == optuna.trial.TrialState.FAIL
    }
    assert "status 1: boom" in failed[16] and "timed out" in failed[32] and "not a number" in failed[48]
    ok = [
        t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and "repeat_of" not in t.user_attrs
    ]
    assert ok and all("predicted_us" in t.user_attrs and t.user_attrs["measured_us"] == t.value for t in ok)
    best_m = max(t.user_attrs["tiling"]["base_m"] for t in ok)
    assert r.tiling(0)["base_m"] == best_m
    assert r.est["measured_us"][0] == pytest.approx(1000.0 / best_m)
    assert any("failed measurements" in n for n in r.notes)


def test_working_measure_command_is_the_objective(b3, space, tmp_path):
    # a "hardware" that prefers base_m = 96 (the model would not): the search must follow the measurement
    body = "print(5.0 + abs(t['base_m'] - 96) / 8.0)\n"
    r = bayes.run(
        mm(512, 512, 1024),
        b3,
        small_space(space),
        "tpe",
        top=3,
        seed=0,
        trials=9,
        storage="memory",
        measure=script(tmp_path, body),
    )
    assert r.tiling(0)["base_m"] == 96 and r.est["measured_us"][0] == pytest.approx(5.0)
    assert "predicted" in " ".join(r.notes)


def test_guided_measured_reports_measurements_near_the_best(b3, space):
    r = bayes.run(
        mm(512, 512, 1024),
        b3,
        unpin(small_space(space), space, "base_n"),
        "tpe",
        seed=0,
        trials=8,
        storage="memory",
        guided=4,
        measure=lambda doc: 1.0 + doc["estimate"]["time_us"] / 100,
    )
    assert any(
        n.startswith("guided: model top-4 measured first") and "within 2% of the best" in n for n in r.notes
    )


# ------------------------------------------------------------------ offline replay of measured search

# The H200's measured tables (copies of bench/data's, frozen here): a "measurement" is a look-up of the measured
# time, so a measured search replays offline. bench/regret.py prints the same replay as a table.
DATA = Path(__file__).resolve().parent / "data"
CUDA_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
GUIDED_K = 5  # model-guided TPE: the model's top 5 measured first


def _measured(name: str) -> dict:
    """(M, N, K) -> (config matrix [rows x 8], ms per row) for the Triton rows of a measured table."""
    import pandas as pd

    df = pd.read_csv(DATA / name)
    df = df[(df["impl"] == "triton") & df["ms"].notna()]
    out = {}
    for (m, n, k), g in df.groupby(["M", "N", "K"]):
        g = g.groupby(list(CUDA_KNOBS), as_index=False)["ms"].min()  # one row per config
        out[(int(m), int(n), int(k))] = (
            g[list(CUDA_KNOBS)].to_numpy(dtype=np.int64),
            g["ms"].to_numpy(float),
        )
    return out


def _fitted_shapes() -> set[tuple[int, int, int]]:
    """The shapes the shipped h200 profile's [efficiency] constants were fitted on (read from their sources)."""
    import re

    chip = load_chip("h200")
    for key, tag in chip.tags.items():
        m = re.search(r"shapes ([0-9x, ]+)\)", chip.sources.get(key, "")) if tag == "fitted" else None
        if m:
            return {tuple(int(v) for v in s.strip().split("x")) for s in m.group(1).split(",")}
    return set()


def _replay(configs: np.ndarray, ms: np.ndarray, strategy: str, first: list[int], q: float = 0.95) -> int:
    """Measurements a measured search over the measured configs needs until its best is within 1/q of the table's
    best (all rows if never). TPE or random (bayes.make_sampler, seed 0) over one ordinal parameter per knob (ORDER
    categorical); a sampled point that is not a measured config is snapped to the nearest unmeasured one and the
    sampler is told the config measured (the proposal closed as FAIL, which TPE ignores). `first` is measured
    before the sampler starts."""
    from optuna.distributions import CategoricalDistribution, IntDistribution
    from optuna.trial import TrialState, create_trial

    vals = [sorted(set(configs[:, i].tolist())) for i in range(len(CUDA_KNOBS))]
    idx = np.stack([np.searchsorted(vals[i], configs[:, i]) for i in range(len(CUDA_KNOBS))], axis=1)
    cat = [k == "ORDER" for k in CUDA_KNOBS]
    dists = {
        k: CategoricalDistribution(tuple(vals[i])) if cat[i] else IntDistribution(0, len(vals[i]) - 1)
        for i, k in enumerate(CUDA_KNOBS)
    }
    study = optuna.create_study(sampler=bayes.make_sampler(strategy, 0))
    seen = np.zeros(len(ms), dtype=bool)
    bar = ms.min() / q

    def measure(r: int) -> bool:
        seen[r] = True
        params = {k: vals[i][idx[r, i]] if cat[i] else int(idx[r, i]) for i, k in enumerate(CUDA_KNOBS)}
        study.add_trial(create_trial(params=params, distributions=dists, value=float(ms[r])))
        return ms[r] <= bar

    for r in first:
        if not seen[r] and measure(int(r)):
            return int(seen.sum())
    while not seen.all():
        t = study.ask(dists)
        params = t.params  # a copy per access (optuna deep-copies it): read once
        want = np.array([vals[i].index(params[k]) if cat[i] else params[k] for i, k in enumerate(CUDA_KNOBS)])
        dist = np.abs(idx - want)
        dist[:, cat] = dist[:, cat] > 0
        d = dist.sum(axis=1).astype(float)
        d[seen] = np.inf
        r = int(np.argmin(d))  # the nearest unmeasured config (lowest row on ties: deterministic)
        study.tell(t, state=TrialState.FAIL)
        if measure(r):
            break
    return int(seen.sum())


@pytest.mark.parametrize(
    "table, which",
    [
        ("h200_matmul_cal.csv", "fitted"),
        ("h200_matmul_cal.csv", "held out"),
        ("h200_matmul_new.csv", "held out"),
    ],
)
def test_replay_of_measured_search(table, which):
    """Offline replay of measured search on the H200's measured tables, per group of shapes (fitted into the
    profile, held out of it; every shape of the later table): model-guided TPE needs no more measurements than random to reach
    0.95 of the best (median over shapes), and plain TPE fewer than random on average."""
    fit = _fitted_shapes()
    shapes = {
        s: v for s, v in _measured(table).items() if which == "all" or (s in fit) == (which == "fitted")
    }
    assert shapes, (table, which)
    model, chip = get_operator("matmul", "cuda"), load_chip("h200")
    prev = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    n = {"guided": [], "tpe": [], "random": []}
    try:
        for shape, (configs, ms) in shapes.items():
            cand = {k: configs[:, i].copy() for i, k in enumerate(CUDA_KNOBS)}
            t = np.asarray(model.estimate(mm(*shape), chip, cand)["time_us"], dtype=float)
            rank = [int(r) for r in np.argsort(t, kind="stable")[:GUIDED_K]]
            n["guided"].append(_replay(configs, ms, "tpe", first=rank))
            n["tpe"].append(_replay(configs, ms, "tpe", first=[]))
            n["random"].append(_replay(configs, ms, "random", first=[]))
    finally:
        optuna.logging.set_verbosity(prev)
    assert np.median(n["guided"]) <= np.median(n["random"]), n
    assert np.mean(n["tpe"]) < np.mean(n["random"]), n


@pytest.mark.slow
def test_killed_run_resumes_with_the_same_study_name(b3, space, tmp_path):
    """SIGKILL mid-study (a measurement in flight), then the same command: the finished trials are kept."""
    import signal
    import subprocess
    import time

    db = tmp_path / "kill.db"
    # the measurement command leaves a mark per call; while `hold` exists, the third call and later block: the kill
    # lands when the third mark appears (two trials complete, the third's measurement in flight), whatever the load
    marks, hold = tmp_path / "marks", tmp_path / "hold"
    marks.mkdir()
    hold.touch()
    slow = script(
        tmp_path,
        f"import os\nn = len(os.listdir({str(marks)!r}))\nopen(os.path.join({str(marks)!r}, str(n)), 'w').close()\n"
        f"while n >= 2 and os.path.exists({str(hold)!r}): time.sleep(0.01)\n"
        "print(1000.0 / t['base_m'])\n",
    )
    code = (
        "from tiler.search import bayes; from tiler.hardware import load_chip; from tiler.space import load_space\n"
        "from tiler.problem import parse_problem\n"
        "p = parse_problem('matmul', {'M': 512, 'N': 512, 'K': 1024})\n"
        f"bayes.run(p, load_chip('ascend910b3'), load_space('matmul', 'ascend').pin({PINS!r}), 'random', seed=0,"
        f" trials=7, storage={str(db)!r}, study_name='k', measure={slow!r})\n"
    )
    proc = subprocess.Popen([PY, "-c", code], cwd=ROOT)
    url = f"sqlite:///{db}"
    deadline = time.monotonic() + 300  # a safety net only: the wait ends on the third mark
    while len(list(marks.iterdir())) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None and len(list(marks.iterdir())) == 3
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    hold.unlink()  # the orphaned measurement ends; the resumed run below measures without blocking
    before = [(t.number, t.params) for t in evaluated(url, "k")]
    assert 2 <= len(before) < 7
    r = bayes.run(
        mm(512, 512, 1024),
        b3,
        small_space(space),
        "random",
        seed=0,
        trials=7,
        storage=url,
        study_name="k",
        measure=slow,
    )
    after = [(t.number, t.params) for t in evaluated(url, "k")]
    assert r.evaluated == len(after) and after[: len(before)] == before
    assert any("resumed" in n for n in r.notes)


@pytest.mark.slow
def test_four_processes_on_one_sqlite_study_share_one_budget(tmp_path):
    """Four `tiler search --strategy tpe` processes on one SQLite study (issue 31): all exit 0 with no traceback,
    the study holds exactly the requested budget of evaluations, and no tiling is evaluated twice."""
    import collections
    import subprocess
    import sys

    import optuna

    db = tmp_path / "shared.db"
    argv = [sys.executable, "-m", "tiler", "search", "--chip", "h200", "--op", "matmul",
            "--shape", "M=1024,N=1024,K=1024", "--strategy", "tpe", "--trials", "25",
            "--storage", str(db), "--study-name", "shared"]  # fmt: skip
    procs = [
        subprocess.Popen([*argv, "--seed", str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(4)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and "Traceback" not in err, err[-2000:]
    study = optuna.load_study(study_name="shared", storage=f"sqlite:///{db}")
    evaluated = [
        t
        for t in study.get_trials(deepcopy=False)
        if "tiling" in t.user_attrs
        and "repeat_of" not in t.user_attrs
        and t.state.name in ("COMPLETE", "FAIL")
    ]
    assert len(evaluated) == 25
    twice = [
        k for k, n in collections.Counter(str(t.user_attrs["tiling"]) for t in evaluated).items() if n > 1
    ]
    assert not twice


def test_the_explore_note_counts_the_trials_that_escaped_repeats():
    """A study's trials tagged `explore` (a random unseen point after ESCAPE repeats) are counted in one note."""
    from types import SimpleNamespace

    from tiler.search.bayes.driver import ESCAPE, _explore_notes

    def trial(source):
        return SimpleNamespace(user_attrs={"source": source})

    assert _explore_notes([trial("tpe"), trial("local"), SimpleNamespace(user_attrs={})]) == []
    one = f"explore: 1 trial took a random unseen feasible point after {ESCAPE} repeats in a row"
    assert _explore_notes([trial("explore"), trial("tpe")]) == [one]
    assert _explore_notes([trial("explore")] * 3)[0].startswith("explore: 3 trials took")


def test_the_feasible_grids_distinct_values_are_np_uniques():
    """sampler._distinct (the feasible grid's columns and codes) is np.unique for integer columns of every shape it
    takes a path for: strictly increasing, sorted with repeats, a small range, a wide range, negative values,
    empty and one row, several dtypes; same values and dtype."""
    import numpy as np

    from tiler.search.bayes.sampler import _distinct

    rng = np.random.default_rng(3)
    cols = [np.zeros(0, dtype=np.int64), np.array([5]), np.array([-3, -3]), np.arange(10) * 7 - 20]
    for _ in range(200):
        n = int(rng.integers(0, 300))
        span = int(rng.choice([1, 5, 600, 1 << 40]))
        col = rng.integers(-span, span + 1, n)
        if rng.random() < 0.3:
            col = np.sort(col)
        cols.append(col.astype(rng.choice([np.int64, np.int32, np.int16])) if span < 1 << 15 else col)
    cols += [np.array([3, 1, 200], dtype=np.uint8), np.array([2**62, -(2**62), 0], dtype=np.int64)]
    cols += [np.array([-100, 100, 5, 5], dtype=np.int8), np.array([2**64 - 1, 2**64 - 3, 7], dtype=np.uint64)]
    cols += [np.array([2**63 + 5, 2**63 + 1, 2**63 + 5], dtype=np.uint64)]
    for col in cols:
        got, want = _distinct(col), np.unique(col)
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), col


def test_the_feasible_grids_allowed_values_follow_any_order_of_asks():
    """FeasibleGrid.allowed keeps its last row's grid rows and narrows them when the next row is one knob longer:
    its answers are still the definition's (the values of the feasible points that agree with the row, and the
    rules that cut some agreeing point) for walks, repeated asks, shorter rows and unrelated rows in any order."""
    import numpy as np

    from tiler.search.bayes import FeasibleGrid
    from tiler.space import product

    rng = np.random.default_rng(5)
    for _ in range(40):
        names = [f"k{i}" for i in range(int(rng.integers(1, 5)))]
        domains = {n: np.sort(rng.choice(50, size=int(rng.integers(1, 5)), replace=False)) for n in names}
        grid = product(*[{n: d} for n, d in domains.items()])
        size = len(grid[names[0]])
        rule_ok = {f"r{i}": rng.random(size) < 0.8 for i in range(int(rng.integers(0, 3)))}
        ok = np.logical_and.reduce([*rule_ok.values(), np.ones(size, dtype=bool)])
        fg = FeasibleGrid(names, grid, ok, rule_ok)
        for _ in range(30):
            row = {k: int(rng.choice(domains[k])) for k in names if rng.random() < 0.5}
            for knob in [*row, *names][: int(rng.integers(1, 2 * len(names) + 1))]:
                values = tuple(int(v) for v in domains[knob])
                sel = np.logical_and.reduce([grid[k] == v for k, v in row.items()] + [np.ones(size, bool)])
                keep = tuple(v for v in values if np.any(grid[knob][sel & ok] == v))
                cut = [r for r, m in rule_ok.items() if not m[sel].all()]
                assert fg.allowed(knob, row, values) == (keep, cut if keep or cut else list(rule_ok))
                if rng.random() < 0.5 and knob not in row:  # the next ask one knob longer, as a walk asks
                    row = {**row, knob: int(rng.choice(domains[knob]))}


def test_the_feasible_grid_counts_and_finds_exactly_its_points():
    """FeasibleGrid answers `len`, `in` and `contains` from packed codes, without its set of tuples: the same answers
    as the set (`keys`) on random product grids and masks, points outside the domains and keys of the wrong length
    included."""
    import numpy as np

    from tiler.search.bayes import FeasibleGrid
    from tiler.space import product

    rng = np.random.default_rng(7)
    for _ in range(100):
        names = [f"k{i}" for i in range(int(rng.integers(0, 4)))]
        domains = [np.sort(rng.choice(600, size=int(rng.integers(1, 6)), replace=False)) for _ in names]
        grid = product(*[{n: d} for n, d in zip(names, domains, strict=True)]) if names else {}
        size = len(next(iter(grid.values()))) if grid else int(rng.integers(0, 3))
        ok = rng.random(size) < rng.random()
        fg = FeasibleGrid(names, grid, ok, {})
        want = {tuple(int(grid[k][i]) for k in names) for i in np.flatnonzero(ok)}
        assert len(fg) == len(want)
        probes = [*want, *(tuple(int(x) for x in rng.integers(-5, 605, len(names))) for _ in range(30))]
        assert all((p in fg) == (p in want) for p in [*probes, (0,) * (len(names) + 1)])
        if names:  # the same answers for all the probes at once, as columns (the local search asks so)
            cols = [np.array([p[i] for p in probes], dtype=np.int64) for i in range(len(names))]
            assert fg.contains(cols).tolist() == [p in want for p in probes]
        assert fg.keys == want
