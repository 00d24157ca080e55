"""A user space's restrictions: Python expressions over its params, checked, then evaluated per config."""

from __future__ import annotations

import ast
import operator as _op

import numpy as np

from ..errors import TilerError, closest

# Restrictions: at most this many, each at most this long (the parser's work stays bounded)
RESTRICTIONS_MAX = 256
RESTRICTION_CHARS = 2000


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
            out = np.power(np.asarray(left, dtype=np.float64), np.asarray(right, dtype=np.float64))
            if np.any(np.isinf(out) & np.isfinite(left) & np.isfinite(right)):
                raise OverflowError(f"{ast.unparse(node)[:60]} overflows (a power past the float range)")
            return out
        if type(node.op) in _WRAPS and _integral(left) and _integral(right):
            _check_int64(node, left, right)
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


# integer operations that wrap silently at 64 bits in numpy (1 << 99999999999 is 0, not an error): their exact
# value is bounded first, in floats, and one past int64 is an error naming the expression
_WRAPS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.LShift: None}
_INT64_MAX = float(2**63)


def _integral(v) -> bool:
    """An integer operand (a Python or numpy int, or a column of them): numpy computes on it in int64."""
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "iub"
    return isinstance(v, int | np.integer)


def _check_int64(node: ast.BinOp, left, right) -> None:
    """Raise OverflowError when an integer +, -, * or << leaves int64 (numpy would wrap), ValueError for a
    negative shift count (as Python's)."""
    a = np.asarray(left, dtype=np.float64)
    b = np.asarray(right, dtype=np.float64)
    if isinstance(node.op, ast.LShift):
        if np.any(b < 0):
            raise ValueError(f"{ast.unparse(node)[:60]}: negative shift count")
        exact = a * np.power(
            2.0, np.minimum(b, 1100.0)
        )  # 2**1100 is inf: any such shift of a non-zero is out
    else:
        exact = _WRAPS[type(node.op)](a, b)
    if np.any(np.abs(exact) >= _INT64_MAX):
        raise OverflowError(f"{ast.unparse(node)[:60]} overflows 64-bit integers")


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
