"""Search spaces: the knobs of `search_spaces/<op>.toml` for one chip family, pinning, enumeration into columns.

Candidates are a dict of equal-length numpy int64 arrays, one per knob (categorical knobs hold their codes).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from .errors import ConfigError, SpaceError, closest

Candidates = dict[str, np.ndarray]
OPEN_MAX = 2**31 - 1  # the largest value an open knob may be pinned to (the models compute in int64)
_BOOL_WORDS = {"true": 1, "yes": 1, "on": 1, "false": 0, "no": 0, "off": 0}  # Knob.parse, 0/1 knobs only
_EXACT = 1 << 53  # integers below this are exact in float64 (Knob.parse reads its text through float())


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[int, ...]
    labels: tuple[str, ...] | None = None
    open: bool = False
    doc: str = ""
    codes: tuple[int, ...] = ()  # the codes `labels` name (the full domain, kept when `values` is pinned)
    aliases: tuple[
        str, ...
    ] = ()  # other spellings a tiling or a table may use (Triton's tutorial: BLOCK_SIZE_M)

    def parse(self, text: str | int) -> int:
        """A pinned value from `--fix` or a tiling file: a code, a label, or (open knobs) any integer."""
        if type(text) is int and not self.labels and text in self.values and abs(text) < _EXACT:
            # a value of the domain as a Python integer (a decoded tiling's, the views read every knob so): what
            # the text path gives it (its decimal is no boolean word, and float() holds it exactly)
            return text
        s = str(text).strip()
        if self.labels and s in self.labels:
            v = self.codes[self.labels.index(s)]
            if v not in self.values:
                raise SpaceError(f"{self.name}: must be one of {self.allowed()}, got {text!r}")
            return v
        # boolean words (a 0/1 knob without labels): true/yes/on = 1, false/no/off = 0, any case
        if not self.labels and set(self.values) == {0, 1} and s.lower() in _BOOL_WORDS:
            return _BOOL_WORDS[s.lower()]
        try:
            f = float(s)
            v = int(f)  # OverflowError for inf, ValueError for nan
        except (ValueError, OverflowError):
            raise SpaceError(f"{self.name}: must be one of {self.allowed()}, got {text!r}") from None
        if f != v or (v not in self.values and not (self.open and 0 < v <= OPEN_MAX)):
            raise SpaceError(f"{self.name}: must be one of {self.allowed()}, got {text!r}")
        return v

    def label(self, code: int):
        return self.labels[self.codes.index(int(code))] if self.labels else int(code)

    def allowed(self) -> str:
        vals = (
            ", ".join(self.label(v) for v in self.values) if self.labels else ", ".join(map(str, self.values))
        )
        return vals + (f" (or any integer in 1..{OPEN_MAX})" if self.open else "")


@dataclass(frozen=True)
class Space:
    op: str
    family: str
    knobs: dict[str, Knob]
    # the export target the space is restricted to (tiler.target; `any`: the whole space)
    target: str = "any"
    # for_target's answers by target, each with the domains it was cut to (not an init field: replace() and pin()
    # start a space with none; the space is immutable, so an answer holds while the target's domains do)
    _subspaces: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.knobs)

    def domains(self, names=None) -> dict[str, tuple[int, ...]]:
        """Each (named) knob's values."""
        return {k: self.knobs[k].values for k in (self.names if names is None else names)}

    def size(self) -> int:
        """The full cross product (before rules and pruning)."""
        n = 1
        for k in self.knobs.values():
            n *= len(k.values)
        return n

    def pin(self, fixes: dict[str, str | int]) -> Space:
        """A space with some knobs pinned to one value; unknown knobs and bad values name themselves."""
        knobs = dict(self.knobs)
        alias = {a: k for k, kn in knobs.items() for a in kn.aliases}
        for name, text in fixes.items():
            name = alias.get(name, name)
            if name not in knobs:
                raise SpaceError(
                    f"fix: unknown knob {name!r} for {self.op}/{self.family}; {closest(name, knobs)}"
                )
            knobs[name] = replace(knobs[name], values=(knobs[name].parse(text),))
        return replace(self, knobs=knobs)

    def for_target(self, target: str) -> Space:
        """The subspace one export target can express: each knob's values cut to the target's domain (after any
        pins: a pinned value the target cannot express is an error naming both). The target's relational rules
        are the operator's to check (`get_operator(op, family, target)`)."""
        from .registry import target_domains

        domains = target_domains(self.op, self.family, target)
        known = self._subspaces.get(target)
        if known is not None and known[0] == domains:  # checking thousands of documents cuts the space once
            return known[1]
        sub = self._cut(target, domains)
        self._subspaces[target] = (domains, sub)
        return sub

    def _cut(self, target: str, domains: dict | None) -> Space:
        """for_target without the cache."""
        if domains is None:
            return replace(self, target=target)
        knobs = dict(self.knobs)
        for name, allowed in domains.items():
            kn = knobs[name]
            codes = {kn.codes[kn.labels.index(v)] if isinstance(v, str) else int(v) for v in allowed}
            kept = tuple(v for v in kn.values if v in codes)
            if not kept:
                got = ", ".join(str(kn.label(v)) for v in kn.values)
                can = ", ".join(str(kn.label(v)) for v in sorted(codes))
                raise SpaceError(f"fix: {name}={got} cannot be expressed by target {target} (it takes {can})")
            knobs[name] = replace(kn, values=kept)
        return replace(self, knobs=knobs, target=target)

    def product(self, names) -> Candidates:
        """The cross product of the named knobs' domains as columns."""
        names = list(names)
        grids = np.meshgrid(*[np.asarray(self.knobs[n].values, dtype=np.int64) for n in names], indexing="ij")
        return {n: g.ravel() for n, g in zip(names, grids, strict=True)}

    def spelled(self, names) -> dict[str, str]:
        """knob -> the name `names` (a tiling's keys, a table's columns) use for it: the knob's own, else an alias."""
        names = set(names)
        out = {}
        for k, kn in self.knobs.items():
            found = [n for n in (k, *kn.aliases) if n in names]
            if found:
                out[k] = found[0]
        return out

    def parse_tiling(self, tiling: dict) -> Candidates:
        """One candidate from a dict of knob -> value (labels and the knobs' aliases allowed); every knob must be
        present."""
        spelled = self.spelled(tiling)
        tiling = {k: tiling[n] for k, n in spelled.items()}
        missing = [k for k in self.knobs if k not in tiling]
        if missing:
            raise SpaceError(f"tiling: missing knob(s) {', '.join(missing)} for {self.op}/{self.family}")
        # keys that are not knobs (derived values of an exported tiling: tail sizes, ...) are ignored
        return {k: np.array([self.knobs[k].parse(tiling[k])], dtype=np.int64) for k in self.knobs}

    def decode(self, cands: Candidates, i: int) -> dict:
        """Candidate i as knob -> value with labels for categorical knobs."""
        return {k: self.knobs[k].label(cands[k][i]) for k in self.knobs}


def parse_fixes(items) -> dict[str, str]:
    """`--fix` values (`KNOB=VALUE` strings, one comma-separated string of them, a dict, or None) as knob -> value
    text; `Space.pin` checks them."""
    if isinstance(items, dict):
        return {str(k).strip(): str(v).strip() for k, v in items.items()}
    if isinstance(items, str):  # the API's fix="a=1,b=2"
        items = [f for f in items.split(",") if f.strip()]
    out = {}
    for item in items or ():
        if "=" not in str(item):
            raise SpaceError(f"fix: expected KNOB=VALUE, got {item!r}")
        k, v = (x.strip() for x in str(item).split("=", 1))
        out[k] = v
    return out


def product(*cols: Candidates) -> Candidates:
    """Cross product of candidate tables (every row of the first with every row of the second, ...)."""
    out: Candidates = {}
    sizes = [len(next(iter(c.values()))) if c else 1 for c in cols]
    idx = np.meshgrid(*[np.arange(s) for s in sizes], indexing="ij")
    for c, ix in zip(cols, idx, strict=True):
        for k, v in c.items():
            out[k] = v[ix.ravel()]
    return out


def product_rows(first: Candidates, second: Candidates, idx) -> Candidates:
    """Rows `idx` (flat indices) of product(first, second), without building the product: flat row i is row
    i // len(second) of `first` with row i % len(second) of `second` (the first table outer, as product's)."""
    s = length(second)
    i, j = np.divmod(np.asarray(idx, dtype=np.int64), s)
    return {**{k: v[i] for k, v in first.items()}, **{k: v[j] for k, v in second.items()}}


def take(cands: Candidates, mask_or_idx) -> Candidates:
    return {k: v[mask_or_idx] for k, v in cands.items()}


def length(cands: Candidates) -> int:
    return len(next(iter(cands.values()))) if cands else 0


@lru_cache(maxsize=1)
def _builtin_dir() -> Path:
    """The shipped spaces: the repository's `search_spaces/` in a checkout, package data when installed (found
    once: where the package lies does not change while it runs)."""
    repo = Path(__file__).resolve().parent.parent / "search_spaces"
    if repo.is_dir():
        return repo
    from importlib import resources

    return Path(str(resources.files("tiler.data") / "search_spaces"))


# Space files shipped outside search_spaces/ by operators from other packages (Operator.SPACE_FILE): (op, family) ->
# the file. The operator registry adds to it when it registers such an operator (tiler.operator.register); this layer
# only reads it, so it never imports the operator layer for it.
_SPACE_FILES: dict[tuple[str, str], Path] = {}


def add_space_file(op: str, family: str, path: str | os.PathLike | None) -> Path | None:
    """Make `path` the shipped space file of (op, family) (None: forget it, back to search_spaces/<op>.toml);
    returns the file it replaces (None: none), so a registration that fails can put it back."""
    before = _SPACE_FILES.pop((op, family), None)
    if path is not None:
        _SPACE_FILES[(op, family)] = Path(path)
    return before


def shipped_space_file(op: str, family: str) -> Path:
    """The shipped space file of (op, family): an operator's own SPACE_FILE, else search_spaces/<op>.toml."""
    return _SPACE_FILES.get((op, family), _builtin_dir() / f"{op}.toml")


def spaces_dir(extra: str | os.PathLike | None = None) -> Path:
    for d in (extra, os.environ.get("TILER_SPACES_DIR")):
        if d and Path(d).is_dir():
            return Path(d)
    return _builtin_dir()


# A space file from a user folder (TILER_SPACES_DIR) may reorder or cut the shipped domains, and give an open knob
# any value in 1..OPEN_MAX; it may not invent a value a closed knob does not have (split_k = [0] would be a NaN time
# on 0 cores). These bound the work a space file can ask for.
KNOB_VALUES_MAX = 64  # values per knob
SPACE_SIZE_MAX = 2**32  # candidates in the cross product of a family's knobs


def read_text_file(path: str | os.PathLike, what: str) -> str:
    """A UTF-8 text file's contents, or a one-line ConfigError `PATH: cannot read WHAT: WHY` (missing, a folder, a
    dangling link, a device or pipe, unreadable, binary or UTF-16)."""
    path = Path(path)
    try:
        if path.is_symlink() and not path.exists():
            why = "a dangling symbolic link (its target is missing)"
        elif path.is_dir():
            why = "it is a folder, not a file"
        elif path.exists() and not path.is_file():  # /dev/zero, a pipe: reading would never end
            why = "not a regular file"
        else:
            from .io import read_limited

            data = read_limited(path)  # at most tiler.io.FILE_BYTES_MAX bytes
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError as exc:
                bad = data[exc.start : exc.start + 1]
                why = f"not UTF-8 text (byte {exc.start} is {bad!r}: a binary or UTF-16 file?)"
    except OSError as exc:
        why = exc.strerror or str(exc)
    except ValueError as exc:  # a NUL byte in the name; read_limited's refusals (a device, too large)
        why = "not a valid path" if "null" in str(exc).lower() else str(exc)
    raise ConfigError(f"{path}: cannot read {what}: {why}")


def read_toml(path: str | os.PathLike, what: str) -> dict:
    """A TOML file as a dict; any failure (read_text_file's, bad TOML, nesting too deep) is one ConfigError line."""
    text = read_text_file(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not valid TOML: nested too deep") from None


def _int_values(where: str, raw) -> tuple[int, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: needs a non-empty 'values' list of integers")
    if len(raw) > KNOB_VALUES_MAX:
        raise ConfigError(f"{where}: 'values' holds {len(raw)} entries; at most {KNOB_VALUES_MAX}")
    for v in raw:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{where}: 'values' must be integers, got {v!r}")
        if not 0 <= v <= OPEN_MAX:
            raise ConfigError(f"{where}: 'values' must be integers in 0..{OPEN_MAX}, got {v}")
    if len(set(raw)) != len(raw):
        raise ConfigError(f"{where}: 'values' lists a value twice")
    return tuple(raw)


def _parse_knob(where: str, name: str, spec) -> Knob:
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be a table with a non-empty 'values' list")
    values = _int_values(where, spec.get("values"))
    labels = spec.get("labels")
    if labels is not None:
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ConfigError(f"{where}: 'labels' must be a list of strings")
        if len(labels) != len(values):
            raise ConfigError(f"{where}: 'labels' and 'values' differ in length")
        labels = tuple(labels)
    aliases = spec.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(x, str) for x in aliases):
        raise ConfigError(f"{where}: 'aliases' must be a list of strings")
    is_open = spec.get("open", False)
    if not isinstance(is_open, bool):
        raise ConfigError(f"{where}: 'open' must be true or false, got {is_open!r}")
    doc = spec.get("doc", "")
    if not isinstance(doc, str):
        raise ConfigError(f"{where}: 'doc' must be a string")
    return Knob(name, values, labels or None, is_open, doc, values, tuple(aliases))


def _within(path: Path, family: str, user: dict[str, Knob], shipped: Space) -> dict[str, Knob]:
    """A user space's knobs checked against the shipped space: the same knobs, values inside each shipped domain (an
    open knob: or in 1..OPEN_MAX), the shipped labels; returned with the shipped labels, aliases and open flags."""
    missing = [k for k in shipped.knobs if k not in user]
    if missing:
        raise ConfigError(
            f"{path}: [{family}] lacks knob(s) {', '.join(missing)} (the model reads every one)"
        )
    out = {}
    for name, kn in user.items():
        where = f"{path}: [{family}.{name}]"
        if name not in shipped.knobs:
            raise ConfigError(f"{where}: unknown knob; {closest(name, shipped.knobs)}")
        ref = shipped.knobs[name]
        for v in kn.values:
            if v not in ref.codes and not (ref.open and 0 < v <= OPEN_MAX):
                raise ConfigError(
                    f"{where}: value {v} is outside the knob's domain; allowed: {ref.allowed()}"
                )
        if kn.labels and [ref.label(v) if ref.labels else None for v in kn.values] != list(kn.labels):
            raise ConfigError(f"{where}: 'labels' must name the shipped codes ({ref.allowed()})")
        out[name] = replace(ref, values=kn.values, doc=kn.doc or ref.doc)
    return out


_LOADED: dict[tuple, Space] = {}  # load_space's answers by file identity (Space is immutable)
_LOADED_MAX = 64


def _file_key(path: Path) -> tuple | None:
    """What identifies a file's contents cheaply: the path as given, its device and inode (the file itself, where
    the path leads now: what resolving the path told, without a system call per path component), size and change
    times (None: no file)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def load_space(op: str, family: str, spaces: str | os.PathLike | None = None, builtin: bool = False) -> Space:
    """The knobs of `search_spaces/<op>.toml` for one family (`builtin`: the shipped file, not a user folder). An
    operator from another package ships its own file (`add_space_file`): used where no user folder's <op>.toml has
    the family.

    A file from a user folder is checked against the shipped one (same knobs, values inside their domains, at most
    KNOB_VALUES_MAX values per knob and SPACE_SIZE_MAX candidates); every failure is one ConfigError line.
    A file read before and unchanged since (same size and modification time, and the same shipped and plug-in
    files) is not parsed again: checking thousands of documents reads the space once."""
    folder = _builtin_dir() if builtin else spaces_dir(spaces)
    user = shipped_space_file(op, family) if builtin else folder / f"{op}.toml"
    plugin = _SPACE_FILES.get((op, family))
    key = (op, family, builtin, _file_key(user), _file_key(shipped_space_file(op, family)),
           _file_key(plugin) if plugin else None)  # fmt: skip
    if key[3] is not None and key in _LOADED:
        return _LOADED[key]
    space = _load_space(op, family, folder, builtin)
    if key[3] is not None:
        if len(_LOADED) >= _LOADED_MAX:
            _LOADED.clear()
        _LOADED[key] = space
    return space


def _load_space(op: str, family: str, folder: Path, builtin: bool) -> Space:
    """load_space without the cache."""
    path = shipped_space_file(op, family) if builtin else folder / f"{op}.toml"
    raw = None
    if not builtin and (op, family) in _SPACE_FILES:
        # an operator with its own space file: a user folder may still narrow it (<op>.toml with the family)
        raw = read_toml(path, "search space") if path.is_file() else {}
        if family not in raw:
            path, raw = _SPACE_FILES[(op, family)], None
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"{path}: a dangling symbolic link (its target is missing)")
    if not path.exists():
        have = sorted({p.stem for p in folder.glob("*.toml")} | {o for o, _ in _SPACE_FILES})
        raise SpaceError(f"op: no search space for {op!r}; {closest(op, have)}")
    if raw is None:
        raw = read_toml(path, "search space")
    if family not in raw:
        raise SpaceError(f"op: {op} has no knobs for the {family!r} family in {path}")
    if not isinstance(raw[family], dict) or not raw[family]:
        raise ConfigError(f"{path}: [{family}] must be a table of knobs")
    knobs = {
        name: _parse_knob(f"{path}: [{family}.{name}]", name, spec) for name, spec in raw[family].items()
    }
    shipped_path = shipped_space_file(op, family)
    if not builtin and shipped_path.is_file() and path.resolve() != shipped_path.resolve():
        try:
            shipped = load_space(op, family, builtin=True)
        except SpaceError:  # the shipped file has no such family: nothing to compare against
            shipped = None
        if shipped is not None:
            knobs = _within(path, family, knobs, shipped)
    space = Space(op, family, knobs)
    if space.size() > SPACE_SIZE_MAX:
        raise ConfigError(f"{path}: [{family}] spans {space.size()} candidates; at most {SPACE_SIZE_MAX}")
    return space


__all__ = [
    "Candidates",
    "Knob",
    "Space",
    "add_space_file",
    "length",
    "load_space",
    "parse_fixes",
    "product",
    "shipped_space_file",
    "take",
]
