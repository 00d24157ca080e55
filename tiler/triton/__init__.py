"""The model inside a user's own Triton kernel: its tuning space, a `prune_configs_by` for `@triton.autotune`, and
the model's best configs in the user's names (docs/triton.md).

A Triton kernel author has a kernel of their own (the tutorial's GEMM: meta-parameters `BLOCK_SIZE_M`,
`BLOCK_SIZE_N`, `BLOCK_SIZE_K`, `GROUP_SIZE_M`, launch options `num_warps`, `num_stages`) and a list of configs to
try. This module lets the cost model work on that kernel without the project's kernel names:

- a **user space** in Kernel Tuner's spirit (`load_user_space`: a TOML file or a dict): the kernel's parameters
  and their values, restrictions as Python expressions over them, a key map (the user's names -> the model's
  knobs; a knob's own name or its alias needs no entry), defaults for the knobs the kernel does not have, and which
  autotune key argument is which problem field;
- `rank_configs`: the model's predicted time of each of the user's configs (dicts or `triton.Config`s) for one
  problem, through tiler.rank.rank_candidates (the same validation, capacity rules and estimate as `tiler rank`);
- `best_configs` / `config_dicts`: the model's best k configs, in the user's names when a space is given;
- `pruner`: the dict for `@triton.autotune(configs, key, prune_configs_by=pruner(...))`, which keeps the model's
  top k of the configs for the launch's shape (read from the autotune key arguments), diverse over tile shapes;
- `search_space`: `tiler search --space FILE` (and `tiler.search(..., space=...)`): every config of the space
  ranked for one problem.

The module imports neither triton nor optuna: triton is imported only where a `triton.Config` is built
(`best_configs`). The knobs, their aliases, the defaults of a missing knob (`Operator.ABSENT_DEFAULTS`) and the
tile-shape knobs of the diverse order are the operator's; nothing here names one.
"""

from __future__ import annotations

from .configs import (
    EXAMPLES,
    TARGET,
    UserResult,
    best_configs,
    config_dicts,
    config_text,
    emit_configs,
    search_space,
)
from .load import load_user_space
from .prune import pruner
from .ranking import RankedConfig, rank_configs
from .restrictions import RESTRICTION_CHARS, RESTRICTIONS_MAX, restriction_mask
from .user_space import CONFIGS_MAX, DTYPE_NAMES, FAMILY, LAUNCH, SPACE_KEYS, UserSpace

# the public names as they were when this was one module (`tiler.triton.X`)
__all__ = [
    "CONFIGS_MAX",
    "DTYPE_NAMES",
    "EXAMPLES",
    "FAMILY",
    "LAUNCH",
    "RESTRICTIONS_MAX",
    "RESTRICTION_CHARS",
    "RankedConfig",
    "SPACE_KEYS",
    "TARGET",
    "UserResult",
    "UserSpace",
    "best_configs",
    "config_dicts",
    "config_text",
    "emit_configs",
    "load_user_space",
    "pruner",
    "rank_configs",
    "restriction_mask",
    "search_space",
]
