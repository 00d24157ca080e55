"""`tiler check` re-derives every rule from the view and cross-checks it against the document (issue 31): the view
must be the one its target's tiling gives (tile, element types from the dtype, block_dim from the launch), the tiling
must be integers or labels inside the target's domains meeting every capacity and target rule, and the launch must
be the one the model gives. Hand-written cases from the issue, then a property: any field of a valid export
mutated into another value makes check fail (exit 1 with a finding, or exit 2 for a document that is not one)."""

from __future__ import annotations

import copy
import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiler.check import check_document
from tiler.cli import main
from tiler.errors import TilerError

EXPORTS = {
    "matmul-ascend": ["--chip", "ascend910b3", "--op", "matmul", "--shape", "M=1000,N=768,K=512"],
    "matmul-int8": ["--chip", "ascend910b3", "--op", "matmul", "--shape", "M=512,N=512,K=512", "--dtype", "int8"],
    "matmul-h200": ["--chip", "h200", "--op", "matmul", "--shape", "M=1000,N=768,K=512"],
    "softmax-ascend": ["--chip", "ascend910b3", "--op", "softmax", "--shape", "rows=4096,d=4096"],
    "dwconv-h200": ["--chip", "h200", "--op", "depthwise_conv", "--shape", "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1"],
    "fa-ascend": [
        "--chip", "ascend910b3", "--op", "flash_attention", "--shape", "B=1,heads=8,kv_heads=8,S1=1024,S2=1024,D=128",
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, dict]:
    """One valid export per case of EXPORTS (tiler search --export), each checked clean first."""
    out = {}
    for name, argv in EXPORTS.items():
        path = tmp_path_factory.mktemp("exports") / f"{name}.json"
        assert main(["search", *argv, "--export", str(path)]) == 0
        doc = json.loads(path.read_text())
        assert check_document(doc)[1] == [], name
        out[name] = doc
    return out


def _fails(doc) -> list[str]:
    """The findings of check on `doc` (an input error, exit 2, counts as one)."""
    try:
        return [str(f) for f in check_document(doc)[1]]
    except TilerError as exc:
        return [f"error: {exc}"]


def _view_tiling(doc, target):
    """The tiling a target's view is of: its runnable choice's, else the document's."""
    return doc.get("runnable", {}).get(target, doc)["tiling"]


def test_zero_base_k_and_step_ka_are_findings_not_crashes(docs, tmp_path, capsys):
    for field in ("baseK", "stepKa", "baseM", "depthA1"):
        doc = copy.deepcopy(docs["matmul-ascend"])
        doc["targets"]["ascendc"]["TCubeTiling"][field] = 0
        path = tmp_path / "zero.json"
        path.write_text(json.dumps(doc))
        assert main(["check", str(path)]) == 1
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err and f"TCubeTiling.{field} is 0" in out, out


def test_a_view_tile_that_differs_from_the_tiling_is_a_finding(docs):
    doc = copy.deepcopy(docs["matmul-ascend"])
    doc["targets"]["catlass"]["L0TileShape"][0] //= 2
    doc["targets"]["catlass"]["L1TileShape"][0] //= 2
    found = _fails(doc)
    assert any("L0TileShape.0 is" in f and "tiling gives" in f for f in found), found


def test_an_int8_problem_with_a_half_matmul_type_is_a_finding(docs):
    doc = copy.deepcopy(docs["matmul-int8"])
    view = doc["targets"]["ascendc"]
    view["MatmulType"]["A"]["type"] = view["MatmulType"]["B"]["type"] = "half"
    found = _fails(doc)
    assert any("MatmulType.A.type is 'half'" in f for f in found), found


@pytest.mark.parametrize("value", ["128", 128.5, 128.0, True, None, -64])
def test_string_fractional_and_odd_tiling_values_are_findings(docs, value):
    doc = copy.deepcopy(docs["matmul-ascend"])
    _view_tiling(doc, "catlass")["base_m"] = value
    assert any("base_m" in f for f in _fails(doc))


def test_block_dim_and_used_core_num_must_agree_with_the_launch(docs):
    doc = copy.deepcopy(docs["matmul-ascend"])
    view = doc["targets"]["ascendc"]
    view["block_dim"], view["TCubeTiling"]["usedCoreNum"] = 16, 14
    found = _fails(doc)
    assert any("block_dim is 16" in f for f in found) and any("usedCoreNum is 14" in f for f in found), found
    doc = copy.deepcopy(docs["matmul-ascend"])
    doc["runnable"]["ascendc"]["launch"]["block_dim"] += 1
    assert any("launch.block_dim" in f for f in _fails(doc))


def test_the_documents_own_tiling_must_be_feasible(docs):
    doc = copy.deepcopy(docs["matmul-ascend"])
    doc["tiling"].update(base_m=512, base_n=512, base_k=512)
    assert any(f.startswith("tiling: breaks") for f in _fails(doc))


# --- the property: every field of a valid export, mutated, makes check fail


def _leaves(node, path=()):
    """(path, value) of every leaf of a JSON tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, (*path, i))
    else:
        yield path, node


def _mutable(doc) -> list[tuple]:
    """The fields check must guard: every leaf of every view, the launch of each view's tiling, and the knobs and
    derived values of each view's tiling (the knob values are only given values a tiling cannot hold)."""
    paths = []
    for target in doc["targets"]:
        paths += [("targets", target, *p) for p, _ in _leaves(doc["targets"][target])]
        base = ("runnable", target) if target in doc.get("runnable", {}) else ()
        part = doc["runnable"][target] if base else doc
        paths += [
            (*base, "launch", k) for k in ("block_dim", "waves", "tiles", "schedule") if k in part["launch"]
        ]
        paths += [(*base, "tiling", k) for k in part["tiling"]]
    return paths


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _set(doc, path, value):
    _get(doc, path[:-1])[path[-1]] = value


def _mutations(value, in_tiling: bool) -> list:
    """Other values for a leaf: a different number, a number written as text or as a fraction, a flipped flag, a
    changed word. A tiling's knob gets only values no tiling may hold (a valid other knob value is another tiling,
    not a broken one)."""
    if isinstance(value, bool):
        return [not value, int(value), str(value).lower()]
    if isinstance(value, int):
        out = [str(value), value + 0.5, float(value), -abs(value) - 1]
        return out if in_tiling else [*out, value + 1, 0, value * 2 + 3, 10**6 + 7]
    if isinstance(value, float):
        return [value * 1.5 + 1.0, str(value), -1.0]
    if isinstance(value, str):
        return [value + "x", "", 7]
    return [0, "x"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_mutated_field_of_a_valid_export_fails_check(docs, data):
    name = data.draw(st.sampled_from(sorted(docs)), label="export")
    doc = copy.deepcopy(docs[name])
    path = data.draw(st.sampled_from(_mutable(doc)), label="field")
    old = _get(doc, path)
    new = data.draw(st.sampled_from(_mutations(old, "tiling" in path)), label="value")
    if type(new) is type(old) and new == old:
        return
    _set(doc, path, new)
    assert _fails(doc), (name, path, old, new)


def _paths(x, path=()):
    """The path of every leaf (and, with the leaves, every object) of a JSON value, depth first."""
    if isinstance(x, dict):
        yield path, True
        for k, v in x.items():
            yield from _paths(v, (*path, k))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from _paths(v, (*path, i))
    else:
        yield path, False


ODD = [
    -1,
    0,
    1,
    2**31,
    2**31 - 1,
    -(2**63),
    1.5,
    2.0,
    -0.0,
    float("nan"),
    float("inf"),
    True,
    False,
    None,
    "x",
    [],
    {},
]


def test_the_validators_fast_path_refuses_exactly_what_jsonschema_refuses(docs):
    """check_schema's validator (tiler.target._fast_class) skips the sub-validator of a leaf it knows is valid.
    On valid exports and their views, each with one leaf set to an odd value (a wrong type, a bound crossed, NaN,
    a bool for an integer) or one unknown key added to an object, it gives jsonschema's own errors: the same
    messages at the same places, in the same order. The whole-document decision (_decide, which lets
    check_schema accept a document without jsonschema) is jsonschema's wherever it decides, decides every valid
    export, and check_schema raises jsonschema's best match on every refused case."""
    import jsonschema

    from tiler.export import load_schema
    from tiler.operator import get_operator
    from tiler.target import _decide, _fast_class, check_schema

    rng = np.random.default_rng(3)
    seen = Counter()
    for doc in docs.values():
        targets = get_operator(doc["op"], doc["chip"]["family"]).TARGETS
        pairs = [(doc, load_schema("tiling_v1"))] + [
            (v, targets[t].schema) for t, v in doc["targets"].items()
        ]
        for inst, schema in pairs:
            base = jsonschema.validators.validator_for(schema)
            plain, fast = base(schema), _fast_class(base)(schema)
            paths = list(_paths(inst))
            cases = [inst]
            for i in rng.choice(len(paths), size=min(30, len(paths)), replace=False):
                path, is_object = paths[i]
                case = copy.deepcopy(inst)
                node = case
                for k in path[:-1] if not is_object else path:
                    node = node[k]
                value = ODD[rng.integers(len(ODD))]
                if is_object:
                    node["not_a_field"] = value
                elif path:
                    node[path[-1]] = value
                cases.append(case)
            assert _decide(inst, schema, schema) is True
            for case in cases:
                want = [(e.message, list(e.absolute_path)) for e in plain.iter_errors(case)]
                assert [(e.message, list(e.absolute_path)) for e in fast.iter_errors(case)] == want
                seen[bool(want)] += 1
                assert _decide(case, schema, schema) in (None, not want), (case, want)
                best = jsonschema.exceptions.best_match(plain.iter_errors(case))
                if best is None:
                    check_schema(case, schema, "p")
                else:
                    where = "/".join(["p", *map(str, best.absolute_path)])
                    with pytest.raises(TilerError) as exc:
                        check_schema(case, schema, "p")
                    assert str(exc.value) == f"export: {where}: {best.message}"
    assert seen[True] > 50 and seen[False] > 50, seen  # refused and accepted cases both


def _subschemas(schema):
    """Every object schema inside a schema (itself included)."""
    if isinstance(schema, dict):
        yield schema
        for v in schema.values():
            yield from _subschemas(v)
    elif isinstance(schema, list):
        for v in schema:
            yield from _subschemas(v)


def test_the_fast_path_accepts_only_what_jsonschema_accepts():
    """Every leaf of every shipped schema (documents and every operator's views) against odd values and values
    at, beside and between its bounds: whatever _surely_valid accepts, jsonschema accepts (it may leave a valid
    value to jsonschema, never pass an invalid one), and it does decide the plain valid values. Every subschema
    (objects, arrays, combinations, `$ref`s into its root) against the same values and a few objects and
    arrays: wherever _decide decides, valid or not, it is what jsonschema decides, and it decides both ways."""
    import jsonschema

    from tiler.export import load_schema
    from tiler.operator import get_operator, known_ops
    from tiler.target import _decide, _surely_valid

    roots = [load_schema("tiling_v1"), load_schema("library_v1")]
    roots += [t.schema for op, family in known_ops() for t in get_operator(op, family).TARGETS.values()]
    roots.append(  # every keyword and type the fast path decides, beyond those the shipped schemas use
        {
            "properties": {
                "a": {"type": "number", "exclusiveMaximum": 3, "exclusiveMinimum": -3.5},
                "b": {"type": ["integer", "null"], "minimum": -2, "maximum": 5},
                "c": {"type": "string", "title": "c"},
                "d": {"type": ["boolean", "number"]},
                "e": {"enum": [0, 1, "one", 2.0, None, True]},
                "f": {"type": "integer", "const": 1},
                "g": {"const": "x", "maximum": 3},
                "h": {"enum": [True, "z"]},  # 1 == True in Python, not in JSON Schema
                "i": {"const": False},
                "j": {
                    "anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[a-z]+$"}]
                },
                "k": {"type": ["object", "array"]},
                "m": {"type": "string", "pattern": "^a", "anyOf": [{"enum": ["ascend", "x"]}, {"const": 7}]},
                "n": {"pattern": "^x", "anyOf": [{"type": "string"}], "minimum": 3},
                "o": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 2}]},
                "p": {"not": {"type": "string"}},
                "q": {"if": {"type": "integer"}, "then": {"minimum": 1}, "else": {"const": "x"}},
                "r": {"type": "array", "items": {"$ref": "#/$defs/word"}, "minItems": 1, "maxItems": 2},
                "s": {"type": "object", "propertyNames": {"$ref": "#/$defs/word"}, "minProperties": 1},
                "t": {"allOf": [{"required": ["a"]}, {"maxProperties": 2}], "additionalProperties": False,
                      "properties": {"a": {"type": "integer"}, "b": {}}},
                "u": {"additionalProperties": {"type": "integer"}, "properties": {"name": {"type": "string"}}},
                "v": {"if": {"required": ["name"]}, "then": {"required": ["b"]}},
                "w": {"enum": [[1, 2], {"a": 1}, 1.5, float("inf")]},
            },
            "$defs": {"word": {"type": "string", "pattern": "^[a-z]+$"}},
        }
    )  # fmt: skip
    shaped = [
        {"a": 1},
        {"a": 1, "b": "x"},
        {"name": "x", "b": 2},
        {"A": 1},
        [1, 2],
        ["ab"],
        ["ab", "c", "d"],
        [1.5],
    ]
    seen = Counter()
    for root in roots:
        base = jsonschema.validators.validator_for(root)
        in_root = base(root)  # its subschemas' `$ref`s resolve in the root
        for leaf in _subschemas(root):
            near = [b + d for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in leaf
                    for b in [leaf[k]] for d in (-1, -0.5, 0, 0.5, 1)]  # fmt: skip
            allowed = [*leaf.get("enum", []), *([leaf["const"]] if "const" in leaf else [])]
            values = [*ODD, *near, *(float(v) for v in near), *allowed, "ascend", "x1", "Ab", 7, 7.25]
            for value in values:
                if _surely_valid(value, leaf):
                    assert base(leaf).is_valid(value), (leaf, value)
                    seen["decided"] += 1
            for value in [*values, *shaped]:
                got = _decide(value, leaf, root)
                if got is not None:
                    assert got == in_root.evolve(schema=leaf).is_valid(value), (leaf, value, got)
                    seen[got] += 1
    assert seen["decided"] > 100, seen
    assert seen[True] > 1000 and seen[False] > 1000, seen
