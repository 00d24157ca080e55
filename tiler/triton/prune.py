"""The `prune_configs_by` of `@triton.autotune`: the model keeps its top k of the configs for the launch's shape."""

from __future__ import annotations

import numbers
import warnings
from dataclasses import replace

from ..errors import TilerError
from .load import _implicit, load_user_space
from .ranking import _as_dict, _launch_params, _order, _ranked_configs
from .user_space import FAMILY, LAUNCH, UserSpace

# ---------------------------------------------------------------------------------------------------- pruner

# Configs whose predicted times differ by less than this share the model cannot tell apart: its median
# |log(predicted / measured)| on the H200 GEMMs held out of every fit is 0.104 (python -m bench.fidelity, held-out
# shapes). Among such configs the pruner keeps one that Triton has already compiled for the launch's
# specialisation (it costs no compile), never in place of the model's best.
COMPILE_TOLERANCE = 0.10


def pruner(op: str, chip, space=None, top_k: int = 4, diverse: bool = True, dtype: str | None = None) -> dict:
    """The dict for `@triton.autotune(configs=..., key=[...], prune_configs_by=pruner(op, chip, space=...))`.

    - `early_config_prune(configs, named_args, **kwargs)`: the problem from the launch's arguments (named_args and
      kwargs, through the space's `shape` map; the dtype given, else the space's, else the first tensor's), the
      configs ranked by the model (rank_configs), and the `top_k` best kept (diverse: the best of each distinct tile
      shape first, as tiler.search.result.diverse_order orders them; else plain). The kept configs are the objects
      given. Computed once per distinct problem and config list (autotune calls it once per key). Past the model's
      best, a config the pruner kept before for a launch of the same specialisation (`specialisation`: Triton
      compiled it then) counts COMPILE_TOLERANCE faster than predicted: within the model's error it is kept before
      one Triton would have to compile, which shortens the autotune by that compile.
    - `perf_model(**kwargs)`: the model's predicted time of one config in milliseconds (what do_bench reports);
      infeasible: inf; 0.0 for a launch the model cannot price (then Triton keeps its first top_k, in order). Triton calls it, with `top_k`, after early_config_prune: the early prune has already kept
      top_k, so it changes nothing here, but a user may pass only perf_model and top_k.
    - `top_k`.

    Triton's contract (python/triton/runtime/autotuner.py, Autotuner.prune_configs): Triton 3.0 and later call
    `early_config_prune(configs, named_args, **kwargs)` (named_args: the positional arguments by name; kwargs: the
    call's keyword arguments; triton-lang/triton#3601); 2.x call `early_config_prune(configs, named_args)`, so
    shape arguments passed by keyword are not seen there (pass them positionally). `perf_model` gets the named
    args, the call's kwargs and the config's meta-parameters and launch options (2.x: num_warps, num_stages,
    num_ctas; 3.x: Config.all_kwargs(), which adds maxnreg and others): only the space's params are read.
    The result must hold at least one config (3.x raises otherwise). When the model cannot price a launch (a
    shape or dtype it refuses) or finds no config feasible, every config is kept, with a warning: the autotune
    then measures them all, as it would without the pruner.

    space: a UserSpace, a TOML path or a dict (None: the configs' names read as knobs, aliases or launch options,
    with the built-in defaults). A mistake in the space or the configs (an unknown param) raises TilerError.
    """
    from ..api import _chip

    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise TilerError(f"top_k: must be an integer >= 1, got {top_k!r}")
    chip = _chip(chip)
    if chip.family != FAMILY:
        raise TilerError(
            f"chip: {chip.id} is of the {chip.family} family; Triton kernels run on a {FAMILY} chip"
        )
    us0 = load_user_space(space) if space is not None else None
    if us0 is not None and us0.op != op:
        raise TilerError(f"op: the space is for {us0.op}, got {op!r}")
    readable = _knob_names(op) | set(LAUNCH)  # the call's names the model reads when no space is given
    cache: dict = {}
    times: dict = {}
    spaces: dict = {}
    compiled: dict = {}  # specialisation -> the configs kept for it so far (Triton compiled them)

    def early_config_prune(configs, named_args, **kwargs):
        configs = list(configs)
        if len(configs) <= top_k:
            return configs
        args = {**named_args, **kwargs}
        fill = {p: args[p] for p in (us0.params if us0 is not None else ()) if p in args}
        dicts = [_as_dict(c, fill) for c in configs]
        us = _space_for(spaces, us0, op, dicts)
        problem = _problem_for(us, args, dtype, chip)
        if problem is None:
            return configs
        names = [tuple(sorted((k, repr(v)) for k, v in d.items())) for d in dicts]
        key = (problem.key(), tuple(names))
        if key not in cache:
            ranked = _ranked_configs(problem, chip, us, configs, dicts)
            done = compiled.setdefault(specialisation(args), set())
            keep = _keep(us, ranked, diverse, top_k, [n in done for n in names])
            done.update(names[i] for i in keep)
            if not keep:
                warnings.warn(
                    f"tiler.triton: no config is feasible for {problem.label()} on {chip.id} by the model; "
                    "none pruned",
                    stacklevel=2,
                )
            cache[key] = keep
        keep = cache[key]
        return [configs[i] for i in keep] if keep else configs

    def perf_model(**kwargs):
        if us0 is None:  # no space: the names the model reads
            d = {n: v for n, v in kwargs.items() if n in readable}
        else:
            d = {p: kwargs[p] for p in us0.params if p in kwargs}
            d.update({o: kwargs[o] for o in LAUNCH if o in kwargs})
        us = _space_for(spaces, us0, op, [d])
        problem = _problem_for(us, kwargs, dtype, chip)
        if problem is None:
            return 0.0
        key = (problem.key(), tuple(sorted((k, repr(v)) for k, v in d.items())))
        if key not in times:
            (r,) = _ranked_configs(problem, chip, us, [d], [d])
            times[key] = r.predicted_us / 1000.0
        return times[key]

    early_config_prune.cache = cache
    perf_model.cache = times
    return {"early_config_prune": early_config_prune, "perf_model": perf_model, "top_k": top_k}


def _keep(us: UserSpace, ranked: list, diverse: bool, top_k: int, is_compiled: list[bool]) -> list[int]:
    """Indices of the configs to keep: the model's best, then the order (plain or diverse) with the configs already
    compiled counted COMPILE_TOLERANCE faster than predicted."""
    good = [r for r in ranked if r.feasible]
    if not good:
        return []
    best = min(good, key=lambda r: r.predicted_us)
    scaled = sorted(
        (
            replace(r, predicted_us=r.predicted_us * (1.0 - COMPILE_TOLERANCE)) if is_compiled[r.index] else r
            for r in good
        ),
        key=lambda r: r.predicted_us,
    )
    rest = [r.index for r in _order(us, scaled, diverse) if r.index != best.index]
    return [best.index, *rest[: top_k - 1]]


def specialisation(args: dict) -> tuple:
    """What makes Triton compile a kernel again for a config it has compiled: per argument of the launch, an
    integer's divisibility by 16 and whether it is 1 (Triton's integer specialisation), a tensor's dtype and
    16-byte alignment, any other value itself (constexprs such as a head size or a mask flag; a float's value,
    which Triton does not specialise on, only splits the record finer) but functions (Triton passes the launch's
    grid among the keyword arguments). Launches with equal keys reuse each other's compiled configs."""
    out = []
    for name in sorted(args):
        v = args[name]
        if isinstance(v, numbers.Integral) and not isinstance(v, bool):
            out.append((name, int(v) % 16 == 0, int(v) == 1))
        elif getattr(v, "dtype", None) is not None:  # a tensor
            ptr = getattr(v, "data_ptr", None)
            out.append((name, str(v.dtype), ptr() % 16 == 0 if callable(ptr) else None))
        elif not callable(v):  # a launch's grid function is not the kernel's: a new object every call
            out.append((name, repr(v)))
    return tuple(out)


def _space_for(spaces: dict, us0: UserSpace | None, op: str, dicts) -> UserSpace:
    """The user space of configs with these names (the given space, else one read from the names), kept in
    `spaces` by the names."""
    names = tuple(sorted({k for d in dicts for k in d}))
    if names not in spaces:
        base = us0 if us0 is not None else _implicit(op, names)
        spaces[names] = _launch_params(base, dicts)
    return spaces[names]


def _problem_for(us: UserSpace, args: dict, dtype, chip):
    """The problem of a launch's arguments, or None with a warning when the model cannot price it (a mistake in
    the space itself raises)."""
    try:
        problem = us.problem_of(args, dtype)
        us.operator.admit(problem, chip)
        return problem
    except TilerError as exc:
        if str(exc).startswith("space:"):
            raise
        warnings.warn(
            f"tiler.triton: the model cannot price this launch ({exc}); no config pruned", stacklevel=3
        )
        return None


def _knob_names(op: str) -> set[str]:
    from ..space import load_space

    space = load_space(op, FAMILY)
    return set(space.names) | {a for kn in space.knobs.values() for a in kn.aliases}
