"""What matmul's export targets share: the generators' element types, the problem's layout and K slices, the
knobs' spaces, native-name parsing, the quantised-problem refusal, the emitted header and the schemas' integer."""

from __future__ import annotations

from functools import lru_cache

from .... import __version__
from ....errors import TilerError
from ..problem import Matmul as Problem

# ----------------------------------------------------------------------------------------------------- shared

# element type names of the generators, by problem dtype (inputs; int8 accumulates and is written as int32)
CPP_ELEMENT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int8_t"}
CPP_OUTPUT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int32_t"}
CPP_BYTES = {"half": 2, "bfloat16_t": 2, "float": 4, "int8_t": 1, "int32_t": 4}


def _layout(p: Problem) -> tuple[str, str, str]:
    """(A's storage n|t, B's storage n|t, B's format nd|nz); problems without the fields are nn / nd."""
    lay = getattr(p, "layout", "nn")
    return lay[0], lay[1], getattr(p, "b_format", "nd")


def _k_slice(p: Problem, base_k: int, split: int) -> int:
    """One split-K slice of K: whole base_k steps (the model's _k_slice, on ints)."""
    steps = -(-p.K // base_k)
    per = -(-steps // split)
    return min(per * base_k, p.K)


def _knob(t: dict, name: str, family: str = "ascend") -> int:
    """A decoded knob as the int the generators take: a categorical knob's label becomes its code, as the shipped
    space file (search_spaces/matmul.toml) defines them."""
    return _space(family).knobs[name].parse(t[name])


@lru_cache(maxsize=2)
def _space(family: str):
    from ....space import load_space

    return load_space("matmul", family, builtin=True)


# ----------------------------------------------------------------------------------------- native names


def _native_int(target: str, name: str, value, lo: int = 0) -> int:
    """A native field as an int (bools and integral floats too), at least `lo`; else one TilerError line."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < lo:
        raise TilerError(f"{target}: {name} must be an integer >= {lo}, got {value!r}")
    return value


def _native_flat(fields: dict, names: tuple[str, ...], target: str, nests: dict[str, str]) -> dict:
    """`fields` with the view's nested objects opened: a key of `nests` holding a dict contributes its entries
    (its "name" entry under the nest's own key), so a whole exported view and a flat list of the target's
    names read the same way. A name given twice with different values, or an unknown name, is one
    TilerError line (the unknown one with the names the target reads)."""
    if not isinstance(fields, dict):
        raise TilerError(
            f"{target}: native fields must be an object of names to values, got {type(fields).__name__}"
        )
    flat: dict = {}

    def put(name: str, value, where: str) -> None:
        if name not in names:
            raise TilerError(f"{target}: unknown name {name!r}{where}; known: {', '.join(names)}")
        if name in flat and flat[name] != value:
            raise TilerError(f"{target}: {name} is given twice, {flat[name]!r} and {value!r}")
        flat[name] = value

    for key, value in fields.items():
        if key in nests and isinstance(value, dict):
            for k, x in value.items():
                put(nests[key] if k == "name" else k, x, f" in {key}")
        else:
            put(key, value, "")
    return flat


def _pinned(domains: dict) -> dict:
    """The knobs a target pins to one value: every config written in its names has them."""
    space = _space("ascend")
    return {k: space.knobs[k].label(space.knobs[k].parse(v[0])) for k, v in domains.items() if len(v) == 1}


def _check_operand(target: str, name: str, got: dict, want: dict) -> None:
    """An operand's declared facts (element, layout, format, isTrans) against the problem's."""
    for k, w in want.items():
        if k in got and got[k] != w:
            raise TilerError(f"{target}: {name}.{k} is {got[k]!r} but the problem needs {w!r}")


def _quant_no_view(p: Problem, target: str) -> str | None:
    """Why a target's view cannot express a quantised matmul (dequant scales, a float output of int8, int4 B), or
    None: the views write the plain int8 -> int32 kernel only, and a view is a promise of what the kernel does."""
    if getattr(p, "quant", False) or getattr(p, "b_int4", False):
        what = []
        if getattr(p, "b_int4", False):
            what.append("int4 B")
        if getattr(p, "quant", False):
            what.append(f"dequant (scale {p.scale}, {p.output_dtype} out)")
        return (
            f"{target} view writes the plain int8 -> int32 matmul; {' and '.join(what)} {'need' if len(what) > 1 else 'needs'} a quant kernel "
            + {
                "catlass": "(CATLASS's QuantMatmulMultiStageWorkspace / W4A8MatmulLocal, whose epilogue and workspace "
                "slots the view does not carry)",
                "ascendc": "(QuantBatchMatmulV3, whose tiling data wraps a TCubeTiling with its own quant fields the view "
                "does not carry)",
                "triton": "(a scaled int8 epilogue the project's Triton kernel does not have)",
            }[target]
        )
    return None


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in text.rstrip("\n").split("\n"))


def _header(doc: dict, target: str | None = None) -> str:
    """One comment line: what the fragment is for and what the model predicts for the view's own tiling (a
    target's view may be of its own best tiling: `runnable.<target>` of the document)."""
    quiet = {k: Problem.OPTIONAL[k] for k in Problem.QUIET}  # the quant fields, left out at their defaults
    shape = ",".join(f"{k}={v}" for k, v in doc["problem"]["shape"].items() if quiet.get(k, object()) != v)
    time_us = doc.get("runnable", {}).get(target, {}).get("time_us", doc["estimate"]["time_us"])
    return (
        f"tiler {__version__}: {doc['op']} {shape} {doc['problem']['dtype']} on {doc['chip']['id']} "
        f"({doc['chip']['cores']} cores), predicted {time_us:.2f} us"
    )


# ------------------------------------------------------------------------------------------ JSON Schemas

_INT = {"type": "integer", "minimum": 1}
