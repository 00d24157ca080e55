"""The model's best configs in the user's names: search_space, config dicts, triton.Configs, code."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..api import Result
from ..errors import TilerError
from .load import load_user_space
from .ranking import _problem, _rank_table
from .user_space import _plain

# The export target whose view is a triton.Config (every cuda operator has one: Operator.TARGETS)
TARGET = "triton"
# Infeasible configs a `--format json` report lists as examples (all are counted per rule)
EXAMPLES = 10


# -------------------------------------------------------------------------------------- best configs


def config_dicts(
    op: str, chip, shape, k: int = 8, space=None, dtype: str | None = None, diverse: bool = True
) -> list[dict]:
    """The model's best `k` configs as the arguments of `triton.Config` ({"kwargs": {...}, launch options}; so
    `triton.Config(**d)` builds one), best first (diverse: the best of each distinct tile shape first).

    With `space` (a UserSpace, TOML path or dict): the configs of that space (restrictions applied) ranked by the
    model, in the user's names. Without: the model's own space searched (tiler.search, the Triton target, top=k)
    in the project kernel's names (`tiler/ops/<op>/triton_runner.py`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TilerError(f"k: must be an integer >= 1, got {k!r}")
    if space is not None:
        res = search_space(op, chip, shape, space, dtype=dtype, top=k, diverse=diverse)
        return [res.user_space.config_of(c) for c in res.configs]
    from ..api import search
    from ..operator import get_operator

    res = search(op, chip, shape, dtype, target=TARGET, top=k, diverse=diverse, runnable=False)
    target = get_operator(op, res.chip.family).TARGETS[TARGET]
    out = []
    for i in range(len(res.est["time_us"])):
        doc = res.document(i)
        out.append(dict(target.entry(doc["targets"][TARGET], doc)))
    return out


def best_configs(
    op: str, chip, shape, k: int = 8, space=None, dtype: str | None = None, diverse: bool = True
) -> list:
    """`config_dicts` as `triton.Config` objects (triton is imported here, and only here)."""
    import triton

    return [triton.Config(**d) for d in config_dicts(op, chip, shape, k, space, dtype, diverse)]


def config_text(config: dict) -> str:
    """One `triton.Config(...)` expression of a config_dicts entry, as a user pastes it into `configs=[...]`. The
    same form as tiler.ops.triton_config.triton_config, with each value written by repr: a user's meta-parameter
    may be a word or a boolean, which must be quoted or spelled as Python does."""
    kw = ", ".join(f'"{k}": {_plain(v)!r}' for k, v in config["kwargs"].items())
    launch = "".join(f", {k}={_plain(v)!r}" for k, v in config.items() if k != "kwargs")
    return f"triton.Config({{{kw}}}{launch})"


def emit_configs(res, target: str = TARGET) -> str:
    """The rows of a search result as `triton.Config(...)` lines to paste into `@triton.autotune(configs=[...])`,
    one a row, best first, each ending in a comma and a comment with its predicted time (and grid), after one
    comment line naming the problem. A UserResult writes the user's names; a search of the model's own space
    (a tiler.api.Result searched for `target`) writes the target's view (the project's kernel)."""
    from .. import __version__

    p, chip = res.problem, res.chip
    n = len(res.est["time_us"])
    if isinstance(res, UserResult):
        what = f"of {res.user_space.source}"
        args = res.config_dicts()
        notes = ["" for _ in args]
    else:
        from ..operator import get_operator

        t = get_operator(p.OP, chip.family).TARGETS[target]
        what = f"for {t.doc.split(':')[0]}"
        args, notes = [], []
        for i in range(n):
            doc = res.document(i)
            view = doc["targets"][target]
            args.append(dict(t.entry(view, doc)))
            notes.append(f", grid {tuple(view['grid'])}" if "grid" in view else "")
    shape = p.shape_text() if hasattr(p, "shape_text") else ",".join(f"{k}={v}" for k, v in p.shape().items())
    head = (
        f"# tiler {__version__}: {p.OP} {shape} {p.dtype} on {chip.id} ({chip.cores} cores): the model's "
        f"{n} best configs {what}"
    )
    lines = [head]
    for i, a in enumerate(args):
        gap = f" x{res.est['gap'][i]:.3f}" if "gap" in res.est else ""
        lines.append(f"{config_text(a)},  # {res.est['time_us'][i]:.2f} us{gap}{notes[i]}")
    return "\n".join(lines) + "\n"


# -------------------------------------------------------------------------------------------- the space search


@dataclass
class UserResult(Result):
    """`tiler search --space`: the user space's configs ranked for one problem (a `tiler.api.Result`, so `.tiling(i)`,
    `.row(i)` and `.document(i)` answer in the model's names) plus the same configs in the user's names:
    `configs[i]` (param -> value) is row i; `ranked` (a DataFrame: the params, predicted_us, bound, rank, gap) holds
    every feasible config in the rows' order (plain or diverse), `infeasible` (the params, rule, reason) the
    rejected ones; `restricted` counts the configs the restrictions keep."""

    user_space: Any = None
    configs: list = field(default_factory=list)
    ranked: Any = None
    infeasible: Any = None
    restricted: int = 0

    def config_dicts(self) -> list[dict]:
        """The rows as triton.Config arguments (UserSpace.config_of)."""
        return [self.user_space.config_of(c) for c in self.configs]

    def summary(self) -> dict:
        """The result as JSON-able data (`tiler search --space --format json`): the problem, the space (source,
        params, restrictions, key map, defaults, counts), the rows in both names, and the infeasible configs."""
        us, space = self.user_space, self.space
        return {
            "op": self.problem.OP,
            "chip": self.chip.id,
            "problem": self.problem.shape(),
            "dtype": self.problem.dtype,
            "space": {
                "source": us.source,
                "params": {p: [_plain(v) for v in vals] for p, vals in us.params.items()},
                "restrictions": list(us.restrictions),
                "key_map": dict(us.key_map),
                "defaults": {k: space.knobs[k].label(v) for k, v in us.defaults.items()},
                "builtin_defaults": list(us.builtin),
                "configs": self.space_size,
                "restricted": self.restricted,
                "feasible": self.feasible,
                "rejected": dict(self.rejected),
            },
            "configs": [
                {
                    "rank": i + 1,
                    "config": {k: _plain(v) for k, v in c.items()},
                    "tiling": self.tiling(i),
                    "time_us": float(self.est["time_us"][i]),
                    "bound": str(self.est["bound"][i]),
                    "gap": float(self.est["gap"][i]),
                }
                for i, c in enumerate(self.configs)
            ],
            # the first few, as examples: the counts per rule are in space.rejected
            "infeasible": [
                {"config": {k: _plain(r[k]) for k in us.params}, "reason": f"{r['rule']}: {r['reason']}"}
                for r in self.infeasible.head(EXAMPLES).to_dict("records")
            ],
        }

    def head_lines(self) -> list[str]:
        """The report's first lines (`tiler search --space`): the problem, the space's counts, the defaults."""
        us, space = self.user_space, self.space
        p = self.problem
        shape = (
            p.shape_text() if hasattr(p, "shape_text") else ",".join(f"{k}={v}" for k, v in p.shape().items())
        )
        out = [
            f"{self.problem.OP} {shape} {self.problem.dtype} on {self.chip.id} ({self.chip.cores} cores): "
            f"the user space {us.source}",
            f"space: {self.space_size} configs, {self.restricted} after the restrictions, {self.feasible} feasible "
            f"on {self.chip.id}; every one ranked by the model",
        ]
        if us.defaults:
            given = ", ".join(
                f"{k}={space.knobs[k].label(v)}" + (" (built in)" if k in us.builtin else "")
                for k, v in us.defaults.items()
            )
            out.append(f"defaults: {given}")
        out.append("best config: " + ", ".join(f"{k}={_plain(v)}" for k, v in self.configs[0].items()))
        out.append("  as the model's knobs: " + ", ".join(f"{k}={v}" for k, v in self.tiling(0).items()))
        return out

    def tail_lines(self) -> list[str]:
        """The report's last lines: the other rows (what differs from the best, in the user's names), the
        infeasible configs by rule."""
        out = []
        if len(self.configs) > 1:
            out.append("next best:")
            first = self.configs[0]
            for i in range(1, len(self.configs)):
                diff = {k: v for k, v in self.configs[i].items() if v != first[k]}
                out.append(
                    f"  {self.est['time_us'][i]:10.2f} us  x{self.est['gap'][i]:.3f}  {self.est['bound'][i]:8}  "
                    "differs: " + ", ".join(f"{k}={_plain(v)}" for k, v in diff.items())
                )
        if len(self.infeasible):
            rules = ", ".join(f"{r} {n}" for r, n in self.rejected.items())
            first = self.infeasible.iloc[0]
            out.append(
                f"infeasible on {self.chip.id}: {len(self.infeasible)} configs ({rules}); the first: "
                + ", ".join(f"{k}={_plain(first[k])}" for k in self.user_space.params)
                + f": {first['rule']}: {first['reason']}"
            )
        return out


def _in_user_names(text: str, key_map: dict[str, str]) -> str:
    """A rule's text with the model's knob names written as the user's params that set them (key_map: param ->
    knob): the user reads the names of their own space."""
    import re

    user = {k: p for p, k in reversed(list(key_map.items()))}  # the first param of a knob names it
    if not user:
        return text
    words = re.compile(r"\b(" + "|".join(map(re.escape, sorted(user, key=len, reverse=True))) + r")\b")
    return words.sub(lambda m: user[m.group(1)], text)


def search_space(
    op: str,
    chip,
    shape,
    space,
    dtype: str | None = None,
    top: int = 5,
    diverse: bool = False,
    hardware_dir=None,
) -> UserResult:
    """Rank every config of a user space (restrictions applied) for one problem and keep the best `top` (diverse:
    in the diverse order). The model's optimum over the user's space is exact: every config is scored, in one
    vectorised call (tiler.rank.rank_candidates), so a space of 2**18 configs takes seconds."""
    import time

    import pandas as pd

    from ..api import _chip
    from ..search.result import diverse_order

    t0 = time.perf_counter()
    us = load_user_space(space)
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise TilerError(f"top: must be an integer >= 1, got {top!r}")
    chip, problem = _problem(op, _chip(chip, hardware_dir), shape, us, dtype)
    cols = us.columns()
    n = len(us)
    ranked, rejected = _rank_table(problem, chip, us, cols)
    if not len(ranked):
        rules = rejected["rule"].value_counts()
        worst = rules.index[0]
        text = _in_user_names(rejected.loc[rejected["rule"] == worst, "reason"].iloc[0], us.key_map)
        raise TilerError(
            f"space: {us.source}: none of the {n} configs is feasible for {problem.label()} on {chip.id}; "
            f"{rules.iloc[0]} break {worst} ({text})"
        )
    model, mspace = us.operator, us.model_space
    order = np.arange(len(ranked))
    times = ranked["predicted_us"].to_numpy(dtype=np.float64)
    if diverse:
        keys = [k for k in (*model.SHAPE_KNOBS, model.DEPTH_KNOB) if k]
        order, _ = diverse_order(
            {k: ranked[k].to_numpy() for k in keys}, times, model.SHAPE_KNOBS, model.DEPTH_KNOB
        )
    ranked = ranked.iloc[order].reset_index(drop=True)
    rows = ranked["row"].to_numpy() - 1  # the configs' indices in the space, in the result's order
    top_rows = rows[:top]
    cands = {k: ranked[k].to_numpy(dtype=np.int64)[: len(top_rows)] for k in mspace.names}
    est = model.estimate(problem, chip, cands)
    best = float(times.min())
    est = dict(est, gap=ranked["predicted_us"].to_numpy(dtype=np.float64)[: len(top_rows)] / best)
    user = pd.DataFrame({p: c[rows] for p, c in cols.items()})
    table = user.assign(
        predicted_us=ranked["predicted_us"].to_numpy(),
        bound=ranked["bound"].to_numpy() if "bound" in ranked else "",
        rank=ranked["rank"].to_numpy(),
        gap=ranked["predicted_us"].to_numpy() / best,
    )
    bad = rejected["row"].to_numpy() - 1
    infeasible = pd.DataFrame({p: c[bad] for p, c in cols.items()}).assign(
        rule=rejected["rule"].to_numpy(), reason=rejected["reason"].to_numpy()
    )
    counts = {str(k): int(v) for k, v in infeasible["rule"].value_counts().items()}
    notes = []
    if us.builtin:
        given = ", ".join(f"{k}={mspace.knobs[k].label(us.defaults[k])}" for k in us.builtin)
        notes.append(f"built-in defaults for the knobs the kernel does not have: {given} (docs/triton.md)")
    return UserResult(
        problem=problem,
        chip=chip,
        space=mspace,
        strategy="space",
        cands=cands,
        est=est,
        evaluated=n,
        bounded=0,
        space_size=us.size(),
        feasible=len(ranked),
        rejected=counts,
        proven_optimal=True,
        elapsed_s=time.perf_counter() - t0,
        notes=notes,
        user_space=us,
        configs=[{p: _plain(cols[p][i]) for p in cols} for i in top_rows],
        ranked=table,
        infeasible=infeasible,
        restricted=n,
    )
