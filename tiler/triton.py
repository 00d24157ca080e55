"""The model inside a user's own Triton kernel: its tuning space, a `prune_configs_by` for `@triton.autotune`, and
the model's best configs in the user's names (docs/triton.md).

A Triton kernel author has a kernel of their own (the tutorial's GEMM: meta-parameters `BLOCK_SIZE_M`,
`BLOCK_SIZE_N`, `BLOCK_SIZE_K`, `GROUP_SIZE_M`, launch options `num_warps`, `num_stages`) and a list of configs to
try. This module lets the cost model work on that kernel without the project's kernel names:

- a **user space** in Kernel Tuner's spirit (`load_user_space`: a TOML file or a dict): the kernel's parameters
  and their values, restrictions as Python expressions over them, a key map (the user's names -> the model's
  knobs; a knob's own name or its alias needs no entry), defaults for the knobs the kernel does not have, and which
  autotune key argument is which problem field;
- `rank_configs`: the model's predicted time of each of the user's configs (dicts or `triton.Config`s) for one
  problem, through tiler.rank.rank_candidates (the same validation, capacity rules and estimate as `tiler rank`);
- `best_configs` / `config_dicts`: the model's best k configs, in the user's names when a space is given;
- `pruner`: the dict for `@triton.autotune(configs, key, prune_configs_by=pruner(...))`, which keeps the model's
  top k of the configs for the launch's shape (read from the autotune key arguments), diverse over tile shapes;
- `search_space`: `tiler search --space FILE` (and `tiler.search(..., space=...)`): every config of the space
  ranked for one problem.

The module imports neither triton nor optuna: triton is imported only where a `triton.Config` is built
(`best_configs`). The knobs, their aliases, the defaults of a missing knob (`Operator.ABSENT_DEFAULTS`) and the
tile-shape knobs of the diverse order are the operator's; nothing here names one.
"""

from __future__ import annotations

import ast
import inspect
import operator as _op
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .api import Result
from .errors import TilerError, closest

# The chip family of a Triton kernel: the models of the NVIDIA GPUs (search_spaces/<op>.toml's [cuda] knobs)
FAMILY = "cuda"
# The export target whose view is a triton.Config (every cuda operator has one: Operator.TARGETS)
TARGET = "triton"
# The most configs a user space may expand to (its parameters' cross product, before the restrictions): 2**20
# configs are ranked by the model in seconds; a larger space is a mistake or a search, not a list to autotune
CONFIGS_MAX = 2**20
# Restrictions: at most this many, each at most this long (the parser's work stays bounded)
RESTRICTIONS_MAX = 256
RESTRICTION_CHARS = 2000
# The top-level keys of a user space (a TOML file or a dict)
SPACE_KEYS = ("op", "params", "restrictions", "key_map", "defaults", "shape", "problem", "dtype")
# torch / numpy dtype names (the last part of str(tensor.dtype)) -> the problem's dtype
DTYPE_NAMES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32"}
DTYPE_NAMES["int8"] = "int8"
# Infeasible configs a `--format json` report lists as examples (all are counted per rule)
EXAMPLES = 10


def _launch_options() -> tuple[str, ...]:
    """Triton's launch options that the project's models read: the keyword arguments of the one function that
    writes a `triton.Config` (tiler.ops.triton_config.triton_config), after the kernel's `kwargs`. A knob of this
    name is set by `triton.Config(..., name=value)`, not as a kernel argument."""
    from .ops.triton_config import triton_config

    return tuple(list(inspect.signature(triton_config).parameters)[1:])


LAUNCH = _launch_options()


def _fail(where: str, text: str) -> TilerError:
    return TilerError(f"space: {where}: {text}" if where else f"space: {text}")


# ------------------------------------------------------------------------------------------- restrictions

_BINARY = {
    ast.Add: _op.add,
    ast.Sub: _op.sub,
    ast.Mult: _op.mul,
    ast.Div: _op.truediv,
    ast.FloorDiv: _op.floordiv,
    ast.Mod: _op.mod,
    ast.BitAnd: _op.and_,
    ast.BitOr: _op.or_,
    ast.BitXor: _op.xor,
    ast.LShift: _op.lshift,
    ast.RShift: _op.rshift,
}
_COMPARE = {
    ast.Eq: _op.eq,
    ast.NotEq: _op.ne,
    ast.Lt: _op.lt,
    ast.LtE: _op.le,
    ast.Gt: _op.gt,
    ast.GtE: _op.ge,
}
_CALLS = {"min": np.minimum, "max": np.maximum, "abs": np.abs}
_NODE_WORDS = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "a lambda",
    ast.NamedExpr: "an assignment",
    ast.Starred: "unpacking",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.JoinedStr: "an f-string",
    ast.Await: "await",
    ast.Yield: "yield",
}


def _check_restriction(where: str, text, params) -> ast.Expression:
    """A restriction parsed and checked against the whitelist: names of params, numbers, strings and booleans,
    arithmetic, comparisons (chained too, `in` a literal tuple or list), and/or/not, `x if c else y`, and calls
    of min, max and abs. Anything else (attribute access, indexing, other calls, comprehensions) is refused:
    restrictions come from a file and are evaluated, so they must not reach Python's objects."""
    if not isinstance(text, str) or not text.strip():
        raise _fail(where, f"must be a non-empty string (a Python expression over the params), got {text!r}")
    if len(text) > RESTRICTION_CHARS:
        raise _fail(where, f"{len(text)} characters; at most {RESTRICTION_CHARS}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise _fail(where, f"{text.strip()!r} does not parse: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise _fail(where, f"{text.strip()[:60]!r} does not parse: nested too deep") from None
    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        raise _fail(where, f"{text.strip()[:60]!r}: nested too deep") from None
    calls = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node in nodes:
        if isinstance(node, ast.Name):
            if id(node) in calls:
                continue
            if node.id not in params:
                raise _fail(
                    where, f"unknown name {node.id!r} in {text.strip()!r}; {closest(node.id, params)}"
                )
        elif isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name not in _CALLS or node.keywords or not node.args:
                method = isinstance(node.func, ast.Attribute)
                what = f"{name}()" if name else "attribute access" if method else "a call"
                raise _fail(where, f"{what} is not allowed in {text.strip()!r} (calls: min, max, abs)")
            if name == "abs" and len(node.args) != 1:
                raise _fail(where, f"abs() takes one argument in {text.strip()!r}")
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int | float | str | bool):
                raise _fail(where, f"the constant {node.value!r} is not allowed in {text.strip()!r}")
        elif isinstance(node, ast.Compare):
            for cmp, right in zip(node.ops, node.comparators, strict=True):
                if isinstance(cmp, ast.In | ast.NotIn):
                    if not isinstance(right, ast.Tuple | ast.List) or not all(
                        isinstance(e, ast.Constant) for e in right.elts
                    ):
                        raise _fail(where, f"'in' takes a literal tuple or list in {text.strip()!r}")
                elif type(cmp) not in _COMPARE:
                    raise _fail(
                        where, f"the comparison {type(cmp).__name__} is not allowed in {text.strip()!r}"
                    )
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY and not isinstance(node.op, ast.Pow):
                raise _fail(
                    where, f"the operator {type(node.op).__name__} is not allowed in {text.strip()!r}"
                )
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, ast.Not | ast.USub | ast.UAdd | ast.Invert):
                raise _fail(
                    where, f"the operator {type(node.op).__name__} is not allowed in {text.strip()!r}"
                )
        elif type(node) in _NODE_WORDS:
            raise _fail(where, f"{_NODE_WORDS[type(node)]} is not allowed in {text.strip()!r}")
        elif not isinstance(
            node,
            ast.Expression
            | ast.BoolOp
            | ast.IfExp
            | ast.Tuple
            | ast.List
            | ast.Load
            | ast.And
            | ast.Or
            | ast.cmpop
            | ast.operator
            | ast.unaryop,
        ):
            raise _fail(where, f"{type(node).__name__} is not allowed in {text.strip()!r}")
    return tree


def _evaluate(node, cols: dict[str, np.ndarray]):
    """A checked restriction's value over the config columns (numpy arrays, one element per config)."""
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, cols)
    if isinstance(node, ast.Constant):  # an integer as int64: a huge one is an error, not a huge Python int
        v = node.value
        return np.int64(v) if isinstance(v, int) and not isinstance(v, bool) else v
    if isinstance(node, ast.Name):
        return cols[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return [e.value for e in node.elts]
    if isinstance(node, ast.BoolOp):
        vals = [np.asarray(_evaluate(v, cols)).astype(bool) for v in node.values]
        return (np.logical_and if isinstance(node.op, ast.And) else np.logical_or).reduce(vals)
    if isinstance(node, ast.UnaryOp):
        v = _evaluate(node.operand, cols)
        if isinstance(node.op, ast.Not):
            return np.logical_not(np.asarray(v).astype(bool))
        return {ast.USub: _op.neg, ast.UAdd: _op.pos, ast.Invert: _op.invert}[type(node.op)](_num(v))
    if isinstance(node, ast.BinOp):
        left, right = _num(_evaluate(node.left, cols)), _num(_evaluate(node.right, cols))
        if _is_text(left) or _is_text(right):  # 'a' * 10**12 would build the string, not fail
            raise TypeError("arithmetic on a string")
        if isinstance(
            node.op, ast.Pow
        ):  # in floats: an integer power overflows silently, a negative one raises
            return np.power(np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64))
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        out, left = None, _evaluate(node.left, cols)
        for cmp, comp in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(comp, cols)
            if isinstance(cmp, ast.In | ast.NotIn):
                hit = np.zeros(np.shape(left), dtype=bool)
                for v in right:
                    hit = hit | np.asarray(np.asarray(left) == v, dtype=bool)
                res = hit if isinstance(cmp, ast.In) else ~hit
            else:
                res = np.asarray(_COMPARE[type(cmp)](np.asarray(left), np.asarray(right)), dtype=bool)
            out = res if out is None else np.logical_and(out, res)
            left = right
        return out
    if isinstance(node, ast.IfExp):
        cond = np.asarray(_evaluate(node.test, cols)).astype(bool)
        return np.where(cond, _evaluate(node.body, cols), _evaluate(node.orelse, cols))
    if isinstance(node, ast.Call):
        args = [_num(_evaluate(a, cols)) for a in node.args]
        fn = _CALLS[node.func.id]
        if fn is np.abs:
            return fn(args[0])
        out = args[0]
        for a in args[1:]:
            out = fn(out, a)
        return out
    raise TypeError(type(node).__name__)  # unreachable: _check_restriction refused it


def _is_text(v) -> bool:
    """A string, or a column holding strings (_num could not make numbers of it)."""
    return isinstance(v, str) or (isinstance(v, np.ndarray) and v.dtype.kind in "OUS")


def _num(v):
    """An operand of arithmetic: a column of Python objects (mixed values) as numbers where it holds numbers."""
    if isinstance(v, np.ndarray) and v.dtype == object:
        try:
            return v.astype(np.float64)
        except (TypeError, ValueError):
            return v
    return v


def restriction_mask(where: str, tree: ast.Expression, text: str, cols: dict[str, np.ndarray], n: int):
    """The configs (n of them, as columns) a checked restriction keeps, as a boolean mask; a restriction that
    fails on the values (a string where a number belongs) is one error line naming it."""
    try:
        with np.errstate(all="ignore"):
            value = _evaluate(tree, cols)
        return np.broadcast_to(np.asarray(value).astype(bool), (n,)).copy()
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, MemoryError) as exc:
        raise _fail(where, f"{text.strip()!r} cannot be evaluated on the params' values: {exc}") from None
    except RecursionError:
        raise _fail(where, f"{text.strip()[:60]!r}: nested too deep") from None


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
        from .space import load_space

        return load_space(self.op, FAMILY)

    @cached_property
    def operator(self):
        from .operator import get_operator

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
        from .problem import parse_problem

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
    from .errors import SpaceError

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


def _table(raw, where: str, what: str) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(where, f"{what}: must be a table (name = value), got {type(raw).__name__}")
    return raw


def load_user_space(source) -> UserSpace:
    """A user space from a TOML file (a path) or a dict with the same keys, checked against the operator's knobs.

    Keys: `op` (required), `params` (required: name -> list of values), `restrictions` (a list of expressions, or
    one), `key_map` (param -> knob or alias), `defaults` (knob -> value, for knobs no param sets), `shape` (autotune
    key argument -> problem field; default each required field by its own name), `problem` (fixed problem fields,
    e.g. a layout), `dtype`.

    A param is read as the knob `key_map` names, else as the knob of its name or alias (so the Triton tutorial's
    `BLOCK_SIZE_M`, `GROUP_SIZE_M` need no map), else, if it is a Triton launch option the operator has no knob for,
    passed through to the configs unread. A launch option must keep its name (triton.Config sets it by keyword).

    Built-in defaults (a knob no param sets and `defaults` does not give): the operator's `ABSENT_DEFAULTS`, the
    value a kernel without that knob runs with. For CUDA matmul: no `ORDER` -> `grouped` when a param (or a default)
    sets `GROUP_M` (the tutorial's swizzle), else `row` (a plain row-major launch, `GROUP_M` then moot: 1); no
    `SPLIT_K` -> 1 (a kernel without the knob does not split K). These are what the tutorial's kernel does; a kernel
    that launches otherwise must say so in `defaults`. Any other knob missing is an error.

    Every mistake is one TilerError line starting `space: <source>: <key>`: a param the model cannot read, a key
    map onto an unknown knob or from an unknown param, two params on one knob, a value outside a knob's domain, a
    restriction that does not parse, uses what is not allowed or names an unknown param, restrictions that exclude
    every config, a cross product over CONFIGS_MAX, a knob with no param and no default, an unknown problem field.
    """
    from .space import read_toml

    if isinstance(source, UserSpace):
        return source
    if isinstance(source, dict):
        raw, where = source, "dict"
    elif isinstance(source, str | os.PathLike):
        where = str(source)
        try:
            raw = read_toml(Path(source), "user space")
        except TilerError as exc:
            raise TilerError(f"space: {exc}") from None
    else:
        raise TilerError(f"space: must be a TOML file's path or a dict, got {type(source).__name__}")
    return _load(raw, where)


def _load(raw: dict, where: str) -> UserSpace:
    """load_user_space of a parsed TOML or dict; `where` names it in errors."""
    from .operator import problem_class

    unknown = [k for k in raw if k not in SPACE_KEYS]
    if unknown:
        raise _fail(where, f"unknown key {unknown[0]!r}; {closest(unknown[0], SPACE_KEYS)}")
    op = raw.get("op")
    if not isinstance(op, str) or not op.strip():
        raise _fail(where, "op: missing; name the operator the kernel computes (tiler ops lists them)")
    params_raw = _table(raw.get("params"), where, "params")
    if not params_raw:
        raise _fail(where, "params: missing; give each of the kernel's parameters with its values")
    params: dict[str, tuple] = {}
    for p, vals in params_raw.items():
        if not isinstance(vals, list) or not vals:
            raise _fail(where, f"params: {p}: must be a non-empty list of values, got {vals!r}")
        if len({(type(v) is str, v) for v in vals if isinstance(v, int | float | str)}) != len(vals):
            raise _fail(where, f"params: {p}: lists a value twice, or a value that is not a number or a word")
        params[str(p)] = tuple(vals)
    restrictions = raw.get("restrictions", [])
    if isinstance(restrictions, str):
        restrictions = [restrictions]
    if not isinstance(restrictions, list):
        raise _fail(where, "restrictions: must be a list of expressions (strings)")
    if len(restrictions) > RESTRICTIONS_MAX:
        raise _fail(where, f"restrictions: {len(restrictions)} given; at most {RESTRICTIONS_MAX}")
    for i, text in enumerate(restrictions):  # checked now: a bad one is reported before anything is expanded
        _check_restriction(f"{where}: restrictions[{i}]", text, params)
    dtype = raw.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        raise _fail(where, f"dtype: must be a word (fp16, bf16, ...), got {dtype!r}")
    try:
        cls = problem_class(op)
        from .space import load_space

        space = load_space(op, FAMILY)
    except TilerError as exc:
        raise _fail(where, str(exc)) from None
    key_map, defaults, builtin, passthrough = _resolve(
        where,
        space,
        params,
        _table(raw.get("key_map"), where, "key_map"),
        _table(raw.get("defaults"), where, "defaults"),
    )
    shape, problem = _shape_map(
        where,
        cls,
        _table(raw.get("shape"), where, "shape"),
        _table(raw.get("problem"), where, "problem"),
    )
    us = UserSpace(
        op=op,
        params=params,
        restrictions=tuple(restrictions),
        key_map=key_map,
        defaults=defaults,
        shape=shape,
        problem=problem,
        dtype=dtype,
        source=where,
        builtin=builtin,
        passthrough=passthrough,
    )
    us.knob_columns({p: _column(v) for p, v in params.items()})  # every value inside its knob's domain
    try:  # the fixed problem fields and the dtype, on the operator's example problem
        from .problem import parse_problem

        parse_problem(op, {**cls.EXAMPLE, **problem}, dtype)
    except TilerError as exc:
        if str(exc).split(":")[0] in (
            *problem,
            "dtype",
            "shape",
        ):  # theirs, not a clash with the example's sizes
            raise _fail(where, f"problem: {exc}" if not str(exc).startswith("dtype") else str(exc)) from None
    len(us)  # expanded now: the size cap and restrictions that exclude everything are load errors
    return us


def _resolve(where, space, params, key_map_raw, defaults_raw):
    """(param -> knob, knob -> default code, the built-in defaults' knobs, passthrough params)."""
    from .rank import absent_defaults

    names = {k: k for k in space.names}
    names.update({a: k for k, kn in space.knobs.items() for a in kn.aliases})
    knob_text = f"knobs of {space.op}/{space.family}: " + ", ".join(
        k + (f" ({'/'.join(space.knobs[k].aliases)})" if space.knobs[k].aliases else "") for k in space.names
    )
    for p, k in key_map_raw.items():
        if p not in params:
            raise _fail(where, f"key_map: {p!r} is not a param; {closest(str(p), params)}")
        if not isinstance(k, str) or k not in names:
            raise _fail(where, f"key_map: {p} -> {k!r}: not a knob; {closest(str(k), names)}")
    key_map: dict[str, str] = {}
    passthrough = []
    for p in params:
        if p in key_map_raw:
            knob = names[key_map_raw[p]]
        elif p in names:
            knob = names[p]
        elif (
            p in LAUNCH
        ):  # a launch option this operator has no knob for: Triton reads it, the model does not
            passthrough.append(p)
            continue
        else:
            raise _fail(
                where,
                f"params: {p!r} is no knob, alias or launch option the model reads; map it to a knob in key_map "
                f"({knob_text})",
            )
        if p in LAUNCH and knob != p:
            raise _fail(
                where,
                f"key_map: {p} -> {knob}: {p} is a launch option (triton.Config's keyword); it sets {p}",
            )
        if knob in LAUNCH and p != knob:
            raise _fail(
                where,
                f"key_map: {p} -> {knob}: a launch option is set by triton.Config's keyword of its own name; "
                f"name the param {knob} (not {p})",
            )
        other = next((q for q, k in key_map.items() if k == knob), None)
        if other is not None:
            raise _fail(where, f"key_map: {other!r} and {p!r} both set knob {knob}; one param per knob")
        key_map[p] = knob
    defaults: dict[str, int] = {}
    for k, v in defaults_raw.items():
        if k not in names:
            raise _fail(where, f"defaults: {k!r} is not a knob; {closest(str(k), names)}")
        knob = names[k]
        setter = next((q for q, kk in key_map.items() if kk == knob), None)
        if setter is not None:
            raise _fail(where, f"defaults: {k} is set by the param {setter}; give a knob no param sets")
        defaults[knob] = _parse(space.knobs[knob], v, f"space: {where}: defaults: {k}")
    present = set(key_map.values()) | set(defaults)
    fill = absent_defaults(_operator(space), present)
    builtin = []
    for k in space.names:
        if k in present:
            continue
        if k not in fill:
            raise _fail(
                where,
                f"knob {k} is set by no param and has no default; add a param for it (named {k}"
                + (f" or {'/'.join(space.knobs[k].aliases)}" if space.knobs[k].aliases else "")
                + ", or mapped in key_map) or give its value in defaults",
            )
        defaults[k] = _parse(space.knobs[k], fill[k], f"space: {where}: built-in default of {k}")
        builtin.append(k)
    return key_map, defaults, tuple(builtin), tuple(passthrough)


def _operator(space):
    from .operator import get_operator

    return get_operator(space.op, space.family)


def _shape_map(where, cls, shape_raw, problem_raw):
    """(autotune key argument -> problem field, fixed problem fields), checked against the problem class."""
    allowed = tuple(cls.FIELDS) + tuple(cls.OPTIONAL)
    for name in problem_raw:
        if name not in allowed:
            raise _fail(where, f"problem: {name!r} is not a field of {cls.OP}; allowed: {', '.join(allowed)}")
    shape: dict[str, tuple[str, ...]] = {}
    given: dict[str, str] = {}  # field -> the argument that gives it
    for arg, raw in (shape_raw or {f: f for f in cls.FIELDS}).items():
        names = tuple(raw) if isinstance(raw, list | tuple) else (raw,)
        if not names:
            raise _fail(where, f"shape: {arg} -> []: name at least one field; allowed: {', '.join(allowed)}")
        for name in names:
            if not isinstance(name, str) or name not in allowed:
                raise _fail(
                    where, f"shape: {arg} -> {name!r}: not a field of {cls.OP}; allowed: {', '.join(allowed)}"
                )
            if name in given:
                raise _fail(where, f"shape: two arguments give the field {name} ({given[name]}, {arg})")
            if name in problem_raw:
                raise _fail(
                    where, f"shape: the field {name} is both an argument's ({arg}) and fixed in problem"
                )
            given[name] = str(arg)
        shape[str(arg)] = names
    lacking = [f for f in cls.FIELDS if f not in given and f not in problem_raw]
    if lacking:
        raise _fail(
            where,
            f"shape: no argument gives the field {lacking[0]}; map the autotune key argument that holds it "
            f"(shape: argument = field), or fix it in problem",
        )
    return shape, dict(problem_raw)


def _implicit(op: str, names) -> UserSpace:
    """The space of configs given without one: each name read as a knob, alias or launch option (no restrictions,
    the built-in defaults), errors naming `configs`; its one config (each knob's first value) is a stand-in, never
    ranked."""
    from .space import load_space

    try:
        space = load_space(op, FAMILY)
    except TilerError as exc:
        raise TilerError(f"configs: {exc}") from None
    first = {k: kn.values[0] for k, kn in space.knobs.items()}
    first.update({a: kn.values[0] for kn in space.knobs.values() for a in kn.aliases})
    return _load({"op": op, "params": {n: [first.get(n, 1)] for n in names}}, "configs")


# ------------------------------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class RankedConfig:
    """One user config as the model ranks it: `index` in the list given, the `config` as given, its `params` in
    the user's names, its `tiling` in the model's (knob -> value or label), the predicted time (inf when
    infeasible), its `rank` (1 = fastest, ties share; None when infeasible), the bound, and why it is infeasible
    (`reason`, "" when feasible)."""

    index: int
    config: Any
    params: dict
    tiling: dict
    predicted_us: float
    rank: int | None
    bound: str = ""
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return not self.reason


def _as_dict(cfg, fill: dict | None = None) -> dict:
    """A config (a dict in the user's names, a dict of triton.Config arguments, or a triton.Config-like object with
    `.kwargs` and launch-option attributes) as param -> value; `fill` gives params a config does not carry (the
    launch's own keyword arguments)."""
    if isinstance(cfg, dict):
        if isinstance(cfg.get("kwargs"), dict):
            out = {**cfg["kwargs"], **{k: v for k, v in cfg.items() if k != "kwargs"}}
        else:
            out = dict(cfg)
    elif isinstance(getattr(cfg, "kwargs", None), dict):
        out = dict(cfg.kwargs)
        for opt in LAUNCH:
            v = getattr(cfg, opt, None)
            if v is not None:
                out[opt] = v
    else:
        raise TilerError(
            f"configs: each config must be a dict or a triton.Config (with .kwargs), got {type(cfg).__name__}"
        )
    return {**(fill or {}), **out}


def _columns_of(us: UserSpace, dicts: list[dict]) -> dict[str, np.ndarray]:
    """Configs (param -> value dicts) as param columns for `us`; an unknown or a missing param is one line naming
    the config (0-based, in the list given)."""
    for i, d in enumerate(dicts):
        extra = [p for p in d if p not in us.params and p not in LAUNCH]
        if extra:
            raise TilerError(
                f"configs: config {i}: {extra[0]!r} is not a param of the space; params: {', '.join(us.params)}"
            )
        lacking = [p for p in us.params if p not in d]
        if lacking:
            raise TilerError(
                f"configs: config {i}: lacks the param {lacking[0]!r} (params: {', '.join(us.params)})"
            )
    return {p: _column([d[p] for d in dicts]) for p in us.params}


def _launch_params(us: UserSpace, dicts: list[dict]) -> UserSpace:
    """`us` with the launch options the configs carry but the space sets by a default (a triton.Config always has
    them, and they are what runs) as params."""
    from dataclasses import replace

    extra = [o for o in LAUNCH if o not in us.params and any(o in d for d in dicts)]
    if not extra:
        return us
    params = {**us.params, **{o: (1,) for o in extra}}
    key_map = dict(us.key_map)
    defaults = dict(us.defaults)
    passthrough = list(us.passthrough)
    for o in extra:
        if o in us.model_space.knobs:
            key_map[o] = o
            defaults.pop(o, None)
        else:
            passthrough.append(o)
    return replace(us, params=params, key_map=key_map, defaults=defaults, passthrough=tuple(passthrough))


def _rank_table(problem, chip, us: UserSpace, cols: dict[str, np.ndarray], what: str = ""):
    """(ranked, rejected) of tiler.rank.rank_candidates for configs given as param columns: every row's knob columns
    and `row` (1-based position in `cols`); ranked best first with predicted_us, bound, rank. `what` starts the
    line of a value outside a knob's domain (UserSpace.knob_columns)."""
    import pandas as pd

    from .rank import rank_candidates

    knobs = us.knob_columns(cols, what)
    return rank_candidates(problem, chip, pd.DataFrame(knobs), us.model_space)


def _problem(op, chip, shape, us: UserSpace, dtype):
    """(chip, problem) of a call: the chip loaded and of the cuda family, the shape merged with the space's fixed
    problem fields (the shape wins), the dtype given, else the space's."""
    from .api import _chip
    from .problem import parse_problem, parse_shape_text

    chip = _chip(chip)
    if chip.family != FAMILY:
        raise TilerError(
            f"chip: {chip.id} is of the {chip.family} family; a Triton kernel's space is ranked on a {FAMILY} chip"
        )
    fields_ = parse_shape_text(shape) if isinstance(shape, str) else dict(shape)
    if op != us.op:
        raise TilerError(f"op: the space is for {us.op}, got {op!r}")
    problem = parse_problem(op, {**us.problem, **fields_}, dtype or us.dtype)
    us.operator.admit(problem, chip)
    return chip, problem


def rank_configs(configs, op: str, chip, shape, space=None, dtype: str | None = None) -> list[RankedConfig]:
    """The model's predicted time of each of the user's configs for one problem, best first, infeasible ones last
    (in the order given) with the rule that rejects them.

    configs: dicts in the user's names (the space's params; launch options by their own names), dicts of a
    triton.Config's arguments ({"kwargs": {...}, launch options}), or triton.Config-like objects (`.kwargs` and
    the launch options as attributes; a Config's launch options are always read, being what runs). op: the
    operator; chip: a cuda chip id or a loaded chip; shape: `K=V,...` text or a dict; space: a UserSpace, a TOML
    path or a dict (None: each name read as a knob, an alias or a launch option, with the built-in defaults);
    dtype: the operands' dtype (default: the space's, else fp16).

    The configs become the model's knob columns (key map and defaults) and go through tiler.rank.rank_candidates,
    the code `tiler rank` runs: one vectorised estimate, the capacity rules, ties in the model's preferred order.
    """
    dicts = [_as_dict(c) for c in configs]
    if not dicts:
        raise TilerError("configs: empty; give at least one config")
    us = load_user_space(space) if space is not None else _implicit(op, {k: 0 for d in dicts for k in d})
    us = _launch_params(us, dicts)
    chip, problem = _problem(op, chip, shape, us, dtype)
    return _ranked_configs(problem, chip, us, configs, dicts)


def _ranked_configs(problem, chip, us: UserSpace, configs, dicts) -> list[RankedConfig]:
    cols = _columns_of(us, dicts)
    ranked, rejected = _rank_table(problem, chip, us, cols, "configs")
    space = us.model_space
    out = []
    for rec in ranked.to_dict("records"):
        i = int(rec["row"]) - 1
        out.append(
            RankedConfig(
                i,
                configs[i],
                dicts[i],
                {k: space.knobs[k].label(rec[k]) for k in space.names},
                float(rec["predicted_us"]),
                int(rec["rank"]),
                str(rec.get("bound", "")),
            )
        )
    for rec in rejected.to_dict("records"):
        i = int(rec["row"]) - 1
        out.append(
            RankedConfig(
                i,
                configs[i],
                dicts[i],
                {k: space.knobs[k].label(rec[k]) for k in space.names},
                float("inf"),
                None,
                "",
                f"{rec['rule']}: {rec['reason']}",
            )
        )
    return out


def _order(us: UserSpace, ranked: list[RankedConfig], diverse: bool) -> list[RankedConfig]:
    """The feasible configs best first, or in the diverse order (tiler.search.result.diverse_order: the best of
    each distinct tile shape of the operator's SHAPE_KNOBS first, a hedge on its DEPTH_KNOB 4th, then the rest)."""
    good = [r for r in ranked if r.feasible]
    if not diverse or not good:
        return good
    from .search.result import diverse_order

    model = us.operator
    keys = [k for k in (*model.SHAPE_KNOBS, model.DEPTH_KNOB) if k]
    space = us.model_space
    cands = {k: np.array([space.knobs[k].parse(str(r.tiling[k])) for r in good]) for k in keys}
    order, _ = diverse_order(
        cands, np.array([r.predicted_us for r in good]), model.SHAPE_KNOBS, model.DEPTH_KNOB
    )
    return [good[i] for i in order]


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
    from .api import search
    from .operator import get_operator

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
    from . import __version__

    p, chip = res.problem, res.chip
    n = len(res.est["time_us"])
    if isinstance(res, UserResult):
        what = f"of {res.user_space.source}"
        args = res.config_dicts()
        notes = ["" for _ in args]
    else:
        from .operator import get_operator

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

    from .api import _chip
    from .search.result import diverse_order

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
        text = rejected.loc[rejected["rule"] == worst, "reason"].iloc[0]
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


# ---------------------------------------------------------------------------------------------------- pruner


def pruner(op: str, chip, space=None, top_k: int = 4, diverse: bool = True, dtype: str | None = None) -> dict:
    """The dict for `@triton.autotune(configs=..., key=[...], prune_configs_by=pruner(op, chip, space=...))`.

    - `early_config_prune(configs, named_args, **kwargs)`: the problem from the launch's arguments (named_args and
      kwargs, through the space's `shape` map; the dtype given, else the space's, else the first tensor's), the
      configs ranked by the model (rank_configs), and the `top_k` best kept (diverse: the best of each distinct tile
      shape first, as tiler.search.result.diverse_order orders them; else plain). The kept configs are the objects
      given. Computed once per distinct problem and config list (autotune calls it once per key).
    - `perf_model(**kwargs)`: the model's predicted time of one config in milliseconds (what do_bench reports);
      infeasible: inf; 0.0 for a launch the model cannot price (then Triton keeps its first top_k, in order). Triton calls it, with `top_k`, after early_config_prune: the early prune has already kept
      top_k, so it changes nothing here, but a user may pass only perf_model and top_k.
    - `top_k`.

    Triton's contract (python/triton/runtime/autotuner.py, Autotuner.prune_configs): Triton 3.0 and later call
    `early_config_prune(configs, named_args, **kwargs)` (named_args: the positional arguments by name; kwargs: the
    call's keyword arguments; triton-lang/triton#3601); 2.x call `early_config_prune(configs, named_args)`, so
    shape arguments passed by keyword are not seen there (pass them positionally). `perf_model` gets the named
    args, the call's kwargs and the config's meta-parameters and launch options (2.x: num_warps, num_stages,
    num_ctas; 3.x: Config.all_kwargs(), which adds maxnreg and others): only the space's params are read.
    The result must hold at least one config (3.x raises otherwise). When the model cannot price a launch (a
    shape or dtype it refuses) or finds no config feasible, every config is kept, with a warning: the autotune
    then measures them all, as it would without the pruner.

    space: a UserSpace, a TOML path or a dict (None: the configs' names read as knobs, aliases or launch options,
    with the built-in defaults). A mistake in the space or the configs (an unknown param) raises TilerError.
    """
    from .api import _chip

    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise TilerError(f"top_k: must be an integer >= 1, got {top_k!r}")
    chip = _chip(chip)
    if chip.family != FAMILY:
        raise TilerError(
            f"chip: {chip.id} is of the {chip.family} family; Triton kernels run on a {FAMILY} chip"
        )
    us0 = load_user_space(space) if space is not None else None
    if us0 is not None and us0.op != op:
        raise TilerError(f"op: the space is for {us0.op}, got {op!r}")
    readable = _knob_names(op) | set(LAUNCH)  # the call's names the model reads when no space is given
    cache: dict = {}
    times: dict = {}
    spaces: dict = {}

    def _space_for(dicts) -> UserSpace:
        names = tuple(sorted({k for d in dicts for k in d}))
        if names not in spaces:
            base = us0 if us0 is not None else _implicit(op, names)
            spaces[names] = _launch_params(base, dicts)
        return spaces[names]

    def _problem_for(us, args):
        try:
            problem = us.problem_of(args, dtype)
            us.operator.admit(problem, chip)
            return problem
        except TilerError as exc:
            if str(exc).startswith("space:"):
                raise
            warnings.warn(
                f"tiler.triton: the model cannot price this launch ({exc}); no config pruned", stacklevel=3
            )
            return None

    def early_config_prune(configs, named_args, **kwargs):
        configs = list(configs)
        if len(configs) <= top_k:
            return configs
        args = {**named_args, **kwargs}
        fill = {p: args[p] for p in (us0.params if us0 is not None else ()) if p in args}
        dicts = [_as_dict(c, fill) for c in configs]
        us = _space_for(dicts)
        problem = _problem_for(us, args)
        if problem is None:
            return configs
        key = (problem.key(), tuple(tuple(sorted((k, repr(v)) for k, v in d.items())) for d in dicts))
        if key not in cache:
            ranked = _ranked_configs(problem, chip, us, configs, dicts)
            keep = [r.index for r in _order(us, ranked, diverse)[:top_k]]
            if not keep:
                warnings.warn(
                    f"tiler.triton: no config is feasible for {problem.label()} on {chip.id} by the model; "
                    "none pruned",
                    stacklevel=2,
                )
            cache[key] = keep
        keep = cache[key]
        return [configs[i] for i in keep] if keep else configs

    def perf_model(**kwargs):
        if us0 is None:  # no space: the names the model reads
            d = {n: v for n, v in kwargs.items() if n in readable}
        else:
            d = {p: kwargs[p] for p in us0.params if p in kwargs}
            d.update({o: kwargs[o] for o in LAUNCH if o in kwargs})
        us = _space_for([d])
        problem = _problem_for(us, kwargs)
        if problem is None:
            return 0.0
        key = (problem.key(), tuple(sorted((k, repr(v)) for k, v in d.items())))
        if key not in times:
            (r,) = _ranked_configs(problem, chip, us, [d], [d])
            times[key] = r.predicted_us / 1000.0
        return times[key]

    early_config_prune.cache = cache
    perf_model.cache = times
    return {"early_config_prune": early_config_prune, "perf_model": perf_model, "top_k": top_k}


def _knob_names(op: str) -> set[str]:
    from .space import load_space

    space = load_space(op, FAMILY)
    return set(space.names) | {a for kn in space.knobs.values() for a in kn.aliases}


__all__ = [
    "CONFIGS_MAX",
    "RankedConfig",
    "UserResult",
    "UserSpace",
    "best_configs",
    "config_dicts",
    "config_text",
    "emit_configs",
    "load_user_space",
    "pruner",
    "rank_configs",
    "search_space",
]
