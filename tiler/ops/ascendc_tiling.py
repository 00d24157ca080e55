"""What the AscendC targets of the vector and fused operators emit: a host tiling-data class and the code that
fills it.

An AscendC kernel takes its tiling from the host as a tiling-data class declared with CANN's macros
(`register/tilingdata_base.h`): `BEGIN_TILING_DATA_DEF(Name)`, one `TILING_DATA_FIELD_DEF(type, field);` per
field, `END_TILING_DATA_DEF;`, and `REGISTER_TILING_DATA_CLASS(OpType, Name)` binding the class to the operator.
The host tiling function fills one (`tiling.set_<field>(v);`), sets the block dim and the workspace and saves it
into the context's raw tiling data; the kernel reads it back with `GET_TILING_DATA`.

`TilingData` is one such class. Its fields are fixed per target (the problem's fields, then the view's), not per
view, because a dispatch unit fills one class from many library entries. It writes three texts from one list of
set statements (`set_lines`): the class (`class_text`, what a custom-op project keeps in
`op_host/<op>_tiling.h`), the `--emit` fragment (the class and a host tiling function that fills it) and a
dispatch unit's entry (`static void Fill(...)` and `kBlockDim`, for a unit that includes `includes`).
docs/targets/{flash_attention,depthwise_conv,softmax}.md describe the three classes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

from ..errors import TilerError

C_RANGE = {"uint32_t": 2**32 - 1, "uint64_t": 2**64 - 1}
MACROS = "register/tilingdata_base.h"  # where CANN declares the macros (the include path its docs give)
CONTEXT = "register/op_def_registry.h"  # what an op_host source includes for gert::TilingContext


def camel(name: str) -> str:
    """AscendC's field spelling of a view or problem name: snake_case to camelCase (`s1_base` -> `s1Base`,
    `kv_heads` -> `kvHeads`); names without an underscore (`B`, `tasks`) are kept."""
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


@dataclass(frozen=True)
class TilingData:
    """One host tiling-data class of one target.

    name, op_type: the class and the operator type REGISTER_TILING_DATA_CLASS binds it to.
    target: the target's name (the header comment gives the predicted time of that target's view).
    header: the op_host header a custom-op project keeps the class in (a dispatch unit includes it).
    keys: the problem and view names the fields hold, in field order (each field is `camel(key)`).
    wide: the keys held as uint64_t (byte counts that may pass 4 GiB); the others are uint32_t.
    codes: key -> {word: code} (or a function returning it) for the view's words (a scheme, a mask).
    block_dim: the view key of the cores to launch (`context->SetBlockDim`).
    workspace: the view key of the kernel's GM workspace bytes, or "" when it has none.
    """

    name: str
    op_type: str
    target: str
    header: str
    keys: tuple[str, ...]
    wide: tuple[str, ...] = ()
    codes: dict[str, dict[str, int] | Callable[[], dict[str, int]]] = field(default_factory=dict)
    block_dim: str = "block_dim"
    workspace: str = ""

    @property
    def fields(self) -> tuple[tuple[str, str], ...]:
        """(C type, field name) per field, in order."""
        return tuple(("uint64_t" if k in self.wide else "uint32_t", camel(k)) for k in self.keys)

    @property
    def includes(self) -> tuple[str, ...]:
        """The headers a dispatch unit's entries need: CANN's macros, then the project's class header."""
        return (MACROS, self.header)

    def values(self, view: dict, doc: dict) -> dict[str, int]:
        """field -> value: the problem's shape and the view's fields, words as their codes; a view field the
        view leaves out (one scheme's buffers under another scheme) is 0. A value outside its C type is a
        TilerError naming the field."""
        source = {**doc["problem"]["shape"], **view}
        out = {}
        for (ctype, name), key in zip(self.fields, self.keys, strict=True):
            v = source.get(key, 0)
            if key in self.codes and key in source:
                table = self.codes[key]
                v = (table() if callable(table) else table)[v]
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= C_RANGE[ctype]:
                raise TilerError(f"emit: {self.name}.{name} = {v!r} is not a {ctype}")
            out[name] = v
        return out

    def class_text(self) -> str:
        """The class in CANN's macros, registered to the operator: what `op_host/<op>_tiling.h` holds."""
        lines = [f'#include "{MACROS}"', "", "namespace optiling {", f"BEGIN_TILING_DATA_DEF({self.name})"]
        lines += [f"TILING_DATA_FIELD_DEF({ctype}, {name});" for ctype, name in self.fields]
        lines += [
            "END_TILING_DATA_DEF;",
            f"REGISTER_TILING_DATA_CLASS({self.op_type}, {self.name})",
            "}  // namespace optiling",
        ]
        return "\n".join(lines) + "\n"

    def set_lines(self, view: dict, doc: dict) -> list[str]:
        """One `tiling.set_<field>(<value>);` per field, in the class's order: the one statement list the
        fragment's tiling function and a dispatch unit's Fill share."""
        return [f"tiling.set_{name}({v});" for name, v in self.values(view, doc).items()]

    def emit(self, view: dict, doc: dict) -> str:
        """The `--emit` fragment: a comment naming the problem and the predicted time, the class, and a host tiling
        function that fills it, sets the block dim (and the workspace where the view has one) and saves it."""
        from .matmul.views import _header

        body = self.set_lines(view, doc) + [
            f"context->SetBlockDim({int(view[self.block_dim])});",
            "tiling.SaveToBuffer(context->GetRawTilingData()->GetData(), "
            "context->GetRawTilingData()->GetCapacity());",
            "context->GetRawTilingData()->SetDataSize(tiling.GetDataSize());",
        ]
        if self.workspace:
            body += [
                "size_t *workspace = context->GetWorkspaceSizes(1);",
                f"workspace[0] = {int(view[self.workspace])};  // the kernel's own; add "
                "GetLibApiWorkSpaceSize() if it calls library APIs that need one",
            ]
        lines = [
            f"// {_header(doc, self.target)}",
            f"// op_host: the tiling-data class (a custom-op project keeps it in op_host/{self.header}) and the",
            "// host tiling function that fills it (this->AICore().SetTiling(optiling::TilingFunc))",
            f'#include "{CONTEXT}"',
            self.class_text(),
            "namespace optiling {",
            "static ge::graphStatus TilingFunc(gert::TilingContext *context)",
            "{",
            f"    {self.name} tiling;",
            *(f"    {s}" for s in body),
            "    return ge::GRAPH_SUCCESS;",
            "}",
            "}  // namespace optiling",
        ]
        return "\n".join(lines) + "\n"

    def entry(self, view: dict, doc: dict) -> str:
        """A dispatch unit's entry (the body of the unit's per-entry struct, tiler/dispatch.py): a `Fill` that sets
        every field (the fragment's statements) and the block dim (and workspace bytes) as constants. The class
        is not repeated per entry, and the unit writer emits no class: the unit includes `includes`, whose second
        header is the project's `op_host/<op>_tiling.h`, holding `class_text()` once."""
        lines = [f"static void Fill(optiling::{self.name} &tiling)", "{"]
        lines += [f"    {s}" for s in self.set_lines(view, doc)]
        lines += ["}", f"static constexpr uint32_t kBlockDim = {int(view[self.block_dim])};"]
        if self.workspace:
            lines.append(f"static constexpr uint64_t kWorkspaceBytes = {int(view[self.workspace])};")
        return "\n".join(lines) + "\n"


def space_codes(op: str, knob: str) -> Callable[[], dict[str, int]]:
    """{label: code} of a knob of the shipped Ascend space (the words a view writes), read when first needed
    (importing an operator reads no space file)."""
    return partial(_space_codes, op, knob)


@cache
def _space_codes(op: str, knob: str) -> dict[str, int]:
    from ..space import load_space

    k = load_space(op, "ascend", builtin=True).knobs[knob]
    return dict(zip(k.labels, k.codes, strict=True))


__all__ = ["TilingData", "camel", "space_codes"]
