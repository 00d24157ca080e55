"""Dispatch units: a sweep's library turned into code a kernel build includes (`tiler emit LIBRARY --target T`).

A library (`tiler.library/v1`) maps problems to tilings; a kernel needs, at run time, the tiling of the shape it is
called with. The unit holds the library's table of problems and one *variant* per distinct piece of target code, a
selection function that answers exactly as `tiler lookup` does (the rule of `tiler.library`, written out once more
in the unit's language: the exact entry, else among entries of the query's dtype and matched words, preferring the
query's other matched fields, the least sum of |log2(query / entry)| over the size fields, ties to the larger entry
then to the smaller key), and the entries' code from the target (`Target.entry`):

- C++ (`language = "cpp"`: CATLASS, AscendC, ...): one self-contained header. `Query` (the problem fields, words as
  the enums `<field>_<word>`), `Select(q)` -> the entry index or -1, `VariantOf(i)`, `template <int V> struct
  Variant` (the target's code: kernel type aliases, or a `Fill(tiling)` function) and `Dispatch(v, f)`, which calls
  `f(Variant<v>{})` for a run-time variant index.
- Python (`language = "python"`: Triton): one module with `ENTRIES` (data), `select(...)` and `configs(...)` (the
  entry's `triton.Config` list; triton is imported when `configs` runs, so the module imports anywhere) and
  `config_dicts(...)` (the same as data).

The generic layer knows no operator: fields, words and the matching rule come from the operator's problem class
(`tiler.lookup.Spec`), the code from the target. A library entry without a view for the target (a shape the target
cannot run) is left out of the unit and named on stderr by the caller; a library with none is an input error.
"""

from __future__ import annotations

import json
import pprint
import re
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .errors import TilerError
from .lookup import Spec, spec_for
from .problem import DTYPES


@dataclass
class Unit:
    """A dispatch unit: its file name, its text, the entries it holds and the keys it left out (no view)."""

    name: str
    text: str
    entries: int
    variants: int
    skipped: list[str]


def _ident(text: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", text)


def _entries(doc: dict, target: str) -> tuple[list[dict], list[str]]:
    """The library's entries that have a `target` view, sorted by key (the rule's last tie-break is key order),
    and the keys of those that have none (with the reason the library gives)."""
    kept, skipped = [], []
    for e in doc["entries"]:
        if target in e.get("targets", {}):
            kept.append(e)
        else:
            why = e.get("no_view", {}).get(target, "the library has no view of this target for it")
            skipped.append(f"{e['key']}: {why}")
    return sorted(kept, key=lambda e: e["key"]), skipped


def _entry_doc(doc: dict, e: dict, target: str) -> dict:
    """What Target.entry reads of one entry: the library's op and chip, the entry's problem, and the tiling the
    view is of (the target's own, from `runnable`, when the library has it) with its predicted time."""
    chosen = e.get("runnable", {}).get(target)
    tiling = chosen["tiling"] if chosen else e["tiling"]
    time_us = chosen["time_us"] if chosen else e["estimate"]["time_us"]
    return {
        "op": doc["op"],
        "chip": doc["chip"],
        "problem": e["problem"],
        "tiling": tiling,
        "estimate": {"time_us": time_us},
        "targets": e["targets"],
    }


def build_unit(doc: dict, target: str, source: str = "") -> Unit:
    """The dispatch unit of a validated library document for one target (TilerError: no such target for the op
    or family, a target without a dispatch unit, no entry with its view)."""
    from .operator import get_operator

    op, family = doc["op"], doc["chip"]["family"]
    targets = get_operator(op, family).TARGETS
    if target not in targets:
        allowed = ", ".join(t for t, v in targets.items() if v.language) or "none"
        raise TilerError(f"target: must be one of {allowed} for {op} on the {family} family, got {target!r}")
    t = targets[target]
    if not t.language or t.entry is None:
        raise TilerError(f"target: {target} has no dispatch unit (only a view)")
    entries, skipped = _entries(doc, target)
    if not entries:
        what = (
            "is empty"
            if not doc["entries"]
            else f"has no {target} view in any of its {len(doc['entries'])} entries"
        )
        raise TilerError(f"library: {source or 'the library'}: 'entries' {what}; nothing to emit")
    code = [t.entry(e["targets"][target], _entry_doc(doc, e, target)) for e in entries]
    spec = spec_for(op)
    stem = _ident(f"tiler_{op}_{doc['chip']['id']}_{target}")
    head = (
        f"tiler {__version__}: {op} on {doc['chip']['id']} ({doc['chip']['cores']} cores), target {target}: "
        f"{len(entries)} entries of {source or 'a library'}"
    )
    if t.language == "cpp":
        text, variants = _cpp(spec, entries, code, t.includes, stem, head)
        return Unit(stem + ".h", text, len(entries), variants, skipped)
    if t.language == "python":
        return Unit(stem + ".py", _python(spec, entries, code, head), len(entries), len(entries), skipped)
    raise TilerError(f"target: {target} declares an unknown unit language {t.language!r}")


# ------------------------------------------------------------------------------------------------------- fields


def _fields(spec: Spec) -> tuple[list[str], list[str], list[str]]:
    """(integer fields in the class's order, word fields, the size fields of the rule: the integer fields that are
    not matched)."""
    ints = [f for f in spec.order if f not in spec.choices]
    words = [f for f in spec.order if f in spec.choices]
    sizes = [f for f in ints if f not in spec.matched]
    return ints, words, sizes


def _matched(spec: Spec, ints: list[str]) -> list[str]:
    """The matched integer fields in the rule's order (the problem class's MATCHED)."""
    return [f for f in spec.matched if f in ints]


def _value(spec: Spec, e: dict, field: str):
    return e["problem"]["shape"].get(field, spec.optional.get(field))


# ---------------------------------------------------------------------------------------------------------- C++


def _cpp_select(words: list[str], sizes: list[str], matched: list[str]) -> list[str]:
    """The C++ Select(q) of a dispatch unit: tiler lookup's rule (same dtype and words, least log2 distance over
    the size fields, ties to the larger entry, then key order), as lines."""
    agree = " && ".join([f"r.{w} == q.{w}" for w in words] + ["r.dtype == q.dtype"])
    dist = lambda names: " + ".join(f"Log2Distance(q.{f}, r.{f})" for f in names) or "0.0"  # noqa: E731
    size = lambda names: " * ".join(f"AtLeastOne(r.{f})" for f in names) or "1.0"  # noqa: E731
    out = [
        "inline double AtLeastOne(std::int64_t v) { return static_cast<double>(v < 1 ? 1 : v); }",
        "inline double Log2Distance(std::int64_t q, std::int64_t e) {",
        "    return std::fabs(std::log2(AtLeastOne(q) / AtLeastOne(e)));",
        "}",
        "",
        "// The entry tiler lookup answers for q, or -1 when no entry has q's dtype"
        + (f" and {', '.join(words)}" if words else "")
        + ": the least distance over the size fields, ties to the larger entry, then the first in key order.",
        "inline int Select(const Query &q) {",
    ]
    if matched:
        same = " && ".join(f"r.{f} == q.{f}" for f in matched)
        out += [
            f"    // entries with q's {', '.join(matched)} are preferred; without one, those fields join the distance",
            "    bool same_exists = false;",
            "    for (const Row &r : kRows) {",
            f"        if ({agree} && {same}) same_exists = true;",
            "    }",
        ]
    out += [
        "    int best = -1;",
        "    double best_distance = 0.0, best_size = 0.0;",
        "    for (int i = 0; i < kRowCount; ++i) {",
        "        const Row &r = kRows[i];",
        f"        if (!({agree})) continue;",
    ]
    if matched:
        out += [
            f"        if (same_exists && !({same})) continue;",
            f"        const double distance = same_exists ? {dist(sizes)}",
            f"                                            : {dist(sizes + matched)};",
            f"        const double size = same_exists ? {size(sizes)} : {size(sizes + matched)};",
        ]
    else:
        out += [
            f"        const double distance = {dist(sizes)};",
            f"        const double size = {size(sizes)};",
        ]
    out += [
        "        if (best < 0 || distance < best_distance || (distance == best_distance && size > best_size)) {",
        "            best = i;",
        "            best_distance = distance;",
        "            best_size = size;",
        "        }",
        "    }",
        "    return best;",
        "}",
        "",
    ]
    return out


def _cpp(spec: Spec, entries: list[dict], code: list[str], includes, stem: str, head: str) -> tuple[str, int]:
    ints, words, sizes = _fields(spec)
    matched = _matched(spec, ints)
    variants: dict[str, int] = {}
    variant_of = [variants.setdefault(c, len(variants)) for c in code]
    guard = stem.upper() + "_H"
    out = [
        f"// {head}",
        "// Generated by `tiler emit`; the selection rule is tiler lookup's (docs/sweep.md).",
        "",
    ]
    out += [f"#ifndef {guard}", f"#define {guard}", "", "#include <cmath>", "#include <cstdint>"]
    out += [f'#include "{h}"' for h in includes]
    out += ["", f"namespace {stem} {{", ""]
    for w in ["dtype", *words]:
        names = DTYPES if w == "dtype" else spec.choices[w]
        out.append(f"enum : int {{ {', '.join(f'{w}_{n} = {i}' for i, n in enumerate(names))} }};")
    out += ["", "// A problem: the operator's fields (words as the enums above), defaults as tiler's."]
    out.append("struct Query {")
    for f in ints:
        out.append(f"    std::int64_t {f} = {int(spec.optional.get(f, 0))};")
    for w in words:
        out.append(f"    int {w} = {w}_{spec.optional[w]};")
    out += ["    int dtype = dtype_fp16;", "};", ""]
    out.append("struct Row {")
    out += [f"    std::int64_t {f};" for f in ints] + [f"    int {w};" for w in words]
    out += ["    int dtype;", "    int variant;", "    double time_us;", "    const char *key;", "};", ""]
    out.append("// The library's entries, in key order (the rule's last tie-break).")
    out.append("inline constexpr Row kRows[] = {")
    for e, v in zip(entries, variant_of, strict=True):
        vals = [str(int(_value(spec, e, f))) for f in ints]
        vals += [f"{w}_{_value(spec, e, w)}" for w in words]
        vals += [
            f"dtype_{e['problem']['dtype']}",
            str(v),
            repr(float(e["estimate"]["time_us"])),
            json.dumps(e["key"]),
        ]
        out.append(f"    {{{', '.join(vals)}}},")
    out += [
        "};",
        f"inline constexpr int kRowCount = {len(entries)};",
        f"inline constexpr int kVariantCount = {len(variants)};",
        "",
    ]
    out += _cpp_select(words, sizes, matched)
    out += [
        "inline int VariantOf(int row) { return row < 0 || row >= kRowCount ? -1 : kRows[row].variant; }",
        "",
        "template <int V>",
        "struct Variant;",
        "",
    ]
    for c, v in variants.items():
        body = "\n".join(("    " + line) if line else "" for line in c.rstrip("\n").splitlines())
        out += ["template <>", f"struct Variant<{v}> {{", body, "};", ""]
    out += [
        "// Calls f(Variant<v>{}) for the run-time variant index v; false when v is not one.",
        "template <class F>",
        "inline bool Dispatch(int v, F &&f) {",
        "    switch (v) {",
    ]
    out += [f"        case {v}: f(Variant<{v}>{{}}); return true;" for v in range(len(variants))]
    out += [
        "        default: return false;",
        "    }",
        "}",
        "",
        f"}}  // namespace {stem}",
        "",
        f"#endif  // {guard}",
        "",
    ]
    return "\n".join(out), len(variants)


# ------------------------------------------------------------------------------------------------------- Python


def _python(spec: Spec, entries: list[dict], configs: list, head: str) -> str:
    ints, words, sizes = _fields(spec)
    matched = _matched(spec, ints)
    fields = ints + words
    rows = []
    for e, c in zip(entries, configs, strict=True):
        if not isinstance(c, dict) or not isinstance(c.get("kwargs"), dict):
            raise TilerError("internal: a python unit's entry must be a dict of triton.Config arguments")
        shape = {f: _value(spec, e, f) for f in fields}
        rows.append(
            {
                "key": e["key"],
                "shape": shape,
                "dtype": e["problem"]["dtype"],
                "time_us": e["estimate"]["time_us"],
                "configs": [c],
            }
        )
    params = (
        [f for f in spec.required] + [f"{f}={spec.optional[f]!r}" for f in spec.optional] + ['dtype="fp16"']
    )
    call = ", ".join([*spec.required, *(f"{f}={f}" for f in spec.optional), "dtype=dtype"])
    sig = ", ".join(params[: len(spec.required)]) + ", *, " + ", ".join(params[len(spec.required) :])
    return f'''"""{head}.

Generated by `tiler emit`. `configs({sig.replace(", *", "")})` returns the entry's `triton.Config` list for a
problem, chosen by tiler lookup's rule (docs/sweep.md): the exact entry, else the nearest of the same dtype and
words; `select(...)` returns the entry's index (None when no entry has the problem's dtype and words) and
`config_dicts(...)` the configs as data. Triton is imported only by `configs`.
"""

import math

FIELDS = {tuple(fields)!r}
SIZE_FIELDS = {tuple(sizes)!r}  # compared by |log2(query / entry)|
MATCHED = {tuple(matched)!r}  # preferred equal; compared like sizes only when no entry has the query's values
WORDS = {tuple(words)!r}  # must agree
ENTRIES = {pprint.pformat(rows, indent=1, width=110, sort_dicts=False)}


def _at_least_one(v):
    return max(int(v), 1)


def select({sig}):
    """The index in ENTRIES of the entry tiler lookup answers for this problem, or None."""
    q = {{{", ".join(f"{f!r}: {f}" for f in fields)}}}
    pool = [i for i, e in enumerate(ENTRIES) if e["dtype"] == dtype and all(e["shape"][w] == q[w] for w in WORDS)]
    same = [i for i in pool if all(ENTRIES[i]["shape"][f] == q[f] for f in MATCHED)]
    names = SIZE_FIELDS if same else SIZE_FIELDS + MATCHED
    best, best_rank = None, None
    for i in same or pool:
        s = ENTRIES[i]["shape"]
        distance = sum(abs(math.log2(_at_least_one(q[f]) / _at_least_one(s[f]))) for f in names)
        rank = (distance, -math.prod(_at_least_one(s[f]) for f in names), ENTRIES[i]["key"])
        if best_rank is None or rank < best_rank:
            best, best_rank = i, rank
    return best


def config_dicts({sig}):
    """The chosen entry's configs as dicts of triton.Config arguments; [] when no entry qualifies."""
    i = select({call})
    return [] if i is None else [dict(c) for c in ENTRIES[i]["configs"]]


def configs({sig}):
    """The chosen entry's configs as `triton.Config`s, for `@triton.autotune(configs=...)` or a direct launch."""
    import triton

    return [
        triton.Config(c["kwargs"], **{{k: v for k, v in c.items() if k != "kwargs"}})
        for c in config_dicts({call})
    ]
'''


def write_unit(unit: Unit, out: str | Path) -> Path:
    """Write the unit into the folder `out` (created if missing), atomically; the written path."""
    from .io import write_text

    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise TilerError(f"out: {folder}: not a folder (the unit is written into it as {unit.name})")
    return write_text(folder / unit.name, unit.text, "out")


__all__ = ["Unit", "build_unit", "write_unit"]
