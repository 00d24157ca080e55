"""What an optuna study of tiler shows (optuna-dashboard reads these): one parameter per knob, named as the knob,
even where a knob's feasible values depend on knobs sampled before it; the objective named; the predicted time,
bound and tiling as user attributes of every evaluated trial; proposals that never break a rule between knobs;
and the TPE progress bar (drawn on a terminal only)."""

from __future__ import annotations

import io

import optuna
import pytest

from tiler.hardware import load_chip
from tiler.problem import parse_problem
from tiler.search import bayes
from tiler.space import load_space


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="module")
def space():
    return load_space("matmul", "ascend")


def study(storage, name):
    return optuna.load_study(study_name=name, storage=storage)


def names(st) -> set[str]:
    return {p for t in st.get_trials(deepcopy=False) for p in t.params}


def evaluated(st):
    return [
        t
        for t in st.get_trials(deepcopy=False)
        if "tiling" in t.user_attrs and "repeat_of" not in t.user_attrs
    ]


@pytest.mark.parametrize("inner", ["none", "grid"])
def test_param_names_are_the_knob_names(b3, space, inner):
    # M = 1024, N = 2048: base_k's feasible values change with base_m/base_n (L0A/L0B), the case that used to
    # get a parameter `base_k|16,32,64,128` beside `base_k`
    storage = optuna.storages.InMemoryStorage()
    p = parse_problem("matmul", {"M": 1024, "N": 2048, "K": 4096})
    bayes.run(
        p, b3, space, "tpe", seed=0, trials=60, storage=storage, study_name="n", inner=inner, progress=False
    )
    st = study(storage, "n")
    obj = bayes.Objective(p, b3, space, bayes.get_operator("matmul", "ascend"), inner=inner)
    assert names(st) == set(obj.sampled)  # exactly the sampled knobs, each under its own name
    assert all("|" not in n for n in names(st))
    # one distribution per knob, its whole domain
    for t in st.get_trials(deepcopy=False):
        for k, d in t.distributions.items():
            assert list(d.choices) == [space.knobs[k].label(v) for v in space.knobs[k].values]
    # every proposal stays inside its knob's cut set (the values that pass the rules with the knobs sampled
    # before it), so the single name never lets a rule between two knobs be broken
    checked = 0
    for t in st.get_trials(deepcopy=False):
        row: dict[str, int] = {}
        for k in obj.order:
            if k not in t.params:
                break
            v = space.knobs[k].parse(t.params[k])
            assert v in obj.allowed(k, row)[0], (t.number, k, v, row)
            row[k] = v
            checked += 1
    assert checked > 100


def test_metric_name_and_user_attributes(b3, space):
    storage = optuna.storages.InMemoryStorage()
    p = parse_problem("matmul", {"M": 512, "N": 1024, "K": 2048})
    r = bayes.run(p, b3, space, "random", seed=1, trials=8, storage=storage, study_name="m", progress=False)
    st = study(storage, "m")
    assert st.metric_names == ["predicted_us"]
    done = evaluated(st)
    assert len(done) == 8
    for t in done:
        attrs = t.user_attrs
        assert set(attrs) >= {"predicted_us", "bound", "tiling", "tiling_label"}
        assert attrs["predicted_us"] == t.value
        assert set(attrs["tiling"]) == set(space.names)
        label = dict(part.split("=") for part in attrs["tiling_label"].split(" "))
        assert label == {k: str(space.knobs[k].label(v)) for k, v in attrs["tiling"].items()}
    assert any(t.user_attrs["tiling_label"].endswith("core_split=block") for t in done)  # labels, not codes
    assert r.est["time_us"][0] == pytest.approx(min(t.value for t in done))


def test_measured_study_names_its_metric_and_keeps_the_prediction(b3, space):
    storage = optuna.storages.InMemoryStorage()
    p = parse_problem("matmul", {"M": 256, "N": 256, "K": 256})
    pinned = space.pin({"base_n": 128, "base_k": 64, "step_m": 1, "step_n": 1})
    bayes.run(
        p,
        b3,
        pinned,
        "tpe",
        seed=0,
        trials=4,
        storage=storage,
        study_name="x",
        measure=lambda doc: 2 * doc["estimate"]["time_us"],
        progress=False,
    )
    st = study(storage, "x")
    assert st.metric_names == ["measured_us"]
    done = evaluated(st)
    assert done and all(t.value == pytest.approx(2 * t.user_attrs["predicted_us"]) for t in done)
    assert all({"bound", "tiling_label", "measured_us"} <= set(t.user_attrs) for t in done)
    assert names(st) <= set(space.names)


def test_resume_keeps_one_name_per_knob_and_reruns_nothing(b3, space, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    p = parse_problem("matmul", {"M": 1024, "N": 2048, "K": 4096})
    kw = dict(seed=0, storage=url, study_name="r", inner="none", progress=False)
    bayes.run(p, b3, space, "tpe", trials=10, **kw)
    before = {t.number: t.params for t in evaluated(study(url, "r"))}
    r = bayes.run(p, b3, space, "tpe", trials=10, **kw)
    assert any("resumed" in n for n in r.notes)
    after = {t.number: t.params for t in evaluated(study(url, "r"))}
    assert after == before  # nothing evaluated again
    bayes.run(p, b3, space, "tpe", trials=20, **kw)
    assert names(study(url, "r")) <= set(space.names)


class TTY(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_on_a_terminal_only(b3, space, monkeypatch):
    p = parse_problem("matmul", {"M": 512, "N": 512, "K": 512})
    for stream, progress, drawn in ((TTY(), True, True), (TTY(), False, False), (io.StringIO(), True, False)):
        monkeypatch.setattr("sys.stderr", stream)
        bayes.run(p, b3, space, "tpe", seed=0, trials=12, storage="memory", progress=progress)
        text = stream.getvalue()
        if drawn:
            assert "tpe (model) 12/12" in text and "best " in text and text.endswith("\n")
        else:
            assert text == ""
