"""The fast tiling look-up: answer from a sweep's `tiler.library/v1` without importing the models, numpy,
pandas, jsonschema or optuna (load once, answer many; `import tiler.lookup` plus one answer takes milliseconds).

    import tiler
    lib = tiler.lookup.load("lib.h200.json")                 # read once
    hit = lib.lookup("M=300,N=4096,K=4096")                   # or a dict of fields, dtype="bf16", ...
    hit["tiling"], hit["exact"], hit["key"], hit["distance"]
    tiler.lookup("lib.h200.json", "matmul", "h200", {"M": 300, "N": 4096, "K": 4096})  # one call (cached load)

    tiler lookup --library lib.h200.json --op matmul --chip h200 --shape M=300,N=4096,K=4096 [--slowdown]

This module holds the ONE implementation of the look-up rule (`Library.match`; the rule is written out in
`tiler.library`, whose `Library` validates the query with the operator's full problem class and then calls it).

How the query is understood without the operator registry (importing it imports every operator model): the
problem class's declarations (FIELDS, OPTIONAL, CHOICES, MATCHED, MINIMUM and the field order) are *read*, not
imported, from `tiler/ops/<op>/problem.py` with `ast` (they are literals); an operator whose class cannot be read
that way (not a built-in, declarations that are not literals) falls back to the registry, which is slower but the
same answer. tests/test_lookup.py checks that what is read equals the classes' attributes for every operator. The
query's fields are then checked with the same helpers as `parse_problem` (same messages: unknown field, missing,
not an integer, not one of the words, dtype), and its key is built as `Problem.key()` builds it. Not run on the
fast path: the problem class's cross-field `validate()` (tensor sizes under 2**48, a kernel larger than the padded
input, ...): `tiler.library.Library.lookup` runs it. The library file is checked for its structure (schema,
op, chip, entries with key/problem/tiling/estimate), not against the JSON Schema (`tiler check`, and
`tiler.library.load`, do that).

What a hit carries besides the entry (its tiling, estimate, launch, targets, ...):
  exact, distance, query (the key asked for): as `tiler.library` documents;
  work_ratio: the query's work over the entry's, the product over the compared fields (the distance's) of
    query/entry (matmul: M*N*K, the FLOP ratio; 1.0 on an exact hit);
  scaled_time_us: the entry's estimate.time_us times work_ratio, an approximation of the reused tiling's time
    on the query shape that assumes time scales with work (it ignores how well the tiling fits the new shape:
    partial tiles, waves), so it is NOT a slowdown; it needs no model.
  With slowdown=True (`--slowdown`), only then, the model is imported and run: reused_time_us (the model's
  estimate of the entry's tiling on the query shape), best_time_us (the model's optimum for the query shape,
  an exhaustive search for the entry's target) and slowdown = reused / best (>= 1; 1.0 on an exact hit without
  running anything). A tiling the query shape does not admit gets slowdown null and reuse_error naming the rule.
"""

from __future__ import annotations

import ast
import bisect
import importlib
import json
import math
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LibraryError, ProblemError, TilerError
from .problem import DTYPES, check_fields, parse_shape_text

LIBRARY_SCHEMA = "tiler.library/v1"  # = tiler.export.LIBRARY_SCHEMA (not imported: export imports the models)
_SLACK = 1e-9  # the pruning compares log differences; the rank itself uses the documented formula


@dataclass(frozen=True)
class Spec:
    """What the look-up needs of an operator's problem class (tiler.problem.Problem): its field declarations."""

    op: str
    order: tuple[str, ...]  # the shape fields in the class's order (Problem.shape(), key())
    required: tuple[str, ...]  # FIELDS
    optional: dict  # OPTIONAL: field -> default
    choices: dict  # CHOICES: field -> allowed words
    matched: tuple[str, ...]  # MATCHED
    minimum: dict  # MINIMUM

    @classmethod
    def of_class(cls, pc) -> Spec:
        """The spec of a loaded problem class (what the registry has)."""
        from dataclasses import fields

        order = tuple(f.name for f in fields(pc) if f.name != "dtype")
        return cls(
            pc.OP,
            order,
            tuple(pc.FIELDS),
            dict(pc.OPTIONAL),
            dict(pc.CHOICES),
            tuple(pc.MATCHED),
            dict(pc.MINIMUM),
        )


_DECLARED = ("OP", "FIELDS", "OPTIONAL", "CHOICES", "MATCHED", "MINIMUM")


def read_spec(op: str, path: str | os.PathLike | None = None) -> Spec | None:
    """The spec of `op` read with `ast` from its problem module (default tiler/ops/<op>/problem.py), or None
    when it cannot be read that way (no such file, no class declaring OP = op on Problem, a non-literal)."""
    p = Path(path) if path else Path(__file__).parent / "ops" / op / "problem.py"
    try:
        tree = ast.parse(p.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if not isinstance(node, ast.ClassDef) or [ast.unparse(b) for b in node.bases] != ["Problem"]:
            continue
        declared: dict[str, Any] = {}
        order: list[str] = []
        try:
            for st in node.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                    continue
                if ast.unparse(st.annotation).startswith("ClassVar"):
                    if st.target.id in _DECLARED:
                        declared[st.target.id] = ast.literal_eval(st.value)
                elif st.target.id != "dtype":
                    order.append(st.target.id)
        except ValueError:  # a declaration that is not a literal
            return None
        if declared.get("OP") != op:
            continue
        return Spec(
            op,
            tuple(order),
            tuple(declared.get("FIELDS", ())),
            dict(declared.get("OPTIONAL", {})),
            dict(declared.get("CHOICES", {})),
            tuple(declared.get("MATCHED", ())),
            dict(declared.get("MINIMUM", {})),
        )
    return None


_SPECS: dict[str, Spec] = {}


def spec_for(op: str) -> Spec:
    """The op's spec: read from its problem module, else (an operator that is not built in) from the registry."""
    if op not in _SPECS:
        spec = read_spec(op) if op.isidentifier() else None
        if spec is None:
            from .registry import problem_class  # the registry: loads every operator model

            spec = Spec.of_class(problem_class(op))
        _SPECS[op] = spec
    return _SPECS[op]


def _copy(entry: dict) -> dict:
    return json.loads(json.dumps(entry))


class Library:
    """The entries of one chip and op; `lookup()` answers exactly or with the nearest entry (see the module)."""

    def __init__(
        self,
        op: str,
        chip: dict,
        entries: list[dict],
        path: str = "",
        tool: dict | None = None,
        spec: Spec | None = None,
    ):
        self.op, self.chip, self.entries, self.path, self.tool = op, chip, entries, path, tool or {}
        self.spec = spec or spec_for(op)
        self._by_key = {e["key"]: e for e in entries}
        # ignored in a query dict: sweep-row extras and the keys of an exported problem besides shape and dtype
        self._extras = {"name", "count"} | {k for e in entries for k in e["problem"]} - {"shape", "dtype"}
        self._groups: dict | None = None
        self._index: dict = {}

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def keys(self) -> list[str]:
        return [e["key"] for e in self.entries]

    # --- the query ---------------------------------------------------------------------------------------------

    def parse(self, query, dtype: str | None = None) -> tuple[dict, str, str]:
        """(shape fields, dtype, key) of a query: text `K=V,...`, a dict of fields (sweep-row extras `name` and
        `count` ignored), an exported problem dict `{"shape": ..., "dtype": ...}` or a Problem. Field checks and
        messages as `parse_problem` (without the class's cross-field validate())."""
        s = self.spec
        if hasattr(query, "shape") and callable(query.shape) and hasattr(query, "dtype"):  # a Problem
            if getattr(query, "OP", s.op) != s.op:
                raise ProblemError(f"op: this library holds {s.op} tilings, got a {query.OP} problem")
            query = {**query.shape(), "dtype": query.dtype}
        if isinstance(query, str):
            query = parse_shape_text(query)
        if not isinstance(query, dict):
            raise ProblemError(
                f"lookup: expected a Problem, a dict of fields or 'K=V,...' text, got {type(query).__name__}"
            )
        if isinstance(query.get("shape"), dict):  # a problem dict as exported
            query = {**query["shape"], "dtype": query.get("dtype")}
        given = {k: v for k, v in query.items() if v is not None and v != ""}
        known = {*s.order, "dtype", *self._extras}
        shape, dt = check_fields(s.op, given, dtype, s.required, s.optional, s.choices, s.minimum, known)
        shape = {k: shape[k] for k in s.order if k in shape}
        parts = [f"{k}={v}" for k, v in shape.items() if not (k in s.choices and v == s.optional.get(k))]
        return shape, dt, f"{s.op}:{','.join(parts)}:{dt}"

    # --- the rule ------------------------------------------------------------------------------------------------

    def get(self, key: str) -> dict | None:
        """The entry with exactly this problem key (a copy, `exact: True`), or None."""
        e = self._by_key.get(key)
        if e is None:
            return None
        return {
            **_copy(e),
            "exact": True,
            "distance": 0.0,
            "query": key,
            "work_ratio": 1.0,
            "scaled_time_us": e.get("estimate", {}).get("time_us"),
        }

    def _value(self, e: dict, k: str):
        return e["problem"]["shape"].get(k, self.spec.optional.get(k))

    def _grouped(self) -> dict:
        """dtype -> value of each matched choice field -> entries (built once)."""
        if self._groups is None:
            words = [k for k in self.spec.matched if k in self.spec.choices]
            self._groups = {}
            for e in self.entries:
                by_words = self._groups.setdefault(e["problem"]["dtype"], {})
                by_words.setdefault(tuple(self._value(e, k) for k in words), []).append(e)
        return self._groups

    def _pool(self, dtype: str, wkey: tuple, groups: list, matched: tuple) -> tuple[list, dict]:
        """The entries of the dtype and matched words, and them by their values of the other matched fields."""
        got = self._index.get(("pool", dtype, wkey, matched))
        if got is None:
            pool = [e for _, es in groups for e in es]
            by: dict = {}
            for e in pool:
                by.setdefault(tuple(self._value(e, k) for k in matched), []).append(e)
            got = self._index[("pool", dtype, wkey, matched)] = (pool, by)
        return got

    def _sorted(self, pool: list[dict], names: tuple[str, ...], cache_key) -> tuple[list, list]:
        """The pool sorted by log2 of the first compared field (for pruning), with every field's log2."""
        if cache_key not in self._index:
            rows = sorted(
                ((tuple(math.log2(max(int(self._value(e, k)), 1)) for k in names), e) for e in pool),
                key=lambda r: r[0][:1],
            )
            self._index[cache_key] = ([r[0][0] if names else 0.0 for r in rows], rows)
        return self._index[cache_key]

    def match(self, want: dict, dtype: str, key: str) -> dict:
        """The answer for a parsed query (shape fields, dtype, key): the rule of tiler.library's docstring."""
        hit = self.get(key)
        if hit is not None:
            return hit
        s = self.spec
        by_dtype = self._grouped().get(dtype)
        if not by_dtype:
            have = sorted({e["problem"]["dtype"] for e in self.entries})
            raise LookupError(
                f"dtype: no {dtype} entry in this library"
                + (f" (it has {', '.join(have)})" if have else " (it is empty)")
            )
        words = [k for k in s.matched if k in s.choices]
        groups = list(by_dtype.items())
        for i, k in enumerate(
            words
        ):  # a matched word must agree exactly (a log distance between words is void)
            agree = [(w, es) for w, es in groups if w[i] == want[k]]
            if not agree:
                have = ", ".join(sorted({str(w[i]) for w, _ in groups}))
                raise LookupError(f"{k}: no {dtype} entry with {k}={want[k]} in this library (it has {have})")
            groups = agree
        wkey = tuple(want[k] for k in words)
        matched = tuple(k for k in s.matched if k in want and k not in s.choices)
        sizes = tuple(
            k
            for k, v in want.items()
            if k not in s.matched and isinstance(v, int) and not isinstance(v, bool)
        )
        mkey = tuple(want[k] for k in matched)
        pool, by_matched = self._pool(dtype, wkey, groups, matched)
        if mkey in by_matched:
            same, names, cache = by_matched[mkey], sizes, (dtype, wkey, mkey, sizes)
        else:  # no entry with the query's matched fields: all compete, the matched fields join the distance
            same, names, cache = pool, sizes + matched, (dtype, wkey, None, sizes + matched)
        firsts, rows = self._sorted(same, names, cache)
        q = [math.log2(max(int(want[k]), 1)) for k in names]
        q0 = q[0] if names else 0.0

        def rank(e: dict):  # the documented formula, on the survivors of the pruning only
            shape = e["problem"]["shape"]
            dist = sum(abs(math.log2(max(want[k], 1) / max(int(self._value(e, k)), 1))) for k in names)
            size = math.prod(max(int(shape.get(k, s.optional.get(k, 1))), 1) for k in names)
            return (dist, -size, e["key"])

        # scan outwards from the query's first coordinate; |difference in it| bounds the whole L1 distance
        best, best_rank = None, None
        i0 = bisect.bisect_left(firsts, q0)
        lo, hi = i0 - 1, i0
        while lo >= 0 or hi < len(rows):
            dlo = q0 - firsts[lo] if lo >= 0 else math.inf
            dhi = firsts[hi] - q0 if hi < len(rows) else math.inf
            i, d0 = (lo, dlo) if dlo <= dhi else (hi, dhi)
            if best_rank is not None and d0 > best_rank[0] + _SLACK:
                break
            if i == lo:
                lo -= 1
            else:
                hi += 1
            coords, e = rows[i]
            if (
                best_rank is not None
                and sum(abs(a - b) for a, b in zip(q, coords, strict=True)) > best_rank[0] + _SLACK
            ):
                continue
            r = rank(e)
            if best_rank is None or r < best_rank:
                best, best_rank = e, r
        assert best is not None
        out = _copy(best)
        ratio = math.prod(max(int(want[k]), 1) / max(int(self._value(best, k)), 1) for k in names)
        t = best.get("estimate", {}).get("time_us")
        out.update(
            exact=False,
            distance=best_rank[0],
            query=key,
            work_ratio=ratio,
            scaled_time_us=None if t is None else t * ratio,
        )
        return out

    def lookup(self, query, dtype: str | None = None, slowdown: bool = False, hardware_dir=None) -> dict:
        """The entry for `query`: exact (`exact: True`), else the nearest by the rule (`exact: False`).

        Raises ProblemError for a malformed query, LookupError when no entry has the query's dtype (or its value
        of a matched choice field). slowdown=True runs the model (see the module docstring)."""
        out = self.match(*self.parse(query, dtype))
        if slowdown:
            self._slowdown(out, hardware_dir)
        return out

    def _slowdown(self, out: dict, hardware_dir=None) -> None:
        """Add reused_time_us, best_time_us and slowdown (the model's; imports it)."""
        if out["exact"]:
            t = out.get("estimate", {}).get("time_us")
            out.update(reused_time_us=t, best_time_us=t, slowdown=1.0)
            return
        if "model" not in _SLOWDOWN:
            importlib.import_module(
                "tiler.api"
            )  # the lazy path: installs the model's slowdown (install_slowdown)
        _SLOWDOWN["model"](self, out, hardware_dir)


# The model's slowdown of reusing a nearest entry (tiler.api.lookup_slowdown): it runs the search and the model, a
# layer above this module, which installs it here when imported; only slowdown=True loads it.
_SLOWDOWN: dict[str, Any] = {}


def install_slowdown(fn) -> None:
    """Called by tiler.api: fn(library, hit, hardware_dir) adds reused_time_us, best_time_us and slowdown."""
    _SLOWDOWN["model"] = fn


def check_document(doc, path: str = "") -> None:
    """The structure the look-up reads (not the JSON Schema): raise LibraryError naming the first problem (the
    entry by index and key, and the field): every entry an object with a text key, a problem whose shape holds
    integers or words and whose dtype is one of tiler's, a tiling of integers and words, an estimate whose time_us
    (when given) is a finite number, and targets / runnable (when given) objects."""
    where = f"library: {path or 'document'}"
    if not isinstance(doc, dict):
        raise LibraryError(f"{where} must hold a JSON object")
    if doc.get("schema") != LIBRARY_SCHEMA:
        raise LibraryError(f"{where}: schema must be {LIBRARY_SCHEMA}, got {_shown(doc.get('schema'))}")
    if not isinstance(doc.get("op"), str) or not isinstance(doc.get("chip"), dict):
        raise LibraryError(f"{where}: needs an op (text) and a chip (object)")
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise LibraryError(f"{where}: entries must be a list")
    for i, e in enumerate(entries):
        why = _entry_problem(e)
        if why:
            key = f" ({e['key']})" if isinstance(e, dict) and isinstance(e.get("key"), str) else ""
            raise LibraryError(f"{where}: entries/{i}{key}: {why}")


def _shown(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:36] + "..."


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _entry_problem(e) -> str:
    """Why one library entry cannot be looked up ("" when it can)."""
    if not isinstance(e, dict):
        return f"must be an object with key, problem, tiling and estimate, got {_shown(e)}"
    missing = [k for k in ("key", "problem", "tiling", "estimate") if k not in e]
    if missing:
        return f"needs key, problem (shape, dtype), tiling and estimate; it has no {', '.join(missing)}"
    if not isinstance(e["key"], str):
        return f"key must be text, got {_shown(e['key'])}"
    prob = e["problem"]
    if not isinstance(prob, dict) or not isinstance(prob.get("shape"), dict):
        return f"problem must be an object with a shape object, got {_shown(prob)}"
    for k, v in prob["shape"].items():
        if not (_is_int(v) or isinstance(v, str)):
            return f"problem/shape/{k} must be an integer or a word, got {_shown(v)}"
    if prob.get("dtype") not in DTYPES:
        return f"problem/dtype must be one of {', '.join(DTYPES)}, got {_shown(prob.get('dtype'))}"
    if not isinstance(e["tiling"], dict):
        return f"tiling must be an object of knob -> value, got {_shown(e['tiling'])}"
    for k, v in e["tiling"].items():
        if not (_is_int(v) or isinstance(v, str)):
            return f"tiling/{k} must be an integer or a word, got {_shown(v)}"
    est = e["estimate"]
    if not isinstance(est, dict):
        return f"estimate must be an object, got {_shown(est)}"
    t = est.get("time_us")
    if t is not None and not (
        isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) and t > 0
    ):
        return f"estimate/time_us must be a positive number, got {_shown(t)}"
    for k in ("targets", "runnable", "launch", "search"):
        if k in e and not isinstance(e[k], dict):
            return f"{k} must be an object, got {_shown(e[k])}"
    return ""


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _where_token(text: str, why: str) -> str:
    """` at line L, column C` of the first bare NaN/Infinity/-Infinity that `why` names (the JSON parser's hook
    for them does not say where), or "" when it is not found."""
    import re

    name = why.split(" ", 1)[0]
    if name not in ("NaN", "Infinity", "-Infinity"):
        return ""
    m = re.search(r"(?<![\w\"-])" + re.escape(name) + r"(?![\w\"])", text)
    if m is None:
        return ""
    line = text.count("\n", 0, m.start()) + 1
    return f" at line {line}, column {m.start() - (text.rfind(chr(10), 0, m.start()) + 1) + 1}"


def read_document(path: str | os.PathLike):
    """The parsed JSON of a library file: at most tiler.io.FILE_BYTES_MAX bytes of UTF-8 JSON (no NaN or Infinity,
    no nesting deeper than Python's parser takes, no integer of more than 4300 digits); any failure is one
    LibraryError line naming the file."""
    from .io import read_limited

    p = Path(path)
    try:
        data = read_limited(p)
    except OSError as exc:
        raise LibraryError(f"library: cannot read {p}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a device, a pipe, a folder, too large; a NUL in the name
        raise LibraryError(f"library: cannot read {p}: {exc}") from None
    text = ""
    try:
        text = data.decode("utf-8")
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise LibraryError(f"library: {p} is not valid JSON (not UTF-8: byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise LibraryError(
            f"library: {p} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise LibraryError(f"library: {p} is not valid JSON (nested too deep)") from None
    except ValueError as exc:  # NaN / Infinity; an integer of more than 4300 digits
        why = str(exc).splitlines()[0][:80]
        raise LibraryError(f"library: {p} is not valid JSON ({why}{_where_token(text, why)})") from None


def from_document(doc: dict, path: str = "") -> Library:
    """A fast Library from a parsed `tiler.library/v1` object (structure checked, see check_document)."""
    check_document(doc, path)
    return Library(doc["op"], doc["chip"], doc["entries"], path, doc.get("tool", {}))


def load(path: str | os.PathLike) -> Library:
    """Read a library file written by `tiler sweep --library` (once; keep the object to answer many)."""
    return from_document(read_document(path), str(Path(path)))


_LOADED: dict[str, tuple[tuple, Library]] = {}


def _cached(path: str | os.PathLike) -> Library:
    """load(), once per file (reloaded when the file's size or modification time changes)."""
    p = os.path.realpath(path)
    try:
        st = os.stat(p)
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    hit = _LOADED.get(p)
    if stamp is None or hit is None or hit[0] != stamp:
        hit = _LOADED[p] = (stamp, load(path))
    return hit[1]


def check_library(lib: Library, op: str | None = None, chip: str | None = None) -> None:
    """Raise TilerError when the library is not of this op or chip (a chip id, case and blanks ignored)."""
    if op is not None and op != lib.op:
        raise TilerError(f"op: {lib.path or 'the library'} holds {lib.op} tilings, not {op}")
    have = str(lib.chip.get("id", ""))
    if chip is not None and str(chip).strip().lower() != have.strip().lower():
        raise TilerError(f"chip: {lib.path or 'the library'} holds tilings of {have}, not {chip}")


def lookup(
    library,
    op: str | None = None,
    chip: str | None = None,
    shape=None,
    dtype: str | None = None,
    slowdown: bool = False,
    hardware_dir=None,
) -> dict:
    """One look-up: `library` a path (loaded once per file and kept) or a Library; `op` and `chip`, when given,
    must be the library's; `shape` as Library.lookup takes it. Errors: TilerError (file, op, chip),
    ProblemError (the query), LookupError (no entry with the query's dtype or matched words)."""
    lib = library if isinstance(library, Library) else _cached(library)
    check_library(lib, op, chip)
    if shape is None:
        raise ProblemError("shape: missing (K=V,... text or a dict of fields)")
    return lib.lookup(shape, dtype, slowdown=slowdown, hardware_dir=hardware_dir)


def answer(hit: dict) -> dict:
    """What `tiler lookup` prints: the matched key, the flags and figures, the tiling and its estimate, and the
    entry's code-generator views (`targets`, each of the tiling in `runnable.<target>` when the library has it)."""
    keys = (
        "query",
        "key",
        "exact",
        "distance",
        "work_ratio",
        "scaled_time_us",
        "reused_time_us",
        "best_time_us",
        "slowdown",
        "reuse_error",
        "tiling",
        "estimate",
        "launch",
        "custom_kernel",
        "targets",
        "runnable",
        "no_view",
    )
    return {k: hit[k] for k in keys if k in hit}


__all__ = [
    "Library",
    "Spec",
    "answer",
    "check_library",
    "from_document",
    "load",
    "lookup",
    "read_spec",
    "spec_for",
]


class _CallableModule(types.ModuleType):
    """`tiler.lookup(library, op, chip, shape)` calls `lookup()` (without importing tiler.api)."""

    def __call__(self, *args, **kwargs):
        return lookup(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
