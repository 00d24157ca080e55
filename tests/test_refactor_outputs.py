"""The refactor of issue 32 (layers, one use-case layer) changes no estimate and no output: a fixed set of
searches through tiler.api (four operators, both chip families) gives the same top tilings, the same estimates
and the same runnable views, bit for bit, as the fixture tests/data/refactor_searches.json recorded before it.

Regenerate the fixture only for a change that is meant to move an estimate:
    python tests/test_refactor_outputs.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "refactor_searches.json"

# (op, chip, shape, dtype, fix[, strategy]): small enough to run in seconds, together covering every operator on both families
CASES = [
    ("matmul", "ascend910b3", "M=1024,N=2048,K=512", "fp16", None),
    ("matmul", "ascend310p3", "M=333,N=777,K=129", "fp16", None),
    ("matmul", "h200", "M=2048,N=2048,K=1024", "fp16", None),
    ("matmul", "a100", "M=100,N=3000,K=700", "bf16", None),
    ("softmax", "ascend910b3", "rows=4096,d=8192", "fp16", None),
    ("softmax", "h100", "rows=1000,d=3000", "fp32", None),
    ("depthwise_conv", "ascend910b3", "N=8,C=64,H=56,W=56,kh=3,kw=3,stride=1,pad=1,dilation=1", "fp16", None),
    ("depthwise_conv", "h200", "N=8,C=128,H=28,W=28,kh=3,kw=3,stride=2,pad=1,dilation=1", "fp16", None),
    ("flash_attention", "ascend910b3", "B=2,heads=8,kv_heads=8,S1=1024,S2=1024,D=128,causal=1", "fp16", None),
    ("flash_attention", "h200", "B=1,heads=16,kv_heads=4,S1=2048,S2=2048,D=64,causal=0", "bf16", None),
    ("matmul", "h200", "M=4096,N=1024,K=2048", "fp16", "SPLIT_K=1", "tpe"),  # seeded TPE (in memory)
    ("softmax", "ascend910b3", "rows=512,d=100000", "fp32", None, "random"),
]


def _plain(v):
    """A value as JSON keeps it exactly: floats by their repr (inf/nan as text), numpy scalars as Python ones."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        return repr(v) if not math.isfinite(v) else v
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    return v


def run_case(op, chip, shape, dtype, fix, strategy="exhaustive") -> dict:
    import tiler.api as api

    kw = {} if strategy == "exhaustive" else {"trials": 40, "storage": "memory"}  # a fresh study each run
    res = api.search(
        op=op, chip=chip, shape=shape, dtype=dtype, fix=fix, top=5, strategy=strategy, seed=3, **kw
    )
    n = len(res.est["time_us"])
    doc = res.document(0)
    return {
        "tilings": [_plain(res.tiling(i)) for i in range(n)],
        "rows": [_plain(res.row(i)) for i in range(n)],
        "counts": [res.evaluated, res.bounded, res.space_size, res.feasible, bool(res.proven_optimal)],
        "targets": _plain(doc.get("targets", {})),
        "runnable": _plain(doc.get("runnable", {})),
        "tiling_doc": _plain(doc["tiling"]),
        "launch": _plain(doc.get("launch", {})),
        "estimate": _plain(doc["estimate"]),
    }


def _key(case) -> str:
    return " ".join(str(x) for x in case if x is not None)


@pytest.mark.parametrize("case", CASES, ids=_key)
def test_search_outputs_unchanged(case):
    want = json.loads(FIXTURE.read_text())[_key(case)]
    got = json.loads(json.dumps(run_case(*case)))
    assert got == want


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps({_key(c): run_case(*c) for c in CASES}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
