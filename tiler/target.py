"""Export targets: a code generator a tiling is exported to, as a constraint on the search space.

A target is owned by an operator (`Operator.TARGETS`): it says which chips it runs on, which knob values it can
express (`domains`, the space is pinned to them), which relations between knobs its compile-time rules need
(`rules`, checked in the search beside the operator's capacity rules, so the optimum found is the optimum of what
the target can run), how a tiling becomes its view (`view`), the view's JSON Schema, the same rules run on a view
alone (`check`, what `tiler check` runs on an exported file) and the code a user pastes (`emit`).

`any` is not a target: it is the whole space. A search there also finds each target's own best tiling
(tiler.search.runnable), and its export carries one view per target that can run the problem, each of that
target's tiling (an export never carries a view that its target cannot run).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .errors import TilerError

if TYPE_CHECKING:
    from .hardware import Chip
    from .problem import Problem

ANY = "any"


@dataclass(frozen=True)
class Target:
    """One code generator of one operator on one chip family.

    name: the target's name (`--target`, the key of the export's `targets`).
    doc: one line: what consumes the view.
    schema: JSON Schema the view must match (checked on every export and by `tiler check`).
    view: (problem, chip, tiling, estimate row) -> the view (JSON-able dict); tiling is knob -> value or label.
    domains: knob -> the values (codes or labels) the target can express; the search space is pinned to them.
    rules: rule name -> the knobs it reads; `masks` computes them (True = expressible), like Operator.feasible.
    rule_text: rule name -> what it says, in the target's own words.
    masks: (problem, chip, candidates, rule names) -> {rule: bool mask}.
    check: (view, chip, problem) -> the rules the view breaks, each as one line (empty: the target accepts it).
    emit: (view, document) -> the text a user pastes (C++ fragment, Python expression).
    supports: (chip, problem) -> None when the target runs there, else why not (one line).
    language: the language of a dispatch unit (`tiler emit LIBRARY`): "cpp" (a header), "python" (a module), or
        "" (the target has no dispatch unit).
    includes: the headers a C++ dispatch unit includes for this target's entries.
    entry: (view, document) -> one library entry in the dispatch unit. C++: the body of the unit's
        `struct Entry<I> { ... };` (the kernel's type aliases, or a `static void Fill(...)` that fills the host
        tiling); Python: a JSON-able dict `{"kwargs": {...}, "num_warps": n, "num_stages": s}` (a triton.Config's
        arguments).
    native: (fields, problem) -> knob values: a tiling written in the target's own names (CATLASS template
        arguments, TCubeTiling fields, ...; any subset of `native_names`) as the operator's knobs. Knobs the
        fields do not determine are left out (a partial tiling: the caller completes it); fields that contradict
        one another raise TilerError naming them.
    native_names: the names `native` reads (an unknown name is refused with this list).
    """

    name: str
    doc: str
    schema: dict
    view: Callable[[Problem, Chip, dict, dict], dict]
    domains: dict[str, tuple] = field(default_factory=dict)
    rules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rule_text: dict[str, str] = field(default_factory=dict)
    masks: Callable[..., dict[str, np.ndarray]] | None = None
    check: Callable[[dict, Chip, Problem], list[str]] | None = None
    emit: Callable[[dict, dict], str] | None = None
    supports: Callable[[Chip, Problem], str | None] | None = None
    language: str = ""
    includes: tuple[str, ...] = ()
    entry: Callable[[dict, dict], str | dict] | None = None
    native: Callable[[dict, Problem], dict] | None = None
    native_names: tuple[str, ...] = ()

    def why_not(self, chip: Chip, problem: Problem) -> str | None:
        """None when the target can run `problem` on `chip`, else the reason (one line)."""
        return self.supports(chip, problem) if self.supports else None

    def rule_masks(
        self, p: Problem, chip: Chip, c: dict[str, np.ndarray], names=None
    ) -> dict[str, np.ndarray]:
        """The target's rule masks for the rules whose knobs are all in `c` (and in `names`, when given)."""
        wanted = [r for r in (names or self.rules) if r in self.rules and all(k in c for k in self.rules[r])]
        if not wanted or self.masks is None:
            return {}
        return self.masks(p, chip, c, wanted)

    def broken(self, view: dict, chip: Chip, problem: Problem) -> list[str]:
        """The rules a view breaks (the schema first: a view of the wrong form breaks nothing else)."""
        try:
            check_view(view, self.schema, self.name)
        except TilerError as exc:
            return [str(exc).removeprefix("export: ")]
        return list(self.check(view, chip, problem)) if self.check else []


def check_view(view, schema: dict, where: str) -> None:
    """Raise TilerError (`export: <where>/<path>: <message>`) if one view does not match its target's schema."""
    check_schema(view, schema, where)


_VALIDATORS: dict[int, tuple[dict, object]] = {}  # id -> (schema, its validator): shipped and view schemas
_FAST: dict[type, type] = {}  # a jsonschema validator class -> the same with the leaf fast path

# A leaf schema the fast path decides: a JSON type, numeric bounds, allowed values (and annotations), nothing else
_LEAF_KEYS = frozenset(
    "type minimum maximum exclusiveMinimum exclusiveMaximum enum const pattern anyOf".split()
) | {
    "description",
    "title",
}
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _surely_valid(value, leaf) -> bool:
    """True only when `value` certainly matches `leaf` (every JSON Schema draft since 6 agrees): a leaf of only
    `type`, numeric bounds, allowed values (`enum`, `const`: a string or an integer equal to one of the same
    type), a `pattern`, and `anyOf` such leaves; a value of a plain JSON type. False means "not decided here",
    never "invalid": the validator then runs as usual, so a value is refused, with the same error, exactly as
    without this."""
    if type(leaf) is not dict or not leaf.keys() <= _LEAF_KEYS:
        return False
    t = type(value)
    if "pattern" in leaf and not (
        t is str and type(leaf["pattern"]) is str and re.search(leaf["pattern"], value)
    ):
        return False  # (jsonschema's own test: re.search)
    if "anyOf" in leaf:
        if type(leaf["anyOf"]) is not list or not any(_surely_valid(value, b) for b in leaf["anyOf"]):
            return False
        if not leaf.keys() & {"type", "enum", "const"}:  # nothing beside it but bounds and a pattern
            return _within(value, leaf)
    if "enum" in leaf or "const" in leaf:
        if t is not str and t is not int:
            return False
        if "const" in leaf and not (type(leaf["const"]) is t and leaf["const"] == value):
            return False
        if "enum" in leaf and not (
            type(leaf["enum"]) is list and any(type(e) is t and e == value for e in leaf["enum"])
        ):
            return False
    elif "type" not in leaf:
        return False
    if "type" not in leaf:
        return _within(value, leaf)
    kinds = leaf["type"] if type(leaf["type"]) is list else [leaf["type"]]
    number = t is int or (t is float and math.isfinite(value))
    if not any(
        (k == "integer" and t is int)
        or (k == "number" and number)
        or (k == "string" and t is str)
        or (k == "boolean" and t is bool)
        or (k == "null" and value is None)
        or (k == "object" and t is dict)
        or (k == "array" and t is list)
        for k in kinds
    ):
        return False
    return _within(value, leaf)


def _within(value, leaf) -> bool:
    """True only when `leaf` has no numeric bound or `value` is a finite number inside every one."""
    bounds = [(k, leaf[k]) for k in _BOUNDS if k in leaf]
    if not bounds:
        return True
    t = type(value)
    if not (t is int or (t is float and math.isfinite(value))) or any(
        type(b) not in (int, float) for _, b in bounds
    ):
        return False
    return all(
        value >= b if k == "minimum" else value <= b if k == "maximum" else value > b if k == "exclusiveMinimum"
        else value < b
        for k, b in bounds
    )  # fmt: skip


def _fast_class(base: type) -> type:
    """`base` (a jsonschema validator class) with `properties` and `additionalProperties` skipping the values
    _surely_valid accepts: those would add no error, and building a sub-validator for each of them is most of the
    time a valid document takes. Every other value is validated by `base`'s own keyword, so a document is valid,
    and its errors are, exactly as with `base`."""
    if base not in _FAST:
        import jsonschema

        own = base.VALIDATORS["properties"], base.VALIDATORS["additionalProperties"]

        def properties(validator, props, instance, schema):
            if type(instance) is dict and type(props) is dict:
                props = {
                    k: v for k, v in props.items() if k in instance and not _surely_valid(instance[k], v)
                }
            yield from own[0](validator, props, instance, schema)

        def additional(validator, extra, instance, schema):
            if type(instance) is dict and type(extra) is dict and "patternProperties" not in schema:
                known = schema.get("properties", {})
                if all(_surely_valid(v, extra) for k, v in instance.items() if k not in known):
                    return
            yield from own[1](validator, extra, instance, schema)

        _FAST[base] = jsonschema.validators.extend(
            base, {"properties": properties, "additionalProperties": additional}
        )
    return _FAST[base]


def check_schema(doc: dict, schema: dict, prefix: str) -> None:
    """Raise TilerError (`export: <prefix>/<path>: <message>`) if `doc` does not match `schema`; a validator is
    built once per schema (a library holds thousands of views)."""
    import jsonschema

    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:  # the schema object itself, not a later one at the same id
        validator = _fast_class(jsonschema.validators.validator_for(schema))(schema)
        cached = _VALIDATORS[id(schema)] = (schema, validator)
    validator = cached[1]
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join([prefix] * bool(prefix) + list(map(str, error.absolute_path))) or "(top)"
        raise TilerError(f"export: {where}: {error.message}")


__all__ = ["ANY", "Target", "check_schema", "check_view"]
