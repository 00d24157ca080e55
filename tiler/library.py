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
   The returned entry carries `exact: False`, `distance` (that sum) and `query` (the key asked for), and
   `work_ratio` / `scaled_time_us` (the query's work over the entry's, and the entry's time scaled by it: see
   tiler.lookup, which implements this rule once and answers without importing the models).

The returned entry is a copy: changing it does not change the library.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import lookup as _fast
from .errors import LibraryError, ProblemError, TilerError
from .export import validate
from .operator import problem_class
from .problem import Problem, parse_problem


@dataclass
class Library:
    """Entries of one chip and op, keyed by problem key; `lookup()` finds the exact or the nearest one.

    The query is validated with the operator's problem class (all of `parse_problem`, cross-field checks
    included); the rule itself is `tiler.lookup.Library.match`, the one implementation (tiler.lookup answers
    the same without importing the models)."""

    op: str
    chip: dict
    entries: list[dict]
    path: str = ""
    tool: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._fast = _fast.Library(
            self.op,
            self.chip,
            self.entries,
            self.path,
            self.tool,
            _fast.Spec.of_class(problem_class(self.op)),
        )

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: str) -> bool:
        return key in self._fast

    def keys(self) -> list[str]:
        return [e["key"] for e in self.entries]

    def problem(self, query: Problem | dict | str, dtype: str | None = None) -> Problem:
        """The query as a validated Problem: a Problem, a dict of fields, or text `M=..,N=..,K=..`."""
        if isinstance(query, Problem):
            if query.OP != self.op:
                raise ProblemError(f"op: this library holds {self.op} tilings, got a {query.OP} problem")
            return query
        # the one reading of a query (text, a dict of fields with sweep-row extras, an exported problem dict):
        # tiler.lookup's, whose field checks are parse_problem's; then the class's cross-field checks
        shape, dt, _ = self._fast.parse(query, dtype)
        return parse_problem(self.op, shape, dtype=dt, strict=True)

    def get(self, key: str) -> dict | None:
        """The entry with exactly this problem key, or None."""
        return self._fast.get(key)

    def lookup(self, query: Problem | dict | str, dtype: str | None = None, slowdown: bool = False) -> dict:
        """The entry for `query`: exact (`exact: True`), else the nearest by the module's rule (`exact: False`).

        Raises ProblemError for a malformed query and LookupError when no entry has the query's dtype (or its
        value of a matched choice field: a tiling of another layout is never handed out). The answer also
        carries work_ratio and scaled_time_us, and with slowdown=True the model's slowdown of reusing the
        tiling (tiler.lookup's docstring)."""
        p = self.problem(query, dtype)
        out = self._fast.match(p.shape(), p.dtype, p.key())  # type: ignore[attr-defined]
        if slowdown:
            self._fast._slowdown(out)
        return out


def from_document(doc: dict, path: str = "") -> Library:
    """A Library from a parsed `tiler.library/v1` object: the structure a look-up reads checked entry by entry
    (tiler.lookup.check_document), then the shipped JSON Schema. Errors: LibraryError (tiler.errors), one line."""
    _fast.check_document(doc, path)
    try:
        validate(doc)
    except LibraryError:
        raise
    except TilerError as exc:
        raise LibraryError(f"library: {path or 'document'}: {exc}") from None
    return Library(doc["op"], doc["chip"], doc["entries"], path, doc.get("tool", {}))


def load(path: str | os.PathLike) -> Library:
    """Read and validate a library file written by `tiler sweep --library` (at most tiler.io.FILE_BYTES_MAX bytes;
    every failure a LibraryError line naming the file, the entry and the field)."""
    return from_document(_fast.read_document(path), str(Path(path)))


__all__ = ["Library", "from_document", "load"]


def _demo(argv: list[str]) -> Any:  # pragma: no cover - `python -m tiler.library LIB K=V,...`
    lib = load(argv[0])
    return lib.lookup(argv[1])


if __name__ == "__main__":  # pragma: no cover
    import sys

    print(json.dumps(_demo(sys.argv[1:]), indent=2))
