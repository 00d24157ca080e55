"""What decides a sweep search's result (SweepConfig, the journal key, the pinned space) and the
picklable context a worker gets."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# the estimate columns are the estimate record's, one column per field, with the pipes of the chips' families
# (model/common.py record(): msprof's names on Ascend, tensor/load/store... on a GPU; both with chips of both)
SEARCH_COLUMNS = ("strategy", "seed", "evaluated", "proven_optimal")
STATUS_COLUMNS = ("chip", "status", "error", "key", "input_row")  # input_row: 1-based data row of the input
COUNT_MAX = 2**31 - 1
JOURNAL_SUFFIX = ".journal.db"
MAX_CHUNK = 4  # searches per pool task: a few seconds of work at most, so a kill loses little


@dataclass(frozen=True)
class SweepConfig:
    """What decides a search's result besides the problem and the chip (part of every journal key)."""

    op: str
    strategy: str = "exhaustive"
    seed: int = 0
    trials: int | None = None
    fix: tuple[tuple[str, str], ...] = ()
    target: str = "any"  # the export target every search is restricted to (tiler.target)

    def fix_text(self, space=None) -> str:
        """The pins as text; with a space, only those it has (a pin of another chip family's knob is not used)."""
        return ";".join(f"{k}={v}" for k, v in self.fix if space is None or k in space.knobs)


@dataclass(frozen=True)
class _Context:
    """Everything a worker needs besides its chunk: shipped once per pool task or scattered once to Dask."""

    cfg: SweepConfig
    chips: dict  # chip id -> _chip_state(chip)
    spaces: dict  # chip id -> pinned Space


def _chip_state(chip) -> tuple:
    """A picklable copy of a Chip (its mappings are read-only proxies, which do not pickle)."""
    return (
        chip.id,
        chip.family,
        chip.name,
        dict(chip.values),
        dict(chip.sources),
        dict(chip.tags),
        chip.path,
        chip.profile_hash,
    )


_CHIPS: dict[tuple, Any] = {}


def _chip_from_state(state: tuple):
    key = (state[0], state[7])
    if key not in _CHIPS:
        from ..hardware import Chip

        cid, fam, name, vals, srcs, tags, path, phash = state
        _CHIPS[key] = Chip(
            cid,
            fam,
            name,
            MappingProxyType(vals),
            MappingProxyType(srcs),
            MappingProxyType(tags),
            path,
            phash,
        )
    return _CHIPS[key]


def space_hash(space) -> str:
    """A short fingerprint of the (pinned) knob domains: a changed search space never reuses old results."""
    text = repr(sorted((k, kn.values, kn.labels, kn.open) for k, kn in space.knobs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def journal_key(chip, problem, cfg: SweepConfig, space) -> str:
    """The resume key of one search: chip id, op, problem key, strategy, seed, trials, pins, space, profile."""
    trials = cfg.trials if cfg.strategy in ("tpe", "random") else None
    return "|".join(
        [
            chip.id,
            cfg.op,
            problem.key(),
            cfg.strategy,
            f"seed={cfg.seed}",
            f"trials={trials}",
            f"fix={cfg.fix_text(space)}",
            *([f"target={cfg.target}"] if cfg.target != "any" else []),
            f"space={space_hash(space)}",
            f"profile={chip.profile_hash}",
        ]
    )


def _pinned_space(op: str, family: str, fix: tuple[tuple[str, str], ...], target: str = "any"):
    """The family's space with the pins it knows (with chips of two families, each takes its own knobs), cut to
    what the export target can express."""
    from ..space import load_space

    space = load_space(op, family)
    return space.pin({k: v for k, v in fix if k in space.knobs}).for_target(target)
