"""The cost model: one entry point, a registry keyed by (op, family).

A model is a class with:
  KNOBS            the knob names it reads (the space's knobs for its family)
  SCHEDULE_KNOBS   knobs that only change the multi-core schedule; `bound()` is valid for every value of them
  feasible(problem, chip, cands) -> dict[rule name, bool mask]   capacity/alignment rules, checked before scoring
  estimate(problem, chip, cands) -> dict[column, array]         the estimate record (common.RECORD) and extras
  bound(problem, chip, cands) -> array | None                    a lower bound on time_us over SCHEDULE_KNOBS
Optional, used by the exhaustive search when present:
  LEVELS, RESOLVED, resolve(...)   enumeration levels; knobs set in closed form (largest value that fits)
  quick_bound(problem, chip, cands) -> array                     a cheaper, looser bound than bound()
  prefix_bound(problem, chip, first_level_rows, domains) -> array   a floor of quick_bound over every completion
  dominated(problem, chip, cands, domains) -> bool mask         settings with an equal-or-better twin in `domains`
  advice(problem, chip, cands, est, row) -> list[str]            checklist items that apply to one candidate
  tie_rank(problem, chip, cands) -> int array                    among exactly tied predictions, which to report
                                                                 first (lower first; search.top_distinct)
Nothing here reads files, imports optuna or knows the CLI: candidates are dicts of numpy arrays.
"""

from __future__ import annotations

from ..errors import SpaceError, closest

_REGISTRY: dict[tuple[str, str], type] = {}


def register(op: str, family: str):
    def deco(cls):
        _REGISTRY[(op, family)] = cls
        return cls

    return deco


def get_model(op: str, family: str):
    _load_builtin()
    key = (op, family)
    if key not in _REGISTRY:
        have = sorted(f"{o}/{f}" for o, f in _REGISTRY)
        raise SpaceError(f"op: no {op!r} model for the {family!r} family; {closest(f'{op}/{family}', have)}")
    return _REGISTRY[key]()


def tie_preference(model, problem, chip, cands: dict):
    """The model's `tie_rank` of `cands` (None when the model has none or there are no candidates)."""
    rank = getattr(model, "tie_rank", None)
    n = len(next(iter(cands.values()))) if cands else 0
    return None if rank is None or not n else rank(problem, chip, cands)


def known_ops() -> list[tuple[str, str]]:
    _load_builtin()
    return sorted(_REGISTRY)


def _load_builtin() -> None:
    from . import matmul_ascend  # noqa: F401

    try:
        from . import matmul_cuda  # noqa: F401
    except ImportError:  # the cuda model lands separately
        pass
