"""Search spaces: the knobs of `search_spaces/<op>.toml` for one chip family, pinning, enumeration into columns.

Candidates are a dict of equal-length numpy int64 arrays, one per knob (categorical knobs hold their codes).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .errors import ConfigError, SpaceError, closest

Candidates = dict[str, np.ndarray]
OPEN_MAX = 2**31 - 1  # the largest value an open knob may be pinned to (the models compute in int64)


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
        s = str(text).strip()
        if self.labels and s in self.labels:
            v = self.codes[self.labels.index(s)]
            if v not in self.values:
                raise SpaceError(f"{self.name}: must be one of {self.allowed()}, got {text!r}")
            return v
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
        from .operator import get_operator

        model = get_operator(self.op, self.family, target)
        if model.target is None:
            return replace(self, target=target)
        knobs = dict(self.knobs)
        for name, allowed in model.target.domains.items():
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
    """`--fix` values (`KNOB=VALUE` strings, or a dict) as knob -> value text; `Space.pin` checks them."""
    if isinstance(items, dict):
        return {str(k).strip(): str(v).strip() for k, v in items.items()}
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


def take(cands: Candidates, mask_or_idx) -> Candidates:
    return {k: v[mask_or_idx] for k, v in cands.items()}


def length(cands: Candidates) -> int:
    return len(next(iter(cands.values()))) if cands else 0


def _builtin_dir() -> Path:
    repo = Path(__file__).resolve().parent.parent / "search_spaces"
    if repo.is_dir():
        return repo
    from importlib import resources

    return Path(str(resources.files("tiler.data") / "search_spaces"))


def spaces_dir(extra: str | os.PathLike | None = None) -> Path:
    for d in (extra, os.environ.get("TILER_SPACES_DIR")):
        if d and Path(d).is_dir():
            return Path(d)
    return _builtin_dir()


def load_space(op: str, family: str, spaces: str | os.PathLike | None = None, builtin: bool = False) -> Space:
    """The knobs of `search_spaces/<op>.toml` for one family (`builtin`: the shipped file, not a user folder)."""
    folder = _builtin_dir() if builtin else spaces_dir(spaces)
    path = folder / f"{op}.toml"
    if not path.is_file():
        have = sorted(p.stem for p in folder.glob("*.toml"))
        raise SpaceError(f"op: no search space for {op!r}; {closest(op, have)}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    if family not in raw:
        raise SpaceError(f"op: {op} has no knobs for the {family!r} family in {path}")
    knobs = {}
    for name, spec in raw[family].items():
        if not isinstance(spec, dict) or not spec.get("values"):
            raise ConfigError(f"{path}: [{family}.{name}] needs a non-empty 'values' list")
        labels = tuple(spec["labels"]) if "labels" in spec else None
        if labels and len(labels) != len(spec["values"]):
            raise ConfigError(f"{path}: [{family}.{name}] 'labels' and 'values' differ in length")
        values = tuple(int(v) for v in spec["values"])
        aliases = tuple(str(a) for a in spec.get("aliases", ()))
        knobs[name] = Knob(name, values, labels, bool(spec.get("open")), spec.get("doc", ""), values, aliases)
    return Space(op, family, knobs)


__all__ = ["Candidates", "Knob", "Space", "parse_fixes", "length", "load_space", "product", "take"]
