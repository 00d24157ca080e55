"""The depthwise Triton kernels and runner: the kernels' own rules agree with the model's, exports parse, a
measurement fails cleanly without a GPU stack, and (on a GPU) every scheme matches torch."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from tiler.export import tiling_document
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.depthwise_conv import triton_kernels as km
from tiler.ops.depthwise_conv.triton_runner import measure_document, tiling_from_doc
from tiler.problem import parse_problem
from tiler.runners.external import MeasureError
from tiler.search import search
from tiler.space import load_space

SHAPES = [
    dict(N=2, C=24, H=17, W=19, kh=3, kw=3, stride=1, pad=1, dilation=1),
    dict(N=1, C=40, H=33, W=31, kh=5, kw=5, stride=2, pad=2, dilation=1),
    dict(N=2, C=18, H=20, W=20, kh=3, kw=3, stride=1, pad=2, dilation=2),
    dict(N=2, C=64, H=300, W=1, kh=4, kw=1, stride=1, pad=3, dilation=1),
    dict(N=2, C=32, H=1, W=300, kh=1, kw=4, stride=1, pad=3, dilation=1),  # 1-D along W: H is not padded
]


def test_output_size_matches_the_problem():
    """The kernels and the model compute the same output extent (pad on W only when kw > 1)."""
    for s in SHAPES:
        p = parse_problem("depthwise_conv", s)
        assert km.output_size(*(s[k] for k in ("H", "W", "kh", "kw", "stride", "pad", "dilation"))) == (
            p.out_h,
            p.out_w,
        )


def test_every_tiling_the_model_allows_the_kernel_runs():
    """Exports are promises: every candidate of the cuda space that passes the model's rules passes the
    kernels' own `validate` (the search never hands out a tiling the kernel refuses)."""
    chip, space = load_chip("h200"), load_space("depthwise_conv", "cuda")
    model = get_operator("depthwise_conv", "cuda")
    for s in SHAPES:
        p = parse_problem("depthwise_conv", s)
        cands = space.product(space.names)
        ok = np.logical_and.reduce(list(model.feasible(p, chip, cands).values()))
        for i in np.flatnonzero(ok):
            cfg = space.decode(cands, int(i))
            assert km.validate(cfg, s) is None, (s, cfg, km.validate(cfg, s))


def test_an_export_round_trips_to_the_runner_inputs():
    """The runner reads the problem and the six knobs back from a tiler.tiling/v1 document."""
    chip, space = load_chip("h200"), load_space("depthwise_conv", "cuda")
    p = parse_problem("depthwise_conv", SHAPES[0])
    res = search(p, chip, space, top=1)
    doc = tiling_document(p, chip, res.tiling(0), res.row(0))
    problem, cfg, dtype = tiling_from_doc(doc)
    assert problem == {**SHAPES[0], "layout": "nchw"} and dtype == "fp16"
    assert cfg == {k: res.tiling(0)[k] for k in cfg} and km.validate(cfg, problem) is None


def test_measuring_without_the_gpu_stack_fails_one_trial_cleanly(monkeypatch):
    """No torch: `--measure triton` raises MeasureError with one line (the trial fails, the search goes on)."""
    monkeypatch.setitem(sys.modules, "torch", None)
    chip, space = load_chip("h200"), load_space("depthwise_conv", "cuda")
    p = parse_problem("depthwise_conv", SHAPES[0])
    res = search(p, chip, space, top=1)
    with pytest.raises(MeasureError) as err:
        measure_document(tiling_document(p, chip, res.tiling(0), res.row(0)))
    assert "\n" not in str(err.value)


# --- on a GPU ---------------------------------------------------------------------------------------------


CONFIGS = [
    dict(scheme="vector", groups_per_op=4, BLOCK_P=64, BLOCK_K=16, num_warps=2, num_stages=1),
    dict(scheme="group_opt", groups_per_op=16, BLOCK_P=64, BLOCK_K=32, num_warps=4, num_stages=2),
    dict(scheme="group_loop", groups_per_op=1, BLOCK_P=64, BLOCK_K=16, num_warps=4, num_stages=1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c["scheme"])
def test_every_scheme_matches_torch(torch, shape, cfg):
    """Each scheme computes F.conv2d(groups=C) on random inputs (rel. error below 1e-2, no NaN)."""
    res = km.run(shape, cfg, rep_ms=5, warmup_ms=1)
    assert res["rel_err"] < 1e-2 and res["ms"] > 0


NHWC_CONFIGS = [
    dict(scheme="vector", groups_per_op=8, BLOCK_P=64, BLOCK_K=16, num_warps=2, num_stages=1),
    dict(scheme="vector", groups_per_op=128, BLOCK_P=32, BLOCK_K=16, num_warps=4, num_stages=1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cfg", NHWC_CONFIGS, ids=lambda c: f"G{c['groups_per_op']}")
def test_the_nhwc_kernel_matches_torch(torch, shape, cfg):
    """The channels_last kernel computes F.conv2d(groups=C) on channels_last inputs, channel groups wider than
    C included (masked), and writes a channels_last output."""
    prob = km.Problem({**shape, "layout": "nhwc"})
    assert prob.x.is_contiguous(memory_format=torch.channels_last)
    assert prob.check(cfg) < 1e-2
    assert prob.out.is_contiguous(memory_format=torch.channels_last)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("strip", (2, 4))
@pytest.mark.parametrize("cfg", NHWC_CONFIGS, ids=lambda c: f"G{c['groups_per_op']}")
def test_the_nhwc_strip_kernel_matches_torch(torch, shape, strip, cfg):
    """Strips of 2 and 4 output columns compute F.conv2d(groups=C) too: widths that are not a multiple of the
    strip (the last strip's columns past the edge masked), stride 2, dilation 2 (input columns of the window no
    column uses) and the 1-D shapes (a strip along W of one column)."""
    prob = km.Problem({**shape, "layout": "nhwc"})
    prob.out.fill_(float("nan"))
    assert prob.check({**cfg, "STRIP": strip}) < 1e-2


def test_strips_run_on_the_nhwc_kernel_only():
    """A strip of more than one column is the NHWC kernel's: nchw refuses it in one sentence, as does a strip
    the kernel has no code for."""
    cfg = {**NHWC_CONFIGS[0], "STRIP": 4}
    assert km.validate(cfg, {**SHAPES[0], "layout": "nhwc"}) is None
    assert "nhwc only" in km.validate(cfg, SHAPES[0])
    assert "must be one of 1, 2, 4" in km.validate({**cfg, "STRIP": 3}, {**SHAPES[0], "layout": "nhwc"})


def test_the_nhwc_kernel_runs_the_vector_scheme_only():
    """The tensor-core schemes gather along a channel plane: an NHWC problem refuses them in one sentence."""
    conv = {**SHAPES[0], "layout": "nhwc"}
    assert "vector scheme only" in km.validate(CONFIGS[1], conv)
    assert km.validate(CONFIGS[0], conv) is None
    assert km.validate({**CONFIGS[0], "groups_per_op": 256}, conv) is None
    assert "power of two in [1, 64]" in km.validate({**CONFIGS[0], "groups_per_op": 128}, SHAPES[0])
