"""The operator conformance suite (tiler.testing, in the spirit of scikit-learn's check_estimator): every registered
(op, family) passes every check of tiler.testing.CHECKS, so a new operator gets them for free; the tests here that
are not per operator check the registry itself. docs/operators.md lists the checks."""

from __future__ import annotations

import numpy as np
import pytest

from tiler.errors import ConfigError, TilerError
from tiler.operator import Operator, get_operator, known_ops, register
from tiler.testing import CHECKS

OPS = known_ops()


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize("op_family", OPS, ids=[f"{o}/{f}" for o, f in OPS])
def test_conformance(op_family, check):
    """One check of tiler.testing.CHECKS on one registered operator (its docstring says what it asserts)."""
    CHECKS[check](*op_family)


def test_every_shipped_operator_has_both_families():
    """`tiler ops` lists matmul and depthwise_conv for both families."""
    assert {
        ("matmul", "ascend"),
        ("matmul", "cuda"),
        ("depthwise_conv", "ascend"),
        ("depthwise_conv", "cuda"),
    } <= set(OPS)


def test_registering_knobs_that_differ_from_the_space_fails():
    """register() checks the knob names against the space file: a renamed knob is a ConfigError."""
    base = type(get_operator("depthwise_conv", "cuda"))
    bad = type("Renamed", (base,), {"KNOBS": tuple(k if k != "BLOCK_P" else "BLOCK_Q" for k in base.KNOBS)})
    with pytest.raises(ConfigError, match="BLOCK_Q"):
        register(bad)


def test_an_operator_needs_only_feasible_and_estimate():
    """The base class's defaults make a two-method operator complete (no bound, no views, no runner)."""

    class Tiny(Operator):
        def feasible(self, p, chip, c, rules=None):
            return {}

        def estimate(self, p, chip, c):
            return {}

    t = Tiny()
    c = {"a": np.arange(3)}
    assert t.bound(None, None, c) is None and t.prefix_bound(None, None, c, {}) is None
    assert not t.dominated(None, None, c).any() and np.all(t.quick_bound(None, None, c) == 0)
    assert t.views(None, None, {}, {}, {}) == {} and t.warm_start(None, None) == {}
    with pytest.raises(TilerError, match="runner"):
        t.runner("triton")
