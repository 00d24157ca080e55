"""A user's Triton tuning space (UserSpace): its params, the configs they span, its key map."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import TilerError
from .restrictions import _check_restriction, _fail, restriction_mask

# The chip family of a Triton kernel: the models of the NVIDIA GPUs (search_spaces/<op>.toml's [cuda] knobs)
FAMILY = "cuda"
# The most configs a user space may expand to (its parameters' cross product, before the restrictions): 2**20
# configs are ranked by the model in seconds; a larger space is a mistake or a search, not a list to autotune
CONFIGS_MAX = 2**20
# The top-level keys of a user space (a TOML file or a dict)
SPACE_KEYS = ("op", "params", "restrictions", "key_map", "defaults", "shape", "problem", "dtype")
# torch / numpy dtype names (the last part of str(tensor.dtype)) -> the problem's dtype
DTYPE_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}
DTYPE_NAMES["int8"] = "int8"


def _launch_options() -> tuple[str, ...]:
    """Triton's launch options that the project's models read: the keyword arguments of the one function that
    writes a `triton.Config` (tiler.ops.triton_config.triton_config), after the kernel's `kwargs`. A knob of this
    name is set by `triton.Config(..., name=value)`, not as a kernel argument."""
    from ..ops.triton_config import triton_config

    return tuple(list(inspect.signature(triton_config).parameters)[1:])


LAUNCH = _launch_options()


# ---------------------------------------------------------------------------------------------- the space


@dataclass(frozen=True)
class UserSpace:
    """A user's Triton kernel and its tuning space (load_user_space builds and checks it).

    op: the operator the kernel computes (tiler ops). params: each parameter's values, in the user's names, as
    given (a meta-parameter of the kernel or a launch option). restrictions: Python expressions over the params; a
    config is kept when every one holds. key_map: every param -> the model's knob it sets. defaults: knob -> value
    code for the knobs no param sets (given by the user, or built in: `builtin` names those). shape: the kernel's
    autotune key argument -> the problem fields it holds (one argument may give several: the tutorial attention's
    N_CTX is both S1 and S2). problem: problem fields fixed for this kernel (a layout).
    dtype: the operands' dtype, None to take it from the launch (pruner) or the caller. source: the file, or
    "dict". passthrough: params the model does not read but Triton does (a launch option that is no knob of the
    operator): they go into the configs and change no prediction.
    """

    op: str
    params: dict[str, tuple]
    restrictions: tuple[str, ...] = ()
    key_map: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, int] = field(default_factory=dict)
    shape: dict[str, tuple[str, ...]] = field(default_factory=dict)
    problem: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    source: str = "dict"
    builtin: tuple[str, ...] = ()
    passthrough: tuple[str, ...] = ()

    @cached_property
    def model_space(self):
        """The operator's knobs (search_spaces/<op>.toml, the cuda family)."""
        from ..space import load_space

        return load_space(self.op, FAMILY)

    @cached_property
    def operator(self):
        from ..operator import get_operator

        return get_operator(self.op, FAMILY)

    def size(self) -> int:
        """Configs in the params' cross product (before the restrictions)."""
        n = 1
        for vals in self.params.values():
            n *= len(vals)
        return n

    @cached_property
    def _index(self) -> dict[str, np.ndarray]:
        """The configs that satisfy every restriction, as one index array per param (into its values), in product
        order (the last param fastest, as itertools.product)."""
        names = list(self.params)
        n = self.size()
        if n > CONFIGS_MAX:
            raise _fail(self.source, f"params: the cross product holds {n} configs; at most {CONFIGS_MAX}")
        grids = np.meshgrid(*[np.arange(len(self.params[p])) for p in names], indexing="ij")
        idx = {p: g.ravel() for p, g in zip(names, grids, strict=True)}
        keep = np.ones(n, dtype=bool)
        cols = {p: _typed(self.params[p])[idx[p]] for p in names}
        for i, text in enumerate(self.restrictions):
            where = f"{self.source}: restrictions[{i}]"
            tree = _check_restriction(where, text, self.params)
            keep &= restriction_mask(where, tree, text, cols, n)
        if not keep.any():
            raise _fail(
                self.source,
                f"restrictions: exclude every one of the {n} configs of the params "
                f"({', '.join(f'{p}: {len(v)}' for p, v in self.params.items())})",
            )
        return {p: v[keep] for p, v in idx.items()}

    def __len__(self) -> int:
        """Configs that satisfy every restriction."""
        return int(next(iter(self._index.values())).size)

    def columns(self) -> dict[str, np.ndarray]:
        """The configs as one column of values per param (object arrays of the values as given)."""
        return {p: _column(self.params[p])[i] for p, i in self._index.items()}

    def configs(self) -> list[dict]:
        """The configs that satisfy every restriction, each a dict param -> value in the user's names."""
        cols = self.columns()
        return [dict(zip(cols, row, strict=True)) for row in zip(*cols.values(), strict=True)]

    def knob_columns(self, cols: dict[str, np.ndarray], what: str = "") -> dict[str, np.ndarray]:
        """Configs as the model's knob columns (int64 codes; the defaults where no param sets a knob): `cols` is
        param -> a column of the user's values (a value outside a knob's domain is one error line, starting with
        `what`, default the space's `space: <source>`)."""
        n = len(next(iter(cols.values()))) if cols else 0
        out: dict[str, np.ndarray] = {}
        for p, col in cols.items():
            if p in self.passthrough:
                continue
            knob = self.model_space.knobs[self.key_map[p]]
            uniq, inv = _unique(col)
            head = f"{what or 'space: ' + self.source}: {p}"
            codes = np.array([_parse(knob, v, head) for v in uniq], dtype=np.int64)
            out[knob.name] = codes[inv] if len(uniq) else np.zeros(0, dtype=np.int64)
        for k, code in self.defaults.items():
            out[k] = np.full(n, code, dtype=np.int64)
        return {k: out[k] for k in self.model_space.names}

    def problem_of(self, args: dict, dtype: str | None = None):
        """The problem of one launch: the fields from the kernel's arguments (`args`: named args and keyword
        arguments of the call) through `shape`, the fixed `problem` fields, and the dtype (`dtype`, else the
        space's, else the first tensor argument's)."""
        from ..problem import parse_problem

        fields_: dict[str, Any] = dict(self.problem)
        for arg, names in self.shape.items():
            if arg not in args:
                have = ", ".join(a for a in args if not hasattr(args[a], "dtype")) or "none"
                raise _fail(
                    self.source,
                    f"shape: the launch has no argument {arg!r} (for {', '.join(names)}); "
                    f"its non-tensor arguments: {have}",
                )
            v = args[arg]
            for name in names:
                fields_[name] = int(v) if hasattr(v, "__index__") else v
        return parse_problem(self.op, fields_, dtype or self.dtype or _dtype_of(args))

    def config_of(self, values: dict) -> dict:
        """One config as the arguments of its `triton.Config`: {"kwargs": meta-parameters, launch options...}.
        A launch option no param sets but a default does is written with the default's value, so that the config
        runs what the model priced."""
        kw = {p: _plain(v) for p, v in values.items() if p not in LAUNCH}
        launch = {p: _plain(v) for p, v in values.items() if p in LAUNCH}
        for opt in LAUNCH:
            if opt not in launch and opt in self.defaults:
                launch[opt] = int(self.defaults[opt])
        return {"kwargs": kw, **{o: launch[o] for o in LAUNCH if o in launch}}


def _column(values) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _typed(values) -> np.ndarray:
    """A param's values as the column a restriction computes on: integers (and booleans) as int64, numbers as
    float64, anything else (words) as numpy chooses, mixed values as Python objects."""
    if all(isinstance(v, int) for v in values):
        return np.array([int(v) for v in values], dtype=np.int64)
    if all(isinstance(v, int | float) for v in values):
        return np.array(values, dtype=np.float64)
    if all(isinstance(v, str) for v in values):
        return np.array(values)
    return _column(values)


def _unique(col: np.ndarray):
    """(distinct values, inverse index) of an object column, by value (1 and True are one value, as in a dict);
    a column of integers is done by numpy, anything else one value at a time."""
    try:
        num = np.asarray(col).astype(np.int64)
        if bool(np.all(num == col)):  # no float cut to an integer, no word read as a number
            uniq, inv = np.unique(num, return_inverse=True)
            return [int(u) for u in uniq], inv.ravel()
    except (TypeError, ValueError, OverflowError):
        pass
    seen: dict = {}
    inv = np.empty(len(col), dtype=np.int64)
    for i, v in enumerate(col):
        v = _plain(v)
        key = (type(v) is str, v)
        if key not in seen:
            seen[key] = len(seen)
        inv[i] = seen[key]
    return [k[1] for k in seen], inv


def _plain(v):
    """A value as Python writes it (numpy integers as int)."""
    return v.item() if isinstance(v, np.generic) else v


def _parse(knob, value, where: str) -> int:
    """A user's value as the knob's code; outside the knob's domain: one error line naming the param."""
    from ..errors import SpaceError

    if isinstance(value, float) and value == int(value):
        value = int(value)
    if not isinstance(value, bool | int | str) or (isinstance(value, str) and not value.strip()):
        raise TilerError(f"{where}: {value!r} is not a value of knob {knob.name}; allowed: {knob.allowed()}")
    try:
        return knob.parse(str(value) if not isinstance(value, bool) else str(int(value)))
    except SpaceError:
        raise TilerError(
            f"{where}: {value!r} is outside the domain of knob {knob.name}; allowed: {knob.allowed()}"
        ) from None


def _dtype_of(args: dict) -> str | None:
    """The dtype of the first argument that has one (a tensor), as the problem names it; None if none does or
    its dtype is not one the models know (the problem's default then applies)."""
    for v in args.values():
        dt = getattr(v, "dtype", None)
        if dt is not None and not isinstance(v, int | float | str):
            return DTYPE_NAMES.get(str(dt).rpartition(".")[2])
    return None
