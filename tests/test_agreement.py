"""tiler.agreement: Spearman, top-1 and best-of-k regret, median |log error|, on examples computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiler.agreement import K_MAX, agreement, average_ranks, combine, spearman


def test_a_small_example_computed_by_hand():
    """pred [1, 2, 3, 4], measured [3, 1, 2, 4]: measured ranks 3 1 2 4, d = -2 1 1 0, rho = 1 - 6*6/(4*15) = 0.4;
    the model picks row 0 (3 against the best 1): top-1 regret 3, best of its first 2 is 1; |log ratios| are log 3,
    log 2, log 1.5, 0, whose median is (log 2 + log 1.5) / 2 = log(3) / 2."""
    a = agreement([1, 2, 3, 4], [3, 1, 2, 4])
    assert a.pairs == 4
    assert a.spearman == pytest.approx(0.4)
    assert a.top1_regret == pytest.approx(3.0)
    assert a.best_of_k == pytest.approx({1: 3.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0, 6: 1.0, 7: 1.0, 8: 1.0})
    assert a.median_abs_log_error == pytest.approx(math.log(3) / 2)
    assert sorted(a.best_of_k) == list(range(1, K_MAX + 1))


def test_spearman_with_ties_uses_average_ranks():
    """pred [1, 2, 2, 3] ranks 1, 2.5, 2.5, 4. The Pearson correlation of the ranks is 4.5 / sqrt(4.5 * 5) =
    sqrt(0.9) = 0.9487; the no-ties shortcut 1 - 6 sum d^2 / (n (n^2 - 1)) would say 0.95."""
    assert list(average_ranks(np.array([10, 20, 20, 30]))) == [1, 2.5, 2.5, 4]
    assert list(average_ranks(np.array([5, 5, 5]))) == [2, 2, 2]
    assert list(average_ranks(np.array([3, 1, 2]))) == [3, 1, 2]
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(math.sqrt(0.9))
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) != pytest.approx(0.95)
    assert spearman([4, 3, 2, 1], [1, 2, 3, 4]) == pytest.approx(-1.0)
    # undefined: one row, or a constant column
    assert math.isnan(spearman([1], [2]))
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_ties_in_the_prediction_keep_the_given_order():
    """Rows predicted equal are taken in the order given (tiler rank passes its own tie order): the pick is row 1,
    measured 5 against the best 1."""
    a = agreement([2, 1, 1], [1, 5, 3])
    assert a.top1_regret == pytest.approx(5.0)
    assert a.best_of_k[2] == pytest.approx(3.0) and a.best_of_k[3] == pytest.approx(1.0)
    assert agreement([2, 1, 1], [1, 3, 5]).top1_regret == pytest.approx(3.0)


def test_rows_without_a_positive_time_are_left_out():
    a = agreement([1.0, np.nan, 2.0, 3.0], [2.0, 1.0, 0.0, -1.0])
    assert a.pairs == 1 and math.isnan(a.spearman) and a.top1_regret == 1.0
    assert a.median_abs_log_error == pytest.approx(math.log(2))
    none = agreement([np.nan], [1.0])
    assert none.pairs == 0 and math.isnan(none.top1_regret)
    assert none.as_dict()["top1_regret"] is None  # JSON has no NaN
    with pytest.raises(ValueError):
        agreement([1, 2], [1, 2, 3])


def test_combine_takes_geomeans_of_regrets_and_the_mean_spearman():
    a = agreement([1, 2, 3, 4], [3, 1, 2, 4])  # rho 0.4, top-1 3
    b = agreement([1, 2], [1, 2])  # rho 1, top-1 1
    c = combine([a, b])
    assert c.problems == 2 and c.pairs == 6
    assert c.spearman == pytest.approx(0.7)
    assert c.top1_regret == pytest.approx(math.sqrt(3.0)) and c.worst_top1_regret == pytest.approx(3.0)
    assert c.best_of_k[2] == pytest.approx(1.0)
    assert c.median_abs_log_error == pytest.approx((math.log(3) / 2 + 0.0) / 2)
    d = c.as_dict()
    assert d["best_of_k_regret"]["1"] == pytest.approx(math.sqrt(3.0)) and d["problems"] == 2
    assert "worst 3.000" in " ".join(c.lines())


times = st.lists(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False), min_size=2, max_size=40)


@settings(max_examples=200, deadline=None)
@given(measured=times, scale=st.integers(min_value=-20, max_value=20))
def test_a_perfect_predictor_has_spearman_1_and_no_regret(measured, scale):
    """A prediction that orders the rows as the clock does (here the measured times scaled by 2^scale, exact in
    floating point, so no new ties) gives Spearman 1, every regret 1.0 and a log error of |scale| log 2."""
    meas = np.array(measured)
    a = agreement(meas * 2.0**scale, meas)
    if len(set(measured)) > 1:
        assert a.spearman == pytest.approx(1.0)
    assert a.top1_regret == 1.0 and all(v == 1.0 for v in a.best_of_k.values())
    assert a.median_abs_log_error == pytest.approx(abs(scale) * math.log(2), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(measured=times, data=st.data())
def test_regrets_never_rise_with_k_and_spearman_is_bounded(measured, data):
    """Any prediction: best-of-k regret is >= 1 and falls (or stays) as k grows, and the top-1 regret is best-of-1."""
    pred = data.draw(st.lists(st.floats(1e-3, 1e6), min_size=len(measured), max_size=len(measured)))
    a = agreement(pred, measured)
    vals = [a.best_of_k[k] for k in range(1, K_MAX + 1)]
    assert all(v >= 1.0 for v in vals) and all(x >= y for x, y in zip(vals, vals[1:], strict=False))
    assert a.top1_regret == vals[0]
    assert math.isnan(a.spearman) or -1.0 <= a.spearman <= 1.0
