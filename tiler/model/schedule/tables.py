"""Packed-code tables the models keep over the schedule's results, and clear_caches, which starts every cache over."""

from __future__ import annotations

import numpy as np

from . import l2, work


def pack_codes(columns, bits) -> np.ndarray | None:
    """One int64 code per row (the columns' values in `bits`-wide fields, the first most significant, so codes
    sort as the rows do), or None when a value does not fit its field."""
    columns = [np.asarray(col).astype(np.int64, copy=False) for col in columns]
    if columns and all(col.shape == (1,) for col in columns):  # one row: the same fields in Python integers
        one = 0
        for col, b in zip(columns, bits, strict=True):
            v = int(col[0])
            if v < 0 or v >= 1 << b:
                return None
            one = (one << b) | v
        return np.array([one], dtype=np.int64)
    code = None
    for col, b in zip(columns, bits, strict=True):
        if col.size and (int(col.min()) < 0 or int(col.max()) >= 1 << b):
            return None
        code = col.copy() if code is None else (code << b) | col
    return code


def unpack_codes(code: np.ndarray, bits) -> list[np.ndarray]:
    """The fields of packed codes, in pack_codes' order."""
    out = []
    for b in reversed(bits):
        out.append(code & ((1 << b) - 1))
        code = code >> b
    return out[::-1]


class GrowingRows:
    """Rows appended at the end of an array kept in a buffer that doubles when full: appending k rows costs k rows'
    copy (amortised), where np.concatenate would copy the whole table each time (the model's tables grow by a few
    rows per estimate call over a whole sweep). `append` returns the rows so far, a view of the buffer."""

    def __init__(self, tail: tuple = (), dtype=np.float64):
        self._buf = np.empty((0, *tail), dtype=dtype)
        self.size = 0

    @property
    def filled(self) -> np.ndarray:
        """The rows so far (a view of the buffer)."""
        return self._buf[: self.size]

    def append(self, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=self._buf.dtype)
        end = self.size + len(rows)
        if end > len(self._buf):
            buf = np.empty((max(end, 2 * len(self._buf), 64), *self._buf.shape[1:]), dtype=self._buf.dtype)
            buf[: self.size] = self._buf[: self.size]
            self._buf = buf
        self._buf[self.size : end] = rows
        self.size = end
        return self.filled


class CodeTable:
    """Rows computed once per process and found again by their packed code (a sorted array and searchsorted:
    no Python per row once a row is known). Subclasses keep the rows' values by id (`_add`); a table holding
    MAX_ROWS rows starts over."""

    MAX_ROWS = 1 << 17

    def __init__(self):
        self.codes = np.empty(0, dtype=np.int64)  # sorted
        self.order = np.empty(0, dtype=np.int64)  # the id of each sorted code
        self.count = 0

    def _find(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.codes, codes)
        found = pos < self.codes.size
        found[found] = self.codes[pos[found]] == codes[found]
        return pos, found

    def ids(self, codes: np.ndarray, compute) -> np.ndarray:
        """Ids of sorted distinct `codes`; `compute(missing codes)` makes the rows not yet in the table.

        New codes are merged into the sorted ones at their searchsorted places (np.insert: one copy, no sort of
        the whole table); ids are given in the order of `missing`, the order `compute` made their rows in."""
        pos, found = self._find(codes)
        if not found.all():
            if self.count + codes.size > self.MAX_ROWS:  # start over; every code of this call is added again
                self.__init__()
                found = np.zeros(codes.size, dtype=bool)
            missing = codes[~found]
            self._add(compute(missing))
            ids = np.arange(self.count, self.count + missing.size)
            self.count += missing.size
            by_code = np.argsort(missing, kind="stable")  # already sorted when `codes` is: then a no-op order
            at = np.searchsorted(self.codes, missing[by_code])
            self.codes = np.insert(self.codes, at, missing[by_code])
            self.order = np.insert(self.order, at, ids[by_code])
            pos, _ = self._find(codes)
        return self.order[pos]


class PairTable(CodeTable):
    """A CodeTable whose rows are pairs of floats: the L2 hit rates (A, B) of a launch order's walk, by id (the
    Ascend and the cuda matmul models keep one per problem)."""

    def __init__(self):
        super().__init__()
        self._values = GrowingRows((2,))
        self.values = self._values.filled

    def _add(self, values: np.ndarray) -> None:
        self.values = self._values.append(values)


# clear functions of caches that models keep over the schedule's results (on_clear), run by clear_caches
_CLEARERS: list = []


def on_clear(fn) -> None:
    """Have clear_caches() also call `fn` (a model's own tables built from these simulations)."""
    if fn not in _CLEARERS:
        _CLEARERS.append(fn)


def clear_caches() -> None:
    """Forget every cached walk and simulation (benchmarks time a search from a cold start with this)."""
    work.max_b_reuse.cache_clear()
    for cache in (work._WALKS, work._WORK, l2._HITS, l2._TOUCHES, work._COUNTS):
        cache.clear()
    work._WALK_ELEMS = l2._TOUCH_ELEMS = 0
    for fn in _CLEARERS:
        fn()
