"""Problems: one small frozen class per operator, parsed from CLI strings or CSV rows with clear errors.

One checker (`parse_problem`) serves `--shape`, sweep CSV rows and library look-ups, so a bad field reads the
same everywhere: the field, what is allowed, what was received.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

from .errors import ProblemError
from .registry import problem_class  # filled in by tiler.operator (the registry sits above this module)

DTYPES = ("fp16", "bf16", "fp32", "int8")
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 1}
# What the kernel writes: int8 accumulates in int32 and is written as int32 here; floats write their own dtype.
OUT_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 4}


@dataclass(frozen=True)
class Problem:
    """Base: an operator's shape and dtype. Subclasses list their fields in `FIELDS` (required, in order)."""

    OP: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[dict[str, Any]] = {}
    # fields whose smallest allowed value is not 1 (a padding may be 0)
    MINIMUM: ClassVar[dict[str, int]] = {}
    # optional fields that take one of a few words instead of an integer: field -> its allowed values (its default,
    # in OPTIONAL, is one of them). Matmul: layout nn|nt|tn|tt, b_format nd|nz. A value at its default stays out of
    # key() and label(), so the keys of problems that existed before the field are unchanged.
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}
    # fields that must agree for a library's nearest match (the others are size fields the distance compares); a
    # choice field listed here must agree exactly (it cannot be a distance)
    MATCHED: ClassVar[tuple[str, ...]] = ()
    # a small, typical problem (`tiler ops` shows it as an example --shape; the conformance tests search it)
    EXAMPLE: ClassVar[dict[str, int]] = {}

    @property
    def in_bytes(self) -> int:
        return DTYPE_BYTES[self.dtype]  # type: ignore[attr-defined]

    @property
    def out_bytes(self) -> int:
        return OUT_BYTES[self.dtype]  # type: ignore[attr-defined]

    def shape(self) -> dict[str, Any]:
        """The problem fields without the dtype: the keys of `--shape` and of sweep CSV columns (integers, and the
        words of CHOICES fields)."""
        return {k: v for k, v in asdict(self).items() if k != "dtype"}

    def key(self) -> str:
        """A stable text key (library look-up, sweep resume). Choice fields at their default are left out, so a
        problem that could be written before the field existed keeps its key."""
        parts = [f"{k}={v}" for k, v in self.shape().items() if not self._default_choice(k, v)]
        return f"{self.OP}:{','.join(parts)}:{self.dtype}"  # type: ignore[attr-defined]

    def _default_choice(self, k: str, v: Any) -> bool:
        return k in self.CHOICES and v == self.OPTIONAL.get(k)

    def to_dict(self) -> dict[str, Any]:
        """The export's `problem`: shape, dtype and the operands' memory layout (memory_layout())."""
        return dict(shape=self.shape(), dtype=self.dtype, layout=self.memory_layout())  # type: ignore[attr-defined]

    def memory_layout(self) -> str:
        """The operands' memory layout in one word (the export's problem.layout): row_major unless the problem
        class says otherwise (matmul: its layout field, nn/nt/tn/tt)."""
        return "row_major"

    def label(self) -> str:
        """A short shape label (calibration's shape keys, `--fit-shapes`): the required fields joined by `x`,
        then `_<field><value>` for each optional field that differs from its default, then `:dtype` unless fp16
        (matmul: 4096x4096x4096, 512x512x512_batch8:bf16, 4096x4096x4096_layoutnt; depthwise:
        16x240x28x28x5x5_pad2)."""
        shape = self.shape()
        text = "x".join(str(shape[k]) for k in self.FIELDS)
        text += "".join(f"_{k}{shape[k]}" for k, d in self.OPTIONAL.items() if shape[k] != d)
        return text + ("" if self.dtype == "fp16" else f":{self.dtype}")  # type: ignore[attr-defined]

    @classmethod
    def from_profiler(cls, shapes: str, dtypes: str, formats: str = "") -> tuple[dict, str] | str | None:
        """(fields, dtype) of the problem a profiler row's `Input Shapes` ("M,K;K,N"), `Input Data Types` and
        `Input Formats` describe; a str saying why this operator's row cannot be fitted (a broadcast operand); None
        when they are not this operator's (tiler.msprof). A cell that is not a shape list raises ProblemError
        (profiler_dims). Default: None."""
        return None

    def validate(self) -> None:
        """Cross-field checks after each field passed its own (a kernel larger than the padded input, ...);
        raise ProblemError naming the fields. Default: none."""


PROFILER_DIM_DIGITS = 10  # FIELD_MAX has 10 digits: a longer dimension is refused before int() reads it


def profiler_dims(cell: str) -> list[list[int]]:
    """A profiler's `Input Shapes` cell as one dimension list per input: "1024,4096;4096,1024" (msprof's form; the
    cell may keep its literal double quotes, blanks around numbers, an empty part for a scalar input). Anything
    else (`1024.0`, `[1024,512]`, `1024x512`, a 5,000-digit number) is a ProblemError naming the token."""
    text = str(cell).strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    out = []
    for part in text.split(";"):
        dims = []
        for tok in (t.strip() for t in part.split(",")):
            if not tok and not part.strip():
                continue
            if (
                not tok.isascii()
                or not tok.isdigit()
                or len(tok) > PROFILER_DIM_DIGITS
                or int(tok) > FIELD_MAX
            ):
                shown = tok if len(tok) <= 24 else tok[:20] + f"... ({len(tok)} characters)"
                raise ProblemError(
                    f"{shown!r} is not a dimension (whole numbers up to {FIELD_MAX}, the inputs as "
                    '"M,K;K,N": commas between dimensions, ";" between inputs)'
                )
            dims.append(int(tok))
        out.append(dims)
    return out


def parse_shape_text(text: str) -> dict[str, str]:
    """`M=4096,N=4096,K=4096` -> {'M': '4096', ...}; malformed pairs name themselves."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ProblemError(f"shape: expected KEY=VALUE pairs separated by commas, got {part!r}")
        k, v = (s.strip() for s in part.split("=", 1))
        if k in out:
            raise ProblemError(f"shape: field {k!r} given twice")
        out[k] = v
    return out


# The largest value a problem field takes, and the most elements one tensor of a problem may hold (checked by each
# problem's validate()): the models count elements and tiles in int64 and float64, exact below 2**53; no layer of
# a real model comes near either.
FIELD_MAX = 2**31 - 1
TENSOR_MAX = 2**48


def check_tensor_sizes(sizes: dict[str, int]) -> None:
    """Raise ProblemError naming the first tensor (`"N*C*H*W"`: its element count) above TENSOR_MAX."""
    for name, n in sizes.items():
        if n > TENSOR_MAX:
            raise ProblemError(f"shape: {name} = {n} elements; at most 2**48 per tensor")


def _as_int(field: str, value: Any, minimum: int = 1) -> int:
    """An integer field in [minimum, FIELD_MAX], from an int, a float with no fraction or text."""
    why = f"{field}: must be an integer >= {minimum}, got {value!r}"
    if isinstance(value, bool):
        raise ProblemError(why)
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond float's range
        raise ProblemError(why) from None
    if not math.isfinite(f) or f != int(f) or int(f) < minimum:
        raise ProblemError(why)
    if int(f) > FIELD_MAX:
        raise ProblemError(f"{field}: must be an integer <= {FIELD_MAX}, got {value!r}")
    return int(f)


def _as_choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    """A choice field: one of `allowed`, from text (case and surrounding blanks ignored)."""
    text = value.strip().lower() if isinstance(value, str) else None
    if text not in allowed:
        raise ProblemError(f"{field}: must be one of {', '.join(allowed)}, got {value!r}")
    return text


def parse_problem(op: str, fields_: dict[str, Any], dtype: str | None = None, strict: bool = True) -> Problem:
    """Build a validated problem from string or numeric fields.

    Args:
        op: operator name (`tiler ops` lists them).
        fields_: the problem fields; with `strict`, unknown keys are an error (a CSV row passes strict=False).
        dtype: overrides a `dtype` entry in `fields_`; default fp16.
    """
    cls = problem_class(op)
    given = {k: v for k, v in fields_.items() if v is not None and v != ""}
    known = {f.name for f in fields(cls)} if strict else None
    shape, dt = check_fields(op, given, dtype, cls.FIELDS, cls.OPTIONAL, cls.CHOICES, cls.MINIMUM, known)
    problem = cls(dtype=dt, **shape)
    problem.validate()
    return problem


def check_fields(
    op: str,
    given: dict[str, Any],
    dtype: str | None,
    required,
    optional: dict,
    choices: dict,
    minimum: dict,
    known: set[str] | None = None,
) -> tuple[dict[str, Any], str]:
    """(shape fields, dtype) of a problem's given fields (absent ones left out), checked against its class's
    declarations (FIELDS, OPTIONAL, CHOICES, MINIMUM), each failure a ProblemError naming the field: the one field
    check of `parse_problem` and of tiler.lookup (which reads the declarations without importing the class).
    known: the names accepted (None: anything else is ignored)."""
    if known is not None:
        for k in given:
            if k not in known:
                raise ProblemError(
                    f"shape: unknown field {k!r} for {op}; allowed: {', '.join(tuple(required) + tuple(optional))}"
                )
    # only an absent dtype means fp16: `--dtype ''` is a bad value, not the default (an empty CSV cell is absent)
    dt = dtype if dtype is not None else given.get("dtype", "fp16")
    dt = str(dt).strip().lower()
    if dt not in DTYPES:
        raise ProblemError(f"dtype: must be one of {', '.join(DTYPES)}, got {dt!r}")
    shape: dict[str, Any] = {}
    for name in required:
        if name not in given:
            raise ProblemError(f"{name}: missing; {op} needs {', '.join(required)}")
        shape[name] = _as_int(name, given[name], minimum.get(name, 1))
    for name, default in optional.items():
        value = given.get(name, default)
        if name in choices:
            shape[name] = _as_choice(name, value, tuple(choices[name]))
        else:
            shape[name] = _as_int(name, value, minimum.get(name, 1))
    return shape, dt
