"""Read a `tiler.library/v1` file and look tilings up by problem, exactly or by the nearest shape.

    lib = tiler.library.load("results/llama3_8b.ascend910b3.json")
    entry = lib.lookup({"M": 300, "N": 4096, "K": 4096, "dtype": "bf16"})
    entry["tiling"], entry["estimate"]["time_us"], entry["exact"]   # exact is False: nearest shape

Look-up rule (also in docs/sweep.md):

1. The problem is parsed with the same checker as `--shape` (a bad field raises ProblemError naming it) and its
   key (`Problem.key()`) is looked up: a hit is returned with `exact: True`.
2. Otherwise the nearest entry is returned with `exact: False`:
   a. only entries of the same dtype qualify (a tiling's block sizes depend on the element size); none ->
      LookupError naming the dtypes the library has;
   b. a matched *choice* field (a word, the problem class's CHOICES; matmul: `layout`, `b_format`) must agree:
      only entries with the query's value qualify (an entry written before the field existed has its default);
      none -> LookupError naming the field. Among them, entries with the same value of every other *matched*
      field (the problem class's MATCHED; matmul: `batch`) are preferred; if none
      has it, all entries of the dtype stay candidates and the matched fields join the distance below;
   c. distance = the sum over the size fields (matmul: M, N, K) of |log2(query / entry)|: being 2x off in one
      dimension costs the same as in any other, and 2x larger costs the same as 2x smaller;
   d. ties go to the larger entry shape (larger product of the size fields: its tiling's blocks were sized
      for at least this much work), then to the entry key in text order, so the answer is deterministic.
   The returned entry carries `exact: False`, `distance` (that sum) and `query` (the key asked for).

The returned entry is a copy: changing it does not change the library.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import ProblemError, TilerError
from .export import LIBRARY_SCHEMA, validate
from .operator import problem_class
from .problem import Problem, parse_problem, parse_shape_text


def _size_fields(op: str, shape: dict) -> list[str]:
    """Every integer field of the shape but the matched ones: what the distance compares."""
    matched = problem_class(op).MATCHED
    return [
        k for k, v in shape.items() if k not in matched and isinstance(v, int) and not isinstance(v, bool)
    ]


def _log_distance(a: dict, b: dict, names) -> float:
    return sum(abs(math.log2(max(a[k], 1) / max(b[k], 1))) for k in names)


@dataclass
class Library:
    """Entries of one chip and op, keyed by problem key; `lookup()` finds the exact or the nearest one."""

    op: str
    chip: dict
    entries: list[dict]
    path: str = ""
    tool: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._by_key = {e["key"]: e for e in self.entries}

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def keys(self) -> list[str]:
        return [e["key"] for e in self.entries]

    def problem(self, query: Problem | dict | str, dtype: str | None = None) -> Problem:
        """The query as a validated Problem: a Problem, a dict of fields, or text `M=..,N=..,K=..`."""
        if isinstance(query, Problem):
            if query.OP != self.op:
                raise ProblemError(f"op: this library holds {self.op} tilings, got a {query.OP} problem")
            return query
        if isinstance(query, str):
            query = parse_shape_text(query)
        if not isinstance(query, dict):
            raise ProblemError(
                f"lookup: expected a Problem, a dict of fields or 'K=V,...' text, got {type(query).__name__}"
            )
        fields_ = dict(query)
        if isinstance(
            fields_.get("shape"), dict
        ):  # a problem dict as exported: {"shape": {...}, "dtype": ...}
            fields_ = {**fields_["shape"], "dtype": fields_.get("dtype")}
        # sweep-row extras (name, count) and the keys of an exported problem that are not problem fields
        names = {f.name for f in fields(problem_class(self.op))}
        extras = {"name", "count", *self._frame_keys()}
        fields_ = {k: v for k, v in fields_.items() if k in names or k not in extras}
        return parse_problem(self.op, fields_, dtype=dtype, strict=True)

    def _frame_keys(self) -> set[str]:
        """The keys of an exported problem (Problem.to_dict) besides its shape and dtype."""
        cls = problem_class(self.op)
        return set(parse_problem(self.op, cls.EXAMPLE).to_dict()) - {"shape", "dtype"}

    def get(self, key: str) -> dict | None:
        """The entry with exactly this problem key, or None."""
        e = self._by_key.get(key)
        return (
            None if e is None else {**json.loads(json.dumps(e)), "exact": True, "distance": 0.0, "query": key}
        )

    def lookup(self, query: Problem | dict | str, dtype: str | None = None) -> dict:
        """The entry for `query`: exact (`exact: True`), else the nearest by the module's rule (`exact: False`).

        Raises ProblemError for a malformed query and LookupError when no entry has the query's dtype (or its
        value of a matched choice field: a tiling of another layout is never handed out).
        """
        p = self.problem(query, dtype)
        key = p.key()
        hit = self.get(key)
        if hit is not None:
            return hit
        want = p.shape()
        same_dtype = [e for e in self.entries if e["problem"]["dtype"] == p.dtype]  # type: ignore[attr-defined]
        if not same_dtype:
            have = sorted({e["problem"]["dtype"] for e in self.entries})
            raise LookupError(
                f"dtype: no {p.dtype} entry in this library"  # type: ignore[attr-defined]
                + (f" (it has {', '.join(have)})" if have else " (it is empty)")
            )
        cls = problem_class(self.op)
        matched = [k for k in cls.MATCHED if k in want and k not in cls.CHOICES]
        # a matched word must agree exactly (a log distance between words means nothing)
        words = [k for k in cls.MATCHED if k in want and k in cls.CHOICES]
        for k in words:
            agree = [e for e in same_dtype if e["problem"]["shape"].get(k, cls.OPTIONAL.get(k)) == want[k]]
            if not agree:
                have = sorted({str(e["problem"]["shape"].get(k, cls.OPTIONAL.get(k))) for e in same_dtype})
                raise LookupError(
                    f"{k}: no {p.dtype} entry with {k}={want[k]} in this library "  # type: ignore[attr-defined]
                    f"(it has {', '.join(have)})"
                )
            same_dtype = agree
        same = [e for e in same_dtype if all(e["problem"]["shape"].get(k) == want[k] for k in matched)]
        pool, extra = (same, []) if same else (same_dtype, matched)
        names = _size_fields(self.op, want) + extra

        def rank(e: dict):
            shape = e["problem"]["shape"]
            size = math.prod(max(int(shape.get(k, 1)), 1) for k in names)
            return (_log_distance(want, shape, names), -size, e["key"])

        best = min(pool, key=rank)
        out = json.loads(json.dumps(best))
        out.update(exact=False, distance=rank(best)[0], query=key)
        return out


def from_document(doc: dict, path: str = "") -> Library:
    """A Library from a parsed `tiler.library/v1` object (validated against the shipped schema)."""
    if doc.get("schema") != LIBRARY_SCHEMA:
        raise TilerError(
            f"library: {path or 'document'}: schema must be {LIBRARY_SCHEMA}, got {doc.get('schema')!r}"
        )
    validate(doc)
    return Library(doc["op"], doc["chip"], doc["entries"], path, doc.get("tool", {}))


def load(path: str | os.PathLike) -> Library:
    """Read and validate a library file written by `tiler sweep --library`."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as exc:
        raise TilerError(f"library: cannot read {p}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise TilerError(f"library: {p} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise TilerError(f"library: {p} must hold a JSON object")
    return from_document(doc, str(p))


__all__ = ["Library", "from_document", "load"]


def _demo(argv: list[str]) -> Any:  # pragma: no cover - `python -m tiler.library LIB K=V,...`
    lib = load(argv[0])
    return lib.lookup(argv[1])


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(json.dumps(_demo(sys.argv[1:]), indent=2))
