"""The operator contract: one `Operator` per (op, chip family), and the registry that finds it.

An operator owns everything that knows its problem and its knobs: the problem class, the knob names (checked
against `search_spaces/<op>.toml` when it registers), the capacity rules, the cost model, the bounds and hints
the searches use, warm-start tilings, the checklist and what-if tables of the advice, the export views per code
generator, the runners that measure it, the constants calibration may fit, and how a library matches its
problems. The generic layers (search, bayes, sweep, cli, export, advice, rank, calibrate, library) call these
methods and never name a knob or a problem field.

Required: `feasible` and `estimate` (abstract). Everything else has a default that is correct for an operator
that does not use it (no bound: the exhaustive search scores every candidate; no views: the export carries the
tiling and estimate only). Call order of a search: `check` -> `feasible` (per level, masks) -> `resolve` ->
`dominated` -> `quick_bound` / `bound` / `prefix_bound` (branch and bound) -> `estimate` -> `tie_rank`; then
`advice`, `views`, `launch` and `derived` for the result.

Candidates are dicts of equal-length int64 numpy arrays, one per knob (categorical knobs hold their codes). Nothing
here reads files beyond the space check at registration, imports optuna or knows the CLI.

Operators from other packages: a class may ship its own space file (`SPACE_FILE`), and an installed package
declares its operators in the entry-point group `tiler.operators`, loaded once with the built-ins
(`load_plugins`); `tiler.testing.check_operator` is the conformance suite they run (docs/operators.md).
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from . import registry
from .errors import ConfigError, ProblemError, SpaceError, TilerError, closest
from .space import product_rows
from .target import ANY, Target

if TYPE_CHECKING:
    from .hardware import Chip
    from .problem import Problem

Candidates = dict[str, np.ndarray]


class Operator(ABC):
    """Base class of every (op, family) plug-in: required methods are abstract, optional ones have defaults."""

    OP: ClassVar[str] = ""
    FAMILY: ClassVar[str] = ""
    PROBLEM: ClassVar[type[Problem]]
    KNOBS: ClassVar[tuple[str, ...]] = ()
    # capacity and alignment rules: rule name -> the knobs it reads (a rule is checked once all are present)
    RULES: ClassVar[dict[str, tuple[str, ...]]] = {}
    RULE_TEXT: ClassVar[dict[str, str]] = {}
    # knobs that only change the multi-core schedule: `bound()` holds for every value of them
    SCHEDULE_KNOBS: ClassVar[tuple[str, ...]] = ()
    # knobs whose best value follows from the others in closed form (`resolve()`); not enumerated unless pinned
    RESOLVED: ClassVar[tuple[str, ...]] = ()
    # enumeration levels of the exhaustive search: each level's rules prune before the next multiplies the table
    LEVELS: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # Bayesian search: knobs that fix the tile grid (inner="grid" samples these and scores the rest in one
    # vectorised call; empty: inner="grid" falls back to the schedule knobs) and the order knobs are sampled in
    GRID_KNOBS: ClassVar[tuple[str, ...]] = ()
    SAMPLE_ORDER: ClassVar[tuple[str, ...]] = ()
    # the knobs that make a tile shape: the diverse top-k (search.result.diverse_order) keeps the best tiling of
    # each distinct value of these first, a hedge 4th; empty: the plain ranking
    SHAPE_KNOBS: ClassVar[tuple[str, ...]] = ()
    # the pipeline-depth knob (buffers in flight per program): the diverse order's hedge is the shallowest depth
    # of the two best tiles predicted within HEDGE_GAP of the best; empty: the best tile's runner-up
    DEPTH_KNOB: ClassVar[str] = ""
    # advice: the checklist line per bound (MISSION §4, in the family's words) and the knobs worth flipping:
    # knob -> (checklist item, values to try)
    CHECKLIST: ClassVar[dict[str, str]] = {}
    WHAT_IF: ClassVar[dict[str, tuple[str, tuple[int, ...]]]] = {}
    # calibration: constant -> (low, high) box of the fit; the values read from the profile's [efficiency]
    FITTABLE: ClassVar[dict[str, tuple[float, float]]] = {}
    CONSTANTS: ClassVar[dict[str, float]] = {}
    # values of a measurement table's `impl` column that are this operator's kernel (other rows: a library)
    IMPLS: ClassVar[tuple[str, ...]] = ()
    # measured rows without a knob's column (a user's kernel that lacks the knob) take this value, not the model's
    # choice: knob -> value or label, or "A if KNOB else B" (A when the table gives KNOB); absent_defaults below
    ABSENT_DEFAULTS: ClassVar[dict[str, str]] = {}
    # the code generators a tiling can be exported to (tiler.target.Target: view, schema, the subspace and the
    # compile-time rules of each), and the names `runner()` answers
    TARGETS: ClassVar[dict[str, Target]] = {}
    RUNNERS: ClassVar[tuple[str, ...]] = ()
    # an operator from another package ships its own search-space TOML (the format of search_spaces/<op>.toml): a
    # path, absolute or relative to the folder of the module of the class that sets it; None: the built-in
    # search_spaces/<op>.toml (docs/operators.md, "An operator in another package")
    SPACE_FILE: ClassVar[str | None] = None

    def __init__(self, target: str = ANY) -> None:
        """`target`: restrict the operator to what one export target can express (its rules join RULES, so
        every search, check and rank sees them); `any` (default) is the whole space."""
        if target != ANY and target not in self.TARGETS:
            allowed = ", ".join([ANY, *self.TARGETS])
            raise SpaceError(
                f"target: must be one of {allowed} for {self.OP} on the {self.FAMILY} family, got {target!r}"
            )
        self.target: Target | None = self.TARGETS.get(target) if target != ANY else None
        if self.target is not None:  # instance attributes: the class's tables stay the operator's own
            self.RULES = {**type(self).RULES, **self.target.rules}
            self.RULE_TEXT = {**type(self).RULE_TEXT, **self.target.rule_text}

    # ---------------------------------------------------------------- required

    @abstractmethod
    def feasible(self, p: Problem, chip: Chip, c: Candidates, rules=None) -> dict[str, np.ndarray]:
        """One boolean mask per rule (True = allowed), for the `rules` (default all) whose knobs are in `c`."""

    @abstractmethod
    def estimate(self, p: Problem, chip: Chip, c: Candidates) -> dict[str, np.ndarray]:
        """The estimate record (model.common.RECORD), one row per candidate, plus any extra columns."""

    # ---------------------------------------------------------------- optional, with defaults

    def check(self, p: Problem, chip: Chip) -> None:
        """Raise ProblemError when the chip cannot run the problem at all (default: no matrix unit for the
        dtype). Called once before a search, never per candidate."""
        chip.require_dtype(p.dtype)

    def admit(self, p: Problem, chip: Chip) -> None:
        """`check`, then the target's own limits (its chips, dtypes, layouts): what the generic layers call."""
        self.check(p, chip)
        if self.target is not None:
            why = self.target.why_not(chip, p)
            if why:
                raise ProblemError(f"target: {self.target.name} cannot run this: {why}")

    def masks(self, p: Problem, chip: Chip, c: Candidates, rules=None) -> dict[str, np.ndarray]:
        """`feasible` plus the target's rule masks: every generic layer filters candidates through this."""
        own = None if rules is None else [r for r in rules if r in type(self).RULES]
        out = self.feasible(p, chip, c, own) if own != [] else {}
        if self.target is not None:
            out.update(self.target.rule_masks(p, chip, c, rules))
        return out

    def bound(
        self, p: Problem, chip: Chip, c: Candidates, schedules: dict | None = None
    ) -> np.ndarray | None:
        """A lower bound on time_us valid for every value of SCHEDULE_KNOBS, or None (no branch and bound)."""
        return None

    def quick_bound(self, p: Problem, chip: Chip, c: Candidates) -> np.ndarray:
        """A cheaper, looser lower bound than `bound()` (orders the branch and bound); default 0."""
        return np.zeros(_rows(c))

    def prefix_bound(self, p: Problem, chip: Chip, c: Candidates, domains: dict) -> np.ndarray | None:
        """A floor of quick_bound over every completion of first-level rows, or None (no prefix pruning)."""
        return None

    def dominated(self, p: Problem, chip: Chip, c: Candidates, domains: dict | None = None) -> np.ndarray:
        """Rows with an equal-or-better twin whose values are in `domains`; the search drops them."""
        return np.zeros(_rows(c), dtype=bool)

    def dominated_product(
        self, p: Problem, chip: Chip, rows: Candidates, sched: Candidates, domains: dict | None = None
    ) -> np.ndarray:
        """dominated() of every row of `rows` with every row of `sched` (the schedule knobs), flattened rows outer
        (space.product's order). The search scores each tiling with every schedule; a model may compute this
        without building the product (most of its rows are twins)."""
        return self.dominated(
            p, chip, product_rows(rows, sched, np.arange(_rows(rows) * _rows(sched))), domains
        )

    def resolve(self, p: Problem, chip: Chip, c: Candidates, domains: dict[str, tuple]) -> Candidates:
        """Fill the RESOLVED knobs with their provably best feasible value from `domains`."""
        if self.RESOLVED:
            raise TilerError(f"{self.OP}/{self.FAMILY} declares RESOLVED knobs but does not resolve them")
        return c

    def tie_rank(self, p: Problem, chip: Chip, c: Candidates) -> np.ndarray | None:
        """Among exactly tied predictions, which to report first (lower first), or None (plainest first)."""
        return None

    def warm_start(self, p: Problem, chip: Chip) -> dict[str, Any]:
        """A known-good tiling (knob -> value or label) the Bayesian search may try first; {} for none."""
        return {}

    def advice(self, p: Problem, chip: Chip, c: Candidates, est: dict, row: int) -> list[str]:
        """Checklist items (MISSION §4/§5) that apply to candidate `row`, beyond the what-if flips: the
        multi-core facts every operator shares; operators add their own."""
        out = []
        used = int(est["cores_used"][row])
        if used < chip.cores:
            out.append(f"multi-core: only {used} of {chip.cores} cores have work")
        tiles = int(est["tiles"][row]) if "tiles" in est else 0
        if tiles and tiles % chip.cores and tiles > chip.cores:
            out.append(
                f"multi-core: {tiles} tiles on {chip.cores} cores: the last round runs {tiles % chip.cores} "
                f"tiles (balance {float(est['balance'][row]):.2f})"
            )
        hit = float(est["l2_hit_rate"][row])
        out.append(
            f"L2 hit rate {hit:.0%} for this traversal; HBM traffic {float(est['hbm_bytes'][row]) / 1e6:.1f} MB"
        )
        return out

    def views(self, p: Problem, chip: Chip, tiling: dict, row: dict, cand: Candidates) -> dict[str, dict]:
        """Code-generator views of a tiling (decoded, and as the one-row candidate `cand`) and its estimate row,
        keyed by target: the operator's target only, when it has one; else every target that runs on this chip
        and whose rules and domains the tiling satisfies (an export never carries a view its target rejects)."""
        return self.views_of(p, chip, [tiling], [row], cand)[0]

    def views_of(
        self, p: Problem, chip: Chip, tilings: list[dict], rows: list[dict], c: Candidates
    ) -> list[dict[str, dict]]:
        """views() of every row of the candidate table `c` (tilings[i], rows[i]: row i decoded, and its estimate
        row): each target's domains and rules are evaluated once on the whole table, not once per row."""
        chosen = [self.target] if self.target is not None else list(self.TARGETS.values())
        runs = [t for t in chosen if not t.why_not(chip, p)]
        ok = [self.expressed(t, p, chip, c) for t in runs]
        return [
            {
                t.name: t.view(p, chip, tilings[i], rows[i])
                for t, mask in zip(runs, ok, strict=True)
                if mask[i]
            }
            for i in range(len(tilings))
        ]

    def expresses(self, t: Target, p: Problem, chip: Chip, cand: Candidates) -> bool:
        """Whether the one-row candidate is in target `t`'s domains and passes the operator's and the target's
        rules: the tiling runs as exported by that code generator."""
        return bool(self.expressed(t, p, chip, cand)[0])

    def expressed(self, t: Target, p: Problem, chip: Chip, c: Candidates) -> np.ndarray:
        """expresses() of each row of `c`, as one boolean array (the rules are element-wise over rows); the rules
        are not evaluated when no row is in the target's domains."""
        ok = np.ones(_rows(c), dtype=bool)
        for knob, values in t.domains.items():
            if knob in c:
                # one comparison per allowed code (a domain has a few): np.isin's set-up costs more on short columns
                col = np.asarray(c[knob])
                ok &= np.logical_or.reduce([col == v for v in _codes(self, knob, values)])
        if not ok.any():
            return ok
        for m in {**self.feasible(p, chip, c), **t.rule_masks(p, chip, c)}.values():
            ok &= np.asarray(m, dtype=bool)  # an array or a scalar: &= broadcasts it (no broadcast_to view)
        return ok

    def derived(self, p: Problem, tiling: dict, row: dict) -> dict[str, Any]:
        """Values derived from the tiling that an exported `tiling` carries beside the knobs."""
        return {}

    def launch(self, p: Problem, tiling: dict, row: dict) -> dict[str, Any]:
        """The launch section of an export: blocks, waves, tiles and the schedule knobs' values."""
        return {
            "block_dim": int(row["cores_used"]),
            "waves": int(row["waves"]),
            "tiles": int(row.get("tiles", 0)),
            "schedule": ", ".join(f"{k}={tiling[k]}" for k in self.SCHEDULE_KNOBS if k in tiling),
        }

    def runner(self, name: str) -> Callable[[dict], float]:
        """A measurement callable(tiling document) -> microseconds for `--measure NAME` (NAME in RUNNERS)."""
        raise TilerError(f"runner: {self.OP} on the {self.FAMILY} family has no runner {name!r}")

    def vendor(self, name: str) -> Callable[[dict], dict]:
        """For `--measure NAME --vendor`: a callable(tiling document) -> {"name", "us"} that times the vendor
        library's call for the document's problem on the runner's machine, the way the runner times a tiling."""
        raise TilerError(
            f"vendor: {self.OP} on the {self.FAMILY} family has no vendor call beside runner {name!r}"
        )

    # --- calibration (only operators with FITTABLE constants implement these)

    def constants(self, chip: Chip) -> dict[str, float]:
        """The model's constants: CONSTANTS overridden by the profile's [efficiency] values (each positive)."""
        out = {k: float(chip.get(k, v)) for k, v in self.CONSTANTS.items()}
        for k, v in out.items():
            if not v > 0:
                raise ConfigError(f"{chip.path or chip.id}: [efficiency] {k}: must be positive, got {v!r}")
        return out

    def prepare(self, p: Problem, chip: Chip, c: Candidates) -> dict[str, np.ndarray]:
        """Everything the timing needs that the fitted constants do not change, as columns."""
        raise TilerError(f"calibrate: {self.OP}/{self.FAMILY} has no fittable constants")

    def timing(self, prepared: dict, chip: Chip, constants: dict[str, float]) -> dict[str, np.ndarray]:
        """The estimate record from prepared columns (of any number of problems) and the constants."""
        raise TilerError(f"calibrate: {self.OP}/{self.FAMILY} has no fittable constants")

    def choices(self, chip: Chip, data, constants: dict[str, float]) -> list:
        """Discrete profile values calibration chooses from measurements rather than fits (matmul on CUDA: the
        launch order reported for exact ties). `data` is calibrate.Measured (per shape: problem, candidates;
        per row: prepared columns, measured seconds). Each choice has `key`, `value` and a one-line `str()`."""
        return []


def _rows(c: Candidates) -> int:
    return len(next(iter(c.values()))) if c else 0


def _codes(op: Operator, knob: str, values: tuple) -> set[int]:
    """A target domain's values as knob codes (labels looked up in the shipped space)."""
    kn = _builtin_space(op.OP, op.FAMILY).knobs[knob]
    return {kn.codes[kn.labels.index(v)] if isinstance(v, str) else int(v) for v in values}


@lru_cache(maxsize=16)
def _builtin_space(op: str, family: str):
    from .space import load_space

    return load_space(op, family, builtin=True)


# ------------------------------------------------------------------ registry

_REGISTRY: dict[tuple[str, str], type[Operator]] = {}
# the entry-point group through which installed packages add operators (docs/operators.md)
ENTRY_POINT_GROUP = "tiler.operators"
_log = logging.getLogger("tiler.operator")
_plugins_loaded = False


def register(cls: type[Operator]) -> type[Operator]:
    """Class decorator: add an operator to the registry after checking its knobs against its shipped space (its
    SPACE_FILE, else search_spaces/<op>.toml). An operator with a SPACE_FILE may add an op, or a family to an op,
    but never replace a registered (op, family), and shares the op's problem class."""
    from .space import add_space_file, load_space, shipped_space_file

    if not cls.OP or not cls.FAMILY:
        raise ConfigError(f"{cls.__name__}: an operator needs OP and FAMILY")
    key = (cls.OP, cls.FAMILY)
    own = cls.SPACE_FILE is not None
    if own:
        _check_plugin(cls)
    before = add_space_file(*key, _space_path(cls)) if own else None
    try:
        source = str(shipped_space_file(*key)) if own else f"search_spaces/{cls.OP}.toml"
        _check_knobs(cls, load_space(cls.OP, cls.FAMILY, builtin=True), source)
    except TilerError:
        if own:  # a failed registration leaves the space layer as it found it
            add_space_file(*key, before)
        raise
    _REGISTRY[key] = cls
    return cls


def _check_knobs(cls: type[Operator], space, source: str) -> None:
    """The class's knobs are the space's; its rules and targets read only its knobs."""
    if set(space.names) != set(cls.KNOBS):
        extra = sorted(set(cls.KNOBS) - set(space.names))
        missing = sorted(set(space.names) - set(cls.KNOBS))
        raise ConfigError(
            f"{cls.__name__}: knobs differ from {source} [{cls.FAMILY}]: "
            f"not in the space {extra}, not in the operator {missing}"
        )
    for rule, knobs in cls.RULES.items():
        unknown = [k for k in knobs if k not in cls.KNOBS]
        if unknown:
            raise ConfigError(f"{cls.__name__}: rule {rule!r} reads unknown knob(s) {unknown}")
    for name, t in cls.TARGETS.items():
        if name != t.name or name == ANY:
            raise ConfigError(
                f"{cls.__name__}: target {name!r} is registered under another name or as {ANY!r}"
            )
        for knob in [*t.domains, *(k for ks in t.rules.values() for k in ks)]:
            if knob not in cls.KNOBS:
                raise ConfigError(f"{cls.__name__}: target {name!r} reads unknown knob {knob!r}")
        clash = set(t.rules) & set(cls.RULES)
        if clash:
            raise ConfigError(
                f"{cls.__name__}: target {name!r} rule names clash with the operator's: {clash}"
            )


def _space_path(cls: type[Operator]) -> Path:
    """An operator's SPACE_FILE as a path: absolute, or relative to the folder of the module of the class that
    sets it (a subclass elsewhere keeps its parent's file)."""
    path = Path(str(cls.SPACE_FILE))
    owner = next(k for k in cls.__mro__ if "SPACE_FILE" in vars(k))
    module = sys.modules.get(owner.__module__)
    if not path.is_absolute() and getattr(module, "__file__", None):
        path = Path(module.__file__).resolve().parent / path
    if not path.is_file():
        raise ConfigError(f"{cls.__name__}: SPACE_FILE {path} is not a file")
    return path


def _check_plugin(cls: type[Operator]) -> None:
    """An operator that ships its own space may not take a registered (op, family) from another class, and must
    use the problem class the op's other families use (one problem per op: --shape, CSV rows, libraries)."""
    _load_ops()
    held = _REGISTRY.get((cls.OP, cls.FAMILY))
    if held is not None and _qualname(held) != _qualname(cls):
        raise ConfigError(
            f"{cls.__name__}: {cls.OP}/{cls.FAMILY} is already registered by {_qualname(held)}; "
            "an operator may add an op or a family, not replace one"
        )
    for (op, family), other in _REGISTRY.items():
        if op == cls.OP and family != cls.FAMILY and other.PROBLEM is not cls.PROBLEM:
            raise ConfigError(
                f"{cls.__name__}: PROBLEM must be {other.PROBLEM.__name__}, the problem of {op}/{family}"
            )


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _load_ops() -> None:
    # importing the package registers the built-in operators; by name, as the plug-ins are: the operators sit
    # above this contract and import it (a static import here would be an upward one)
    importlib.import_module("tiler.ops")


def _load_builtin() -> None:
    """The built-in operators, then (once per process) those of installed packages (`load_plugins`)."""
    global _plugins_loaded
    _load_ops()
    if not _plugins_loaded:
        _plugins_loaded = True
        load_plugins()


def load_plugins(group: str = ENTRY_POINT_GROUP) -> list[str]:
    """Load the operators installed packages declare in the entry-point `group` (each entry point names a module
    whose import registers its operators, or an Operator class to register); returns the names that loaded. A
    plugin that fails (an import error, a bad space, a clash) is one warning line naming it: tiler keeps working
    with the others."""
    loaded = []
    for ep in entry_points(group=group):
        try:
            obj = ep.load()
            if isinstance(obj, type) and issubclass(obj, Operator):
                if _REGISTRY.get((obj.OP, obj.FAMILY)) is not obj:
                    register(obj)
        except Exception as exc:  # a broken plugin is the plugin's bug, not tiler's: name it and go on
            why = (str(exc).strip().splitlines() or [""])[0]
            _log.warning(
                "tiler: operator plugin %r (%s) is skipped: %s: %s",
                ep.name,
                ep.value,
                type(exc).__name__,
                why,
            )
            continue
        loaded.append(ep.name)
    return loaded


_IF_ELSE = re.compile(r"^\s*(\S+)\s+if\s+(\S+)\s+else\s+(\S+)\s*$")


def absent_defaults(model, present) -> dict[str, str]:
    """knob -> the value a kernel without that knob runs with, for the knobs of the operator's ABSENT_DEFAULTS not in
    `present` (the knobs a table or a user's kernel gives, by the space's names). A default written "A if KNOB else
    B" is A when `present` holds KNOB, else B (a launch order that follows from whether the kernel has a group
    size). Knobs with no declared default are not in the answer: they have none."""
    present = set(present)
    out = {}
    for knob, value in model.ABSENT_DEFAULTS.items():
        if knob in present:
            continue
        m = _IF_ELSE.match(str(value))
        out[knob] = (m.group(1) if m.group(2) in present else m.group(3)) if m else str(value).strip()
    return out


def get_operator(op: str, family: str, target: str = ANY) -> Operator:
    """The operator for (op, family), restricted to `target` (tiler.target); an unknown pair names the known
    ones, an unknown target the operator's targets."""
    _load_builtin()
    key = (op, family)
    if key not in _REGISTRY:
        have = sorted(f"{o}/{f}" for o, f in _REGISTRY)
        if op not in {o for o, _ in _REGISTRY}:
            raise ProblemError(f"op: unknown operator {op!r}; {closest(op, {o for o, _ in _REGISTRY})}")
        raise SpaceError(f"op: no {op!r} model for the {family!r} family; known: {', '.join(have)}")
    return _REGISTRY[key](target)


def known_ops() -> list[tuple[str, str]]:
    """Every registered (op, family), sorted."""
    _load_builtin()
    return sorted(_REGISTRY)


def problem_class(op: str) -> type[Problem]:
    """The problem class of an operator (the same for every family)."""
    _load_builtin()
    for (o, _), cls in sorted(_REGISTRY.items()):
        if o == op:
            return cls.PROBLEM
    raise ProblemError(f"op: unknown operator {op!r}; {closest(op, {o for o, _ in _REGISTRY})}")


def check_constants(chip: Chip) -> Chip:
    """Raise ConfigError when a constant an operator of the chip's family reads is out of its range; else return
    the chip. tiler.hardware validates a profile without the operators (it sits below them): the use cases run
    this right after loading a chip (tiler.api's chip set-up, tiler check, tiler report, sweeps)."""
    for (_, family), cls in sorted(_registry().items()):
        if family == chip.family and cls.CONSTANTS:
            cls().constants(chip)
    return chip


def _registry() -> dict[tuple[str, str], type[Operator]]:
    _load_builtin()
    return _REGISTRY


def tie_preference(operator: Operator, p: Problem, chip: Chip, c: Candidates) -> np.ndarray | None:
    """The operator's `tie_rank` of `c` (None when there are no candidates)."""
    return operator.tie_rank(p, chip, c) if _rows(c) else None


__all__ = [
    "Candidates",
    "Operator",
    "get_operator",
    "known_ops",
    "load_plugins",
    "problem_class",
    "register",
    "tie_preference",
]


def _target_domains(op: str, family: str, target: str) -> dict | None:
    """What Space.for_target reads (through tiler.registry): the target's knob domains, None without a target."""
    t = get_operator(op, family, target).target
    return None if t is None else t.domains


registry.install(problem_class=problem_class, target_domains=_target_domains)
