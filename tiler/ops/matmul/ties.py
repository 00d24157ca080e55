"""Calibration's discrete choice for matmul on CUDA: the launch order reported for exact ties, per load path.

The model predicts launch orders of a tiling exactly equal where its L2 walk sees no difference; the H200 does not
run them equal (docs/model_cuda.md sections 6 and 8). `choose_tie_orders` picks, from measurements, the order the
search reports among such ties (profile keys tie_order_async / tie_order_sync). pandas lives here, not in the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

TIE_MIN_GROUPS = 5  # an order must be measured in this many tied groups of a load path to be chosen


def order_name(code: int) -> str:
    return "row-major" if code == 0 else "serpentine" if code == -1 else f"grouped {code}"


@dataclass
class TieChoice:
    """The launch order reported for exact ties on one load path, and the evidence for it."""

    key: str  # the profile key (tie_order_async / tie_order_sync)
    code: int  # 0 row-major, -1 serpentine, g > 0 grouped by g
    was: int
    groups: int  # tied groups of measured orders the choice was made on
    score: dict[int, float]  # per order code: geomean of (group's best / its time), over the groups it was in

    @property
    def value(self) -> float:
        """The profile value written for `key`."""
        return float(self.code)

    def __str__(self) -> str:
        names = ", ".join(
            f"{order_name(c)} {v:.3f}" for c, v in sorted(self.score.items(), key=lambda x: -x[1])
        )
        return (
            f"{self.key} = {self.code} ({order_name(self.code)}; was {order_name(self.was)}): "
            f"{self.groups} groups of exactly tied orders, geomean of best/time: {names or 'no data'}"
        )


def choose_tie_orders(
    problems: list, cands: list[dict], pred: np.ndarray, seconds: np.ndarray, shape_of: np.ndarray, chip
) -> list[TieChoice]:
    """For each load path, the launch order that measured fastest where the model predicts orders exactly equal.

    Rows of one shape and one tiling (all knobs but the order) that the model times identically form a group; an
    order's score is the geometric mean, over the groups where it was measured, of the group's best time over its
    time (1.0 = always the fastest). The best-scoring order measured in at least TIE_MIN_GROUPS groups wins; with
    less data the profile's value stays. The model's times do not change: only which tie the search reports.

    Args:
        problems, cands: per shape index, the problem and the knob columns of its rows;
        pred, seconds, shape_of: per row, the predicted and measured time and the shape index.
    """
    from . import cuda

    knobs = [k for k in cuda.KNOBS if k not in cuda.ORDER_KNOBS]
    parts = []
    for i, (p, c) in enumerate(zip(problems, cands, strict=True)):
        m = shape_of == i
        parts.append(
            pd.DataFrame(
                {
                    "shape": i,
                    "sync": cuda.synchronous_loads(p),
                    "code": cuda.order_code(p, c, effective=False),
                    "pred": pred[m],
                    "t": seconds[m],
                    **{k: c[k] for k in knobs},
                }
            )
        )
    df = pd.concat(parts, ignore_index=True)
    group = ["shape", *knobs, "pred"]
    df = df.groupby([*group, "sync", "code"], as_index=False)["t"].median()  # one time per order of a group
    df["orders"] = df.groupby(group)["code"].transform("size")
    df = df[df["orders"] >= 2]
    df["eff"] = df.groupby(group)["t"].transform("min") / df["t"]
    out = []
    for sync, key in ((False, "tie_order_async"), (True, "tie_order_sync")):
        d = df[df["sync"] == sync]
        was = int(round(float(chip.get(key, cuda.DEFAULTS[key]))))
        counts = d.groupby("code").size()
        score = {int(c): float(np.exp(np.log(v).mean())) for c, v in d.groupby("code")["eff"]}
        ok = {c: v for c, v in score.items() if counts[c] >= TIE_MIN_GROUPS}
        code = max(ok, key=lambda c: (ok[c], c == 0)) if ok else was
        out.append(TieChoice(key, code, was, int(d.groupby(group).ngroups), score))
    return out
