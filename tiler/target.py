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


# id -> (schema, its validator, whether _decide knows its draft): shipped and view schemas
_VALIDATORS: dict[int, tuple[dict, object, bool]] = {}
_FAST: dict[type, type] = {}  # a jsonschema validator class -> the same with the fast path

# The JSON values _decide reads (anything else, a tuple or a numpy scalar, is left to jsonschema), and the
# keywords that say nothing about a value (`then` and `else` are read by `if`)
_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
_NOTES = frozenset(
    {"title", "description", "$comment", "default", "examples", "$schema", "$defs", "then", "else"}
)


Verdict = bool | None  # True valid, False invalid, None not decided here
Decider = Callable[[object], "bool | None"]

# (id of the schema, id of the root) -> (schema, root, its decider): each schema node is compiled once; the schema
# objects are kept so that a later object at the same id is not taken for it. Schemas are not changed once used
# (the shipped ones and the views' are module constants).
_DECIDERS: dict[tuple[int, int], tuple[object, object, Decider]] = {}
# entries kept before all start over (a caller's one-off schemas cannot grow it for ever)
_DECIDERS_MAX = 4096


def _decide(value, schema, root: dict | None = None) -> bool | None:
    """Whether `value` matches `schema` under JSON Schema 2020-12 as jsonschema decides it: True (valid), False
    (invalid) or None (not decided here). Decided: the keywords the shipped and view schemas use (types, bounds,
    allowed values, patterns, object and array sizes, required, properties, additionalProperties,
    propertyNames, items, allOf, anyOf, oneOf, not, if, and `$ref`s of the form `#/...` into `root`) on plain
    JSON values; any other keyword or value is None. A valid document is then accepted without building a
    jsonschema sub-validator per value (most of the time a valid document took), and check_schema leaves every
    document not decided valid to jsonschema, so errors are jsonschema's own.

    The schema is compiled once into nested functions (_decider), not read keyword by keyword on every call:
    `tiler check` of a library decides thousands of views against the same schema."""
    return _decider(schema, root)(value)


def _decider(schema, root) -> Decider:
    """The compiled decision of `schema` (with `$ref`s into `root`), kept per (schema, root)."""
    key = (id(schema), id(root))
    got = _DECIDERS.get(key)
    if got is not None and got[0] is schema and got[1] is root:
        return got[2]
    fn = _compile(schema, root)
    if len(_DECIDERS) >= _DECIDERS_MAX:
        _DECIDERS.clear()
    _DECIDERS[key] = (schema, root, fn)
    return fn


def _undecided(value) -> None:
    return None


def _valid(value) -> bool:
    return True


def _compile(schema, root) -> Decider:
    """One schema node as a function of the value, deciding as the keyword-by-keyword reading does: a bool schema
    is itself, anything but an object undecided; the keywords in the node's order, False at the first rule that
    fails, None where one could not decide; an unknown keyword (not a note) ends the node undecided unless a
    rule before it failed. Sub-schemas are compiled with it, `$ref`s when first followed."""
    if schema is True or schema is False:
        return _valid if schema else lambda value: False
    if type(schema) is not dict:
        return _undecided
    rules: list[Decider] = []
    unknown = False
    for key, arg in schema.items():
        make = _KEYWORDS.get(key)
        if make is None:
            if key in _NOTES or (key == "$id" and schema is root):
                continue
            unknown = True
            break
        rules.append(make(arg, schema, root))
    last: Verdict = None if unknown else True

    def decide(value) -> bool | None:
        if type(value) not in _PLAIN:
            return None
        verdict: bool | None = last
        for rule in rules:
            got = rule(value)
            if got is False:
                return False
            if got is None:
                verdict = None
        return verdict

    return decide


def _surely_valid(value, schema) -> bool:
    """True only when `value` certainly matches `schema` (_decide, without `$ref`s: no root to resolve them in)."""
    return _decide(value, schema) is True


def _all(verdicts) -> bool | None:
    """The conjunction of verdicts: False if any is False, else None if any is None, else True."""
    out: bool | None = True
    for v in verdicts:
        if v is False:
            return False
        if v is None:
            out = None
    return out


def _type(arg, schema, root) -> Decider:
    kinds = arg if type(arg) is list else [arg]
    exact: set[type] = set()
    integral = False  # a float of integral value is an integer
    for k in kinds:
        if type(k) is not str:
            return _undecided
        if k == "integer":
            exact.add(int)
            integral = True
        elif k == "number":
            exact.update((int, float))
        elif k in _TYPES:
            exact.add(_TYPES[k])
        else:
            return _undecided
    frozen = frozenset(exact)

    def rule(value) -> bool:
        t = type(value)
        return t in frozen or (integral and t is float and value.is_integer())

    return rule


_TYPES = {"string": str, "boolean": bool, "null": type(None), "object": dict, "array": list}


def _equal(value, options: list) -> bool | None:
    """Whether a scalar `value` equals one of `options` as jsonschema's `equal` has it (the same object, or: a
    string only a string, a bool only the same bool, null only null, a number any number of the same value but
    no bool); None for an object or an array."""
    t = type(value)
    if t is str:
        return value in options
    if t is bool or value is None:
        return any(o is value for o in options)
    if t is int or t is float:
        return any(o is value or (type(o) is not bool and o == value) for o in options)
    return None


def _enum(arg, schema, root) -> Decider:
    if type(arg) is not list:
        return _undecided
    return lambda value: _equal(value, arg)


def _const(arg, schema, root) -> Decider:
    options = [arg]
    return lambda value: _equal(value, options)


def _finite(x) -> bool:
    """False only for a float NaN or infinity (an integer of any size is finite)."""
    return type(x) is not float or math.isfinite(x)


def _bound(test):
    """A numeric bound keyword: it holds for a value that is not a number (bool is not one)."""

    def make(arg, schema, root) -> Decider:
        usable = type(arg) in (int, float) and _finite(arg)

        def rule(value) -> bool | None:
            t = type(value)
            if t is not int and t is not float:
                return True
            if not usable or not _finite(value):
                return None
            return test(value, arg)

        return rule

    return make


def _pattern(arg, schema, root) -> Decider:
    compiled: list = []  # the pattern, compiled when a string first meets it (jsonschema's own re.search test)

    def rule(value) -> bool | None:
        if type(value) is not str:
            return True
        if type(arg) is not str:
            return None
        if not compiled:
            compiled.append(re.compile(arg))
        return compiled[0].search(value) is not None

    return rule


def _size(kind: type, test):
    """A size keyword of objects or arrays: it holds for a value of another kind."""

    def make(arg, schema, root) -> Decider:
        usable = type(arg) is int

        def rule(value) -> bool | None:
            if type(value) is not kind:
                return True
            return test(len(value), arg) if usable else None

        return rule

    return make


def _required(arg, schema, root) -> Decider:
    usable = type(arg) is list

    def rule(value) -> bool | None:
        if type(value) is not dict:
            return True
        return all(k in value for k in arg) if usable else None

    return rule


def _not_object(value) -> bool | None:
    """An object keyword that cannot be decided: it holds for a value that is not an object."""
    return True if type(value) is not dict else None


def _properties(arg, schema, root) -> Decider:
    if type(arg) is not dict:
        return _not_object
    subs = [(k, _compile(sub, root)) for k, sub in arg.items()]

    def rule(value) -> bool | None:
        if type(value) is not dict:
            return True
        out: bool | None = True
        for k, decide in subs:
            if k in value:
                got = decide(value[k])
                if got is False:
                    return False
                if got is None:
                    out = None
        return out

    return rule


def _additional(arg, schema, root) -> Decider:
    known = schema.get("properties", {})
    if "patternProperties" in schema or type(known) is not dict:
        return _not_object
    decide = _compile(arg, root)

    def rule(value) -> bool | None:
        if type(value) is not dict:
            return True
        return _all(decide(v) for k, v in value.items() if k not in known)

    return rule


def _property_names(arg, schema, root) -> Decider:
    decide = _compile(arg, root)

    def rule(value) -> bool | None:
        if type(value) is not dict:
            return True
        return _all(decide(k) for k in value)

    return rule


def _items(arg, schema, root) -> Decider:
    decide = _compile(arg, root)

    def rule(value) -> bool | None:
        if type(value) is not list:
            return True
        out: bool | None = True
        for v in value:
            got = decide(v)
            if got is False:
                return False
            if got is None:
                out = None
        return out

    return rule


def _each(arg, root) -> list[Decider] | None:
    """The compiled schemas of a combination keyword's list, or None when its argument is not a list."""
    return None if type(arg) is not list else [_compile(s, root) for s in arg]


def _all_of(arg, schema, root) -> Decider:
    subs = _each(arg, root)
    if subs is None:
        return _undecided
    return lambda value: _all(decide(value) for decide in subs)


def _any_of(arg, schema, root) -> Decider:
    subs = _each(arg, root)
    if subs is None:
        return _undecided

    def rule(value) -> bool | None:
        found = [decide(value) for decide in subs]
        return True if True in found else None if None in found else False

    return rule


def _one_of(arg, schema, root) -> Decider:
    subs = _each(arg, root)
    if subs is None:
        return _undecided

    def rule(value) -> bool | None:
        found = [decide(value) for decide in subs]
        valid = found.count(True)
        return False if valid > 1 else None if None in found else valid == 1

    return rule


def _not(arg, schema, root) -> Decider:
    decide = _compile(arg, root)

    def rule(value) -> bool | None:
        got = decide(value)
        return None if got is None else not got

    return rule


def _if(arg, schema, root) -> Decider:
    test = _compile(arg, root)
    then = _compile(schema["then"], root) if "then" in schema else _valid
    other = _compile(schema["else"], root) if "else" in schema else _valid

    def rule(value) -> bool | None:
        got = test(value)
        if got is None:
            return None
        return then(value) if got else other(value)

    return rule


def _ref(arg, schema, root) -> Decider:
    """A `$ref` to a JSON pointer into the root schema (`#/$defs/name`); any other reference is not decided. The
    target is found and compiled when the reference is first followed (a schema may refer to itself)."""
    if root is None or type(arg) is not str or not arg.startswith("#/") or "%" in arg:
        return _undecided
    target: list[Decider] = []

    def rule(value) -> bool | None:
        if not target:
            node = root
            for part in arg[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if type(node) is not dict or part not in node:
                    target.append(_undecided)
                    break
                node = node[part]
            else:
                target.append(_compile(node, root))
        return target[0](value)

    return rule


_KEYWORDS = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound(lambda v, b: v >= b),
    "maximum": _bound(lambda v, b: v <= b),
    "exclusiveMinimum": _bound(lambda v, b: v > b),
    "exclusiveMaximum": _bound(lambda v, b: v < b),
    "pattern": _pattern,
    "minProperties": _size(dict, lambda n, b: n >= b),
    "maxProperties": _size(dict, lambda n, b: n <= b),
    "minItems": _size(list, lambda n, b: n >= b),
    "maxItems": _size(list, lambda n, b: n <= b),
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "propertyNames": _property_names,
    "items": _items,
    "allOf": _all_of,
    "anyOf": _any_of,
    "oneOf": _one_of,
    "not": _not,
    "if": _if,
    "$ref": _ref,
}


def _fast_class(base: type) -> type:
    """`base` (a jsonschema validator class) with `properties` and `additionalProperties` skipping the values
    _surely_valid accepts: those would add no error, and building a sub-validator for each of them is most of the
    time an invalid document takes. Every other value is validated by `base`'s own keyword, so a document is
    valid, and its errors are, exactly as with `base`. _decide knows 2020-12 only: other drafts get `base`."""
    import jsonschema

    if base is not jsonschema.Draft202012Validator:
        return base
    if base not in _FAST:
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
    built once per schema (a library holds thousands of views). A document _decide finds valid (under the
    2020-12 draft its validator is for) is accepted at once; any other goes through jsonschema, whose errors are
    the ones raised."""
    import jsonschema

    cached = _VALIDATORS.get(id(schema))
    if cached is None or cached[0] is not schema:  # the schema object itself, not a later one at the same id
        base = jsonschema.validators.validator_for(schema)
        cached = (schema, _fast_class(base)(schema), base is jsonschema.Draft202012Validator)
        _VALIDATORS[id(schema)] = cached
    _, validator, decidable = cached
    if decidable and _decide(doc, schema, schema) is True:
        return
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join([prefix] * bool(prefix) + list(map(str, error.absolute_path))) or "(top)"
        raise TilerError(f"export: {where}: {error.message}")


__all__ = ["ANY", "Target", "check_schema", "check_view"]
