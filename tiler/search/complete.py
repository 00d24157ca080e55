"""Score what the user has: a tiling in a code generator's own names, or only part of one.

A kernel engineer's config is written in the names of the code they run: CATLASS template arguments
(`L1TileShape`, `PRELOAD_STAGES`, ...), AscendC `TCubeTiling` fields (`baseM`, `stepKa`, `depthA1`, ...), the Triton
tutorial's meta-parameters (`BLOCK_SIZE_M`, ...), and it rarely sets every knob the model has (19 on Ascend matmul).
`to_knobs` reads such a dict: knob names and their aliases (search_spaces/<op>.toml) as they are, each target's
native names through that target's `native` mapping (tiler.target.Target). `complete` fills the knobs the user did
not give with the model's best choice given the rest (a proven search of the space pinned to the given values; for
a config written in a target's names, of that target's space, so the completed tiling still runs there), and says
which knobs it filled, so the user sees what was theirs and what the model assumed.

Names that are neither knobs, aliases nor a target's native names are refused in a partial tiling (a misspelt name
would otherwise be completed silently). In a tiling that already names every knob they are ignored: an exported
document's `tiling` carries derived values (tail sizes) beside the knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InfeasibleError, SpaceError, TilerError
from ..operator import get_operator
from ..problem import Problem
from ..space import Space, take
from .proven import exhaustive


@dataclass
class Completion:
    """A whole tiling (knob -> value or label) from a user's: what was given (knob -> value), the knobs the model
    chose (`completed`, in the space's order) and the native names read, per target (`native`)."""

    tiling: dict
    given: dict
    completed: list[str] = field(default_factory=list)
    native: dict[str, str] = field(default_factory=dict)


def to_knobs(tiling: dict, space: Space, problem: Problem) -> tuple[dict, dict[str, str]]:
    """(knob -> value, target -> the native names it read) of a user's tiling dict. A value given twice (a knob
    and the native name that sets it) must agree; unknown names are refused unless every knob is present."""
    spelled = space.spelled(tiling)
    knobs = {k: tiling[n] for k, n in spelled.items()}
    rest = {n: v for n, v in tiling.items() if n not in spelled.values()}
    model = get_operator(space.op, space.family, space.target)
    targets = [model.target] if model.target is not None else list(model.TARGETS.values())
    read: dict[str, str] = {}
    for t in targets:
        names = {n: v for n, v in rest.items() if n in t.native_names}
        if not names or t.native is None:
            continue
        if read:  # one config is written for one generator: two targets' names together are a mix-up
            other = next(iter(read))
            raise SpaceError(
                f"tiling: names of two targets mixed ({other}: {read[other]}; {t.name}: {', '.join(names)}); "
                "use one target's names"
            )
        for knob, value in t.native(names, problem).items():
            if knob in knobs and space.knobs[knob].parse(knobs[knob]) != space.knobs[knob].parse(value):
                raise SpaceError(
                    f"tiling: {knob}={knobs[knob]} disagrees with the {t.name} names "
                    f"{', '.join(names)} (they give {knob}={value})"
                )
            knobs[knob] = value
        read[t.name] = ", ".join(names)
        rest = {n: v for n, v in rest.items() if n not in names}
    if rest and len(knobs) < len(space.knobs):
        natives = [f"{t.name}: {', '.join(t.native_names)}" for t in targets if t.native_names]
        raise SpaceError(
            f"tiling: unknown name(s) {', '.join(map(repr, rest))} for {space.op}/{space.family}; knobs: "
            + ", ".join(space.names)
            + ("; target names: " + "; ".join(natives) if natives else "")
        )
    return knobs, read


def complete(problem: Problem, chip, space: Space, tiling: dict) -> Completion:
    """The user's tiling as a whole one: knobs not given are the best choice the model makes given the rest."""
    knobs, native = to_knobs(tiling, space, problem)
    if not knobs:  # completing nothing is a search: an empty tiling is a mistake, not a question
        raise SpaceError(
            f"tiling: empty; give at least one knob of {space.op}/{space.family} (the rest is completed), "
            "or run tiler search"
        )
    missing = [k for k in space.names if k not in knobs]
    if not missing:
        return Completion(dict(knobs), dict(knobs), [], native)
    pinned = space.pin({k: str(v) for k, v in knobs.items()})
    if native and space.target == "any":  # a config in a target's names is completed within what it can run
        pinned = pinned.for_target(next(iter(native)))
    try:
        res = exhaustive(problem, chip, pinned, top=1)
    except InfeasibleError as exc:
        given = ", ".join(f"{k}={v}" for k, v in knobs.items())
        raise TilerError(
            f"tiling: no completion of the given knobs ({given}) fits on {chip.id}: {exc}"
        ) from None
    whole = space.decode(take(res.cands, slice(0, 1)), 0)
    return Completion(whole, dict(knobs), missing, native)


__all__ = ["Completion", "complete", "to_knobs"]


def complete_rows(problem: Problem, chip, space: Space, df):
    """A table of tilings (tiler rank's candidates) whose knob columns are partial or in a target's names, with
    every knob column filled (`complete`, once per distinct given tiling) and a `completed` column naming the
    knobs the model chose per row. A table that already has every knob column is returned unchanged. `df` has the
    1-based `row` column that error messages name."""

    spelled = space.spelled(df.columns)
    if len(spelled) == len(space.knobs) or not len(df):
        return df
    given_cols = [c for c in df.columns if c in spelled.values() or _is_native(c, space)]
    filled: dict[tuple, Completion] = {}
    rows = []
    for rec in df.to_dict("records"):
        given = {c: _cell(rec[c]) for c in given_cols if not _empty(rec[c])}
        key = tuple(sorted((c, repr(v)) for c, v in given.items()))
        if key not in filled:
            try:
                filled[key] = complete(problem, chip, space, given)
            except TilerError as exc:
                raise TilerError(f"candidates: row {rec['row']}: {exc}") from None
        rows.append(filled[key])
    out = df.copy()
    for k in space.names:
        out[spelled.get(k, k)] = [c.tiling[k] for c in rows]
    out["completed"] = [" ".join(c.completed) for c in rows]
    return out


def _is_native(name: str, space: Space) -> bool:
    model = get_operator(space.op, space.family, space.target)
    targets = [model.target] if model.target is not None else list(model.TARGETS.values())
    return any(name in t.native_names for t in targets)


def _empty(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def _cell(v):
    """A CSV cell as a value: a list written as JSON (`[128, 256, 64]`, CATLASS's tile shapes) becomes a list."""
    import json

    if isinstance(v, str) and v.strip().startswith("["):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v
