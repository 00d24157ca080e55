"""The multi-core schedule: traversal order of output tiles, tile-to-core assignment, L2 reuse between rounds.

Shared by every family: Ascend assigns task i to core i mod cores (AscendC block index); a GPU grid assigns
program i to whichever SM frees first, which for equal tiles is the same round-robin by waves. The functions here
work on one tile grid at a time, vectorised over its tiles and over the traversal settings asked for, and cache
their results per (grid, setting): the operator models group their candidates by schedule, and a search or a sweep
simulates each distinct schedule once. Grids above WALK_TILES are counted in closed form (walk_counts), not
walked, and the L2 walk is bounded (SIM_TILES, SIM_MAX): no table grows with the tile count.

Modules: `work` (walks and the work each core gets), `l2` (L2 hit rates along a walk), `tables` (the models'
packed-code tables over these results, and clear_caches).
"""

from __future__ import annotations

from .l2 import (
    ROUND_RATIO,
    SIM_MAX,
    SIM_TILES,
    first_touch_only,
    front_rows,
    panel_hits,
    panel_hits_many,
    round_hit_front,
    rounds_overflow,
    serial_hit_ceiling,
)
from .tables import (
    CodeTable,
    GrowingRows,
    PairTable,
    clear_caches,
    on_clear,
    pack_codes,
    unpack_codes,
)
from .work import (
    SUB_TYPES,
    TILE_TYPES,
    WALK_TILES,
    WORK_COLUMNS,
    CoreWork,
    b_reuse_ceiling,
    block_grid,
    block_work,
    column_major_counts,
    core_work,
    core_work_many,
    max_b_reuse,
    point_types,
    same_walk,
    serial_b_reuse,
    traversal,
    walk_counts,
    walk_counts_many,
    walk_points,
    walk_settings,
    walks,
)

__all__ = [
    "CodeTable",
    "CoreWork",
    "GrowingRows",
    "PairTable",
    "ROUND_RATIO",
    "SIM_MAX",
    "SIM_TILES",
    "SUB_TYPES",
    "TILE_TYPES",
    "WALK_TILES",
    "WORK_COLUMNS",
    "block_grid",
    "block_work",
    "clear_caches",
    "column_major_counts",
    "core_work",
    "core_work_many",
    "first_touch_only",
    "front_rows",
    "b_reuse_ceiling",
    "max_b_reuse",
    "on_clear",
    "pack_codes",
    "panel_hits",
    "panel_hits_many",
    "point_types",
    "round_hit_front",
    "rounds_overflow",
    "same_walk",
    "serial_b_reuse",
    "serial_hit_ceiling",
    "traversal",
    "unpack_codes",
    "walk_counts",
    "walk_counts_many",
    "walk_points",
    "walk_settings",
    "walks",
]
