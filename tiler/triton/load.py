"""Reading a user space (a TOML file or a dict): its keys checked, key and shape maps resolved."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import TilerError, closest
from .restrictions import RESTRICTIONS_MAX, _check_restriction, _fail
from .user_space import FAMILY, LAUNCH, SPACE_KEYS, UserSpace, _column, _parse


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
    from ..space import read_toml

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
    from ..operator import problem_class

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
        from ..space import load_space

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
        from ..problem import parse_problem

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
    from ..operator import absent_defaults

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
    from ..operator import get_operator

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
    from ..space import load_space

    try:
        space = load_space(op, FAMILY)
    except TilerError as exc:
        raise TilerError(f"configs: {exc}") from None
    first = {k: kn.values[0] for k, kn in space.knobs.items()}
    first.update({a: kn.values[0] for kn in space.knobs.values() for a in kn.aliases})
    return _load({"op": op, "params": {n: [first.get(n, 1)] for n in names}}, "configs")
