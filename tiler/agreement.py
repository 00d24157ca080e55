"""How well predicted times agree with measured ones, for one problem's rows: the figures a kernel author checks
before trusting a ranking (issue 28).

For rows of one problem with a predicted and a measured time each (the same unit, or any two units: only ratios
and ranks are used, except by the log error, which needs the same unit):

- `spearman`: Spearman's rank correlation of predicted and measured (the Pearson correlation of their ranks, tied
  values taking the average of the ranks they span). 1: the model orders the rows as the clock does. NaN with
  fewer than 2 rows or when either column is constant (a correlation with no spread is undefined).
- `top1_regret`: the measured time of the model's pick (its first row) over the best measured time, a ratio >= 1
  (1.0: the model picked the fastest row; 1.25: its pick runs 25% longer than the best). Regret as a ratio, not
  ratio - 1, so figures of several shapes combine by a geometric mean.
- `best_of_k`: k -> the best measured time among the model's first k rows over the best measured, for k = 1..8
  (what a user who times the model's top k gets); k = 1 is `top1_regret`, and k >= the number of rows is 1.0.
- `median_abs_log_error`: the median over rows of |log(predicted / measured)| (0.1: a typical row is off by
  about 10%).

The model's order is the predicted times ascending; rows predicted equal keep the order they are given in (tiler
rank gives them in its own order: the model's tie preference, then the file's order). Rows whose predicted or
measured time is not a positive finite number are left out. `combine` summarises several problems' figures.
Pure numpy: nothing here knows an operator, a knob or a file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

K_MAX = 8  # best-of-k is reported for k = 1..K_MAX


@dataclass(frozen=True)
class Agreement:
    """The figures of one problem (or, from `combine`, of several: `problems` > 1)."""

    pairs: int  # rows with a predicted and a measured time
    spearman: float
    top1_regret: float
    best_of_k: dict[int, float] = field(default_factory=dict)
    median_abs_log_error: float = float("nan")
    problems: int = 1
    worst_top1_regret: float = float("nan")  # combine(): the largest per-problem top-1 regret

    def as_dict(self) -> dict:
        """JSON-ready: NaN becomes None, best_of_k keys are strings ("1".."8")."""

        def num(v):
            return None if v is None or not np.isfinite(v) else float(v)

        out = {
            "pairs": int(self.pairs),
            "spearman": num(self.spearman),
            "top1_regret": num(self.top1_regret),
            "best_of_k_regret": {str(k): num(v) for k, v in self.best_of_k.items()},
            "median_abs_log_error": num(self.median_abs_log_error),
        }
        if self.problems != 1:
            out["problems"] = int(self.problems)
            out["worst_top1_regret"] = num(self.worst_top1_regret)
        return out

    def lines(self) -> list[str]:
        """The figures as text, one per line, each saying what it is."""
        best = "  ".join(f"k={k} {_f(v)}" for k, v in self.best_of_k.items())
        worst = f" (worst {_f(self.worst_top1_regret)})" if self.problems > 1 else ""
        return [
            f"Spearman {_f(self.spearman)} (rank correlation of predicted and measured; 1 = same order)",
            f"top-1 regret {_f(self.top1_regret)}{worst} (measured time of the model's pick / best measured)",
            f"best-of-k regret {best} (best measured of the model's top k / best measured)",
            f"median |log(predicted/measured)| {_f(self.median_abs_log_error)}",
        ]

    def line(self) -> str:
        """The figures on one line (tiler calibrate's held-out summary)."""
        worst = f" (worst {_f(self.worst_top1_regret)})" if self.problems > 1 else ""
        ks = list(self.best_of_k)
        span = f"k={ks[0]}..{ks[-1]}" if ks else "k"
        return (
            f"Spearman {_f(self.spearman)}, top-1 regret {_f(self.top1_regret)}{worst}, best-of-k regret ({span}) "
            + " ".join(_f(v) for v in self.best_of_k.values())
            + f", median |log(pred/measured)| {_f(self.median_abs_log_error)}"
        )


def _f(v: float) -> str:
    return "n/a" if v is None or not np.isfinite(v) else f"{v:.3f}"


def average_ranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of `x`, tied values taking the mean of the ranks they span ([10, 20, 20, 30] -> [1, 2.5, 2.5,
    4]), as Spearman's correlation with ties needs."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    sx = x[order]
    # runs of equal values: each run's ranks i+1..j average to (i + 1 + j) / 2
    starts = np.r_[0, np.nonzero(sx[1:] != sx[:-1])[0] + 1]
    ends = np.r_[starts[1:], sx.size]
    avg = (starts + 1 + ends) / 2.0
    ranks = np.empty(x.size, dtype=np.float64)
    ranks[order] = np.repeat(avg, ends - starts)
    return ranks


def spearman(a, b) -> float:
    """Spearman's rank correlation of `a` and `b` (average ranks for ties); NaN when undefined (fewer than 2 values,
    or a constant column)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size < 2:
        return float("nan")
    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    if den == 0:
        return float("nan")
    return float(np.clip((ra * rb).sum() / den, -1.0, 1.0))


def agreement(predicted, measured, k_max: int = K_MAX) -> Agreement:
    """The figures of one problem's rows (module docstring). Rows whose times are not positive and finite are left
    out; with none left, every figure is NaN and `pairs` is 0."""
    pred = np.asarray(predicted, dtype=np.float64)
    meas = np.asarray(measured, dtype=np.float64)
    if pred.shape != meas.shape:
        raise ValueError(f"agreement: {pred.size} predicted times for {meas.size} measured ones")
    ok = np.isfinite(pred) & np.isfinite(meas) & (pred > 0) & (meas > 0)
    pred, meas = pred[ok], meas[ok]
    if not pred.size:
        nan = float("nan")
        return Agreement(0, nan, nan, {k: nan for k in range(1, k_max + 1)}, nan)
    order = np.argsort(pred, kind="stable")
    best = meas.min()
    run = np.minimum.accumulate(meas[order])  # best measured among the model's first k rows, k = 1..n
    best_of_k = {k: float(run[min(k, run.size) - 1] / best) for k in range(1, k_max + 1)}
    return Agreement(
        pairs=int(pred.size),
        spearman=spearman(pred, meas),
        top1_regret=best_of_k[1],
        best_of_k=best_of_k,
        median_abs_log_error=float(np.median(np.abs(np.log(pred / meas)))),
    )


def combine(parts: list[Agreement]) -> Agreement:
    """Several problems' figures as one: Spearman the mean over problems (NaN ones left out), regrets the
    geometric mean (a ratio per problem), the log error the median of the per-problem medians, `pairs` the sum;
    `worst_top1_regret` the largest top-1 regret."""
    parts = [p for p in parts if p.pairs]
    nan = float("nan")
    if not parts:
        return Agreement(0, nan, nan, {k: nan for k in range(1, K_MAX + 1)}, nan, problems=0)
    rho = [p.spearman for p in parts if np.isfinite(p.spearman)]
    ks = sorted(set.intersection(*(set(p.best_of_k) for p in parts)))
    best_of_k = {k: float(np.exp(np.mean([np.log(p.best_of_k[k]) for p in parts]))) for k in ks}
    top1 = [p.top1_regret for p in parts]
    return Agreement(
        pairs=sum(p.pairs for p in parts),
        spearman=float(np.mean(rho)) if rho else nan,
        top1_regret=float(np.exp(np.mean(np.log(top1)))),
        best_of_k=best_of_k,
        median_abs_log_error=float(np.median([p.median_abs_log_error for p in parts])),
        problems=len(parts),
        worst_top1_regret=float(max(top1)),
    )


__all__ = ["K_MAX", "Agreement", "agreement", "average_ranks", "combine", "spearman"]
